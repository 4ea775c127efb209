"""What a change did to the bandwidth: the expected all-reduce busbw before and after, and each
GPU's GB/s to the network, read from both documents' own figures (``estimate.points`` and
``gpu_nic``: the numbers the host page shows), never computed again.

``bandwidth_change(doc_a, doc_b)``::

    {"points": [{"nodes": 1, "before_gbs": 485.3, "after_gbs": 367.0,
                 "before_algorithm": "NVLS", "after_algorithm": "RING"}, ...],   # every node count either side estimates
     "changed": bool,
     "text": "expected all-reduce busbw at 1 node: 485.3 -> 367.0 GB/s (NVLS -> RING); at 8 nodes: ..." | None}

``gpu_bandwidth_changes(doc_a, doc_b)``: ``[{"gpu", "before_gbs", "after_gbs", "text"}]`` for the GPUs
whose effective GB/s to their NIC changed (the NIC's share counted, PXN's relay figure when
PXN carries the traffic), and the sentences that group them.

>>> pts = lambda v, a: {"estimate": {"points": [{"nodes": 1, "busbw_gbs": v, "algorithm": a}]}}
>>> bandwidth_change(pts(485.3, "NVLS"), pts(367.0, "RING"))["text"]
'expected all-reduce busbw at 1 node: 485.3 -> 367.0 GB/s (NCCL algorithm NVLS -> RING)'
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from apps.domain.compare_attrs import name_ranges
from apps.domain.names import natural_key

__all__ = ["bandwidth_change", "gpu_bandwidth_changes", "effective_gbs", "SENTENCE_NODES"]

SENTENCE_NODES = (1, 8, 64)  # the node counts the sentence names (every one is in ``points``)


def _points(doc: Mapping) -> dict[int, Mapping]:
    return {p["nodes"]: p for p in ((doc.get("estimate") or {}).get("points") or [])
            if isinstance(p, Mapping) and isinstance(p.get("nodes"), int)}


def _gbs(v: Any) -> str:
    return f"{v:.1f} GB/s" if isinstance(v, (int, float)) else "not estimated"


def _phrase(p: Mapping) -> str:
    nodes = f"{p['nodes']} node{'s' if p['nodes'] != 1 else ''}"
    x, y = p["before_gbs"], p["after_gbs"]
    if isinstance(x, (int, float)) and isinstance(y, (int, float)):
        values = f"{x:.1f} -> {y:.1f} GB/s"
    else:
        values = f"{_gbs(x)} -> {_gbs(y)}"
    xa, ya = p["before_algorithm"], p["after_algorithm"]
    algo = (f"NCCL algorithm {xa}" if xa == ya else f"NCCL algorithm {xa or 'none'} -> {ya or 'none'}") if (xa or ya) else ""
    return f"at {nodes}: {values}" + (f" ({algo})" if algo else "")


def bandwidth_change(doc_a: Mapping[str, Any], doc_b: Mapping[str, Any]) -> dict:
    """The estimate points of both documents side by side (see the module docstring); the sentence
    names 1 node, 8 nodes and the largest node count either side estimates."""
    pa, pb = _points(doc_a), _points(doc_b)
    points = []
    for n in sorted(set(pa) | set(pb)):
        x, y = pa.get(n) or {}, pb.get(n) or {}
        points.append({"nodes": n, "before_gbs": x.get("busbw_gbs"), "after_gbs": y.get("busbw_gbs"),
                       "before_algorithm": x.get("algorithm"), "after_algorithm": y.get("algorithm")})
    changed = any((p["before_gbs"], p["before_algorithm"]) != (p["after_gbs"], p["after_algorithm"]) for p in points)
    shown = [p for p in points if p["nodes"] in SENTENCE_NODES or p is points[-1]] if points else []
    text = ("expected all-reduce busbw " + "; ".join(_phrase(p) for p in shown)) if shown else None
    return {"points": points, "changed": changed, "text": text}


def effective_gbs(entry: Mapping | None) -> float | None:
    """A GPU's GB/s to the network from its ``gpu_nic`` entry: the path's figure with the NIC's
    share counted (``bandwidth_gbs``), PXN's relay figure when PXN carries the traffic."""
    if not entry:
        return None
    if entry.get("pxn_via") and isinstance(entry.get("pxn_bandwidth_gbs"), (int, float)):
        return entry["pxn_bandwidth_gbs"]
    v = entry.get("bandwidth_gbs")
    return v if isinstance(v, (int, float)) else None


def gpu_bandwidth_changes(doc_a: Mapping[str, Any], doc_b: Mapping[str, Any]) -> dict:
    """``{"gpus": [{"gpu", "before_gbs", "after_gbs"}], "lines": [str]}``: the GPUs whose effective
    GB/s changed, and one line per (before, after) naming every GPU."""
    ea = {e.get("gpu"): effective_gbs(e) for e in doc_a.get("gpu_nic") or []}
    eb = {e.get("gpu"): effective_gbs(e) for e in doc_b.get("gpu_nic") or []}
    gpus = []
    groups: dict[tuple, list[str]] = defaultdict(list)
    for g in sorted(set(ea) | set(eb), key=lambda x: natural_key(str(x))):
        x, y = ea.get(g), eb.get(g)
        if x == y:
            continue
        gpus.append({"gpu": g, "before_gbs": x, "after_gbs": y})
        groups[(_gbs(x), _gbs(y))].append(g)
    lines = [(f"{names[0]}" if len(names) == 1 else f"{len(names)} GPUs ({name_ranges(names)})")
             + f": {x} -> {y} to the network{' each' if len(names) > 1 else ''}"
             for (x, y), names in groups.items()]
    return {"gpus": gpus, "lines": lines}
