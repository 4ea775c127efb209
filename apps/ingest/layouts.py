"""Layout groups kept up to date at ingest, so the cluster page never reads every document.

The grouping is ``apps.domain.platforms``'s (module docstring there): a *platform* (GPU count,
model, NVLink kind: ``labels.platform``) holds *layouts* (``summary.fingerprint``); its most common
layout is the norm when one layout holds more hosts than any other, every host of another layout
is an odd one out; one host alone has no norm; a tie is "no majority". Here each (cluster,
platform, layout) is a :class:`LayoutGroup` row with its host count, status, page number
(``position``) and ``reference`` (the snapshot its hosts are compared with: the newest snapshot of
the norm's first host by name), and each host points at its newest snapshot and its group.

``host_changed(host_id)`` is called once per stored outcome (``processing._store_outcome``: a new
snapshot, a rebuild, a failure, an unchanged re-report): an unchanged re-report costs one small
query (the host and its newest snapshot, joined); a new snapshot of the same layout moves nothing;
a new layout moves the host between groups and recounts its platform (one GROUP BY over the
platform's hosts) under a lock on the cluster row, naming the platform from the document the
caller just wrote (``known``) rather than reading it back. What an odd host's layout differs in
(``compare_summary``, two documents) is computed for that host at ingest and, when the norm
changed since, for the hosts a page shows (``refresh_lines``): never for the whole fleet at once;
a host compared with no reference (a norm, a host alone) only records its own snapshot's key.

``refresh_cluster(cluster)`` recomputes a cluster from its snapshots (``manage.py refresh_layouts``;
the cluster page runs it once for hosts stored before these columns existed).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import NamedTuple

from django.db import transaction
from django.db.models import Count, Exists, Min, OuterRef, Q

from apps.domain.compare import short_summary
from apps.domain import platforms
from apps.ingest.models import Cluster, Host, LayoutGroup, Snapshot
from apps.ingest.selectors import latest_of_each_host

NORM, ODD, ALONE, NO_MAJORITY = platforms.NORM, platforms.ODD, platforms.ALONE, platforms.NO_MAJORITY
MAX_LINES = 5  # differences kept per host, most important first
_ORDER = {NORM: 0, NO_MAJORITY: 1, ALONE: 2, ODD: 3}
_ROW = ("id", "host_id", "collected_at", "built_at", "fingerprint", "gpu_count", "gpu_model")
_HOST_ROW = ("id", "cluster_id", "latest_snapshot_id", "layout_id", "layout_compared")


# --- what names a platform, read without the whole document ---------------------------------------


def snapshot_facts(snapshot_ids: Iterable[int]) -> dict[int, dict]:
    """Snapshot id -> {"summary", "assumed_gpu_model", "nvlink_class"} without loading whole documents.

    ``nvlink_class`` (the widest NV# bundle between two GPUs, e.g. "NV12") is read only for
    snapshots whose GPU model is neither named nor assumed but which have NVLink.
    """
    out: dict[int, dict] = {}
    rows = Snapshot.objects.filter(pk__in=list(snapshot_ids)).values_list(
        "pk", "document__summary", "document__graph__assumed_gpu_model")
    for pk, summary, assumed in rows:
        out[pk] = {"summary": summary if isinstance(summary, dict) else {}, "assumed_gpu_model": assumed,
                   "nvlink_class": None}
    need = [pk for pk, f in out.items() if _needs_nvlink_class(f)]
    if need:
        for pk, pairs in Snapshot.objects.filter(pk__in=need).values_list("pk", "document__gpu_pairs"):
            out[pk]["nvlink_class"] = _nvlink_class(pairs)
    return out


def document_facts(document: dict) -> dict:
    """``snapshot_facts`` of a snapshot whose document is at hand (the one just written at ingest)."""
    summary = document.get("summary")
    graph = document.get("graph")
    facts = {"summary": summary if isinstance(summary, dict) else {},
             "assumed_gpu_model": graph.get("assumed_gpu_model") if isinstance(graph, dict) else None,
             "nvlink_class": None}
    if _needs_nvlink_class(facts):
        facts["nvlink_class"] = _nvlink_class(document.get("gpu_pairs"))
    return facts


def _needs_nvlink_class(facts: dict) -> bool:
    summary = facts["summary"]
    return bool(summary.get("nvlink") and not summary.get("gpu_model") and not summary.get("gpu_model_assumed")
                and not facts["assumed_gpu_model"])


def _nvlink_class(pairs) -> str | None:
    widths = [int(p["path_class"][2:]) for p in pairs or []
              if str(p.get("path_class") or "").startswith("NV") and p["path_class"][2:].isdigit()]
    return f"NV{max(widths)}" if widths else None


def layout_key(s: Snapshot, facts: dict | None) -> tuple[str, str, str]:
    """(platform key as JSON text, platform label, layout key) of snapshot row ``s``."""
    key, label = platforms.platform_of(s, facts)
    return json.dumps(key, default=str), label, (s.fingerprint or f"unknown-{s.pk}")[:140]


def _version(s: Snapshot | None) -> str:
    return f"{s.pk}:{s.built_at.timestamp():.6f}" if s is not None and s.built_at else "-"


def _compared_key(ref: Snapshot | None, s: Snapshot | None) -> str:
    return f"{_version(ref)}/{_version(s)}"


def _newest(host_id: int) -> tuple[Host | None, Snapshot | None]:
    """The host (``_HOST_ROW``) and its newest snapshot (``_ROW``), in one statement when it has one."""
    latest = (Snapshot.objects.filter(host_id=host_id).order_by("-collected_at", "-id").select_related("host")
              .only(*_ROW, *(f"host__{f}" for f in _HOST_ROW)).first())
    if latest is not None:
        return latest.host, latest
    return Host.objects.filter(pk=host_id).only(*_HOST_ROW).order_by().first(), None  # no join for the ordering


# --- at ingest --------------------------------------------------------------------------------------


def host_changed(host_id: int, known: dict[int, dict] | None = None) -> None:
    """Bring the host's newest snapshot, layout group, its platform's statuses and its own
    differences up to date (module docstring). Nothing is written for an unchanged re-report;
    a new snapshot of the layout the host already had recounts nothing unless its previous
    snapshot was a group's reference. ``known``: {snapshot id: ``document_facts``} of snapshots
    whose documents the caller holds (the one it just wrote), so they are not read back."""
    host, latest = _newest(host_id)
    if host is None:
        return
    if latest is not None and host.latest_snapshot_id == latest.pk and host.layout_id is not None \
            and host.layout_compared.endswith("/" + _version(latest)):
        return  # the same snapshot as when its layout was last placed
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(pk=host.cluster_id).first()  # one layout writer per cluster
        old = LayoutGroup.objects.filter(pk=host.layout_id).first() if host.layout_id else None
        group = None
        if latest is not None:
            facts = (known or {}).get(latest.pk)
            if facts is None:
                facts = snapshot_facts([latest.pk]).get(latest.pk)
            pkey, label, fp = layout_key(latest, facts)
            group, _ = LayoutGroup.objects.get_or_create(cluster_id=host.cluster_id, platform_key=pkey,
                                                         fingerprint=fp, defaults={"platform": label})
        Host.objects.filter(pk=host_id).update(latest_snapshot=latest, layout=group)
        previous = host.latest_snapshot_id  # None also when it was deleted (a reference with it)
        stays = (old is not None and group is not None and old.pk == group.pk and previous is not None
                 and (previous == latest.pk or not LayoutGroup.objects.filter(reference_id=previous).exists()))
        references = {group.pk: group.reference_id} if group is not None else {}
        if not stays:
            platforms = {g.platform_key for g in (old, group) if g is not None}
            counts = [refresh_platform(host.cluster_id, pkey) for pkey in sorted(platforms)]
            for count in counts:
                references.update(count.references)
            if any(count.reordered for count in counts):
                renumber(host.cluster_id)
    if latest is not None and group is not None and references.get(group.pk) is None:
        # a norm, a host alone or the first of a tie: compared with nothing, so its key is its own
        # snapshot's (refresh_lines would read the host, its group and their snapshots back to say so)
        key = _compared_key(None, latest)
        if host.layout_compared != key:
            Host.objects.filter(pk=host_id).update(layout_lines=None, layout_compared=key)
        return
    host = with_layout(Host.objects.filter(pk=host_id)).order_by().first()
    if host is not None:
        refresh_lines([host])


def with_layout(hosts):
    """``hosts`` (a Host queryset) with their newest snapshot, layout group and its reference
    snapshot joined, documents left out."""
    return hosts.select_related("latest_snapshot", "layout", "layout__reference__host").defer(
        "latest_snapshot__document", "latest_snapshot__nic_roles", "layout__reference__document",
        "layout__reference__nic_roles")


class Recount(NamedTuple):
    reordered: bool  # the page numbers may have to move (``renumber``)
    references: dict[int, int | None]  # each remaining group's reference snapshot id


def refresh_platform(cluster_id: int, platform_key: str) -> Recount:
    """Recount the layout groups of one platform and give each its status and reference
    (``platforms.group_hosts``'s rules); groups left without hosts are deleted, groups whose figures
    did not change are not written. ``reordered`` when the page numbers may have to move: a group
    appeared or went, or the platform's groups changed order."""
    groups = list(LayoutGroup.objects.filter(cluster_id=cluster_id, platform_key=platform_key)
                  .annotate(n=Count("hosts"), first=Min("hosts__hostname")))
    empty = [g.pk for g in groups if not g.n]
    if empty:
        LayoutGroup.objects.filter(pk__in=empty).delete()
    live = sorted((g for g in groups if g.n), key=lambda g: (-g.n, g.first))
    if not live:
        return Recount(bool(empty), {})
    size = sum(g.n for g in live)
    norm = live[0]
    tie = len(live) > 1 and live[1].n == norm.n
    ref_id = None
    if size > 1 and len(live) > 1:
        ref_id = (Host.objects.filter(layout=norm, hostname=norm.first).order_by()
                  .values_list("latest_snapshot_id", flat=True).first())
    fields = ("host_count", "platform_size", "status", "reference_id")
    order_before = sorted(live, key=_page_order)
    changed = []
    for g in live:
        before = tuple(getattr(g, f) for f in fields)
        g.host_count, g.platform_size = g.n, size
        if size == 1:
            g.status, g.reference_id = ALONE, None
        elif tie:
            g.status, g.reference_id = NO_MAJORITY, (None if g is norm else ref_id)
        else:
            g.status, g.reference_id = (NORM, None) if g is norm else (ODD, ref_id)
        if tuple(getattr(g, f) for f in fields) != before:
            changed.append(g)
    if len(changed) == 1:  # a host joined or left one group of a one-group platform: a plain UPDATE
        g = changed[0]
        LayoutGroup.objects.filter(pk=g.pk).update(host_count=g.host_count, platform_size=g.platform_size,
                                                   status=g.status, reference_id=g.reference_id)
    elif changed:
        LayoutGroup.objects.bulk_update(changed, ["host_count", "platform_size", "status", "reference"])
    reordered = bool(empty) or any(not g.position for g in live) or sorted(live, key=_page_order) != order_before
    return Recount(reordered, {g.pk: g.reference_id for g in live})


def _page_order(g: LayoutGroup) -> tuple:
    """Where a group stands on the cluster page: platforms by name, then norm, no majority, alone,
    odd, larger groups first (the order the page always listed them in)."""
    return g.platform, _ORDER.get(g.status, 9), -g.host_count, g.fingerprint


def renumber(cluster_id: int) -> None:
    """Page numbers of the cluster's groups, in ``_page_order``."""
    groups = sorted(LayoutGroup.objects.filter(cluster_id=cluster_id), key=_page_order)
    moved = []
    for i, g in enumerate(groups, start=1):
        if g.position != i:
            g.position = i
            moved.append(g)
    if moved:
        LayoutGroup.objects.bulk_update(moved, ["position"])


def refresh_lines(hosts: list[Host]) -> None:
    """What each host's layout differs in from its group's reference, computed only for the hosts
    whose stored lines were made against other snapshots (``platforms.differences``: two documents a
    host, read in batches, cached in the process). ``hosts`` come with ``latest_snapshot``,
    ``layout`` and ``layout__reference`` (``with_layout``)."""
    jobs, stale = [], []
    for h in hosts:
        g = h.layout if h.layout_id else None
        own = h.latest_snapshot if h.latest_snapshot_id else None
        ref = g.reference if g is not None and g.reference_id else None
        key = _compared_key(ref, own)
        if h.layout_compared == key:
            continue
        stale.append((h, ref, own, key))
        if ref is not None and own is not None and ref.pk != own.pk:
            jobs.append((ref, own))
    if not stale:
        return
    diffs = platforms.differences(jobs, lambda pks: dict(Snapshot.objects.filter(pk__in=pks)
                                                      .values_list("pk", "document")))
    for h, ref, own, key in stale:
        lines = None
        if ref is not None and own is not None and ref.pk != own.pk:
            lines = short_summary({"summary": diffs[(ref.pk, own.pk)]}, MAX_LINES)
        h.layout_lines, h.layout_compared = lines, key
    if len(stale) == 1:  # at ingest: one statement, no transaction of its own
        h = stale[0][0]
        Host.objects.filter(pk=h.pk).update(layout_lines=h.layout_lines, layout_compared=h.layout_compared)
    else:
        Host.objects.bulk_update([h for h, *_ in stale], ["layout_lines", "layout_compared"])


# --- hosts stored before, and a whole cluster --------------------------------------------------------


def needs_refresh(cluster: Cluster) -> bool:
    """Whether some host of ``cluster`` has a snapshot but no layout (stored before these columns)."""
    has = Snapshot.objects.filter(host_id=OuterRef("pk"))
    return Host.objects.filter(cluster=cluster).filter(Q(layout__isnull=True) | Q(latest_snapshot__isnull=True)) \
        .filter(Exists(has)).exists()


def refresh_cluster(cluster: Cluster) -> int:
    """Place every host of ``cluster`` from its snapshots (a backfill); returns the hosts placed.
    Facts are read once per layout (hosts of one fingerprint share what names a platform)."""
    latest = {s.host_id: s for s in latest_of_each_host().filter(host__cluster=cluster).only(*_ROW)}
    rep: dict[str, int] = {}
    for s in latest.values():
        if s.fingerprint:
            rep.setdefault(s.fingerprint, s.pk)
    facts = snapshot_facts(set(rep.values()) | {s.pk for s in latest.values() if not s.fingerprint})
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(pk=cluster.pk).first()
        keys = {hid: layout_key(s, facts.get(rep.get(s.fingerprint, s.pk))) for hid, s in latest.items()}
        known = {(g.platform_key, g.fingerprint): g for g in LayoutGroup.objects.filter(cluster=cluster)}
        for pkey, label, fp in set(keys.values()):
            if (pkey, fp) not in known:
                known[(pkey, fp)] = LayoutGroup.objects.create(cluster=cluster, platform_key=pkey, fingerprint=fp,
                                                               platform=label)
        hosts = list(Host.objects.filter(cluster=cluster).only("id", "latest_snapshot_id", "layout_id"))
        for h in hosts:
            s = latest.get(h.pk)
            h.latest_snapshot_id = s.pk if s else None
            h.layout_id = known[(keys[h.pk][0], keys[h.pk][2])].pk if s else None
        Host.objects.bulk_update(hosts, ["latest_snapshot", "layout"], batch_size=2000)
        for pkey in sorted({g.platform_key for g in known.values()}):
            refresh_platform(cluster.pk, pkey)
        renumber(cluster.pk)
    return len(latest)
