"""rebuild_snapshots fanned out over a real Celery worker through Redis (marker ``services``, the
fixtures of ``test_worker.py``; named to run after it, as those fixtures leave Celery's broker
connections closed for the tests that follow in the same session)."""

from __future__ import annotations

import pytest

from apps.ingest import services
from apps.ingest.models import Snapshot
from tests.ingest.helpers import TOPO_P40, report
from tests.ingest.test_rebuild import command, make_stale
from tests.ingest.test_worker import redis_broker, start_worker, wait_for  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_fan_out_over_a_real_worker(cluster_with_token, redis_broker, start_worker):  # noqa: F811
    cluster, _ = cluster_with_token
    worker = start_worker()
    snaps_ids = []
    for name in ("h100-a01", "h100-a02", "p40-01"):  # processed by the worker, through Redis
        upload, _ = services.submit_report(cluster=cluster, report=report(
            hostname=name, **({"topo": TOPO_P40} if name.startswith("p40") else {})), via="web")
        snaps_ids.append(upload.pk)
    assert wait_for(lambda: Snapshot.objects.filter(upload_id__in=snaps_ids).count() == 3)
    make_stale(list(Snapshot.objects.filter(upload_id__in=snaps_ids)))
    out, err = command("--cluster", "alpha", "--chunk", "1")
    assert worker.poll() is None
    assert "rebuilt 3 uploads: 3 snapshots, 0 failed" in out and "over the workers (3 tasks)" in out
    assert "rebuilt 3/3 uploads (100%)" in err
    assert all(Snapshot.objects.get(upload_id=pk).gpu_count == 8 for pk in snaps_ids)
