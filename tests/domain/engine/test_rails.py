"""Every rail counted: NCCL uses every RDMA port near a GPU and spreads channels over them.

Real captures (tests/fixtures/nvidia_smi_topo, nccl_topo_xml); NIC rates the capture does not
report are written as an ibstat section ("stated", not captured). Before, a host with two rails
per GPU had half its ports marked non-compute and an NCCL_IB_HCA that dropped them: following the
advice halved the node's inter-node bandwidth.
"""

from __future__ import annotations

from pathlib import Path

from apps.domain.analysis import analyze_host
from apps.domain.estimate import link_figures
from tests.domain.engine.test_estimate import ibstat

TOPO = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia_smi_topo"
XML = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_topo_xml"
TWO_RAILS = TOPO / "cn_notes_8xa100_17nic_mlx5_2-17_bond0_single_numa.txt"
H20_36 = TOPO / "h20_8gpu_nv18_36nic_mlx5_0-31_bond0-3_merged_cols_sglang_issue_14092.txt"
B200_16 = TOPO / "nccl_issue_8xb200_16nic_missing_tabs.txt"


def settings(doc):
    return {s["name"]: s for s in doc["nccl_settings"]}


def test_two_rails_per_gpu_every_port_is_compute_and_in_nccl_ib_hca():
    """
    Real capture: 8x A100 (NV12), each PCIe switch holds two GPUs and four 100G-class ports
    (mlx5_2..5 for GPU0/GPU1, ...), mlx5_bond_0 the host's bond far from every GPU.
    sw -- GPU0 GPU1 mlx5_2 mlx5_3 mlx5_4 mlx5_5   (x4 switches)
    """
    names = [f"mlx5_{i}" for i in range(2, 18)]
    doc = analyze_host({"nvidia_smi_topo": TWO_RAILS.read_text(),
                        "ibstat": ibstat(names, rate=100, layer="Ethernet")}, "two-rails").doc
    compute = [n["name"] for n in doc["nics"] if n["compute"]]
    assert compute == names  # all 16 rails; the old rule kept 8 (one per GPU)
    assert [n["name"] for n in doc["nics"] if not n["compute"]] == ["mlx5_bond_0"]
    value = settings(doc)["NCCL_IB_HCA"]["value"]
    assert value == "=" + ",".join(names)
    # each GPU spreads its channels over its two ports, as ncclTopoGetLocalNet does
    by_gpu = {e["gpu"]: e for e in doc["gpu_nic"]}
    assert by_gpu["GPU0"]["nics"] == ["mlx5_2", "mlx5_3"] and by_gpu["GPU1"]["nics"] == ["mlx5_4", "mlx5_5"]
    assert all(e["nic_share"] == 1 for e in doc["gpu_nic"])
    # the NIC sum counts every port: 16 x 12.5 GB/s, and NCCL's search has 16 NETs
    est = doc["estimate"]
    assert est["b_node_gbs"] == 200 and len(link_figures(doc).nets) == 16
    assert next(p for p in est["points"] if p["nodes"] == 2)["channels"] == 16


def test_nine_ports_on_one_switch_spread_like_nccl():
    """
    Real capture (H20, sglang #14092): 36 RDMA devices; GPU0, GPU2, GPU4 and GPU6 each have 8 ports
    and a bond on their PCIe switch, GPU1/3/5/7 none. NCCL starts each GPU at its device index
    modulo the GPUs sharing its ports (one here), so GPU2 takes mlx5_8, the first of its nine, and
    its channels walk all nine. Before, GPU2 took mlx5_10 and shared it with GPU1 while mlx5_8,
    mlx5_9 and mlx5_11..15 sat idle.
    """
    doc = analyze_host({"nvidia_smi_topo": H20_36.read_text()}, "h20").doc
    by_gpu = {e["gpu"]: e for e in doc["gpu_nic"]}
    assert (by_gpu["GPU0"]["nic"], by_gpu["GPU2"]["nic"], by_gpu["GPU4"]["nic"], by_gpu["GPU6"]["nic"]) == (
        "mlx5_0", "mlx5_8", "mlx5_16", "mlx5_24")
    assert by_gpu["GPU2"]["nics"] == [f"mlx5_{i}" for i in range(8, 16)] + ["mlx5_bond_2"]
    # the GPUs without a port of their own reach them through an NVLink peer (PXN)
    assert by_gpu["GPU1"]["pxn_via"] == "GPU0" and by_gpu["GPU1"]["nccl_path"] == "PXN"
    used = {n for e in doc["gpu_nic"] for n in e["nics"]}
    assert used == {n["name"] for n in doc["nics"]}  # no port idle
    assert all(n["compute"] for n in doc["nics"])


def test_a_port_taken_on_a_late_channel_is_still_reached_through_pxn():
    """
    Same capture: GPU0 is PIX to NIC0-7 (mlx5_0..7), GPU1 is NODE to every port (none of its own).
    GPU0 takes mlx5_4..7 on its channels 4-7 only. ncclTopoGetLocalGpu looks at every channel up to
    MAXCHANNELS (topo.cc L2110-2135 at v2.30.7-1), so GPU0 is their local GPU too and GPU1 reaches
    them through PXN like mlx5_0..3; looking at four channels left mlx5_4..7 without a local GPU and
    out of GPU1's channels.
    """
    doc = analyze_host({"nvidia_smi_topo": H20_36.read_text()}, "h20").doc
    by_gpu = {e["gpu"]: e for e in doc["gpu_nic"]}
    assert by_gpu["GPU0"]["nics"][:8] == [f"mlx5_{i}" for i in range(8)]
    assert by_gpu["GPU1"]["pxn_via"] == "GPU0"
    assert by_gpu["GPU1"]["nics"][:8] == [f"mlx5_{i}" for i in range(8)]


def test_ports_far_from_every_gpu_stay_out():
    """
    Real capture (8x B200, NCCL issue): one port PXB to each GPU; mlx5_0-3 (one switch), mlx5_5/6
    and mlx5_11/12 reach every GPU only across the host bridge (NODE/SYS): NCCL's search takes a
    NET within PXN of a GPU, so they carry no GPU traffic and NCCL_IB_HCA leaves them out.
    """
    doc = analyze_host({"nvidia_smi_topo": B200_16.read_text()}, "b200").doc
    compute = [n["name"] for n in doc["nics"] if n["compute"]]
    assert compute == ["mlx5_4", "mlx5_7", "mlx5_8", "mlx5_9", "mlx5_10", "mlx5_13", "mlx5_14", "mlx5_15"]
    assert settings(doc)["NCCL_IB_HCA"]["value"] == "=" + ",".join(compute)


def test_ports_of_one_adapter_are_one_net_sharing_its_link():
    """Real NCCL 2.30 dump (issue 2397): a dual-port ConnectX-6 Dx (mlx5_0, mlx5_1, 2 x 100G) on a
    Gen4 x8 link. NCCL fuses the two ports into one NET of 25 GB/s (NCCL_NET_MERGE_LEVEL=PORT);
    the NIC sum is the x8 link the ports share. NCCL_NET_MERGE_LEVEL=LOC keeps them apart."""
    doc = analyze_host({"nccl_topo_xml": (XML / "a100pcie_2gpu_cx6dx_roce_nccl2.30_host11_nccl_issue_2397.xml")
                        .read_text()}, "h11").doc
    system = link_figures(doc)
    assert [(n.name, n.gbs) for n in system.nets] == [("mlx5_0+mlx5_1", 25.0)]
    assert doc["estimate"]["b_node_gbs"] == 15.75
    apart = link_figures(doc, env={"NCCL_NET_MERGE_LEVEL": "LOC"})
    assert [n.name for n in apart.nets] == ["mlx5_0", "mlx5_1"]
