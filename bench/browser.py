"""Time to interactive of the host and cluster pages in headless Chromium.

Debian's ``/usr/bin/chromium`` driven by Playwright (``--headless --no-sandbox --disable-gpu
--disable-background-networking``) against ``manage.py runserver`` on the bench database (filled
by ``bench.pages.prepare``), logged in through a session cookie of the bench user. One run = a
new tab: navigation start until the ``load`` event has fired and every figure container
(``.plot``) has been drawn by Plotly (``.js-plotly-plot``), then two animation frames. The
browser profile is a real (temporary) one, not an incognito context, and the first two runs of
each page are not counted: the HTTP cache and V8's code cache are warm, as for a person moving
between pages. (An incognito context keeps no code cache, so every page there compiles the 4.8 MB
Plotly.js again: 2 to 3 s on this machine, whatever the page draws.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import db
from bench.timing import Measure, summarize

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
WARMUP = 2
READY_JS = """() => new Promise(resolve => {
  const done = () => {
    const plots = document.querySelectorAll('.plot');
    const drawn = document.querySelectorAll('.plot.js-plotly-plot');
    if (document.readyState === 'complete' && drawn.length >= plots.length) {
      requestAnimationFrame(() => requestAnimationFrame(() => resolve(plots.length)));
    } else { setTimeout(done, 5); }
  };
  done();
})"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(runs: int = 7) -> list[Measure]:
    from bench.pages import prepare

    ctx = prepare()
    h = ctx["hosts"][0]
    return time_to_interactive([("time to interactive host", f"/c/{h.cluster.name}/h/{h.hostname}/"),
                                ("time to interactive cluster 256 hosts", "/c/synth-256/"),
                                ("time to interactive cluster 1024 hosts", "/c/synth-1024/")], runs)


def _session_key() -> str:
    from django.contrib.sessions.backends.db import SessionStore

    user = db.bench_user()
    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.create()
    return session.session_key


def time_to_interactive(pages: list[tuple[str, str]], runs: int = 7, target_ms: float | None = None) -> list[Measure]:
    """One row per (row name, URL) of ``pages``, read by the bench user (module docstring); the
    note also carries the first, cold load (the server's caches empty, the browser's warm)."""
    exe = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    if exe is None:
        return [Measure(name, 0, 0, 0, 0, note="SKIPPED: no chromium (make browser)") for name, _ in pages]
    from django.conf import settings

    key = _session_key()
    port = _free_port()
    env = {**os.environ, "TOPOWEB_DEBUG": "1", "TOPOWEB_LOG_LEVEL": "WARNING"}
    env.pop("TOPOWEB_BROKER_URL", None)
    (ROOT / "bench" / "results").mkdir(exist_ok=True)  # a fresh clone has none yet
    log = open(ROOT / "bench" / "results" / "browser-server.log", "wb")
    server = subprocess.Popen([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
                              cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    rows: list[Measure] = []
    try:
        from tests.reliability.stack import wait_port

        wait_port(port, 60)
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            import tempfile

            profile = tempfile.mkdtemp(prefix="topoweb-bench-chromium-")
            context = pw.chromium.launch_persistent_context(profile, executable_path=exe, args=ARGS, headless=True,
                                                            viewport={"width": 1440, "height": 900})
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": key,
                                  "domain": "127.0.0.1", "path": "/"}])
            base = f"http://127.0.0.1:{port}"
            for name, url in pages:
                samples, plots, phases, first = [], 0, [], None
                for i in range(runs + WARMUP):
                    page = context.new_page()
                    start = time.perf_counter()
                    resp = page.goto(base + url, wait_until="load", timeout=120_000)
                    if resp is None or resp.status != 200 or "/accounts/login" in page.url:
                        raise RuntimeError(f"{url}: not served ({resp and resp.status}, {page.url})")
                    plots = page.evaluate(READY_JS)
                    ms = (time.perf_counter() - start) * 1000
                    first = ms if first is None else first
                    nav = page.evaluate("() => { const n = performance.getEntriesByType('navigation')[0];"
                                        " return [n.responseEnd, n.domContentLoadedEventEnd, n.loadEventEnd]; }")
                    if i >= WARMUP:  # the first runs fill the HTTP and code caches
                        samples.append(ms)
                        phases.append(nav)
                    page.close()
                med = [sorted(p[k] for p in phases)[len(phases) // 2] for k in range(3)]
                rows.append(summarize(name, samples, target_ms=target_ms,
                                      note=f"{url}; {plots} figures drawn; warm cache (first load {first:.0f} ms); "
                                           f"median HTML received {med[0]:.0f} ms, DOMContentLoaded {med[1]:.0f} ms, "
                                           f"load {med[2]:.0f} ms"))
            context.close()
            shutil.rmtree(profile, ignore_errors=True)
    finally:
        server.terminate()
        server.wait(20)
    return rows
