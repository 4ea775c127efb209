"""rebuild_snapshots over Celery workers: chunks of hosts as tasks, progress from the database.

The fan-out runs here with Celery eager; ``test_worker_rebuild.py`` runs it against the real Redis
with a worker process."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.ingest import rebuild, services
from apps.ingest.models import Snapshot, Upload
from tests.ingest.helpers import TOPO_P40, broken_topo_report, report

pytestmark = pytest.mark.django_db(transaction=True)


def stored(cluster, hostnames=("h100-a01", "h100-a02", "p40-01")) -> list[Snapshot]:
    snaps = []
    for name in hostnames:
        upload, _ = services.submit_report(cluster=cluster, report=report(
            hostname=name, **({"topo": TOPO_P40} if name.startswith("p40") else {})), via="web")
        snaps.append(Snapshot.objects.get(upload=upload))
    return snaps


def make_stale(snaps: list[Snapshot]) -> None:
    Snapshot.objects.filter(pk__in=[s.pk for s in snaps]).update(document={"stale": True}, gpu_count=0)


def command(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("rebuild_snapshots", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_fan_out_rebuilds_every_host_in_chunks_with_progress(cluster_with_token):
    cluster, _ = cluster_with_token
    snaps = stored(cluster)
    bad, _ = services.submit_report(cluster=cluster, report=broken_topo_report(), via="web")
    make_stale(snaps)
    seen: list[rebuild.Progress] = []
    summary = rebuild.fan_out(cluster=cluster, chunk_hosts=2, progress=seen.append, poll_seconds=0.01)
    assert summary.tasks == 2  # 4 hosts, 2 per task
    assert (summary.total, summary.done, summary.failed, summary.skipped) == (4, 3, 1, 0)
    assert summary.failures[0][0] == bad.pk and summary.failures[0][1] == "broken-01"
    assert "line 4" in str(summary.failures[0][2]) or summary.failures[0][2].get("line_no") == 4
    assert not summary.unfinished
    for s in snaps:
        rebuilt = Snapshot.objects.get(upload_id=s.upload_id)
        assert rebuilt.gpu_count == 8 and "graph" in rebuilt.document
    assert seen[-1].done == seen[-1].total == 4
    assert "rebuilt 4/4 uploads (100%)" in seen[-1].line() and "uploads/s" in seen[-1].line()


def test_fan_out_skips_what_a_worker_holds_and_names_what_never_finished(cluster_with_token, monkeypatch):
    cluster, _ = cluster_with_token
    snaps = stored(cluster, ("h100-a01", "h100-a02"))
    Upload.objects.filter(pk=snaps[0].upload_id).update(status=Upload.Status.PROCESSING)
    summary = rebuild.fan_out(cluster=cluster, poll_seconds=0.01)
    assert (summary.total, summary.done, summary.skipped) == (2, 1, 1)
    # a task no worker runs: the wait stops at the stall limit and names the uploads left
    from apps.ingest import tasks

    monkeypatch.setattr(tasks.rebuild_hosts_task, "delay", lambda ids: None)
    summary = rebuild.fan_out(cluster=cluster, poll_seconds=0.01, stall_seconds=0.05)
    assert summary.unfinished == [snaps[1].upload_id] and summary.done == 0


def test_progress_line_has_rate_and_eta():
    p = rebuild.Progress(done=250, total=1000, seconds=5.0)
    assert p.line() == "rebuilt 250/1000 uploads (25%), 50.0 uploads/s, ETA 15 s"
    assert rebuild.Progress(0, 10, 0.0).line().endswith("ETA -")
    assert rebuild.chunks([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
    with pytest.raises(ValueError):
        rebuild.chunks([1], 0)


def test_command_fans_out_with_a_broker_and_stays_local_without(cluster_with_token, settings, monkeypatch):
    cluster, _ = cluster_with_token
    snaps = stored(cluster, ("h100-a01", "p40-01"))
    make_stale(snaps)
    out, err = command("--cluster", "alpha")  # tasks in-process (make run): rebuilt here
    assert "rebuilt 2 uploads: 2 snapshots, 0 failed" in out and "in this process" in out
    assert "rebuilt 2/2 uploads (100%)" in err and "ETA" in err
    make_stale(snaps)
    # as with TOPOWEB_BROKER_URL for the command; each task runs at once, here (as Celery eager does)
    from apps.ingest import tasks

    monkeypatch.setattr(tasks.rebuild_hosts_task, "delay", lambda ids: tasks.rebuild_hosts_task(ids))
    settings.CELERY_TASK_ALWAYS_EAGER = False
    out, err = command("--cluster", "alpha", "--chunk", "1")
    assert "rebuilt 2 uploads: 2 snapshots, 0 failed" in out and "over the workers (2 tasks)" in out
    assert "rebuilt 2/2 uploads (100%)" in err
    assert all(Snapshot.objects.get(upload_id=s.upload_id).gpu_count == 8 for s in snaps)
    out, _ = command("--cluster", "alpha", "--local", "--no-progress")
    assert "in this process" in out
    with pytest.raises(CommandError):
        command("--chunk", "0")
