"""PCIe rules P01-P11 on tiny synthetic documents (layouts drawn in each docstring)."""

from __future__ import annotations

from apps.domain.findings import evaluate
from tests.domain.findings.docs import add_pcie, host, nic, p2p_results


def fired(doc, results=None, rule=None):
    out = evaluate(doc, results or {}, strict=True)
    return [f for f in out if rule is None or f["rule"] == rule]


def test_p01_sys_pair_fires_high_with_two_gpus():
    """
    cpu0 ==UPI== cpu1
     |            |
    GPU0         GPU1        topo -m: GPU0-GPU1 = SYS, no NVLink
    """
    doc = host(2, model="Tesla P40", pairs={("GPU0", "GPU1"): "SYS"})
    [f] = fired(doc, rule="P01")
    assert f["severity"] == "HIGH" and f["devices"] == ["GPU0", "GPU1"]
    assert "GPU0-GPU1 (SYS)" in f["message"] and "'" not in f["message"]


def test_p01_med_with_more_gpus_and_not_on_nvb_mesh():
    """
    GPU0 GPU1 | GPU2 GPU3      socket 0 | socket 1; pairs across sockets SYS, inside PIX
    """
    pairs = {(a, b): "SYS" for a in ("GPU0", "GPU1") for b in ("GPU2", "GPU3")}
    pairs.update({("GPU0", "GPU1"): "PIX", ("GPU2", "GPU3"): "PIX"})
    [f] = fired(host(4, model="Tesla P40", pairs=pairs), rule="P01")
    assert f["severity"] == "MED" and f["devices"] == ["GPU0", "GPU1", "GPU2", "GPU3"]


def test_p01_near_miss_sys_pair_reachable_over_nvlink_relay():
    """
    GPU0 ==NV2== GPU1 ==NV2== GPU2      GPU0-GPU2 is SYS but GPU1 relays over NVLink (NCCL path NVB)
    """
    doc = host(3, model="Tesla V100-SXM2-32GB", pairs={("GPU0", "GPU1"): "NV2", ("GPU1", "GPU2"): "NV2",
                                                        ("GPU0", "GPU2"): "SYS"})
    assert fired(doc, rule="P01") == []


def test_p02_phb_and_node_pairs_fire_but_pix_does_not():
    """
    rc0 -- GPU0        topo: GPU0-GPU1 NODE (two host bridges, one NUMA node); GPU2 under a switch
    rc1 -- sw -- GPU1, GPU2  with GPU1 (PIX)
    """
    doc = host(3, model="NVIDIA L40S", pairs={("GPU0", "GPU1"): "NODE", ("GPU0", "GPU2"): "NODE",
                                             ("GPU1", "GPU2"): "PIX"})
    [f] = fired(doc, rule="P02")
    assert f["devices"] == ["GPU0", "GPU1", "GPU2"] and "GPU1-GPU2" not in f["message"]
    assert fired(host(2, model="NVIDIA L40S", default_pair="PIX"), rule="P02") == []


def test_p03_cns_on_pix_pair_fires_ok_does_not():
    """
    sw -- GPU0, GPU1 (PIX), but topo -p2p r says CNS for the pair; GPU2-GPU3 PIX and OK
    """
    names = ["GPU0", "GPU1", "GPU2", "GPU3"]
    doc = host(4, model="NVIDIA L40S", default_pair="PIX")
    [f] = fired(doc, p2p_results({("GPU0", "GPU1"): "CNS"}, names), rule="P03")
    assert f["devices"] == ["GPU0", "GPU1"] and f["severity"] == "HIGH" and "CNS" in f["message"]
    assert fired(doc, p2p_results({}, names), rule="P03") == []
    assert "lspci -vvv" in f["fix"] and "ACSCtl" in f["fix"]  # journey 2: what to check for ACS


def test_p04_acs_redirect_on_switch_port_above_gpus():
    """
    rp 0000:00:01.0 -- switch (ports 0000:02:00.0 ReqRedir+ CmpltRedir+) -- GPU0, mlx5_0
    """
    doc = host(1, model="NVIDIA L40S", nics=[nic("mlx5_0")])
    add_pcie(doc, "sw0", "rp0", kind="switch", parent_kind="root_port", attrs={"port_bdfs": ["0000:02:00.0"]})
    add_pcie(doc, "GPU0", "sw0", kind="gpu", bdf="0000:03:00.0")
    add_pcie(doc, "mlx5_0", "sw0", bdf="0000:04:00.0")
    acs = {"lspci_verbose": {"devices": [
        {"bdf": "0000:02:00.0", "port_type": "Downstream Port",
         "acs_ctl": "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"}]}}
    [f] = fired(doc, acs, rule="P04")
    assert f["severity"] == "CRIT" and f["devices"] == ["0000:02:00.0", "GPU0", "mlx5_0"]
    assert "setpci -s 0000:02:00.0" in f["fix"]
    # journey 2: the answer names the lspci -vvv line to check
    assert "lspci -vvv -s 0000:02:00.0" in f["fix"] and "ACSCtl" in f["fix"] and "ReqRedir-" in f["fix"]
    off = {"lspci_verbose": {"devices": [{"bdf": "0000:02:00.0", "port_type": "Downstream Port",
                                          "acs_ctl": {"SrcValid": True, "ReqRedir": False, "CmpltRedir": False}}]}}
    assert fired(doc, off, rule="P04") == []


def test_p06_narrow_width_fires_even_when_idle():
    """
    sw -- GPU0 (Gen5 x8 of x16)   sw -- mlx5_0 (Gen5 x16 of x16)
    """
    doc = host(1, model="NVIDIA H100 PCIe", nics=[nic("mlx5_0")])
    add_pcie(doc, "GPU0", "sw0", kind="gpu", gen=1, width=8, max_gen=5, max_width=16)
    add_pcie(doc, "mlx5_0", "sw0")
    [f] = fired(doc, rule="P06")
    assert f["devices"] == ["GPU0"] and f["severity"] == "HIGH" and "x8" in f["message"]


def test_p06_near_miss_narrow_slot_is_p08_not_p06():
    """
    rp 0000:00:01.0 (LnkCap x8) -- mlx5_0 0000:01:00.0 (LnkCap x16, LnkSta x8): the slot is x8
    """
    doc = host(1, nics=[nic("mlx5_0", bdf="0000:01:00.0")])
    lspci = {"lspci_verbose": {"devices": [
        {"bdf": "0000:00:01.0", "port_type": "Root Port", "cap_speed_gts": 16.0, "cap_width": 8,
         "sta_speed_gts": 16.0, "sta_width": 8},
        {"bdf": "0000:01:00.0", "port_type": "Endpoint", "class_code": "0207", "cap_speed_gts": 16.0,
         "cap_width": 16, "sta_speed_gts": 16.0, "sta_width": 8}]},
        "lspci_tree": {"devices": [{"bdf": "0000:01:00.0", "parent_bdf": "0000:00:01.0"}]}}
    assert fired(doc, lspci, rule="P06") == []
    [f] = fired(doc, lspci, rule="P08")
    assert f["devices"] == ["mlx5_0"] and "x16 device in an x8 slot" in f["message"]


def test_p07_idle_gpu_gen1_is_info_busy_gpu_is_high_nic_is_high():
    """
    GPU0 Gen1/Gen5 in P8 (idle), GPU1 Gen3/Gen5 in P0 (busy), mlx5_0 Gen4 of Gen5 (stuck)
    """
    doc = host(2, model="NVIDIA H100 PCIe", default_pair="PXB", nics=[nic("mlx5_0")])
    add_pcie(doc, "mlx5_0", "sw0", gen=4)
    q = {"nvidia_smi_gpus": {"gpus": [
        {"index": 0, "pstate": "P8", "link_gen_current": 1, "link_gen_max": 5, "link_width_current": 16,
         "link_width_max": 16},
        {"index": 1, "pstate": "P0", "link_gen_current": 3, "link_gen_max": 5, "link_width_current": 16,
         "link_width_max": 16}]}}
    found = {(f["severity"], tuple(f["devices"])) for f in fired(doc, q, rule="P07")}
    assert found == {("INFO", ("GPU0",)), ("HIGH", ("GPU1",)), ("HIGH", ("mlx5_0",))}


def test_p07_near_miss_idle_gpu_only_is_not_a_fault():
    doc = host(1, model="NVIDIA H100 PCIe")
    q = {"nvidia_smi_gpus": {"gpus": [{"index": 0, "pstate": "P8", "link_gen_current": 1, "link_gen_max": 5}]}}
    assert [f["severity"] for f in fired(doc, q) if f["rule"] == "P07"] == ["INFO"]
    assert not [f for f in fired(doc, q) if f["severity"] in ("CRIT", "HIGH", "MED")]


def test_p08_gen5_gpu_in_gen4_host():
    """GPU0: nvidia-smi gen.gpumax 5, gen.hostmax 4 (A Gen5 card in a Gen4 slot)."""
    q = {"nvidia_smi_gpus": {"gpus": [{"index": 0, "link_gen_gpu_max": 5, "link_gen_host_max": 4},
                                      {"index": 1, "link_gen_gpu_max": 5, "link_gen_host_max": 5}]}}
    found = fired(host(2, model="NVIDIA L40S", default_pair="PIX"), q, rule="P08")
    assert [f["devices"] for f in found] == [["GPU0"]] and found[0]["severity"] == "LOW"


def test_p09_p10_from_contention():
    """
    sw0 (x16 Gen4 uplink 31.5) -- GPU0..GPU3, all staging through host: 4 x 31.5 demand -> 4x
    rp1 -- GPU4, GPU5: demand 63, capacity 50 -> 1.26x;  rp2: ratio 0.8 (fine)
    """
    cont = [
        {"element": "sw0", "label": "switch 0000:17:00.0", "kind": "switch_uplink", "scenario": "gpu_to_nic",
         "devices": ["GPU0", "GPU1", "GPU2", "GPU3"], "flows": 4, "demand_gbs": 126.0, "capacity_gbs": 31.5,
         "ratio": 4.0},
        {"element": "rp1", "label": "root port 0000:00:03.0", "kind": "root_port", "scenario": "all_pairs",
         "devices": ["GPU4", "GPU5"], "flows": 2, "demand_gbs": 63.0, "capacity_gbs": 50.0, "ratio": 1.26},
        {"element": "rp2", "label": "root port 0000:00:05.0", "kind": "root_port", "scenario": "all_pairs",
         "devices": ["GPU6", "GPU7"], "flows": 2, "demand_gbs": 40.0, "capacity_gbs": 50.0, "ratio": 0.8},
    ]
    doc = host(8, model="NVIDIA L40S", default_pair="PXB", contention=cont)
    [p9] = fired(doc, rule="P09")
    assert p9["severity"] == "HIGH" and "4.0x" in p9["message"] and "GPU3" in p9["devices"]
    [p10] = fired(doc, rule="P10")
    assert p10["devices"] == ["root port 0000:00:03.0", "GPU4", "GPU5"] and p10["severity"] == "MED"
    # near miss: the same numbers on a hierarchy inferred from topo -m alone are only an estimate
    guessed = host(8, model="NVIDIA L40S", default_pair="PXB", contention=cont, inferred=True)
    assert {f["severity"] for f in fired(guessed) if f["rule"] in ("P09", "P10")} == {"LOW"}


def test_p06_on_a_management_nic_is_low():
    """lspci: 0000:01:00.0 BCM5720 1 GbE (LnkCap x2, LnkSta x1), not an RDMA NIC of the document."""
    lspci = {"lspci_verbose": {"devices": [
        {"bdf": "0000:01:00.0", "port_type": "Endpoint", "class_code": "0200", "cap_speed_gts": 5.0,
         "cap_width": 2, "sta_speed_gts": 5.0, "sta_width": 1}]}}
    [f] = fired(host(1), lspci, rule="P06")
    assert f["severity"] == "LOW" and f["devices"] == ["0000:01:00.0"]


def test_p11_pcie_only_multi_nic_info_not_with_nvlink():
    """GPU0..GPU3 PIX/PXB, mlx5_0 + mlx5_1 Active; near miss: same with NVLink pairs."""
    nics = [nic("mlx5_0"), nic("mlx5_1")]
    [f] = fired(host(4, model="NVIDIA L40S", default_pair="PXB", nics=nics), rule="P11")
    assert f["severity"] == "INFO" and f["devices"] == ["mlx5_0", "mlx5_1"]
    assert fired(host(4, default_pair="NV18", nics=nics), rule="P11") == []
