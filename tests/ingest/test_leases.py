"""Claims, leases, attempts and time limits of upload processing (``processing._claim``,
``process_upload``, ``sweep_uploads``; settings TOPOWEB_MAX_ATTEMPTS, TOPOWEB_TASK_*_TIME_LIMIT,
TOPOWEB_PROCESSING_LEASE_SECONDS).

A worker dying is simulated by claiming an upload and then moving its lease into the past: what
a dead worker leaves behind is exactly that row."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from apps.ingest import processing, services, tasks
from apps.ingest.models import Snapshot, Upload
from tests.ingest.helpers import report
from topoweb.env import check_time_limits

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db


@pytest.fixture
def upload(cluster_with_token) -> Upload:
    """A stored report, ``received``, nothing enqueued (submit's on_commit does not run here)."""
    stored, created = services.submit_report(cluster=cluster_with_token[0], report=report(), via="web")
    assert created
    return stored


def expire_lease(upload_id: int) -> None:
    """What a worker that died mid-task leaves: ``processing`` with a lease in the past."""
    Upload.objects.filter(pk=upload_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def row(upload_id: int) -> Upload:
    return Upload.objects.get(pk=upload_id)


def test_claim_takes_a_lease_longer_than_the_hard_time_limit(upload, settings):
    now = timezone.now()
    claimed = processing._claim(upload.pk, now)
    assert claimed is not None and claimed.status == "processing" and claimed.attempts == 1
    assert claimed.raw == upload.raw and claimed.host_id == upload.host_id
    stored = row(upload.pk)
    assert stored.status == "processing" and stored.attempts == 1
    assert stored.lease_expires_at == now + timedelta(seconds=settings.PROCESSING_LEASE_SECONDS)
    assert settings.PROCESSING_LEASE_SECONDS > settings.TASK_TIME_LIMIT > settings.TASK_SOFT_TIME_LIMIT


def test_no_second_claim_while_the_lease_holds_and_the_sweeper_leaves_it(upload):
    now = timezone.now()
    assert processing._claim(upload.pk, now) is not None
    assert processing._claim(upload.pk, now) is None  # a second worker given the same id
    assert processing._claim(upload.pk, now + timedelta(seconds=60)) is None  # still within the lease
    assert processing.process_upload(upload.pk) == "processing"  # a redelivered task does nothing
    Upload.objects.filter(pk=upload.pk).update(received_at=now - timedelta(days=1),
                                               started_at=now - timedelta(days=1))  # old, but leased
    assert processing.sweep_uploads(older_than_seconds=0) == []
    stored = row(upload.pk)
    assert stored.status == "processing" and stored.attempts == 1


def test_an_expired_lease_lets_another_worker_claim_it(upload, settings):
    now = timezone.now()
    assert processing._claim(upload.pk, now).attempts == 1
    later = now + timedelta(seconds=settings.PROCESSING_LEASE_SECONDS + 1)
    again = processing._claim(upload.pk, later)
    assert again is not None and again.attempts == 2
    assert row(upload.pk).lease_expires_at == later + timedelta(seconds=settings.PROCESSING_LEASE_SECONDS)


def test_the_sweeper_requeues_an_upload_whose_lease_expired(upload, settings, monkeypatch):
    sent = []
    monkeypatch.setattr(services, "enqueue_upload", lambda upload_id: sent.append(upload_id) or True)
    assert processing._claim(upload.pk, timezone.now()) is not None
    assert processing.sweep_uploads(older_than_seconds=0) == []
    expire_lease(upload.pk)
    assert processing.sweep_uploads(older_than_seconds=0) == [upload.pk] == sent
    assert row(upload.pk).status == "processing"  # the sweeper claims nothing itself


def test_finishing_clears_the_lease_and_redelivery_changes_nothing(upload):
    assert processing.process_upload(upload.pk) == "done"
    stored = row(upload.pk)
    assert stored.lease_expires_at is None and stored.attempts == 1 and stored.finished_at is not None
    assert processing._claim(upload.pk, timezone.now() + timedelta(days=1)) is None
    assert processing.process_upload(upload.pk) == "done" and row(upload.pk).attempts == 1


def test_poison_upload_is_failed_after_three_attempts_and_its_raw_report_kept(upload, settings):
    assert settings.MAX_ATTEMPTS == 3  # the documented default
    for attempt in (1, 2, 3):
        claimed = processing._claim(upload.pk, timezone.now())
        assert claimed is not None and claimed.status == "processing" and claimed.attempts == attempt
        expire_lease(upload.pk)  # the worker died in the middle of the analysis
    assert processing.process_upload(upload.pk) == "failed"
    stored = row(upload.pk)
    assert stored.status == "failed" and stored.attempts == 3 and stored.lease_expires_at is None
    assert stored.finished_at is not None
    assert stored.error == processing.attempts_used_error(upload.pk, 3)
    assert stored.error["section"] is None and stored.error["line_no"] == 0 and stored.error["line"] == ""
    assert stored.error["reason"].startswith(
        "processing did not finish after 3 attempts (the worker died or timed out each time); "
        "the raw report is kept")
    assert stored.raw == upload.raw and json.loads(stored.raw)["hostname"] == "h100-a01"
    assert not Snapshot.objects.filter(upload_id=upload.pk).exists()
    # Never claimed again: not by a redelivered task, not through the sweeper.
    assert processing._claim(upload.pk, timezone.now() + timedelta(days=1)) is None
    assert processing.sweep_uploads(older_than_seconds=0) == []


def test_max_attempts_setting_is_honoured(upload, settings):
    settings.MAX_ATTEMPTS = 1
    assert processing._claim(upload.pk, timezone.now()).attempts == 1
    expire_lease(upload.pk)
    claimed = processing._claim(upload.pk, timezone.now())
    assert claimed.status == "failed" and claimed.attempts == 1
    assert "after 1 attempts" in row(upload.pk).error["reason"]


def test_a_worker_that_lost_its_lease_writes_nothing(upload):
    first = processing._claim(upload.pk, timezone.now())
    expire_lease(upload.pk)
    assert processing.process_upload(upload.pk) == "done"  # attempt 2, by another worker
    # The first worker finishes late: its outcome (even a failure) must not overwrite attempt 2.
    late = processing._Outcome(error={"section": None, "line_no": 0, "line": "", "reason": "late"})
    assert processing._store_outcome(first, late, from_status="processing", attempt=first.attempts) == "done"
    stored = row(upload.pk)
    assert stored.status == "done" and stored.error is None and stored.attempts == 2
    assert Snapshot.objects.filter(upload_id=upload.pk).count() == 1


def test_a_processing_row_without_a_lease_is_held_from_its_start(upload, settings):
    """Rows claimed before leases existed: held for one lease after started_at."""
    now = timezone.now()
    Upload.objects.filter(pk=upload.pk).update(status="processing", attempts=1, started_at=now, lease_expires_at=None)
    assert processing._claim(upload.pk, now) is None
    later = now + timedelta(seconds=settings.PROCESSING_LEASE_SECONDS + 1)
    assert processing._claim(upload.pk, later).attempts == 2


def test_soft_time_limit_during_analysis_fails_the_upload_with_the_reason(upload, settings, monkeypatch):
    import apps.domain.analysis as analysis

    def too_slow(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(analysis, "analyze_host", too_slow)
    assert processing.process_upload(upload.pk) == "failed"
    stored = row(upload.pk)
    assert stored.error["reason"].startswith(f"analysis took longer than {settings.TASK_SOFT_TIME_LIMIT} s")
    assert stored.error["section"] is None and stored.lease_expires_at is None and stored.attempts == 1


def test_tasks_carry_the_time_limits(settings):
    task = tasks.process_upload_task
    assert task.soft_time_limit == settings.TASK_SOFT_TIME_LIMIT == 120
    assert task.time_limit == settings.TASK_TIME_LIMIT == 180
    assert settings.PROCESSING_LEASE_SECONDS == 240
    # a bulk import reads many reports: its own, longer limits
    assert tasks.run_import_job_task.soft_time_limit == settings.IMPORT_SOFT_TIME_LIMIT == 3600
    assert tasks.run_import_job_task.time_limit == settings.IMPORT_TIME_LIMIT == 3660
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] >= settings.IMPORT_TIME_LIMIT


@pytest.mark.parametrize("soft,hard,lease", [(180, 180, 240), (200, 180, 240), (120, 180, 180), (120, 180, 100)])
def test_time_limits_must_increase_soft_hard_lease(soft, hard, lease):
    with pytest.raises(ImproperlyConfigured):
        check_time_limits(soft, hard, lease)


@pytest.mark.parametrize("env,named", [
    ({"TOPOWEB_TASK_SOFT_TIME_LIMIT": "300"}, "TOPOWEB_TASK_SOFT_TIME_LIMIT"),
    ({"TOPOWEB_TASK_TIME_LIMIT": "100"}, "TOPOWEB_TASK_SOFT_TIME_LIMIT"),
    ({"TOPOWEB_PROCESSING_LEASE_SECONDS": "180"}, "TOPOWEB_PROCESSING_LEASE_SECONDS"),
    ({"TOPOWEB_MAX_ATTEMPTS": "0"}, "TOPOWEB_MAX_ATTEMPTS"),
])
def test_bad_time_limit_settings_stop_start_up(env, named):
    code = "import django; django.setup()"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "topoweb.settings",
                               "TOPOWEB_DEBUG": "1", **env})
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "ImproperlyConfigured" in last and named in last, proc.stderr[-1000:]


def test_good_time_limit_settings_start(tmp_path):
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "print(s.TASK_SOFT_TIME_LIMIT, s.TASK_TIME_LIMIT, s.PROCESSING_LEASE_SECONDS, s.MAX_ATTEMPTS)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "topoweb.settings",
                               "TOPOWEB_DEBUG": "1", "TOPOWEB_TASK_SOFT_TIME_LIMIT": "10",
                               "TOPOWEB_TASK_TIME_LIMIT": "20", "TOPOWEB_MAX_ATTEMPTS": "5"})
    assert proc.returncode == 0, proc.stderr[-1000:]
    assert proc.stdout.split() == ["10", "20", "80", "5"]  # the lease defaults to the hard limit + 60 s
