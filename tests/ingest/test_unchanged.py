"""A host re-reporting the same layout makes no new snapshot; prune_uploads empties only those
re-reports' raw text, past TOPOWEB_RAW_RETENTION_DAYS, never an upload that created or changed one."""

from __future__ import annotations

import io
from datetime import timedelta

from django.core.management import call_command
from django.utils import timezone

from apps.ingest import processing, services
from apps.ingest.models import Host, Snapshot, Upload
from tests.ingest.helpers import DEMO, IBSTAT_DOWN, TOPO_12NIC, report

IBSTAT_UP = DEMO / "ibstat" / "gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt"


def hourly(hour: int, *, ibstat=IBSTAT_UP) -> dict:
    """The same 8-GPU, 12-NIC node reporting at ``hour``: the real topo -m and ibstat, with a
    trailing blank line per hour (as a re-run prints: other bytes, the same layout)."""
    data = report("node-07", topo=TOPO_12NIC, collected_at=f"2025-02-01T{hour:02d}:00:00Z")
    data["sections"] = {"nvidia_smi_topo": TOPO_12NIC.read_text() + "\n" * hour, "ibstat": ibstat.read_text()}
    data.pop("unavailable")
    return data


def submit(cluster, data: dict) -> Upload:
    upload, created = services.submit_report(cluster=cluster, report=data, via="agent")
    assert created, "each hour's report is a new upload (its bytes differ)"
    assert processing.process_upload(upload.pk) == "done"
    return Upload.objects.get(pk=upload.pk)


def test_the_same_hardware_every_hour_keeps_one_snapshot(cluster_with_token):
    cluster, _ = cluster_with_token
    first = submit(cluster, hourly(1))
    snap = Snapshot.objects.get(upload=first)
    assert len(snap.document_hash) == 64 and snap.confirmed_at is None and first.same_as_id is None
    again = [submit(cluster, hourly(h)) for h in (2, 3)]
    assert Snapshot.objects.count() == 1
    assert [u.same_as_id for u in again] == [snap.pk, snap.pk]
    snap.refresh_from_db()
    assert snap.confirmed_at.isoformat() == "2025-02-01T03:00:00+00:00"
    assert snap.collected_at.isoformat() == "2025-02-01T01:00:00+00:00"  # the layout's first report
    host = Host.objects.get(hostname="node-07")
    assert host.last_seen_at >= snap.confirmed_at


def test_a_port_state_change_is_a_new_layout(cluster_with_token):
    cluster, _ = cluster_with_token
    submit(cluster, hourly(1))
    # the real ibstat of the same node with 3 of its 12 ports down / disabled
    changed = submit(cluster, hourly(2, ibstat=IBSTAT_DOWN))
    assert changed.same_as_id is None and Snapshot.objects.count() == 2
    assert Snapshot.objects.get(upload=changed).active_nic_count < Snapshot.objects.exclude(upload=changed).get().active_nic_count
    back = submit(cluster, hourly(3))  # all ports up again: differs from the latest (ports down)
    assert back.same_as_id is None and Snapshot.objects.count() == 3


def test_upload_status_says_unchanged(cluster_with_token, logged_in_client):
    cluster, _ = cluster_with_token
    first = submit(cluster, hourly(1))
    again = submit(cluster, hourly(2))
    a = logged_in_client.get(f"/api/v1/uploads/{first.pk}").json()
    b = logged_in_client.get(f"/api/v1/uploads/{again.pk}").json()
    assert (a["status"], a["unchanged"]) == ("done", False) and a["snapshot_id"] is not None
    assert (b["status"], b["unchanged"], b["snapshot_id"]) == ("done", True, a["snapshot_id"])


def test_rebuild_keeps_unchanged_uploads_unchanged(cluster_with_token):
    cluster, _ = cluster_with_token
    first = submit(cluster, hourly(1))
    again = submit(cluster, hourly(2))
    summary = processing.rebuild_snapshots(cluster=cluster)
    assert (summary.total, summary.done, summary.failed) == (2, 2, 0)
    assert Snapshot.objects.count() == 1
    assert Upload.objects.get(pk=again.pk).same_as_id == Snapshot.objects.get(upload=first).pk


def test_prune_empties_only_unchanged_uploads_past_the_retention(cluster_with_token, settings):
    cluster, _ = cluster_with_token
    first = submit(cluster, hourly(1))
    dup = submit(cluster, hourly(2))
    changed = submit(cluster, hourly(3, ibstat=IBSTAT_DOWN))
    recent_dup = submit(cluster, hourly(4, ibstat=IBSTAT_DOWN))
    assert recent_dup.same_as_id is not None
    old = timezone.now() - timedelta(days=40)
    Upload.objects.filter(pk__in=[first.pk, dup.pk, changed.pk]).update(received_at=old)
    raw = {u.pk: u.raw for u in Upload.objects.all()}

    settings.RAW_RETENTION_DAYS = 0
    assert processing.prune_uploads().uploads == 0  # 0: keep forever
    out = io.StringIO()
    call_command("prune_uploads", "--days", "30", "--dry-run", stdout=out)
    assert f"would empty the raw text of 1 unchanged upload(s) older than 30 days, {dup.size_bytes} bytes" in out.getvalue()
    assert {u.pk: u.raw for u in Upload.objects.all()} == raw

    settings.RAW_RETENTION_DAYS = 30
    out = io.StringIO()
    call_command("prune_uploads", stdout=out)
    assert f"emptied the raw text of 1 unchanged upload(s) older than 30 days, {dup.size_bytes} bytes freed" in out.getvalue()
    assert "kept 2 older upload(s)" in out.getvalue()
    after = {u.pk: u for u in Upload.objects.all()}
    assert after[dup.pk].raw == "" and after[dup.pk].raw_pruned_at is not None
    assert after[dup.pk].same_as_id == Snapshot.objects.get(upload=first).pk  # still says what it confirmed
    for kept in (first.pk, changed.pk, recent_dup.pk):  # created a layout, changed one, or too recent
        assert after[kept].raw == raw[kept] and after[kept].raw_pruned_at is None
    assert processing.prune_uploads().uploads == 0  # nothing twice
    assert processing.rebuild_snapshots(cluster=cluster).skipped == 1  # the emptied one is not re-read
    from django.test import Client
    from django.contrib.auth import get_user_model
    viewer = Client()
    viewer.force_login(get_user_model().objects.create_superuser("root", password="x"))
    gone = viewer.get(f"/api/v1/uploads/{dup.pk}/report")
    assert gone.status_code == 410 and gone.json()["code"] == "pruned"
    assert gone.json()["snapshot_id"] == after[dup.pk].same_as_id
    assert viewer.get(f"/api/v1/uploads/{first.pk}/report").content.decode() == raw[first.pk]


def test_beat_schedule_prunes():
    from apps.ingest import tasks
    from topoweb.celery import app

    assert app.conf.beat_schedule[tasks.PRUNE_SCHEDULE_NAME]["task"] == "ingest.prune_uploads"
