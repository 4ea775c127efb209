"""show_gids parser: the four real captures of realdata/show_gids (fixtures/show_gids), the facts read off each by
eye, malformed rows rejected naming the line, detect, fuzzing."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, show_gids
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"
ROOT = FIX.parents[1]
REALDATA = Path("/work/shared/realdata")


def parse(name: str):
    return show_gids.parse((FIX / "show_gids" / name).read_bytes().decode("utf-8"))


def rows(result):
    return [(g.ca, g.port, g.index, g.ipv4, g.version, g.netdev, g.family) for g in result.gids]


def test_four_ports_two_without_ipv4_only_link_local():
    r = parse("cx4lx_4ports_eth01-04_one_down_no_ipv4_12gids.txt")
    assert (len(r.gids), r.n_gids_found, r.warnings) == (12, 12, ())
    by_port = {}
    for ca, _port, index, ipv4, version, netdev, family in rows(r):
        by_port.setdefault((ca, netdev), []).append((index, version, family, ipv4))
    assert by_port[("mlx5_0", "eth01")][2:] == [(2, "v1", "ipv4", "10.108.164.36"), (3, "v2", "ipv4", "10.108.164.36")]
    assert by_port[("mlx5_2", "eth03")][3] == (3, "v2", "ipv4", "192.20.28.1")
    # eth02 (down) and eth04 (no IPv4): only the two link-local GIDs
    for key in (("mlx5_1", "eth02"), ("mlx5_3", "eth04")):
        assert by_port[key] == [(0, "v1", "link_local", None), (1, "v2", "link_local", None)]


@pytest.mark.parametrize("name,ca,netdev,ipv4", [
    ("nsdi23_husky_rdma_isolation_mlx5_0_rdma0.txt", "mlx5_0", "rdma0", "192.168.211.242"),
    ("ocp_pod_sriov_vf_mlx5_3_net1_roce_v1_v2.txt", "mlx5_3", "net1", "192.168.10.2"),
    ("roce_lag_mlx5_bond_0_bond0_4gids.txt", "mlx5_bond_0", "bond0", "10.96.83.26"),
])
def test_one_port_four_gids_v2_ipv4_at_index_3(name, ca, netdev, ipv4):
    r = parse(name)
    assert rows(r) == [(ca, 1, 0, None, "v1", netdev, "link_local"), (ca, 1, 1, None, "v2", netdev, "link_local"),
                       (ca, 1, 2, ipv4, "v1", netdev, "ipv4"), (ca, 1, 3, ipv4, "v2", netdev, "ipv4")]
    assert (r.n_gids_found, r.warnings) == (4, ())


def test_spaces_instead_of_tabs_ib_port_without_netdev_and_trailer_mismatch():
    text = ("$ show_gids\nDEV PORT INDEX GID IPv4 VER DEV\n"
            "mlx5_0 1 0 fe80:0000:0000:0000:946d:ae03:00cd:e72c v1\n"
            "mlx5_1 1 3 0000:0000:0000:0000:0000:ffff:0a00:0101 10.0.1.1 v2 ens1f0\nn_gids_found=3\n")
    r = show_gids.parse(text)
    assert rows(r) == [("mlx5_0", 1, 0, None, "v1", None, "link_local"),
                       ("mlx5_1", 1, 3, "10.0.1.1", "v2", "ens1f0", "ipv4")]
    assert r.warnings == ("line 1: skipped command line '$ show_gids'",
                          "n_gids_found=3 but 2 GID rows were read: the text may be cut")


@pytest.mark.parametrize("text,line_no,reason", [
    ("", 0, "empty"),
    ("mlx5_0\tx\t0\tfe80:0000:0000:0000:0e42:a1ff:fe40:29a0\t\t\tv1\teth0\n", 1, "must be numbers"),
    ("mlx5_0\t1\t0\tfe80::1\t\t\tv1\teth0\n", 1, "is not a GID"),
    ("mlx5_0\t1\t0\tfe80:0000:0000:0000:0e42:a1ff:fe40:29a0\t\t\tv3\teth0\n", 1, "v1 or v2"),
    ("DEV\tPORT\tINDEX\tGID\nhello\n", 2, "expected 'DEV PORT INDEX GID"),
    ("DEV\tPORT\tINDEX\tGID\n", 0, "no GID row"),
])
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        show_gids.parse(text)
    assert (info.value.kind, info.value.line_no) == ("show_gids", line_no)
    assert reason in info.value.reason


def test_fixtures_are_the_real_captures_byte_for_byte():
    listed = list(csv.reader((FIX / "SOURCES.show_gids.tsv").open(), delimiter="\t"))
    assert {Path(r[0]).name for r in listed} == {p.name for p in (FIX / "show_gids").glob("*.txt")}
    for fixture, source, _ in listed:
        assert (ROOT / fixture).read_bytes() == (REALDATA.parent / source).read_bytes(), fixture


def test_detect():
    for path in sorted((FIX / "show_gids").glob("*.txt")):
        assert show_gids.detect(path.read_text()) == 100 and detect_kind(path.read_text()) == "show_gids"
    for kind in ("ibstat", "ibv_devinfo", "ibdev2netdev", "sysfs_ib", "nvidia_smi_topo"):
        for path in sorted((FIX / kind).glob("*.txt")):
            assert show_gids.detect(path.read_text(errors="replace")) == 0, path


test_fuzz_any_text, test_fuzz_mutated_real_lines = safety_tests(
    show_gids.parse, "show_gids", mutated_lines(fixture_lines("show_gids"), max_size=20), detect=show_gids.detect)
