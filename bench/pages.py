"""Page benchmarks: "host page server time" (target 50 ms) and "home page, 1,024-host fleet" (target
150 ms; ``headline_rows``), then server time and payload of the host, cluster (256 and 1,024 hosts), path,
compare and fabric (the SYNTHETIC 2,000-switch fat tree of ``bench.fabric_synth``) pages, through
Django's test client against the bench PostgreSQL database filled by the generator (``bench.db``).
Server time is the whole request in-process (middleware, queries, figures, template); payload is
the HTML as sent and gzip-compressed (what a browser downloads behind a compressing proxy).
"""

from __future__ import annotations

import gzip
import json

from bench import db
from bench.timing import Measure, measure

CLUSTERS = (("synth-256", 256), ("synth-1024", 1024))


def prepare() -> dict:
    """Fill the clusters; give one host a second snapshot (a fault since) for the compare page."""
    db.setup()
    from apps.ingest import services
    from apps.ingest.models import Snapshot
    from bench.synth import apply_fault

    clusters = {name: db.fill_cluster(name, n) for name, n in CLUSTERS}
    from apps.ingest import access

    db.bench_user()
    for cluster in clusters.values():  # the bench user reads the pages as a viewer (clusters are private)
        access.grant(cluster=cluster, role=access.VIEWER, username=db.BENCH_USER)
    small = clusters["synth-256"]
    # the first host whose layout can show a port down, reported again with the port down
    for host in small.hosts.order_by("hostname"):
        snaps = list(Snapshot.objects.filter(host=host).order_by("pk"))
        report = json.loads(snaps[0].upload.raw)
        faulty = apply_fault(report["sections"], "port_down") if report["meta"].get("fault") is None else None
        if len(snaps) >= 2 or faulty is not None:
            if len(snaps) < 2:
                report["sections"], report["meta"]["fault"] = faulty, "port_down"
                report["collected_at"] = "2025-02-01T12:00:00Z"
                services.submit_report(cluster=small, report=report, via="import", source_name="bench.synth")
            compare_host = host
            break
    else:
        compare_host = small.hosts.order_by("hostname").first()
    hosts = list(small.hosts.order_by("hostname")[:2])
    return {"clusters": clusters, "compare_host": compare_host, "hosts": hosts}


def client():
    from django.test import Client

    c = Client()
    c.force_login(db.bench_user())
    return c


def page(c, name: str, url: str, runs: int = 15, target_ms: float | None = None) -> list[Measure]:
    resp = c.get(url)
    if resp.status_code != 200:
        raise RuntimeError(f"{name}: GET {url} answered {resp.status_code}")
    size = len(resp.content)
    zipped = len(gzip.compress(resp.content, 6))
    m = measure(f"page {name}", lambda: c.get(url), runs=runs, warmup=2, target_ms=target_ms,
                note=f"GET {url}; {size / 1024:.0f} KiB HTML, {zipped / 1024:.0f} KiB gzip")
    return [m, Measure(f"payload {name}", size / 1024, size / 1024, size / 1024, 1, unit="KiB",
                       note=f"gzip {zipped / 1024:.1f} KiB")]


def run() -> list[Measure]:
    ctx = prepare()
    c = client()
    rows: list[Measure] = []
    h = ctx["hosts"][0]
    rows += page(c, "host", f"/c/{h.cluster.name}/h/{h.hostname}/")
    rows += headline_rows(c, h)
    for name, n in CLUSTERS:
        rows += page(c, f"cluster {n} hosts", f"/c/{name}/", runs=7 if n > 500 else 11)
    a, b = ctx["hosts"][0], ctx["hosts"][1]
    rows += page(c, "path (2 hosts)", f"/path/?src={a.cluster.name}/{a.hostname}/GPU0"
                                      f"&dst={b.cluster.name}/{b.hostname}/GPU1")
    ch = ctx["compare_host"]
    rows += page(c, "compare (2 snapshots)", f"/c/{ch.cluster.name}/h/{ch.hostname}/compare/")
    rows += fabric_rows(c)
    return rows


HOME_USER = "bench-fleet"  # sees the 1,024-host cluster alone


def headline_rows(c, h) -> list[Measure]:
    """The two page figures with targets: the host page's server time (< 50 ms) and the fleet home
    page of a user whose fleet is the 1,024-host cluster (< 150 ms; its problems read once per
    snapshot build and kept, ``apps.explorer.home``), and that home page's first view after a
    restart (the problems of every snapshot with a MED or worse finding read: no target)."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from apps.explorer import home
    from apps.ingest import access

    url = f"/c/{h.cluster.name}/h/{h.hostname}/"
    rows = [measure("host page server time", lambda: c.get(url), runs=15, warmup=2, target_ms=50.0,
                    note=f"GET {url}")]
    user, _ = get_user_model().objects.get_or_create(username=HOME_USER)
    access.grant(cluster="synth-1024", role=access.VIEWER, username=HOME_USER)
    fleet = Client()
    fleet.force_login(user)
    resp = fleet.get("/")
    if resp.status_code != 200 or b'id="cluster-table"' not in resp.content:
        raise RuntimeError(f"home page answered {resp.status_code}")
    rows.append(measure("home page, 1,024-host fleet", lambda: fleet.get("/"), runs=11, warmup=2, target_ms=150.0,
                        note=f"GET / as a viewer of synth-1024 alone; {len(resp.content) / 1024:.0f} KiB HTML"))

    def cold():
        home.clear_cache()
        fleet.get("/")

    rows.append(measure("home page, 1,024-host fleet, first view", cold, runs=5, warmup=1,
                        note="the problems' cache emptied before each request (a server just started)"))
    return rows


def fabric_rows(c) -> list[Measure]:
    """The fabric page of 2,000 switches and 16,000 HCAs: the figure built from the stored graph (its
    health lists once per graph, then the drawing and its JSON, what every request pays) and the page."""
    from django.test.utils import override_settings

    from apps.domain import fabric, fabric_health
    from apps.domain.fabric_paths import FabricView
    from apps.domain.fabric_rules import fabric_findings
    from apps.explorer import fabric_figures
    from apps.ingest import access, fabrics, services
    from apps.ingest.models import Cluster
    from bench.fabric_synth import synthetic_ibnetdiscover

    text = synthetic_ibnetdiscover()
    cluster = Cluster.objects.filter(name="synth-fabric").first() or services.create_cluster(
        name="synth-fabric", description="synthetic: bench.fabric_synth, 2,000 switches, 16,000 HCAs")
    db.bench_user()
    access.grant(cluster=cluster, role=access.VIEWER, username=db.BENCH_USER)
    with override_settings(MAX_REPORT_BYTES=max(16 << 20, len(text) * 2)):
        row, _ = fabrics.submit_fabric(cluster=cluster, text=text, via="import",
                                       source_name="synthetic_fabric_2000_switches.txt")
    G = fabrics.fabric_graph(row)
    note = "bench.fabric_synth: 2,000 switches, 16,000 HCAs, 44,000 cables"
    rows = [measure("fabric health lists, 2,000 switches", lambda: (fabric_health.degraded_links(G), fabric_health.down_ports(G)),
                    runs=3, warmup=0, note="degraded_links + down_ports, once per graph; " + note)]
    degraded, down = fabric_health.degraded_links(G), fabric_health.down_ports(G)
    view = FabricView.build(G, fabric.attach_hosts(G))
    rows.append(measure("fabric findings L01-L08, 2,000 switches", lambda: fabric_findings(view), runs=3, warmup=0,
                        note="once per discovery and set of snapshots (the page keeps them); " + note))

    def figure(expand=None):
        d = fabric_figures.fabric_drawing(G, degraded=degraded, down=down, expand=expand)
        return fabric_figures.fabric_figure_json(d, G)

    rows.append(measure("fabric figure, 2,000 switches (by group)", figure, runs=7, warmup=1,
                        note=f"drawing + JSON ({len(figure()) / 1024:.0f} KiB); " + note))
    rows.append(measure("fabric figure, 2,000 switches, a leaf group expanded", lambda: figure("leaf-2"), runs=7,
                        warmup=1, note=note))
    rows += page(c, "fabric 2,000 switches", f"/c/{cluster.name}/fabric/", runs=5)
    return rows
