"""ibswitches / ibhosts / ibnodes (one module, three kinds): real captures, the -l form, errors, detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, ibnodes
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def load(kind: str, name: str) -> str:
    return (FIX / kind / name).read_bytes().decode("utf-8")


def test_ibswitches_one_infiniscale_switch():
    r = ibnodes.parse_switches(load("ibswitches", "ibswitches_qdr_infiniscale_iv_1switch.txt"))
    (sw,) = r.switches
    # Switch: 0x0002c9020046c588 ports 36 "Infiniscale-IV Mellanox Technologies" base port 0 lid 2 lmc 0
    assert (sw.guid, sw.num_ports, sw.name, sw.lid, sw.lmc, sw.enhanced_port0) == (
        "0x0002c9020046c588", 36, "Infiniscale-IV Mellanox Technologies", 2, 0, False)
    assert (r.source, r.cas, r.links) == ("ibswitches", (), ())


def test_ibhosts_four_hosts():
    r = ibnodes.parse_hosts(load("ibhosts", "ibhosts_qdr_infiniscale_iv_4hosts.txt"))
    assert [c.host for c in r.cas] == ["kube-node-100", "centos-data-200", "centos-data-201", "centos-data-202"]
    assert r.cas[0].guid == r.cas[0].node_guid == "0x0002c903000d7aac" and r.cas[0].num_ports == 1


def test_ibnodes_hosts_then_switch():
    r = ibnodes.parse(load("ibnodes", "ibnodes_qdr_infiniscale_iv_4hosts_1switch.txt"))
    assert (len(r.cas), len(r.switches), r.switches[0].lid) == (4, 1, 2)
    assert r.cas[1].host == "centos-data-201"  # ibnodes lists them in another order than ibhosts


def test_discovery_errors_before_the_list_are_warnings():
    text = ("ibswitches \n"
            "src/query_smp.c:199; umad (DR path slid 0; dlid 0; 0,1,20,34 Attr 0x11:0) bad status 110; "
            "Connection timed out\n"
            'Switch  : 0xe41d2d0300169560 ports 36 "SwitchX -  Mellanox Technologies" base port 0 lid 481 lmc 0\n')
    r = ibnodes.parse_switches(text)
    assert r.switches[0].lid == 481
    assert "skipped command line" in r.warnings[0] and "Connection timed out" in r.warnings[1]


def test_list_form_with_devid_and_vendid():
    r = ibnodes.parse('Ca\t : 0xe09d730300859334 ports 1 devid 0x1021 vendid 0x2c9 "a06-p1-dgx-02-c10 HCA-1"\n'
                      'Router\t : 0x0002c90300000042 ports 2 devid 0x1003 vendid 0x2c9 "ib-router"\n')
    assert (r.cas[0].devid, r.cas[0].vendid, r.cas[0].host) == ("0x1021", "0x2c9", "a06-p1-dgx-02-c10")
    assert (r.cas[1].kind, r.cas[1].host) == ("router", None)


@pytest.mark.parametrize("parse,text,line_no,reason", [
    (ibnodes.parse, "", 0, "empty"),
    (ibnodes.parse_switches, 'Ca: 0x0002c903000d7aac ports 1 "n1 HCA-1"\n', 1, "this text is ibnodes output"),
    (ibnodes.parse_hosts, 'Switch: 0x0002c9020046c588 ports 36 "sw" base port 0 lid 2 lmc 0\n', 1, "ibnodes output"),
    (ibnodes.parse, 'Switch: 0x0002c9020046c588 ports 36 "sw" lid 2\n', 1, "port 0 lid N lmc N"),
    (ibnodes.parse, 'Ca: 0x1 ports 1 "n1 HCA-1"\nnot a node\n', 2, "expected a node line"),
])
def test_errors_name_the_line(parse, text, line_no, reason):
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.line_no == line_no and reason in info.value.reason


@pytest.mark.parametrize("kind,name", [("ibswitches", "ibswitches_qdr_infiniscale_iv_1switch.txt"),
                                       ("ibhosts", "ibhosts_qdr_infiniscale_iv_4hosts.txt"),
                                       ("ibnodes", "ibnodes_qdr_infiniscale_iv_4hosts_1switch.txt")])
def test_detect_tells_the_three_apart(kind, name):
    assert detect_kind(load(kind, name)) == kind


test_fuzz_any_text_parses_or_raises_parse_error, test_fuzz_mutated_real_lines = safety_tests(
    ibnodes.parse, "ibnodes",
    mutated_lines(fixture_lines("ibnodes") + fixture_lines("ibhosts") + fixture_lines("ibswitches")),
    detect=ibnodes.detect, max_examples=100)
