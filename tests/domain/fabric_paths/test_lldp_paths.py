"""The rail model with LLDP's neighbours (RoCE/Ethernet ports no InfiniBand discovery sees): each NIC's
switch is named; two NICs on one switch meet there; the switches between two different ones stay assumed.
Documents and neighbours are SYNTHETIC (tests/domain/fabric_paths/inputs.py ``nic_doc``)."""

from __future__ import annotations

from apps.domain.cluster import path_between
from tests.domain.fabric_paths.inputs import nic_doc


def test_two_nics_on_one_lldp_switch_meet_there():
    a, b = nic_doc("roce-01", link_layer="Ethernet"), nic_doc("roce-02", link_layer="Ethernet")
    lldp = {"roce-01": {"mlx5_0": {"switch": "leaf-a01", "switch_port": "Ethernet0"}},
            "roce-02": {"mlx5_0": {"switch": "leaf-a01", "switch_port": "Ethernet8"}}}
    p = path_between(a, "GPU0", b, "GPU0", neighbors=lldp)
    switches = [e for e in p["fabric_hops"] if e["kind"] == "switch"]
    assert [(s["name"], s["assumed"]) for s in switches] == [("leaf-a01", False)]
    assert [h["to"] for h in p["hops"] if h["kind"] == "fabric"] == ["leaf-a01", "mlx5_0"]
    assert "cabled both on leaf-a01 (ports Ethernet0 and Ethernet8, LLDP)" in p["explanation"]
    assert p["fabric"] == "assumed"  # no discovery: what is above the leaves is not known


def test_two_lldp_switches_keep_an_assumed_path_between_them():
    a, b = nic_doc("roce-01", link_layer="Ethernet"), nic_doc("roce-02", link_layer="Ethernet")
    lldp = {"roce-01": {"mlx5_0": {"switch": "leaf-a01", "switch_port": "Ethernet0"}},
            "roce-02": {"mlx5_0": {"switch": "leaf-b01", "switch_port": "Ethernet4"}}}
    p = path_between(a, "GPU0", b, "GPU0", neighbors=lldp)
    assert [(s["name"], s["assumed"]) for s in p["fabric_hops"] if s["kind"] == "switch"] == [
        ("leaf-a01", False), ("leaf-b01", False)]
    middle = [h for h in p["hops"] if h["kind"] == "fabric"][1]
    assert (middle["from"], middle["to"]) == ("leaf-a01", "leaf-b01") and "LLDP names both switches" in middle["note"]
    links = [e for e in p["fabric_hops"] if e["kind"] == "fabric_link"]
    assert [e["assumed"] for e in links] == [False, True, False]
    assert (links[0]["to_port"], links[-1]["from_port"]) == ("Ethernet0", "Ethernet4")


def test_without_both_neighbours_the_rail_model_is_unchanged():
    a, b = nic_doc("roce-01", link_layer="Ethernet"), nic_doc("roce-02", link_layer="Ethernet")
    only_one = {"roce-01": {"mlx5_0": {"switch": "leaf-a01", "switch_port": "Ethernet0"}}}
    assert path_between(a, "GPU0", b, "GPU0", neighbors=only_one) == path_between(a, "GPU0", b, "GPU0")

