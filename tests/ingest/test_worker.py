"""Production path: a report posted to the API is parsed by a real Celery worker over Redis.

Marker ``services``: needs Redis on 127.0.0.1:6379 (database 15 is flushed) and runs
``celery -A topoweb worker -P solo`` as a subprocess on the test database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client

from apps.ingest.models import Snapshot, Upload
from tests.ingest.helpers import TOPO_P40, body, report

REDIS_URL = os.environ.get("TOPOWEB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _drop_connections(app) -> None:
    """Close every broker connection and forget the pools: kombu keeps its connection and producer
    pools in process-wide registries keyed by the broker URL, so a pool closed here would otherwise
    be handed to the next test ("Acquire on closed pool")."""
    from kombu import pools

    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def redis_broker(settings):
    import redis
    from topoweb.celery import app

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        pytest.skip(f"Redis is not running at {REDIS_URL} (make services)")
    client.flushdb()
    saved = {k: app.conf[k] for k in ("broker_url", "task_always_eager")}
    app.conf.update(broker_url=REDIS_URL, task_always_eager=False)
    _drop_connections(app)  # connections made for the in-memory broker must not be reused
    settings.CELERY_TASK_ALWAYS_EAGER = False
    yield client
    app.conf.update(**saved)
    _drop_connections(app)
    client.flushdb()


@pytest.fixture
def start_worker(tmp_path):
    procs = []

    def _start() -> subprocess.Popen:
        env = {**os.environ, "TOPOWEB_BROKER_URL": REDIS_URL, "TOPOWEB_DATABASE_URL": database_url()}
        log = open(tmp_path / f"worker{len(procs)}.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "topoweb", "worker", "-P", "solo", "-l", "info",
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append((proc, log))
        return proc

    yield _start
    for proc, log in procs:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def wait_for(predicate, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_worker_builds_snapshots_from_reports_queued_in_redis(cluster_with_token, redis_broker, start_worker,
                                                              tmp_path):
    agent = Client(HTTP_AUTHORIZATION=f"Bearer {cluster_with_token[1]}")
    # Posted before any worker runs: the message waits in Redis.
    first = agent.post("/api/v1/reports", body(report()), content_type="application/json")
    assert first.status_code == 202
    assert Upload.objects.get(pk=first.json()["upload_id"]).status == "received"
    assert redis_broker.llen("celery") == 1

    worker = start_worker()
    second = agent.post("/api/v1/reports", body(report(hostname="p40-01", topo=TOPO_P40)),
                        content_type="application/json")
    ids = [first.json()["upload_id"], second.json()["upload_id"]]
    done = wait_for(lambda: Snapshot.objects.filter(upload_id__in=ids).count() == 2)
    logs = "\n".join(p.read_text() for p in tmp_path.glob("worker*.log"))
    assert done, f"no snapshots within the wait; worker alive={worker.poll() is None}\n{logs[-3000:]}"
    assert set(Upload.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"done"}
    assert agent.get(first.json()["status_url"]).json()["snapshot_id"] is not None

    # A redelivered message for a done upload changes nothing.
    from apps.ingest.tasks import process_upload_task
    process_upload_task.apply_async((ids[0],))
    time.sleep(1.0)
    assert Upload.objects.get(pk=ids[0]).attempts == 1 and Snapshot.objects.count() == 2
