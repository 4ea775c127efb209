"""ibdev2netdev parser: real captures (short form), the -v form, errors, detection and fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, ibdev2netdev
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ibdev2netdev"


def entries(name: str) -> dict:
    return {(e.ca, e.port): e for e in ibdev2netdev.parse((FIX / name).read_text()).entries}


def test_azure_persistent_names_ipoib_down_until_brought_up():
    down = entries("azure_persistent_naming_h100_mlx5_an0_ib0-7_down.txt")
    up = entries("azure_persistent_naming_h100_mlx5_an0_ib0-7_up.txt")
    assert (down["mlx5_an0", 1].netdev, down["mlx5_an0", 1].netdev_state) == ("eth1", "Up")
    assert {down[f"mlx5_ib{i}", 1].netdev_state for i in range(8)} == {"Down"}
    assert {up[f"mlx5_ib{i}", 1].netdev_state for i in range(8)} == {"Up"}
    assert up["mlx5_ib3", 1].netdev == "ib3" and len(up) == 9


def test_mixed_ib_and_ethernet_and_named_by_pci_path():
    e = entries("centos_cx6_ib_ipoib_plus_cx4lx_eth_4ports.txt")
    assert [e[f"mlx5_{i}", 1].netdev for i in range(4)] == ["enp1s0f0", "enp1s0f1", "ibp129s0", "enp193s0"]


def test_down_ports_of_two_captures():
    assert [k[0] for k, v in entries("cx4lx_2x_dualport_eth01-04_one_down.txt").items()
            if v.netdev_state == "Down"] == ["mlx5_1"]
    dgx2 = entries("nvidia_gds_doc_dgx2_nfs_client_cx5_ib0-9_two_down.txt")
    assert [k[0] for k, v in dgx2.items() if v.netdev_state == "Down"] == ["mlx5_4", "mlx5_5"]
    assert all(v.bdf is None and v.port_state is None for v in dgx2.values())


def test_verbose_form():
    e = entries("synthetic_verbose_cx7_ib_cx6dx_eth.txt")
    cx7 = e["mlx5_0", 1]
    assert (cx7.bdf, cx7.device_id, cx7.part_number, cx7.firmware_version, cx7.port_state, cx7.netdev) == (
        "0000:0c:00.0", "MT4129", "MCX75310AAS-NEAT", "28.39.1002", "Active", "ibp12s0")
    assert (e["mlx5_1", 1].port_state, e["mlx5_1", 1].netdev_state) == ("Down", "Down")
    assert e["mlx5_2", 1].description == "ConnectX-6 Dx EN adapter card"


@pytest.mark.parametrize("text,line_no,reason", [
    ("", 0, "empty"),
    ("$ ibdev2netdev\n", 1, "only a command line"),
    ("mlx5_0 port 1 ==> ib0 (Up)\nmlx5_1 port one ==> ib1 (Up)\n", 2, "expected '<ca> port <n>"),
    ("mlx5_0 port 1 ==> ib0 (Sideways)\n", 1, "not Up, Down or NA"),
])
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        ibdev2netdev.parse(text)
    assert (info.value.kind, info.value.line_no) == ("ibdev2netdev", line_no) and reason in info.value.reason


def test_prompt_line_and_second_netdev_are_warnings():
    r = ibdev2netdev.parse("[root@n1 ~]# ibdev2netdev\nmlx5_0 port 1 ==> ib0 (Up)\nmlx5_0 port 1 ==> ib0.8001 (Up)\n")
    assert len(r.entries) == 2 and "skipped command line" in r.warnings[0] and "second netdev" in r.warnings[1]


def test_detect_picks_ibdev2netdev():
    for path in sorted(FIX.glob("*.txt")):
        assert detect_kind(path.read_text()) == "ibdev2netdev", path.name


test_fuzz_any_text_parses_or_raises_parse_error, test_fuzz_mutated_real_lines = safety_tests(
    ibdev2netdev.parse, "ibdev2netdev", mutated_lines(fixture_lines("ibdev2netdev")), detect=ibdev2netdev.detect,
    max_examples=100)
