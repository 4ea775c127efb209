"""FabricView (apps/domain/fabric_paths.py): NIC -> leaf lookups and leaf-to-leaf route summaries on the
real DGX H100 SuperPOD capture and on small hand-built fabrics, checked against the capture's text and
against fabric.route."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from apps.domain import fabric
from apps.domain.fabric_paths import ROUTE_CACHE, FabricView
from bench.fabric_synth import synthetic_ibnetdiscover
from apps.domain.parsers import ibnetdiscover, iblinkinfo
from tests.domain.fabric_paths.inputs import FIXTURES, REAL, ca, link, sw, two_leaves

LEAF_01_04 = "MF0;A09-P1-IBLEAF-01-04:MQM9701/U1"
LEAF_02_04 = "MF0;A09-P1-IBLEAF-02-04:MQM9701/U1"


def spine_cables(text: str, leaf: str) -> Counter:
    """Read off the capture: the cables from ``leaf``'s Switch block to each IBSPINE switch."""
    block = next(b for b in text.split("\n\n") if f'# "{leaf}" enhanced port 0' in b)
    return Counter(re.findall(r'^\[\d+\]\s+"S-\w+"\[\d+\]\s+# "([^"]*IBSPINE[^"]*)"', block, re.M))


def test_nic_to_leaf_is_the_capture_line(superpod_view):
    # [1]	"H-e09d7303007a4fbc"[1](e09d7303007a4fbc) 		# "a08-p1-dgx-04-c01 mlx5_0" lid 614 4xNDR
    row = superpod_view.attachment("a08-p1-dgx-04-c01", "mlx5_0")
    assert (row["leaf_name"], row["leaf_port"], row["ca"], row["match"]) == (
        LEAF_01_04, 1, "ib:0xe09d7303007a4fbc", "name")
    assert superpod_view.attachment("A08-P1-DGX-04-C01.cluster", "mlx5_0") == row  # short, case-blind host match
    assert superpod_view.cable(row)["width"] == "4X" and superpod_view.cable(row)["speed"] == "NDR"
    assert sorted(superpod_view.host_nics("a08-p1-dgx-04-c01")) == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5"]
    assert superpod_view.attachment("a08-p1-dgx-04-c01", "mlx5_2") is None
    assert superpod_view.owner("ib:0xe09d7303007a4fbc") == ("a08-p1-dgx-04-c01", "mlx5_0")


def test_cross_leaf_route_counts_the_shared_spines_read_off_the_capture(superpod_text, superpod_view):
    a, b = spine_cables(superpod_text, LEAF_01_04), spine_cables(superpod_text, LEAF_02_04)
    shared = set(a) & set(b)
    assert len(a) == 9 and len(shared) == 8  # IBLEAF-02-04 has no cable to one of the nine spines
    r = superpod_view.route("a08-p1-dgx-04-c01", "mlx5_0", "a08-p1-dgx-04-c02", "mlx5_1")
    assert r["fabric"] == "discovered" and r["reachable"]
    assert [s["name"] for s in r["switches"]][::2] == [LEAF_01_04, LEAF_02_04]
    assert r["switches"][1]["name"] in shared and r["switches"][1]["choices"] == 8
    assert [s["tier"] for s in r["switches"]] == ["leaf", "spine", "leaf"]
    assert r["equal_cost_paths"] == len(shared)
    assert r["equal_cost_port_paths"] == sum(a[s] * b[s] for s in shared)  # 2 x 2 cables per spine
    assert r["cut"]["leaf_cut_gbs"] == 50.0 * sum(min(a[s], b[s]) for s in shared)  # 16 cables of 4X NDR
    assert (r["cut"]["gbs"], r["cut"]["where"]) == (50.0, "host link")
    host_a, up, down, host_b = r["links"]
    assert (host_a["tier"], up["tier"], down["tier"], host_b["tier"]) == ("host-leaf", "leaf-spine", "spine-leaf",
                                                                         "leaf-host")
    assert (up["links"], up["stage_bundles"], up["stage_links"], up["stage_gbs"]) == (2, 8, 16, 800.0)
    assert (host_b["to_name"], host_b["from_port"]) == ("a08-p1-dgx-04-c02 mlx5_1", 2)


def test_same_leaf_route_turns_on_the_leaf(superpod_view):
    r = superpod_view.route("a08-p1-dgx-04-c01", "mlx5_0", "a08-p1-dgx-04-c02", "mlx5_0")
    assert [s["name"] for s in r["switches"]] == [LEAF_01_04]
    assert [(x["from_port"], x["to_port"]) for x in r["links"]] == [(1, 1), (2, 1)]
    assert (r["equal_cost_paths"], r["cut"]["leaf_cut_gbs"], r["cut"]["gbs"]) == (1, None, 50.0)


def test_view_agrees_with_fabric_route_on_random_superpod_pairs(superpod, superpod_view):
    rows = [(h, r) for h, rs in superpod_view.attachments["hosts"].items() for r in rs if r["leaf"]]
    rng = random.Random(7)
    for _ in range(60):
        (ha, a), (hb, b) = rng.sample(rows, 2)
        v = superpod_view.route(ha, a["nic"], hb, b["nic"], port_a=a["port"], port_b=b["port"])
        r = fabric.route(superpod, a["ca"], b["ca"])
        assert (v["equal_cost_paths"], v["equal_cost_port_paths"]) == (
            r["equal_cost_paths"], r["equal_cost_port_paths"])
        assert (v["cut"]["gbs"], v["cut"]["leaf_cut_gbs"], v["cut"]["where"]) == (
            r["bottleneck_gbs"], r["leaf_cut_gbs"], r["bottleneck"])
        assert len(v["links"]) == len(r["hops"])


def test_view_agrees_with_fabric_route_on_a_three_tier_synthetic_fat_tree():
    G = fabric.build_fabric(ibnetdiscover.parse(synthetic_ibnetdiscover(
        pods=3, leaves_per_pod=3, spines_per_pod=2, cores=4, hcas_per_leaf=2, core_links_per_spine=2)))
    view = FabricView.build(G)
    cas = fabric.host_cas(G)
    for a in cas[::3]:
        for b in cas[1::5]:
            if a == b:
                continue
            ha, na = view.owner(a)
            hb, nb = view.owner(b)
            v, r = view.route(ha, na, hb, nb), fabric.route(G, a, b)
            assert (v["equal_cost_paths"], v["cut"]["gbs"], v["cut"]["leaf_cut_gbs"], len(v["links"])) == (
                r["equal_cost_paths"], r["bottleneck_gbs"], r["leaf_cut_gbs"], len(r["hops"]))


def test_cross_pod_route_climbs_to_the_core():
    # the synthetic fat tree: pod 0's leaf 0 to pod 1's leaf 0 through 2 spines, 4 cores, 2 spines
    # (spine j of every pod reaches cores 2j and 2j + 1); two HCAs per host, two per leaf
    G = fabric.build_fabric(ibnetdiscover.parse(synthetic_ibnetdiscover(
        pods=2, leaves_per_pod=2, spines_per_pod=2, cores=4, hcas_per_leaf=2, core_links_per_spine=2,
        hcas_per_host=2)))
    view = FabricView.build(G)
    r = view.route("node00000", "mlx5_0", "node00002", "mlx5_0")  # on leaf-00-00 and leaf-01-00
    assert [s["tier"] for s in r["switches"]] == ["leaf", "spine", "core", "spine", "leaf"]
    assert [s["choices"] for s in r["switches"]] == [1, 2, 4, 2, 1]
    assert r["equal_cost_paths"] == 4 and r["cut"]["leaf_cut_gbs"] == 100.0


def test_narrow_uplinks_make_the_cut_the_fabric():
    """
    The two-leaf fabric with one 1X NDR cable (12.5 GB/s) per leaf-spine pair: 2 x 12.5 = 25 GB/s
    between the leaves, less than n1's 50 GB/s link.
    """
    view = FabricView.build(fabric.build_fabric(two_leaves(uplink_width="1X", cables=1)))
    r = view.route("n1", "mlx5_0", "n3", "mlx5_0")
    cut = r["cut"]
    assert (cut["gbs"], cut["leaf_cut_gbs"], cut["where"], cut["stage"]) == (25.0, 25.0, "fabric", 1)
    assert cut["expected_gbs"] == pytest.approx(25.0 * 0.93)
    assert sorted(cut["bundles"]) == [["leaf1", "spine1"], ["leaf1", "spine2"]]
    assert r["links"][1]["stage_gbs"] == 25.0 and r["links"][1]["gbs"] == 12.5


def test_back_to_back_adapters_are_one_cable():
    # two ConnectX (mlx4_0) cabled to each other, 4X DDR; one still has its default description
    G = fabric.build_fabric(iblinkinfo.parse(
        (REAL / "iblinkinfo" / "archwiki_two_connectx_mlx4_back_to_back_ddr_no_switch.txt").read_text()))
    view = FabricView.build(G)
    named = [h for h in view.hosts()]
    assert len(named) == 1  # the other adapter's description names no host
    a = fabric.host_cas(G)
    other = next(n for n in a if view.owner(n) is None)
    host, nic = view.owner(next(n for n in a if view.owner(n)))
    attachments = {"hosts": {**view.attachments["hosts"],
                             "peer": [{"nic": "mlx4_0", "port": 1, "port_guid": None, "ca": other,
                                       "ca_name": G.nodes[other]["name"], "leaf": None, "leaf_name": None,
                                       "leaf_port": None, "match": "port_guid"}]}, "unmatched": []}
    r = FabricView.build(G, attachments).route(host, nic, "peer", "mlx4_0")
    assert r["switches"] == [] and len(r["links"]) == 1
    # 4X DDR: 4 lanes x 5 Gb/s = 20 Gb/s, 2.5 GB/s per direction
    assert (r["links"][0]["width"], r["links"][0]["speed"], r["cut"]["gbs"]) == ("4X", "DDR", 2.5)


def test_not_attached_nics_say_why(superpod_view):
    r = superpod_view.route("a08-p1-dgx-04-c01", "mlx5_2", "a08-p1-dgx-04-c02", "mlx5_0")
    assert r["fabric"] == "assumed" and r["links"] == []
    assert r["reason"] == ("a08-p1-dgx-04-c01/mlx5_2 is not in the fabric (the fabric joins a08-p1-dgx-04-c01's "
                           "mlx5_0, mlx5_1, mlx5_4 and mlx5_5)")
    assert superpod_view.route("nowhere", "mlx5_0", "a08-p1-dgx-04-c02", "mlx5_0")["reason"] == (
        "no adapter of the fabric is joined to nowhere")


def test_a_link_that_is_not_active_carries_nothing():
    # the synthetic HDR leaf: gpu-a04's port 4 is Initialize/LinkUp (no subnet manager)
    G = fabric.build_fabric(iblinkinfo.parse(
        (FIXTURES / "iblinkinfo" / "synthetic_hdr_leaf_could_be_down_disabled_init.txt").read_text()))
    r = FabricView.build(G).route("gpu-a01", "mlx5_0", "gpu-a04", "mlx5_0")
    assert r["fabric"] == "discovered" and r["reachable"] is False
    assert "port 4 is Initializing" in r["reason"]


def test_a_split_fabric_has_no_route():
    """Synthetic: two leaves whose spine cables are all gone (no switch-to-switch links)."""
    data = two_leaves()
    data["links"] = data["links"][:4]
    r = FabricView.build(fabric.build_fabric(data)).route("n1", "mlx5_0", "n3", "mlx5_0")
    assert r["reachable"] is False and "the fabric is split" in r["reason"]


def test_leaf_routes_are_cached_and_bounded(superpod_view):
    la = superpod_view.attachment("a08-p1-dgx-04-c01", "mlx5_0")["leaf"]
    lb = superpod_view.attachment("a08-p1-dgx-04-c02", "mlx5_1")["leaf"]
    assert superpod_view.leaf_route(la, lb) is superpod_view.leaf_route(la, lb)
    assert ROUTE_CACHE >= 1024


def test_uneven_cables_make_a_cut_that_is_no_single_stage():
    """
    Synthetic: leaf1 has 2 cables to each spine; leaf2 1 cable to spine1 and 3 to spine2 (4X NDR, 50 GB/s
    each). Each stage carries 200 GB/s, but through spine1 only 50 GB/s pass and through spine2 100: the
    cut is 150 GB/s, leaf1 -> spine2 and spine1 -> leaf2, as fabric.route finds.
    """
    g = {n: f"0x{i:016x}" for i, n in enumerate(["leaf1", "leaf2", "spine1", "spine2", "n1", "n3"], 1)}
    links = [link(g["n1"], 1, g["leaf1"], 1), link(g["n3"], 1, g["leaf2"], 1)]
    links += [link(g["leaf1"], 10 + i, g["spine1"], 1 + i) for i in range(2)]
    links += [link(g["leaf1"], 12 + i, g["spine2"], 1 + i) for i in range(2)]
    links += [link(g["leaf2"], 10, g["spine1"], 5)]
    links += [link(g["leaf2"], 11 + i, g["spine2"], 5 + i) for i in range(3)]
    data = {"switches": [sw(g[n], n) for n in ("leaf1", "leaf2", "spine1", "spine2")],
            "cas": [ca(g["n1"], "n1 mlx5_0"), ca(g["n3"], "n3 mlx5_0")], "links": links}
    G = fabric.build_fabric(data)
    view = FabricView.build(G)
    lr = view.leaf_route(view.attachment("n1", "mlx5_0")["leaf"], view.attachment("n3", "mlx5_0")["leaf"])
    assert [s.gbs for s in lr.stages] == [200.0, 200.0] and lr.cut_gbs == 150.0
    assert sorted((view.name(u), view.name(v)) for u, v in lr.cut) == [("leaf1", "spine2"), ("spine1", "leaf2")]
    assert lr.cut_stages == (0, 1)
    assert fabric.route(G, g["n1"], g["n3"])["leaf_cut_gbs"] == 150.0
