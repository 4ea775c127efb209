"""The benchmarks' own PostgreSQL database and the synthetic clusters in it.

``setup()`` points Django at ``TOPOWEB_BENCH_DATABASE_URL`` (default
``postgres://postgres@127.0.0.1:5432/topoweb_bench``: a database of its own, never the
development or test one), creates it when missing, runs the migrations and returns the URL.
It must run before anything imports Django settings; ``python -m bench`` calls it first.

``fill_cluster(name, n)`` stores ``n`` synthetic hosts (``bench.synth``) through
``services.submit_report`` with in-process processing, once: a cluster already holding ``n``
analysed hosts is kept, so later runs start at once.
"""

from __future__ import annotations

import os
import sys

from bench import BENCH_SECRET_KEY

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/topoweb_bench"
BENCH_USER = "bench"
_ready: str | None = None


def setup(url: str | None = None) -> str:
    global _ready
    if _ready:
        return _ready
    url = url or os.environ.get("TOPOWEB_BENCH_DATABASE_URL") or DEFAULT_URL
    os.environ["TOPOWEB_DATABASE_URL"] = url
    os.environ.pop("TOPOWEB_BROKER_URL", None)  # filling runs in-process; the ingest group starts its own
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "topoweb.settings")
    os.environ.setdefault("TOPOWEB_LOG_LEVEL", "WARNING")
    os.environ.setdefault("TOPOWEB_SECRET_KEY", BENCH_SECRET_KEY)
    if url.startswith("postgres"):
        _create_database(url)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    _ready = url
    return url


def _create_database(url: str) -> None:
    import psycopg
    from urllib.parse import urlparse

    u = urlparse(url)
    name = u.path.lstrip("/")
    admin = url[: url.rfind("/")] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def bench_user():
    from django.contrib.auth import get_user_model

    User = get_user_model()
    user, _ = User.objects.get_or_create(username=BENCH_USER, defaults={"is_staff": True})
    return user


def fill_cluster(name: str, n: int, *, seed: int = 0, fault_every: int = 8, progress: bool = True):
    """The cluster ``name`` with ``n`` synthetic hosts, each with an analysed snapshot."""
    from apps.ingest import services
    from apps.ingest.models import Cluster, Snapshot
    from bench.synth import iter_reports

    cluster = Cluster.objects.filter(name=name).first()
    if cluster is not None:
        done = Snapshot.objects.filter(host__cluster=cluster).values("host").distinct().count()
        if done >= n and cluster.hosts.count() == n:
            return cluster
        cluster.delete()
    cluster = services.create_cluster(name=name, description=f"synthetic: {n} hosts from bench.synth (seed {seed})")
    for i, report in enumerate(iter_reports(n, seed=seed, fault_every=fault_every, cluster=name)):
        report["hostname"] = report["hostname"].replace("synth-", f"synth-{name.removeprefix('synth-')}-", 1)
        services.submit_report(cluster=cluster, report=report, via="import", source_name="bench.synth")
        if progress and (i + 1) % 128 == 0:
            print(f"  {name}: {i + 1}/{n} hosts stored and analysed", file=sys.stderr, flush=True)
    return cluster
