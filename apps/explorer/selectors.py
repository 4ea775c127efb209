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


def latest_snapshots_everywhere(limit: int = 2000) -> list[Snapshot]:
    """The newest snapshot of every host of every cluster (pickers of the path and capacity pages)."""
    from django.db.models import OuterRef, Subquery

    newest = Snapshot.objects.filter(host=OuterRef("pk")).order_by("-collected_at", "-id").values("id")[:1]
    ids = Host.objects.annotate(latest=Subquery(newest)).exclude(latest__isnull=True).values_list("latest", flat=True)
    return list(Snapshot.objects.filter(pk__in=list(ids)[:limit]).select_related("host", "host__cluster")
                .defer("document").order_by("host__cluster__name", "host__hostname"))


def gpu_names(snapshot_ids: list[int]) -> dict[int, list[str]]:
    """Snapshot id -> its GPU names, read from the documents (for the path pickers)."""
    out: dict[int, list[str]] = {}
    for pk, doc in Snapshot.objects.filter(pk__in=snapshot_ids).values_list("pk", "document"):
        out[pk] = [g.get("name") for g in (doc or {}).get("gpus") or []]
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
