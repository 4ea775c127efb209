"""What the compare pages need besides the diff itself: the norm host of a host's layout group,
another host as the reference, and the moments the cluster compare opens on."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Exists, OuterRef
from django.utils import timezone

from apps.domain import platforms
from apps.explorer import selectors as ex
from apps.ingest.models import Cluster, Host, Snapshot

STATUS_WORDS = {
    platforms.ODD: "an odd one out: its layout differs from the norm of its platform",
    platforms.NORM: "this host has its platform's norm layout",
    platforms.NO_MAJORITY: "no layout of its platform has a majority: the first host of the platform stands in",
}


def layout_norm(cluster: Cluster, host: Host) -> dict | None:
    """The host to compare ``host`` with: the norm host of its platform (``platforms.group_hosts``,
    as the cluster page groups hosts), another host of the norm layout when ``host`` is the norm
    host itself, or the platform's first host when no layout has a majority.

    ``{"host": hostname, "snapshot": id, "status": fleet status, "words": str, "lines": [str]}``;
    None when the host is alone in its platform (nothing to compare it with) or has no snapshot."""
    snaps = ex.cluster_snapshots(cluster)
    me = next((s for s in snaps if s.host_id == host.pk), None)
    if me is None:
        return None
    view = platforms.group_hosts(snaps, ex.snapshot_docs, ex.layout_facts(snaps))
    status = view.status.get(me.pk)
    ref_pk = view.norm_of.get(me.pk)
    if ref_pk is None and status == platforms.NORM:
        group = next(g for g in view.groups if any(s.pk == me.pk for s in g.snapshots))
        ref_pk = next((s.pk for s in group.snapshots if s.pk != me.pk), None)
    if ref_pk is None:
        return None
    ref = next(s for s in snaps if s.pk == ref_pk)
    return {"host": ref.host.hostname, "snapshot": ref.pk, "status": status, "words": STATUS_WORDS.get(status, ""),
            "lines": view.odd.get(me.pk) or view.differs.get(me.pk) or []}


def reference_host(cluster: Cluster, hostname: str | None) -> Host | None:
    """The host named by ``?with=`` in the same cluster (None when not given or unknown)."""
    if not hostname:
        return None
    return Host.objects.filter(cluster=cluster, hostname=hostname.strip()).first()


def compare_default(c: Cluster) -> tuple[datetime | None, Snapshot | None]:
    """The moments a first open compares: "before" = just before the cluster's last change, "after"
    = now; with the snapshot that made that change, for the page to name. The last change is the
    newest snapshot that replaced an earlier one of its host (a host reporting a new layout), else,
    while no host has two snapshots, the newest snapshot (a host joining). (None, None) while the
    cluster has fewer than two distinct snapshot times: nothing to compare."""
    snaps = Snapshot.objects.filter(host__cluster=c).select_related("host").order_by("-collected_at", "-id")
    earlier = Snapshot.objects.filter(host=OuterRef("host"), collected_at__lt=OuterRef("collected_at"))
    latest = snaps.filter(Exists(earlier)).first() or snaps.first()
    if latest is None:
        return None, None
    before = snaps.filter(collected_at__lt=latest.collected_at).values_list("collected_at", flat=True).first()
    return (before, latest) if before is not None else (None, None)


def newest_snapshot_time(c: Cluster) -> datetime | None:
    return Snapshot.objects.filter(host__cluster=c).order_by("-collected_at").values_list("collected_at", flat=True).first()


def moment_value(moment: datetime) -> str:
    """A moment as a ``datetime-local`` input holds it, to the second, in the site's time zone (UTC)."""
    return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M:%S")
