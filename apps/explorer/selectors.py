"""Read-only helpers of the explorer pages on top of ``apps.ingest.selectors``."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from apps.explorer.models import ShareLink
from apps.ingest.models import Host, Snapshot
from apps.ingest.selectors import latest_of_each_host

SEVERITY_ORDER = {"CRIT": 0, "HIGH": 1, "MED": 2, "LOW": 3, "INFO": 4}


def snapshot_with_host(snapshot_id: int) -> Snapshot | None:
    return (Snapshot.objects.select_related("host", "host__cluster").defer("document", "upload__raw")
            .filter(pk=snapshot_id).first())


def host_snapshot(host: Host, snapshot_id: int | None) -> Snapshot | None:
    """The snapshot ``snapshot_id`` of ``host``, or its newest one (document deferred; its
    ``.host`` is ``host``)."""
    rows = host.snapshots.defer("document").order_by("-collected_at", "-id")
    if snapshot_id is not None:
        return rows.filter(pk=snapshot_id).first()
    return rows.first()


def previous_snapshot(snapshot: Snapshot) -> Snapshot | None:
    return (Snapshot.objects.filter(host_id=snapshot.host_id).defer("document")
            .exclude(pk=snapshot.pk).filter(collected_at__lte=snapshot.collected_at)
            .order_by("-collected_at", "-id").first())


def snapshot_in(history: list[Snapshot], host: Host, snapshot_id: int | None) -> Snapshot | None:
    """``host_snapshot(host, snapshot_id)``, found in ``history`` (the newest of the host's
    snapshots in ``host_snapshots`` order) without a query when it is there."""
    if snapshot_id is None:
        return history[0] if history else None  # an empty history: the host has no snapshot
    found = next((s for s in history if s.pk == snapshot_id), None)
    return found if found is not None else host_snapshot(host, snapshot_id)


def previous_in(history: list[Snapshot], snapshot: Snapshot, *, complete: bool) -> Snapshot | None:
    """``previous_snapshot(snapshot)``, found in ``history`` (as ``snapshot_in``; ``complete``: it
    holds every snapshot of the host) without a query when it can be: the first row of the same
    order that the query's filter keeps."""
    found = next((s for s in history if s.pk != snapshot.pk and s.collected_at <= snapshot.collected_at), None)
    if found is not None or complete:
        return found
    return previous_snapshot(snapshot)


def cluster_reported_last(cluster_ids: set[int] | None = None) -> str | None:
    """The name of the cluster whose newest snapshot is the newest of all (of ``cluster_ids``;
    None: of every cluster)."""
    return (_in_clusters(latest_of_each_host(), cluster_ids).order_by("-collected_at", "-id")
            .values_list("host__cluster__name", flat=True).first())


def _in_clusters(snapshots: QuerySet[Snapshot], cluster_ids: set[int] | None) -> QuerySet[Snapshot]:
    """Only the snapshots of ``cluster_ids`` (``access.visible_cluster_ids``; None: no filter)."""
    return snapshots if cluster_ids is None else snapshots.filter(host__cluster_id__in=cluster_ids)


def latest_layouts_of(cluster_name: str | None) -> list[tuple[int, str]]:
    """(snapshot id, fingerprint) of the newest snapshot of each host of the cluster, by id."""
    return list(latest_of_each_host().filter(host__cluster__name=cluster_name).order_by("id")
                .values_list("pk", "fingerprint"))


def latest_snapshot_rows(cluster_ids: set[int] | None, limit: int = 20000) -> list[dict]:
    """The newest snapshot of every host of the clusters ``cluster_ids`` (None: every cluster) as
    small dicts, clusters then hosts by name: ``{"id", "cluster", "hostname", "gpu_count"}``.

    One query on summary columns only (no document is read), so the path and capacity pickers cost
    the same whatever the size of the fleet's documents."""
    rows = (_in_clusters(latest_of_each_host(), cluster_ids).order_by("host__cluster__name", "host__hostname")
            .values_list("pk", "host__cluster__name", "host__hostname", "gpu_count"))
    return [{"id": pk, "cluster": cl, "hostname": hn, "gpu_count": n} for pk, cl, hn, n in rows[:limit]]


def gpu_names(snapshot_ids: list[int]) -> dict[int, list[str]]:
    """Snapshot id -> its GPU names, read from the documents' ``gpus`` (for the path pickers: only
    the hosts on show, never the whole fleet)."""
    out: dict[int, list[str]] = {}
    for pk, gpus in Snapshot.objects.filter(pk__in=snapshot_ids).values_list("pk", "document__gpus"):
        out[pk] = [g.get("name") for g in gpus or [] if isinstance(g, dict)]
    return out


def snapshot_at(host: Host, moment) -> Snapshot | None:
    """The host's snapshot in force at ``moment`` (the newest collected at or before it)."""
    return (Snapshot.objects.filter(host=host, collected_at__lte=moment).defer("document")
            .order_by("-collected_at", "-id").first())


def share_links_of(user) -> QuerySet[ShareLink]:
    return ShareLink.objects.filter(created_by=user).order_by("-created_at")


def sorted_findings(doc: dict) -> list[dict]:
    return sorted(doc.get("findings") or [], key=lambda f: (SEVERITY_ORDER.get(f.get("severity"), 9), f.get("rule")))


def snapshot_facts(snapshot_ids: list[int]) -> dict[int, dict]:
    """Snapshot id -> {"summary", "assumed_gpu_model", "nvlink_class"} (``apps.ingest.layouts.snapshot_facts``)."""
    from apps.ingest.layouts import snapshot_facts as facts

    return facts(snapshot_ids)


def one_node_busbw(snapshot_ids: list[int]) -> dict[int, float | None]:
    """Snapshot id -> the estimated all-reduce busbw of one node (GB/s), read without the document."""
    out: dict[int, float | None] = {}
    for pk, points in Snapshot.objects.filter(pk__in=snapshot_ids).values_list("pk", "document__estimate__points"):
        one = [p.get("busbw_gbs") for p in points or [] if isinstance(p, dict) and p.get("nodes") == 1]
        out[pk] = one[0] if one and isinstance(one[0], (int, float)) else None
    return out


CLUSTER_ROW_FIELDS = ("id", "host_id", "host__id", "host__hostname", "collected_at", "built_at", "fingerprint",
                      "crit_count", "high_count", "med_count", "low_count", "info_count", "gpu_count", "gpu_model",
                      "nic_count", "active_nic_count", "nic_models")


def cluster_snapshots(cluster) -> list[Snapshot]:
    """The newest snapshot of each host of ``cluster``, hosts by name, summary columns only (one query)."""
    return list(latest_of_each_host().filter(host__cluster=cluster).select_related("host")
                .only(*CLUSTER_ROW_FIELDS).order_by("host__hostname"))


def snapshot_docs(snapshot_ids: list[int]) -> dict[int, dict]:
    """Snapshot id -> document, in one query."""
    return dict(Snapshot.objects.filter(pk__in=snapshot_ids).values_list("pk", "document"))


def layout_facts(snapshots) -> dict[int, dict]:
    """``snapshot_facts`` of every row, read from one snapshot per layout (``fingerprint``): the
    facts a platform is named by (GPU count and model, NVLink kind and widths, sockets) are part of
    what the fingerprint hashes, so hosts of one layout share them. Rows without a fingerprint
    are read on their own."""
    rep: dict[str, int] = {}
    of: dict[int, int] = {}
    for s in snapshots:
        of[s.pk] = rep.setdefault(s.fingerprint, s.pk) if s.fingerprint else s.pk
    facts = snapshot_facts(sorted(set(of.values())))
    return {pk: facts.get(r, {}) for pk, r in of.items()}


# --- the cluster page's host table at any fleet size -------------------------------------------------

HOST_SORTS = {"hostname": ("hostname",), "severity": ("score", "hostname"), "seen": ("seen", "hostname"),
              "layout": ("layout__position", "hostname")}
SEVERITY_FILTERS = ("CRIT", "HIGH", "MED", "LOW")


def cluster_hosts(cluster, *, q: str = "", layout: int | None = None, severity: str = "", odd: bool = False,
                  sort: str = "hostname", descending: bool = False) -> QuerySet[Host]:
    """The hosts of ``cluster`` with a snapshot, filtered and sorted in the database (never by
    loading documents): ``q`` a part of the host name, ``layout`` a layout's number on the page,
    ``severity`` hosts with a finding of that severity or worse, ``odd`` only odd ones out;
    ``sort`` one of ``HOST_SORTS`` (``severity``: findings weighted CRIT > HIGH > MED > LOW;
    ``seen``: the last report received, unchanged ones too)."""
    from django.db.models import F
    from django.db.models.functions import Coalesce

    from apps.ingest.layouts import with_layout

    rows = with_layout(Host.objects.filter(cluster=cluster, latest_snapshot__isnull=False)).defer("description")
    if q:
        rows = rows.filter(hostname__icontains=q)
    if layout is not None:
        rows = rows.filter(layout__position=layout)
    if severity in SEVERITY_FILTERS:
        worse = SEVERITY_FILTERS[:SEVERITY_FILTERS.index(severity) + 1]
        cond = Q()
        for sev in worse:
            cond |= Q(**{f"latest_snapshot__{sev.lower()}_count__gt": 0})
        rows = rows.filter(cond)
    if odd:
        rows = rows.filter(layout__status="odd")
    snap = "latest_snapshot__"
    rows = rows.annotate(
        score=F(snap + "crit_count") * 1_000_000 + F(snap + "high_count") * 10_000 + F(snap + "med_count") * 100
        + F(snap + "low_count"),
        seen=Coalesce("last_seen_at", snap + "collected_at"))
    keys = HOST_SORTS.get(sort, HOST_SORTS["hostname"])
    return rows.order_by(*[f"-{k}" if descending else k for k in keys[:1]], *keys[1:], "pk")


def cluster_layouts(cluster, small: int = 4) -> list:
    """The cluster's layout groups in page order, each with ``hostnames`` when it holds fewer than
    ``small`` hosts (one query for all of those)."""
    from apps.ingest.models import LayoutGroup

    groups = list(LayoutGroup.objects.filter(cluster=cluster, host_count__gt=0).order_by("position"))
    few = {g.pk: g for g in groups if g.host_count < small}
    for g in groups:
        g.hostnames = []
    for pk, name in (Host.objects.filter(layout_id__in=list(few)).order_by("hostname")
                     .values_list("layout_id", "hostname")):
        few[pk].hostnames.append(name)
    return groups


def cluster_totals(cluster) -> dict:
    """Hosts with a snapshot, odd ones out and findings by severity over the newest snapshots (one
    aggregate query)."""
    from django.db.models import Count, Sum

    snap = "latest_snapshot__"
    agg = Host.objects.filter(cluster=cluster, latest_snapshot__isnull=False).aggregate(
        hosts=Count("id"), odd=Count("id", filter=Q(layout__status="odd")),
        **{sev: Sum(f"{snap}{sev.lower()}_count") for sev in ("CRIT", "HIGH", "MED", "LOW", "INFO")})
    return {"hosts": agg.pop("hosts") or 0, "odd": agg.pop("odd") or 0,
            "severities": {k: v or 0 for k, v in agg.items()}}


def cluster_state(cluster) -> tuple:
    """What the cluster-wide findings depend on: its newest snapshots (count, largest id, latest
    build) and its fabric uploads (count, largest id)."""
    from django.db.models import Count, Max

    from apps.ingest.models import Fabric

    a = Host.objects.filter(cluster=cluster).aggregate(n=Count("latest_snapshot_id"), top=Max("latest_snapshot_id"),
                                                       built=Max("latest_snapshot__built_at"))
    f = Fabric.objects.filter(cluster=cluster).aggregate(n=Count("id"), top=Max("id"))
    return (cluster.pk, a["n"], a["top"], str(a["built"]), f["n"], f["top"])
