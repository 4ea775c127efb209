"""Page figures of the explorer UI: ``python -m bench ui`` (or ``python -m bench.ui``).

Targets (spec "Explorer UI"):
  host page server time        < 150 ms   (Django test client, in process, real 8-GPU/12-NIC capture)
  host page payload            < 500 KB   (HTML with embedded figures + CSS + our JS; Plotly.js excluded)
  cluster overview, 256 hosts  < 2 s      to interactive in headless Chromium (filter wired, table shown)
Also reported: the cluster page's server time and payload, and the host page in Chromium.

Runs on its own SQLite file under a temporary folder: 256 hosts are cloned from two real
analyses (mooncake 8x NV18 + 12 NICs with its ibstat, and the same with one HCA port Down,
a synthetic variant), so the cluster page has a norm and odd ones out to describe.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import BENCH_SECRET_KEY

ROOT = Path(__file__).resolve().parent.parent
HOSTS = 256
ODD_EVERY = 32  # one host in 32 has a port Down


def _setup_django(db_path: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "topoweb.settings"
    os.environ["TOPOWEB_DATABASE_URL"] = f"sqlite:///{db_path}"
    os.environ.setdefault("TOPOWEB_SECRET_KEY", BENCH_SECRET_KEY)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def _fill() -> tuple[str, str]:
    from django.contrib.auth import get_user_model

    from apps.ingest import services
    from apps.ingest.models import Host, Snapshot, Upload
    from tests.explorer import helpers as h

    from apps.ingest import access

    get_user_model().objects.create_user("bench", password="bench-pw")
    c = services.create_cluster(name="bench")
    access.grant(cluster=c, role=access.VIEWER, username="bench")  # clusters are private: the reader is let in
    base = h.standard_host(c, "gpu-000")
    odd = h.snapshot(c, "gpu-001", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_5")})
    for i in range(2, HOSTS):
        src = odd if i % ODD_EVERY == 1 else base
        host = Host.objects.create(cluster=c, hostname=f"gpu-{i:03d}")
        up = Upload.objects.get(pk=src.upload_id)
        up.pk = None
        up.host = host
        up.content_hash = f"{i:064d}"
        up.save()
        snap = Snapshot.objects.get(pk=src.pk)
        snap.pk = None
        snap.host = host
        snap.upload = up
        snap.save()
    return "bench", "gpu-000"


def _stats(samples: list[float]) -> dict:
    s = sorted(samples)
    q = statistics.quantiles(s, n=10) if len(s) >= 2 else [s[0]] * 9
    return {"median": round(statistics.median(s), 1), "p10": round(q[0], 1), "p90": round(q[-1], 1), "runs": len(s)}


def _server(client, url: str, runs: int = 15) -> tuple[dict, int]:
    client.get(url)  # warm caches and imports
    times = []
    size = 0
    for _ in range(runs):
        t = time.perf_counter()
        resp = client.get(url)
        times.append((time.perf_counter() - t) * 1000)
        assert resp.status_code == 200, (url, resp.status_code)
        size = len(resp.content)
    return _stats(times), size


def _assets_size() -> int:
    """CSS and our JS modules (Plotly.js excluded)."""
    files = [ROOT / "static" / "css" / "topoweb.css"] + sorted((ROOT / "static" / "js").glob("*.js"))
    return sum(f.stat().st_size for f in files)


def _browser(url: str, host_url: str, cookie: dict) -> dict:
    from playwright.sync_api import sync_playwright

    out: dict = {}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium",
                              args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        ctx = b.new_context(viewport={"width": 1366, "height": 768})
        ctx.add_cookies([cookie])
        page = ctx.new_page()
        for name, target, ready in (
            ("cluster_256_interactive_ms", url, "document.getElementById('host-count').textContent.length > 0"),
            ("host_interactive_ms", host_url, "document.body.dataset.plotsReady === '1'"),
        ):
            page.goto(target)  # warm the browser cache (Plotly.js) once, as a returning user has it
            times = []
            for _ in range(5):
                t = time.perf_counter()
                page.goto(target, wait_until="commit")
                page.wait_for_function(ready, timeout=30000)
                times.append((time.perf_counter() - t) * 1000)
            out[name] = _stats(times)
        b.close()
    return out


def run() -> dict:
    tmp = tempfile.mkdtemp(prefix="topoweb-bench-ui-")
    _setup_django(os.path.join(tmp, "ui.sqlite3"))
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.test import Client
    from django.test.testcases import LiveServerThread

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    cluster, host = _fill()
    client = Client()
    client.force_login(get_user_model().objects.get(username="bench"))
    host_url = f"/c/{cluster}/h/{host}/"
    cluster_url = f"/c/{cluster}/"
    host_ms, host_bytes = _server(client, host_url)
    cluster_ms, cluster_bytes = _server(client, cluster_url, runs=5)
    assets = _assets_size()
    result = {
        "host_page_server_ms": {**host_ms, "target": 150},
        "host_page_payload_kb": {"value": round((host_bytes + assets) / 1024, 1), "target": 500,
                                 "html_kb": round(host_bytes / 1024, 1), "css_js_kb": round(assets / 1024, 1)},
        "cluster_256_server_ms": cluster_ms,
        "cluster_256_payload_kb": round((cluster_bytes + assets) / 1024, 1),
    }
    if Path("/usr/bin/chromium").exists():
        settings.ALLOWED_HOSTS = ["*"]
        server = LiveServerThread("127.0.0.1", StaticFilesHandler, connections_override=None, port=0)
        server.daemon = True
        server.start()
        server.is_ready.wait()
        base = f"http://127.0.0.1:{server.port}"
        cookie = {"name": settings.SESSION_COOKIE_NAME, "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                  "url": base}
        try:
            b = _browser(base + cluster_url, base + host_url, cookie)
            result["cluster_256_interactive_ms"] = {**b["cluster_256_interactive_ms"], "target": 2000}
            result["host_interactive_ms"] = b["host_interactive_ms"]
        finally:
            server.terminate()
    return result


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=1))
