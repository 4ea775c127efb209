"""Key facts of the real fixtures that no other test reads, checked against the parsers.

The goldens beside each fixture were written by the parser itself, so they agree with it by
construction. Each row here was read off the capture by hand (GPU count, NIC names, a cell or
two, a figure the tool printed): a parser change that misreads a capture fails here even after
its goldens are regenerated.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.analysis import analyze_host
from apps.domain.parsers import ALL_KINDS, to_jsonable

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def parsed(kind: str, name: str) -> dict:
    path = next(FIXTURES.joinpath(kind).glob(f"{name}.*[!n]"))  # the capture, not its .json golden
    return to_jsonable(ALL_KINDS[kind].parse(path.read_text(errors="replace")))


# name: (GPU count, NIC labels in matrix order, {(row, col): cell as printed (legacy SOC kept)},
#        CPU affinity of GPU0)
TOPO = {
    "aws_g6e_12xlarge_4x_l40s_node": (4, [], {("GPU0", "GPU3"): "NODE"}, "0-47"),
    "basic3_4gpu_nv12_pairs_pxb": (4, [], {("GPU0", "GPU1"): "NV12", ("GPU1", "GPU2"): "PXB"}, "0-31,64-95"),
    "dgx_a100_nic_legend_10nic_nps4_mpi_gpu_compress_doc": (
        8, [f"NIC{i}" for i in range(10)], {("GPU0", "NIC0"): "PXB", ("NIC8", "NIC9"): "PIX", ("GPU7", "NIC7"): "PXB"},
        "48-63,176-191"),
    "h100_8gpu_12nic_pix_pxb_pairs_580_korean_hetero_exp": (
        8, [f"NIC{i}" for i in range(12)], {("GPU0", "NIC0"): "PIX", ("GPU0", "NIC1"): "PXB", ("GPU4", "NIC0"): "SYS",
                                            ("NIC10", "NIC11"): "PIX"}, "0-55,112-167"),
    "lmdeploy_env_4gpu_pix_single_switch": (4, [], {("GPU0", "GPU3"): "PIX"}, "0-19,40-59"),
    "notes_8gpu_pcie_all_sys_anomaly": (8, [], {("GPU0", "GPU1"): "SYS", ("GPU6", "GPU7"): "SYS"}, "0-15,32-47"),
    "notes_8xh100_nv18_no_nic_192t": (8, [], {("GPU0", "GPU7"): "NV18"}, "0-47,96-143"),
    "nvlink_warmup_tool_4gpu_nv4_cpu0_64_numa0-3": (4, ["NIC0"], {("GPU3", "NIC0"): "PHB", ("GPU0", "NIC0"): "SYS"},
                                                     "0,64"),
    "princeton_traverse_power9_4xv100_nv3": (
        4, ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"], {("GPU0", "GPU1"): "NV3", ("GPU2", "mlx5_2"): "NODE",
                                                      ("mlx5_0", "mlx5_1"): "PIX"}, "0-63"),
    "rtx5060ti_4gpu_8thread_no_legend": (4, [], {("GPU0", "GPU1"): "PHB"}, "0-7"),
    "stas00_mleng_2gpu_nvlink_nv2": (2, [], {("GPU0", "GPU1"): "NV2"}, "0-23"),
    "stas00_mleng_8xh100_nv18": (8, [], {("GPU3", "GPU4"): "NV18"}, "0-51"),
    "tensorflow_gdr_4gpu_mlx4_soc": (4, ["mlx4_0"], {("GPU0", "GPU1"): "PHB", ("GPU0", "GPU2"): "SOC",
                                                     ("GPU2", "mlx4_0"): "PHB"}, "0-5"),
    "th2k_4xv100_nv2_nv1_5nic_variant_old_legend": (
        4, ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4"], {("GPU0", "GPU2"): "NV1", ("GPU0", "mlx5_4"): "PIX",
                                                                 ("GPU2", "mlx5_4"): "NODE"}, "14-27"),
    "th2k_4xv100_nv2_nv1_no_diagonal_4nic_old_legend": (
        4, ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"], {("GPU0", "GPU1"): "NV2", ("GPU0", "GPU3"): "NODE",
                                                      ("GPU3", "mlx5_3"): "PIX"}, "14-27"),
    "threadripper3955wx_4x_rtx_a4000_node": (4, [], {("GPU1", "GPU2"): "NODE"}, "0-31"),
    "v100_8gpu_cube_mesh_1nic_node_0-23_paddle_fleetx_vgg16_unindented": (
        8, ["mlx5_0"], {("GPU0", "GPU1"): "NV2", ("GPU0", "GPU3"): "NV1", ("GPU0", "GPU5"): "NODE",
                        ("GPU7", "mlx5_0"): "NODE"}, "0-23"),
    "vm_kvm_1gpu_1nic_phb_252cpu_sglang_env": (1, ["NIC0"], {("GPU0", "NIC0"): "PHB"}, "0-251"),
}


@pytest.mark.parametrize("name", sorted(TOPO))
def test_topo_fixture_reads_as_printed(name: str) -> None:
    gpus, nics, cells, affinity = TOPO[name]
    r = parsed("nvidia_smi_topo", name)
    assert [g["name"] for g in r["gpus"]] == [f"GPU{i}" for i in range(gpus)]
    assert [n["name"] for n in r["nics"]] == nics
    for (row, col), token in cells.items():
        assert r["matrix"][row][col] == token and r["matrix"][col][row] == token, (row, col)
    assert r["gpus"][0]["cpu_affinity"] == affinity


def test_topo_legend_names_the_hcas() -> None:
    r = parsed("nvidia_smi_topo", "dgx_a100_nic_legend_10nic_nps4_mpi_gpu_compress_doc")
    assert [n["device"] for n in r["nics"]] == [f"mlx5_{i}" for i in range(10)]
    assert [g["numa_affinity"] for g in r["gpus"]] == ["3", "3", "1", "1", "7", "7", "5", "5"]
    r = parsed("nvidia_smi_topo", "h100_8gpu_12nic_pix_pxb_pairs_580_korean_hetero_exp")
    assert r["nics"][10]["device"] == "mlx5_10" and r["nics"][11]["device"] == "mlx5_11"
    r = parsed("nvidia_smi_topo", "tensorflow_gdr_4gpu_mlx4_soc")
    assert r["legend"] == "nvlink_legacy"  # its legend prints SOC, no NODE


# NCCL topology files: (GPU count, the NICs' PCI functions, CPU vendor of the <cpu> elements)
XML = {
    "aws_ofi_nccl_p4de-24xl-topo": (8, ["0000:10:1b.0", "0000:20:1b.0", "0000:90:1b.0", "0000:a0:1b.0"], "intel"),
    "superbench_ndv4-topo": (8, [f"010{i}:00:00.0" for i in range(1, 9)], "amd"),
    "azurehpc_experimental_nc48v4-topo": (2, [], "amd"),
}


@pytest.mark.parametrize("name", sorted(XML))
def test_nccl_topology_file_reads_as_written(name: str) -> None:
    gpus, nics, vendor = XML[name]
    text = (FIXTURES / "nccl_topo_xml" / f"{name}.xml").read_text()
    doc = analyze_host({"nccl_topo_xml": text}, "h").doc
    assert doc["summary"]["gpu_count"] == gpus
    assert [n["bdf"] for n in doc["nics"]] == nics
    assert doc["graph"]["cpu_vendor"] == vendor


def test_nc48v4_topology_file_lists_only_a_socket_net() -> None:
    """Its one <net> is eth0 with port 0 and GUID 0x0: NCCL's Socket transport, no RDMA NIC."""
    doc = analyze_host({"nccl_topo_xml": (FIXTURES / "nccl_topo_xml/azurehpc_experimental_nc48v4-topo.xml")
                        .read_text()}, "h").doc
    assert doc["network"]["state"] == "no_rdma_nic" and doc["graph"]["socket_nets"] == ["eth0"]


def test_ibstat_epyc_mi100_hdr100_port() -> None:
    [ca] = parsed("ibstat", "epyc7282_mi100_cx6_hdr100")["cas"]
    [port] = ca["ports"]
    assert ca["name"] == "mlx5_0" and ca["ca_type"] == "MT4123"
    assert (port["state"], port["phys_state"], port["rate_gbps"], port["link_layer"]) == (
        "Active", "LinkUp", 100, "InfiniBand")
    assert (port["base_lid"], port["sm_lid"]) == (29, 2)


def test_ibv_devinfo_stelline_cx7_ethernet_port() -> None:
    [ca] = parsed("ibv_devinfo", "stelline_host_deps_cx7_mlx5_1_eth_active_partial")["cas"]
    assert ca["name"] == "mlx5_1" and ca["ports"][0]["state"] == "Active"
    assert ca["ports"][0]["link_layer"] == "Ethernet" and ca["ports"][0]["active_mtu"] == 4096


def test_nvlink_status_brev_a100_twelve_links() -> None:
    [gpu] = parsed("nvidia_smi_nvlink", "brev_shadeform_a100_40g_nvlink_s_i0")["gpus"]
    assert gpu["index"] == 0 and len(gpu["links"]) == 12
    assert {lk["gbps"] for lk in gpu["links"]} == {25.0} and all(lk["active"] for lk in gpu["links"])


# nccl-tests runs: (collective, ranks listed, "Avg bus bandwidth" line, largest out-of-place busbw)
NCCL_TESTS = {
    "aws_2x_p4de_24xlarge_efa_allreduce_srun_prefix_table_only_partial": ("all_reduce", 0, None, 78.33),
    "dgx_a100_40gb_1node_allreduce_1m_1g_test_fixture_capture": ("all_reduce", 8, 130.613, 230.84),
    "dgx_spark_gb10_2node_qsfp_switch_allgather_rs_fec": ("all_gather", 2, 21.4033, 22.14),
    "h100_ib400_2node_allreduce_ring_min_ctas24_392gbs_nccl_tests_issue_309": ("all_reduce", 16, 248.186, 392.69),
    "h100nvl_2gpu_2node_slingshot_allreduce_1mb_sweep_good_nccl_issue_2441": ("all_reduce", 4, 9.11404, 11.23),
    "nebius_h100_ib_vm_no_docker_allreduce_table_only_partial": ("all_reduce", 0, 456.361, 476.77),
    "oci_bm_gpu4_8_a100_40gb_2node_roce_allreduce_10g": ("all_reduce", 16, 220.921, 222.88),
    "ocp_dell_r760xa_l40s_2node_2gpu_pcie_roce_allreduce": ("all_reduce", 4, 4.74277, 9.63),
}


@pytest.mark.parametrize("name", sorted(NCCL_TESTS))
def test_nccl_tests_run_reads_as_printed(name: str) -> None:
    collective, ranks, avg, peak = NCCL_TESTS[name]
    r = parsed("nccl_tests", name)
    assert r["collective"] == collective
    assert len(r["ranks"]) == ranks
    assert r["avg_busbw_gbs"] == avg
    assert r["peak_busbw_gbs"] == peak == max(row["out_of_place"]["busbw_gbs"] for row in r["rows"])


def test_gke_b200_allgather_lists_sixteen_ranks_on_four_pods() -> None:
    """Its table was cut out of the page: ranks and the average only, and no line names the test."""
    r = parsed("nccl_tests", "gke_a4_b200_4pods_x4gpu_2node_allgather_aligned_truncated_partial")
    assert r["collective"] is None and r["rows"] == []
    assert len(r["ranks"]) == 16 and r["avg_busbw_gbs"] == 22.2173
    assert r["hosts"] == [f"nccl-gib-test-4w-{i}" for i in range(4)]
    assert r["ranks"][15]["model"] == "NVIDIA B200" and r["ranks"][15]["host"] == "nccl-gib-test-4w-3"


@pytest.mark.parametrize("test,mbps", [("send", 10986.50), ("write", 11024.71)])
def test_perftest_sriov_pod_bandwidth(test: str, mbps: float) -> None:
    """The BW average[MB/sec] column (2^20 bytes) of the one 65536-byte row, in Gb/s."""
    r = parsed("perftest", f"k8s_sriov_pod_mlx5_0_roce_ib_{test}_bw_mbsec_cpufreq_warning")
    assert r["test"] == f"ib_{test}_bw" and r["device"] == "mlx5_0" and r["link_type"] == "Ethernet"
    [row] = r["rows"]
    assert row["bytes"] == 65536 and abs(row["bw_avg_gbit"] - mbps * 2**20 * 8 / 1e9) < 1e-3
