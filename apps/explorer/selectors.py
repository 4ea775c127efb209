"""Read-only helpers of the explorer pages on top of ``apps.ingest.selectors``."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.explorer.models import ShareLink
from apps.ingest.models import Host, Snapshot

SEVERITY_ORDER = {"CRIT": 0, "HIGH": 1, "MED": 2, "LOW": 3, "INFO": 4}


def snapshot_with_host(snapshot_id: int) -> Snapshot | None:
    return (Snapshot.objects.select_related("host", "host__cluster").defer("document", "upload__raw")
            .filter(pk=snapshot_id).first())


def host_snapshot(host: Host, snapshot_id: int | None) -> Snapshot | None:
    """The snapshot ``snapshot_id`` of ``host``, or its newest one (document deferred)."""
    rows = Snapshot.objects.filter(host=host).defer("document").order_by("-collected_at", "-id")
    if snapshot_id is not None:
        return rows.filter(pk=snapshot_id).first()
    return rows.first()


def previous_snapshot(snapshot: Snapshot) -> Snapshot | None:
    return (Snapshot.objects.filter(host_id=snapshot.host_id).defer("document")
            .exclude(pk=snapshot.pk).filter(collected_at__lte=snapshot.collected_at)
            .order_by("-collected_at", "-id").first())


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


def latest_of_each_host() -> QuerySet[Snapshot]:
    """The newest snapshot of each host (by collected_at, then id), as one window query."""
    from django.db.models import F, Window
    from django.db.models.functions import RowNumber

    return Snapshot.objects.annotate(newest_rank=Window(
        RowNumber(), partition_by=[F("host_id")], order_by=[F("collected_at").desc(), F("id").desc()])
    ).filter(newest_rank=1)


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
    """Snapshot id -> {"summary", "assumed_gpu_model", "nvlink_class"} without loading whole documents.

    ``nvlink_class`` (the widest NV# bundle between two GPUs, e.g. "NV12") is read only for
    snapshots whose GPU model is neither named nor assumed but which have NVLink.
    """
    out: dict[int, dict] = {}
    rows = Snapshot.objects.filter(pk__in=snapshot_ids).values_list(
        "pk", "document__summary", "document__graph__assumed_gpu_model")
    for pk, summary, assumed in rows:
        out[pk] = {"summary": summary if isinstance(summary, dict) else {}, "assumed_gpu_model": assumed,
                   "nvlink_class": None}
    need = [pk for pk, f in out.items() if f["summary"].get("nvlink") and not f["summary"].get("gpu_model")
            and not f["summary"].get("gpu_model_assumed") and not f["assumed_gpu_model"]]
    if need:
        for pk, pairs in Snapshot.objects.filter(pk__in=need).values_list("pk", "document__gpu_pairs"):
            widths = [int(p["path_class"][2:]) for p in pairs or []
                      if str(p.get("path_class") or "").startswith("NV") and p["path_class"][2:].isdigit()]
            out[pk]["nvlink_class"] = f"NV{max(widths)}" if widths else None
    return out


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
