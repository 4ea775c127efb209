"""Group a cluster's hosts by identical topology and name what makes the odd ones out differ.

Hosts are grouped by ``summary.fingerprint`` (GPU count/model, NIC count/rates/states, link
classes and widths). Within a *platform* (same GPU count and model) the largest group is the
norm; every other host of that platform is an odd one out, and ``compare_docs(norm, host)``
names what differs (a GPU at x8, an HCA Down, NICs in another order, a different NIC count).
Only the documents of odd hosts and one representative per platform are loaded.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Sequence

from apps.domain.compare import compare_docs


@dataclass
class HostGroup:
    fingerprint: str
    platform: str
    snapshots: list = field(default_factory=list)
    is_norm: bool = False


@dataclass
class FleetView:
    groups: list[HostGroup]
    odd: dict[int, list[str]]  # snapshot id -> differences from the platform's norm
    norm_of: dict[int, int]  # snapshot id -> snapshot id of the norm representative


def platform_of(s) -> str:
    return f"{s.gpu_count}x {s.gpu_model or 'GPU (model unknown)'}"


def group_hosts(snapshots: Sequence, load_doc: Callable[[int], dict], max_lines: int = 6) -> FleetView:
    """``snapshots``: latest Snapshot rows (document deferred); ``load_doc(id)`` returns a document."""
    by_fp: dict[str, HostGroup] = {}
    for s in snapshots:
        g = by_fp.setdefault(s.fingerprint or f"unknown-{s.pk}", HostGroup(s.fingerprint, platform_of(s)))
        g.snapshots.append(s)
    by_platform: dict[str, list[HostGroup]] = defaultdict(list)
    for g in by_fp.values():
        by_platform[g.platform].append(g)
    odd: dict[int, list[str]] = {}
    norm_of: dict[int, int] = {}
    for platform, groups in by_platform.items():
        groups.sort(key=lambda g: (-len(g.snapshots), g.snapshots[0].host.hostname))
        norm = groups[0]
        if len(norm.snapshots) > 1 or len(groups) == 1:
            norm.is_norm = True
        if len(groups) == 1:
            continue
        ref = norm.snapshots[0]
        ref_doc = load_doc(ref.pk)
        for g in groups[1:] if norm.is_norm else groups:
            for s in g.snapshots:
                if s.pk == ref.pk:
                    continue
                diff = compare_docs(ref_doc, load_doc(s.pk))
                lines = diff["summary"] or ["layout differs in detail (see compare)"]
                odd[s.pk] = lines[:max_lines] + ([f"... and {len(lines) - max_lines} more"]
                                                  if len(lines) > max_lines else [])
                norm_of[s.pk] = ref.pk
    ordered = sorted(by_fp.values(), key=lambda g: (not g.is_norm, -len(g.snapshots), g.platform))
    return FleetView(groups=ordered, odd=odd, norm_of=norm_of)


def severity_totals(snapshots: Sequence) -> Counter:
    total: Counter = Counter()
    for s in snapshots:
        total.update(s.severity_counts)
    return total
