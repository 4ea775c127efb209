"""The agent's --attach FILE: measurements sent after the report, checked against the host."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from apps.ingest.models import Run, RunHost, Upload
from tests.ingest.test_agent import AGENT_PYTHONS, run_agent

FIX = Path(__file__).resolve().parents[1] / "fixtures"
IBSTAT = FIX / "ibstat" / "gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt"
PERFTEST = FIX / "perftest" / "koordinator_k8s_cx5_vf_mlx5_2_roce_ib_write_bw_mbsec_md_indent.txt"
BAD = FIX / "perftest" / "synthetic_ib_write_bw_client_connect_failed.txt"


def _captures(tmp_path: Path) -> Path:
    captures = tmp_path / "roce-05"
    captures.mkdir(parents=True)
    shutil.copy(IBSTAT, captures / "ibstat.txt")
    return captures


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("python", AGENT_PYTHONS)
def test_attached_runs_are_sent_after_the_report_and_checked_on_this_host(live_server, tmp_path, python):
    from apps.ingest import services

    cluster = services.create_cluster(name="live")
    _, secret = services.issue_token(cluster=cluster)
    result = run_agent("--from-dir", str(_captures(tmp_path)), "--server", live_server.url, "--token", secret,
                       "--attach", str(PERFTEST), "--attach", str(BAD), python=python)
    assert result.returncode == 3, result.stderr  # the second file cannot be read: the server says where
    assert f"--attach {BAD}: server refused it with 400: {BAD.name}:14: perftest failed" in result.stderr
    assert Upload.objects.get(cluster=cluster).status == "done"
    good = Run.objects.get(cluster=cluster, status="done")
    assert good.via == "agent" and good.source_name == PERFTEST.name and good.raw == PERFTEST.read_text()
    assert good.verdict == "broken" and RunHost.objects.get(run=good).host.hostname == "roce-05"
    assert f"run {good.pk} from {PERFTEST}: broken" in result.stderr
    assert Run.objects.get(cluster=cluster, status="failed").raw == BAD.read_text()  # kept all the same
    again = run_agent("--from-dir", str(_captures(tmp_path / "again")), "--server", live_server.url, "--token",
                      secret, "--attach", str(PERFTEST), "--hostname", "roce-05", python=python)
    assert again.returncode == 0 and "(already sent)" in again.stderr and Run.objects.count() == 2


def test_attach_reads_the_files_first_and_dry_run_says_what_it_would_send(tmp_path):
    captures = _captures(tmp_path)
    missing = run_agent("--from-dir", str(captures), "--server", "http://127.0.0.1:9", "--token", "t",
                        "--attach", str(tmp_path / "nope.txt"))
    assert missing.returncode == 6 and "--attach" in missing.stderr and "cannot reach" not in missing.stderr
    dry = run_agent("--from-dir", str(captures), "--dry-run", "--attach", str(PERFTEST))
    assert dry.returncode == 0 and f"would attach {PERFTEST}" in dry.stderr and "as a run on roce-05" in dry.stderr
