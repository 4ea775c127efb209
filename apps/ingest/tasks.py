"""Celery tasks of the ingest app: one-line adapters that take ids and call ``services``.

Run a worker with ``celery -A topoweb worker -l info`` and the periodic sweeper with
``celery -A topoweb beat -l info`` (or a worker with ``-B`` on a single machine); both need
``TOPOWEB_BROKER_URL``. The beat schedule is registered here (``SWEEP_SCHEDULE``).
"""

from __future__ import annotations

from celery import shared_task, signals
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections

from apps.ingest import imports, processing, rebuild
from topoweb.celery import app

SWEEP_SCHEDULE_NAME = "ingest.sweep_uploads"
PRUNE_SCHEDULE_NAME = "ingest.prune_uploads"
PRUNE_EVERY_SECONDS = 6 * 3600.0


# Both limits sit below the upload's lease (topoweb.env.check_time_limits): the soft limit raises
# SoftTimeLimitExceeded in the task, which fails the upload with its reason; the hard limit kills
# the pool process, and the upload is claimed again once its lease runs out. The prefork pool
# (celery's default) enforces them; ``-P solo`` does not.
TIME_LIMITS = {"soft_time_limit": settings.TASK_SOFT_TIME_LIMIT, "time_limit": settings.TASK_TIME_LIMIT}


# A database that refuses connections (restart, max_connections) is retried with backoff; any
# upload still left behind is picked up by the sweeper.
@shared_task(name="ingest.process_upload", ignore_result=True, autoretry_for=(OperationalError, InterfaceError),
             retry_backoff=2, retry_backoff_max=60, max_retries=6, **TIME_LIMITS)
def process_upload_task(upload_id: int) -> None:
    processing.process_upload(upload_id)


@shared_task(name="ingest.sweep_uploads", ignore_result=True)
def sweep_uploads_task() -> None:
    processing.sweep_uploads()


@shared_task(name="ingest.prune_uploads", ignore_result=True)
def prune_uploads_task() -> None:
    processing.prune_uploads()


@shared_task(name="ingest.run_import_job", ignore_result=True, soft_time_limit=settings.IMPORT_SOFT_TIME_LIMIT,
             time_limit=settings.IMPORT_TIME_LIMIT)
def run_import_job_task(job_id: int) -> None:
    imports.run_import_job(job_id)


# A chunk of hosts of ``manage.py rebuild_snapshots`` (apps.ingest.rebuild.fan_out): a batch job, under
# the bulk import's limits (a host with many stored reports takes longer than one upload).
@shared_task(name="ingest.rebuild_hosts", ignore_result=True, autoretry_for=(OperationalError, InterfaceError),
             retry_backoff=2, retry_backoff_max=60, max_retries=6, soft_time_limit=settings.IMPORT_SOFT_TIME_LIMIT,
             time_limit=settings.IMPORT_TIME_LIMIT)
def rebuild_hosts_task(host_ids: list[int]) -> None:
    rebuild.rebuild_hosts(host_ids)


def sweep_schedule() -> dict:
    """The beat entry: sweep every SWEEP_AFTER_SECONDS / 2 (at least every 10 s)."""
    return {"task": "ingest.sweep_uploads", "schedule": max(10.0, settings.SWEEP_AFTER_SECONDS / 2)}


# Registered at import: the worker and beat import this module through autodiscover_tasks().
def prune_schedule() -> dict:
    """The beat entry: prune unchanged raw uploads every 6 hours (nothing while RAW_RETENTION_DAYS is 0)."""
    return {"task": "ingest.prune_uploads", "schedule": PRUNE_EVERY_SECONDS}


app.conf.beat_schedule = {**(app.conf.beat_schedule or {}), SWEEP_SCHEDULE_NAME: sweep_schedule(),
                          PRUNE_SCHEDULE_NAME: prune_schedule()}


# Celery's Django fixup closes every database connection before and after each task unless
# CELERY_DB_REUSE_MAX is set: one PostgreSQL reconnect (TCP, authentication, session set-up) per
# report, which cost a worker more than storing the snapshot. Connections are instead recycled
# the way Django recycles them per request: after CONN_MAX_AGE, or at once after an error.
DB_REUSE_MAX = 1_000_000


def _reuse_db_connections() -> None:
    for fixup in getattr(app, "_fixups", None) or ():
        worker_fixup = getattr(fixup, "worker_fixup", None)  # celery.fixups.django.DjangoWorkerFixup
        if worker_fixup is not None and not getattr(worker_fixup, "db_reuse_max", None):
            worker_fixup.db_reuse_max = getattr(settings, "CELERY_DB_REUSE_MAX", None) or DB_REUSE_MAX


@signals.task_prerun.connect
def _recycle_db_connections(task=None, **kwargs) -> None:
    if task is None or getattr(task.request, "is_eager", False):
        return  # in-process: the caller's connection and transaction are not ours to close
    _reuse_db_connections()
    close_old_connections()
