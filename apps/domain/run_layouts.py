"""A run's hosts in their layouts: the layout's GPU for each GPU a run names (``match_gpu``), the
layout cut down to the GPUs that ran ranks (``layout_for_gpus``), and the result's ``hosts``
entries (``matched_hosts``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["match_gpu", "layout_for_gpus", "matched_hosts"]


def _bus_of(bdf: Any) -> int | None:
    try:
        return int(str(bdf).split(":")[-2], 16)
    except (ValueError, IndexError):
        return None


def match_gpu(doc: Mapping, gpu: Mapping) -> str | None:
    """The layout's GPU name (``GPU3``) for a GPU a run names: by PCI address, then by bus number
    (old nccl-tests print the bus byte only), then by CUDA device index; None when none fits."""
    gpus = [g for g in doc.get("gpus") or [] if isinstance(g, Mapping)]
    bdf = str(gpu.get("bdf") or "").lower()
    if bdf:
        for g in gpus:
            if str(g.get("bdf") or "").lower() == bdf:
                return g.get("name")
    bus = gpu.get("pci_bus") if gpu.get("pci_bus") is not None else (_bus_of(bdf) if bdf else None)
    if bus is not None:
        hits = [g for g in gpus if g.get("bdf") and _bus_of(g["bdf"]) == bus]
        if len(hits) == 1:
            return hits[0].get("name")
    if gpu.get("device") is not None:
        for g in gpus:
            if g.get("index") == gpu["device"]:
                return g.get("name")
    return None


def layout_for_gpus(doc: Mapping, gpu_names: list[str]) -> dict:
    """The snapshot document cut down to ``gpu_names`` and the NICs those GPUs use (``gpu_nic``):
    what a run with fewer ranks than the host has GPUs can reach. The document is not changed.

    >>> doc = {"gpus": [{"name": "GPU0"}, {"name": "GPU1"}], "gpu_pairs": [{"a": "GPU0", "b": "GPU1"}],
    ...        "gpu_nic": [{"gpu": "GPU0", "nic": "mlx5_0"}, {"gpu": "GPU1", "nic": "mlx5_1"}],
    ...        "gpu_nic_matrix": [], "nics": [{"name": "mlx5_0", "compute": True},
    ...        {"name": "mlx5_1", "compute": True}], "summary": {"gpu_count": 2}}
    >>> sub = layout_for_gpus(doc, ["GPU0"])
    >>> [g["name"] for g in sub["gpus"]], [n["name"] for n in sub["nics"]], sub["gpu_pairs"]
    (['GPU0'], ['mlx5_0'], [])
    """
    keep = set(gpu_names)
    sub = dict(doc)
    sub["gpus"] = [g for g in doc.get("gpus") or [] if g.get("name") in keep]
    sub["gpu_pairs"] = [p for p in doc.get("gpu_pairs") or [] if p.get("a") in keep and p.get("b") in keep]
    sub["gpu_nic"] = [e for e in doc.get("gpu_nic") or [] if e.get("gpu") in keep]
    sub["gpu_nic_matrix"] = [c for c in doc.get("gpu_nic_matrix") or [] if c.get("gpu") in keep]
    used = {e.get("nic") for e in sub["gpu_nic"]}
    if used:
        sub["nics"] = [n for n in doc.get("nics") or [] if n.get("name") in used or n.get("compute") is False]
    sub["summary"] = {**(doc.get("summary") or {}), "gpu_count": len(sub["gpus"])}
    return sub


def matched_hosts(hosts: list[dict], docs: Mapping[str, Mapping]) -> list[dict]:
    """The result's ``hosts`` entries: each run host with its layout and the layout's GPU names."""
    out = []
    for h in hosts:
        doc = docs.get(h["host"]) if h["host"] else None
        gpus = [{"rank": g["rank"], "device": g["device"], "bdf": g["bdf"],
                 "gpu": match_gpu(doc, g) if doc else None} for g in h["gpus"]]
        out.append({"host": h["host"], "known": doc is not None,
                    "layout_host": doc.get("hostname") if doc else None, "gpus": gpus, "nics": list(h["nics"]),
                    "expected_gbs": None, "limit": None})
    return out
