"""F08 and H08, the rules that compare nodes (apps/domain/fleet_rules.py), on real captures: four real ibstat
captures as the nodes of one fleet, and the real ibnetdiscover of a DGX H100 SuperPOD (582 CAs, 40 switches)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from apps.domain.analysis import analyze_host
from apps.domain.fabric import build_fabric
from apps.domain.fleet_rules import FLEET_RULE_IDS, evaluate_fleet, rule_f08
from apps.domain.parsers import parse

REAL = Path("/work/shared/realdata")
SUPERPOD = REAL / "ibnetdiscover/nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.out"
H100_IBSTAT = {"h100-a": "gpud_h100_8x_cx7_ndr_ib_plus_bluefield3_eth.txt",
               "h100-b": "gpud_h100_12ca_roce_3_down_disabled.txt",
               "h100-c": "mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt"}


def node(host: str, capture: str) -> dict:
    return analyze_host({"ibstat": (REAL / "ibstat" / capture).read_text()}, host).to_dict()


def active_ib(capture: str) -> list[str]:
    text = (REAL / "ibstat" / capture).read_text()
    return [m.group(1) for m in re.finditer(r"CA '(\w+)'(?:(?!CA ').)*?State: Active(?:(?!CA ').)*?Link layer: "
                                            r"InfiniBand", text, re.S)]


@pytest.fixture(scope="module")
def superpod():
    return build_fabric(parse("ibnetdiscover", SUPERPOD.read_text()))


def test_three_h100_nodes_with_eight_active_ndr_ports_each_is_no_h08():
    assert {len(active_ib(c)) for c in H100_IBSTAT.values()} == {8}
    report = evaluate_fleet([node(h, c) for h, c in H100_IBSTAT.items()])
    assert report["findings"] == []
    assert report["unknowns"] == ["F08: the rail cabling needs the fabric's view (ibnetdiscover or iblinkinfo): not "
                                  "checked."]


def test_a_node_with_four_active_ports_among_eights_is_h08():
    b300 = "dell_xe9780_b300_cx8_down_cx7_active.txt"
    assert active_ib(b300) == ["mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5"]
    docs = [node(h, c) for h, c in H100_IBSTAT.items()] + [node("xe9780", b300)]
    [h08] = evaluate_fleet(docs)["findings"]
    assert (h08["rule"], h08["severity"], h08["hosts"]) == ("H08", "MED", ["xe9780"])
    assert h08["devices"] == [f"xe9780/mlx5_{i}" for i in (2, 3, 4, 5)]
    assert h08["message"].startswith("xe9780 has 4 Active compute InfiniBand port(s) (mlx5_2, mlx5_3, mlx5_4 and "
                                     "mlx5_5), where 3 other node(s) of this layout")
    assert "have 8" in h08["message"] and "NCCL_IGNORE_NET_MISMATCH=1" in h08["message"]


def test_nodes_without_port_states_are_unknown_not_counted():
    topo_only = analyze_host({"nvidia_smi_topo": (REAL / "topo/sglang_30401_8xh100_hbm3_8nic.txt").read_text()},
                             "topo-only").to_dict()
    assert all(n["state"] is None for n in topo_only["nics"])
    report = evaluate_fleet([topo_only, node("h100-a", H100_IBSTAT["h100-a"])])
    assert report["findings"] == []  # not enough nodes of one layout with known states


def test_superpod_host_with_rails_5_and_6_swapped_is_f08(superpod):
    text = SUPERPOD.read_text()
    # the capture itself: b08-p1-dgx-08-c01's HCA-5 hangs on leaf 04-08 and its HCA-6 on leaf 03-08, port 1
    leaf_of = {}
    for block in text.split("\n\n"):
        m = re.search(r'# "MF0;(B09-P1-IBLEAF-0[34]-08):', block)
        if m:
            for port, desc in re.findall(r'^\[(\d+)\]\s+"H-\w+"\[1\]\(\w+\)\s+# "(b08-p1-dgx-08-c01 HCA-\d)"', block, re.M):
                leaf_of[desc] = (m.group(1), int(port))
    assert leaf_of == {"b08-p1-dgx-08-c01 HCA-5": ("B09-P1-IBLEAF-04-08", 1),
                       "b08-p1-dgx-08-c01 HCA-6": ("B09-P1-IBLEAF-03-08", 1)}
    report = evaluate_fleet([], superpod)
    [f08] = report["findings"]
    assert (f08["rule"], f08["severity"], f08["hosts"]) == ("F08", "MED", ["b08-p1-dgx-08-c01"])
    assert f08["devices"] == ["b08-p1-dgx-08-c01/HCA-5", "b08-p1-dgx-08-c01/HCA-6"]
    assert ("HCA-5 is cabled to MF0;B09-P1-IBLEAF-04-08:MQM9701/U1 port 1, the leaf 13 other host(s) use for HCA-6"
            in f08["message"])
    assert "its HCA-5 and HCA-6 cables are swapped" in f08["message"] and "Swap the cables back" in f08["fix"]
    # what the fabric cannot tell is said: adapters without a host name, and the two 2-adapter UFM/mgmt hosts
    nameless, others = report["unknowns"]
    assert nameless.startswith("F08: 69 host adapter(s) have no host name") and "MT4129 ConnectX7" in nameless
    assert others.startswith("F08: B11-P1-CUFM-02 and ubuntu show another number of adapters")


def test_single_switch_fabric_is_not_rail_optimized_so_only_cross_nic_0_is_f08():
    G = build_fabric(parse("ibnetdiscover", (REAL / "ibnetdiscover/ibm_pcm_2node_mt43132_8port_switch_sdr_2009.txt")
                           .read_text()))
    assert rule_f08(G) == []
    hosts = sorted({G.nodes[n]["host"] for n in G if G.nodes[n].get("host")})
    assert len(hosts) >= 2
    [f08] = rule_f08(G, env={hosts[0]: {"NCCL_CROSS_NIC": "0"}})
    assert f08["hosts"] == [hosts[0]] and "not rail-optimized" in f08["message"]


def test_fleet_rule_ids():
    assert FLEET_RULE_IDS == ("F08", "H08")


def test_every_rule_of_domain_md_is_implemented_once():
    """domain.md section 1 lists 40 rules; each is a host rule (apps.domain.findings) or a fleet rule, not both."""
    from apps.domain.findings import rule_ids

    table = Path("/work/shared/docs/domain.md").read_text().split("## 2.", 1)[0]
    documented = set(re.findall(r"(?m)^\| ([PNGFH]\d\d) \|", table))
    assert len(documented) == 40
    host = set(rule_ids())
    assert not host & set(FLEET_RULE_IDS)
    assert host | set(FLEET_RULE_IDS) == documented | {"X01", "X02"}
