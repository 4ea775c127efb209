"""Fault tests of the whole ingest path on loopback: agents -> server -> Redis -> Celery -> PostgreSQL.

Each test starts its own stack (``stack.py``): a fresh database, a private Redis, the server with
DEBUG off and Celery workers; reports come from ``bench.synth`` (real captures under ``synth-``
names, ``meta.synthetic``). Run with ``make soak``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from bench.synth import iter_reports, report_bytes
from tests.reliability.stack import ROOT, Stack, post_report, send_with_retries, wait_until

pytestmark = pytest.mark.soak

AGENT = ROOT / "apps" / "ingest" / "agent" / "topoweb_agent.py"


def _bodies(n: int, *, prefix: str = "synth-", seed: int = 0) -> list[tuple[str, bytes]]:
    out = []
    for r in iter_reports(n, seed=seed):
        r["hostname"] = r["hostname"].replace("synth-", prefix, 1)
        out.append((r["hostname"], report_bytes(r)))
    return out


def _all_processed(stack: Stack, n: int):
    s = stack.statuses()
    return s if s.get("done", 0) + s.get("failed", 0) == n else None


def _assert_each_once(stack: Stack, hostnames: list[str]) -> None:
    rows = stack.sql("SELECT h.hostname, count(u.id) FROM ingest_host h JOIN ingest_upload u ON u.host_id = h.id "
                     "GROUP BY h.hostname")
    per_host = dict(rows)
    assert sorted(per_host) == sorted(hostnames), "hosts lost or invented"
    assert set(per_host.values()) == {1}, f"duplicated uploads: {[h for h, c in per_host.items() if c != 1]}"
    snaps = dict(stack.sql("SELECT status, count(*) FROM ingest_upload u LEFT JOIN ingest_snapshot s "
                           "ON s.upload_id = u.id WHERE s.id IS NOT NULL GROUP BY status"))
    assert snaps == {"done": len(hostnames)}, f"snapshots by upload status: {snaps}"
    ends = [h for ev, h in stack.trace_lines() if ev == "end"]
    assert sorted(set(ends)) == sorted(hostnames)


def test_200_concurrent_agent_uploads_all_accepted_parsed_none_lost_or_duplicated(stack):
    token = stack.create_cluster("soak-200")
    for _ in range(2):
        stack.start_worker()
    bodies = _bodies(200)
    with ThreadPoolExecutor(max_workers=200) as pool:
        answers = list(pool.map(lambda hb: send_with_retries(stack.base, token, hb[1]), bodies))
    assert [s for s, _ in answers] == [202] * 200, [a for a in answers if a[0] != 202][:3]
    assert not any(a["duplicate"] for _, a in answers)
    ids = [a["upload_id"] for _, a in answers]
    assert len(set(ids)) == 200
    statuses = wait_until(lambda: _all_processed(stack, 200), 240, "200 uploads processed", interval=1.0)
    assert statuses == {"done": 200}
    _assert_each_once(stack, [h for h, _ in bodies])
    # Agents that resend (a retry after a lost answer) get the first upload back, not a second one.
    again = [post_report(stack.base, token, b) for _, b in bodies[:20]]
    assert [s for s, _ in again] == [202] * 20
    assert [json.loads(b)["upload_id"] for _, b in again] == ids[:20]
    assert all(json.loads(b)["duplicate"] for _, b in again)
    assert stack.sql("SELECT count(*) FROM ingest_upload")[0][0] == 200


def test_broker_outage_reports_are_accepted_and_stored_then_swept(stack, redis_private):
    token = stack.create_cluster("soak-broker")
    stack.start_worker()
    redis_private.stop()
    bodies = _bodies(30, prefix="synth-outage-")
    answers = [post_report(stack.base, token, b) for _, b in bodies]
    assert [s for s, _ in answers] == [202] * 30, answers[:2]
    assert stack.statuses() == {"received": 30}
    redis_private.start()  # same port: the server and the worker reconnect
    wait_until(lambda: stack.manage("sweep_uploads", "--older-than", "0") and _all_processed(stack, 30), 180,
               "every stored upload processed after the broker returned", interval=2.0)
    assert stack.statuses() == {"done": 30}
    _assert_each_once(stack, [h for h, _ in bodies])


def test_worker_killed_mid_task_upload_is_processed_exactly_once(stack):
    token = stack.create_cluster("soak-kill")
    slow = stack.start_worker(delay=30.0, name="slow")
    reports = list(iter_reports(1, seed=3))
    reports[0]["hostname"] = "synth-slow-kill-0001"
    status, body = post_report(stack.base, token, report_bytes(reports[0]))
    assert status == 202
    upload_id = json.loads(body)["upload_id"]
    wait_until(lambda: ("start", "synth-slow-kill-0001") in stack.trace_lines(), 60, "the slow task started")
    assert stack.statuses() == {"processing": 1}
    stack.kill(slow)
    time.sleep(3.5)  # past PROCESSING_STALE_SECONDS of stack_settings: the claim is orphaned
    stack.start_worker(name="healthy")
    wait_until(lambda: stack.manage("sweep_uploads", "--older-than", "0") and _all_processed(stack, 1), 120,
               "the orphaned upload processed by the healthy worker", interval=2.0)
    time.sleep(3.0)  # let any redelivered copy of the task run too: it must change nothing
    assert stack.statuses() == {"done": 1}
    events = [e for e in stack.trace_lines() if e[1] == "synth-slow-kill-0001"]
    assert events.count(("end", "synth-slow-kill-0001")) == 1, events
    assert stack.sql("SELECT count(*) FROM ingest_snapshot WHERE upload_id = %s", (upload_id,))[0][0] == 1
    assert stack.sql("SELECT attempts FROM ingest_upload WHERE id = %s", (upload_id,))[0][0] >= 2


def test_database_restart_during_uploads_clean_5xx_agents_retry_nothing_lost(pg_private, redis_private, workdir):
    stack = Stack(pg_private.url, redis_private.url, workdir)
    try:
        stack.migrate()
        stack.start_server()
        token = stack.create_cluster("soak-db")
        stack.start_worker()
        bodies = _bodies(60, prefix="synth-dbrestart-")
        log: list[tuple[int, bytes]] = []
        results: list = [None] * len(bodies)

        def agent(i: int) -> None:
            time.sleep(i * 0.1)  # uploads spread over 6 s; the database is down from 1.5 s to 5 s
            results[i] = send_with_retries(stack.base, token, bodies[i][1], log=log)

        threads = [threading.Thread(target=agent, args=(i,)) for i in range(len(bodies))]
        for t in threads:
            t.start()
        # and the real agent, sending a real bundle through its own retry loop
        bundle = ROOT / "tests" / "fixtures" / "bundles" / "paths_della_8xh100_6nic"
        agent_proc = subprocess.Popen(
            [sys.executable, str(AGENT), "--server", stack.base, "--token", token, "--from-dir", str(bundle),
             "--hostname", "synth-dbrestart-agent", "--retries", "12", "--retry-wait", "0.5", "--http-timeout", "10"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1.5)
        pg_private.stop()
        time.sleep(3.5)
        pg_private.start()
        for t in threads:
            t.join(180)
        agent_out, _ = agent_proc.communicate(timeout=180)
        assert agent_proc.returncode == 0, agent_out
        failures = [(s, b) for s, b in log if s != 202]
        assert failures, "the outage produced no error at all: the test did not hit it"
        for s, b in failures:
            assert s == 0 or 500 <= s <= 599, (s, b[:300])
            assert b"Traceback" not in b and b"File \"/" not in b, b[:500]
        assert [r[0] for r in results] == [202] * len(bodies)
        hostnames = [h for h, _ in bodies] + ["synth-dbrestart-agent"]
        n = len(hostnames)
        wait_until(lambda: stack.manage("sweep_uploads", "--older-than", "0") and _all_processed(stack, n), 180,
                   "every upload processed after the restart", interval=2.0)
        assert stack.statuses() == {"done": n}
        rows = dict(stack.sql("SELECT h.hostname, count(u.id) FROM ingest_host h JOIN ingest_upload u "
                              "ON u.host_id = h.id GROUP BY h.hostname"))
        assert sorted(rows) == sorted(hostnames) and set(rows.values()) == {1}
    finally:
        stack.close()
