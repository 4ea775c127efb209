"""A Celery worker for the reliability tests: the project's worker plus a trace and delay hook.

``python -m tests.reliability.worker [celery worker options]``. When ``TOPOWEB_TEST_TRACE`` names a
file, every analysis appends ``start <hostname> <pid>`` and ``end <hostname> <pid>`` lines to it;
hosts whose name starts with ``TOPOWEB_TEST_SLOW_PREFIX`` (default ``synth-slow``) are held
``TOPOWEB_TEST_DELAY`` seconds (default 0) before their analysis, so a test can kill the worker
in the middle of a task. A report whose ``meta`` has ``"topoweb_test_exit_worker": true`` makes the
process analysing it exit at once (``os._exit``, as a segfault or the OOM killer would end it),
after its ``start`` line. Test-only: production workers are started with ``celery -A topoweb worker``.
"""

from __future__ import annotations

import json
import os
import sys
import time


def install_hook() -> None:
    from apps.ingest import processing

    original = processing._analyze
    trace = os.environ.get("TOPOWEB_TEST_TRACE")
    prefix = os.environ.get("TOPOWEB_TEST_SLOW_PREFIX", "synth-slow")
    delay = float(os.environ.get("TOPOWEB_TEST_DELAY", "0"))

    def note(event: str, host: str) -> None:
        if trace:
            with open(trace, "a") as f:
                f.write(f"{event} {host} {os.getpid()}\n")

    def analyze(raw: str):
        try:
            data = json.loads(raw)
        except ValueError:
            data = {}
        data = data if isinstance(data, dict) else {}
        host, meta = data.get("hostname", "?"), data.get("meta")
        note("start", host)
        if isinstance(meta, dict) and meta.get("topoweb_test_exit_worker") is True:
            os._exit(70)  # the worker process dies mid-analysis: no cleanup, no acknowledgement
        if delay and str(host).startswith(prefix):
            time.sleep(delay)
        out = original(raw)
        note("end", host)
        return out

    processing._analyze = analyze


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.reliability.stack_settings")
    import django

    django.setup()
    import apps.domain.analysis  # noqa: F401  (loaded once, before a prefork pool forks its processes)

    install_hook()
    from topoweb.celery import app

    app.worker_main(["worker", "--loglevel=WARNING", "--without-gossip", "--without-mingle", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
