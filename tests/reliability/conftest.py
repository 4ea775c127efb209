"""Reliability tests. Those marked ``soak`` start private services (Redis, PostgreSQL, server,
Celery workers) and take tens of seconds each: they run with ``make soak`` (``TOPOWEB_SOAK=1``)
and are skipped otherwise. The fuzzing and access tests run in ``make test``."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "soak: starts private services; run by make soak (TOPOWEB_SOAK=1)")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("TOPOWEB_SOAK") == "1":
        return
    skip = pytest.mark.skip(reason="soak test: run with make soak (TOPOWEB_SOAK=1)")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def workdir():
    d = Path(tempfile.mkdtemp(prefix="topoweb-rel-"))
    yield d
    if os.environ.get("TOPOWEB_KEEP_LOGS") != "1":
        shutil.rmtree(d, ignore_errors=True)
    else:
        print(f"logs kept in {d}")


@pytest.fixture
def redis_private():
    from tests.reliability.stack import PrivateRedis

    r = PrivateRedis()
    r.start()
    yield r
    r.stop()


@pytest.fixture
def pg_private():
    """A PostgreSQL cluster of the test's own (max_connections 100, the default): a test that
    exhausts or restarts it never disturbs the shared one."""
    from tests.reliability.stack import PrivatePostgres

    pg = PrivatePostgres()
    pg.start()
    pg.create_db()
    yield pg
    pg.destroy()


@pytest.fixture
def stack(pg_private, redis_private, workdir):
    """Server + migrations on a private PostgreSQL, private Redis; no worker yet."""
    from tests.reliability.stack import Stack

    s = Stack(pg_private.url, redis_private.url, workdir)
    s.migrate()
    s.start_server()
    yield s
    s.close()
