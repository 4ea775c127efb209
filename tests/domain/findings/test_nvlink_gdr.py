"""NVLink rules N01, N02, N04, N05 and GPU<->NIC rules G01, G03-G06 on synthetic documents."""

from __future__ import annotations

from apps.domain.findings import evaluate
from tests.domain.findings.docs import add_pcie, host, nic, p2p_results


def fired(doc, results=None, rule=None):
    return [f for f in evaluate(doc, results or {}, strict=True) if rule is None or f["rule"] == rule]


B200 = "NVIDIA B200"


def test_n01_gpu_fell_off_nvswitch_fabric_is_crit():
    """
    8x B200 on NVSwitch: every pair NV18 except GPU2, which shows NODE to all 7 peers
    (the layout of vllm #16336).
    """
    pairs = {("GPU2", f"GPU{i}") if i > 2 else (f"GPU{i}", "GPU2"): "NODE" for i in range(8) if i != 2}
    [f] = fired(host(8, model=B200, pairs=pairs), rule="N01")
    assert f["devices"] == ["GPU2"] and f["severity"] == "CRIT" and "NV18" in f["message"]


def test_n01_pair_below_norm_is_high_and_healthy_board_is_quiet():
    """8x H100 NVSwitch: GPU3-GPU5 NV12 instead of NV18 (links missing between them)."""
    [f] = fired(host(8, pairs={("GPU3", "GPU5"): "NV12"}), rule="N01")
    assert f["devices"] == ["GPU3", "GPU5"] and f["severity"] == "HIGH"
    assert fired(host(8), rule="N01") == []


def test_n01_nvlink_s_inactive_links():
    """nvidia-smi nvlink -s: GPU0 18 links at 26.562, GPU1 with links 16-17 <inactive>."""
    def links(n_active):
        return [{"link": i, "gbps": 26.562 if i < n_active else None, "active": i < n_active, "raw": ""}
                for i in range(18)]
    res = {"nvidia_smi_nvlink": {"gpus": [{"index": 0, "links": links(18)}, {"index": 1, "links": links(16)}]}}
    [f] = fired(host(8), res, rule="N01")
    assert f["devices"] == ["GPU1"] and "16 active" in f["message"] and f["severity"] == "HIGH"


def test_n02_nvlink_pair_p2p_disabled_crit():
    """GPU0 ==NV18== GPU1 but topo -p2p r says NS."""
    [f] = fired(host(2), p2p_results({("GPU0", "GPU1"): "NS"}, ["GPU0", "GPU1"]), rule="N02")
    assert f["severity"] == "CRIT" and f["devices"] == ["GPU0", "GPU1"]
    assert fired(host(2), p2p_results({}, ["GPU0", "GPU1"]), rule="N02") == []


def test_n04_cube_mesh_info_not_n01():
    """
    GPU0 -NV1- GPU1      4-GPU V100 partial mesh: GPU0-GPU3 and GPU1-GPU2 have no NVLink (NODE)
      |  \\   / |
     NV2   X  NV2
    GPU2 -NV1- GPU3
    """
    pairs = {("GPU0", "GPU1"): "NV1", ("GPU2", "GPU3"): "NV1", ("GPU0", "GPU2"): "NV2",
             ("GPU1", "GPU3"): "NV2", ("GPU0", "GPU3"): "NODE", ("GPU1", "GPU2"): "NODE"}
    out = fired(host(4, model="Tesla V100-SXM2-32GB", pairs=pairs))
    [f] = [x for x in out if x["rule"] == "N04"]
    assert f["severity"] == "INFO" and "GPU0-GPU3 (NODE)" in f["message"]
    assert not [x for x in out if x["rule"] in ("N01", "P02")]


def test_n05_slow_link():
    """GPU0 links 0-17 at 26.562 GB/s except link 4 at 13.281."""
    links = [{"link": i, "gbps": 13.281 if i == 4 else 26.562, "active": True} for i in range(18)]
    ok = [{"link": i, "gbps": 26.562, "active": True} for i in range(18)]
    [f] = fired(host(2), {"nvidia_smi_nvlink": {"gpus": [{"index": 0, "links": links}]}}, rule="N05")
    assert f["devices"] == ["GPU0"] and "link 4 at 13.281" in f["message"]
    assert fired(host(2), {"nvidia_smi_nvlink": {"gpus": [{"index": 0, "links": ok}]}}, rule="N05") == []


def test_g01_far_nic_med_and_high_on_rails():
    """
    socket0: GPU0 GPU1 -- sw -- mlx5_0 (PIX)       socket1: GPU2 GPU3 (no NIC) -> mlx5_0 is SYS
    """
    doc = host(4, model="Tesla P40", default_pair="PXB", nics=[nic("mlx5_0")],
               gpu_nic={"GPU0": ("mlx5_0", "PIX"), "GPU1": ("mlx5_0", "PIX"), "GPU2": ("mlx5_0", "SYS"),
                        "GPU3": ("mlx5_0", "SYS")})
    [f] = fired(doc, rule="G01")
    assert f["devices"] == ["GPU2", "GPU3", "mlx5_0"] and f["severity"] == "MED"
    rails = host(2, model="NVIDIA L40S", default_pair="SYS", nics=[nic("mlx5_0"), nic("mlx5_1")],
                 gpu_nic={"GPU0": ("mlx5_0", "PIX"), "GPU1": ("mlx5_1", "NODE")})
    [f] = fired(rails, rule="G01")
    assert f["severity"] == "HIGH" and f["devices"] == ["GPU1", "mlx5_1"]


def test_g01_near_miss_pxn_relay_shows_g04_info_instead():
    """GPU1 has no NIC on its switch but relays over NVLink through GPU0 (PXN) to mlx5_0."""
    doc = host(2, nics=[nic("mlx5_0")], gpu_nic={"GPU0": ("mlx5_0", "PIX"), "GPU1": ("mlx5_0", "NODE", "GPU0")})
    assert fired(doc, rule="G01") == []
    [g4] = fired(doc, rule="G04")
    assert g4["severity"] == "INFO" and "GPU1 via GPU0 to mlx5_0" in g4["message"]
    [g4] = fired(doc, {"nccl_env": {"NCCL_PXN_DISABLE": "1"}}, rule="G04")
    assert g4["severity"] == "MED"
    assert [f["devices"] for f in fired(doc, {"nccl_env": {"NCCL_PXN_DISABLE": "1"}}, rule="G01")] == [
        ["GPU1", "mlx5_0"]]


def test_g03_gdr_level_loc_with_local_nic():
    doc = host(1, nics=[nic("mlx5_0")], gpu_nic={"GPU0": ("mlx5_0", "PIX")})
    [f] = fired(doc, {"nccl_env": {"NCCL_NET_GDR_LEVEL": "LOC"}}, rule="G03")
    assert f["devices"] == ["GPU0"]
    assert fired(doc, {"nccl_env": {"NCCL_NET_GDR_LEVEL": "PXB"}}, rule="G03") == []
    assert fired(doc, {}, rule="G03") == []


def test_g05_two_and_four_gpus_per_nic():
    """
    sw0 -- GPU0 GPU1 mlx5_0 (200G)     sw1 -- GPU2 GPU3 GPU4 GPU5 mlx5_1     GPU6 -- mlx5_2 alone
    """
    doc = host(7, model="NVIDIA L40S", default_pair="PXB",
               nics=[nic("mlx5_0", rate=200), nic("mlx5_1", rate=200), nic("mlx5_2", rate=200)],
               gpu_nic={"GPU0": ("mlx5_0", "PIX"), "GPU1": ("mlx5_0", "PIX"), "GPU2": ("mlx5_1", "PXB"),
                        "GPU3": ("mlx5_1", "PXB"), "GPU4": ("mlx5_1", "PXB"), "GPU5": ("mlx5_1", "PXB"),
                        "GPU6": ("mlx5_2", "PIX")})
    found = {f["devices"][-1]: f["severity"] for f in fired(doc, rule="G05")}
    assert found == {"mlx5_0": "INFO", "mlx5_1": "MED"}


def test_g06_ndr_nic_on_gen4_link():
    """sw -- mlx5_0 NDR 400 on Gen4 x16 (31.5 < 50)    sw -- mlx5_1 NDR 400 on Gen5 x16 (63 > 50)"""
    doc = host(1, nics=[nic("mlx5_0"), nic("mlx5_1")])
    add_pcie(doc, "mlx5_0", "sw0", gen=4, max_gen=4)
    add_pcie(doc, "mlx5_1", "sw0", gen=5)
    [f] = fired(doc, rule="G06")
    assert f["devices"] == ["mlx5_0"] and "Gen4 x16" in f["message"] and "31.5 GB/s" in f["message"]
