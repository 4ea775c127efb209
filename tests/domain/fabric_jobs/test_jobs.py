"""Job contention (apps/domain/fabric_jobs.py): NCCL's ring and double binary tree over a job's nodes, the
flows they put on leaf uplinks, leaf oversubscription and rail alignment, on the real SuperPOD capture and
small hand-built fabrics."""

from __future__ import annotations

import re

import pytest

from apps.domain import fabric
from apps.domain.fabric_jobs import (design_oversubscription, job_contention, leaf_loads, rail_leaves, ring_flows,
                                     tree_flows, tree_parents)
from apps.domain.fabric_paths import FabricView
from tests.domain.fabric_paths.inputs import ca, ibstat_doc, link, sw

LEAF_03_08 = "MF0;B09-P1-IBLEAF-03-08:MQM9701/U1"
LEAF_04_08 = "MF0;B09-P1-IBLEAF-04-08:MQM9701/U1"


def parents_of(drawing: dict[int, list[int]], n: int) -> list[int]:
    out = [-1] * n
    for parent, children in drawing.items():
        for c in children:
            out[c] = parent
    return out


def test_trees_are_the_ones_drawn_in_nccl_trees_cc():
    # src/graph/trees.cc v2.30.7-1, the btree illustration (14 ranks) and the double-tree ones (12, 13)
    first14 = parents_of({0: [8], 8: [4, 12], 4: [2, 6], 12: [10, 13], 2: [1, 3], 6: [5, 7], 10: [9, 11]}, 14)
    assert tree_parents(14)[0] == first14
    mirror12 = parents_of({11: [3], 3: [1, 7], 1: [0, 2], 7: [5, 9], 5: [4, 6], 9: [8, 10]}, 12)
    assert tree_parents(12)[1] == mirror12
    shift13 = parents_of({1: [9], 9: [5, 0], 5: [3, 7], 0: [11], 3: [2, 4], 7: [6, 8], 11: [10, 12]}, 13)
    assert tree_parents(13)[1] == shift13


def test_ring_and_tree_flows():
    assert ring_flows(1) == [] and ring_flows(2) == [(0, 1, 1.0), (1, 0, 1.0)]
    flows = tree_flows(4)  # two trees of 3 edges each, both ways, half the data each
    assert len(flows) == 12 and {w for _a, _b, w in flows} == {0.5}


def test_leaf_loads_count_every_adapter_read_off_the_capture(superpod_text, superpod_view):
    block = next(b for b in superpod_text.split("\n\n") if f'# "{LEAF_03_08}" enhanced port 0' in b)
    hosts = [d for d in re.findall(r'^\[\d+\]\s+"H-\w+"\[\d+\]\(\w+\)\s+# "([^"]+)"', block, re.M)
             if "Aggregation Node" not in d]
    spines = re.findall(r'^\[\d+\]\s+"S-\w+"\[\d+\]\s+# "[^"]*IBSPINE', block, re.M)
    assert (len(hosts), len(spines)) == (19, 18)  # 16 DGX HCAs, the UFM and 'ubuntu' nodes' mlx5_0, one unnamed
    row = next(v for v in leaf_loads(superpod_view).values() if v["name"] == LEAF_03_08)
    assert (row["host_links"], row["uplinks"], row["oversubscription"]) == (19, 18, round(19 / 18, 3))
    assert design_oversubscription(superpod_view) == 1.0  # most leaves: 18 host ports, 18 uplinks


def test_superpod_is_rail_optimized_with_one_swapped_host(superpod_view):
    owned = rail_leaves(superpod_view)
    assert owned["rail_optimized"] and owned["usual_adapters"] == 4
    assert owned["skipped"] == ["B11-P1-CUFM-02", "ubuntu"]  # two adapters each: not on the rails
    names = {superpod_view.name(leaf): v["rail"] for leaf, v in owned["leaves"].items()}
    assert (names[LEAF_03_08], names[LEAF_04_08]) == ("HCA-5", "HCA-6")
    assert names["MF0;A09-P1-IBLEAF-01-04:MQM9701/U1"] == "mlx5_0"


def test_a_job_on_one_unit_stays_on_the_rail_leaves(superpod_view):
    hosts = [f"a08-p1-dgx-04-c{i:02d}" for i in (1, 2, 3)]
    r = job_contention(superpod_view, None, hosts, "ring")
    assert r["rail_optimized"] is True and r["rail_aligned"] is True and r["off_rail"] == []
    assert [x["crossings"] for x in r["rails"]] == [0, 0, 0, 0] and [x["local"] for x in r["rails"]] == [3] * 4
    # three 4X NDR adapters over the 16 uplinks of IBLEAF-02-04 and -04-04 (the others have 18)
    assert r["demand_ratio"] == 0.0 and r["oversubscription"] == round(3 * 50 / (16 * 50), 3)
    assert r["rail_leaf"]["mlx5_0"] == {"leaf": superpod_view.attachment(hosts[0], "mlx5_0")["leaf"],
                                        "name": "MF0;A09-P1-IBLEAF-01-04:MQM9701/U1", "hosts": 3, "of": 3}


def test_the_swapped_host_sends_its_rails_across_the_spines(superpod_view):
    hosts = ["b08-p1-dgx-08-c01", "b08-p1-dgx-08-c04"]
    r = job_contention(superpod_view, None, hosts, "ring")
    assert r["rail_aligned"] is False
    assert [(o["nic"], o["leaf_name"], o["leaf_port"], o["rail_of_leaf"]) for o in r["off_rail"]] == [
        ("HCA-5", LEAF_04_08, 1, "HCA-6"), ("HCA-6", LEAF_03_08, 1, "HCA-5")]
    # rails HCA-1 and HCA-2 turn on their leaf; HCA-5 and HCA-6 cross in both directions
    assert [(x["rail"], x["crossings"], x["local"]) for x in r["rails"]] == [(0, 0, 2), (1, 0, 2), (2, 2, 0), (3, 2, 0)]
    by_leaf = {x["name"]: x for x in r["leaves"]}
    assert (by_leaf[LEAF_03_08]["flows_out"], by_leaf[LEAF_03_08]["flows_in"]) == (2.0, 2.0)
    assert by_leaf[LEAF_03_08]["flows_per_uplink"] == round(2 / 18, 3)


def test_documents_give_the_rail_order_and_name_what_the_fabric_lacks(superpod_view):
    # a real H100 ibstat (mlx5_0, 1, 4-9 at NDR, and a RoCE bond) sent by a08-p1-dgx-04-c01
    doc, _results = ibstat_doc("gpud_h100_8x_cx7_ndr_ib_plus_bluefield3_eth.txt", "a08-p1-dgx-04-c01")
    r = job_contention(superpod_view, [doc], ["a08-p1-dgx-04-c01", "a08-p1-dgx-04-c02"], "tree")
    assert r["unattached"] == ["a08-p1-dgx-04-c01/mlx5_6", "a08-p1-dgx-04-c01/mlx5_7", "a08-p1-dgx-04-c01/mlx5_8",
                               "a08-p1-dgx-04-c01/mlx5_9", "a08-p1-dgx-04-c01/mlx5_bond_0"]
    assert [x["nics"]["a08-p1-dgx-04-c01"] for x in r["rails"]][:4] == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5"]
    assert len(r["rails"]) == 9 and r["missing"] == []


def uplink_short() -> dict:
    """
    Synthetic: three leaves of four hosts each (one 4X NDR link per host: 200 GB/s toward the hosts)
    under four spines. leaf2 and leaf3 have one cable to every spine (200 GB/s of uplinks, 1:1);
    leaf1 has lost three of its four, only its cable to spine1 is left (50 GB/s, 4:1).

        leaf1 (a1-a4) -- spine1
        leaf2 (b1-b4) -- spine1, spine2, spine3, spine4
        leaf3 (c1-c4) -- spine1, spine2, spine3, spine4
    """
    names = [f"{x}{i}" for x in "abc" for i in range(1, 5)]
    g = {n: f"0x{i:016x}" for i, n in enumerate(["leaf1", "leaf2", "leaf3", "spine1", "spine2", "spine3", "spine4",
                                                 *names], 1)}
    links = []
    for k, leaf in enumerate(("leaf1", "leaf2", "leaf3")):
        for i in range(4):
            links.append(link(g["abc"[k] + str(i + 1)], 1, g[leaf], i + 1))
        for s in range(4 if leaf != "leaf1" else 1):
            links.append(link(g[leaf], 10 + s, g[f"spine{s + 1}"], k + 1))
    return {"switches": [sw(g[n], n) for n in ("leaf1", "leaf2", "leaf3", "spine1", "spine2", "spine3", "spine4")],
            "cas": [ca(g[n], f"{n} mlx5_0") for n in names], "links": links, "warnings": []}


def test_host_order_decides_how_many_flows_leave_a_leaf():
    view = FabricView.build(fabric.build_fabric(uplink_short()))
    assert design_oversubscription(view) == 1.0
    block = job_contention(view, None, ["a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"], "ring")
    leaf1 = next(x for x in block["leaves"] if x["name"] == "leaf1")
    assert (leaf1["job_oversubscription"], leaf1["flows_out"], leaf1["flows_in"]) == (4.0, 1.0, 1.0)
    assert leaf1["demand_ratio"] == round(46.5 / 50, 3)
    mixed = job_contention(view, None, ["a1", "b1", "a2", "b2", "a3", "b3", "a4", "b4"], "ring")
    leaf1 = next(x for x in mixed["leaves"] if x["name"] == "leaf1")
    assert (leaf1["flows_out"], leaf1["demand_ratio"]) == (4.0, round(4 * 46.5 / 50, 3))
    assert mixed["worst_leaf"] == "leaf1" and mixed["demand_ratio"] == leaf1["demand_ratio"]
    tree = job_contention(view, None, ["a1", "b1", "a2", "b2", "a3", "b3", "a4", "b4"], "tree")
    assert next(x for x in tree["leaves"] if x["name"] == "leaf1")["flows_out"] > 1.0
    assert mixed["rail_optimized"] is False and mixed["rail_aligned"] is None


def test_unknown_algorithm_and_hosts():
    view = FabricView.build(fabric.build_fabric(uplink_short()))
    with pytest.raises(ValueError, match="ring, tree"):
        job_contention(view, None, ["a1"], "nvls")
    r = job_contention(view, None, ["a1", "ghost"], "ring")
    assert r["missing"] == ["ghost"] and r["nodes"] == 2
