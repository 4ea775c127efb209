"""Report builders for the ingest tests, from real captures in tests/ingest/../../apps/ingest/demo."""

from __future__ import annotations

import copy
import json
from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "apps" / "ingest" / "demo" / "captures"
TOPO_H100 = DEMO / "topo" / "sglang_30401_8xh100_hbm3_8nic.txt"
TOPO_P40 = DEMO / "topo" / "paddle_8xp40_pcie_switches_soc.txt"
IBSTAT_DOWN = DEMO / "ibstat" / "gpud_h100_12ca_roce_3_down_disabled.txt"
TOPO_12NIC = DEMO / "topo" / "tpgds_aihub0007_8xh_nv18_12nic_numa_off_clean.txt"


def report(hostname: str = "h100-a01", topo: Path = TOPO_H100, **extra) -> dict:
    data = {
        "schema": "topoweb.report/1",
        "hostname": hostname,
        "collected_at": "2025-01-31T12:00:00Z",
        "agent_version": "test",
        "meta": {"kernel": "6.8.0", "driver": "570.133.20", "root": False},
        "sections": {"nvidia_smi_topo": topo.read_text()},
        "unavailable": {"ibstat": "not installed"},
    }
    data.update(extra)
    return data


def body(data: dict) -> bytes:
    return json.dumps(data).encode()


def broken_topo_report(hostname: str = "broken-01") -> dict:
    """A real topo matrix with one row cut short: the parser must name that line."""
    lines = TOPO_H100.read_text().splitlines(keepends=True)
    lines[3] = "GPU2    NV18    NV18\n"
    data = report(hostname)
    data["sections"] = {"nvidia_smi_topo": "".join(lines)}
    return data


def variant(data: dict, **changes) -> dict:
    out = copy.deepcopy(data)
    out.update(changes)
    return out
