"""lldpctl -f json / json0 and lldpcli show neighbors (synthetic fixtures modelled on lldpd's documented
outputs): switch and port per NIC, errors, detection and fuzzing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, lldp
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"
CABLING = {"ens1f0np0": ("leaf-a01", "Ethernet0"), "ens2f0np0": ("leaf-a01", "Ethernet8"),
           "ens3f0np0": ("leaf-a02", "Ethernet0"), "ens4f0np0": ("leaf-a02", "Ethernet8")}


def cabling(result) -> dict:
    return {n.interface: (n.switch, n.switch_port) for n in result.neighbors}


def test_json_list_of_interfaces():
    r = lldp.parse_json((FIX / "lldpctl_json" / "synthetic_roce_gpu_node_4nics_two_leaves.txt").read_text())
    assert r.source == "lldpctl -f json" and cabling(r) == CABLING
    n = r.neighbors[0]
    assert (n.chassis_id, n.chassis_id_type, n.mgmt_ips, n.capabilities, n.port_id_type, n.ttl, n.rid) == (
        "0c:42:a1:5e:10:00", "mac", ("10.20.0.11",), ("Bridge", "Router"), "ifname", 120, 1)


def test_json_single_interface_object_and_chassis_without_sysname():
    chassis = {"id": {"type": "mac", "value": "aa:bb:cc:00:00:01"}}
    port = {"id": {"type": "mac", "value": "aa:bb:cc:00:00:09"}, "descr": "swp9"}
    doc = {"lldp": {"interface": {"eth2": {"via": "LLDP", "chassis": chassis, "port": port}}}}
    (n,) = lldp.parse_json(json.dumps(doc)).neighbors
    assert (n.interface, n.switch, n.chassis_id, n.port_id_type, n.switch_port) == (
        "eth2", None, "aa:bb:cc:00:00:01", "mac", "swp9")


def test_json0_form():
    r = lldp.parse_json((FIX / "lldpctl_json" / "synthetic_json0_one_nic.txt").read_text())
    (n,) = r.neighbors
    assert r.source == "lldpctl -f json0"
    assert (n.interface, n.switch, n.switch_port, n.mgmt_ips) == (
        "ens3f0np0", "leaf-a02", "Ethernet0", ("10.20.0.12", "fe80::e42:a1ff:fe5e:2000"))


def test_text_form_gives_the_same_cabling():
    r = lldp.parse_text((FIX / "lldpcli_neighbors" / "synthetic_roce_gpu_node_4nics_two_leaves.txt").read_text())
    assert cabling(r) == CABLING
    n = r.neighbors[3]
    assert (n.via, n.rid, n.age, n.capabilities, n.port_descr) == (
        "LLDP", 4, "0 day, 02:41:07", ("Bridge", "Router"), "Ethernet8 to gpu-r01")
    assert n.switch_descr.startswith("SONiC Software Version")


def test_no_neighbour_is_an_empty_result_with_a_warning():
    assert lldp.parse_json('{"lldp": {}}').warnings
    r = lldp.parse_text("-" * 79 + "\nLLDP neighbors:\n" + "-" * 79 + "\n")
    assert r.neighbors == () and r.warnings


@pytest.mark.parametrize("parse,text,line_no,reason", [
    (lldp.parse_json, "", 0, "empty"),
    (lldp.parse_json, '{"lldp": {\n  "interface": [\n}', 3, "not JSON"),
    (lldp.parse_json, '{"ports": []}', 1, "without an 'lldp' object"),
    (lldp.parse_text, "", 0, "empty"),
    (lldp.parse_text, "hello\n", 1, "expected 'Interface:"),
    (lldp.parse_text, "Interface:    eth0, via: LLDP\n  Chassis:\nrubbish\n", 3, "unrecognised line"),
])
def test_errors_name_the_line(parse, text, line_no, reason):
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.line_no == line_no and reason in info.value.reason


def test_detect_tells_json_from_text():
    for kind in ("lldpctl_json", "lldpcli_neighbors"):
        for path in sorted((FIX / kind).glob("*.txt")):
            assert detect_kind(path.read_text()) == kind, path.name


test_fuzz_text_any_text, test_fuzz_text_mutated = safety_tests(
    lldp.parse_text, "lldpcli_neighbors", mutated_lines(fixture_lines("lldpcli_neighbors")), detect=lldp.detect_text,
    max_examples=100)
test_fuzz_json_any_text, test_fuzz_json_mutated = safety_tests(
    lldp.parse_json, "lldpctl_json", mutated_lines(fixture_lines("lldpctl_json"), max_size=60), detect=lldp.detect_json,
    max_examples=100)
