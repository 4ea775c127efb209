"""Tiny hand-built snapshot documents (schema of ``apps/domain/analysis.py``) for rule tests.

These are synthetic layouts, written in the test that uses them with an ASCII diagram; they are
not captures. ``host()`` fills every key of the document; the helpers add NICs, PCIe links and raw
parser results (``results`` for ``evaluate``) in the shapes the parsers produce.
"""

from __future__ import annotations

from typing import Any


def host(gpus: int | list[str] = 2, *, model: str | None = "NVIDIA H100 80GB HBM3",
         pairs: dict[tuple[str, str], str] | None = None, default_pair: str = "NV18",
         nics: list[dict] | None = None, gpu_nic: dict[str, Any] | None = None,
         gpu_numa: dict[str, int] | None = None, nvswitch: bool | None = None,
         contention: list[dict] | None = None, warnings: list[str] | None = None,
         affinity: dict[str, str | None] | None = None, inferred: bool = False) -> dict:
    """A snapshot document.

    ``pairs`` maps (GPUa, GPUb) to a topo -m class; unspecified pairs get ``default_pair``.
    ``gpu_nic`` maps a GPU to ``(nic, class)`` or ``(nic, class, pxn_via)``.
    """
    names = [f"GPU{i}" for i in range(gpus)] if isinstance(gpus, int) else list(gpus)
    pairs = {frozenset(k): v for k, v in (pairs or {}).items()}
    gpu_numa = gpu_numa or {}
    doc: dict[str, Any] = {
        "schema": 1, "hostname": "synthetic", "sources": ["nvidia_smi_topo"], "inferred": inferred,
        "summary": {"gpu_count": len(names), "gpu_model": model, "nic_count": 0, "active_nic_count": 0,
                    "nic_rates_gbps": [], "nvlink": False, "nvswitch": bool(nvswitch), "sockets": 1,
                    "fingerprint": "x"},
        "graph": {"nodes": [], "edges": []},
        "gpus": [], "nics": list(nics or []), "gpu_pairs": [], "gpu_nic": [], "gpu_nic_matrix": [],
        "contention": list(contention or []), "p2p_gaps": [], "warnings": list(warnings or []),
    }
    for i, n in enumerate(names):
        aff = (affinity or {}).get(n, "0-15")
        doc["gpus"].append({"name": n, "index": i, "node": n, "bdf": None, "uuid": None, "model": model,
                            "numa": gpu_numa.get(n, 0), "cpu_affinity": aff, "nic": None})
        doc["graph"]["nodes"].append({"id": n, "kind": "gpu", "label": n, "bdf": None, "numa": gpu_numa.get(n, 0),
                                      "parent": None, "inferred": True, "attrs": {"index": i}})
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            cls = pairs.get(frozenset((a, b)), default_pair)
            mech = "nvlink" if cls.startswith("NV") else "pcie_p2p" if cls in ("PIX", "PXB") else "shm"
            doc["gpu_pairs"].append({"a": a, "b": b, "path_class": cls, "mechanism": mech,
                                     "p2p": mech != "shm", "reason": "", "bottleneck_gbs": 0.0, "hops": []})
            if cls.startswith("NV"):
                doc["summary"]["nvlink"] = True
    for gpu, choice in (gpu_nic or {}).items():
        nic, cls, *rest = choice
        pxn = rest[0] if rest else None
        doc["gpu_nic"].append({"gpu": gpu, "nic": nic, "path_class": cls, "gdr": cls in ("PIX", "PXB"),
                               "reason": "", "bandwidth_gbs": 0.0, "pxn_via": pxn, "hops": []})
        doc["gpu_nic_matrix"].append({"gpu": gpu, "nic": nic, "path_class": cls, "bandwidth_gbs": 0.0})
        for g in doc["gpus"]:
            if g["name"] == gpu:
                g["nic"] = nic
    doc["summary"]["nic_count"] = len(doc["nics"])
    doc["summary"]["active_nic_count"] = sum(1 for n in doc["nics"] if n.get("active"))
    doc["summary"]["nic_rates_gbps"] = [n.get("rate_gbps") for n in doc["nics"]]
    return doc


def nic(name: str, *, rate: float | None = 400, layer: str = "InfiniBand", state: str = "Active",
        phys: str = "LinkUp", compute: bool = True, numa: int | None = 0, port: int = 1,
        bdf: str | None = None, node: str | None = None) -> dict:
    """One NIC port record of the document's ``nics``."""
    return {"name": name, "label": None, "node": node or name, "bdf": bdf, "port": port, "state": state,
            "phys_state": phys, "rate_gbps": rate, "link_layer": layer, "numa": numa,
            "active": state == "Active", "compute": compute}


def add_pcie(doc: dict, child: str, parent: str, *, kind: str = "nic", gen: int | None = 5, width: int | None = 16,
             max_gen: int | None = 5, max_width: int | None = 16, bdf: str | None = None,
             parent_kind: str = "switch", inferred: bool = False, attrs: dict | None = None) -> dict:
    """Add (or update) ``child`` below ``parent`` with the PCIe link child->parent."""
    nodes = {n["id"]: n for n in doc["graph"]["nodes"]}
    if parent not in nodes:
        doc["graph"]["nodes"].append({"id": parent, "kind": parent_kind, "label": parent, "bdf": None, "numa": 0,
                                      "parent": None, "inferred": inferred, "attrs": {}})
    if child in nodes:
        nodes[child]["parent"] = parent
        nodes[child]["bdf"] = bdf or nodes[child]["bdf"]
        nodes[child]["attrs"].update(attrs or {})
    else:
        doc["graph"]["nodes"].append({"id": child, "kind": kind, "label": child, "bdf": bdf, "numa": 0,
                                      "parent": parent, "inferred": inferred, "attrs": dict(attrs or {})})
    doc["graph"]["edges"].append({"source": child, "target": parent, "kind": "pcie", "gen": gen, "width": width,
                                  "max_gen": max_gen, "max_width": max_width, "links": None, "spec_gbs": None,
                                  "expected_gbs": None, "degraded": False, "inferred": inferred, "note": None})
    return doc


def ib_results(*ports: dict, source: str = "ibstat") -> dict:
    """Raw ``ibstat``-shaped result: ports given as dicts with ca, number, state, phys_state, rate_gbps,
    link_layer, base_lid, sm_lid (the shared records of ``parsers/_ib.py``)."""
    cas: dict[str, dict] = {}
    for p in ports:
        p = dict(p)
        ca = cas.setdefault(p.pop("ca"), {"name": None, "ca_type": p.pop("ca_type", "MT4129"), "ports": []})
        ca["ports"].append(p)
    for name, ca in cas.items():
        ca["name"] = name
    return {source: {"source": source, "cas": list(cas.values()), "port_guids": [], "warnings": []}}


def p2p_results(matrix: dict[tuple[str, str], str], gpus: list[str], mode: str = "r") -> dict:
    """Raw ``nvidia_smi_p2p`` result; unspecified cells are OK."""
    m = {a: {b: ("X" if a == b else "OK") for b in gpus} for a in gpus}
    for (a, b), tok in matrix.items():
        m[a][b] = tok
        m[b][a] = tok
    return {"nvidia_smi_p2p": {"variant": "p2p", "p2p_mode": mode, "matrix": m, "gpus": [], "nics": [],
                               "warnings": []}}
