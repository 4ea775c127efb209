"""N03, N05 (NVLink error counters), F05, F06, F09, H06 and P12 through ``analyze_host``, on the real captures of
/work/shared/realdata (nvlink/smi_q_*, show_gids, lspci_tree, hwloc) and, where no real capture exists
(``nvidia-smi nvlink -e``, the agent's counter listing), on the ``synthetic_*`` fixtures. Expected devices and
numbers are read from the capture text itself; variants of a real capture made in a test say so.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from apps.domain.analysis import analyze_host

REAL = Path("/work/shared/realdata")
FIX = Path(__file__).resolve().parents[2] / "fixtures"
H100_Q = REAL / "nvlink/smi_q_full_gpud_8x_h100_80g_hbm3_535.183.01.txt"
RTX4090_Q = REAL / "nvlink/smi_q_full_gpud_8x_rtx4090_535.154.05.txt"
CX4LX_GIDS = REAL / "show_gids/cx4lx_4ports_eth01-04_one_down_no_ipv4_12gids.txt"
AM5_TREE = REAL / "lspci_tree/desktop_am5_rtx3090_rtx5060ti.txt"


def analyze(**sections) -> dict:
    return analyze_host({k: v if isinstance(v, str) else v.read_text() for k, v in sections.items()}, "capture").to_dict()


def by_rule(doc: dict, rule: str) -> list[dict]:
    return [f for f in doc["findings"] if f["rule"] == rule]


# ---- N03 ------------------------------------------------------------------------------------------


def test_hgx_h100_fabric_completed_on_every_gpu_is_no_n03():
    text = H100_Q.read_text()
    assert text.count("State                             : Completed") == 8
    doc = analyze(nvidia_smi_q=text)
    assert by_rule(doc, "N03") == [] and not [f for f in doc["findings"] if f["severity"] in ("CRIT", "HIGH")]


@pytest.mark.parametrize("capture", ["smi_q_full_gpud_8x_rtx4090_535.154.05.txt", "smi_q_full_gpud_a10_535.129.03.txt",
                                     "smi_q_full_gpud_titan_v_560.35.03_gen1_idle.txt"])
def test_fabric_na_on_pcie_gpus_is_no_n03(capture):
    assert "State                             : N/A" in (REAL / "nvlink" / capture).read_text()
    assert by_rule(analyze(nvidia_smi_q=REAL / "nvlink" / capture), "N03") == []


def test_one_h100_with_its_fabric_in_progress_is_n03_crit():
    """SYNTHETIC variant of the real HGX H100 capture: the fourth GPU (0000:86:00.0) shows State In Progress."""
    blocks = re.split(r"(?m)^(?=GPU 0000)", H100_Q.read_text())
    assert "GPU 00000000:86:00.0" in blocks[4]
    blocks[4] = blocks[4].replace("State                             : Completed",
                                  "State                             : In Progress")
    [n03] = by_rule(analyze(nvidia_smi_q="".join(blocks)), "N03")
    assert (n03["severity"], n03["devices"]) == ("CRIT", ["GPU3"])
    assert "State 'In Progress', Status 'Success' on GPU3" in n03["message"]
    assert "802" in n03["message"] and "nvidia-fabricmanager" in n03["fix"]


def test_gb200_tray_fabric_in_progress_names_its_clique():
    [n03] = by_rule(analyze(nvidia_smi_q=FIX / "nvidia_smi_q/synthetic_gb200_4gpu_fabric_in_progress.txt"), "N03")
    assert n03["devices"] == ["GPU0", "GPU1", "GPU2", "GPU3"] and "clique 32766" in n03["message"]


# ---- H06 ------------------------------------------------------------------------------------------


def test_rtx4090_server_device_files_in_another_order_than_indices_is_h06():
    text = RTX4090_Q.read_text()
    minors = [int(m) for m in re.findall(r"Minor Number\s+: (\d+)", text)]
    buses = [b.lower() for b in re.findall(r"(?m)^GPU 0000(\S+)", text)]
    assert minors == [3, 2, 1, 0, 7, 6, 5, 4]
    [h06] = by_rule(analyze(nvidia_smi_q=text), "H06")
    assert h06["severity"] == "MED" and h06["devices"] == [f"GPU{i}" for i in range(8)]
    for i, (minor, bus) in enumerate(zip(minors, buses)):
        assert f"GPU{i} ({bus}) is /dev/nvidia{minor}" in h06["message"]
    assert "gres.conf" in h06["message"] and "UUID" in h06["fix"]


def test_h100_minor_numbers_equal_indices_is_no_h06():
    assert by_rule(analyze(nvidia_smi_q=H100_Q), "H06") == []


def test_desktop_mixing_rtx3090_and_rtx5060ti_is_h06():
    [h06] = by_rule(analyze(lspci_tree=AM5_TREE), "H06")
    assert h06["devices"] == ["GPU0", "GPU1"]
    assert "GeForce RTX 3090 and GeForce RTX 5060 Ti" in h06["message"]
    assert "GPU0 GeForce RTX 3090 (0000:01:00.0)" in h06["message"] and "FASTEST_FIRST" in h06["message"]
    assert "not reported" in h06["message"]  # the jobs' CUDA_DEVICE_ORDER is unknown, and said so


def test_four_identical_gpus_is_no_h06():
    assert by_rule(analyze(lspci_tree=REAL / "lspci_tree/stelline_asus_esc8000a_e12.txt"), "H06") == []


# ---- P12 ------------------------------------------------------------------------------------------


def test_am5_desktop_gpus_on_cpu_root_ports_is_no_p12():
    """Both GPUs sit on CPU root ports 00:01.1 and 00:01.3; the chipset (600 Series USB/SATA) hangs below 00:02.1."""
    text = AM5_TREE.read_text()
    assert "+-01.1-[01]--+-00.0  NVIDIA" in text and "+-01.3-[03]--+-00.0  NVIDIA" in text
    assert by_rule(analyze(lspci_tree=text), "P12") == []


def test_gpu_moved_into_a_chipset_slot_is_p12():
    """SYNTHETIC variant of the real AM5 capture: the RTX 5060 Ti moved from root port 00:01.3 to the chipset's
    first downstream port (bus 06, below root port 00:02.1)."""
    out = []
    for line in AM5_TREE.read_text().splitlines(keepends=True):
        if "01.3-[03]" in line:
            line = "           +-01.3-[03]--\n"
        elif "GB206 High Definition" in line:
            continue
        elif line.rstrip().endswith("+-00.0-[06]--"):
            line = line.rstrip("\n") + "--00.0  NVIDIA Corporation GB206 [GeForce RTX 5060 Ti]\n"
        out.append(line)
    [p12] = by_rule(analyze(lspci_tree="".join(out)), "P12")
    assert (p12["severity"], p12["devices"]) == ("MED", ["GPU1", "0000:00:02.1"])
    assert "GPU1 (0000:06:00.0) is attached through the chipset" in p12["message"]
    assert "600 Series Chipset SATA Controller" in p12["message"] and "not reported" in p12["message"]


def test_server_hwloc_gpu_on_cpu_root_port_chipset_ports_named_is_no_p12():
    """hwloc names the chipset's root ports (C600/X79 series chipset); the M2075 sits on an IIO root port."""
    text = (REAL / "hwloc/hwloc_test_x9drg_3x_tesla_m2075.xml").read_text()
    assert "C600/X79 series chipset PCI Express Virtual Root Port" in text
    assert by_rule(analyze(hwloc_xml=text), "P12") == []


# ---- F05 ------------------------------------------------------------------------------------------


def test_cx4lx_ports_without_ipv4_have_no_routable_gid_f05():
    text = CX4LX_GIDS.read_text()
    with_v2_ipv4 = {m.group(1) for m in re.finditer(r"(?m)^(mlx5_\d)\t1\t\d+\t0000:0000:0000:0000:0000:ffff:\S+\t"
                                                      r"[\d.]+\s+\tv2", text)}
    assert with_v2_ipv4 == {"mlx5_0", "mlx5_2"}
    [f05] = by_rule(analyze(show_gids=text), "F05")
    assert f05["devices"] == ["mlx5_1", "mlx5_3"]
    assert f05["severity"] == "HIGH" and "state was not reported" in f05["message"]  # unknown state: not CRIT
    assert "mlx5_1 port 1 (eth02) has only GID 0 (v1, link-local) and GID 1 (v2, link-local)" in f05["message"]
    assert "mlx5_3 port 1 (eth04)" in f05["message"] and "RoCE read from the GIDs' network interfaces" in f05["message"]
    assert "mlx5_0 and mlx5_2 have theirs at index 3" in f05["fix"] and "NCCL_IB_HCA==mlx5_0,mlx5_2" in f05["fix"]


def test_gid_index_3_forced_on_the_cx4lx_node_is_f05_crit():
    [f05] = by_rule(analyze(show_gids=CX4LX_GIDS, host_info="nccl_env\tNCCL_IB_GID_INDEX=3\n"), "F05")
    assert (f05["severity"], f05["devices"]) == ("CRIT", ["mlx5_1", "mlx5_3"])
    assert "NCCL_IB_GID_INDEX=3 is set, but mlx5_1 port 1 (eth02) has no GID at index 3" in f05["message"]


def test_gid_index_pointing_at_a_link_local_gid_is_f05_crit():
    text = (REAL / "show_gids/nsdi23_husky_rdma_isolation_mlx5_0_rdma0.txt").read_text()
    assert "mlx5_0\t1\t1\tfe80:" in text
    [f05] = by_rule(analyze(show_gids=text, host_info="nccl_env\tNCCL_IB_GID_INDEX=1\n"), "F05")
    assert f05["severity"] == "CRIT" and "holds a link-local GID at index 1" in f05["message"]
    assert "its RoCE v2 IPv4 GID is index 3" in f05["message"]


@pytest.mark.parametrize("capture", ["nsdi23_husky_rdma_isolation_mlx5_0_rdma0.txt",
                                     "ocp_pod_sriov_vf_mlx5_3_net1_roce_v1_v2.txt", "roce_lag_mlx5_bond_0_bond0_4gids.txt"])
def test_one_port_with_its_v2_ipv4_gid_at_index_3_is_no_f05(capture):
    assert by_rule(analyze(show_gids=REAL / "show_gids" / capture), "F05") == []


def test_active_roce_port_without_routable_gid_in_sysfs_is_f05_crit():
    """SYNTHETIC variant of fixtures/sysfs_ib/synthetic_h100_8x_cx7_ndr_ib_plus_bf3_eth_bond.txt: the bond's
    IPv4 GIDs (index 2, 3) removed, as when bond0 has no address."""
    text = (FIX / "sysfs_ib/synthetic_h100_8x_cx7_ndr_ib_plus_bf3_eth_bond.txt").read_text()
    assert by_rule(analyze(sysfs_ib=text), "F05") == []
    start = text.index("ca mlx5_bond_0")
    bond = [ln for ln in text[start:].splitlines(keepends=True) if not re.match(r"port 1 gid(_type|_ndev)? [23] ", ln)]
    [f05] = by_rule(analyze(sysfs_ib=text[:start] + "".join(bond)), "F05")  # the IB ports' GIDs are never judged
    assert (f05["severity"], f05["devices"]) == ("CRIT", ["mlx5_bond_0"]) and "(bond0)" in f05["message"]


# ---- F06, F09 (the agent's counter listing: synthetic) -------------------------------------------


def test_ib_link_that_went_down_and_corrupts_symbols_is_f09_high():
    doc = analyze(ib_counters=FIX / "ib_counters/synthetic_h100_8x_cx7_ndr_mlx5_5_link_errors.txt",
                  ibstat=REAL / "ibstat/gpud_h100_8x_cx7_ndr_ib_plus_bluefield3_eth.txt")
    high, low = by_rule(doc, "F09")
    assert (high["severity"], high["devices"]) == ("HIGH", ["mlx5_5"])
    assert "link_downed 3" in high["message"] and "symbol_error 48213 (at least 133.9 per hour" in high["message"]
    assert "15.0 days" in high["message"]
    assert (low["severity"], low["devices"]) == ("LOW", ["mlx5_6"]) and "symbol_error 7" in low["message"]
    assert by_rule(doc, "F06") == []  # the RoCE bond counts no loss


def test_roce_out_of_sequence_counts_are_f06_advisory():
    doc = analyze(ib_counters=FIX / "ib_counters/synthetic_h100_8x_cx7_roce400_mlx5_0_out_of_sequence.txt")
    [f06] = by_rule(doc, "F06")
    assert (f06["severity"], f06["devices"]) == ("MED", ["mlx5_0"])
    assert "out_of_sequence 18342, packet_seq_err 911, local_ack_timeout_err 37" in f06["message"]
    assert "uptime was not reported" in f06["message"] and "second sample" in f06["message"]
    assert by_rule(doc, "F09") == []


# ---- N05: NVLink error counters (nvidia-smi nvlink -e: synthetic) --------------------------------


def test_nvlink_errors_beside_the_real_a100_link_rates():
    """The real 4x A100 nvlink -s (every link 25 GB/s) with a synthetic nvlink -e: GPU2 link 7 and GPU3 link 0 count."""
    rates = (REAL / "nvlink/prism_report_4xa100_80g_nvlink_s.txt").read_text()
    assert set(re.findall(r"Link \d+: (\S+ GB/s)", rates)) == {"25 GB/s"}
    doc = analyze(nvidia_smi_nvlink=rates,
                  nvidia_smi_nvlink_errors=FIX / "nvidia_smi_nvlink_errors/synthetic_a100_4gpu_gpu2_link7_crc_recovery.txt")
    n05 = by_rule(doc, "N05")
    assert [(f["title"], f["devices"]) for f in n05] == [("NVLink link errors", ["GPU2"]), ("NVLink link errors", ["GPU3"])]
    assert "link 7: 214 replay, 3 recovery, 1532 CRC" in n05[0]["message"] and "link 0: 2 CRC" in n05[1]["message"]


def test_nvlink_counters_all_zero_is_no_finding():
    doc = analyze(nvidia_smi_nvlink_errors=FIX / "nvidia_smi_nvlink_errors/synthetic_h100_2gpu_18links_no_errors.txt")
    assert doc["findings"] == []
