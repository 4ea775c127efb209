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
from collections import Counter
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
    lease = stack.sql("SELECT lease_expires_at - started_at FROM ingest_upload WHERE id = %s", (upload_id,))[0][0]
    assert lease.total_seconds() == 6  # TOPOWEB_PROCESSING_LEASE_SECONDS of stack_settings
    stack.kill(slow)
    time.sleep(6.5)  # past the lease: the dead worker's claim has expired
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


def test_poison_report_that_kills_its_worker_is_failed_after_three_attempts_while_others_flow(stack):
    """A report whose analysis kills the worker process (``tests/reliability/worker.py`` exits on
    ``meta.topoweb_test_exit_worker``) is tried three times, each claim ending with the process
    dead and its lease expiring, then failed with the reason; its raw report stays. Reports sent
    meanwhile are processed once each by the same workers (prefork: each pool replaces its dead
    process)."""
    token = stack.create_cluster("soak-poison")
    workers = [stack.start_worker(prefork=True, name=f"pool{i}") for i in range(2)]
    poison = next(iter_reports(1, seed=5))
    poison["hostname"] = "synth-poison-0001"
    poison["meta"] = {**(poison.get("meta") or {}), "topoweb_test_exit_worker": True}
    poison_body = report_bytes(poison)
    status, answer = post_report(stack.base, token, poison_body)
    assert status == 202, answer
    poison_id = json.loads(answer)["upload_id"]
    others = _bodies(30, prefix="synth-flow-", seed=6)
    pending = list(others)

    def flow_and_sweep():
        """Five more reports, then a sweep (as beat runs it): done when every upload is finished."""
        for _ in range(min(5, len(pending))):
            _, body = pending.pop(0)
            assert send_with_retries(stack.base, token, body)[0] == 202
        stack.manage("sweep_uploads", "--older-than", "0")
        return not pending and _all_processed(stack, len(others) + 1)

    wait_until(flow_and_sweep, 180, "the poison report failed and the others processed", interval=1.0)
    assert stack.statuses() == {"done": len(others), "failed": 1}
    status, attempts, error, lease, raw = stack.sql(
        "SELECT status, attempts, error, lease_expires_at, raw FROM ingest_upload WHERE id = %s", (poison_id,))[0]
    assert (status, attempts, lease) == ("failed", 3, None)
    assert error["section"] is None and error["line_no"] == 0 and error["line"] == ""
    assert error["reason"].startswith("processing did not finish after 3 attempts (the worker died or timed out "
                                      "each time); the raw report is kept")
    assert raw == poison_body.decode()
    events = [e for e in stack.trace_lines() if e[1] == "synth-poison-0001"]
    assert events == [("start", "synth-poison-0001")] * 3, events  # three attempts, none finished
    assert stack.sql("SELECT count(*) FROM ingest_snapshot WHERE upload_id = %s", (poison_id,))[0][0] == 0
    rows = stack.sql("SELECT h.hostname, u.attempts, count(s.id) FROM ingest_upload u JOIN ingest_host h "
                     "ON h.id = u.host_id LEFT JOIN ingest_snapshot s ON s.upload_id = u.id WHERE u.id <> %s "
                     "GROUP BY h.hostname, u.attempts", (poison_id,))
    assert sorted(h for h, _, _ in rows) == sorted(h for h, _ in others)
    assert {(a, n) for _, a, n in rows} == {(1, 1)}, rows  # each once: one attempt, one snapshot
    assert all(w.poll() is None for w in workers), "a worker's main process died with its pool process"


def _load_agent():
    import importlib.util

    spec = importlib.util.spec_from_file_location("topoweb_agent_soak", AGENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_200_agents_under_rate_limits_retry_after_429_every_report_stored_and_processed_once(
        pg_private, redis_private, workdir):
    """Four clusters of 50 nodes, each fleet sharing its cluster's token, post at once to the
    production server (gunicorn, 2 processes) with a limit of 25 reports per token a minute counted
    in a shared Redis cache. The real agent's sending code (``send``, in 200 threads) retries the
    429s after their Retry-After: every report is stored once and processed once, no minute lets a
    token through more than the limit (across both server processes), nothing is lost."""
    import urllib.error

    limit, fleets, per_fleet = 25, 4, 50
    stack = Stack(pg_private.url, redis_private.url, workdir)
    stack.env.update({"TOPOWEB_RATE_LIMIT_PER_MINUTE": str(limit),
                      "TOPOWEB_CACHE_URL": redis_private.url.rsplit("/", 1)[0] + "/1"})
    try:
        stack.migrate()
        stack.start_server(gunicorn=True)
        tokens = [stack.create_cluster(f"soak-rate-{i}") for i in range(fleets)]
        for _ in range(2):
            stack.start_worker()
        reports = []
        for r in iter_reports(fleets * per_fleet, seed=8):
            r["hostname"] = r["hostname"].replace("synth-", "synth-rate-", 1)
            reports.append(r)
        agent = _load_agent()
        agent.QUIET = True
        calls: list[tuple[str, float, float, int]] = []  # (token, sent, answered, status)
        post_once = agent.post_once

        def recorded(url, token, body, http_timeout):
            sent = time.time()
            try:
                answer = post_once(url, token, body, http_timeout)
            except urllib.error.HTTPError as exc:
                calls.append((token, sent, time.time(), exc.code))
                raise
            except Exception:
                calls.append((token, sent, time.time(), 0))
                raise
            calls.append((token, sent, time.time(), answer[0]))
            return answer

        agent.post_once = recorded

        def node(i: int):
            try:
                return agent.send(stack.base, tokens[i % fleets], reports[i], retries=5, retry_wait=1.0,
                                  http_timeout=30)
            except SystemExit as exc:  # the agent gave up (exit 3 or 4)
                return {"exit": exc.code}

        if time.time() % 60 > 45:  # start the burst early in a minute, so that the first one refuses
            time.sleep(60.5 - time.time() % 60)
        with ThreadPoolExecutor(max_workers=len(reports)) as pool:
            results = list(pool.map(node, range(len(reports))))
        assert [r for r in results if "upload_id" not in r] == []
        assert not any(r["duplicate"] for r in results)
        assert len({r["upload_id"] for r in results}) == len(reports)
        assert {s for *_, s in calls} <= {202, 429}, sorted({s for *_, s in calls})
        for token in tokens:
            mine = [c for c in calls if c[0] == token]
            assert sum(s == 202 for *_, s in mine) == per_fleet
            assert sum(s == 429 for *_, s in mine) >= per_fleet - limit, "the limit was never reached"
            per_minute = Counter(int(sent // 60) for _, sent, answered, s in mine
                                 if s == 202 and int(sent // 60) == int(answered // 60))
            assert max(per_minute.values()) <= limit, per_minute
        hostnames = [r["hostname"] for r in reports]
        statuses = wait_until(lambda: _all_processed(stack, len(reports)), 240, "every upload processed",
                              interval=1.0)
        assert statuses == {"done": len(reports)}
        _assert_each_once(stack, hostnames)
        assert stack.sql("SELECT count(*) FROM ingest_upload WHERE attempts <> 1")[0][0] == 0
    finally:
        stack.close()


def test_analysis_past_the_soft_time_limit_fails_its_upload_and_the_worker_goes_on(stack):
    """A prefork worker enforces the task's soft limit (4 s in stack_settings): an analysis held
    8 s by the test hook is stopped, its upload failed at once with the reason, and the same
    worker processes the next reports."""
    token = stack.create_cluster("soak-slow")
    worker = stack.start_worker(prefork=True, delay=8.0, name="limited")
    slow = next(iter_reports(1, seed=9))
    slow["hostname"] = "synth-slow-limit-0001"
    status, answer = post_report(stack.base, token, report_bytes(slow))
    assert status == 202, answer
    slow_id = json.loads(answer)["upload_id"]
    others = _bodies(5, prefix="synth-after-", seed=10)
    assert [send_with_retries(stack.base, token, b)[0] for _, b in others] == [202] * 5
    wait_until(lambda: _all_processed(stack, 6), 120, "the slow upload stopped and the others processed",
               interval=1.0)
    status, attempts, error, lease = stack.sql(
        "SELECT status, attempts, error, lease_expires_at FROM ingest_upload WHERE id = %s", (slow_id,))[0]
    assert (status, attempts, lease) == ("failed", 1, None)
    assert error["reason"].startswith("analysis took longer than 4 s (TOPOWEB_TASK_SOFT_TIME_LIMIT)"), error
    assert stack.statuses() == {"done": 5, "failed": 1}
    assert worker.poll() is None
