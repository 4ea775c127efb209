"""Stored runs checked again and compared: manage.py recheck_runs, rebuild_snapshots re-checking the runs of the
hosts it rebuilt, runs in the Django admin, the hosts' own report sections quoted by a stored run's causes, and the
same shape across stored runs (apps/ingest/runs.py, apps/ingest/admin.py).

Runs and ibstat are real captures; the ethtool_stats report section is the synthetic fixture (no real ethtool -S
capture exists). Which host each run ran on is SYNTHETIC (given as the sender's hint), as are the stale verdicts
written into rows to stand for "checked by an older engine"."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.ingest import runs
from apps.ingest.models import Run
from tests.ingest.test_runs import ROCE_IBSTAT, ROCE_PERFTEST, host_report

pytestmark = pytest.mark.django_db

FIX = Path(__file__).resolve().parents[1] / "fixtures"
ETHTOOL = FIX / "ethtool_stats" / "synthetic_h100_roce_mlx5_0_pfc_pause_storm_mlx5_2_discards_no_pfc.txt"
TOPO = FIX / "nvidia_smi_topo" / "mooncake_issue_8xnv18_12nic_cpuset_list.txt"
IBSTAT = FIX / "ibstat" / "mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt"
FAST = FIX / "nccl_tests" / "h100_ib400_2of8node_allreduce_default_466gbs_nccl_tests_issue_309.txt"  # 0666a154 b749a9b0
SLOW = FIX / "nccl_tests" / "k8s_mpijob_h100_2node_allreduce_512m_8g_196gbs.txt"  # nccl-tests-h100-worker-0, -1


def command(name: str, *args: str) -> str:
    out = io.StringIO()
    call_command(name, *args, "--no-progress", stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def roce_run(cluster_with_token):
    """roce-01 (ibstat: mlx5_2 a 100 GbE RoCE port) and koordinator's ib_write_bw on mlx5_2 at 23.1 Gb/s."""
    cluster, _ = cluster_with_token
    host_report(cluster, "roce-01", "2025-03-01T00:00:00Z", ibstat=ROCE_IBSTAT, ethtool_stats=ETHTOOL)
    run, _ = runs.submit_run(cluster=cluster, text=ROCE_PERFTEST.read_text(), via="web", hosts=["roce-01"],
                             collected_at="2025-03-05T00:00:00Z", source_name="write_bw.txt")
    return cluster, run


def test_a_stored_runs_causes_quote_the_hosts_report_and_its_next_one(roce_run, tmp_path):
    cluster, run = roce_run
    t1 = next(f for f in run.result["findings"] if f["rule"] == "T1")
    quoted = [run.result["evidence"][i] for i in t1["evidence"] if "ethtool_stats" in (run.result["evidence"][i]["file"] or "")]
    assert quoted[0]["text"] == "rx_discards_phy: 18233" and quoted[0]["line"] == 247
    assert quoted[0]["file"].startswith("roce-01 report of 2025-03-01 00:00 UTC (snapshot #")
    # the host reports again after the run, with more discards (SYNTHETIC): the re-check says they rose
    later = tmp_path / "ethtool_after.txt"
    later.write_text(ETHTOOL.read_text().replace("rx_discards_phy: 18233", "rx_discards_phy: 20055"))
    host_report(cluster, "roce-01", "2025-03-06T00:00:00Z", ibstat=ROCE_IBSTAT, ethtool_stats=later)
    runs.check_stored_run(run)
    t1 = next(f for f in run.result["findings"] if f["rule"] == "T1")
    quoted = [run.result["evidence"][i] for i in t1["evidence"] if "ethtool_stats" in (run.result["evidence"][i]["file"] or "")]
    assert [(e["line"], e["text"]) for e in quoted] == [(247, "rx_discards_phy: 20055")]
    assert "rose by 1822 (18233 -> 20055)" in quoted[0]["means"] and "2025-03-06 00:00" in quoted[0]["file"]


def test_recheck_runs_prints_the_verdict_changes(roce_run):
    cluster, run = roce_run
    assert run.verdict == "broken"
    Run.objects.filter(pk=run.pk).update(verdict="healthy", result=None)  # as an older engine left it
    unread, _ = runs.submit_run(cluster=cluster, text=ROCE_PERFTEST.read_text() + "\n", via="web", hosts=["roce-01"],
                                collected_at="2025-01-01T00:00:00Z")
    Run.objects.filter(pk=unread.pk).update(status=Run.Status.FAILED, verdict="", result=None,
                                            error={"line_no": 3, "line": "", "reason": "an older parser failed"})
    out = command("recheck_runs", "--cluster", "alpha")
    assert out.splitlines() == ["re-checked 2 runs: 0 unchanged, 2 changed", "  healthy -> broken: 1",
                                "  unreadable -> broken: 1"]
    assert Run.objects.get(pk=unread.pk).status == "done" and Run.objects.get(pk=run.pk).result["verdict"] == "broken"
    assert command("recheck_runs", "--since", "2025-03-01").splitlines() == [
        "re-checked 1 runs: 1 unchanged, 0 changed", "  unchanged: 1 broken"]
    with pytest.raises(CommandError, match="no cluster 'nope'"):
        command("recheck_runs", "--cluster", "nope")
    with pytest.raises(CommandError, match="--since 'yesterday'"):
        command("recheck_runs", "--since", "yesterday")


def test_rebuild_snapshots_rechecks_the_runs_of_the_hosts_it_rebuilt(roce_run):
    cluster, run = roce_run
    Run.objects.filter(pk=run.pk).update(verdict="below_expected")
    out = command("rebuild_snapshots", "--cluster", "alpha", "--host", "roce-01")
    assert "rebuilt 1 uploads: 1 snapshots" in out
    assert "re-checked 1 runs: 0 unchanged, 1 changed" in out and "  below_expected -> broken: 1" in out


def test_runs_in_the_admin_list_read_only_and_recheck(roce_run, logged_in_client):
    cluster, run = roce_run
    listing = logged_in_client.get("/admin/ingest/run/?verdict__exact=broken").content.decode()
    assert f"/admin/ingest/run/{run.pk}/change/" in listing and "roce-01" in listing and "perftest" in listing
    page = logged_in_client.get(f"/admin/ingest/run/{run.pk}/change/").content.decode()
    assert 'name="raw"' not in page and "Couldn" not in page  # shown, never an editable field
    assert logged_in_client.get("/admin/ingest/run/add/").status_code == 403
    Run.objects.filter(pk=run.pk).update(verdict="healthy")
    r = logged_in_client.post("/admin/ingest/run/", {"action": "recheck", "_selected_action": [run.pk]}, follow=True)
    assert "healthy -&gt; broken: 1" in r.content.decode()
    assert Run.objects.get(pk=run.pk).verdict == "broken"


def test_one_host_in_every_slow_run_of_a_shape_is_a_cause_on_the_run_page(cluster_with_token, logged_in_client):
    cluster, _ = cluster_with_token
    for name in ("node-a", "node-b", "node-c", "node-d"):
        host_report(cluster, name, "2025-03-01T00:00:00Z", nvidia_smi_topo=TOPO, ibstat=IBSTAT)
    fast, _ = runs.submit_run(cluster=cluster, text=FAST.read_text(), via="web", source_name="fast.txt",
                              hosts={"0666a154": "node-a", "b749a9b0": "node-b"}, collected_at="2025-03-02T00:00:00Z")
    slow1, _ = runs.submit_run(cluster=cluster, text=SLOW.read_text(), via="web", source_name="slow1.txt",
                               hosts={"nccl-tests-h100-worker-0": "node-b", "nccl-tests-h100-worker-1": "node-c"},
                               collected_at="2025-03-03T00:00:00Z")
    slow2, _ = runs.submit_run(cluster=cluster, text=SLOW.read_text() + "\n", via="web", source_name="slow2.txt",
                               hosts={"nccl-tests-h100-worker-0": "node-c", "nccl-tests-h100-worker-1": "node-d"},
                               collected_at="2025-03-04T00:00:00Z")
    assert fast.result["shape"] == slow2.result["shape"] == {"collective": "all_reduce", "nodes": 2, "ranks_per_node": 8}
    t10 = next(f for f in slow2.result["findings"] if f.get("fleet"))
    assert (t10["rule"], t10["severity"], t10["hosts"]) == ("T10", "HIGH", ["node-c"])
    cited = [slow2.result["evidence"][i] for i in t10["evidence"]]
    assert [(e["run"], e["line"], e["file"]) for e in cited] == [(slow2.pk, 28, "slow2.txt"), (slow1.pk, 28, "slow1.txt"),
                                                                 (fast.pk, 37, "fast.txt")]
    assert cited[2]["text"].startswith("8589934592") and "466.73" in cited[2]["text"]
    # checked before slow2 existed: one slow run, so node-c is only a suspect
    assert [(f["severity"], f["hosts"]) for f in slow1.result["findings"] if f.get("fleet")] == [("MED", ["node-c"])]
    html = logged_in_client.get(f"/c/alpha/runs/{slow2.pk}/").content.decode()
    assert "One host in every slow run" in html and f'href="/c/alpha/runs/{fast.pk}/"' in html
    runs.recheck_runs(cluster=cluster)
    slow1.refresh_from_db()
    assert [(f["severity"], f["hosts"]) for f in slow1.result["findings"] if f.get("fleet")] == [("HIGH", ["node-c"])]
