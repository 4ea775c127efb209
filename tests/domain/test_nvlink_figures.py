"""The NVLink figure the host drawing and the capacity page both state (one function)."""

from __future__ import annotations

from pathlib import Path

from apps.domain.analysis import analyze_host
from apps.domain.nvlink_figures import nvlink_bundles, nvlink_summary

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def test_an_nvswitch_board_states_the_bundle_figure_not_ncclss_ring_plan():
    doc = analyze_host({"nvidia_smi_topo": (FIX / "nvidia_smi_topo" / "mooncake_issue_8xnv18_12nic_cpuset_list.txt")
                        .read_text()}, "n1").to_dict()
    to_switch, direct = nvlink_bundles(doc)
    assert len(to_switch) == 8 and not direct
    hop = next(p for p in doc["gpu_pairs"] if p["mechanism"] == "nvswitch")["hops"][0]
    s = nvlink_summary(doc)
    assert s["kind"] == "nvswitch" and s["gbs_min"] == s["gbs_max"] == hop["expected_gbs"]
    assert s["assumed"] == hop["assumed"]
    assert s["text"].startswith(f"NV18 per GPU into the NVSwitch: {hop['expected_gbs']:.1f} GB/s per direction")
    # NCCL's ring plan is another quantity (channels x per-channel GB/s), named apart on the pages
    assert doc["estimate"]["b_gpu_gbs"] != hop["expected_gbs"]


def test_a_direct_nvlink_mesh_and_no_nvlink():
    v100 = analyze_host({"nvidia_smi_topo": (FIX / "bundles" / "microway_dgx1_v100" / "nvidia_smi_topo.txt")
                         .read_text()}, "v").to_dict()
    s = nvlink_summary(v100)
    assert s["kind"] == "nvlink" and "direct NVLink pairs" in s["text"]
    assert nvlink_summary({"gpu_pairs": []}) is None
