"""ibnetdiscover parser: facts read off the real captures by eye, the ports report, partial discoveries,
node-name maps, GUID forms, errors, detection and fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, ibnetdiscover
from apps.domain.parsers.fabric_common import fabric_guid
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ibnetdiscover"
SUPERPOD = "nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.txt"


def load(name: str) -> str:
    return (FIX / name).read_bytes().decode("utf-8")


@pytest.fixture(scope="module")
def superpod():
    return ibnetdiscover.parse(load(SUPERPOD))


def test_superpod_counts_read_off_the_capture(superpod):
    # grep -c '^Switch' = 40 (31 "IBLEAF", 9 "IBSPINE"); grep -c '^Ca' = 582, 40 of them "Aggregation Node";
    # 2,228 port lines, every link printed from both ends: 1,114 links.
    r = superpod
    assert (len(r.switches), len(r.cas), len(r.links)) == (40, 582, 1114)
    assert sum("IBLEAF" in s.name for s in r.switches) == 31 and sum("IBSPINE" in s.name for s in r.switches) == 9
    assert sum(c.kind == "aggregation_node" for c in r.cas) == 40
    assert all(c.host is None for c in r.cas if c.kind == "aggregation_node")
    assert r.warnings == ()
    assert r.initiated_from == {"node_guid": "0xe09d730300156ff6", "port_guid": "0xe09d730300156ff6"}


def test_superpod_named_link_and_host(superpod):
    # Switch 65 "S-2c5eab0300b87b40" # "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" enhanced port 0 lid 73 lmc 0
    # [1]  "H-e09d7303007a4bd8"[1](e09d7303007a4bd8)  # "a08-p1-dgx-04-c01 mlx5_5" lid 647 4xNDR
    leaf = next(s for s in superpod.switches if s.guid == "0x2c5eab0300b87b40")
    assert (leaf.name, leaf.lid, leaf.num_ports, leaf.enhanced_port0) == ("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", 73, 65,
                                                                          True)
    p1 = next(p for p in leaf.ports if p.port == 1)
    assert (p1.width, p1.speed, p1.peer.guid, p1.peer.port, p1.peer.lid) == ("4X", "NDR", "0xe09d7303007a4bd8", 1, 647)
    link = next(lk for lk in superpod.links if {lk.a.guid, lk.b.guid} == {"0x2c5eab0300b87b40", "0xe09d7303007a4bd8"})
    assert (link.width, link.speed, link.state) == ("4X", "NDR", None)
    # Ca 1 "H-e09d730300859334" # "a06-p1-dgx-02-c10 HCA-1" ; [1](e09d730300859334) "S-2c5eab0300b87a80"[10] # lid 500
    ca = next(c for c in superpod.cas if c.guid == "0xe09d730300859334")
    assert (ca.name, ca.host, ca.node_guid, ca.devid, ca.kind) == ("a06-p1-dgx-02-c10 HCA-1", "a06-p1-dgx-02-c10",
                                                                   "0xe09d730300859334", "0x1021", "hca")
    (port,) = ca.ports
    assert (port.port, port.lid, port.port_guid, port.peer.guid, port.peer.port) == (
        1, 500, "0xe09d730300859334", "0x2c5eab0300b87a80", 10)


def test_superpod_default_descriptions_name_no_host(superpod):
    # 69 CAs still have the adapter's own description "MT4129 ConnectX7   Mellanox Technologies"
    unnamed = [c for c in superpod.cas if c.name.startswith("MT4129 ConnectX7")]
    assert len(unnamed) == 69 and all(c.host is None and c.kind == "hca" for c in unnamed)


def test_2009_capture_short_guids_and_sdr():
    r = ibnetdiscover.parse(load("ibm_pcm_2node_mt43132_8port_switch_sdr_2009.txt"))
    (sw,) = r.switches
    # switchguid=0xb8cffff0053ee(b8cffff0053ee); Switch 8 "S-000b8cffff0053ee" # "MT43132 ..." base port 0 lid 3
    assert (sw.guid, sw.num_ports, sw.lid, sw.enhanced_port0, sw.system_image_guid) == (
        "0x000b8cffff0053ee", 8, 3, False, None)
    hosts = {c.host: c for c in r.cas}
    assert set(hosts) == {"compute-00-00", "compute-00-01"}
    c1 = hosts["compute-00-01"]
    assert (c1.guid, c1.ports[0].port_guid, c1.system_image_guid) == (
        "0x0002c902002789ac", "0x0002c902002789ad", "0x0002c902002789af")
    assert {(lk.width, lk.speed) for lk in r.links} == {("4X", "SDR")} and len(r.links) == 2


def test_isolated_ca_without_links_is_kept_with_a_warning():
    r = ibnetdiscover.parse(load("nvidia_topograph_dgx_gb200_isolated_ca_no_links.txt"))
    assert (len(r.switches), len(r.links)) == (0, 0)
    (ca,) = r.cas
    assert (ca.host, ca.devid, ca.ports) == ("dgx-gb200-n01-c1", "0x1021", ())
    assert "lists no linked port" in r.warnings[0]


def test_partial_discovery_with_node_name_map():
    r = ibnetdiscover.parse(load("synthetic_partial_discovery_node_name_map.txt"))
    assert r.warnings[0].startswith("line 1: discovery reported: ibwarn:")
    assert "bad status 110; Connection timed out" in r.warnings[1]
    assert any("0xfc6a1c0300aa0400 ('spine02')" in w and "no block" in w for w in r.warnings)
    spine02 = next(s for s in r.switches if s.name == "spine02")
    assert (spine02.lid, [(p.port, p.peer.guid, p.peer.port) for p in spine02.ports]) == (
        9, [(1, "0xfc6a1c0300aa0100", 35)])
    node04 = next(c for c in r.cas if c.guid == "0x946dae0300c1a040")
    # its own line keeps the adapter's description; the peers print the map's name
    assert (node04.name, node04.alias, node04.host) == ("MT4129 ConnectX7   Mellanox Technologies", "node04 mlx5_0",
                                                        "node04")
    assert node04.ports[0].width == "2X"
    assert len(r.links) == 9


def test_ports_report_one_record_per_port_guid():
    r = ibnetdiscover.parse(load("synthetic_ports_report_qdr_3hosts.txt"))
    assert r.source == "ibnetdiscover -p"
    (sw,) = r.switches
    assert (sw.guid, sw.lid) == ("0x0002c9020046c588", 2)
    unlinked = next(p for p in sw.ports if p.port == 4)
    assert (unlinked.peer, unlinked.width) == (None, None)
    assert {c.host for c in r.cas} == {"centos-data-200", "centos-data-201", "kube-node-100"}
    assert all(c.node_guid is None and c.ports[0].port_guid == c.guid for c in r.cas)
    assert len(r.links) == 3 and {(lk.width, lk.speed) for lk in r.links} == {("4X", "QDR")}


def test_node_list_form_is_read_as_nodes_without_links():
    r = ibnetdiscover.parse('Switch\t : 0x0002c9020046c588 ports 36 devid 0xbd36 vendid 0x2c9 "sw1"\n'
                            'Ca\t : 0x0002c903000d7aac ports 1 devid 0x1003 vendid 0x2c9 "n1 HCA-1"\n')
    assert r.source == "ibnetdiscover -l" and r.links == ()
    assert (r.switches[0].devid, r.cas[0].host) == ("0xbd36", "n1")


@pytest.mark.parametrize("text,expected", [
    ("S-2c5eab0300b87b40", "0x2c5eab0300b87b40"),
    ("0xb8cffff0053ee", "0x000b8cffff0053ee"),
    ("2c902002789ad", "0x0002c902002789ad"),
    ("0x0002C903000D7AAC", "0x0002c903000d7aac"),
    ("H-not-hex", None),
])
def test_guids_with_and_without_0x_normalise_to_one_form(text, expected):
    assert fabric_guid(text) == expected


@pytest.mark.parametrize("text,line_no,reason", [
    ("", 0, "empty"),
    ('[1]\t"S-0000000000000001"[1]\t\t# "sw" lid 1 4xNDR\n', 1, "before any Switch/Ca line"),
    ('Switch\t8 "S-0000000000000001"\t\t# "sw" base port 0 lid 1 lmc 0\nthis is not ibnetdiscover\n', 2,
     "unrecognised line"),
    ('Switch\t8 "S-0000000000000001"\t\t# "sw" base port 0 lid 1 lmc 0\n[1]\t"S-00000001"[x]\t# lid\n', 2,
     "port line not like"),
    ("src/query_smp.c:199; umad (DR path slid 0; dlid 0; 0,1) bad status 110; Connection timed out\n", 1,
     "discovery failed"),
    ("# Topology file: generated on Mon Mar  3 10:12:01 2025\n#\n", 1, "no Switch or Ca block"),
])
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        ibnetdiscover.parse(text)
    assert (info.value.kind, info.value.line_no) == ("ibnetdiscover", line_no)
    assert reason in info.value.reason


def test_unknown_speed_token_is_a_warning():
    text = ('Switch\t8 "S-0000000000000001"\t\t# "sw" base port 0 lid 1 lmc 0\n'
            '[1]\t"S-0000000000000002"[1]\t\t# "sw2" lid 2 4x???\n')
    r = ibnetdiscover.parse(text)
    assert (r.links[0].width, r.links[0].speed) == ("4X", None)
    assert any("'4x???' not known" in w for w in r.warnings)


def test_detect_picks_ibnetdiscover_for_its_fixtures_only():
    for path in sorted(FIX.glob("*.txt")):
        assert detect_kind(path.read_text()) == "ibnetdiscover", path.name
    assert ibnetdiscover.detect("CA 'mlx5_0'\n\tCA type: MT4129\n") == 0


test_fuzz_any_text_parses_or_raises_parse_error, test_fuzz_mutated_real_lines = safety_tests(
    ibnetdiscover.parse, "ibnetdiscover",
    mutated_lines(fixture_lines("ibnetdiscover", ["ibm_pcm_2node_mt43132_8port_switch_sdr_2009.txt",
                                                  "synthetic_partial_discovery_node_name_map.txt",
                                                  "synthetic_ports_report_qdr_3hosts.txt"])),
    detect=ibnetdiscover.detect, max_examples=150)
