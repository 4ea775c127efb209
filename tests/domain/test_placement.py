"""Placement of a job (apps/domain/placement.py) on the demo fleet's documents.

The documents are the real analysis (``analysis.analyze_host``) of the demo fleet's SYNTHETIC hosts
(``apps/ingest/demo/fleet.py``: real captures' layouts under generated names, five odd ones out).
The fabric is a SYNTHETIC plain fat tree written here, each host's 8 NICs on one leaf, leaves
joined by one spine over 2 HDR cables each (16 host links against 2 uplinks: heavily
oversubscribed)::

                       spine
          2x /          2x |          2x \\
        leafA            leafB            leafC
      n01 n02        n04 n05 n07     n08 n10 n11 n12
"""

from __future__ import annotations

import pytest

from apps.domain.analysis import analyze_host
from apps.domain.fabric import attach_hosts, build_fabric
from apps.domain.fabric_paths import FabricView
from apps.domain.placement import PlacementError, choose_gpus, host_problems, job_shape, place, render_text
from apps.ingest.demo.fleet import fleet_hosts

LEAVES = {"leafA": ["h100-n01", "h100-n02"], "leafB": ["h100-n04", "h100-n05", "h100-n07"],
          "leafC": ["h100-n08", "h100-n10", "h100-n11", "h100-n12"]}


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    wanted = {f"h100-n{i:02d}" for i in range(1, 16)} | {"a100-n01", "a100-n02", "l40s-n01", "l40s-n02", "l40s-n03"}
    return [analyze_host(h.snapshots[-1].sections, h.hostname).to_dict() for h in fleet_hosts()
            if h.hostname in wanted]


def synthetic_fat_tree() -> FabricView:
    switches = [{"guid": "0x100", "name": "MF0;spine:MQM8700/U1"}]
    links, cas = [], []
    guid = 0x1000
    for k, (leaf, hosts) in enumerate(LEAVES.items()):
        lg = f"0x{0x200 + k:x}"
        switches.append({"guid": lg, "name": f"MF0;{leaf}:MQM8700/U1"})
        for p in (1, 2):
            links.append({"a": {"guid": lg, "port": 40 + p}, "b": {"guid": "0x100", "port": 10 * k + p},
                          "width": "4X", "speed": "HDR"})
        port = 1
        for host in hosts:
            for nic in range(8):
                guid += 1
                cas.append({"guid": f"0x{guid:x}", "name": f"{host} mlx5_{nic}", "host": host})
                links.append({"a": {"guid": lg, "port": port}, "b": {"guid": f"0x{guid:x}", "port": 1},
                              "width": "4X", "speed": "HDR"})
                port += 1
    G = build_fabric({"switches": switches, "links": links, "cas": cas})
    return FabricView.build(G, attach_hosts(G))


@pytest.fixture(scope="module")
def view() -> FabricView:
    return synthetic_fat_tree()


def test_a_job_that_fits_one_leaf_takes_the_smallest_leaf_that_holds_it(docs, view):
    r = place(docs, nodes=3, gpus_per_node=8, view=view)
    assert [h["host"] for h in r["hosts"]] == LEAVES["leafB"]
    assert r["fabric"] == {"known": True, "leaves": ["leafB"], "leaf_sets": 1, "max_hops": None, "unattached": []}
    assert r["expected"]["demand_ratio"] == 0.0 and not r["expected"]["fabric_limited"]
    assert r["nodelist"] == "h100-n[04-05,07]"
    assert r["hostfile"] == "h100-n04 slots=8\nh100-n05 slots=8\nh100-n07 slots=8\n"
    assert r["cuda_visible_devices"] == {h: "0,1,2,3,4,5,6,7" for h in LEAVES["leafB"]}
    assert r["nccl_ib_hca"]["h100-n04"] == "=" + ",".join(f"mlx5_{i}" for i in range(8))
    assert [h["first_rank"] for h in r["hosts"]] == [0, 8, 16]
    assert "--nnodes=3 --nproc-per-node=8" in r["torchrun"] and "--rdzv-endpoint=h100-n04:29500" in r["torchrun"]
    assert r["launch"]["h100-n05"].startswith("CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 "
                                              "NCCL_IB_HCA==mlx5_0,")


def test_a_job_wider_than_a_leaf_fills_the_largest_leaf_then_the_nearest(docs, view):
    r = place(docs, nodes=5, gpus_per_node=8, view=view)
    assert [h["host"] for h in r["hosts"]] == LEAVES["leafC"] + ["h100-n04"]   # leafB: larger than leafA
    assert r["fabric"]["leaves"] == ["leafB", "leafC"] and r["fabric"]["max_hops"] == 2
    # 16 HDR host links against 2 HDR uplinks: the ring's two crossings ask more than the uplinks carry
    assert r["expected"]["fabric_limited"] and r["expected"]["demand_ratio"] > 1
    assert r["expected_busbw_gbs"] == pytest.approx(r["expected"]["host_busbw_gbs"] / r["expected"]["demand_ratio"],
                                                    abs=0.01)


def test_random_placement_is_seeded_and_no_better_than_the_chosen_one(docs, view):
    a = place(docs, nodes=3, gpus_per_node=8, view=view, seed=7)
    b = place(docs, nodes=3, gpus_per_node=8, view=view, seed=7)
    assert a["random"]["hosts"] == b["random"]["hosts"] and a["random"]["seed"] == 7
    assert len(a["random"]["hosts"]) == 3
    assert a["random_busbw_gbs"] is not None and a["random_busbw_gbs"] <= a["expected_busbw_gbs"]


def test_hosts_with_bandwidth_findings_are_skipped_with_their_reason(docs):
    r = place(docs, nodes=2, gpus_per_node=8)
    reasons = {s["host"]: s["reason"] for s in r["skipped"]}
    assert reasons["h100-n03"].startswith("P06 HIGH")  # GPU link at x8
    assert reasons["h100-n06"].startswith("F01 HIGH")  # a compute port down
    assert reasons["h100-n09"].startswith("N01 HIGH")  # NVLinks inactive
    assert reasons["h100-n15"].startswith("F02 HIGH")  # a 200G cable on the 400G fabric
    assert reasons["l40s-n01"] == "too few GPUs: 4, the job needs 8 per node"
    placed = {h["host"] for h in r["hosts"]}
    assert not placed & set(reasons)
    assert r["fabric"]["known"] is False and any("no fabric discovery" in n for n in r["notes"])
    assert r["layout"]["platform"] == "8x NVIDIA H100 80GB HBM3"


def test_a_finding_every_host_of_a_layout_shares_is_the_layouts_design(docs):
    l40s = [d for d in docs if d["hostname"].startswith("l40s")]
    g01 = [f for f in l40s[0]["findings"] if f["rule"] == "G01" and f["severity"] == "HIGH"]
    assert g01, "the L40S layout's NICs are too far for GPUDirect RDMA"
    assert any(p.startswith("G01 HIGH") for p in host_problems(l40s[0]))
    shared = {(f["rule"], f["severity"], tuple(f["devices"])) for f in g01}
    assert host_problems(l40s[0], shared) == []


def test_gpus_of_a_partial_host_spread_over_distinct_nics(docs):
    a100 = next(d for d in docs if d["hostname"] == "a100-n01")  # two GPUs per HDR NIC
    gpus, group = choose_gpus(a100, 4)
    assert gpus == ["GPU0", "GPU2", "GPU4", "GPU6"] and "NVLink" in group
    r = place([a100, next(d for d in docs if d["hostname"] == "a100-n02")], nodes=2, gpus_per_node=4)
    assert r["nccl_ib_hca"]["a100-n01"] == "=mlx5_0,mlx5_1,mlx5_2,mlx5_3"
    assert r["cuda_visible_devices"]["a100-n02"] == "0,2,4,6"
    assert r["expected_busbw_gbs"] is not None


def test_a_gpu_count_is_spread_over_the_fewest_nodes(docs):
    assert job_shape(8, gpus=64) == (8, 8) and job_shape(8, gpus=12) == (2, 6) and job_shape(4, gpus=6) == (2, 3)
    r = place(docs, gpus=16)
    assert (r["job"]["nodes"], r["job"]["gpus_per_node"]) == (2, 8)


def test_errors_name_the_field_and_say_how_many_hosts_exist(docs):
    with pytest.raises(PlacementError) as e:
        place(docs, nodes=40, gpus_per_node=8)
    assert e.value.field == "nodes"
    assert f"the cluster has {len(docs)} hosts" in str(e.value) and "P06 HIGH" in str(e.value)
    assert "the largest layout has 11 healthy hosts" in str(e.value)
    with pytest.raises(PlacementError, match="gpus_per_node: 9 GPUs per node, but no host has more than 8"):
        place(docs, nodes=1, gpus_per_node=9)
    for bad in (0, -1, "2", True, 2.5):
        with pytest.raises(PlacementError, match="nodes: must be a whole number"):
            place(docs, nodes=bad, gpus_per_node=1)
    with pytest.raises(PlacementError, match="^nodes: give nodes"):
        place(docs)
    with pytest.raises(PlacementError, match="^cluster:"):
        place([], nodes=1)


def test_the_text_form_carries_what_to_paste(docs, view):
    text = render_text(place(docs, nodes=3, gpus_per_node=8, view=view))
    assert "# Slurm: --nodelist=h100-n[04-05,07]" in text and "h100-n07 slots=8" in text
    assert "# expected busbw:" in text and "# random placement (seed 0):" in text
    assert "# skipped h100-n03: P06 HIGH" in text
