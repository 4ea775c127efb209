"""Words for the facts of a snapshot summary (``apps/domain/analysis.py`` ``summary``): pure functions.

The pages say what is known and what is not: a GPU model the report did not name shows the class
the engine assumed ("unknown (assumed H100-class)"); NIC ports whose state nobody reported (no
``ibstat``) read "state unknown", never "0 Active"; a NIC rate nobody reported reads "rate unknown".
"""

from __future__ import annotations

import re
from typing import Mapping


def assumed_class(summary: Mapping | None) -> str | None:
    """``"H100-class (NVLink4, 18 links per GPU)"`` -> ``"H100-class"``; None when nothing was assumed."""
    text = (summary or {}).get("gpu_model_assumed")
    if not text:
        return None
    return str(text).split(" (", 1)[0].strip() or str(text)


def gpu_model(summary: Mapping | None, column: str = "") -> str:
    """The GPU model, or "unknown (assumed H100-class)", or "unknown"."""
    model = column or (summary or {}).get("gpu_model")
    if model:
        return str(model)
    cls = assumed_class(summary)
    return f"unknown (assumed {cls})" if cls else "unknown"


def nic_state_known(summary: Mapping | None) -> bool:
    """True when some NIC port's state was reported. Documents older than ``nic_state_count``
    are taken as reporting state whenever a port is Active (what they could show)."""
    s = summary or {}
    if "nic_state_count" in s:
        return bool(s.get("nic_state_count"))
    return bool(s.get("active_nic_count"))


def nic_cell(summary: Mapping | None, nic_count: int, active: int) -> str:
    """Cluster table cell: "8 (state unknown)", "12 (9 Active)", "0"."""
    if not nic_count:
        return "0"
    if not nic_state_known(summary):
        return f"{nic_count} (state unknown)"
    return f"{nic_count} ({active} Active)"


def nic_header(summary: Mapping | None) -> str:
    """Host header: "8 NIC ports, state unknown (send ibstat)" or "12 NIC ports, 9 Active"."""
    s = summary or {}
    n = int(s.get("nic_count") or 0)
    ports = f"{n} NIC port{'s' if n != 1 else ''}"
    if not n:
        return "no NIC reported"
    if not nic_state_known(s):
        return f"{ports}, state unknown (send ibstat)"
    return f"{ports}, {int(s.get('active_nic_count') or 0)} Active"


_UNKNOWN_RATE = re.compile(r"(\d+)x NIC(?: (IB|Eth))?(?=,| \(|$)")


def nic_rates(nic_models: str) -> str:
    """The stored NIC summary ("4x 400 Gb/s Eth (1 down), 8x NIC") with "NIC" (no rate reported)
    spelled "rate unknown": "4x 400 Gb/s Eth (1 down), 8x rate unknown".

    >>> nic_rates("4x 400 Gb/s IB (1 down), 2x NIC Eth (1 down)")
    '4x 400 Gb/s IB (1 down), 2x Eth (rate unknown) (1 down)'
    """
    if not nic_models:
        return "-"
    return _UNKNOWN_RATE.sub(lambda m: f"{m.group(1)}x {m.group(2) + ' (rate unknown)' if m.group(2) else 'rate unknown'}",
                             nic_models)


def interconnect(summary: Mapping | None) -> str:
    s = summary or {}
    if s.get("nvswitch"):
        return "NVSwitch"
    if s.get("nvlink"):
        return "NVLink"
    return "PCIe only"


def platform(gpu_count: int, summary: Mapping | None, column_model: str = "",
             assumed_gpu_model: str | None = None, nvlink_class: str | None = None) -> tuple[tuple, str]:
    """(key, label) of a host's platform: same GPU count, same GPU model (named, else the assumed
    class, else the model the engine looked figures up with, else the widest NVLink bundle, else
    at least the same count of CPU NUMA nodes) and the same NVLink / NVSwitch kind."""
    s = summary or {}
    model = column_model or s.get("gpu_model") or ""
    if model:
        model_key, model_label = ("model", model), str(model)
    elif assumed_class(s):
        model_key, model_label = ("class", assumed_class(s)), f"model unknown, assumed {assumed_class(s)}"
    elif assumed_gpu_model:
        model_key, model_label = ("class", assumed_gpu_model), f"model unknown, assumed {assumed_gpu_model}"
    elif nvlink_class:
        model_key, model_label = ("nvlink", nvlink_class), f"model unknown, {nvlink_class} between GPUs"
    else:  # nothing names the GPU: at least the same number of CPU NUMA nodes
        sockets = s.get("sockets")
        model_key = ("unknown", sockets)
        model_label = f"model unknown, {sockets} NUMA node{'s' if sockets != 1 else ''}" if sockets else "model unknown"
    kind = interconnect(s)
    return (gpu_count, model_key, kind), f"{gpu_count}x GPU ({model_label}), {kind}"
