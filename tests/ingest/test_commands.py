"""Management commands and pipeline services: enrollment, rebuild, sweep, bulk import (the demo: test_demo.py)."""

from __future__ import annotations

import io
import re
import json
import tarfile
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from apps.ingest import imports, processing, services
from apps.ingest.models import AgentToken, Cluster, ImportJob, Snapshot, Upload
from tests.ingest.helpers import TOPO_H100, TOPO_P40, body, broken_topo_report, report

pytestmark = pytest.mark.django_db


def run(*args, **kwargs) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err, **kwargs)
    return out.getvalue(), err.getvalue()


def test_create_cluster_prints_a_working_token_on_its_last_line(django_capture_on_commit_callbacks):
    out, err = run("create_cluster", "prod", "--description", "racks 1-4")
    token = out.strip().splitlines()[-1]
    assert token.startswith("tw_") and "curl" in err
    stored = AgentToken.objects.get()
    assert stored.token_hash == services.hash_token(token) and token not in stored.token_hash
    with django_capture_on_commit_callbacks(execute=True):
        resp = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
            "/api/v1/reports", body(report()), content_type="application/json")
    assert resp.status_code == 202
    assert Upload.objects.get().cluster.name == "prod"
    with pytest.raises(CommandError):
        run("create_cluster", "prod")
    with pytest.raises(CommandError):
        run("create_cluster", "bad name")


def test_issue_and_revoke_token(django_capture_on_commit_callbacks):
    run("create_cluster", "prod")
    out, _ = run("issue_token", "prod", "--name", "rack7")
    token = out.strip().splitlines()[-1]
    assert AgentToken.objects.get(name="rack7").prefix == token[:11]
    with pytest.raises(CommandError):
        run("issue_token", "nope")
    out, _ = run("revoke_token", token[:11])
    assert "revoked" in out and AgentToken.objects.get(name="rack7").revoked_at is not None
    resp = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        "/api/v1/reports", body(report()), content_type="application/json")
    assert resp.status_code == 401
    first = AgentToken.objects.get(name="initial")
    run("revoke_token", str(first.pk))
    assert AgentToken.objects.filter(revoked_at__isnull=True).count() == 0
    with pytest.raises(CommandError):
        run("revoke_token", "tw_00000000")
    out, _ = run("list_tokens")
    assert "rack7" in out and "revoked" in out


def test_rebuild_snapshots_rederives_from_raw_uploads(cluster_with_token, django_capture_on_commit_callbacks):
    cluster, _ = cluster_with_token
    with django_capture_on_commit_callbacks(execute=True):
        good, _ = services.submit_report(cluster=cluster, report=report(), via="web")
        bad, _ = services.submit_report(cluster=cluster, report=broken_topo_report(), via="web")
    raw_before = {u.pk: u.raw for u in Upload.objects.all()}
    snap = Snapshot.objects.get(upload=good)
    Snapshot.objects.filter(pk=snap.pk).update(document={"stale": True}, gpu_count=0)
    out, _ = run("rebuild_snapshots", "--cluster", "alpha", "--no-progress")
    assert "2 uploads: 1 snapshots, 1 failed" in out and "nvidia_smi_topo line 4" in out
    rebuilt = Snapshot.objects.get(upload=good)
    assert rebuilt.gpu_count == 8 and "graph" in rebuilt.document
    assert {u.pk: u.raw for u in Upload.objects.all()} == raw_before  # raw never touched
    out, _ = run("rebuild_snapshots", "--host", "h100-a01", "--no-progress")
    assert "rebuilt 1 uploads" in out
    with pytest.raises(CommandError):
        run("rebuild_snapshots", "--cluster", "nope")


def test_processing_is_idempotent_and_claims_once(cluster_with_token):
    cluster, _ = cluster_with_token
    upload, _ = services.submit_report(cluster=cluster, report=report(), via="web")  # on_commit not run
    assert Upload.objects.get(pk=upload.pk).status == "received"
    assert processing.process_upload(upload.pk) == "done"
    assert processing.process_upload(upload.pk) == "done"  # a redelivered task does nothing
    assert Upload.objects.get(pk=upload.pk).attempts == 1 and Snapshot.objects.count() == 1
    # An upload being processed by another worker is not claimed again.
    other, _ = services.submit_report(cluster=cluster, report=report(hostname="b"), via="web")
    Upload.objects.filter(pk=other.pk).update(status="processing", started_at=timezone.now())
    assert processing.process_upload(other.pk) == "processing"
    assert processing.process_upload(999999) == "missing"


def test_broker_down_at_submit_stores_the_upload_and_the_sweeper_requeues_it(
        cluster_with_token, django_capture_on_commit_callbacks, settings, monkeypatch):
    from apps.ingest import tasks

    settings.CELERY_TASK_ALWAYS_EAGER = False
    calls = []

    def broker_down(*args, **kwargs):
        calls.append(args)
        raise ConnectionRefusedError("redis is down")

    monkeypatch.setattr(tasks.process_upload_task, "apply_async", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        resp = Client(HTTP_AUTHORIZATION=f"Bearer {cluster_with_token[1]}").post(
            "/api/v1/reports", body(report()), content_type="application/json")
    assert resp.status_code == 202 and len(calls) == 1
    upload = Upload.objects.get()
    assert upload.status == "received"
    assert processing.sweep_uploads() == []  # too young to sweep
    Upload.objects.filter(pk=upload.pk).update(received_at=timezone.now() - timedelta(seconds=3600))
    assert processing.sweep_uploads() == []  # broker still down: nothing handed over
    assert Upload.objects.get().last_enqueued_at is None

    sent = []
    monkeypatch.setattr(tasks.process_upload_task, "apply_async", lambda args, **kw: sent.append(args[0]))
    out, _ = run("sweep_uploads")
    assert sent == [upload.pk] and str(upload.pk) in out
    assert processing.sweep_uploads() == []  # just re-enqueued: not again until SWEEP_AFTER_SECONDS pass
    # An upload left 'processing' by a dead worker is swept once its lease has run out; the
    # sweeper changes no status (the worker's claim takes it again).
    Upload.objects.filter(pk=upload.pk).update(status="processing", started_at=timezone.now() - timedelta(days=1),
                                               lease_expires_at=timezone.now() - timedelta(seconds=1),
                                               last_enqueued_at=None)
    assert processing.sweep_uploads() == [upload.pk]
    assert Upload.objects.get().status == "processing"


def _capture_tree(root):
    (root / "reports").mkdir(parents=True)
    (root / "reports" / "a.json").write_text(json.dumps(report(hostname="json-host")))
    (root / "reports" / "bad.json").write_text("{oops")
    (root / "reports" / "shape.json").write_text(json.dumps({"schema": "topoweb.report/1", "hostname": "x"}))
    host = root / "captures" / "p40-box"
    host.mkdir(parents=True)
    (host / "nvidia_smi_topo.txt").write_bytes(TOPO_P40.read_bytes())
    host2 = root / "captures" / "dirname-host"
    host2.mkdir(parents=True)
    (host2 / "nvidia_smi_topo.txt").write_bytes(TOPO_H100.read_bytes())
    (host2 / "hostname.txt").write_text("named-host\n")
    broken = root / "captures" / "broken"
    broken.mkdir()
    (broken / "nvidia_smi_topo.txt").write_text(broken_topo_report()["sections"]["nvidia_smi_topo"])


def _assert_imported(out: str):
    assert "6 reports" in out and "4 new" in out and "2 rejected" in out
    assert "3 snapshots built, 1 failed to parse" in out
    assert "bad.json" in out and "not JSON" in out
    assert "shape.json" in out and "sections" in out
    assert re.search(r"failed (fleet/)?captures/broken/ .*section nvidia_smi_topo line 4", out)
    hosts = set(Upload.objects.values_list("host__hostname", flat=True))
    assert hosts == {"json-host", "p40-box", "named-host", "broken"}
    assert Cluster.objects.get().name == "lab"


@pytest.mark.django_db(transaction=True)  # on_commit fires at once, as in production
def test_import_reports_from_a_folder(tmp_path):
    _capture_tree(tmp_path)
    out = io.StringIO()
    with pytest.raises(SystemExit) as exc:
        call_command("import_reports", str(tmp_path), "--cluster", "lab", "--no-progress", stdout=out,
                     stderr=io.StringIO())
    assert exc.value.code == 1
    _assert_imported(out.getvalue())
    assert Upload.objects.filter(via="import", status="done").count() == 3
    # Again: everything already stored.
    out = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("import_reports", str(tmp_path), "--cluster", "lab", "--no-progress", stdout=out,
                     stderr=io.StringIO())
    assert "0 new, 4 already stored" in out.getvalue()


@pytest.mark.django_db(transaction=True)  # on_commit fires at once, as in production
def test_import_reports_from_a_tar_gz(tmp_path):
    tree = tmp_path / "tree"
    _capture_tree(tree)
    archive = tmp_path / "fleet.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="fleet")
    out = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("import_reports", str(archive), "--cluster", "lab", "--no-progress", stdout=out,
                     stderr=io.StringIO())
    _assert_imported(out.getvalue())
    with pytest.raises(CommandError):
        call_command("import_reports", str(tmp_path / "missing.tar.gz"), stdout=io.StringIO())


def test_background_import_job_reports_progress(tmp_path, logged_in_client, django_capture_on_commit_callbacks):
    tree = tmp_path / "tree"
    _capture_tree(tree)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(tree, arcname="fleet")
    buf.seek(0)
    buf.name = "fleet.tar.gz"
    cluster = services.create_cluster(name="lab")
    with django_capture_on_commit_callbacks(execute=True):
        job = imports.start_import(cluster=cluster, path_or_fileobj=buf, user=None)
    state = logged_in_client.get(f"/api/v1/imports/{job.pk}").json()
    assert state["status"] == "done_with_errors" and state["total"] == 6 and state["processed"] == 6
    assert state["created"] == 4 and state["rejected"] == 2
    assert {e["file"] for e in state["errors"]} == {"fleet/reports/bad.json", "fleet/reports/shape.json"}
    assert not list(imports._import_dir().glob(f"*fleet.tar.gz"))  # the stored copy is cleaned up
    assert ImportJob.objects.get().finished_at is not None
    assert logged_in_client.get("/api/v1/imports/999").status_code == 404
