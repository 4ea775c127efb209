"""Journeys 1 and 2 of /work/shared/docs/journeys.md on the real captures they name
(/work/shared/realdata, read in place: the tests fail when the corpus is missing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.analysis import analyze_host

REAL = Path("/work/shared/realdata")


def _doc(**files: str) -> dict:
    if not REAL.is_dir():
        pytest.fail(f"{REAL} is missing: these journeys read the real captures in place", pytrace=False)
    return analyze_host({kind: (REAL / path).read_text(errors="replace") for kind, path in files.items()}, "h").doc


def _by_gpu(doc: dict) -> dict[str, dict]:
    return {e["gpu"]: e for e in doc["gpu_nic"]}


# -- journey 1: "multi-node training is slower than one node" --------------------------------


def test_della_gpus_without_a_nic_on_their_switch_lose_gdr_and_relay_through_pxn():
    doc = _doc(nvidia_smi_topo="topo/princeton_della_k17g3_8xh100_6nic_slurm_cpuset_affinity_empty_or_1.txt")
    e = _by_gpu(doc)
    assert e["GPU0"]["gdr"] and e["GPU0"]["path_class"] == "PIX"
    # GPU1 has no NIC on its switch: GPUDirect RDMA off by distance, NCCL relays over NVLink (PXN)
    assert not e["GPU1"]["gdr"] and e["GPU1"]["path_class"] == "NODE"  # NODE to every NIC, as printed
    assert e["GPU1"]["pxn_via"] is not None and e["GPU1"]["pxn_gdr"] is True
    assert "host memory" in e["GPU1"]["reason"]


def test_paddle_p40_every_gpu_stages_through_host_memory_across_sockets():
    doc = _doc(nvidia_smi_topo="topo/paddle_8xp40_pcie_switches_soc.txt")
    assert {e["nic"] for e in doc["gpu_nic"]} == {"mlx5_0"}
    assert all(not e["gdr"] and e["path_class"] == "SYS" and e["pxn_via"] is None for e in doc["gpu_nic"])
    assert {"G01", "H02"} <= {f["rule"] for f in doc["findings"]}
    assert any(s["name"] == "NCCL_NET_GDR_LEVEL" for s in doc["nccl_settings"])
    # journey 2 on the same box: two 4-GPU PCIe switches are the groups
    assert [g["gpus"] for g in doc["gpu_groups"][:2]] == [["GPU0", "GPU1", "GPU2", "GPU3"],
                                                          ["GPU4", "GPU5", "GPU6", "GPU7"]]


def test_h20_two_nics_far_from_every_gpu():
    doc = _doc(nvidia_smi_topo="topo/h20_8gpu_nv18_2nic_cx6lx_genoa_arthurchiao_notes.txt")
    assert len(doc["gpu_nic"]) == 8 and not any(e["gdr"] for e in doc["gpu_nic"])
    assert doc["summary"]["nvswitch"]
    assert [g["gpus"] for g in doc["gpu_groups"]] == [[f"GPU{i}" for i in range(8)]]


def test_ibstat_ports_down_are_named_and_all_down_means_sockets():
    some = _doc(ibstat="ibstat/gpud_h100_12ca_roce_3_down_disabled.txt")
    down = [n["name"] for n in some["nics"] if n["active"] is False]
    assert len(down) == 3 and some["network"]["state"] == "ok"
    assert {f["devices"][0] for f in some["findings"] if f["rule"] == "F01"} == set(down)
    vf = _doc(ibstat="ibstat/cx6_sriov_vf_mt4124_down.txt")
    assert vf["network"]["state"] == "all_down" and vf["gpu_nic"] == []
    assert any(f["rule"] == "H04" and f["severity"] == "CRIT" for f in vf["findings"])


# -- journey 2: "why is this pair of GPUs slow?" --------------------------------------------------


def test_two_gpus_behind_the_host_bridge_use_shm_and_form_no_group():
    doc = _doc(nvidia_smi_topo="topo/stas00_mleng_2gpu_pcie_phb.txt")
    [gap] = doc["p2p_gaps"]
    assert (gap["a"], gap["b"]) == ("GPU0", "GPU1") and "PXB" in gap["reason"]
    assert doc["gpu_groups"] == []
    assert any(f["rule"] == "P02" for f in doc["findings"])


def test_rossumai_risers_group_by_pcie_switch():
    doc = _doc(nvidia_smi_topo="topo/rossumai_7gforce_7x_gtx1070_1080_risers.txt")
    assert [g["gpus"] for g in doc["gpu_groups"]] == [["GPU3", "GPU4", "GPU5", "GPU6"], ["GPU0", "GPU1", "GPU2"]]
    assert all(g["link"] == "pcie_switch" and g["sentence"].startswith("Group ") for g in doc["gpu_groups"])
    assert len(doc["p2p_gaps"]) == 12


def test_dgx1_cube_mesh_groups_are_the_nvlink_quads_and_pcie_only_matrix_the_switch_pairs():
    mesh = _doc(nvidia_smi_topo="topo/microway_dgx1_v100_4x_mlx5.txt")
    assert [g["gpus"] for g in mesh["gpu_groups"][:2]] == [["GPU0", "GPU1", "GPU2", "GPU3"],
                                                           ["GPU4", "GPU5", "GPU6", "GPU7"]]
    assert mesh["gpu_groups"][0]["link"] == "nvlink"
    assert mesh["p2p_gaps"] == []  # pairs without NVLink relay through a GPU (NVB), still P2P
    pcie = _doc(nvidia_smi_topo="topo/dgx1_topo_mp_pcie_only.txt")
    assert [g["gpus"] for g in pcie["gpu_groups"]] == [["GPU0", "GPU1"], ["GPU2", "GPU3"], ["GPU4", "GPU5"],
                                                       ["GPU6", "GPU7"]]
