"""The fleet home page (``/``): every cluster the user may see with its hosts, GPUs, layouts, odd
ones out and worst problem, and the fleet's problems ranked by what they cost
(``apps.domain.problem_cost``: bandwidth lost x GPUs affected).

What it reads stays small whatever the fleet's size: one aggregate per cluster over the uploads
(waiting, failed, last report) and over the newest snapshots' columns (``Host.latest_snapshot`` and ``Host.layout``, kept at ingest by
``apps.ingest.layouts``), and, for the snapshots with a MED or worse finding only, the document's
``findings`` and ``nics`` (its graph's ``edges`` only for the link rules). Each snapshot's problems
are kept in the process, keyed by its id and build time, so the page shown again reads only the
snapshots stored or rebuilt since.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, Max, Q, Sum

from apps.domain import problem_cost
from apps.ingest import layouts
from apps.ingest.models import Cluster, Host, LayoutGroup, Snapshot, Upload

TOP_PROBLEMS = 15  # groups shown in the fleet ranking
HOSTS_NAMED = 6  # host links shown per problem before "and N more"
BATCH = 200  # snapshots whose findings are read per query
_CACHE: dict[tuple, list[dict]] = {}  # (snapshot id, built_at) -> host_problems
_CACHE_MAX = 100_000
_LOCK = threading.Lock()


@dataclass
class ClusterRow:
    cluster: Cluster
    hosts: int = 0
    gpus: int = 0
    layouts: int = 0
    odd: int = 0
    severities: dict = field(default_factory=dict)
    pending_uploads: int = 0  # received or processing
    failed_uploads: int = 0
    last_report_at: object = None
    worst: dict | None = None  # the cluster's costliest problem group (``problem_cost.rank_fleet``)


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()


def snapshot_problems(rows: list[tuple[int, object]]) -> dict[int, list[dict]]:
    """(snapshot id, built_at) pairs -> {id: ``problem_cost.host_problems``}, from the cache or
    from the few document keys the cost reads, ``BATCH`` snapshots per query."""
    out: dict[int, list[dict]] = {}
    todo = []
    for pk, built in rows:
        with _LOCK:
            hit = _CACHE.get((pk, built))
        if hit is not None:
            out[pk] = hit
        else:
            todo.append((pk, built))
    for i in range(0, len(todo), BATCH):
        chunk = dict(todo[i:i + BATCH])
        parts = {pk: {"findings": f or [], "nics": n or [], "summary": {"gpu_count": g}, "roles": r or {}}
                 for pk, f, n, g, r in Snapshot.objects.filter(pk__in=list(chunk)).values_list(
                     "pk", "document__findings", "document__nics", "gpu_count", "nic_roles")}
        edges = [pk for pk, d in parts.items() if problem_cost.needs_edges(d["findings"])]
        for pk, e in Snapshot.objects.filter(pk__in=edges).values_list("pk", "document__graph__edges"):
            parts[pk]["graph"] = {"edges": e or []}
        nets = [pk for pk, d in parts.items() if problem_cost.needs_gpu_nic(d["findings"])]
        for pk, g in Snapshot.objects.filter(pk__in=nets).values_list("pk", "document__gpu_nic"):
            parts[pk]["gpu_nic"] = g or []
        for pk, d in parts.items():
            problems = problem_cost.host_problems(d, d.pop("roles"))
            out[pk] = problems
            with _LOCK:
                if len(_CACHE) >= _CACHE_MAX:
                    _CACHE.clear()
                _CACHE[(pk, chunk[pk])] = problems
    return out


def _refresh_layouts(clusters: list[Cluster]) -> None:
    for c in clusters:
        if layouts.needs_refresh(c):  # hosts stored before layout groups were kept at ingest
            layouts.refresh_cluster(c)


def home(clusters) -> dict:
    """``{"rows": [ClusterRow], "problems": ranked groups, "fleet": totals}`` for the clusters
    queryset ``clusters`` (``access.visible_clusters(user)``)."""
    clusters = list(clusters.order_by("name"))
    _refresh_layouts(clusters)
    by_id = {c.pk: ClusterRow(c) for c in clusters}
    snap = "latest_snapshot__"
    for row in (Host.objects.filter(cluster_id__in=list(by_id), latest_snapshot__isnull=False)
                .values("cluster_id").annotate(hosts=Count("id"), gpus=Sum(snap + "gpu_count"),
                                               odd=Count("id", filter=Q(layout__status=layouts.ODD)),
                                               **{s: Sum(f"{snap}{s.lower()}_count") for s in problem_cost.PROBLEM_SEVERITIES})):
        r = by_id[row["cluster_id"]]
        r.hosts, r.gpus, r.odd = row["hosts"], row["gpus"] or 0, row["odd"]
        r.severities = {s: row[s] or 0 for s in problem_cost.PROBLEM_SEVERITIES}
    pending = [Upload.Status.RECEIVED, Upload.Status.PROCESSING]
    for row in (Upload.objects.filter(cluster_id__in=list(by_id)).values("cluster_id")  # one GROUP BY, no join
                .annotate(pending=Count("id", filter=Q(status__in=pending)),
                          failed=Count("id", filter=Q(status=Upload.Status.FAILED)), last=Max("received_at"))):
        r = by_id[row["cluster_id"]]
        r.pending_uploads, r.failed_uploads, r.last_report_at = row["pending"], row["failed"], row["last"]
    for cid, n in (LayoutGroup.objects.filter(cluster_id__in=list(by_id), host_count__gt=0)
                   .values_list("cluster_id").annotate(n=Count("id")).values_list("cluster_id", "n")):
        by_id[cid].layouts = n
    serious = Q(latest_snapshot__crit_count__gt=0) | Q(latest_snapshot__high_count__gt=0) | Q(
        latest_snapshot__med_count__gt=0)
    hosts = list(Host.objects.filter(cluster_id__in=list(by_id), latest_snapshot__isnull=False).filter(serious)
                 .order_by("hostname").values_list("cluster_id", "hostname", "latest_snapshot_id",
                                                   "latest_snapshot__built_at"))
    problems = snapshot_problems([(sid, built) for _, _, sid, built in hosts])
    names = {c.pk: c.name for c in clusters}
    keyed = [((names[cid], hostname), problems.get(sid) or []) for cid, hostname, sid, _ in hosts]
    ranked = problem_cost.rank_fleet(keyed)
    per_cluster: dict[str, list] = defaultdict(list)
    for (cname, hostname), ps in keyed:
        per_cluster[cname].append(((cname, hostname), ps))
    for r in by_id.values():
        worst = problem_cost.rank_fleet(per_cluster.get(r.cluster.name, []), limit=1)
        r.worst = _shown(worst[0]) if worst else None
    return {"rows": list(by_id.values()), "problems": [_shown(g) for g in ranked[:TOP_PROBLEMS]],
            "more_problems": max(0, len(ranked) - TOP_PROBLEMS),
            "fleet": {"hosts": sum(r.hosts for r in by_id.values()), "gpus": sum(r.gpus for r in by_id.values()),
                      "clusters": len(by_id)}}


def _shown(group: dict) -> dict:
    """A ranked group as the template shows it: the hosts named (cluster, host, devices) up to
    ``HOSTS_NAMED``, how many more, and the cost rounded."""
    hosts = [{"cluster": c, "host": h, "devices": ", ".join(d for d in devices if d)}
             for (c, h), devices in group["hosts"]]
    return {**group, "count": len(hosts), "named": hosts[:HOSTS_NAMED], "more": max(0, len(hosts) - HOSTS_NAMED),
            "clusters": sorted({h["cluster"] for h in hosts}), "cost_text": f"{group['cost']:.3g}"}
