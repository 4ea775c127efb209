"""Measured against expected (apps/domain/runs.py, run_causes.py) on real captures.

Each test pairs a real run with real layouts and checks a few facts read off the capture by eye:
the line a cause quotes, the verdict, the rule. Pairings of captures from different machines, and
texts derived from a real capture, are marked SYNTHETIC where they are built."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest

from apps.domain.analysis import analyze_host
from apps.domain.errors import ParseError, UnknownKindError
from apps.domain.runs import check_run, layout_for_gpus, read_run, run_hosts

FIX = Path(__file__).resolve().parents[1] / "fixtures"
DEMO = Path(__file__).resolve().parents[2] / "apps" / "ingest" / "demo" / "captures"


@lru_cache(maxsize=None)
def _layout(hostname: str, **files: str) -> dict:
    return analyze_host({kind: (FIX / rel).read_text() for kind, rel in files.items()}, hostname).to_dict()


def h100_8nic() -> dict:
    """8x H100 NV18 with 8 CX-7 NDR 400 Gb/s InfiniBand ports (the mooncake issue's node)."""
    return _layout("h100", nvidia_smi_topo="nvidia_smi_topo/mooncake_issue_8xnv18_12nic_cpuset_list.txt",
                   ibstat="ibstat/mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt")


def a100_2397(host: str) -> dict:
    return _layout(f"h{host}", nccl_topo_xml=f"nccl_topo_xml/a100pcie_2gpu_cx6dx_roce_nccl2.30_host{host}_nccl_issue_2397.xml")


def check(rel: str, docs: dict, text: str | None = None) -> dict:
    text = (FIX / rel).read_text() if text is None else text
    kind, parsed = read_run(text)
    return check_run(kind, parsed, docs, raw_lines=text.split("\n"), name=Path(rel).name)


def rules(result: dict) -> dict[str, dict]:
    return {f["rule"]: f for f in result["findings"]}


def evidence(result: dict, rule: str) -> list[dict]:
    return [result["evidence"][i] for i in rules(result)[rule]["evidence"]]


def test_result_carries_the_cli_contract():
    r = check("nccl_tests/oci_bm_gpu4_8_a100_40gb_1node_allreduce_10g.txt", {})
    assert {"kind", "measured", "expected", "efficiency", "verdict", "reason", "evidence", "findings", "points",
            "hosts"} <= set(r)
    assert r["kind"] == "nccl_tests" and r["expected"] is None and r["efficiency"] is None
    assert r["measured"]["value"] == 232.04 and r["measured"]["size_bytes"] == 10737418240
    assert r["verdict"] == "not_comparable" and "unknown to topoweb" in r["reason"]


def test_nccl_issue_2397_log_quotes_the_connections_without_gdr_and_the_x8_host():
    """2 nodes x 2 A100 PCIe, one CX-6 Dx each: every NET connection runs without GDRDMA (line 2
    'via NET/IB/2'), NCCL says 'GDR 0' (line 23), and host 11's NCCL dump has the NIC at x8."""
    r = check("nccl_log/a100pcie_2node_roce_nccl2.30_channels_nccl_issue_2397_partial.txt",
              {"ubuntu2": a100_2397("11"), "ubuntu4": a100_2397("13")})
    t4 = [f for f in r["findings"] if f["rule"] == "T4"]
    assert {f["hosts"][0] for f in t4} == {"ubuntu2", "ubuntu4"}
    lines = {e["line"]: e for i in t4[0]["evidence"] for e in [r["evidence"][i]]}
    assert lines[2]["text"].endswith("[receive] via NET/IB/2") and "without GDRDMA" in lines[2]["means"]
    assert lines[23]["text"].endswith("use ring PXN 0 GDR 0")
    assert any(x["rule"] == "G01" for x in t4[0]["layout"])  # the layout puts the NIC too far for GDR
    t10 = rules(r)["T10"]
    assert t10["hosts"] == ["ubuntu2"] and "x8" in t10["message"]  # the NIC link the dump shows at x8
    assert rules(r)["T7"]["severity"] == "LOW" and "P11" in rules(r)["T7"]["message"]  # PCIe-only: one NIC per ring
    assert r["verdict"] == "healthy" and r["measured"] is None  # a log measures no bandwidth


def test_socket_log_is_t2_with_the_lines_that_show_it():
    r = check("nccl_log/korean_eks_llama3_shm_socket_cumem_partial.txt", {"llama-3-8b-node-0-0": h100_8nic()})
    t2 = rules(r)["T2"]
    assert t2["severity"] == "CRIT" and r["verdict"] == "below_expected"
    assert [e["line"] for e in evidence(r, "T2")] == [5, 6]
    assert all("via NET/Socket/0" in e["text"] for e in evidence(r, "T2"))
    assert "usable RDMA port" in t2["message"] and "mlx5_0" in t2["message"]
    # GPU3 -> GPU2 over SHM on an NVSwitch board: the layout gives that pair P2P
    assert rules(r)["T5"]["title"] == "SHM where the layout has P2P" and evidence(r, "T5")[0]["line"] == 1


def test_log_without_ib_quotes_no_device_found_and_the_setting():
    r = check("nccl_log/synthetic_nccl2_7_busid_brackets_socket_no_ib.txt", {})
    lines = {e["line"]: e["text"] for e in evidence(r, "T2")}
    assert lines[5].endswith("NET/IB : No device found.") and lines[2] == "NCCL_IB_DISABLE=1"


def test_two_node_result_above_the_nic_sum_is_t9_and_still_healthy():
    """nccl-tests #309: 466.73 GB/s busbw at 8 GiB on 2 of 8 H100 nodes (8x 400G IB): above what
    8 NICs carry, the 2-node tree effect."""
    rel = "nccl_tests/h100_ib400_2of8node_allreduce_default_466gbs_nccl_tests_issue_309.txt"
    names = [h["host"] for h in run_hosts("nccl_tests", read_run((FIX / rel).read_text())[1])]
    r = check(rel, {n: h100_8nic() for n in names})
    assert r["measured"]["value"] == 466.73 and r["measured"]["size_bytes"] == 8 << 30
    assert r["expected"]["nodes"] == 2 and r["expected"]["ranks_per_node"] == 8
    assert r["measured"]["value"] > r["expected"]["b_node_gbs"] and r["verdict"] == "healthy"
    assert rules(r)["T9"]["severity"] == "INFO" and evidence(r, "T9")[0]["line"] == 37
    assert len(r["points"]) == 14 and all(p["expected_busbw_gbs"] for p in r["points"])
    assert r["slow_pair"]["src"].startswith(names[0] + "/GPU")


def test_four_node_result_against_the_same_layout():
    rel = "nccl_tests/h100_ib400_4of8node_allreduce_default_325gbs_nccl_tests_issue_309.txt"
    names = [h["host"] for h in run_hosts("nccl_tests", read_run((FIX / rel).read_text())[1])]
    r = check(rel, {n: h100_8nic() for n in names})
    assert r["measured"]["value"] == 324.99 and r["expected"]["nodes"] == 4
    assert 0.8 < r["efficiency"] < 1.0 and "T9" not in rules(r)


def _no_mpi_text() -> str:
    """SYNTHETIC, from the real OCI 8x A100 capture: every "Using devices" line turned into
    'Rank 0 ... device 0', as eight processes of an nccl-tests built without MPI print."""
    src = (FIX / "nccl_tests/oci_bm_gpu4_8_a100_ubuntu24_1node_allreduce_10g_collective_starting.txt").read_text()
    return "\n".join(re.sub(r"Rank\s+\d+", "Rank  0", re.sub(r"device\s+\d", "device  0", ln))
                     if "Pid" in ln else ln for ln in src.splitlines()) + "\n"


def test_every_process_rank_0_is_not_comparable():
    r = check("nccl_tests/x.txt", {"inst-lscuv-ao-ub24": _layout(
        "dgx", nvidia_smi_topo="../../apps/ingest/demo/captures/topo/dgx_a100_ash6_mlx5_0-11_headers_nps4.txt")},
        text=_no_mpi_text())
    assert r["verdict"] == "not_comparable"
    assert "without MPI" in r["reason"] and "8 processes" in r["reason"]


def test_one_rank_is_not_comparable():
    """SYNTHETIC, from the real OCI capture: the "Using devices" list cut to rank 0."""
    src = (FIX / "nccl_tests/oci_bm_gpu4_8_a100_ubuntu24_1node_allreduce_10g_collective_starting.txt").read_text()
    text = "\n".join(ln for ln in src.splitlines() if "Pid" not in ln or "Rank  0" in ln) + "\n"
    r = check("nccl_tests/x.txt", {}, text=text)
    assert r["verdict"] == "not_comparable" and r["reason"].startswith("One rank")


def test_sizes_that_never_leave_the_latency_regime_are_not_comparable():
    """nccl #2441: a 1 MB sweep on 2 nodes x 2 GPUs (largest message 1.5 MB)."""
    rel = "nccl_tests/h100nvl_2gpu_2node_slingshot_allreduce_1mb_sweep_bad_nccl_issue_2441.txt"
    names = [h["host"] for h in run_hosts("nccl_tests", read_run((FIX / rel).read_text())[1])]
    r = check(rel, {n: h100_8nic() for n in names})
    assert r["verdict"] == "not_comparable" and "latency-bound" in r["reason"]
    assert r["expected"]["ranks_per_node"] == 2  # 2 of the layout's 8 GPUs ran ranks
    assert any("2 of the host's 8 GPUs" in n for n in r["expected"]["notes"])


def test_wrong_values_break_the_run_whatever_its_bandwidth():
    r = check("nccl_tests/synthetic_reduce_scatter_wrong_values_oob_failed.txt", {})
    assert r["verdict"] == "broken" and rules(r)["R06"]["severity"] == "CRIT"
    assert [e["line"] for e in evidence(r, "R06")][:2] == [20, 21]
    assert any(e["text"].startswith("# Out of bounds values : 12 FAILED") for e in evidence(r, "R06"))


def test_roce_perftest_far_below_line_rate_is_t1():
    """koordinator's ib_write_bw on mlx5_2 (RoCE, 2758.38 MB/sec = 23.1 Gb/s at 64 KiB), checked
    against a host whose mlx5_2 is a 100 GbE RoCE port (SYNTHETIC pairing of two real captures)."""
    roce = _layout("roce", ibstat="ibstat/gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt")
    r = check("perftest/koordinator_k8s_cx5_vf_mlx5_2_roce_ib_write_bw_mbsec_md_indent.txt", {"roce-01": roce})
    assert r["expected"]["value"] == 100 and r["expected"]["nic"] == "mlx5_2"
    assert 0.2 < r["efficiency"] < 0.25 and r["verdict"] == "broken"
    t1 = evidence(r, "T1")
    assert t1[0]["line"] == 24 and "2758.38" in t1[0]["text"]
    assert t1[1]["text"] == "Link type       : Ethernet"
    assert "PFC" in rules(r)["T1"]["fix"]


def test_healthy_roce_perftest():
    roce = _layout("roce", ibstat="ibstat/gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt")
    r = check("perftest/roce100_mlx5_1_dc_transport_ib_write_bw_client_sweep_2b_8mb.txt", {"roce-01": roce})
    assert r["measured"]["value"] == 97.56 and r["verdict"] == "healthy"
    assert r["points"][-1]["expected_gbit"] == 100


def test_a_single_dgx_a100_node_is_healthy():
    """OCI BM.GPU4.8 (8x A100 40GB SXM4, NV12): 232.04 GB/s at 10 GiB against a DGX A100 layout."""
    a100 = _layout("dgx", nvidia_smi_topo="../../apps/ingest/demo/captures/topo/dgx_a100_ash6_mlx5_0-11_headers_nps4.txt")
    r = check("nccl_tests/oci_bm_gpu4_8_a100_40gb_1node_allreduce_10g.txt", {"a4bae1424041": a100})
    assert r["verdict"] == "healthy" and 0.85 <= r["efficiency"] <= 1.1
    assert r["expected"]["nodes"] == 1 and r["expected"]["ranks_per_node"] == 8
    assert [g["gpu"] for g in r["hosts"][0]["gpus"]] == [f"GPU{i}" for i in range(8)]  # matched by bus id


def test_collectives_other_than_all_reduce_are_marked_assumed():
    rel = "nccl_tests/gke_a4_b200_2node_gib_roce_allgather_1k_8g.txt"
    names = [h["host"] for h in run_hosts("nccl_tests", read_run((FIX / rel).read_text())[1])]
    r = check(rel, {n: h100_8nic() for n in names})
    assert r["expected"]["assumed"] and any("models all-reduce" in n for n in r["expected"]["notes"])


def test_geforce_cards_say_p2p_is_disabled():
    r = check("nccl_tests/autodl_2x_rtx2080ti_pcie_no_p2p_allgather.txt", {})
    assert "GeForce RTX 2080 Ti" in rules(r)["R03"]["message"] and evidence(r, "R03")[0]["line"] == 4


def test_transport_errors_break_a_log():
    r = check("nccl_log/synthetic_ray_ibv_modify_qp_failed_timeout.txt", {})
    assert r["verdict"] == "broken" and "T3" in rules(r) and "T8" in rules(r)
    assert "ibv_modify_qp" in evidence(r, "T8")[0]["text"]


def test_layout_for_gpus_keeps_the_gpus_and_their_nics():
    doc = h100_8nic()
    sub = layout_for_gpus(doc, ["GPU0", "GPU1"])
    assert [g["name"] for g in sub["gpus"]] == ["GPU0", "GPU1"]
    assert {n["name"] for n in sub["nics"] if n.get("compute")} == {e["nic"] for e in sub["gpu_nic"]}
    assert len(doc["gpus"]) == 8  # the document itself is unchanged


def test_unreadable_and_foreign_texts_raise():
    with pytest.raises(ParseError) as err:
        read_run((FIX / "perftest/synthetic_ib_write_bw_client_connect_failed.txt").read_text())
    assert err.value.line_no > 0
    with pytest.raises(UnknownKindError):
        read_run((FIX / "ibstat/cx6_hdr_active_after_sm.txt").read_text())


def test_channels_held_below_what_the_layout_needs_are_r02():
    """Alibaba PAI's log sets NCCL_MAX_NCHANNELS=2 (line 2); checked against an 8-NIC H100 layout
    (SYNTHETIC pairing)."""
    rel = "nccl_log/alibaba_pai_dsw_4gpu_p2p_cumem_rank_dev_offset_partial.txt"
    r = check(rel, {"dsw95381-5f7b687f66-w5sjz": h100_8nic()})
    r02 = rules(r)["R02"]
    assert r02["severity"] == "HIGH" and "held to 2 channel" in r02["message"]
    assert any("NCCL_MAX_NCHANNELS" in e["text"] for e in evidence(r, "R02"))


def test_use_cuda_below_host_memory_is_r04():
    """The CUDA perftest (GPU1, mlx5_5) against a layout where GPU1 meets mlx5_5 at NODE (no GDR), with
    a host-memory run of the same NIC at 500 Gb/s as the baseline (SYNTHETIC pairing and baseline)."""
    rel = "perftest/synthetic_ib_write_bw_client_cuda_dmabuf_bw_min_gbits.txt"
    text = (FIX / rel).read_text()
    kind, parsed = read_run(text)
    r = check_run(kind, parsed, {"ibh": h100_8nic()}, raw_lines=text.split("\n"),
                  baseline={"measured": {"value": 500.0, "unit": "Gb/s"}})
    r04 = rules(r)["R04"]
    assert r04["severity"] == "HIGH" and "from host memory on the same NIC" in evidence(r, "R04")[0]["means"]


def test_headers_and_library_of_different_nccl_versions_are_r05():
    """SYNTHETIC, from the real Dell H200 capture: the nccl-tests banner's library version changed."""
    src = (FIX / "nccl_tests/dell_h200_2node_bf3_roce400_ocp_allreduce_1k_16g.txt").read_text()
    assert "nccl-library=23004" in src
    r = check("nccl_tests/x.txt", {}, text=src.replace("nccl-library=23004", "nccl-library=22105"))
    assert "R05" in rules(r) and "nccl-headers=23004" in evidence(r, "R05")[0]["text"]


def test_busbw_falling_between_large_sizes_is_t6():
    """SYNTHETIC, from the real 2-node H100 capture: the 4 GiB row's busbw cut to a third."""
    rel = "nccl_tests/h100_ib400_2of8node_allreduce_default_466gbs_nccl_tests_issue_309.txt"
    lines = (FIX / rel).read_text().split("\n")
    row = next(i for i, ln in enumerate(lines) if ln.strip().startswith("4294967296"))
    cells = lines[row].split()
    cells[7] = f"{float(cells[7]) / 3:.2f}"
    lines[row] = "  ".join(cells)
    r = check("nccl_tests/x.txt", {}, text="\n".join(lines))
    assert evidence(r, "T6")[0]["line"] == row + 1
    # --datatype all prints rows of several types: a slower type is no swing
    assert "T6" not in rules(check("nccl_tests/dell_h200_2node_bf3_roce400_ocp_allreduce_all_dtypes_10g_48g.txt", {}))


def test_a_perftest_above_its_port_is_checked_against_the_wrong_host():
    roce = _layout("roce", ibstat="ibstat/gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt")
    r = check("perftest/ocp_a40_cx_roce_ib_write_bw_server_q16_cuda_dmabuf_tos41.txt", {"roce-01": roce})
    assert r["efficiency"] > 1.1 and rules(r)["R07"]["title"].startswith("Above what the layout allows")
