"""manage.py check_run on real captures: the JSON contract, the text view, FILE:LINE errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

FIX = Path(__file__).resolve().parent / "fixtures"
BUNDLES = FIX / "bundles"
RUN_466 = FIX / "nccl_tests" / "h100_ib400_2of8node_allreduce_default_466gbs_nccl_tests_issue_309.txt"


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("check_run", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_json_holds_measured_expected_verdict_and_evidence():
    out, _ = run(str(RUN_466), "--topo", str(FIX / "nvidia_smi_topo" / "mooncake_issue_8xnv18_12nic_cpuset_list.txt"),
                 "--ibstat", str(FIX / "ibstat" / "mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt"))
    r = json.loads(out)
    assert {"kind", "measured", "expected", "efficiency", "verdict", "reason", "evidence", "findings"} <= set(r)
    assert r["kind"] == "nccl_tests" and r["measured"]["value"] == 466.73 and r["expected"]["nodes"] == 2
    assert r["verdict"] == "healthy" and r["efficiency"] > 1.0 and r["findings"][0]["rule"] == "T9"
    assert {"line", "text", "means"} <= set(r["evidence"][0]) and r["evidence"][0]["line"] == 37
    assert any("stands for every host" in w for w in r["warnings"])  # one layout for both hosts


def test_text_names_each_cause_with_file_and_line(tmp_path):
    log = FIX / "nccl_log" / "a100pcie_2node_roce_nccl2.30_channels_nccl_issue_2397_partial.txt"
    # SYNTHETIC bundles: each of issue 2397's NCCL topology dumps as the bundle of the host that logged
    for host, dump in (("ubuntu2", "host11"), ("ubuntu4", "host13")):
        b = tmp_path / host
        b.mkdir()
        (b / "nccl_topo_xml.xml").write_text(
            (FIX / "nccl_topo_xml" / f"a100pcie_2gpu_cx6dx_roce_nccl2.30_{dump}_nccl_issue_2397.xml").read_text())
    out, _ = run(str(log), "--bundle", str(tmp_path / "ubuntu2"), "--bundle", str(tmp_path / "ubuntu4"),
                 "--format", "text")
    assert out.startswith(f"{log}: nccl_log")
    assert "[MED] T4 GPUDirect RDMA off" in out
    assert f"{log}:2: ubuntu2:321049:321049 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/2" in out
    assert "T10 One host slower than the others (ubuntu2)" in out


def test_a_perftest_with_one_layout_and_its_points():
    out, _ = run(str(FIX / "perftest" / "roce100_mlx5_1_dc_transport_ib_write_bw_client_sweep_2b_8mb.txt"),
                 "--ibstat", str(FIX / "ibstat" / "gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt"),
                 "--hostname", "roce-01", "--format", "text")
    assert "verdict: healthy" in out and "measured: 97.56 Gb/s" in out and "limit: mlx5_1 line rate 100 Gb/s" in out
    assert "   512 KiB" in out


def test_unreadable_run_is_file_line_reason_and_exit_2():
    bad = FIX / "perftest" / "synthetic_ib_write_bw_client_connect_failed.txt"
    err = io.StringIO()
    with pytest.raises(SystemExit) as exc:
        call_command("check_run", str(bad), stdout=io.StringIO(), stderr=err)
    assert exc.value.code == 2 and err.getvalue().startswith(f"{bad}:14: perftest failed before printing results")
    with pytest.raises(SystemExit) as exc:
        call_command("check_run", str(FIX / "ibstat" / "cx6_hdr_active_after_sm.txt"), stdout=io.StringIO(),
                     stderr=io.StringIO())
    assert exc.value.code == 2


def test_a_layout_that_cannot_be_read_exits_2(tmp_path):
    bad = tmp_path / "topo.txt"
    bad.write_text("")
    err = io.StringIO()
    with pytest.raises(SystemExit) as exc:
        call_command("check_run", str(RUN_466), "--topo", str(bad), stdout=io.StringIO(), stderr=err)
    assert exc.value.code == 2 and err.getvalue().startswith(f"{bad}:0: ")


def test_a_layouts_counter_sections_are_quoted_as_evidence():
    """The per-file options' ethtool -S listing reaches the causes: the perftest on mlx5_2 (23.1 Gb/s, real)
    quotes that port's discards from the host's ethtool_stats (SYNTHETIC fixture and pairing; the line
    numbers were read off the fixture)."""
    ethtool = FIX / "ethtool_stats" / "synthetic_h100_roce_mlx5_0_pfc_pause_storm_mlx5_2_discards_no_pfc.txt"
    perftest = FIX / "perftest" / "koordinator_k8s_cx5_vf_mlx5_2_roce_ib_write_bw_mbsec_md_indent.txt"
    out, _ = run(str(perftest), "--ibstat", str(FIX / "ibstat" / "gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt"),
                 "--ethtool-stats", str(ethtool), "--hostname", "roce-01")
    r = json.loads(out)
    t1 = next(f for f in r["findings"] if f["rule"] == "T1")
    quoted = [r["evidence"][i] for i in t1["evidence"]]
    assert (f"{ethtool}: ethtool_stats", 247, "rx_discards_phy: 18233") in [(e["file"], e["line"], e["text"])
                                                                           for e in quoted]
    out, _ = run(str(perftest), "--ibstat", str(FIX / "ibstat" / "gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt"),
                 "--hostname", "roce-01")
    assert not any(e["file"] and "ethtool_stats" in e["file"] for e in json.loads(out)["evidence"])
