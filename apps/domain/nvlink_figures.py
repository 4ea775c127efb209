"""A host's NVLink figures as every page states them, read from the document's GPU pairs.

The host drawing labels each GPU's NVLink bundle with its expected GB/s per direction (the link's
spec x the measured NVLink efficiency, ``bandwidth.py``; ``*`` when the per-link rate is assumed
because the GPU model is unknown), and the capacity page states the same figure: both read
:func:`nvlink_bundles`. NCCL's own planning figure (``estimate.b_gpu_gbs``: ring channels x their
per-channel bandwidth, e.g. 12 x 30 = 360 GB/s on an H100 board where the bundle is 396 GB/s) is a
different quantity and is named as NCCL's ring plan wherever it is shown.

>>> hop = {"expected_gbs": 396.0, "spec_gbs": 450.0, "assumed": True}
>>> doc = {"gpu_pairs": [{"a": "GPU0", "b": "GPU1", "path_class": "NV18", "mechanism": "nvswitch",
...                       "hops": [hop, hop]}]}
>>> nvlink_summary(doc)["text"]
'NV18 per GPU into the NVSwitch: 396.0 GB/s per direction* (spec 450.0)'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["nvlink_bundles", "nvlink_summary"]


def _hop_gbs(h: Mapping | None) -> float | None:
    if not h:
        return None
    v = h.get("expected_gbs")
    return v if v is not None else h.get("spec_gbs")


def nvlink_bundles(doc: Mapping[str, Any]) -> tuple[dict, list]:
    """(GPU -> (links, GB/s, assumed) into the NVSwitch, [(a, b, links, GB/s, assumed)] direct
    NVLink pairs), GB/s per direction as the document's hops state them."""
    to_switch: dict[str, tuple] = {}
    direct = []
    for p in doc.get("gpu_pairs") or []:
        m = re.match(r"NV(\d+)$", p.get("path_class") or "")
        links = int(m.group(1)) if m else None
        if p.get("mechanism") == "nvswitch":
            hops = p.get("hops") or []
            for g, h in ((p["a"], hops[0] if hops else None), (p["b"], hops[-1] if hops else None)):
                to_switch.setdefault(g, (links, _hop_gbs(h), bool((h or {}).get("assumed"))))
        elif p.get("mechanism") == "nvlink":
            direct.append((p["a"], p["b"], links, p.get("bottleneck_gbs"),
                           any(h.get("assumed") for h in p.get("hops") or [])))
    return to_switch, direct


def _spec(doc: Mapping) -> float | None:
    for p in doc.get("gpu_pairs") or []:
        if p.get("mechanism") == "nvswitch" and p.get("hops"):
            return p["hops"][0].get("spec_gbs")
    return None


def _range(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.1f}" if lo == hi else f"{lo:.1f}-{hi:.1f}"


def nvlink_summary(doc: Mapping[str, Any]) -> dict | None:
    """``{"kind": "nvswitch"|"nvlink", "gbs_min", "gbs_max", "assumed", "text"}``: the NVLink figure
    of the host drawing in one line; None without NVLink."""
    to_switch, direct = nvlink_bundles(doc)
    if to_switch:
        gbs = [v[1] for v in to_switch.values() if v[1] is not None]
        links = sorted({v[0] for v in to_switch.values() if v[0]})
        assumed = any(v[2] for v in to_switch.values())
        spec = _spec(doc)
        width = "/".join(f"NV{n}" for n in links) or "NVLink"
        text = (f"{width} per GPU into the NVSwitch: {_range(gbs)} GB/s per direction{'*' if assumed else ''}"
                + (f" (spec {spec:.1f})" if spec else "")) if gbs else f"{width} per GPU into the NVSwitch"
        return {"kind": "nvswitch", "gbs_min": min(gbs) if gbs else None, "gbs_max": max(gbs) if gbs else None,
                "assumed": assumed, "text": text}
    if direct:
        gbs = [d[3] for d in direct if d[3] is not None]
        assumed = any(d[4] for d in direct)
        text = (f"{len(direct)} direct NVLink pairs: {_range(gbs)} GB/s per direction per pair"
                f"{'*' if assumed else ''}") if gbs else f"{len(direct)} direct NVLink pairs"
        return {"kind": "nvlink", "gbs_min": min(gbs) if gbs else None, "gbs_max": max(gbs) if gbs else None,
                "assumed": assumed, "text": text}
    return None
