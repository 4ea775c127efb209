"""End-to-end ingest of a synthetic 1,024-host cluster: API -> Redis -> Celery worker -> PostgreSQL.

For 1 and then 2 workers (``celery -A topoweb worker -P solo`` processes), a fresh private
PostgreSQL and Redis (``tests.reliability.stack``; nothing shared is touched), the server as in
production (gunicorn, 2 gthread workers x 4 threads, DEBUG off, ``TOPOWEB_DB_CONN_MAX_AGE=60``;
docs/ingestion.md) and 16 agent threads POSTing the 1,024 ``bench.synth`` reports (the real
layouts in turn, one host in eight with a fault). The server and workers first take a few
warm-up reports each (imports, first connections), outside the clock. Throughput = hosts / (last
snapshot stored - first report received), from the database's own timestamps; the spread is that
of the rate over each tenth of the uploads. Everything shares the machine's cores: the agents,
the server, the workers, PostgreSQL and Redis. Targets: >= 50 reports/s with one worker; two
workers close to twice that (the ratio row).

``python -m bench pipeline``; ``TOPOWEB_BENCH_HOSTS`` changes the host count (default 1024).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.synth import iter_reports, report_bytes
from bench.timing import Measure, summarize

ROOT = Path(__file__).resolve().parent.parent
TARGET_ONE_WORKER = 50.0
AGENTS = 16
WARMUP = 12  # warm-up reports per process (outside the clock)


def _run(n: int, workers: int, bodies: list[bytes], warmup: list[bytes]) -> dict:
    from tests.reliability.stack import PrivatePostgres, PrivateRedis, Stack, send_with_retries, wait_until

    work = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    pg, redis = PrivatePostgres(), PrivateRedis()
    stack = None
    try:
        pg.start(max_connections=400)
        pg.create_db()
        redis.start()
        stack = Stack(pg.url, redis.url, work)
        stack.env.pop("TOPOWEB_TEST_TRACE", None)
        stack.env["DJANGO_SETTINGS_MODULE"] = "topoweb.settings"
        stack.env["TOPOWEB_DB_CONN_MAX_AGE"] = "60"  # gunicorn's fixed threads keep their connections
        # one token posts the whole fleet here, at thousands of reports a minute: the per-token rate
        # limit (600 a minute by default) would answer 429 to most of them, and this measures the
        # pipeline, not the limit (tests/reliability/test_stack.py tests that)
        stack.env["TOPOWEB_RATE_LIMIT_PER_MINUTE"] = "0"
        stack.migrate()
        token = stack.create_cluster("synth-pipeline")
        stack.start_server(gunicorn=True)
        procs = [subprocess.Popen([sys.executable, "-m", "celery", "-A", "topoweb", "worker", "-P", "solo", "-l",
                                   "warning", "--without-gossip", "--without-mingle", "-n", f"bench{i}@%h"],
                                  cwd=ROOT, env=stack.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True) for i in range(workers)]
        stack.workers.extend(procs)
        warm = WARMUP * (workers + 3)  # every server process and every worker handles some
        with ThreadPoolExecutor(max_workers=AGENTS) as pool:
            list(pool.map(lambda b: send_with_retries(stack.base, token, b), warmup[:warm]))
            wait_until(lambda: stack.statuses().get("done", 0) + stack.statuses().get("failed", 0) >= warm,
                       300, "warm-up uploads processed", interval=0.2)
            first_id = stack.sql("SELECT max(id) FROM ingest_upload")[0][0] + 1
            answers = list(pool.map(lambda b: send_with_retries(stack.base, token, b), bodies))
        rejected = [a for a in answers if a[0] != 202]
        if rejected:  # a report not accepted is never processed: say so instead of waiting for it
            raise RuntimeError(f"{len(rejected)} of {n} reports not accepted, e.g. {rejected[0]!r}")
        wait_until(lambda: (stack.statuses().get("done", 0) + stack.statuses().get("failed", 0)) >= n + warm,
                   1800, f"{n} uploads processed", interval=0.5)
        rows = stack.sql("SELECT extract(epoch FROM received_at), extract(epoch FROM finished_at) FROM ingest_upload "
                         "WHERE id >= %s", (first_id,))
        statuses = {k: v for k, v in stack.sql("SELECT status, count(*) FROM ingest_upload WHERE id >= %s "
                                               "GROUP BY status", (first_id,))}
        t0 = min(float(r[0]) for r in rows)
        ends = sorted(float(r[1]) for r in rows)
        total = ends[-1] - t0
        tenth = max(1, n // 10)
        windows = []
        prev = t0
        for i in range(tenth - 1, n, tenth):
            windows.append(tenth / max(1e-6, ends[i] - prev))
            prev = ends[i]
        return {"n": n, "workers": workers, "seconds": total, "rate": n / total, "windows": windows,
                "statuses": statuses, "rejected": len(rejected), "unique": len({a[1].get("upload_id") for a in answers})}
    finally:
        if stack is not None:
            stack.close()
        redis.stop()
        pg.destroy()
        shutil.rmtree(work, ignore_errors=True)


def run() -> list[Measure]:
    n = int(os.environ.get("TOPOWEB_BENCH_HOSTS", "1024"))
    warmup = [report_bytes(r).replace(b'"synth-', b'"warmup-', 1) for r in iter_reports(WARMUP * 5, seed=3)]
    rows: list[Measure] = []
    rates = {}
    for workers in (1, 2):
        bodies = [report_bytes(r).replace(b'"synth-', f'"synth-w{workers}-'.encode(), 1)
                  for r in iter_reports(n, seed=11)]
        out = _run(n, workers, bodies, warmup)
        rates[workers] = out["rate"]
        lost = n - out["statuses"].get("done", 0) - out["statuses"].get("failed", 0)
        m = summarize(f"ingest end to end, {n} hosts, {workers} worker{'s' if workers > 1 else ''}",
                      out["windows"], unit="reports/s",
                      target_ms=TARGET_ONE_WORKER * workers,
                      note=f"{out['rate']:.1f}/s overall in {out['seconds']:.1f} s; statuses {out['statuses']}; "
                           f"rejected {out['rejected']}; lost {lost}; spread over tenths")
        m.median_ms = out["rate"]  # the headline figure is the overall rate; p10/p90 from the tenths
        m.runs = 1
        rows.append(m)
    rows.append(Measure("ingest scaling 2 workers / 1 worker", rates[2] / rates[1], rates[2] / rates[1],
                        rates[2] / rates[1], 1, unit="x", note=f"linear = 2.0; {os.cpu_count()} CPUs on this machine"))
    return rows
