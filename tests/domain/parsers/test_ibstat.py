"""ibstat parser: real captures (fixtures/ibstat), ibstat -p / single-port forms, errors, detect, fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, ibstat, ibstatus, ibv_devinfo, nvidia_smi_nvlink, sysfs_ib
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests, strip_and_indent

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def load(name: str, kind: str = "ibstat") -> str:
    return (FIX / kind / name).read_bytes().decode("utf-8")


def cas(name: str) -> dict:
    return {c.name: c for c in ibstat.parse(load(name)).cas}


def test_roce_node_exactly_three_ports_down_disabled():
    r = ibstat.parse(load("gpud_h100_12ca_roce_3_down_disabled.txt"))
    assert [c.name for c in r.cas] == ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11", "mlx5_2", "mlx5_3", "mlx5_4",
                                       "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]  # lexical, as printed
    down = {c.name: c.ports[0] for c in r.cas if c.ports[0].state != "Active"}
    assert sorted(down) == ["mlx5_2", "mlx5_7", "mlx5_8"]
    for p in down.values():
        assert (p.state, p.phys_state, p.rate_gbps, p.link_layer) == ("Down", "Disabled", 40, "Ethernet")
    active = [c for c in r.cas if c.name not in down]
    assert all(c.ports[0].phys_state == "LinkUp" for c in active)
    by = {c.name: c for c in r.cas}
    assert (by["mlx5_0"].ca_type, by["mlx5_0"].ports[0].rate_gbps, by["mlx5_0"].ports[0].link_layer) == (
        "MT4129", 400, "InfiniBand")
    assert (by["mlx5_1"].ca_type, by["mlx5_1"].ports[0].rate_gbps, by["mlx5_1"].ports[0].link_layer) == (
        "MT4125", 100, "Ethernet")
    assert by["mlx5_0"].ports[0].base_lid == 75 and by["mlx5_0"].ports[0].sm_lid == 334
    assert r.warnings == ()


def test_hdr_port_active_after_subnet_manager():
    c = cas("cx6_hdr_active_after_sm.txt")["mlx5_5"]
    p = c.ports[0]
    assert (p.state, p.phys_state, p.rate_gbps, p.base_lid, p.sm_lid, p.lmc) == ("Active", "LinkUp", 200, 18, 4, 0)
    assert isinstance(p.rate_gbps, int)
    assert (c.ca_type, c.num_ports, c.firmware_version) == ("MT4123", 1, "20.30.1004")
    assert c.node_guid == p.port_guid == "0x08c0eb0300ea50e6"
    assert p.capability_mask == "0x2651e848" and p.state_raw == "Active"


def test_sriov_vf_down_with_link_up_and_unassigned_lid():
    c = cas("cx6_sriov_vf_mt4124_down.txt")["mlx5_6"]
    p = c.ports[0]
    assert c.ca_type == "MT4124"
    assert (p.state, p.phys_state, p.base_lid) == ("Down", "LinkUp", 65535)
    assert c.node_guid == "0x1122334477667790" and c.system_image_guid == "0x08c0eb0300ea50e6"


def test_connectx1_ddr_dual_port_second_port_polling():
    c = cas("archwiki_connectx_mt25418_ddr.txt")["mlx4_0"]
    assert (c.num_ports, c.hardware_version, c.ca_type) == (2, "a0", "MT25418")
    p1, p2 = c.ports
    assert (p1.number, p1.state, p1.rate_gbps, p1.base_lid, p1.sm_lid) == (1, "Active", 20, 3, 3)
    assert (p2.number, p2.state, p2.phys_state, p2.rate_gbps) == (2, "Down", "Polling", 10)
    assert p2.port_guid == "0x0002c90300002f7a"


def test_b300_cx8_disabled_cx7_active():
    r = ibstat.parse(load("dell_xe9780_b300_cx8_down_cx7_active.txt"))
    cx8 = [c for c in r.cas if c.ca_type == "MT4131"]
    cx7 = [c for c in r.cas if c.ca_type == "MT4129"]
    assert len(cx8) == 7 and len(cx7) == 4
    assert {(c.ports[0].state, c.ports[0].phys_state, c.ports[0].rate_gbps, c.ports[0].base_lid) for c in cx8} == {
        ("Down", "Disabled", 10, 65535)}
    assert {(c.ports[0].state, c.ports[0].rate_gbps) for c in cx7} == {("Active", 100)}
    assert {c.firmware_version for c in cx8} == {"40.46.5500"}


def test_ibpanic_exit_text_is_a_warning_and_all_eight_cas_are_kept():
    r = ibstat.parse(load("gpud_azure_nd_a100_v4_8x_cx6vf_hdr_ibpanic_exit255.txt"))
    assert [c.name for c in r.cas] == [f"mlx5_{i}" for i in range(8)]
    assert {(c.ca_type, c.ports[0].state, c.ports[0].rate_gbps) for c in r.cas} == {("MT4124", "Active", 200)}
    assert len(r.warnings) == 1 and "ibpanic" in r.warnings[0] and "mlx5_8" in r.warnings[0]
    assert r.warnings[0].startswith("line 137:")


def test_tab_indented_mixed_firmware_and_ethernet_first_ca():
    by = cas("gpud_a100_9x_mt4126_8ib_hdr_1eth.txt")
    assert len(by) == 9
    eth = by["mlx5_0"].ports[0]
    assert (eth.link_layer, eth.base_lid, eth.sm_lid, eth.rate_gbps) == ("Ethernet", 0, 0, 200)
    assert by["mlx5_0"].firmware_version == "22.35.2302"
    assert {by[f"mlx5_{i}"].ports[0].link_layer for i in range(1, 9)} == {"InfiniBand"}
    assert by["mlx5_1"].ports[0].base_lid == 1369 and by["mlx5_1"].ports[0].sm_lid == 83


def test_bluefield3_ethernet_bond_next_to_ndr_rails():
    by = cas("gpud_h100_8x_cx7_ndr_ib_plus_bluefield3_eth.txt")
    bond = by["mlx5_bond_0"]
    assert (bond.ca_type, bond.firmware_version, bond.hardware_version) == ("MT41692", "32.38.3056", "1")
    assert (bond.ports[0].link_layer, bond.ports[0].rate_gbps) == ("Ethernet", 200)
    assert bond.ports[0].port_guid == "0x201d97fffe0056cf"
    rails = [c for n, c in by.items() if n != "mlx5_bond_0"]
    assert len(rails) == 8 and {(c.ports[0].rate_gbps, c.ports[0].link_layer) for c in rails} == {(400, "InfiniBand")}


def test_trimmed_listing_warns_about_missing_lines():
    r = ibstat.parse(load("h20_server_2x_cx6lx_mt4127_eth_down_disabled_arthurchiao_notes.txt"))
    assert [(c.name, c.ca_type, c.firmware_version) for c in r.cas] == [("mlx5_0", "MT4127", None),
                                                                          ("mlx5_1", "MT4127", None)]
    assert all(c.ports[0].port_guid is None and c.ports[0].state == "Down" for c in r.cas)
    assert sum("'Port GUID:'" in w for w in r.warnings) == 2
    assert sum("'Firmware version:'" in w for w in r.warnings) == 2
    assert r.port_guids == ()


def test_partial_capture_of_first_ca_parses_as_it_stands():
    # The source cut after the first CA; what is shown is a complete CA block, so nothing to warn about.
    r = ibstat.parse(load("microview_cx7_eth_down_partial.txt"))
    (c,) = r.cas
    p = c.ports[0]
    assert (c.name, c.ca_type, p.state, p.phys_state, p.rate_gbps, p.link_layer) == (
        "mlx5_0", "MT4129", "Down", "Disabled", 40, "Ethernet")
    assert p.port_guid == "0x966daefffe38817e"


def test_zero_port_guid_of_ethernet_ports_kept_on_port_but_not_in_port_guids():
    r = ibstat.parse(load("mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt"))
    eth = [c for c in r.cas if c.ports[0].link_layer == "Ethernet"]
    assert len(eth) == 4 and {c.ports[0].port_guid for c in eth} == {"0x0000000000000000"}
    assert len(r.port_guids) == 8 and "0x0000000000000000" not in r.port_guids
    assert {c.ports[0].sm_lid for c in r.cas if c.ports[0].link_layer == "InfiniBand"} == {1024}


def test_rate_forms_fdr10_and_1x_sdr():
    text = ("CA 'mlx4_0'\n\tCA type: MT4099\n\tNumber of ports: 2\n\tPort 1:\n\t\tState: Active\n\t\tRate: 40 (FDR10)\n"
            "\tPort 2:\n\t\tState: Initializing\n\t\tPhysical state: LinkUp\n\t\tRate: 2.5\n")
    r = ibstat.parse(text)
    p1, p2 = r.cas[0].ports
    assert (p1.rate_gbps, p1.speed_name, p1.rate_raw, p1.width) == (40, "FDR10", "40 (FDR10)", None)
    assert (p2.rate_gbps, p2.state, p2.phys_state) == (2.5, "Initializing", "LinkUp")


def test_ibstat_p_port_guids_only():
    r = ibstat.parse(load("synthetic_ibstat_p_h100_9_ports.txt"))
    assert r.source == "ibstat -p" and r.cas == ()
    full = ibstat.parse(load("gpud_h100_8x_cx7_ndr_ib_plus_bluefield3_eth.txt"))
    assert r.port_guids == full.port_guids and len(r.port_guids) == 9
    assert ibstat.parse("0x0\n0x00155dfffd3411eb\n").port_guids == ("0x00155dfffd3411eb",)


def test_single_port_form_and_mixed_indentation_and_prompt():
    bare = "Port 1:\nState: Active\nPhysical state: LinkUp\nRate: 400\nLink layer: InfiniBand\n"
    r = ibstat.parse(bare)
    assert r.cas[0].name is None and r.cas[0].ports[0].rate_gbps == 400
    canonical = load("cx6_hdr_active_after_sm.txt")
    mangled = "$ ibstat mlx5_5\n" + "\n".join(
        ("  " if i % 3 == 0 else "\t" if i % 3 == 1 else "") + line.strip() for i, line in enumerate(canonical.splitlines()))
    m = ibstat.parse(mangled)
    assert m.cas == ibstat.parse(canonical).cas
    assert m.warnings == ("line 1: skipped command line '$ ibstat mlx5_5'",)


@pytest.mark.parametrize(
    "text,line_no,reason",
    [
        ("", 0, "empty"),
        ("\n  \n", 0, "empty"),
        ("State: Active\n", 1, "before any CA"),
        ("CA 'mlx5_0'\n\tCA type: MT4129\n\tState: Active\n", 3, "expected 'Port N:' before 'State:' inside CA 'mlx5_0'"),
        ("CA 'mlx5_0'\n\tPort 1:\n\t\tRate: fast\n", 3, "'Rate:' of port 1 of CA 'mlx5_0' is not a rate"),
        ("CA 'mlx5_0'\n\tNode GUID: 0xzz\n", 2, "not a GUID"),
        ("CA 'mlx5_0'\n\tNumber of ports: two\n", 2, "not a number"),
        ("CA 'mlx5_0'\n\tPort 1:\n\t\tBase lid: none\n", 3, "'Base lid:' of port 1 of CA 'mlx5_0' is not a number"),
        ("CA 'mlx5_0'\n\tthis is not ibstat\n", 2, "unrecognised line"),
        ("hello world\n", 1, "ibstat output starts with a CA"),
        ("ibpanic: [1] main: stat of IB device 'mlx5_0' failed\n", 1, "ibstat failed and printed no CA"),
        ("0x0002c90300002f79\nCA 'mlx5_0'\n", 2, "one port GUID"),
        ("CA ''\n", 1, "without a CA name"),
    ],
)
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        ibstat.parse(text)
    assert info.value.kind == "ibstat"
    assert info.value.line_no == line_no
    assert reason in info.value.reason


def test_detect_scores_own_fixtures_and_rejects_other_kinds():
    for path in sorted((FIX / "ibstat").glob("*.txt")):
        text = path.read_text()
        assert ibstat.detect(text) >= 40, path.name
        assert detect_kind(text) == "ibstat", path.name
    for kind in ("ibstatus", "ibv_devinfo", "nvidia_smi_nvlink", "sysfs_ib"):
        for path in sorted((FIX / kind).glob("*.txt")):
            assert ibstat.detect(path.read_text()) == 0, path
    assert ibstatus.detect(load("cx6_hdr_active_after_sm.txt")) == 0
    assert ibv_devinfo.detect(load("cx6_hdr_active_after_sm.txt")) == 0
    assert nvidia_smi_nvlink.detect(load("cx6_hdr_active_after_sm.txt")) == 0
    assert sysfs_ib.detect(load("cx6_hdr_active_after_sm.txt")) == 0


test_fuzz_any_text_parses_or_raises_parse_error, test_fuzz_mutated_real_lines = safety_tests(
    ibstat.parse, "ibstat", mutated_lines(fixture_lines("ibstat"), max_size=20, reindent=strip_and_indent()),
    detect=ibstat.detect)
