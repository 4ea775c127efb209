"""Runs on the other pages: the runs tables of the host and cluster pages, runs before and after
a change on the compare page, and measured points on the capacity chart. Reads only."""

from __future__ import annotations

from collections.abc import Iterable

from django.urls import reverse

from apps.ingest import selectors as ingest
from apps.ingest.models import Run, Snapshot

VERDICT_WORDS = {"healthy": "healthy", "below_expected": "below expected", "broken": "broken",
                 "not_comparable": "not comparable"}
KIND_WORDS = {"nccl_tests": "nccl-tests", "nccl_log": "NCCL log", "perftest": "perftest",
              "p2p_bandwidth": "P2P test"}


def runs_table(rows: Iterable[Run]) -> list[dict]:
    """Rows of the runs tables (host and cluster pages): kind, hosts, figures and verdict."""
    out = []
    for r in rows:
        out.append({"run": r, "kind": KIND_WORDS.get(r.kind, r.kind or "unreadable"),
                    "verdict": VERDICT_WORDS.get(r.verdict, "unreadable" if r.status == Run.Status.FAILED else ""),
                    "hosts": [rh.hostname for rh in r.run_hosts.all()],
                    "url": reverse("explorer:run", args=[r.cluster.name, r.pk])})
    return out


def _shape(run: Run) -> tuple:
    e = (run.result or {}).get("expected") or {}
    m = (run.result or {}).get("measured") or {}
    return run.kind, m.get("collective"), e.get("nodes"), m.get("device")


def before_after(snapshot_a: Snapshot, snapshot_b: Snapshot) -> dict:
    """Runs checked against two snapshots of a host, and one sentence per measurement made on both
    ("all_reduce on 2 nodes: 57.1 -> 182.3 GB/s, expected 190.0")."""
    found = ingest.runs_on_snapshots([snapshot_a.pk, snapshot_b.pk])
    before, after = found[snapshot_a.pk], found[snapshot_b.pk]
    lines = []
    for b in after:
        a = next((x for x in before if _shape(x) == _shape(b) and x.measured is not None), None)
        if a is None or b.measured is None:
            continue
        kind, collective, nodes, device = _shape(b)
        what = " ".join(str(x) for x in (collective or KIND_WORDS.get(kind, kind), f"on {nodes} node(s)" if nodes else "",
                                        device or "") if x)
        expected = f", expected {b.expected:.1f}" if b.expected else ""
        lines.append(f"{what}: {a.measured:.1f} -> {b.measured:.1f} {b.unit}{expected} "
                     f"({VERDICT_WORDS.get(a.verdict, a.verdict)} -> {VERDICT_WORDS.get(b.verdict, b.verdict)})")
    return {"before": runs_table(before), "after": runs_table(after), "lines": lines}


def capacity_points(snapshots: list[Snapshot], limit: int = 20) -> dict[int, list[dict]]:
    """For each chosen layout (index), the all-reduce nccl-tests runs of its cluster checked against
    a snapshot of the same layout (fingerprint): ``{"nodes", "busbw_gbs", "label"}``."""
    out: dict[int, list[dict]] = {}
    for k, snap in enumerate(snapshots):
        points = []
        for r in ingest.layout_runs(snap.host.cluster, snap.fingerprint or None, snap.pk, limit=limit):
            result = r.result or {}
            nodes = (result.get("expected") or {}).get("nodes")
            if (result.get("measured") or {}).get("collective") != "all_reduce" or not nodes or r.measured is None:
                continue
            points.append({"nodes": nodes, "busbw_gbs": r.measured,
                           "label": f"run #{r.pk}: {VERDICT_WORDS.get(r.verdict, r.verdict)}"})
        out[k] = points
    return out
