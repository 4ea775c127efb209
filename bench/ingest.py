"""Ingestion benchmark: worker throughput and API accept latency under concurrent agents.

    python bench/ingest.py [--reports 200] [--agents 50] [--per-agent 4] [--rates 10,25,50,100] [--full]
                           [--repeat 3] [--workers 1,2] [--web-workers 2] [--web-threads 4]
    python -m bench ingest          (same figures, default sizes)

Needs PostgreSQL (TOPOWEB_BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/topoweb_bench_ingest,
created when missing) and Redis (TOPOWEB_BENCH_BROKER_URL, default redis://127.0.0.1:6379/11,
flushed). Targets (issue "Ingestion"): one worker ingests >= 50 full 8-GPU host reports per second;
with 50 concurrent agents the API accept latency p95 < 50 ms and no upload is lost.

1. Throughput: N distinct 8-GPU host reports (nvidia-smi topo -m of an 8x H100 NV18 12-NIC node +
   its 12-CA ibstat; ``--full`` adds a 927 KB lspci -vvv of an HGX H100) are stored, then handed
   to K ``celery worker -P solo`` processes (``--workers``: 1, then 2); the clock runs from the
   first enqueue to the last snapshot.
2. Latency: the API served as in production, by gunicorn (``gthread``: ``--web-workers``
   processes x ``--web-threads`` threads, backlog 2048; see docs/ingestion.md), on the same
   database, with the Redis broker and one worker; 50 threads each POST ``--per-agent`` distinct
   reports, retrying connection errors as the agent does; every agent-perceived accept latency is
   kept; afterwards every upload must be stored and reach ``done``. Once per offered rate
   (``--rates``: the posts arrive at uniformly random instants, that many per second on
   average), then once with every agent posting back to back from the same instant.
"""

from __future__ import annotations

import argparse
import json
import random
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # also run as `python bench/ingest.py`
from bench import BENCH_SECRET_KEY  # noqa: E402
DB_URL = os.environ.get("TOPOWEB_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/topoweb_bench_ingest")
BROKER_URL = os.environ.get("TOPOWEB_BENCH_BROKER_URL", "redis://127.0.0.1:6379/11")
DEMO = ROOT / "apps" / "ingest" / "demo" / "captures"
FULL_LSPCI = Path("/work/shared/realdata/lspci_vvv/gpud_dell_xe9680_hgx_h100_8gpu_full_lspci_vvv.txt")


def _env() -> dict:
    # DEBUG off, as in production (docs/ingestion.md): with DEBUG on Django keeps every statement
    return {**os.environ, "TOPOWEB_DATABASE_URL": DB_URL, "TOPOWEB_BROKER_URL": BROKER_URL,
            "DJANGO_SETTINGS_MODULE": "topoweb.settings", "TOPOWEB_LOG_LEVEL": "WARNING",
            "TOPOWEB_DEBUG": os.environ.get("TOPOWEB_DEBUG", "0"),
            # a fixed set of gunicorn threads and Celery processes: keep their connections open
            "TOPOWEB_DB_CONN_MAX_AGE": os.environ.get("TOPOWEB_DB_CONN_MAX_AGE", "60"),
            "TOPOWEB_SECRET_KEY": os.environ.get("TOPOWEB_SECRET_KEY", BENCH_SECRET_KEY)}


def _setup() -> None:
    os.environ.update(_env())
    import psycopg

    base, _, name = DB_URL.rpartition("/")
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=_env(), check=True)
    import django

    django.setup()
    import redis

    redis.Redis.from_url(BROKER_URL).flushdb()


def _report(i: int, full: bool) -> dict:
    sections = {
        "nvidia_smi_topo": (DEMO / "topo" / "tpgds_aihub0007_8xh_nv18_12nic_numa_off_clean.txt").read_text(),
        "ibstat": (DEMO / "ibstat" / "gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt").read_text(),
    }
    if full and FULL_LSPCI.exists():
        sections["lspci_verbose"] = FULL_LSPCI.read_text()
    return {"schema": "topoweb.report/1", "hostname": f"bench-{i:05d}", "collected_at": "2025-01-01T00:00:00Z",
            "agent_version": "bench", "meta": {"synthetic": "benchmark copy of real captures"},
            "sections": sections, "unavailable": {}}


WORKER_NICE = 0  # --worker-nice: run the Celery workers at this nice level (docs/ingestion.md)


def _start_worker() -> subprocess.Popen:
    nice = ["nice", "-n", str(WORKER_NICE)] if WORKER_NICE else []
    return subprocess.Popen(nice + [sys.executable, "-m", "celery", "-A", "topoweb", "worker", "-P", "solo", "-l",
                             "warning", "--without-gossip", "--without-mingle", "--without-heartbeat"],
                            cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _wait(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _fresh_cluster(name: str):
    from apps.ingest import services
    from apps.ingest.models import Cluster

    Cluster.objects.filter(name=name).delete()
    cluster = services.create_cluster(name=name)
    return cluster, services.issue_token(cluster=cluster)[1]


def bench_throughput(n: int, full: bool, workers: int = 1) -> dict:
    from apps.ingest import services, tasks
    from apps.ingest.models import Upload

    cluster, _ = _fresh_cluster(f"bench-throughput-{workers}w")
    real_enqueue = services.enqueue_upload
    services.enqueue_upload = lambda upload_id: True  # store only; the worker gets them below
    try:
        ids = [services.submit_report(cluster=cluster, report=_report(workers * 100_000 + i, full),
                                      via="import")[0].pk for i in range(n + workers)]
    finally:
        services.enqueue_upload = real_enqueue
    procs = [_start_worker() for _ in range(workers)]
    warm, ids = ids[:workers], ids[workers:]
    try:
        for upload_id in warm:  # warm-up: imports, first connection (each worker takes one)
            tasks.process_upload_task.delay(upload_id)
        if not _wait(lambda: Upload.objects.filter(pk__in=warm, status="done").count() == workers, 120):
            raise RuntimeError("workers did not process the warm-up uploads")
        started = time.perf_counter()
        cpu0 = [_cpu_seconds(w.pid) for w in procs]
        for upload_id in ids:
            tasks.process_upload_task.delay(upload_id)
        finished = _wait(lambda: Upload.objects.filter(pk__in=ids, status__in=["done", "failed"]).count() == n,
                         600)
        elapsed = time.perf_counter() - started
        cpu1 = [_cpu_seconds(w.pid) for w in procs]
    finally:
        for worker in procs:
            worker.terminate()
        for worker in procs:
            worker.wait(30)
    done = Upload.objects.filter(pk__in=ids, status="done").count()
    size = len(json.dumps(_report(0, full)))
    return {"reports": n, "workers": workers, "report_bytes": size, "all_finished": finished, "done": done,
            "seconds": round(elapsed, 2), "reports_per_second": round(n / elapsed, 1),
            # CPU the worker processes used per report (the rest of the wall time is PostgreSQL,
            # Redis and other processes sharing the cores)
            "worker_cpu_ms_per_report": round(sum(b - a for a, b in zip(cpu0, cpu1)) / n * 1000, 1)
            if None not in cpu0 + cpu1 else None,
            "load_average_1min": round(os.getloadavg()[0], 2),
            "target_reports_per_second_one_worker": 50}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(port: int, web_workers: int, web_threads: int) -> subprocess.Popen:
    """gunicorn as docs/ingestion.md runs it in production (gthread workers)."""
    from tests.reliability.stack import gunicorn_argv

    return subprocess.Popen(gunicorn_argv(port, web_workers, web_threads), cwd=ROOT, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def bench_latency(agents: int, per_agent: int, rate: float = 0.0, web_workers: int = 2,
                  web_threads: int = 4) -> dict:
    """``rate`` 0: every agent posts its reports back to back from the same instant (closed loop).
    Otherwise each post is scheduled at a random instant of a window of ``agents * per_agent /
    rate`` seconds (uniform arrivals: ``rate`` reports per second offered on average)."""
    from apps.ingest.models import Upload

    cluster, token = _fresh_cluster(f"bench-latency-{rate:g}-per-s" if rate else "bench-latency-burst")
    window = agents * per_agent / rate if rate else 0.0
    port = _free_port()
    server = _start_server(port, web_workers, web_threads)
    worker = _start_worker()
    url = f"http://127.0.0.1:{port}/api/v1/reports"
    bodies = [[json.dumps(_report(10_000 + a * per_agent + k, False)).encode() for k in range(per_agent)]
              for a in range(agents)]
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(agents)

    start_at = [0.0]

    def agent(a: int) -> None:
        rng = random.Random(a)
        when = sorted(rng.uniform(0, window) for _ in bodies[a])  # seconds after the start
        if barrier.wait() == 0:
            start_at[0] = time.perf_counter()
        barrier.wait()
        for at, data in zip(when, bodies[a]):
            delay = start_at[0] + at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            req = urllib.request.Request(url, data=data, method="POST", headers={
                "Content-Type": "application/json", "Authorization": f"Bearer {token}"})
            t0 = time.perf_counter()
            ok = False
            for attempt in range(6):  # like the agent: retry connection errors with backoff
                try:
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        resp.read()
                        ok = resp.status == 202
                    break
                except Exception as exc:  # noqa: BLE001 - counted, not raised
                    with lock:
                        errors.append(repr(exc))
                    time.sleep(0.1 * 2 ** attempt)
            with lock:
                if ok:
                    latencies.append((time.perf_counter() - t0) * 1000)

    try:
        def up() -> bool:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/agent.py", timeout=2).read()
                return True
            except OSError:
                return False

        if not _wait(up, 60):
            raise RuntimeError("gunicorn did not start")
        for _ in range(4 * web_workers * web_threads):  # every worker process imports Django first
            urllib.request.urlopen(f"http://127.0.0.1:{port}/agent.py", timeout=10).read()
        threads = [threading.Thread(target=agent, args=(a,)) for a in range(agents)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        sent = agents * per_agent
        stored = Upload.objects.filter(cluster=cluster).count()
        _wait(lambda: Upload.objects.filter(cluster=cluster, status="done").count() == stored, 600)
        done = Upload.objects.filter(cluster=cluster, status="done").count()
    finally:
        server.terminate()
        worker.terminate()
        server.wait(30)
        worker.wait(30)
    latencies.sort()
    p = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 1) if latencies else None  # noqa
    return {"agents": agents, "server": f"gunicorn gthread {web_workers}x{web_threads}", "worker_nice": WORKER_NICE,
            "offered_per_second": rate if rate else "all at once, back to back", "window_seconds": round(window, 1),
            "accepted_per_second": round(len(latencies) / wall, 1), "reports_sent": sent,
            "accepted_202": len(latencies),
            "retried_connection_errors": len(errors), "errors": sorted(set(errors))[:3],
            "stored": stored, "processed_done": done, "lost": sent - stored,
            "latency_ms_p50": p(0.50), "latency_ms_p95": p(0.95), "latency_ms_max": round(max(latencies), 1)
            if latencies else None, "latency_ms_mean": round(statistics.mean(latencies), 1) if latencies else None,
            "accept_wall_seconds": round(wall, 2), "target_p95_ms": 50}


# Figures of one run that are summarised over the repeats (median, p10-p90), with their targets.
SUMMARISED = {"reports_per_second": 50, "worker_cpu_ms_per_report": None, "accepted_per_second": None,
              "latency_ms_p50": None, "latency_ms_p95": 50, "latency_ms_max": None}


def _combine(runs: list[dict], **targets: float) -> dict:
    """One entry of the result from repeated runs: each SUMMARISED figure as {median, p10, p90,
    runs, target}; counts of lost, stored and processed uploads added up over the runs; the raw
    runs kept under "runs"."""
    from bench.timing import summarize

    out: dict = {}
    for key, target in {**SUMMARISED, **targets}.items():
        values = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
        if values:
            m = summarize(key, values)
            out[key] = {"median": round(m.median_ms, 2), "p10": round(m.p10_ms, 2), "p90": round(m.p90_ms, 2),
                        "runs": len(values), "target": target}
    for key in ("reports_sent", "stored", "processed_done", "lost", "done", "retried_connection_errors"):
        if all(isinstance(r.get(key), int) for r in runs):
            out[key] = sum(r[key] for r in runs)
    out["runs"] = runs
    return out


def run(reports: int = 200, agents: int = 50, per_agent: int = 4, full: bool = False,
        rates: tuple[float, ...] = (10, 25, 50, 100), workers: tuple[int, ...] = (1, 2), web_workers: int = 2,
        web_threads: int = 4, repeat: int = 3) -> dict:
    _setup()
    out = {}
    if reports:
        for k in workers:
            out["throughput" if k == 1 else f"throughput_{k}_workers"] = _combine(
                [bench_throughput(reports, False, k) for _ in range(repeat)], reports_per_second=50 * k)
        if 1 in workers and len(workers) > 1:
            one = out["throughput"]["reports_per_second"]["median"]
            for k in workers[1:]:
                many = out[f"throughput_{k}_workers"]["reports_per_second"]["median"]
                out[f"scaling_{k}_workers"] = {"value": round(many / one, 2), "note": f"linear = {k}"}
    if full:
        out["throughput_full_lspci_vvv"] = _combine(
            [bench_throughput(max(20, reports // 10), full=True) for _ in range(repeat)])
    if agents:
        # Offered rates: the agents' posts arrive at random instants, RATE per second on average
        # (agents started by cron or a scheduler, not in lockstep).
        for rate in rates:
            out[f"latency_{rate:g}_per_s"] = _combine(
                [bench_latency(agents, per_agent, rate, web_workers, web_threads) for _ in range(repeat)])
        # Burst: every agent posts back to back from the same instant (closed loop: worst case,
        # bound by how fast two cores accept, not by waiting).
        out["latency_burst"] = _combine(
            [bench_latency(agents, per_agent, 0.0, web_workers, web_threads) for _ in range(repeat)])
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    import signal

    # SIGTERM (e.g. from timeout) unwinds normally, so the server and worker processes are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=200)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--per-agent", type=int, default=4)
    parser.add_argument("--full", action="store_true", help="also time reports carrying a 927 KB lspci -vvv")
    parser.add_argument("--rates", default="10,25,50,100",
                        help="offered reports per second of the latency runs (then one all-at-once burst)")
    parser.add_argument("--workers", default="1,2", help="Celery worker counts for the throughput runs")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn worker processes (one per core)")
    parser.add_argument("--web-threads", type=int, default=4, help="gunicorn threads per worker")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement (median and spread)")
    parser.add_argument("--worker-nice", type=int, default=0,
                        help="nice level of the Celery workers (10: the API keeps the CPU it needs when they "
                             "share cores, as docs/ingestion.md advises)")
    args = parser.parse_args()
    WORKER_NICE = args.worker_nice
    print(json.dumps(run(args.reports, args.agents, args.per_agent, args.full,
                         tuple(float(r) for r in args.rates.split(",") if r),
                         tuple(int(k) for k in args.workers.split(",") if k), args.web_workers, args.web_threads,
                         args.repeat),
                     indent=2))
