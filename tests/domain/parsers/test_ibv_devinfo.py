"""ibv_devinfo parser: real captures (fixtures/ibv_devinfo), a synthetic ``-v`` listing laid out as
rdma-core's devinfo.c prints it (``synthetic_verbose_*``, not a capture), errors, detect, fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, ibv_devinfo
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def load(name: str) -> str:
    return (FIX / "ibv_devinfo" / name).read_bytes().decode("utf-8")


def by_name(name: str) -> dict:
    return {c.name: c for c in ibv_devinfo.parse(load(name)).cas}


def test_azure_vf_ib_and_accelerated_networking_ethernet():
    by = by_name("azure_aks_vm_cx6_vf_ib_plus_cx4lx_vf_eth_flux_operator.txt")
    ib, eth = by["mlx5_0"], by["mlx5_1"]
    assert (ib.ca_type, ib.vendor_id, ib.vendor_part_id, ib.firmware_version) == ("MT4124", "0x02c9", 4124, "20.31.1014")
    assert ib.node_guid == "0x00155dfffe33ff18" and ib.board_id == "MT_0000000223"
    p = ib.ports[0]
    assert (p.state, p.state_raw, p.link_layer, p.base_lid, p.sm_lid, p.lmc) == (
        "Active", "PORT_ACTIVE (4)", "InfiniBand", 383, 228, 0)
    assert (p.max_mtu, p.active_mtu) == (4096, 4096)
    assert (eth.ca_type, eth.hardware_version, eth.system_image_guid, eth.board_id) == (
        "MT4118", "0x80", "0x0000000000000000", "MSF0010110035")
    assert (eth.ports[0].link_layer, eth.ports[0].active_mtu, eth.ports[0].sm_lid) == ("Ethernet", 1024, 0)


def test_efa_head_partial_port_cut_off():
    r = ibv_devinfo.parse(load("aws_efa_0_head_partial.txt"))
    (c,) = r.cas
    assert (c.name, c.transport, c.vendor_id, c.vendor_part_id, c.hardware_version) == (
        "efa_0", "unspecified (4)", "0x1d0f", 61344, "0xEFA0")
    assert c.ca_type is None and c.board_id is None and c.node_guid == "0x0000000000000000"
    assert c.ports[0].number == 1 and c.ports[0].state is None
    assert r.warnings == ("port 1 of 'efa_0' shows no fields (output cut?)",)


def test_markdown_fence_skipped_and_mixed_link_layers():
    r = ibv_devinfo.parse(load("holohub_igx_orin_cx7_eth_and_ib.txt"))
    assert [(c.name, c.ports[0].link_layer, c.ports[0].state) for c in r.cas] == [
        ("mlx5_0", "Ethernet", "Active"), ("mlx5_1", "InfiniBand", "Active")]
    assert r.cas[0].board_id == "NVD0000000033"
    assert r.warnings == ("line 38: skipped markup line '```'",)


def test_rst_indent_on_first_line():
    (c,) = ibv_devinfo.parse(load("kaust_ibex_login_cx6_rst_indent.txt")).cas
    assert (c.name, c.ca_type, c.ports[0].base_lid, c.ports[0].sm_lid) == ("mlx5_0", "MT4123", 762, 8)


def test_four_cx7_ethernet_ports_down():
    r = ibv_devinfo.parse(load("stelline_asus_esc8000a_e12_cx7_eth_down.txt"))
    assert [c.name for c in r.cas] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert {(c.ports[0].state, c.ports[0].link_layer) for c in r.cas} == {("Down", "Ethernet")}
    assert [c.firmware_version for c in r.cas] == ["28.41.1000", "28.41.1000", "28.43.2566", "28.43.2566"]


def test_host_acting_as_sm_has_sm_lid_equal_port_lid():
    (c,) = ibv_devinfo.parse(load("bernie_cx6_mt28908_ib.txt")).cas
    assert c.ports[0].sm_lid == c.ports[0].base_lid == 35


def test_verbose_listing_width_speed_phys_state_and_gids():
    r = ibv_devinfo.parse(load("synthetic_verbose_cx7_ndr_ib_and_cx6dx_roce_down.txt"))
    ib, roce = r.cas
    p = ib.ports[0]
    assert (p.active_width, p.active_speed, p.width, p.speed_name, p.rate_gbps) == (
        "4X (2)", "100.0 Gbps (128)", "4X", "NDR", 400)
    assert (p.phys_state, p.phys_state_raw, p.capability_mask) == ("LinkUp", "LINK_UP (5)", "0xa751e848")
    assert p.port_guid == ib.node_guid == "0x58a2e10300a7820e"  # from compressed GID 0
    q = roce.ports[0]
    assert (q.state, q.phys_state, q.rate_gbps, q.speed_name) == ("Down", "Disabled", 100, "EDR")
    assert [(g.index, g.gid, g.type) for g in q.gids] == [
        (0, "fe80::ba3f:d2ff:fe4c:1a2e", "RoCE v1"), (1, "fe80::ba3f:d2ff:fe4c:1a2e", "RoCE v2"),
        (2, "::ffff:10.20.0.15", "RoCE v1"), (3, "::ffff:10.20.0.15", "RoCE v2")]
    assert r.port_guids == ("0x58a2e10300a7820e", "0xba3fd2fffe4c1a2e")
    assert r.warnings == ()


def test_no_devices_and_single_port_selection():
    r = ibv_devinfo.parse("No IB devices found\n")
    assert r.cas == () and r.warnings == ("line 1: ibv_devinfo says: No IB devices found",)
    text = ("hca_id:\tmlx5_0\n\tphys_port_cnt:\t\t\t2\n\t\tport:\t2\n\t\t\tstate:\t\t\tPORT_INIT (2)\n"
            "\t\t\tlink_layer:\t\tInfiniBand\n")
    r = ibv_devinfo.parse(text)
    assert r.cas[0].ports[0].number == 2 and r.cas[0].ports[0].state == "Initializing"
    assert r.warnings == ("'mlx5_0' has 2 ports but 1 'port:' block(s) were printed",)


@pytest.mark.parametrize(
    "text,line_no,reason",
    [
        ("", 0, "empty"),
        ("\tfw_ver:\t20.31.1014\n", 1, "before any 'hca_id:'"),
        ("hca_id:\tmlx5_0\n\t\tport:\tone\n", 2, "'port:' of device 'mlx5_0' is not a number"),
        ("hca_id:\tmlx5_0\n\tGID[  0]:\tfe80::1\n", 2, "GID line outside"),
        ("hca_id:\tmlx5_0\nrandom words\n", 2, "unrecognised line inside device 'mlx5_0'"),
        ("hca_id:\tmlx5_0\n\tnode_guid:\tnope\n", 2, "not a GUID"),
        ("hca_id:\tmlx5_0\n\t\tport:\t1\n\t\t\tport_lid:\tx\n", 3, "'port_lid:' of port 1 of 'mlx5_0'"),
        ("hca_id:\n", 1, "without a device name"),
        ("not ibv_devinfo\n", 1, "starts with 'hca_id:'"),
    ],
)
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        ibv_devinfo.parse(text)
    assert (info.value.kind, info.value.line_no) == ("ibv_devinfo", line_no)
    assert reason in info.value.reason


def test_detect():
    for path in sorted((FIX / "ibv_devinfo").glob("*.txt")):
        assert ibv_devinfo.detect(path.read_text()) >= 70, path
        assert detect_kind(path.read_text()) == "ibv_devinfo", path
    for kind in ("ibstat", "ibstatus", "sysfs_ib", "nvidia_smi_nvlink", "nvidia_smi_gpus"):
        for path in sorted((FIX / kind).glob("*.txt")):
            assert ibv_devinfo.detect(path.read_text()) == 0, path


test_fuzz_any_text, test_fuzz_mutated_real_lines = safety_tests(
    ibv_devinfo.parse, "ibv_devinfo", mutated_lines(fixture_lines("ibv_devinfo"), max_size=25), detect=ibv_devinfo.detect)
