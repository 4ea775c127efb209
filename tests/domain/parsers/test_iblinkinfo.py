"""iblinkinfo parser: facts read off the real captures by eye, filtered and cut copies, Could be, down ports,
line mode, errors, detection and fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, iblinkinfo
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "iblinkinfo"


def parse(name: str):
    return iblinkinfo.parse((FIX / name).read_bytes().decode("utf-8"))


def test_qdr_switch_eight_hosts_one_dual_port_ca():
    r = parse("qdr_infiniscale_iv_18port_teaker_8hosts_one_dual_port_ca.txt")
    (sw,) = r.switches
    assert (sw.guid, sw.name, sw.lid, len(sw.ports)) == ("0x0002c902004b2678", "Infiniscale-IV Mellanox Technologies",
                                                         2, 18)
    down = [p.port for p in sw.ports if p.state == "Down"]
    assert down == [8, 10, 11, 12, 13, 15, 16, 17, 18]
    assert {p.phys_state for p in sw.ports if p.state == "Down"} == {"Polling"}
    assert sorted(c.host for c in r.cas) == [f"teaker-{i}" for i in (10, 11, 4, 5, 6, 7, 8, 9)]
    t9 = next(c for c in r.cas if c.host == "teaker-9")
    assert [(p.port, p.lid, p.port_guid, p.peer.port) for p in t9.ports] == [
        (1, 6, "0xf45214030091ba51", 3), (2, 4, "0xf45214030091ba52", 14)]
    # teaker-10's block comes after the switch's: its far end (lid 2) still resolves
    t10 = next(c for c in r.cas if c.host == "teaker-10")
    assert (t10.ports[0].peer.guid, t10.ports[0].peer.port) == ("0x0002c902004b2678", 2)
    assert len(r.links) == 9 and {(lk.width, lk.speed, lk.state) for lk in r.links} == {("4X", "QDR", "Active")}
    assert r.warnings == ()


def test_filtered_copy_without_headers_names_nodes_from_their_peers():
    r = parse("edr_sb7700_2nodes_mgt_grep_up_partial.txt")
    (sw,) = r.switches
    assert (sw.guid, sw.lid, sw.name) == (None, 2, "MF0;SB7700:MSB7700/U1")
    assert sorted(c.host for c in r.cas) == ["mgt", "n01", "n02"]
    n02 = next(c for c in r.cas if c.host == "n02")
    assert (n02.guid, n02.ports[0].lane_gbps, n02.ports[0].speed) == ("0xec0d9a03003d62be", 25.78125, "EDR")
    assert (n02.ports[0].peer.guid, n02.ports[0].peer.lid, n02.ports[0].peer.port) == (None, 2, 17)
    assert len(r.links) == 3
    assert "without their 'CA:'/'Switch:' headers" in r.warnings[0]


def test_cut_copy_keeps_unknown_far_end_by_lid_and_sharp_node_is_not_a_host():
    r = parse("nccl_tests_issue_71_hdr_mqm8700_4x_v100_hosts_edr_links_sharp_an_partial.txt")
    (sw,) = r.switches
    assert (sw.guid, sw.lid) == ("0x0c42a10300b95bfa", 3)
    an = next(c for c in r.cas if c.kind == "aggregation_node")
    assert (an.host, an.ports[0].speed, an.ports[0].lane_gbps, an.ports[0].peer.port) == (None, "HDR", 53.125, 41)
    assert {c.host for c in r.cas if c.kind == "hca"} == {"gpu-v100-0", "gpu-v100-1", "gpu-v100-3"}
    lost = next(lk for lk in r.links if lk.b.guid is None)
    assert (lost.b.lid, lost.b.name, lost.a.port) == (5, "gpu-v100-2 HCA-1", 4)
    assert any("'...'" in w for w in r.warnings) and any("LID 5" in w for w in r.warnings)


def test_switchless_back_to_back_and_a_peer_printing_another_name():
    r = parse("archwiki_two_connectx_mlx4_back_to_back_ddr_no_switch.txt")
    assert r.switches == ()
    default, named = sorted(r.cas, key=lambda c: c.host or "")
    assert (default.name, default.host) == ("MT25408 ConnectX Mellanox Technologies", None)
    assert (named.name, named.alias, named.host) == ("hostname mlx4_0", "kvm mlx4_0", "hostname")
    (link,) = r.links
    assert (link.width, link.speed) == ("4X", "DDR")
    assert "kept as alias" in r.warnings[0]


def test_could_be_down_disabled_and_initializing_ports():
    r = parse("synthetic_hdr_leaf_could_be_down_disabled_init.txt")
    leaf = next(s for s in r.switches if "leaf" in s.name)
    ports = {p.port: p for p in leaf.ports}
    assert (ports[2].width, ports[2].could_be_width) == ("2X", "4X")
    assert (ports[3].speed, ports[3].could_be_speed) == ("EDR", "HDR")
    assert (ports[4].state, ports[4].phys_state) == ("Initializing", "LinkUp")
    assert (ports[5].state, ports[5].phys_state, ports[5].peer) == ("Down", "Polling", None)
    assert (ports[6].state, ports[6].phys_state) == ("Down", "Disabled")
    by_port = {lk.b.port: lk for lk in r.links if lk.b.guid == leaf.guid}
    assert (by_port[2].could_be_width, by_port[3].could_be_speed, by_port[4].state) == ("4X", "HDR", "Initializing")


def test_line_mode_infers_node_types():
    r = parse("synthetic_line_mode_qdr_dual_port_ca.txt")
    assert r.source == "iblinkinfo -l"
    (sw,) = r.switches
    assert (sw.guid, sw.lid, [p.port for p in sw.ports]) == ("0x0002c902004b2678", 2, [3, 8, 9, 14])
    assert sorted(c.guid for c in r.cas) == ["0xf45214030091b9f1", "0xf45214030091ba51", "0xf45214030091ba52"]
    narrow = next(lk for lk in r.links if lk.width == "1X")
    assert narrow.could_be_width == "4X"
    assert len(r.links) == 3


def test_fdr10_and_hoq_columns():
    text = ("Switch: 0x0002c90200000001 sw1:\n"
            "           1    1[  ] ==( 4X    10.0 Gbps (FDR10) Active/  LinkUp) (HOQ:19 VL_Stall:7)==>"
            "       2    1[  ] \"n1 HCA-1\" ( Could be FDR10 (Found link at QDR but expected speed is FDR10))\n")
    (port,) = iblinkinfo.parse(text).switches[0].ports
    assert (port.width, port.speed, port.lane_gbps) == ("4X", "FDR10", 10.0)


@pytest.mark.parametrize("text,line_no,reason", [
    ("", 0, "empty"),
    ("CA: n1 HCA-1:\n", 1, "no port line"),
    ("CA: n1 HCA-1:\n      0x0002c90300000001      1    1[  ] ==( 4X 10.0 Gbps Active)==>   2 1[ ] \"x\" ( )\n", 2,
     "link field"),
    ("CA: n1 HCA-1:\nrandom words here\n", 2, "unrecognised line"),
])
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        iblinkinfo.parse(text)
    assert (info.value.kind, info.value.line_no) == ("iblinkinfo", line_no)
    assert reason in info.value.reason


def test_detect_picks_iblinkinfo_for_its_fixtures():
    for path in sorted(FIX.glob("*.txt")):
        assert detect_kind(path.read_text()) == "iblinkinfo", path.name


test_fuzz_any_text_parses_or_raises_parse_error, test_fuzz_mutated_real_lines = safety_tests(
    iblinkinfo.parse, "iblinkinfo", mutated_lines(fixture_lines("iblinkinfo")), detect=iblinkinfo.detect,
    max_examples=150)
