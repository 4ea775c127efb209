"""Side by side with a peer doing the same work, in the same run, with the ratio (ours / peer).

* hwloc's ``lstopo --input FILE --of svg OUT`` drawing a host from its hwloc XML, against our host
  page for the same XML: ``analyze_host`` on the ``hwloc_xml`` section plus the host page render
  (Django test client, bench PostgreSQL). Real hwloc XML of ``shared/realdata/hwloc`` that the
  installed lstopo reads (hwloc 2.x cannot import the 3.0-format test files; they are skipped).
* a raw PostgreSQL insert (psycopg, one committed INSERT of the same report bytes into a
  one-column table) against our ingest accept path (``POST /api/v1/reports`` with a token: auth,
  envelope checks, content hash, duplicate check, host, upload row; processing is switched off
  for this figure) and against accept plus in-process processing (parse + analysis + snapshot).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from bench import db
from bench.timing import Measure, measure, summarize, timed

ROOT = Path(__file__).resolve().parent.parent
REALDATA = ROOT.parent / "shared" / "realdata" / "hwloc"
HWLOC_FILES = ["llnl_mpibind_cts1-pascal.xml", "llnl_mpibind_g4dnmetal.xml", "llnl_mpibind_eas-tioga_mi250x.xml",
               "llnl_mpibind_coral-butte-hwloc1.xml"]


def _ratio_row(name: str, ours: Measure, peer: Measure, note: str = "") -> Measure:
    r = ours.median_ms / peer.median_ms
    return Measure(name, r, ours.p10_ms / peer.p90_ms, ours.p90_ms / peer.p10_ms, min(ours.runs, peer.runs),
                   target_ms=1.0, unit="x", note=note or "ours / peer; below 1 means ours is faster")


def lstopo_rows(c) -> list[Measure]:
    lstopo = shutil.which("lstopo") or shutil.which("lstopo-no-graphics")
    if lstopo is None:
        return [Measure("lstopo vs host page", 0, 0, 0, 0, note="SKIPPED: lstopo not installed (apt-get install hwloc)")]
    from apps.domain.analysis import analyze_host
    from apps.ingest import access, services
    from apps.ingest.models import Cluster

    cluster = Cluster.objects.filter(name="synth-hwloc").first() or services.create_cluster(
        name="synth-hwloc", description="synthetic: real hwloc XML under synth- names for the lstopo comparison")
    db.bench_user()  # the client reads the page as a viewer (clusters are private), as bench.pages does
    access.grant(cluster=cluster, role=access.VIEWER, username=db.BENCH_USER)
    rows: list[Measure] = []
    out = Path(tempfile.mkdtemp(prefix="bench-lstopo-"))
    try:
        for fname in HWLOC_FILES:
            src = REALDATA / fname
            if not src.exists():
                continue
            probe = subprocess.run([lstopo, "-f", "--input", str(src), "--of", "svg", str(out / "probe.svg")],
                                   capture_output=True, text=True, timeout=60)
            if probe.returncode != 0:
                rows.append(Measure(f"lstopo {fname}", 0, 0, 0, 0, note=f"SKIPPED: {probe.stderr.strip()[:80]}"))
                continue
            text = src.read_bytes().decode("utf-8", errors="replace")
            hostname = "synth-hwloc-" + src.stem.replace("_", "-").lower()[:40]
            report = {"schema": "topoweb.report/1", "hostname": hostname, "agent_version": "synth/1",
                      "meta": {"synthetic": True, "generator": "bench.peers", "source": f"realdata/hwloc/{fname}"},
                      "sections": {"hwloc_xml": text}}
            services.submit_report(cluster=cluster, report=report, via="import", source_name=fname)
            url = f"/c/{cluster.name}/h/{hostname}/"
            if c.get(url).status_code != 200:
                raise RuntimeError(f"GET {url} failed")
            draw = measure(f"lstopo svg {fname}", lambda: subprocess.run(
                [lstopo, "-f", "--input", str(src), "--of", "svg", str(out / "o.svg")], check=True,
                capture_output=True), runs=11, warmup=1, note=f"{(out / 'probe.svg').stat().st_size // 1024} KiB svg")
            samples, page_only = [], []
            for _ in range(12):
                t_an, _ = timed(lambda: analyze_host({"hwloc_xml": text}, hostname))
                t_pg, _ = timed(lambda: c.get(url))
                samples.append(t_an + t_pg)
                page_only.append(t_pg)
            ours = summarize(f"ours analyze+host page {fname}", samples[1:])
            page = summarize(f"ours host page only (stored snapshot) {fname}", page_only[1:])
            rows += [draw, ours, _ratio_row(f"ratio analyze+host page / lstopo {fname}", ours, draw), page,
                     _ratio_row(f"ratio host page only / lstopo {fname}", page, draw,
                                "the page a person opens: analysis ran once at ingest")]
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return rows


def insert_rows(c, runs: int = 60) -> list[Measure]:
    import psycopg
    from django.conf import settings
    from django.test import Client

    from apps.ingest import services
    from apps.ingest.models import Cluster
    from bench.synth import iter_reports, load_layouts, report_bytes

    # One real layout (topo -m + ibstatus, 8 GPU / 8 NIC), distinct hostnames so each is a new upload.
    layouts = load_layouts(["paths_deepep_8xa100_8nic_roce"])
    name = "synth-peer-ingest"
    old = Cluster.objects.filter(name=name).first()
    if old is not None:
        old.delete()
    cluster = services.create_cluster(name=name, description="synthetic: raw insert comparison")
    _, secret = services.issue_token(cluster=cluster, name="bench")
    agent = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    bodies = [report_bytes(r) for r in iter_reports(3 * runs + 10, seed=7, fault_every=0, layouts=layouts)]
    for i, b in enumerate(bodies):
        bodies[i] = b.replace(b'"synth-', f'"synth-ins{i}-'.encode(), 1)
    size = len(bodies[0])

    dbs = settings.DATABASES["default"]
    dsn = f"host={dbs['HOST']} port={dbs['PORT'] or 5432} user={dbs['USER']} dbname={dbs['NAME']}"
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_raw_reports (body text NOT NULL)")
        conn.execute("TRUNCATE bench_raw_reports")
        conn.commit()
        it = iter(bodies)

        def raw():
            conn.execute("INSERT INTO bench_raw_reports (body) VALUES (%s)", (next(it).decode(),))
            conn.commit()
        raw_m = measure("raw psycopg INSERT of a report", raw, runs=runs, warmup=5, note=f"{size // 1024} KiB body")
        conn.execute("DROP TABLE bench_raw_reports")
        conn.commit()

    it = iter(bodies[runs + 5:])
    real_enqueue = services.enqueue_upload

    def post():
        r = agent.post("/api/v1/reports", data=next(it), content_type="application/json")
        if r.status_code != 202:
            raise RuntimeError(f"POST answered {r.status_code}: {r.content[:200]!r}")
    services.enqueue_upload = lambda upload_id: True  # accept only: processing is measured below
    try:
        accept = measure("ours: POST /api/v1/reports (accept)", post, runs=runs, warmup=5,
                         note="token, checks, hash, dedupe, host, upload row")
    finally:
        services.enqueue_upload = real_enqueue
    full = measure("ours: POST + process in-process", post, runs=max(10, runs // 3), warmup=2,
                   note="accept + parse + analysis + snapshot row")
    return [raw_m, accept, _ratio_row("ratio accept / raw insert", accept, raw_m),
            full, _ratio_row("ratio accept+process / raw insert", full, raw_m)]


def run() -> list[Measure]:
    db.setup()
    from bench.pages import client

    c = client()
    return lstopo_rows(c) + insert_rows(c)
