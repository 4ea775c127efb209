"""Rebuild at scale: ``manage.py rebuild_snapshots`` fanned out over 1 and then 2 Celery workers.

A fresh private PostgreSQL and Redis (``tests.reliability.stack``, as ``bench.pipeline``; nothing
shared is touched) get a SYNTHETIC cluster of ``TOPOWEB_BENCH_REBUILD_HOSTS`` hosts (default 512,
``bench.synth``: the real layouts in turn, one host in eight with a fault) through
``manage.py import_reports`` in-process. Then, for 1 and 2 workers (``celery -A topoweb worker -P
solo`` processes, started and warmed before the clock), ``rebuild_snapshots --cluster`` sends
the chunks and waits; the figure is the rate its last progress line prints (uploads rebuilt / seconds
since the tasks were sent). Everything shares the machine's cores: the command, the workers,
PostgreSQL and Redis. Rows: ``rebuild rate, 1 worker``, ``rebuild rate, 2 workers`` (snapshots/s)
and their ratio.

``python -m bench rebuild``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.synth import iter_reports
from bench.timing import Measure

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = "synth-rebuild"
RATE = re.compile(r"rebuilt (\d+)/(\d+) uploads \(\d+%\), ([0-9.]+) uploads/s")


def _workers(stack, n: int) -> list[subprocess.Popen]:
    procs = [subprocess.Popen([sys.executable, "-m", "celery", "-A", "topoweb", "worker", "-P", "solo", "-l", "warning",
                               "--without-gossip", "--without-mingle", "-n", f"rebuild{i}@%h"],
                              cwd=ROOT, env=stack.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True) for i in range(n)]
    stack.workers.extend(procs)
    return procs


def _rebuild(stack, host: str | None = None) -> tuple[float, int, str]:
    args = [sys.executable, "manage.py", "rebuild_snapshots", "--cluster", CLUSTER, "--chunk", "8"]
    if host:
        args += ["--host", host]
    out = subprocess.run(args, cwd=ROOT, env=stack.env, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"rebuild_snapshots failed ({out.returncode}): {out.stderr[-1500:]}")
    found = RATE.findall(out.stderr)
    if not found:
        raise RuntimeError(f"no progress line in: {out.stderr[-800:]}")
    done, total, rate = found[-1]
    return float(rate), int(done), out.stdout.strip().splitlines()[0]


def run() -> list[Measure]:
    from tests.reliability.stack import PrivatePostgres, PrivateRedis, Stack

    n = int(os.environ.get("TOPOWEB_BENCH_REBUILD_HOSTS", "512"))
    work = Path(tempfile.mkdtemp(prefix="bench-rebuild-"))
    pg, redis = PrivatePostgres(), PrivateRedis()
    stack = None
    rows: list[Measure] = []
    try:
        pg.start(max_connections=200)
        pg.create_db()
        redis.start()
        stack = Stack(pg.url, redis.url, work)
        stack.env.pop("TOPOWEB_TEST_TRACE", None)
        stack.env["DJANGO_SETTINGS_MODULE"] = "topoweb.settings"
        stack.env["TOPOWEB_DB_CONN_MAX_AGE"] = "60"
        stack.migrate()
        stack.create_cluster(CLUSTER)
        reports = work / "reports"
        reports.mkdir()
        for i, r in enumerate(iter_reports(n, seed=5)):
            (reports / f"{i:05d}.json").write_text(json.dumps(r))
        local = {k: v for k, v in stack.env.items() if k != "TOPOWEB_BROKER_URL"}  # in-process import
        subprocess.run([sys.executable, "manage.py", "import_reports", str(reports), "--cluster", CLUSTER,
                        "--no-progress"], cwd=ROOT, env=local, capture_output=True, text=True, timeout=3600)
        stored = stack.sql("SELECT count(*) FROM ingest_upload WHERE status = 'done'")[0][0]
        rates = {}
        for workers in (1, 2):
            procs = _workers(stack, workers)
            warm_host = stack.sql("SELECT hostname FROM ingest_host ORDER BY id LIMIT 1")[0][0]
            _rebuild(stack, warm_host)  # imports and first connections of the workers, outside the clock
            time.sleep(1.0)
            rate, done, line = _rebuild(stack)
            rates[workers] = rate
            rows.append(Measure(f"rebuild rate, {workers} worker{'s' if workers > 1 else ''}", rate, rate, rate, 1,
                                unit="snapshots/s",
                                note=f"{done} uploads of {n} synthetic hosts ({stored} stored); {line}"))
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
            stack.workers.clear()
        ratio = rates[2] / rates[1] if rates.get(1) else 0.0
        rows.append(Measure("rebuild scaling 2 workers / 1 worker", ratio, ratio, ratio, 1, unit="x",
                            note=f"linear = 2.0; {os.cpu_count()} CPUs on this machine"))
        return rows
    finally:
        if stack is not None:
            stack.close()
        redis.stop()
        pg.destroy()
        shutil.rmtree(work, ignore_errors=True)
