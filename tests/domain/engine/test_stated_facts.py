"""Facts a capture states reach the document: NVLink and xGMI from XML, NCCL XML attributes, hwloc
link speeds and packages, lspci CPU and GPU names, Grace/Blackwell signatures, partial HCA data.

Each test reads one real capture of ``tests/fixtures`` (copied from ``realdata/``, see the
``SOURCES.<kind>.tsv`` files) and asserts what an engineer reads off it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.analysis import analyze_host
from apps.domain.bundle import read_bundle

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def analyze(**files: str) -> dict:
    """The document of one host from fixture files, ``kind="dir/name"`` (relative to tests/fixtures)."""
    return analyze_host({k: (FIXTURES / v).read_text(encoding="utf-8") for k, v in files.items()}, "h").doc


def rules(doc: dict, *ids: str) -> list[dict]:
    return [f for f in doc["findings"] if f["rule"] in ids]


def setting(doc: dict, name: str) -> dict | None:
    return next((s for s in doc["nccl_settings"] if s["name"] == name), None)


def uplink(doc: dict, node: str) -> dict:
    parent = next(n["parent"] for n in doc["graph"]["nodes"] if n["id"] == node)
    return next(e for e in doc["graph"]["edges"] if {e["source"], e["target"]} == {node, parent})


def test_dgx2_hwloc_16_v100_every_pair_through_nvswitch():
    """DGX-2 hwloc: NVSwitch PCI functions and an NVLinkBandwidth matrix (6 x 25 GB/s per GPU)."""
    doc = analyze(hwloc_xml="hwloc_xml/hwloc_test_nvidiaDGX2.xml")
    assert doc["summary"]["gpu_count"] == 16 and doc["summary"]["nvswitch"]
    assert len(doc["gpu_pairs"]) == 120 and all(p["mechanism"] == "nvswitch" and p["path_class"] == "NV6"
                                               for p in doc["gpu_pairs"])
    fabric = next(n for n in doc["graph"]["nodes"] if n["kind"] == "nvswitch")
    assert len(fabric["attrs"]["bdfs"]) == 12  # 0000:66:00.0 reads 0000 [0000:0000] but hwloc says NVSwitch
    assert not rules(doc, "P01", "P02", "P09", "P10") and setting(doc, "NCCL_P2P_LEVEL") is None
    # NCCL plans the 6 NVLink2 links at SM70_NVLINK_BW 20 GB/s each: 6 rings of 20 GB/s, not PCIe
    assert doc["estimate"]["b_gpu_gbs"] == 120 and doc["estimate"]["points"][0]["algorithm"] == "RING"
    assert doc["summary"]["gpu_model"] == "Tesla V100-SXM3-32GB-H"  # hwloc GPUModel
    assert doc["graph"]["cpu_vendor"] == "intel" and doc["graph"]["cpu_model"] == 0x55  # Xeon Platinum 8174
    assert doc["summary"]["socket_count"] == 2


def test_mi250x_hwloc_xgmi_packages_and_slingshot():
    """LLNL Tioga: 8 MI250X GCDs all-to-all over xGMI (XGMIBandwidth 100 GB/s), one EPYC package in
    NPS4 (4 NUMA nodes), four HPE Slingshot NICs (Cassini, 17db:0501) that no verbs tool lists."""
    doc = analyze(hwloc_xml="hwloc_xml/llnl_mpibind_eas-tioga_mi250x.xml")
    assert all(p["mechanism"] == "nvlink" and p["path_class"] == "XGMI" and p["p2p"] for p in doc["gpu_pairs"])
    assert len(doc["gpu_pairs"]) == 28
    # every GCD pair has its own 100 GB/s xGMI link (as hwloc states it): RCCL's rings run over
    # several of them side by side, not one ring of one link
    ring = doc["estimate"]["channels"]["intra"]["RING"]
    assert ring["channels"] > 2 and doc["estimate"]["b_gpu_gbs"] == ring["channels"] * ring["bw_intra_gbs"] > 100
    assert doc["gpu_groups"][0]["sentence"].startswith("Group GPU0, GPU1") and "xGMI" in doc["gpu_groups"][0]["sentence"]
    s = doc["summary"]
    assert (s["socket_count"], s["numa_nodes"]) == (1, 4)
    sock = [e for e in doc["graph"]["edges"] if e["kind"] == "inter_socket"]
    assert sock and all("one socket" in e["note"] for e in sock) and sock[0]["nccl_gbs"] == 16.0  # AMD_BW
    nics = {n["name"]: n for n in doc["nics"]}
    assert set(nics) == {"hsi0", "hsi1", "hsi2", "hsi3"}
    assert all(next(x for x in doc["graph"]["nodes"] if x["id"] == n)["attrs"]["transport"] == "ofi" for n in nics)
    assert doc["network"]["state"] == "unknown" and set(doc["network"]["usable"]) == set(nics)
    assert not rules(doc, "P01", "P02") and setting(doc, "NCCL_P2P_LEVEL") is None


def test_rccl_xml_xgmi_links_are_gpu_links():
    """RCCL topology of 16 MI250 GCDs: <xgmi> links of 4, 2 and 1 between GCDs are RCCL's NVL links."""
    doc = analyze(nccl_topo_xml="nccl_topo_xml/rccl_topo_expl_topo_16p1h_mi250_broadcom_sw.xml")
    pair = {(p["a"], p["b"]): p for p in doc["gpu_pairs"]}
    assert pair[("GPU0", "GPU1")]["path_class"] == "XGMI4" and pair[("GPU0", "GPU1")]["mechanism"] == "nvlink"
    hop = pair[("GPU0", "GPU1")]["hops"][0]
    # RCCL plans xGMI at count x 36 GB/s on MI200 (gfx90a; rccl topo.h L31-33)
    assert hop["kind"] == "nvlink" and hop["expected_gbs"] == 4 * 36.0
    # RCCL does P2P up to SYS on AMD CPUs (rccl paths.cc L284-302): no SHM pairs, no P2P level advice
    assert not [p for p in doc["gpu_pairs"] if p["mechanism"] == "shm"]
    assert not rules(doc, "P01", "P02") and setting(doc, "NCCL_P2P_LEVEL") is None
    assert all(n["state"] == "Active" for n in doc["nics"])  # RCCL's own net list


@pytest.mark.parametrize("name", ["azhpc_ndv2-topo", "azhpc_ndv4-topo", "azhpc_ndv5-topo",
                                  "oci_bm_gpu_b4_8_topo_flattened"])
def test_vm_topology_files_without_nvlink_leave_gpu_pairs_unknown(name):
    """Azure NDv2/NDv4/NDv5 and OCI NCCL_TOPO_FILEs: no device ids, no <nvlink>. These boards do
    150-480 GB/s over NVLink; the file cannot say so, so no pair is called PCIe or SHM."""
    doc = analyze(nccl_topo_xml=f"nccl_topo_xml/{name}.xml")
    assert doc["gpu_pairs"] and all(p["mechanism"] == "unknown" and p["p2p"] is None for p in doc["gpu_pairs"])
    assert not [f for f in rules(doc, "P01", "P02", "P09", "P10") if f["severity"] != "INFO"]
    assert setting(doc, "NCCL_P2P_LEVEL") is None
    assert doc["estimate"]["b_gpu_gbs"] is None and not [p for p in doc["estimate"]["points"] if p["nodes"] == 1]
    assert "no topology source" not in " ".join(doc["warnings"])
    assert doc["graph"]["virtual_pci"]  # hand-written, flattened: for G01 the fix is the provider's file


def test_ndv2_infiniband_hca_of_class_0207_is_a_nic_and_g01_names_the_topology_file():
    doc = analyze(nccl_topo_xml="nccl_topo_xml/azhpc_ndv2-topo.xml")
    assert [n["bdf"] for n in doc["nics"]] == ["0101:00:00.0"]
    g01 = rules(doc, "G01")
    assert g01 and all("NCCL_TOPO_FILE" in f["fix"] and "PCIe switch" not in f["fix"] for f in g01)


def test_nccl_dump_gdr_flags_and_cpu_level_link_of_issue_2397():
    """NCCL 2.30 dump of NCCL issue 2397 (host11): devices hang directly under <cpu>; the ConnectX-6 Dx
    is Gen4 x8 (its two 100G ports share 15.75 GB/s), GPUs say gdr="1", the NIC gdr="0"."""
    doc = analyze(nccl_topo_xml="nccl_topo_xml/a100pcie_2gpu_cx6dx_roce_nccl2.30_host11_nccl_issue_2397.xml")
    assert doc["graph"]["mode"] == "nccl_xml" and "no topology source" not in " ".join(doc["warnings"])
    gpu0 = next(n for n in doc["graph"]["nodes"] if n["id"] == "GPU0")
    nic = next(n for n in doc["graph"]["nodes"] if n["id"] == "mlx5_0")
    assert gpu0["attrs"]["gdr"] is True and nic["attrs"]["gdr"] is False
    link = uplink(doc, "mlx5_0")
    assert (link["gen"], link["width"], link["spec_gbs"]) == (4, 8, 15.75)
    assert [n["name"] for n in doc["nics"]] == ["mlx5_0", "mlx5_1"] and doc["network"]["state"] == "ok"
    assert doc["estimate"]["b_node_gbs"] == pytest.approx(15.75, abs=0.01)  # the x8 link, not 2 x 12.5
    assert "gdr=0" in next(e for e in doc["gpu_nic"] if e["gpu"] == "GPU0")["reason"]
    other = analyze(nccl_topo_xml="nccl_topo_xml/a100pcie_2gpu_cx6dx_roce_nccl2.30_host13_nccl_issue_2397.xml")
    assert uplink(other, "mlx5_0")["width"] == 16


def test_socket_net_of_an_nccl_dump_is_not_an_rdma_hca():
    """Azure NC A100 v4: NCCL lists eth0 (guid 0x0, port 0, gdr 0, no PCI device): its Socket transport."""
    doc = analyze(nccl_topo_xml="nccl_topo_xml/azhpc_ncv4-topo.xml")
    assert doc["nics"] == [] and doc["network"]["state"] == "no_rdma_nic"
    assert "eth0" in doc["network"]["message"] and "Socket" in doc["network"]["message"]
    assert not rules(doc, "G01", "H02") and setting(doc, "NCCL_NET_GDR_LEVEL") is None
    # an NCCL dump lists the NVLinks NCCL found: none between these PCIe A100s is a fact
    assert all(p["mechanism"] == "shm" for p in doc["gpu_pairs"]) and doc["graph"]["cpu_vendor"] == "amd"


@pytest.mark.parametrize("name,gpus", [("llnl_mpibind_cts1-pascal", 2), ("llnl_mpibind_g4dnmetal", 8)])
def test_hwloc_pci_link_speed_is_the_gpu_link(name, gpus):
    """P100 PCIe (LLNL Pascal) and T4 (AWS g4dn.metal): hwloc says 15.75 GB/s per GPU link (Gen3 x16)."""
    doc = analyze(hwloc_xml=f"hwloc_xml/{name}.xml")
    assert doc["summary"]["gpu_count"] == gpus
    for g in doc["gpus"]:
        link = uplink(doc, g["name"])
        assert link["spec_gbs"] == pytest.approx(15.75, abs=0.01) and not link["assumed"]
        assert "pci_link_speed" in link["note"]
    assert not any("PCIe links not reported" in a for a in doc["assumptions"])


def test_power9_hwloc_counts_numa_nodes_and_sockets_from_packages():
    """LLNL Butte (POWER9, hwloc 1.x): NUMA nodes 0 and 8 (one per chip) and GPU-memory nodes 252-255."""
    doc = analyze(hwloc_xml="hwloc_xml/llnl_mpibind_coral-butte-hwloc1.xml")
    s = doc["summary"]
    assert (s["numa_nodes"], s["socket_count"], s["sockets"]) == (2, 2, 2)
    assert doc["graph"]["cpu_vendor"] == "power"
    assert [e["nccl_gbs"] for e in doc["graph"]["edges"] if e["kind"] == "inter_socket"] == [32.0]  # P9_BW
    # V100 SXM2 has NVLink, which hwloc 1.x cannot show: the pairs are unknown, not PCIe
    assert all(p["mechanism"] == "unknown" for p in doc["gpu_pairs"])


def test_lspci_root_complex_names_amd_and_device_names_the_gpus():
    """ASUS ESC8000A-E12 (2x EPYC Genoa, 4x RTX 6000 Ada): the root complex is AMD's."""
    host, sections = read_bundle(FIXTURES / "bundles" / "stelline_esc8000a")
    doc = analyze_host(sections, host).doc
    assert doc["graph"]["cpu_vendor"] == "amd" and "root complex" in doc["graph"]["cpu_name"]
    assert doc["summary"]["gpu_model"] == "RTX 6000 Ada Generation"
    assert [e["nccl_gbs"] for e in doc["graph"]["edges"] if e["kind"] == "inter_socket"] == [16.0]  # AMD_BW
    assert not any("inter-socket" in a for a in doc["assumptions"])
    assert all("1.2x" not in f["message"] for f in rules(doc, "P02"))  # Intel's TLP charge is Intel's


def test_lspci_root_complex_names_intel():
    doc = analyze(lspci_verbose="lspci_verbose/gpud_dell_xe9680_hgx_h100_8gpu_full_lspci_vvv.txt")
    assert doc["graph"]["cpu_vendor"] == "intel"


def test_amd_desktop_two_geforce_cards_p2p_level_sys_but_driver_refuses():
    """AM5 desktop, RTX 3090 + RTX 5060 Ti: NCCL's AMD rule allows P2P up to SYS for 2 GPUs
    (paths.cc L360-362), but GeForce drivers refuse PCIe P2P, so NCCL_P2P_LEVEL cannot help."""
    doc = analyze(lspci_tree="lspci_tree/desktop_am5_rtx3090_rtx5060ti.txt")
    assert doc["graph"]["cpu_vendor"] == "amd"
    [pair] = doc["gpu_pairs"]
    assert pair["mechanism"] == "shm" and pair["shm_cause"] == "driver" and pair["assumed"]
    assert "level SYS" in pair["reason"] and "GeForce" in pair["reason"]
    assert setting(doc, "NCCL_P2P_LEVEL") is None and not rules(doc, "P01", "P02")
    assert any("GeForce" in a and "topo -p2p" in a for a in doc["assumptions"])
    assert doc["network"]["state"] == "no_rdma_nic"  # Realtek 2.5GbE and Wi-Fi only


def test_gb200_tray_is_grace_blackwell():
    """4 GPUs at NV18 to each other with GPU NUMA ids 2/10/18/26: a GB200 compute tray (Grace C2C)."""
    doc = analyze(nvidia_smi_topo="nvidia_smi_topo/gb200_4gpu_tray_numa_lists_gpu_numa_id_trimmed.txt")
    assert doc["summary"]["gpu_model_assumed"].startswith("B200-class Grace Blackwell")
    assert doc["graph"]["cpu_vendor"] == "arm"
    # 18 NVLink5 links at SM100_NVLINK_BW 40.1 GB/s: NCCL's rings, 16 channels x 45 GB/s
    assert doc["estimate"]["b_gpu_gbs"] == 720
    assert any("GPU NUMA ids of Grace" in a for a in doc["assumptions"])


def test_grace_gpu_reaches_its_nic_through_p2c_with_gdr():
    """The GB200 capture with NIC columns added (SYNTHETIC, written here): NICs of the GPU's own Grace
    are NODE; NCCL >= 2.27 merges C2C + PHB into P2C and keeps GPUDirect RDMA (NCCL_NET_GDR_C2C=1)."""
    topo = ("        GPU0    GPU1    GPU2    GPU3    NIC0    NIC1    CPU Affinity   NUMA Affinity    GPU NUMA ID\n"
            "GPU0     X      NV18    NV18    NV18    NODE    SYS     0-71           0,3-9,11-17       2\n"
            "GPU1    NV18     X      NV18    NV18    NODE    SYS     0-71           0,3-9,11-17      10\n"
            "GPU2    NV18    NV18     X      NV18    SYS     NODE    72-143         1,19-25,27-33    18\n"
            "GPU3    NV18    NV18    NV18     X      SYS     NODE    72-143         1,19-25,27-33    26\n"
            "NIC0    NODE    NODE    SYS     SYS      X      SYS\n"
            "NIC1    SYS     SYS     NODE    NODE    SYS      X\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n")
    doc = analyze_host({"nvidia_smi_topo": topo}, "gb200").doc
    choice = {e["gpu"]: e for e in doc["gpu_nic"]}
    assert choice["GPU0"]["nic"] == "mlx5_0" and choice["GPU0"]["path_class"] == "NODE"
    assert all(e["gdr"] and e["nccl_path"] == "P2C" for e in doc["gpu_nic"])
    assert not rules(doc, "G01") and setting(doc, "NCCL_NET_GDR_LEVEL") is None
    assert uplink(doc, "GPU0")["kind"] == "c2c"


def test_hgx_b300_with_seven_gpus_is_missing_one():
    """Dell XE9780 HGX B300: 7 of 8 GPUs on the NV18 board (nvlink -s names the B300)."""
    doc = analyze(nvidia_smi_topo="nvidia_smi_topo/dell_xe9780_hgx_b300_7gpu_nv18.txt",
                  nvidia_smi_nvlink="nvidia_smi_nvlink/dell_xe9780_b300_nvlink_status.txt")
    [n01] = rules(doc, "N01")
    assert n01["title"] == "GPU missing from an NVSwitch board" and n01["severity"] == "HIGH"
    assert "1 is missing" in n01["message"] and "NUMA 0 holds 3 GPUs" in n01["message"]
    assert "B300" in doc["summary"]["gpu_model"]


def test_partial_ibstatus_keeps_its_400g_port_a_compute_nic():
    """ibstatus excerpt with only rate and link layer (NVSHMEM blog): mlx5_ib0 NDR 400 and a 25GbE
    mlx5_eth4; with a topo -m placing mlx5_ib0 next to GPU0 (SYNTHETIC matrix written here)."""
    topo = ("        GPU0    GPU1    NIC0    NIC1    CPU Affinity    NUMA Affinity\n"
            "GPU0     X      NV18    PIX     NODE    0-55            0\n"
            "GPU1    NV18     X      NODE    PIX     0-55            0\n"
            "NIC0    PIX     NODE     X      NODE\n"
            "NIC1    NODE    PIX     NODE     X\n\nNIC Legend:\n\n  NIC0: mlx5_ib0\n  NIC1: mlx5_eth4\n")
    ib = (FIXTURES / "ibstatus/ibstatus_nvshmem_blog_h100_partial.txt").read_text()
    doc = analyze_host({"nvidia_smi_topo": topo, "ibstatus": ib}, "h").doc
    nic = next(n for n in doc["nics"] if n["name"] == "mlx5_ib0")
    assert nic["compute"] and nic["state"] is None and "mlx5_ib0" in doc["network"]["usable"]
    assert next(e for e in doc["gpu_nic"] if e["gpu"] == "GPU0")["nic"] == "mlx5_ib0"
    assert setting(doc, "NCCL_IB_HCA")["value"] == "=mlx5_ib0"
    assert doc["estimate"]["b_node_gbs"]
    # NCCL gives GPU1 the 400G port too (most bandwidth first), so the two GPUs share it
    assert next(e for e in doc["gpu_nic"] if e["gpu"] == "GPU1")["nic"] == "mlx5_ib0"
    [g05] = rules(doc, "G05")
    assert g05["devices"] == ["GPU0", "GPU1", "mlx5_ib0"] and g05["severity"] == "INFO"
    assert "one 400 Gb/s NIC" in g05["message"] and "25 GB/s each" in g05["message"]


def test_aws_p5en_lspci_names_h200_gpus_and_efa_nics():
    """AWS p5en lspci -tv snippet: GH100 [H200 SXM 141GB] and four Elastic Fabric Adapters (EFA,
    reached through aws-ofi-nccl) beside ENA Ethernet functions."""
    doc = analyze(lspci_tree="lspci_tree/aws_p5en_h200_efa_snippet_partial.txt")
    assert doc["summary"]["gpu_model"] == "H200 SXM 141GB"
    efa = [n for n in doc["nics"]]
    assert len(efa) == 4 and all(n["transport"] == "ofi" for n in efa)
    assert doc["network"]["state"] != "no_rdma_nic"
    assert setting(doc, "NCCL_IB_HCA") is None  # NCCL_IB_HCA filters verbs HCAs, not EFA
    assert all(p["mechanism"] == "unknown" for p in doc["gpu_pairs"])  # H200 SXM: NVLink not shown by lspci
    assert not rules(doc, "P11")
