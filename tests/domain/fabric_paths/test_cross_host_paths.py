"""GPU -> PCIe -> NIC -> leaf -> spine -> leaf -> NIC -> PCIe -> GPU through the real SuperPOD fabric
(apps/domain/cluster.py with a FabricView), the rail model kept and labelled assumed when a NIC is not in
the fabric, and ``manage.py path --fabric``."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.domain import fabric
from apps.domain.cluster import ClusterIndex, path_between
from apps.domain.fabric_paths import FabricView
from tests.domain.fabric_paths.inputs import BUNDLES, REAL, bundle_doc, nic_doc, two_leaves
from tests.domain.fabric_paths.test_fabric_view import LEAF_01_04, LEAF_02_04

SUPERPOD = REAL / "ibnetdiscover" / "nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.out"
PATH_KEYS = {"src", "dst", "same_host", "mechanism", "hops", "bottleneck", "bottleneck_gbs", "gdr_src", "gdr_dst",
             "rail_src", "rail_dst", "explanation"}  # what apps/explorer and apps/ingest/api.py read
FABRIC_KEYS = {"fabric", "fabric_reason", "equal_cost_paths", "equal_cost_port_paths", "fabric_hops", "fabric_cut",
               "leaf_src", "leaf_dst"}


@pytest.fixture(scope="module")
def dgx():
    """The real DGX A100 topo -m (GPU0 -> mlx5_0, GPU1 -> mlx5_1: PXB, GPUDirect RDMA) on two SuperPOD hosts."""
    return (bundle_doc("dgx_a100_ash6", "a08-p1-dgx-04-c01"), bundle_doc("dgx_a100_ash6", "a08-p1-dgx-04-c02"))


def test_cross_leaf_path_goes_through_the_spines(dgx, superpod_view):
    a, b = dgx
    p = path_between(a, "GPU0", b, "GPU1", fabric=superpod_view)
    assert PATH_KEYS | FABRIC_KEYS <= set(p)
    assert (p["mechanism"], p["fabric"], p["fabric_reason"]) == ("net", "discovered", None)
    kinds = [h["kind"] for h in p["hops"]]
    fabric_hops = [h for h in p["hops"] if h["kind"] == "fabric_link"]
    assert kinds[0] == "pcie" and kinds[-1] == "pcie" and len(fabric_hops) == 4
    assert [(h["from"], h["to"]) for h in fabric_hops][0] == ("mlx5_0", LEAF_01_04)
    assert [(h["from"], h["to"]) for h in fabric_hops][-1] == (LEAF_02_04, "mlx5_1")
    assert "IBSPINE" in fabric_hops[1]["to"] and fabric_hops[1]["from_id"].startswith("ib:0x")
    assert [h["host"] for h in p["hops"] if h["kind"] == "pcie"][0] == "a08-p1-dgx-04-c01"
    nic_link, up = fabric_hops[0], fabric_hops[1]
    assert (nic_link["width"], nic_link["speed"], nic_link["gbs"], nic_link["spec_gbs"]) == ("4X", "NDR", 50.0, 50.0)
    assert (up["links"], up["equal_cost"], up["gbs"], up["spec_gbs"]) == (2, 8, 100.0, 800.0)
    assert p["equal_cost_paths"] == 8 and p["leaf_src"] == LEAF_01_04 and p["leaf_dst"] == LEAF_02_04
    assert [e["kind"] for e in p["fabric_hops"]] == ["fabric_link", "switch", "fabric_link", "switch", "fabric_link",
                                                     "switch", "fabric_link"]
    assert [e["tier"] for e in p["fabric_hops"] if e["kind"] == "switch"] == ["leaf", "spine", "leaf"]
    assert p["fabric_hops"][2]["name"].startswith(LEAF_01_04) and p["fabric_hops"][3]["choices"] == 8
    assert (p["fabric_cut"]["leaf_cut_gbs"], p["fabric_cut"]["where"]) == (800.0, "host link")
    # the real bottleneck is the A100's assumed Gen4 x16 PCIe link, not the fabric
    assert p["hops"][p["bottleneck"]]["kind"] == "pcie"
    assert "8 equal-cost routes through 8 spine switches" in p["explanation"]
    assert f"cabled to {LEAF_01_04} port 1" in p["explanation"]


def test_a_nic_missing_from_the_fabric_keeps_the_rail_model_labelled_assumed(dgx, superpod_view):
    a, b = dgx
    p = path_between(a, "GPU2", b, "GPU2", fabric=superpod_view)  # mlx5_2: the capture has no such adapter
    assert p["fabric"] == "assumed" and "a08-p1-dgx-04-c01/mlx5_2 is not in the fabric" in p["fabric_reason"]
    assert [h["kind"] for h in p["hops"]].count("fabric") == 2
    assert p["equal_cost_paths"] is None and p["fabric_cut"] is None
    assert [e["kind"] for e in p["fabric_hops"]] == ["fabric_link", "switch", "fabric_link"]
    assert all(e["assumed"] for e in p["fabric_hops"])
    assert "so the rail model is assumed" in p["explanation"]


def test_without_a_fabric_nothing_changes_but_the_label(dgx):
    a, b = dgx
    p = path_between(a, "GPU0", b, "GPU1")
    assert p["fabric"] == "assumed" and p["fabric_reason"] is None
    assert [h["kind"] for h in p["hops"]].count("fabric") == 3  # different rails: an assumed spine between


def test_the_fabric_is_the_bottleneck_when_its_cut_is_narrower():
    """
    Synthetic: n1 and n3 on two leaves joined through two spines by one 1X NDR cable each (12.5 GB/s):
    the leaves' cut is 25 GB/s, half of the NICs' 4X NDR links, so the leaf -> spine hop is the bottleneck
    and its figure is both spine bundles together, not one cable.
    """
    view = FabricView.build(fabric.build_fabric(two_leaves(uplink_width="1X", cables=1)))
    p = path_between(nic_doc("n1"), "GPU0", nic_doc("n3"), "GPU0", fabric=view)
    h = p["hops"][p["bottleneck"]]
    assert (h["kind"], h["from"], h["equal_cost"]) == ("fabric_link", "leaf1", 2) and h["to"] in ("spine1", "spine2")
    assert p["bottleneck_gbs"] == pytest.approx(25.0 * 0.93) == h["expected_gbs"]
    assert p["fabric_cut"]["where"] == "fabric" and p["fabric_cut"]["stage"] == 1
    assert "less than the NIC ports, so the fabric is the bottleneck" in p["explanation"]
    assert "over its 2 equal-cost bundles together" in p["explanation"]


def test_the_path_sentence_says_what_to_change_where_the_path_is_limited():
    """SYNTHETIC fabrics: the spines' 1X cables (a leaf -> spine link limits: the fabric is to check) and
    4X NDR everywhere (the NIC's own port limits: nothing between the switches to fix)."""
    from apps.domain.verdict import path_sentence

    narrow = FabricView.build(fabric.build_fabric(two_leaves(uplink_width="1X", cables=1)))
    text = path_sentence(path_between(nic_doc("n1"), "GPU0", nic_doc("n3"), "GPU0", fabric=narrow))
    assert text.startswith("Limited by the fabric link leaf1 -> spine")
    assert "To change: check the fabric between the two leaves (cables, rails)." in text
    full = FabricView.build(fabric.build_fabric(two_leaves()))
    text = path_sentence(path_between(nic_doc("n1"), "GPU0", nic_doc("n3"), "GPU0", fabric=full))
    assert text.startswith("Limited by the fabric link mlx5_0 -> leaf1 at ") and "link link" not in text
    assert "To change: nothing between the switches: a GPU's traffic to another node runs at its NIC port's" in text
    no_gdr = nic_doc("n3")
    no_gdr["gpu_nic"][0] = {**no_gdr["gpu_nic"][0], "gdr": False, "path_class": "SYS"}
    text = path_sentence(path_between(nic_doc("n1"), "GPU0", no_gdr, "GPU0", fabric=full))
    assert text.endswith("; GPUDirect RDMA is off at n3/GPU0 (receiving): its data is staged in host memory "
                         "(see below).")


def test_same_leaf_nics_turn_on_the_leaf():
    view = FabricView.build(fabric.build_fabric(two_leaves()))
    p = path_between(nic_doc("n1"), "GPU0", nic_doc("n2"), "GPU0", fabric=view)
    assert [h["to"] for h in p["hops"] if h["kind"] == "fabric_link"] == ["leaf1", "mlx5_0"]
    assert "cabled to the same leaf, leaf1 (ports 1 and 2)" in p["explanation"]


def test_a_split_fabric_is_no_route_not_an_assumption():
    data = two_leaves()
    data["links"] = data["links"][:4]  # no leaf-spine cable left
    view = FabricView.build(fabric.build_fabric(data))
    p = path_between(nic_doc("n1"), "GPU0", nic_doc("n3"), "GPU0", fabric=view)
    assert (p["mechanism"], p["fabric"], p["bottleneck"]) == ("none", "discovered", None)
    assert p["explanation"].startswith("No route through the fabric: no route between leaf1 and leaf2")
    assert [h["kind"] for h in p["hops"]] == ["pcie", "pcie"]  # both hosts' legs are still shown


def test_cluster_index_carries_the_fabric(dgx, superpod_view):
    idx = ClusterIndex(dgx, fabric=superpod_view)
    p = idx.path("a08-p1-dgx-04-c01/GPU0", "a08-p1-dgx-04-c02/GPU0")
    assert p["fabric"] == "discovered" and p["equal_cost_paths"] == 1
    assert idx.path("a08-p1-dgx-04-c01/GPU0", "a08-p1-dgx-04-c01/GPU1")["fabric"] is None  # same host
    assert idx.path("a08-p1-dgx-04-c01/GPU0", "x/GPU0")["fabric"] is None


# --- manage.py path --fabric ---------------------------------------------------------------------


def _bundles(tmp_path: Path) -> list[str]:
    out = []
    for host in ("a08-p1-dgx-04-c01", "a08-p1-dgx-04-c02"):
        d = tmp_path / host
        d.mkdir(parents=True)
        shutil.copy(BUNDLES / "dgx_a100_ash6" / "nvidia_smi_topo.txt", d / "nvidia_smi_topo.txt")
        (d / "hostname.txt").write_text(host + "\n")
        out += ["--bundle", str(d)]
    return out


def test_path_command_with_fabric_prints_the_switches(tmp_path):
    out = io.StringIO()
    call_command("path", *_bundles(tmp_path), "--src", "a08-p1-dgx-04-c01/GPU0", "--dst", "a08-p1-dgx-04-c02/GPU1",
                 "--fabric", str(SUPERPOD), stdout=out)
    text = out.getvalue()
    assert f"fabric: mlx5_0 -> {LEAF_01_04}  [fabric link]  46.5 GB/s expected (spec 50.0)" in text
    assert "fabric: discovered; 8 equal-cost route(s) (32 counting parallel cables)" in text
    json_out = io.StringIO()
    call_command("path", *_bundles(tmp_path / "j"), "--src", "a08-p1-dgx-04-c01/GPU0", "--dst",
                 "a08-p1-dgx-04-c02/GPU1", "--fabric", str(SUPERPOD), "--format", "json", stdout=json_out)
    assert json.loads(json_out.getvalue())["fabric_cut"]["leaf_cut_gbs"] == 800.0


def test_path_command_fabric_errors_name_the_file(tmp_path):
    bundles = _bundles(tmp_path)
    ends = ["--src", "a08-p1-dgx-04-c01/GPU0", "--dst", "a08-p1-dgx-04-c02/GPU1"]
    switches = REAL / "ibnetdiscover" / "ibswitches_qdr_infiniscale_iv_1switch.txt"
    with pytest.raises(CommandError, match="this is ibswitches output, which lists no links"):
        call_command("path", *bundles, *ends, "--fabric", str(switches), stdout=io.StringIO())
    bad = tmp_path / "bad.txt"
    lines = (REAL / "ibnetdiscover" / "ibm_pcm_2node_mt43132_8port_switch_sdr_2009.txt").read_text().splitlines()
    lines[10] = "[2]     garbage"  # a port line of the 2009 capture, broken
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(CommandError, match=rf"{bad}:11: "):
        call_command("path", *bundles, *ends, "--fabric", str(bad), stdout=io.StringIO())
    with pytest.raises(CommandError, match="no such file"):
        call_command("path", *bundles, *ends, "--fabric", str(tmp_path / "nope.txt"), stdout=io.StringIO())
