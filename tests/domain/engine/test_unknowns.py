"""Facts a capture does not state stay unknown: the network when no source can show NICs, the place
of devices whose rows are cut, and nothing built on either.

Each test reads one real capture of ``tests/fixtures`` and asserts ``network.state == "unknown"``
with the reason, no finding or setting that depends on the unknown, and what to send to know.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.analysis import analyze_host

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def analyze(**files: str) -> dict:
    return analyze_host({k: (FIXTURES / v).read_text(encoding="utf-8") for k, v in files.items()}, "h").doc


@pytest.mark.parametrize("kind,name,why", [
    # AWS p4d: EFA never shows in nvidia-smi topo -m
    ("nvidia_smi_topo", "nvidia_smi_topo/aws_p4d_24xlarge_8xa100_nv12.txt", "no NIC column"),
    # stas00's 8x A100 matrix with its NIC columns trimmed by the author
    ("nvidia_smi_topo", "nvidia_smi_topo/stas00_mleng_8xa100_nv12.txt", "no NIC column"),
    # DGX Spark hwloc without I/O discovery
    ("hwloc_xml", "hwloc_xml/hwloc_test_nvidia_dgx_spark_gb10.xml", "without I/O"),
    # DGX-2 hwloc fixture reduced to GPUs and NVSwitches
    ("hwloc_xml", "hwloc_xml/hwloc_test_nvidiaDGX2.xml", "no network device"),
    # aws-ofi-nccl's g5.48xlarge NCCL_TOPO_FILE: bare <pci busid> entries
    ("nccl_topo_xml", "nccl_topo_xml/aws_ofi_nccl_g5.48xl-topo.xml", "no <net>"),
    # lspci -t without -v: no device names at all
    ("lspci_tree", "lspci_tree/qemu_q35_pxb_pcie_2numa_vfio_lspci_t.txt", "names no device"),
])
def test_network_is_unknown_when_no_source_can_show_nics(kind, name, why):
    doc = analyze(**{kind: name})
    net = doc["network"]
    assert net["state"] == "unknown" and net["usable"] == []
    assert why in net["message"] and "send ibstat" in net["message"]
    assert "TCP sockets" not in net["message"]
    assert not [f for f in doc["findings"] if f["rule"] in ("G01", "H02", "H04", "F01")]


def test_bare_lspci_t_says_why_no_gpu_is_found():
    doc = analyze(lspci_tree="lspci_tree/qemu_q35_pxb_pcie_2numa_vfio_lspci_t.txt")
    assert doc["summary"]["gpu_count"] == 0
    assert any("without -v prints no device names" in w and "lspci -D -tv" in w for w in doc["warnings"])


def test_hwloc_without_io_is_a_topology_source_without_devices():
    doc = analyze(hwloc_xml="hwloc_xml/hwloc_test_nvidia_dgx_spark_gb10.xml")
    assert not any(w.startswith("no topology source") for w in doc["warnings"])
    assert any("without I/O discovery" in w for w in doc["warnings"])
    assert doc["graph"]["cpu_vendor"] == "arm"  # hwloc's Architecture aarch64


def test_partial_dgx2_matrix_places_only_what_its_rows_state():
    """DGX-2 topo -m of NCCL tests issue 78 cut after four rows: GPU4-GPU15 have no row and only NV6
    cells, so nothing places them; the NICs are placed by GPU0-GPU3's rows."""
    doc = analyze(nvidia_smi_topo="nvidia_smi_topo/dgx2_16xv100_nv6_10nic_mlx5_nccl_tests_issue_78_partial.txt")
    s = doc["summary"]
    assert (s["gpu_count"], s["sockets"], s["numa_nodes"]) == (16, 2, 2)  # not one CPU per unplaced device
    unplaced = {f"GPU{i}" for i in range(4, 16)}
    assert set(doc["graph"]["unplaced"]) == unplaced
    assert all(n["parent"] is None for n in doc["graph"]["nodes"] if n["id"] in unplaced)
    assert {e["gpu"] for e in doc["gpu_nic"]} == {"GPU0", "GPU1", "GPU2", "GPU3"}
    assert not [f for f in doc["findings"] if set(f["devices"]) & unplaced and f["rule"] not in ("N01", "N04")]
    assert any(w.startswith("placement unknown for GPU4") and "send the complete nvidia-smi topo -m" in w
               for w in doc["warnings"])
    # every pair is NV6 through NVSwitch: the 16 V100s of a DGX-2, assumed and marked
    assert all(p["mechanism"] == "nvswitch" for p in doc["gpu_pairs"])
    assert doc["summary"]["gpu_model_assumed"].startswith("V100-class on NVSwitch")


def test_hcas_that_no_matrix_or_pci_listing_places_get_no_gpu_nic_verdict():
    """Dell XE9780 HGX B300: ibstat lists 11 CAs, the topo -m capture has no NIC column."""
    doc = analyze(nvidia_smi_topo="nvidia_smi_topo/dell_xe9780_hgx_b300_7gpu_nv18.txt",
                  ibstat="ibstat/dell_xe9780_b300_cx8_down_cx7_active.txt")
    assert len(doc["nics"]) == 11 and doc["gpu_nic"] == []
    assert all(n["parent"] is None for n in doc["graph"]["nodes"] if n["kind"] == "nic")
    assert not [f for f in doc["findings"] if f["rule"] in ("G01", "G05", "H02")]
    assert doc["estimate"]["b_node_gbs"]  # the Active ports still count for the network


def test_a_matrix_that_contradicts_itself_is_not_two_sources():
    """KVM VM (cn notes): one NUMA node in the affinity column but SYS between GPUs and NICs."""
    doc = analyze(nvidia_smi_topo="nvidia_smi_topo/cn_notes_8xa100_17nic_mlx5_2-17_bond0_single_numa.txt")
    x01 = [f for f in doc["findings"] if f["rule"] == "X01"]
    assert x01 and all(f["title"] == "one capture contradicts itself" and f["severity"] == "LOW" for f in x01)
