"""Private services for the reliability tests: Redis, PostgreSQL, the web server and workers.

Nothing here touches the shared services: every test starts its own PostgreSQL and Redis on free
loopback ports, with data in temporary folders, and stops only those. Every wait is bounded.

``Stack(db_url, broker_url)`` runs ``manage.py`` commands, the server (``runserver``, DEBUG off,
threaded) and workers (``tests.reliability.worker``) with ``tests.reliability.stack_settings``,
and reads the ingest tables with plain SQL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
PG_BIN = Path("/usr/lib/postgresql/15/bin")


def gunicorn_argv(port: int, workers: int = 2, threads: int = 4) -> list[str]:
    """gunicorn as docs/ingestion.md runs the API in production: gthread workers (one process
    per core; 2 here) x threads, a deep backlog for bursts of agents."""
    return [PYTHON, "-m", "gunicorn", "topoweb.wsgi:application", "--bind", f"127.0.0.1:{port}",
            "--workers", str(workers), "--worker-class", "gthread", "--threads", str(threads), "--backlog", "2048",
            "--log-level", "warning"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


def wait_until(predicate, timeout: float, what: str, interval: float = 0.25):
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise TimeoutError(f"{what}: not reached within {timeout:.0f} s")
        time.sleep(interval)


def _stop(proc: subprocess.Popen | None, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


class PrivateRedis:
    """redis-server on a free loopback port, no persistence; stop() and start() again on the same port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_port(self.port, 15)

    def stop(self) -> None:
        _stop(self.proc)
        self.proc = None


class PrivatePostgres:
    """A PostgreSQL 15 cluster of its own (initdb in a temp folder, run as the postgres user)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="topoweb-pg-"))
        self.data = self.dir / "data"
        shutil.chown(self.dir, "postgres", "postgres")
        self._pg(["initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])

    def _pg(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(PG_BIN / argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=check)

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/topoweb"

    def start(self, max_connections: int = 100) -> None:
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                f"-c max_connections={max_connections}")
        self._pg(["pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"), "-o", opts, "-w", "-t", "30",
                  "start"])

    def stop(self) -> None:
        self._pg(["pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop"], check=False)

    def create_db(self) -> None:
        import psycopg

        with psycopg.connect(self.url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE topoweb")

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Stack:
    """The topoweb server, workers and commands against one database and one broker."""

    def __init__(self, db_url: str, broker_url: str, workdir: Path) -> None:
        self.db_url, self.broker_url, self.workdir = db_url, broker_url, workdir
        self.trace = workdir / "trace.log"
        self.port = free_port()
        self.server: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.reliability.stack_settings",
            "PYTHONPATH": str(ROOT),
            "TOPOWEB_DATABASE_URL": db_url,
            "TOPOWEB_BROKER_URL": broker_url,
            "TOPOWEB_DEBUG": "0",
            "TOPOWEB_SECRET_KEY": "reliability-tests-" + uuid.uuid4().hex,
            "TOPOWEB_LOG_LEVEL": "WARNING",
            "TOPOWEB_SWEEP_AFTER_SECONDS": "1",
            "TOPOWEB_TEST_TRACE": str(self.trace),
        }

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def manage(self, *args: str, timeout: float = 120) -> str:
        out = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True,
                             timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed ({out.returncode}): {out.stderr[-2000:]}")
        return out.stdout

    def migrate(self) -> None:
        self.manage("migrate", "--noinput")

    def create_cluster(self, name: str) -> str:
        """The cluster's first token (the command prints it on its last line)."""
        return self.manage("create_cluster", name).strip().splitlines()[-1].strip()

    def start_server(self, *, gunicorn: bool = False) -> None:
        """``runserver`` (threaded), or with ``gunicorn`` the production server (``gunicorn_argv``)."""
        log = open(self.workdir / "server.log", "ab")
        argv = (gunicorn_argv(self.port) if gunicorn
                else [PYTHON, "manage.py", "runserver", f"127.0.0.1:{self.port}", "--noreload"])
        self.server = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        wait_port(self.port, 60)

    def start_worker(self, *, delay: float = 0.0, name: str | None = None, prefork: bool = False) -> subprocess.Popen:
        """A worker process: ``-P solo`` (one process, no time limits), or with ``prefork`` Celery's
        default pool with one child process, which enforces the time limits and is replaced when
        it dies (as production workers run)."""
        env = {**self.env, "TOPOWEB_TEST_DELAY": str(delay)}
        name = name or f"w{len(self.workers)}-{uuid.uuid4().hex[:6]}"
        log = open(self.workdir / f"worker-{name}.log", "ab")
        pool = ["--pool=prefork", "--concurrency=1"] if prefork else ["--pool=solo"]
        proc = subprocess.Popen([PYTHON, "-m", "tests.reliability.worker", *pool, f"--hostname={name}@%h"],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.workers.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen) -> None:
        """SIGKILL: no clean shutdown, no ack, no requeue by the dying worker."""
        _stop(proc, signal.SIGKILL)

    def close(self) -> None:
        for w in self.workers:
            _stop(w)
        _stop(self.server)

    # -- reading the tables ------------------------------------------------------------------

    def sql(self, query: str, params: tuple = ()) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.db_url, connect_timeout=5) as conn:
            return conn.execute(query, params).fetchall()

    def statuses(self) -> dict[str, int]:
        return dict(self.sql("SELECT status, count(*) FROM ingest_upload GROUP BY status"))

    def trace_lines(self) -> list[tuple[str, str]]:
        if not self.trace.exists():
            return []
        return [tuple(line.split()[:2]) for line in self.trace.read_text().splitlines() if line.strip()]


def post_report(base: str, token: str, body: bytes, timeout: float = 30.0) -> tuple[int, bytes]:
    """One POST /api/v1/reports: (status, body); status 0 for a connection error."""
    req = urllib.request.Request(f"{base}/api/v1/reports", data=body, method="POST",
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
        return 0, str(exc).encode()


def send_with_retries(base: str, token: str, body: bytes, *, tries: int = 40, wait: float = 0.25,
                      log: list | None = None) -> tuple[int, dict]:
    """POST like the agent does: retry connection errors and 5xx with backoff; every answer is logged."""
    status, out = 0, b""
    for attempt in range(tries):
        status, out = post_report(base, token, body)
        if log is not None:
            log.append((status, out))
        if status and status < 500:
            break
        time.sleep(min(2.0, wait * (1.5 ** attempt)))
    try:
        return status, json.loads(out)
    except ValueError:
        return status, {"raw": out[:500].decode(errors="replace")}
