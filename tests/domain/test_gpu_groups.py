"""The host page's "P2P gaps" and "GPU groups" sections on real ``nvidia-smi topo -m`` captures
(tests/fixtures/nvidia_smi_topo); every expectation is read off the capture's matrix."""

from __future__ import annotations

from pathlib import Path

from apps.domain.analysis import analyze_host
from apps.domain.gpu_groups import gpu_group_section, gpu_range, p2p_gap_section

TOPO = Path(__file__).resolve().parent.parent / "fixtures" / "nvidia_smi_topo"


def _doc(name: str) -> dict:
    return analyze_host({"nvidia_smi_topo": (TOPO / name).read_text(errors="replace")}, "h").doc


def _sentences(groups: list[dict]) -> list[str]:
    return [g["sentence"] for g in groups]


def test_gpu_range_shortens_runs():
    assert gpu_range(["GPU3", "GPU0", "GPU1", "GPU2", "GPU6"]) == "GPU0-3, GPU6"
    assert gpu_range(["GPU4"]) == "GPU4"


def test_k80_two_pairs_on_two_sockets_meet_only_through_the_cpu():
    # GPU0-GPU1 PIX, GPU2-GPU3 PIX, every cross pair SOC (= SYS)
    sec = p2p_gap_section(_doc("hpc_blog_k80_4gpu_mlx4_soc_cpuset.txt"))
    assert sec["sentence"] == "GPU0-1 and GPU2-3 reach each other only through the CPU: 4 pairs without P2P."
    assert [(r["a"], r["b"]) for r in sec["rows"]] == [("GPU0", "GPU2"), ("GPU0", "GPU3"), ("GPU1", "GPU2"),
                                                       ("GPU1", "GPU3")]
    assert all(r["path_class"] == "SYS" and r["cause"] == "level" for r in sec["rows"])
    row = sec["rows"][0]
    assert row["instead"].startswith("SHM") and "inter-socket" in row["instead"]
    assert "GB/s" in row["cost"] and "NCCL_P2P_LEVEL=SYS" in row["fix"]


def test_eight_gpu_blog_box_pix_pairs_are_islands_phb_and_sys_are_gaps():
    # matrix: PIX 0-1, 2-3, 4-5, 6-7; PHB inside each half (8 pairs); SYS across halves (16 pairs)
    sec = p2p_gap_section(_doc("eight_gpu_pix_phb_sys_hand_mangled_k8s_topology_blog.txt"))
    assert sec["count"] == 24
    assert sum(r["path_class"] == "PHB" for r in sec["rows"]) == 8
    assert sum(r["path_class"] == "SYS" for r in sec["rows"]) == 16
    assert sec["sentence"].startswith("GPU0-1, GPU2-3, GPU4-5 and GPU6-7 reach each other only through the CPU")
    phb = next(r for r in sec["rows"] if r["path_class"] == "PHB")
    assert "NCCL_P2P_LEVEL=PHB" in phb["fix"]


def test_p40_pcie_switches_have_no_gap_and_group_by_switch_with_the_nic_across_sockets():
    # PIX inside GPU0-3 and GPU4-7, PXB between them (within NCCL's default level), mlx5_0 SOC to all
    doc = _doc("paddle_8xp40_pcie_switches_soc.txt")
    sec = p2p_gap_section(doc)
    assert sec["count"] == 0 and sec["sentence"] is None and sec["rows"] == []
    groups = gpu_group_section(doc)
    assert [g["gpus"] for g in groups["switch"]] == [[f"GPU{i}" for i in range(4)], [f"GPU{i}" for i in range(4, 8)]]
    assert all(g["nics"] == [] for g in groups["switch"])
    assert _sentences(groups["nic"]) == ["GPU0-7 use mlx5_0 (SYS, GPUDirect RDMA off)."]
    assert groups["nvlink"] == []
    assert groups["p2p"][0].startswith("Group GPU0, GPU1, GPU2 and GPU3")


def test_dgx1_cube_mesh_groups_by_switch_numa_nic_and_one_nvlink_island():
    # two GPUs and one mlx5 per PCIe switch (PIX), affinity 0-19,40-59 for GPU0-3 and 20-39,60-79 for GPU4-7
    doc = _doc("microway_dgx1_v100_4x_mlx5.txt")
    assert p2p_gap_section(doc)["count"] == 0  # SYS pairs relay over NVLink through a GPU (NVB)
    groups = gpu_group_section(doc)
    assert [(g["gpus"], g["nics"]) for g in groups["switch"]] == [
        (["GPU0", "GPU1"], ["mlx5_0"]), (["GPU2", "GPU3"], ["mlx5_1"]),
        (["GPU4", "GPU5"], ["mlx5_2"]), (["GPU6", "GPU7"], ["mlx5_3"])]
    assert groups["switch"][0]["sentence"].startswith("GPU0-1 under ") and \
        groups["switch"][0]["sentence"].endswith(" with mlx5_0 (PIX).")
    assert [g["gpus"] for g in groups["numa"]] == [[f"GPU{i}" for i in range(4)], [f"GPU{i}" for i in range(4, 8)]]
    [island] = groups["nvlink"]
    assert island["gpus"] == [f"GPU{i}" for i in range(8)] and "not every two" in island["sentence"]
    assert _sentences(groups["nic"])[0] == "GPU0-1 use mlx5_0 (PIX, GPUDirect RDMA on)."
