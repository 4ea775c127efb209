"""Fleet scale: a SYNTHETIC 16,384-host cluster (131,072 GPUs on the 8-GPU layouts) in the bench
PostgreSQL, and the figures that must hold there.

The fleet (``fill_fleet``): ``bench.synth.iter_reports`` (the real bundles in turn, one host in
eight with a fault it can show) under the names ``scale-16384-<layout>-<nnnn>`` in cluster ``scale-16384``. The first host of
each (layout, fault) goes through ``services.submit_report`` with in-process processing, so its
upload, snapshot and layout group are what ingest stores; every other host of that (layout,
fault) is stored in bulk as a copy of it (its own report text, hostname and document hash; the
document with the hostname replaced): analysing 16,384 copies of a few dozen documents would
measure nothing the ingest rows do not. ``layouts.refresh_cluster`` then places every host, as
``manage.py refresh_layouts`` does. A cluster already holding the 16,384 hosts is kept.

Rows (group ``scale``; medians over runs):

``cluster page interactive, 16384 hosts``  headless Chromium, ``bench.browser.time_to_interactive``
    (warm browser cache; the first, cold load in the note), target < 2,000 ms.
``path query p95, 16384 hosts``  ``selectors.path_between_refs`` (what ``GET /api/v1/path`` and the
    path page run: two GPU references resolved to the hosts' newest snapshots, the fabric looked up,
    the path built) for random cross- and same-host pairs, target p95 < 5 ms.
``worker ingest, whole-machine lspci reports/s``  ``bench.ingest.bench_throughput(full=True)``: one
    Celery worker over Redis, each report carrying a 927 KB ``lspci -vvv`` of an HGX H100 (in a
    subprocess: its own private stack), target >= 50 reports/s.
``bytes per snapshot, ...``  PostgreSQL's stored size (``pg_column_size``, after its compression)
    of a snapshot's document and of an upload's raw report, and the tables' whole size per host.
``path index memory per host``  ``ClusterIndex`` (``manage.py path``'s in-memory index) over 1,024
    of the fleet's documents, measured with ``tracemalloc``: bytes per host it holds.
``rebuild rate, 1 worker`` / ``2 workers``  ``bench.rebuild`` (its own private stack).

``python -m bench scale`` (``make bench BENCH_GROUPS=scale``). ``TOPOWEB_BENCH_SCALE_HOSTS``
changes the fleet's size (the row names keep saying what was measured).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from bench import db
from bench.timing import Measure, summarize

ROOT = Path(__file__).resolve().parent.parent
HOSTS = int(os.environ.get("TOPOWEB_BENCH_SCALE_HOSTS", "16384"))
CLUSTER = f"scale-{HOSTS}"  # not bench.pages' synth-<n> clusters
PATH_QUERIES = 400
BATCH = 1000
MARK = "@@BENCH-SCALE@@"


# --- the fleet -------------------------------------------------------------------------------------


def _renamed(report: dict) -> dict:
    report["hostname"] = report["hostname"].replace("synth-", f"{CLUSTER}-", 1)
    return report


def _template(cluster, report: dict):
    """The snapshot ingest stores for ``report`` (processed in-process)."""
    from apps.ingest import services
    from apps.ingest.models import Snapshot

    upload, _ = services.submit_report(cluster=cluster, report=report, via="import", source_name="bench.scale")
    return Snapshot.objects.select_related("upload").get(upload=upload)


def _copies(cluster, template, reports: list[dict]) -> None:
    """Hosts, uploads and snapshots for ``reports``: each a copy of ``template`` under its own name."""
    from django.utils import timezone

    from apps.ingest.models import Host, Snapshot, Upload

    now = timezone.now()
    doc_text = json.dumps(template.document)
    old = re.compile(re.escape(template.host.hostname) + r"(?![\w-])")
    hosts = Host.objects.bulk_create([Host(cluster=cluster, hostname=r["hostname"], last_seen_at=now,
                                           description="synthetic: bench.scale") for r in reports])
    uploads = []
    for h, r in zip(hosts, reports):
        raw = json.dumps(r)
        uploads.append(Upload(cluster=cluster, host=h, via="import", source_name="bench.scale", raw=raw,
                              size_bytes=len(raw.encode()), content_hash=hashlib.sha256(raw.encode()).hexdigest(),
                              collected_at=template.collected_at, agent_version=template.upload.agent_version,
                              status="done", attempts=1, started_at=now, finished_at=now))
    # one row per INSERT: for several rows Django sends arrays (UNNEST), whose text psycopg escapes
    # character by character in Python: minutes for these 0.1-1 MB reports and 80 KB documents
    uploads = Upload.objects.bulk_create(uploads, batch_size=1)
    fields = [f.name for f in Snapshot._meta.concrete_fields
              if f.name not in ("id", "host", "upload", "document", "document_hash", "built_at")]
    snaps = []
    for h, u in zip(hosts, uploads):
        text = old.sub(h.hostname, doc_text)
        snaps.append(Snapshot(host=h, upload=u, document=json.loads(text),
                              document_hash=hashlib.sha256(text.encode()).hexdigest(),
                              **{f: getattr(template, f) for f in fields}))
    Snapshot.objects.bulk_create(snaps, batch_size=1)


def fill_fleet(n: int = HOSTS):
    from apps.ingest import layouts, services
    from apps.ingest.models import Cluster, Snapshot
    from bench.synth import iter_reports

    cluster = Cluster.objects.filter(name=CLUSTER).first()
    if cluster is not None:
        if cluster.hosts.count() == n and Snapshot.objects.filter(host__cluster=cluster).count() >= n:
            return cluster
        cluster.delete()
    cluster = services.create_cluster(name=CLUSTER, description=f"synthetic: {n} hosts from bench.scale")
    templates: dict[tuple, object] = {}
    pending: dict[tuple, list[dict]] = {}
    start = time.perf_counter()
    for i, report in enumerate(iter_reports(n, seed=0, fault_every=8, cluster=CLUSTER)):
        report = _renamed(report)
        key = (report["meta"]["layout"], report["meta"]["fault"])
        if key not in templates:
            templates[key] = _template(cluster, report)
            continue
        pending.setdefault(key, []).append(report)
        if len(pending[key]) >= BATCH:
            _copies(cluster, templates[key], pending.pop(key))
        if (i + 1) % 2048 == 0:
            print(f"  {CLUSTER}: {i + 1}/{n} hosts ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    for key, reports in pending.items():
        _copies(cluster, templates[key], reports)
    layouts.refresh_cluster(cluster)
    from apps.ingest import access

    db.bench_user()  # the bench user reads the pages and paths as a viewer (clusters are private)
    access.grant(cluster=cluster, role=access.VIEWER, username=db.BENCH_USER)
    print(f"  {CLUSTER}: {n} hosts stored, {len(templates)} analysed ({time.perf_counter() - start:.0f} s)",
          file=sys.stderr, flush=True)
    return cluster


# --- the rows --------------------------------------------------------------------------------------


def page_row(cluster) -> list[Measure]:
    from bench.browser import time_to_interactive

    return time_to_interactive([(f"cluster page interactive, {HOSTS} hosts", f"/c/{cluster.name}/")],
                               runs=7, target_ms=2000)


def path_row(cluster, queries: int = PATH_QUERIES, seed: int = 3) -> Measure:
    from apps.ingest import selectors
    from apps.ingest.models import Host

    user = db.bench_user()
    hosts = list(Host.objects.filter(cluster=cluster).values_list("hostname", "latest_snapshot__gpu_count"))
    rng = random.Random(seed)
    samples, answered = [], {}
    for q in range(queries + 20):
        (ha, na), (hb, nb) = rng.choice(hosts), rng.choice(hosts)
        if q % 4 == 0:  # one query in four stays on one host
            hb, nb = ha, na
        src, dst = f"{CLUSTER}/{ha}/GPU{rng.randrange(max(na, 1))}", f"{CLUSTER}/{hb}/GPU{rng.randrange(max(nb, 1))}"
        t = time.perf_counter()
        out = selectors.path_between_refs(src, dst, user)
        ms = (time.perf_counter() - t) * 1000
        if q >= 20:  # the first queries open the connection and warm the caches
            samples.append(ms)
            answered[out.get("mechanism")] = answered.get(out.get("mechanism"), 0) + 1
    m = summarize(f"path query p95, {HOSTS} hosts", samples, target_ms=5,
                  note=f"selectors.path_between_refs, random pairs (1 in 4 on one host); answers {answered}")
    m.target_on = "p95"
    return m


def storage_rows(cluster) -> list[Measure]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT avg(pg_column_size(s.document)), avg(octet_length(s.document::text)), "
                    "avg(pg_column_size(u.raw)), avg(u.size_bytes), count(*) "
                    "FROM ingest_snapshot s JOIN ingest_host h ON h.id = s.host_id "
                    "JOIN ingest_upload u ON u.id = s.upload_id WHERE h.cluster_id = %s", [cluster.pk])
        doc, doc_text, raw, raw_len, n = cur.fetchone()
        cur.execute("SELECT sum(pg_total_relation_size(c)) FROM unnest(ARRAY['ingest_snapshot', 'ingest_upload', "
                    "'ingest_host']::regclass[]) AS c")
        total = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM ingest_host")
        all_hosts = cur.fetchone()[0]
    return [Measure("bytes per snapshot, document stored", float(doc), float(doc), float(doc), int(n), unit="bytes",
                    note=f"pg_column_size after compression; {float(doc_text):.0f} bytes as JSON text"),
            Measure("bytes per snapshot, raw report stored", float(raw), float(raw), float(raw), int(n), unit="bytes",
                    note=f"pg_column_size after compression; {float(raw_len):.0f} bytes as sent"),
            Measure("bytes per host, snapshot + upload + host tables", total / all_hosts, total / all_hosts,
                    total / all_hosts, all_hosts, unit="bytes",
                    note=f"pg_total_relation_size over {all_hosts} hosts of the bench database (indexes included)")]


def index_memory_row(cluster, hosts: int = 1024) -> Measure:
    """What ``ClusterIndex`` keeps per host: the documents are read one at a time from the database
    and added, the rest of each freed; the memory still held afterwards is the index."""
    import gc

    from apps.domain.cluster import ClusterIndex
    from apps.ingest.models import Snapshot

    rows = Snapshot.objects.filter(host__cluster=cluster).order_by("pk").values_list("document", flat=True)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    index = ClusterIndex()
    for doc in rows[:hosts].iterator(chunk_size=64):
        index.add(doc)
    del doc
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    per_host = held / max(len(index), 1)
    return Measure("path index memory per host", per_host, per_host, per_host, len(index), unit="bytes",
                   note=f"ClusterIndex filled with {len(index)} documents of {CLUSTER} (tracemalloc: held after "
                        f"the documents are freed; it keeps their legs); {per_host * HOSTS / 2**20:.0f} MiB "
                        f"for {HOSTS} hosts")


def ingest_row(runs: int = 3, reports: int = 150) -> Measure:
    code = (f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); import bench.ingest as m; m._setup(); "
            f"print({MARK!r} + json.dumps(m.bench_throughput({reports}, True, 1), default=str))")
    env = {k: v for k, v in os.environ.items() if k != "TOPOWEB_DATABASE_URL"}
    rates, cpu = [], []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=1800)
        line = next((x for x in reversed(out.stdout.splitlines()) if x.startswith(MARK)), None)
        if line is None:
            raise RuntimeError(f"bench.ingest failed ({out.returncode}): {out.stderr[-1500:]}")
        got = json.loads(line[len(MARK):])
        rates.append(float(got["reports_per_second"]))
        if got.get("worker_cpu_ms_per_report") is not None:
            cpu.append(float(got["worker_cpu_ms_per_report"]))
    m = summarize("worker ingest, whole-machine lspci reports/s", rates, target_ms=50, unit="reports/s",
                  note=f"{reports} reports a run, one worker, each with a 927 KB lspci -vvv"
                       + (f"; worker CPU {sorted(cpu)[len(cpu) // 2]:.1f} ms/report" if cpu else ""))
    return m


def rebuild_rows() -> list[Measure]:
    from bench import rebuild

    return rebuild.run()


def run() -> list[Measure]:
    db.setup()
    cluster = fill_fleet()
    rows: list[Measure] = []
    rows += page_row(cluster)
    rows.append(path_row(cluster))
    rows += storage_rows(cluster)
    rows.append(index_memory_row(cluster))
    rows.append(ingest_row())
    rows += rebuild_rows()
    return rows
