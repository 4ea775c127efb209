"""Ingestion reads for the API and the UI (no writes here).

``clusters_overview(clusters=None) -> list[ClusterOverview]``
    every cluster (or those of the queryset ``clusters``) with host / snapshot / upload counts and the latest report time.
``latest_snapshots(cluster) -> list[Snapshot]``
    the newest snapshot of each host of ``cluster`` (by collected_at, then id), hosts by name;
    ``document`` is deferred (use ``get_snapshot_doc``).
``host_snapshots(host) -> QuerySet[Snapshot]``  newest first, ``document`` deferred.
``get_snapshot_doc(snapshot_id) -> dict``  the snapshot document (raises ``Snapshot.DoesNotExist``).
``upload_status(upload) -> dict``  the status payload of ``GET /api/v1/uploads/{id}``.
``resolve_gpu_ref(ref, user) -> (Snapshot, "GPU<i>")``
    ``"<snapshot id>/GPU<i>"`` or ``"<cluster>/<host>/GPU<i>"`` (that host's latest snapshot), in
    a cluster ``user`` may view (``ANYONE``: no check, for share links); raises ``RefError``
    (``.status`` 400 or 404) naming what is wrong.
``path_between_refs(src, dst, user) -> dict``  ``apps.domain.analysis.path_between`` on stored documents
    (only their legs are read: ``path_legs``).
``path_legs(snapshot_ids) -> dict[id, dict]``  the keys of each document a path reads, in one query.
``path_between_snapshots(snap_a, gpu_a, snap_b, gpu_b, doc_a=None, doc_b=None) -> dict``
    The same on two resolved snapshots (documents already read may be passed). A cross-host path
    goes through the cluster's fabric (``fabrics.path_fabric``: both hosts in one cluster with a
    readable discovery in force, ``fabrics.fabric_view``) when there is one, else the rail model.
    The fabric in force is the newest when both snapshots are their hosts' newest, else the one in
    force when the later of the two was collected. The answer adds ``fabric_id`` and
    ``fabric_taken_at`` (None under the rail model) and, when no discovery applies,
    ``fabric_reason`` says why (no discovery stored for the cluster, hosts in two clusters).
``run_summary(run) -> dict``  a run as the API lists it (no raw text, no result).
``cluster_runs(cluster, limit=50, verdict=None)`` / ``host_runs(host, limit=50)`` -> QuerySet[Run]
    newest first (by when they were measured), raw text and parsed result deferred.
``runs_on_snapshots(snapshot_ids) -> dict[snapshot id, list[Run]]``  the runs checked against each snapshot.
``layout_runs(cluster, fingerprint, snapshot_id, kind="nccl_tests", limit=20) -> list[Run]``
    runs checked against a snapshot of that layout (results loaded).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Count, F, Max, OuterRef, Q, QuerySet, Subquery, Window
from django.db.models.functions import Coalesce, RowNumber

from apps.ingest.models import Cluster, Host, ImportJob, Run, RunHost, Snapshot, Upload, read_json


def latest_of_each_host() -> QuerySet[Snapshot]:
    """The newest snapshot of each host (by collected_at, then id), as one window query."""
    return Snapshot.objects.annotate(newest_rank=Window(
        RowNumber(), partition_by=[F("host_id")], order_by=[F("collected_at").desc(), F("id").desc()])
    ).filter(newest_rank=1)


GPU_RE = re.compile(r"^GPU(\d+)$")
ANYONE = object()  # resolve_gpu_ref without an access check


def _may_view(user, cluster: Cluster, granted: list[str] | None = None) -> bool:
    from apps.ingest import access

    return user is ANYONE or access.covers(access.role_of(user, cluster, granted=granted), access.VIEWER)


@dataclass(frozen=True)
class ClusterOverview:
    cluster: Cluster
    host_count: int
    snapshot_count: int
    upload_count: int
    failed_upload_count: int
    pending_upload_count: int  # received or processing
    last_report_at: datetime | None


def clusters_overview(clusters: QuerySet[Cluster] | None = None) -> list[ClusterOverview]:
    """Counts of ``clusters`` (default: every cluster; pass ``access.visible_clusters(user)``)."""
    base = Cluster.objects.all() if clusters is None else clusters
    rows = base.annotate(
        n_hosts=Count("hosts", distinct=True),
        n_uploads=Count("uploads", distinct=True),
        n_failed=Count("uploads", filter=Q(uploads__status=Upload.Status.FAILED), distinct=True),
        n_pending=Count("uploads", filter=Q(uploads__status__in=[Upload.Status.RECEIVED, Upload.Status.PROCESSING]),
                        distinct=True),
        last_report=Max("uploads__received_at"),
    ).order_by("name")
    snapshot_counts = dict(
        Snapshot.objects.filter(host__cluster__in=base).values_list("host__cluster_id").annotate(n=Count("id"))
        .values_list("host__cluster_id", "n")
    )
    return [
        ClusterOverview(
            cluster=c, host_count=c.n_hosts, snapshot_count=snapshot_counts.get(c.pk, 0), upload_count=c.n_uploads,
            failed_upload_count=c.n_failed, pending_upload_count=c.n_pending, last_report_at=c.last_report,
        )
        for c in rows
    ]


def latest_snapshots(cluster: Cluster) -> list[Snapshot]:
    newest = Snapshot.objects.filter(host=OuterRef("pk")).order_by("-collected_at", "-id").values("id")[:1]
    ids = (
        Host.objects.filter(cluster=cluster).annotate(latest=Subquery(newest))
        .exclude(latest__isnull=True).values_list("latest", flat=True)
    )
    return list(
        Snapshot.objects.filter(pk__in=list(ids)).select_related("host", "host__cluster", "upload")
        .defer("document", "upload__raw").order_by("host__hostname")
    )


def host_snapshots(host: Host) -> QuerySet[Snapshot]:
    # through the host's related manager: each row's ``.host`` is ``host`` itself, read again by no query
    return host.snapshots.defer("document").order_by("-collected_at", "-id")


def get_snapshot_doc(snapshot_id: int) -> dict:
    return Snapshot.objects.values_list("document", flat=True).get(pk=snapshot_id)


def get_cluster(name: str) -> Cluster:
    return Cluster.objects.get(name=name)


def get_host(cluster_name: str, hostname: str) -> Host:
    return Host.objects.select_related("cluster").get(cluster__name=cluster_name, hostname=hostname)


def get_import_job(job_id: int) -> ImportJob:
    return ImportJob.objects.get(pk=job_id)


def upload_status(upload: Upload) -> dict:
    snapshot_id = Snapshot.objects.filter(upload_id=upload.pk).values_list("pk", flat=True).first()
    return {
        "upload_id": upload.pk,
        "status": upload.status,
        "cluster": upload.cluster.name,
        "hostname": upload.host.hostname,
        "via": upload.via,
        "received_at": upload.received_at,
        "started_at": upload.started_at,
        "finished_at": upload.finished_at,
        "attempts": upload.attempts,
        "size_bytes": upload.size_bytes,
        "content_hash": upload.content_hash,
        "error": upload.error,
        "snapshot_id": snapshot_id,
    }


class RefError(LookupError):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status


def _host_rows(document: bool) -> QuerySet[Host]:
    # the newest snapshot is the one ingest keeps on the host (layouts.host_changed), read with it
    hosts = Host.objects.select_related("cluster", "latest_snapshot").defer("layout_lines")
    return hosts if document else hosts.defer("latest_snapshot__document", "latest_snapshot__nic_roles")


def _host_of_ref(ref: str) -> tuple[str, str] | None:
    """(cluster name, hostname) of a ``<cluster>/<host>/GPU<i>`` reference; None for other forms."""
    head = (ref or "").strip().strip("/").rpartition("/")[0]
    cluster_name, _, hostname = head.partition("/")
    return (cluster_name, hostname) if hostname and "/" not in hostname and not head.isdigit() else None


def _hosts_named(refs: list[str], keys: tuple[str, ...], user=None) -> dict[tuple[str, str], Host]:
    """(cluster name, hostname) -> Host for the ``<cluster>/<host>/GPU<i>`` references among ``refs``,
    in one query, each with ``legs``: those ``keys`` of its newest snapshot's document (the rest of
    the document is not read)."""
    names = {n for n in map(_host_of_ref, refs) if n is not None}
    if not names:
        return {}
    if connection.vendor == "postgresql":
        return _hosts_named_sql(names, keys, user)
    rows = (_host_rows(False).filter(cluster__name__in={c for c, _ in names}, hostname__in={h for _, h in names})
            .annotate(**{f"leg_{k}": F(f"latest_snapshot__document__{k}") for k in keys}))
    out = {}
    for h in rows:
        if (h.cluster.name, h.hostname) in names:
            h.legs = {k: getattr(h, f"leg_{k}") for k in keys if getattr(h, f"leg_{k}") is not None}
            out[(h.cluster.name, h.hostname)] = h
    return out


def _columns(model, names: tuple[str, ...]) -> list:
    return [model._meta.get_field(name) for name in names]


# What a path reads of the hosts, their clusters and their newest snapshots (the other fields are
# deferred: read on first use, as with QuerySet.only)
_PATH_HOST = ("id", "cluster", "hostname", "latest_snapshot")
_PATH_CLUSTER = ("id", "name", "open_to_all_users")
_PATH_SNAPSHOT = ("id", "host", "upload", "collected_at", "built_at", "fingerprint", "gpu_count")


def _instance(model, fields: list, values) -> object:
    """A model instance from a row of ``fields`` (columns ``fields`` in order), as the ORM makes one."""
    values = [f.from_db_value(v, None, connection) if v is not None and hasattr(f, "from_db_value") else v
              for f, v in zip(fields, values)]
    return model.from_db(connection.alias, [f.attname for f in fields], values)


def _hosts_named_sql(names: set[tuple[str, str]], keys: tuple[str, ...], user=None) -> dict[tuple[str, str], Host]:
    """``_hosts_named``'s query written out for PostgreSQL: the same rows as ``_host_rows(False)``
    with the legs and the columns a path reads, in one statement Django need not build and compile
    (2.3 of the 3.2 ms a path spent on this query at 16,384 hosts). It also says whether the cluster has
    a readable fabric discovery (``cluster.has_discovery``) and the host a readable LLDP upload
    (``host.has_lldp``), so that a path skips the lookups that would find none, and reads the roles
    ``user``'s grants give in the cluster (``cluster.granted``, ``access.grants_sql``)."""
    from apps.ingest.access import grants_sql
    from apps.ingest.fabrics import DISCOVERY_KINDS, LLDP_KINDS
    from apps.ingest.models import Fabric

    hf, cf, sf = _columns(Host, _PATH_HOST), _columns(Cluster, _PATH_CLUSTER), _columns(Snapshot, _PATH_SNAPSHOT)
    q = connection.ops.quote_name

    def col(model, name: str) -> str:
        return q(model._meta.get_field(name).column)

    fabric = q(Fabric._meta.db_table)
    f_cluster, f_host, f_status, f_kind = (col(Fabric, n) for n in ("cluster", "host", "status", "kind"))
    h_id, h_cluster, h_name, h_latest = (col(Host, n) for n in ("id", "cluster", "hostname", "latest_snapshot"))
    c_id, c_name, s_id, s_doc = col(Cluster, "id"), col(Cluster, "name"), col(Snapshot, "id"), col(Snapshot, "document")
    cols = [*(f"h.{q(f.column)}" for f in hf), *(f"c.{q(f.column)}" for f in cf),
            *(f"s.{q(f.column)}" for f in sf),
            f"EXISTS (SELECT 1 FROM {fabric} f WHERE f.{f_cluster} = c.{c_id} AND f.{f_status} = %s "
            f"AND f.{f_kind} = ANY(%s))",
            f"EXISTS (SELECT 1 FROM {fabric} f WHERE f.{f_host} = h.{h_id} AND f.{f_status} = %s "
            f"AND f.{f_kind} = ANY(%s))",
            f"ARRAY({grants_sql(f'c.{c_id}')})", *(f"s.{s_doc} -> %s" for _ in keys)]
    sql = (f"SELECT {', '.join(cols)} FROM {q(Host._meta.db_table)} h "
           f"JOIN {q(Cluster._meta.db_table)} c ON c.{c_id} = h.{h_cluster} "
           f"LEFT JOIN {q(Snapshot._meta.db_table)} s ON s.{s_id} = h.{h_latest} "
           f"WHERE c.{c_name} = ANY(%s) AND h.{h_name} = ANY(%s)")
    ok = Fabric.Status.OK.value
    with connection.cursor() as cur:
        person = getattr(user, "pk", None)  # None (no user, ANYONE, anonymous): no grant matches
        cur.execute(sql, [ok, list(DISCOVERY_KINDS), ok, list(LLDP_KINDS), person, person, *keys,
                          sorted({c for c, _ in names}), sorted({h for _, h in names})])
        rows = cur.fetchall()
    out = {}
    a, b, n = len(hf), len(hf) + len(cf), len(hf) + len(cf) + len(sf)
    for row in rows:
        host, cluster = _instance(Host, hf, row[:a]), _instance(Cluster, cf, row[a:b])
        if (cluster.name, host.hostname) not in names:
            continue
        host.cluster = cluster
        host.latest_snapshot = _instance(Snapshot, sf, row[b:n]) if host.latest_snapshot_id else None
        cluster.has_discovery, host.has_lldp, cluster.granted = row[n], row[n + 1], list(row[n + 2] or [])
        host.legs = {k: read_json(v) for k, v in zip(keys, row[n + 3:]) if v is not None}
        out[(cluster.name, host.hostname)] = host
    return out


def _snapshot_of_ref(ref: str, user, views: dict, *, document: bool,
                     hosts: dict[tuple[str, str], Host] | None = None) -> tuple[Snapshot, str]:
    """The snapshot (its ``document`` read only when asked) and GPU name a reference names, access
    checked once per cluster (``views``: cluster id -> may view); ``hosts``: hosts already read
    (``_hosts_named``)."""
    ref = (ref or "").strip().strip("/")
    head, _, gpu = ref.rpartition("/")
    if not head or not GPU_RE.match(gpu):
        raise RefError(f"{ref!r}: expected <snapshot id>/GPU<i> or <cluster>/<host>/GPU<i>")

    def may_view(cluster: Cluster) -> bool:
        if cluster.pk not in views:  # granted: read with the hosts (_hosts_named_sql)
            views[cluster.pk] = _may_view(user, cluster, getattr(cluster, "granted", None))
        return views[cluster.pk]

    snapshots = Snapshot.objects.select_related("host", "host__cluster")
    snapshots = snapshots if document else snapshots.defer("document", "nic_roles")
    if head.isdigit():
        snapshot = snapshots.filter(pk=int(head)).first()
        if snapshot is None or not may_view(snapshot.host.cluster):
            raise RefError(f"{ref!r}: no snapshot {head}", status=404)
        return snapshot, gpu
    named = _host_of_ref(ref)
    if named is None:
        raise RefError(f"{ref!r}: expected <snapshot id>/GPU<i> or <cluster>/<host>/GPU<i>")
    cluster_name, hostname = named
    if hosts is not None:
        host = hosts.get((cluster_name, hostname))
    else:
        host = _host_rows(document).filter(cluster__name=cluster_name, hostname=hostname).first()
    if host is None or not may_view(host.cluster):
        raise RefError(f"{ref!r}: no host {hostname!r} in cluster {cluster_name!r}", status=404)
    snapshot = host.latest_snapshot
    if snapshot is not None:
        snapshot.host = host
    else:  # a host stored before ingest kept it
        snapshot = snapshots.filter(host=host).order_by("-collected_at", "-id").first()
    if snapshot is None:
        raise RefError(f"{ref!r}: host {hostname!r} has no snapshot yet", status=404)
    return snapshot, gpu


def _check_gpu(ref: str, snapshot: Snapshot, gpu: str, doc: dict) -> None:
    names = [g.get("name") for g in doc.get("gpus") or []]
    if gpu not in names:
        have = ", ".join(names) if names else "no GPUs"
        ref = (ref or "").strip().strip("/")
        raise RefError(f"{ref!r}: snapshot {snapshot.pk} of {snapshot.host.hostname} has no {gpu} (it has {have})")


def resolve_gpu_ref(ref: str, user) -> tuple[Snapshot, str]:
    """Resolve a GPU reference in the clusters ``user`` may view (others are answered as if they
    did not exist). ``ANYONE`` skips the check: only for share links, whose creator's access was
    checked when the link was made."""
    snapshot, gpu = _snapshot_of_ref(ref, user, {}, document=True)
    _check_gpu(ref, snapshot, gpu, snapshot.document)
    return snapshot, gpu


def path_legs(snapshot_ids: list[int], keys: tuple[str, ...] | None = None) -> dict[int, dict]:
    """Snapshot id -> the legs of its document (``keys``, default ``apps.domain.cluster.PATH_KEYS``),
    in one query that reads only those keys (PostgreSQL's ``->``): what a path needs, not the
    whole document."""
    from apps.domain.cluster import PATH_KEYS

    keys = keys or PATH_KEYS
    rows = Snapshot.objects.filter(pk__in=snapshot_ids).values_list("pk", *(f"document__{k}" for k in keys))
    return {row[0]: {k: v for k, v in zip(keys, row[1:]) if v is not None} for row in rows}


def path_between_refs(src: str, dst: str, user) -> dict:
    """``path_between`` for two references, reading only the legs of the two documents (with the
    hosts, in one query, for references by host name)."""
    from apps.domain.cluster import CROSS_HOST_KEYS, SAME_HOST_KEYS

    def keys_for(same: bool) -> tuple[str, ...]:
        return SAME_HOST_KEYS if same else CROSS_HOST_KEYS

    views: dict[int, bool] = {}
    guess = keys_for(_host_of_ref(src) is not None and _host_of_ref(src) == _host_of_ref(dst))
    hosts = _hosts_named([src, dst], guess, user)
    snap_a, gpu_a = _snapshot_of_ref(src, user, views, document=False, hosts=hosts)
    snap_b, gpu_b = _snapshot_of_ref(dst, user, views, document=False, hosts=hosts)
    keys = keys_for(snap_a.host.hostname == snap_b.host.hostname)  # path_between's own test
    docs = {h.latest_snapshot_id: h.legs for h in hosts.values() if keys == guess}
    missing = [pk for pk in (snap_a.pk, snap_b.pk) if pk not in docs]
    if missing:
        docs.update(path_legs(missing, keys))
    doc_a, doc_b = docs.get(snap_a.pk, {}), docs.get(snap_b.pk, {})
    _check_gpu(src, snap_a, gpu_a, doc_a)
    _check_gpu(dst, snap_b, gpu_b, doc_b)
    return path_between_snapshots(snap_a, gpu_a, snap_b, gpu_b, doc_a=doc_a, doc_b=doc_a if snap_a.pk == snap_b.pk
                                  else doc_b)


def _is_newest(snapshot: Snapshot) -> bool:
    if snapshot.host.latest_snapshot_id is not None:  # kept at ingest (layouts.host_changed)
        return snapshot.host.latest_snapshot_id == snapshot.pk
    return not Snapshot.objects.filter(host_id=snapshot.host_id).filter(
        Q(collected_at__gt=snapshot.collected_at) | Q(collected_at=snapshot.collected_at, id__gt=snapshot.pk)).exists()


def _fabric_moment(snap_a: Snapshot, snap_b: Snapshot) -> datetime | None:
    """When the fabric of a path between these snapshots is read: now (None) when both are their
    hosts' newest, else when the later of the two was collected."""
    if _is_newest(snap_a) and _is_newest(snap_b):
        return None
    return max(snap_a.collected_at, snap_b.collected_at)


def _may_speak_lldp(doc: dict) -> bool:
    """Whether a host has a NIC that LLDP may have seen: one that is not InfiniBand (Ethernet, or
    a link layer no capture named). An InfiniBand port sends no LLDP."""
    return any(n.get("link_layer") != "InfiniBand" for n in doc.get("nics") or [])


def path_between_snapshots(snap_a: Snapshot, gpu_a: str, snap_b: Snapshot, gpu_b: str,
                           doc_a: dict | None = None, doc_b: dict | None = None) -> dict:
    """``path_between`` on two snapshots, through the cluster's fabric when one is in force (module docstring)."""
    from apps.domain.analysis import path_between
    from apps.ingest import fabrics

    doc_a = snap_a.document if doc_a is None else doc_a
    doc_b = (doc_a if snap_b.pk == snap_a.pk else snap_b.document) if doc_b is None else doc_b
    cf = why = view = neighbors = None
    if snap_a.host_id != snap_b.host_id:
        moment = _fabric_moment(snap_a, snap_b)
        # has_discovery / has_lldp: what _hosts_named_sql read with the hosts (unknown: look)
        cf, why = fabrics.path_fabric(snap_a.host.cluster, snap_b.host.cluster, moment,
                                      stored=getattr(snap_a.host.cluster, "has_discovery", None))
        view = fabrics.fabric_view(cf) if cf is not None else None
        if snap_a.host.cluster_id == snap_b.host.cluster_id and all(
                getattr(s.host, "has_lldp", True) and _may_speak_lldp(d) for s, d in ((snap_a, doc_a), (snap_b, doc_b))):
            # RoCE ports: LLDP names their switches (the path reads them only when both ends have one)
            neighbors = fabrics.lldp_neighbors(snap_a.host.cluster, [snap_a.host.hostname, snap_b.host.hostname],
                                               moment)
    result = path_between(doc_a, gpu_a, doc_b, gpu_b, fabric=view, neighbors=neighbors)
    extra = {"src_snapshot": snap_a.pk, "dst_snapshot": snap_b.pk,
             "fabric_id": cf.fabric.pk if cf is not None else None,
             "fabric_taken_at": cf.fabric.taken_at if cf is not None else None}
    if why and result.get("fabric") == "assumed" and not result.get("fabric_reason"):
        extra["fabric_reason"] = why
    return {**result, **extra}


# ------------------------------------------------------------------------------------------ runs

RUN_LIST_DEFER = ("raw", "parsed", "result")


def _runs(*, with_result: bool = False) -> QuerySet[Run]:
    deferred = ("raw", "parsed") if with_result else RUN_LIST_DEFER
    return (Run.objects.select_related("cluster").defer(*deferred)
            .annotate(measured_on=Coalesce("collected_at", "received_at")).order_by("-measured_on", "-id"))


def cluster_runs(cluster: Cluster, limit: int | None = 50, verdict: str | None = None) -> QuerySet[Run]:
    qs = _runs().filter(cluster=cluster).prefetch_related("run_hosts__host")
    if verdict:
        qs = qs.filter(verdict=verdict)
    return qs[:limit] if limit else qs


def host_runs(host: Host, limit: int = 50) -> QuerySet[Run]:
    ids = RunHost.objects.filter(host=host).values("run_id")
    return _runs().filter(pk__in=ids).prefetch_related("run_hosts__host")[:limit]


def runs_on_snapshots(snapshot_ids: list[int]) -> dict[int, list[Run]]:
    """The runs checked against each of these snapshots, newest first."""
    out: dict[int, list[Run]] = {pk: [] for pk in snapshot_ids}
    links = RunHost.objects.filter(snapshot_id__in=snapshot_ids).values_list("snapshot_id", "run_id")
    by_run: dict[int, set[int]] = {}
    for snap, run in links:
        by_run.setdefault(run, set()).add(snap)
    for run in _runs(with_result=True).filter(pk__in=list(by_run)).prefetch_related("run_hosts"):
        for snap in by_run[run.pk]:
            out[snap].append(run)
    return out


def layout_runs(cluster: Cluster, fingerprint: str | None, snapshot_id: int, kind: str = "nccl_tests",
                limit: int = 20) -> list[Run]:
    """Readable runs of ``kind`` in ``cluster`` made on this layout alone: every host they touched
    was checked against a snapshot of it (same fingerprint; the snapshot itself when it has none).
    Newest first, with their results."""
    links = RunHost.objects.filter(run__cluster=cluster, run__kind=kind, run__status=Run.Status.DONE)
    same = Q(snapshot__fingerprint=fingerprint) if fingerprint else Q(snapshot_id=snapshot_id)
    elsewhere = links.exclude(same) | links.filter(snapshot__isnull=True)
    ids = links.filter(same).exclude(run_id__in=elsewhere.order_by().values("run_id")).order_by().values("run_id")
    return list(_runs(with_result=True).filter(pk__in=ids)[:limit])


def run_summary(run: Run) -> dict:
    """A run as ``GET /api/v1/runs/{id}`` and the cluster listing give it (without text and result)."""
    return {
        "run_id": run.pk, "cluster": run.cluster.name, "kind": run.kind or None, "status": run.status,
        "verdict": run.verdict or None, "reason": run.reason or None, "measured": run.measured,
        "expected": run.expected, "unit": run.unit or None, "efficiency": run.efficiency, "via": run.via,
        "source_name": run.source_name, "received_at": run.received_at, "collected_at": run.collected_at,
        "checked_at": run.checked_at, "error": run.error,
        "hosts": [{"hostname": rh.hostname, "host": rh.host.hostname if rh.host_id else None,
                   "snapshot_id": rh.snapshot_id, "gpus": [g.get("bdf") or g.get("gpu") for g in rh.gpus or []],
                   "nics": rh.nics} for rh in run.run_hosts.all()],
    }
