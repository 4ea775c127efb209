"""ibstatus parser: real captures (fixtures/ibstatus), same records as ibstat, errors, detect, fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, ibstat, ibstatus
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def load(name: str, kind: str = "ibstatus") -> str:
    return (FIX / kind / name).read_bytes().decode("utf-8")


def test_roce_100g_node_keeps_width_and_generation():
    r = ibstatus.parse(load("ibstatus_deepep_8xa100_roce_100g.txt"))
    assert r.source == "ibstatus"
    assert [c.name for c in r.cas] == [f"mlx5_{i}" for i in range(8)]
    for c in r.cas:
        (p,) = c.ports
        assert (p.state, p.state_raw, p.phys_state, p.phys_state_raw) == ("Active", "4: ACTIVE", "LinkUp", "5: LinkUp")
        assert (p.rate_gbps, p.width, p.speed_name, p.rate_raw) == (100, "4X", "EDR", "100 Gb/sec (4X EDR)")
        assert (p.link_layer, p.base_lid, p.sm_lid) == ("Ethernet", 0, 0)
    first = r.cas[0].ports[0]
    assert first.default_gid == "fe80:0000:0000:0000:1270:fdff:fe5d:dcd8"
    assert first.port_guid == "0x1270fdfffe5ddcd8"
    assert r.warnings == ()


def test_azure_hdr_agrees_with_ibstat_of_the_same_host():
    r = ibstatus.parse(load("ibstatus_gpud_azure_nd_a100_v4_8x_hdr.txt"))
    by = {c.name: c.ports[0] for c in r.cas}
    assert by["mlx5_0"].base_lid == 0x33BF == 13247 and by["mlx5_0"].sm_lid == 1
    assert (by["mlx5_0"].rate_gbps, by["mlx5_0"].width, by["mlx5_0"].speed_name) == (200, "4X", "HDR")
    # The same VM's ibstat (which died on mlx5_8 with ibpanic) reports the same LIDs and port GUIDs.
    other = ibstat.parse(load("gpud_azure_nd_a100_v4_8x_cx6vf_hdr_ibpanic_exit255.txt", "ibstat"))
    for c in other.cas:
        assert by[c.name].base_lid == c.ports[0].base_lid
        assert by[c.name].port_guid == c.ports[0].port_guid
        assert by[c.name].state == c.ports[0].state and by[c.name].rate_gbps == c.ports[0].rate_gbps
    eth = by["mlx5_8"]
    assert (eth.link_layer, eth.rate_gbps, eth.speed_name, eth.default_gid, eth.port_guid) == (
        "Ethernet", 40, "QDR", None, None)  # "default gid: unknown"
    assert r.port_guids == other.port_guids


def test_partial_excerpt_warns_about_each_missing_line():
    r = ibstatus.parse(load("ibstatus_nvshmem_blog_h100_partial.txt"))
    eth, ib = (c.ports[0] for c in r.cas)
    assert (eth.rate_gbps, eth.width, eth.speed_name, eth.link_layer) == (25, "1X", "EDR", "Ethernet")
    assert (ib.rate_gbps, ib.width, ib.speed_name, ib.link_layer) == (400, "4X", "NDR", "InfiniBand")
    assert eth.state is None and ib.base_lid is None
    assert len(r.warnings) == 2 and all("'state:'" in w and "'base lid:'" in w for w in r.warnings)


def test_ports_of_one_device_are_merged_and_fatal_errors_warned():
    text = ("Infiniband device 'mlx4_0' port 1 status:\n\tdefault gid:\t fe80:0000:0000:0000:0002:c903:0000:2f79\n"
            "\tbase lid:\t 0x3\n\tsm lid:\t\t 0x3\n\tstate:\t\t 4: ACTIVE\n\tphys state:\t 5: LinkUp\n"
            "\trate:\t\t 20 Gb/sec (4X DDR)\n\tlink_layer:\t InfiniBand\n\n"
            "Infiniband device 'mlx4_0' port 2 status:\n\tdefault gid:\t fe80:0000:0000:0000:0002:c903:0000:2f7a\n"
            "\tbase lid:\t 0x0\n\tsm lid:\t\t 0x0\n\tstate:\t\t 1: DOWN\n\tphys state:\t 2: Polling\n"
            "\trate:\t\t 10 Gb/sec (4X)\n\tlink_layer:\t InfiniBand\n\n"
            "Fatal error:  device 'mlx4_1': sys files not found (/sys/class/infiniband/mlx4_1/ports)\n")
    r = ibstatus.parse(text)
    (c,) = r.cas
    assert [(p.number, p.state, p.phys_state, p.rate_gbps, p.width, p.speed_name) for p in c.ports] == [
        (1, "Active", "LinkUp", 20, "4X", "DDR"), (2, "Down", "Polling", 10, "4X", None)]
    assert c.ports[0].port_guid == "0x0002c90300002f79"
    assert r.warnings == ("line 19: ibstatus reported: Fatal error:  device 'mlx4_1': sys files not found "
                          "(/sys/class/infiniband/mlx4_1/ports)",)


@pytest.mark.parametrize(
    "text,line_no,reason",
    [
        ("", 0, "empty"),
        ("rate: 200 Gb/sec (4X HDR)\n", 1, "Infiniband device"),
        ("Infiniband device 'mlx5_0' port 1 status:\n\trate:  fast\n", 2, "'rate:' of port 1 of 'mlx5_0'"),
        ("Infiniband device 'mlx5_0' port 1 status:\n\tbase lid: zero\n", 2, "not a number"),
        ("Infiniband device 'mlx5_0' port 1 status:\n\t????\n", 2, "unrecognised line"),
        ("Infiniband device '' port 1 status:\n", 1, "without a device name"),
        ("Fatal error: no devices\n", 1, "ibstatus failed"),
    ],
)
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        ibstatus.parse(text)
    assert (info.value.kind, info.value.line_no) == ("ibstatus", line_no)
    assert reason in info.value.reason


def test_detect():
    for path in sorted((FIX / "ibstatus").glob("*.txt")):
        assert ibstatus.detect(path.read_text()) >= 80
        assert detect_kind(path.read_text()) == "ibstatus"
    for kind in ("ibstat", "ibv_devinfo", "sysfs_ib", "nvidia_smi_nvlink"):
        for path in sorted((FIX / kind).glob("*.txt")):
            assert ibstatus.detect(path.read_text()) == 0, path


test_fuzz_any_text, test_fuzz_mutated_real_lines = safety_tests(
    ibstatus.parse, "ibstatus", mutated_lines(fixture_lines("ibstatus"), max_size=20), detect=ibstatus.detect)
