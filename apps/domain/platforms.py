"""Group a cluster's hosts by identical topology and name what makes the odd ones out differ (plain
Python: snapshot rows and documents in, groups out; ``apps.ingest.layouts`` keeps them at ingest).

A *platform* is the same GPU count, the same GPU model (named by the report, else the class the
engine assumed, else the widest NVLink bundle between GPUs) and the same NVLink / NVSwitch kind:
an 8-GPU H100 board and an 8-GPU V100 board are different platforms, never each other's norm.

Within a platform, hosts are grouped by ``summary.fingerprint`` (GPU count/model, NIC
count/rates/states, link classes and widths): a *layout*. The platform's most common layout is
its norm when one layout holds more hosts than any other; every host of another layout of that
platform is an odd one out, and ``compare_docs(norm, host)`` names what differs, most important
first and capped (``short_summary``). A platform with one host has no norm; a platform whose
layouts tie has no majority, and neither is flagged.

Only the documents of odd hosts and one representative per platform are read, in batches
(``load_docs``), and only the summary sentences are computed (``compare_summary``). Each odd
host's sentences are cached in the process, keyed by both snapshots' ids and build times, so a
cluster page shown again only compares the hosts that reported since. The platform of every host
comes from ``facts`` (summary and assumed model, read without the whole document).
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from apps.domain.compare import compare_summary, short_summary
from apps.domain import labels

NORM, ODD, ALONE, NO_MAJORITY = "norm", "odd", "alone", "no-majority"


@dataclass
class HostGroup:
    fingerprint: str
    platform: str
    platform_key: tuple = ()
    snapshots: list = field(default_factory=list)
    status: str = NORM  # NORM, ODD, ALONE (one host in its platform) or NO_MAJORITY

    @property
    def is_norm(self) -> bool:
        return self.status == NORM


@dataclass
class FleetView:
    groups: list[HostGroup]
    odd: dict[int, list[str]]  # snapshot id -> differences from the platform's norm, most important first
    norm_of: dict[int, int]  # snapshot id -> snapshot id of the norm representative
    status: dict[int, str] = field(default_factory=dict)  # snapshot id -> its group's status
    platform_size: dict[int, int] = field(default_factory=dict)  # snapshot id -> hosts in its platform
    # snapshot id -> differences from the first host of its platform when no layout has a majority
    # (shown, not flagged); norm_of then names that host
    differs: dict[int, list[str]] = field(default_factory=dict)


def platform_of(s, facts: Mapping | None = None) -> tuple[tuple, str]:
    """(key, label) of snapshot row ``s``; ``facts``: {"summary", "assumed_gpu_model", "nvlink_class"}."""
    f = facts or {}
    return labels.platform(s.gpu_count, f.get("summary"), s.gpu_model, f.get("assumed_gpu_model"),
                           f.get("nvlink_class"))


# (reference id, its build time, snapshot id, its build time) -> compare_summary lines
_DIFFS: dict[tuple, list[str]] = {}
_DIFFS_MAX = 50_000
_DIFFS_LOCK = threading.Lock()
BATCH = 100  # documents read per query


def _version(s) -> tuple:
    return (s.pk, getattr(s, "built_at", None))


def clear_cache() -> None:
    with _DIFFS_LOCK:
        _DIFFS.clear()


def differences(jobs: Sequence[tuple], load_docs: Callable[[list[int]], Mapping[int, dict]]) -> dict[tuple, list[str]]:
    """``jobs``: (reference row, snapshot row) pairs -> {(ref id, id): compare_summary lines}.
    Cached pairs cost nothing; the others read their documents ``BATCH`` at a time."""
    out: dict[tuple, list[str]] = {}
    todo = []
    for ref, s in jobs:
        key = _version(ref) + _version(s)
        with _DIFFS_LOCK:
            hit = _DIFFS.get(key)
        if hit is not None:
            out[(ref.pk, s.pk)] = hit
        else:
            todo.append((ref, s, key))
    refs: dict[int, dict] = {}
    for i in range(0, len(todo), BATCH):
        chunk = todo[i:i + BATCH]
        need = {s.pk for _, s, _ in chunk} | {r.pk for r, _, _ in chunk if r.pk not in refs}
        docs = load_docs(sorted(need))
        for r, _, _ in chunk:
            refs.setdefault(r.pk, docs.get(r.pk) or {})
        for ref, s, key in chunk:
            lines = compare_summary(refs[ref.pk], docs.get(s.pk) or {})
            out[(ref.pk, s.pk)] = lines
            with _DIFFS_LOCK:
                if len(_DIFFS) >= _DIFFS_MAX:
                    _DIFFS.clear()
                _DIFFS[key] = lines
    return out


def group_hosts(snapshots: Sequence, load_docs: Callable[[list[int]], Mapping[int, dict]],
                facts: Mapping[int, Mapping] | None = None, max_lines: int = 5) -> FleetView:
    """``snapshots``: latest Snapshot rows (document deferred); ``load_docs(ids)`` returns
    {id: document}; ``facts``: snapshot id -> {"summary", "assumed_gpu_model", "nvlink_class"}
    (see ``platform_of``)."""
    facts = facts or {}
    by_fp: dict[tuple, HostGroup] = {}
    for s in snapshots:
        key, label = platform_of(s, facts.get(s.pk))
        fp = s.fingerprint or f"unknown-{s.pk}"
        g = by_fp.setdefault((key, fp), HostGroup(s.fingerprint, label, key))
        g.snapshots.append(s)
    by_platform: dict[tuple, list[HostGroup]] = defaultdict(list)
    for g in by_fp.values():
        by_platform[g.platform_key].append(g)
    view = FleetView(groups=[], odd={}, norm_of={})
    jobs: list[tuple] = []  # (reference, snapshot, ODD or NO_MAJORITY)
    for groups in by_platform.values():
        groups.sort(key=lambda g: (-len(g.snapshots), g.snapshots[0].host.hostname))
        size = sum(len(g.snapshots) for g in groups)
        norm = groups[0]
        ref = norm.snapshots[0]
        if size == 1:
            norm.status = ALONE
        elif len(groups) > 1 and len(groups[1].snapshots) == len(norm.snapshots):
            for g in groups:
                g.status = NO_MAJORITY
                jobs += [(ref, s, NO_MAJORITY) for s in (g.snapshots if g is not norm else ())]
        else:
            norm.status = NORM
            for g in groups[1:]:
                g.status = ODD
                jobs += [(ref, s, ODD) for s in g.snapshots]
        for g in groups:
            for s in g.snapshots:
                view.status[s.pk] = g.status
                view.platform_size[s.pk] = size
    diffs = differences([(r, s) for r, s, _ in jobs], load_docs)
    for ref, s, kind in jobs:
        lines = short_summary({"summary": diffs[(ref.pk, s.pk)]}, max_lines)
        if kind == ODD:
            view.odd[s.pk] = lines or ["layout differs in detail (see compare)"]
        else:
            view.differs[s.pk] = lines
        view.norm_of[s.pk] = ref.pk
    order = {NORM: 0, NO_MAJORITY: 1, ALONE: 2, ODD: 3}
    view.groups = sorted(by_fp.values(), key=lambda g: (g.platform, order[g.status], -len(g.snapshots)))
    return view


def severity_totals(snapshots: Sequence) -> Counter:
    total: Counter = Counter()
    for s in snapshots:
        total.update(s.severity_counts)
    return total
