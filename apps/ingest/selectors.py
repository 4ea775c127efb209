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
``path_between_refs(src, dst, user) -> dict``  ``apps.domain.analysis.path_between`` on stored documents.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, OuterRef, Q, QuerySet, Subquery

from apps.ingest.models import Cluster, Host, ImportJob, Snapshot, Upload

GPU_RE = re.compile(r"^GPU(\d+)$")
ANYONE = object()  # resolve_gpu_ref without an access check


def _may_view(user, cluster: Cluster) -> bool:
    from apps.ingest import access

    return user is ANYONE or access.has_role(user, cluster, access.VIEWER)


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
    return Snapshot.objects.filter(host=host).defer("document").order_by("-collected_at", "-id")


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


def resolve_gpu_ref(ref: str, user) -> tuple[Snapshot, str]:
    """Resolve a GPU reference in the clusters ``user`` may view (others are answered as if they
    did not exist). ``ANYONE`` skips the check: only for share links, whose creator's access was
    checked when the link was made."""
    ref = (ref or "").strip().strip("/")
    head, _, gpu = ref.rpartition("/")
    if not head or not GPU_RE.match(gpu):
        raise RefError(f"{ref!r}: expected <snapshot id>/GPU<i> or <cluster>/<host>/GPU<i>")
    if head.isdigit():
        snapshot = Snapshot.objects.select_related("host", "host__cluster").filter(pk=int(head)).first()
        if snapshot is None or not _may_view(user, snapshot.host.cluster):
            raise RefError(f"{ref!r}: no snapshot {head}", status=404)
    else:
        cluster_name, _, hostname = head.partition("/")
        if not hostname or "/" in hostname:
            raise RefError(f"{ref!r}: expected <snapshot id>/GPU<i> or <cluster>/<host>/GPU<i>")
        host = Host.objects.select_related("cluster").filter(cluster__name=cluster_name, hostname=hostname).first()
        if host is None or not _may_view(user, host.cluster):
            raise RefError(f"{ref!r}: no host {hostname!r} in cluster {cluster_name!r}", status=404)
        snapshot = (Snapshot.objects.select_related("host", "host__cluster").filter(host=host)
                    .order_by("-collected_at", "-id").first())
        if snapshot is None:
            raise RefError(f"{ref!r}: host {hostname!r} has no snapshot yet", status=404)
    names = [g.get("name") for g in snapshot.document.get("gpus") or []]
    if gpu not in names:
        have = ", ".join(names) if names else "no GPUs"
        raise RefError(f"{ref!r}: snapshot {snapshot.pk} of {snapshot.host.hostname} has no {gpu} (it has {have})")
    return snapshot, gpu


def path_between_refs(src: str, dst: str, user) -> dict:
    from apps.domain.analysis import path_between

    snap_a, gpu_a = resolve_gpu_ref(src, user)
    snap_b, gpu_b = resolve_gpu_ref(dst, user)
    result = path_between(snap_a.document, gpu_a, snap_b.document, gpu_b)
    return {**result, "src_snapshot": snap_a.pk, "dst_snapshot": snap_b.pk}
