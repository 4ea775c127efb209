"""The topo -m stage: the matrix labels, normalised cells, legend era, GPU affinity rows and the
NIC label -> HCA name map (domain.md 4.2 join 3)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from apps.domain.assemble.report import Report, get_field, get_list
from apps.domain.names import normalize_token

__all__ = ["Topo", "read_topo", "read_matrix"]


@dataclass(frozen=True)


class Topo:
    """What ``nvidia-smi topo -m`` says: labels in matrix order, ``{row: {col: token}}`` with
    tokens normalised, whether the legend is a legacy one (SOC era: no NODE, so a PHB may mean
    today's PHB or NODE), the parser's GPU rows (affinity columns) and NIC label -> HCA name
    (None when the NIC Legend is missing)."""

    labels: tuple[str, ...] = ()
    matrix: dict = field(default_factory=dict)
    legacy: bool = False
    gpu_rows: dict[str, Any] = field(default_factory=dict)
    nic_map: dict[str, str | None] = field(default_factory=dict)


def read_topo(rep: Report) -> Topo:
    t = rep.results.get("nvidia_smi_topo")
    if not t:
        return Topo()
    matrix = get_field(t, "matrix", default={}) or {}
    norm = _normalised(matrix)
    labels = tuple(get_list(t, "columns")) or tuple(matrix.keys())
    tokens = {tok for cols in norm.values() for tok in cols.values() if tok}
    legend = str(get_field(t, "legend", default="")).lower()
    legacy = "NODE" not in tokens and (
        legend in ("nvlink_legacy", "oldest")
        or any(str(tok).strip().upper() == "SOC" for cols in matrix.values() for tok in cols.values())
    )
    gpu_rows = {get_field(g, "name") or f"GPU{get_field(g, 'index')}": g for g in get_list(t, "gpus")}
    nic_map: dict[str, str | None] = {}
    for n in get_list(t, "nics"):
        label = get_field(n, "name")
        if label:
            nic_map[label] = get_field(n, "device") or (label if not re.fullmatch(r"NIC\d+", label) else None)
    for w in get_list(t, "warnings"):
        rep.warnings.append(f"nvidia_smi_topo: {w}")
    return Topo(labels, norm, legacy, gpu_rows, nic_map)


def read_matrix(rep: Report, kind: str) -> dict:
    """The normalised matrix of a companion section (``topo -mp``, ``topo -p2p``); {} without it."""
    t = rep.results.get(kind)
    if not t:
        return {}
    return _normalised(get_field(t, "matrix", default={}) or {})


def _normalised(matrix: dict) -> dict:
    return {row: {col: normalize_token(tok) for col, tok in cols.items()} for row, cols in matrix.items()}
