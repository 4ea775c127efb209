"""The host page's "P2P gaps" and "GPU groups" sections, read off a snapshot document.

Plain Python on the document as ``apps.domain.analysis`` stores it (``gpu_pairs``, ``gpus``,
``gpu_nic``, ``graph.nodes``, ``nics``, ``gpu_groups``); nothing is re-analysed here, so the
page says what the rest of topoweb says. The document's ``gpu_groups`` themselves are made here
too, by :func:`gpu_groups` (the analysis calls it on the GPU pairs): one module for the concept.

``p2p_gap_section(doc)`` ->

{
  "sentence": str|None,      # one line on top: "GPU0-3 and GPU4-7 reach each other only through
                             # the CPU: 16 pairs without P2P."; None when every pair has P2P
  "count": int,              # pairs with p2p False (NCCL uses SHM for them)
  "unknown": int,            # pairs the report cannot tell (p2p None: a GPU not placed, NVLink
                             # not reported); never counted as gaps
  "rows": [{"a", "b", "path_class", "nccl_path", "cause": "level"|"p2p_status"|"driver"|None,
            "instead": str,  # what NCCL does instead (SHM through host memory)
            "cost": str,     # what it costs, with the document's figures
            "fix": str,      # what to change
            "reason": str}]  # the pair's reason as analysed
}

NCCL behaviour modelled (v2.30.7-1): two GPUs use the P2P transport only when their path type is no
worse than the P2P level, PXB by default, SYS on AMD x86 hosts with at most 2 GPUs, or
``NCCL_P2P_LEVEL`` / ``NCCL_P2P_DISABLE`` (src/graph/paths.cc L355-368, ncclTopoCheckP2p), and only
when NVML reports peer access (paths.cc L373-411); otherwise the pair uses the SHM transport on the
same host (src/transport/shm.cc L60-83, shmCanConnect: same host hash and /dev/shm), whose buffers
live in host memory. The path classes and the cause per pair are the document's
(``gpu_pairs[].nccl_path`` and ``shm_cause``, apps.domain.paths).

``gpu_group_section(doc)`` ->

{
  "switch": [group], # GPUs under the same (lowest) PCIe switch, with the NICs under it
  "nvlink": [group], # NVLink islands: GPUs joined by direct NVLink/NVSwitch links
  "numa":   [group], # GPUs (and NICs) on the same NUMA node
  "nic":    [group], # GPUs whose channel-0 NIC is the same (gpu_nic)
  "p2p":    [str],   # the document's gpu_groups sentences (P2P cliques, best first)
}
group = {"gpus": [names], "nics": [names], "where": str, "sentence": str}
e.g. "GPU0-1 under switch 0000:17:00.0 with mlx5_0 (PIX)."
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import networkx as nx

from apps.domain.names import natural_key, natural_sorted, pair_key

__all__ = ["gpu_group_section", "gpu_groups", "gpu_range", "p2p_gap_section"]

THROUGH_CPU = ("PHB", "NODE", "SYS")  # path classes that cross a CPU host bridge (or more)

_INDEXED = re.compile(r"^(.*?)(\d+)$")


def gpu_range(names: Iterable[str]) -> str:
    """GPU names in short form: runs of consecutive indices as ``GPU0-3``.

    >>> gpu_range(["GPU2", "GPU0", "GPU1", "GPU5"])
    'GPU0-2, GPU5'
    >>> gpu_range(["GPU0", "GPU1"])
    'GPU0-1'
    """
    runs: list[list[Any]] = []  # [prefix, first, last] or [name]
    for name in natural_sorted(set(names)):
        m = _INDEXED.match(name)
        if m and runs and len(runs[-1]) == 3 and runs[-1][0] == m.group(1) and runs[-1][2] + 1 == int(m.group(2)):
            runs[-1][2] = int(m.group(2))
        elif m:
            runs.append([m.group(1), int(m.group(2)), int(m.group(2))])
        else:
            runs.append([name])
    return ", ".join(r[0] if len(r) == 1 else (f"{r[0]}{r[1]}" if r[1] == r[2] else f"{r[0]}{r[1]}-{r[2]}")
                     for r in runs)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# -- P2P gaps ---------------------------------------------------------------------------------


def _components(gpus: list[str], pairs: list[dict]) -> list[list[str]]:
    """GPUs joined by peer-to-peer (directly or through P2P pairs), smallest first GPU first."""
    parent = {g: g for g in gpus}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in pairs:
        if p.get("p2p") and p["a"] in parent and p["b"] in parent:
            parent[find(p["a"])] = find(p["b"])
    groups: dict[str, list[str]] = {}
    for g in gpus:
        groups.setdefault(find(g), []).append(g)
    return sorted((natural_sorted(v) for v in groups.values()), key=lambda v: natural_key(v[0]))


def _own_link_gbs(pair: Mapping) -> float | None:
    """The expected GB/s of the first hop of the pair's path (GPU ``a``'s own link)."""
    hops = pair.get("hops") or []
    return hops[0].get("expected_gbs") if hops else None


def _instead(pair: Mapping) -> str:
    cls = pair.get("path_class") or pair.get("nccl_path") or "?"
    across = " and the inter-socket link" if cls == "SYS" else ""
    return (f"SHM: each transfer is written to a buffer in host memory and read back by the other GPU, "
            f"crossing the CPU's host bridge{across} twice (NCCL's SHM transport, shm.cc L60-83).")


def _cost(pair: Mapping) -> str:
    gbs = pair.get("bottleneck_gbs")
    own = _own_link_gbs(pair)
    figure = f"about {gbs:.1f} GB/s per direction for this pair" if isinstance(gbs, (int, float)) else \
        "the pair's bandwidth is unknown"
    if isinstance(own, (int, float)) and isinstance(gbs, (int, float)) and own > gbs:
        figure += f" against {own:.1f} GB/s of the GPU's own PCIe link"
    assumed = " (assumed link figures)" if pair.get("assumed") else ""
    return (f"{figure}{assumed}; the copies take host-memory bandwidth and add latency, so "
            "all-reduce and all-to-all between these GPUs are slower than over P2P.")


def _fix(pair: Mapping) -> str:
    cause, cls = pair.get("shm_cause"), pair.get("path_class") or pair.get("nccl_path")
    if cause == "p2p_status":
        return ("The driver refuses peer access for this pair (nvidia-smi topo -p2p): check ACS redirect on the "
                "PCIe switch ports (finding P04), the IOMMU and the BIOS; NCCL_P2P_LEVEL cannot override it.")
    if cause == "driver":
        return ("This GPU's driver does not allow peer-to-peer (consumer GPUs): nothing to set; keep "
                "communicating ranks on NVLink-connected GPUs, or use data-centre GPUs.")
    if cls == "SYS":
        return ("Keep the ranks that talk most on one socket (pack by the GPU groups below). "
                "NCCL_P2P_LEVEL=SYS forces P2P across the inter-socket link, which many CPUs forward slowly: "
                "measure it (p2pBandwidthLatencyTest, nccl-tests) before keeping it.")
    return (f"Pack the ranks that talk most under one PCIe switch (the GPU groups below), or try "
            f"NCCL_P2P_LEVEL={'PHB' if cls == 'PHB' else 'SYS'} to allow P2P through the host bridge; many root "
            "complexes forward peer writes slowly, so measure it (p2pBandwidthLatencyTest) first.")


def _gap_sentence(gpus: list[str], pairs: list[dict], gaps: list[dict]) -> str:
    n = len(gaps)
    plural = "pair" if n == 1 else "pairs"
    through = all((g.get("path_class") or g.get("nccl_path")) in THROUGH_CPU for g in gaps)
    comps = _components(gpus, pairs)
    comp_of = {g: i for i, comp in enumerate(comps) for g in comp}
    clean = all(comp_of.get(g["a"]) != comp_of.get(g["b"]) for g in gaps) and len(comps) > 1
    if clean:  # every gap is between P2P islands, none inside one
        how = "only through the CPU" if through else "without peer-to-peer"
        return f"{_and([gpu_range(c) for c in comps])} reach each other {how}: {n} {plural} without P2P."
    classes = "/".join(sorted({g.get("path_class") or "?" for g in gaps}))
    return f"{n} GPU {plural} without P2P ({classes}): NCCL copies through host memory (SHM) for them."


def p2p_gap_section(doc: Mapping) -> dict:
    """The "P2P gaps" section of a snapshot document (shape in the module docstring)."""
    pairs = list(doc.get("gpu_pairs") or [])
    gpus = [g["name"] for g in doc.get("gpus") or []]
    gaps = sorted((p for p in pairs if p.get("p2p") is False), key=lambda p: tuple(
        natural_key(x) for x in pair_key(p["a"], p["b"])))
    rows = [{"a": p["a"], "b": p["b"], "path_class": p.get("path_class"), "nccl_path": p.get("nccl_path"),
             "cause": p.get("shm_cause"), "instead": _instead(p), "cost": _cost(p), "fix": _fix(p),
             "reason": p.get("reason") or ""} for p in gaps]
    return {"sentence": _gap_sentence(gpus, pairs, gaps) if gaps else None, "count": len(gaps),
            "unknown": sum(1 for p in pairs if p.get("p2p") is None), "rows": rows}


# -- GPU groups -------------------------------------------------------------------------------


def _nodes(doc: Mapping) -> dict[str, dict]:
    return {n["id"]: n for n in ((doc.get("graph") or {}).get("nodes") or [])}


def _ancestors(nodes: Mapping[str, dict], node_id: str | None) -> list[str]:
    out, seen = [], set()
    cur = (nodes.get(node_id) or {}).get("parent") if node_id else None
    while cur and cur not in seen and cur in nodes:
        seen.add(cur)
        out.append(cur)
        cur = nodes[cur].get("parent")
    return out


def _switch_name(node: Mapping, number: int) -> str:
    bdf = node.get("bdf") or (node.get("attrs") or {}).get("upstream_bdf")
    if bdf:
        return f"switch {bdf}"
    return f"PCIe switch {number} (inferred)" if node.get("inferred") else f"switch {node.get('label') or number}"


def _nic_class(doc: Mapping) -> dict[tuple[str, str], str]:
    return {(c["gpu"], c["nic"]): c.get("path_class") for c in doc.get("gpu_nic_matrix") or []}


def _with_nics(gpus: list[str], nics: list[str], classes: Mapping[tuple[str, str], str]) -> str:
    if not nics:
        return ""
    shown = []
    for nic in nics:
        cls = {classes.get((g, nic)) for g in gpus} - {None}
        shown.append(f"{nic} ({'/'.join(sorted(cls))})" if cls else nic)
    return " with " + _and(shown)


def _by_switch(doc: Mapping) -> list[dict]:
    nodes = _nodes(doc)
    leaf: dict[str, list[str]] = {}
    for g in doc.get("gpus") or []:
        sw = next((a for a in _ancestors(nodes, g.get("node")) if nodes[a]["kind"] == "switch"), None)
        if sw:
            leaf.setdefault(sw, []).append(g["name"])
    nic_names = {n["node"]: n["name"] for n in doc.get("nics") or [] if n.get("node")}
    classes = _nic_class(doc)
    out = []
    for number, (sw, gpus) in enumerate(sorted(leaf.items(), key=lambda kv: natural_key(min(kv[1], key=natural_key)))):
        nics = natural_sorted(name for nid, name in nic_names.items() if sw in _ancestors(nodes, nid))
        gpus = natural_sorted(gpus)
        where = _switch_name(nodes[sw], number)
        out.append({"gpus": gpus, "nics": nics, "where": where,
                    "sentence": f"{gpu_range(gpus)} under {where}{_with_nics(gpus, nics, classes)}."})
    return out


def _by_nvlink(doc: Mapping) -> list[dict]:
    direct = [p for p in doc.get("gpu_pairs") or []
              if p.get("mechanism") in ("nvlink", "nvswitch") and not p.get("via")]
    gpus = natural_sorted({x for p in direct for x in (p["a"], p["b"])})
    linked = {pair_key(p["a"], p["b"]): p.get("path_class") for p in direct}
    out = []
    for comp in _components(gpus, [{**p, "p2p": True} for p in direct]):
        if len(comp) < 2:
            continue
        full = all(pair_key(a, b) in linked for i, a in enumerate(comp) for b in comp[i + 1:])
        classes = "/".join(sorted({c for k, c in linked.items() if k[0] in comp and c}))
        how = ("every two joined directly" if full else
               "not every two joined directly: the others relay through a GPU (NVB) or use PCIe")
        out.append({"gpus": comp, "nics": [], "where": "NVLink island",
                    "sentence": f"{gpu_range(comp)} form an NVLink island ({classes}; {how})."})
    return out


def _by_numa(doc: Mapping) -> list[dict]:
    numa: dict[Any, list[str]] = {}
    for g in doc.get("gpus") or []:
        numa.setdefault(g.get("numa"), []).append(g["name"])
    if set(numa) == {None}:
        return []
    nics_on: dict[Any, list[str]] = {}
    for n in doc.get("nics") or []:
        if n.get("numa") is not None:
            nics_on.setdefault(n["numa"], []).append(n["name"])
    out = []
    for node, gpus in sorted(numa.items(), key=lambda kv: (kv[0] is None, kv[0] if kv[0] is not None else 0)):
        gpus = natural_sorted(gpus)
        nics = natural_sorted(nics_on.get(node, [])) if node is not None else []
        where = f"NUMA node {node}" if node is not None else "an unreported NUMA node"
        tail = f" with {_and(nics)}" if nics else ""
        out.append({"gpus": gpus, "nics": nics, "where": where, "sentence": f"{gpu_range(gpus)} on {where}{tail}."})
    return out


def _by_nic(doc: Mapping) -> list[dict]:
    by: dict[str, list[dict]] = {}
    for e in doc.get("gpu_nic") or []:
        by.setdefault(e["nic"], []).append(e)
    out = []
    for nic, entries in sorted(by.items(), key=lambda kv: natural_key(min((e["gpu"] for e in kv[1]), key=natural_key))):
        gpus = natural_sorted(e["gpu"] for e in entries)
        classes = "/".join(sorted({e.get("path_class") for e in entries if e.get("path_class")}))
        gdr = {bool(e.get("gdr")) for e in entries}
        gdr_words = ("GPUDirect RDMA on" if gdr == {True} else "GPUDirect RDMA off" if gdr == {False}
                     else "GPUDirect RDMA on for some")
        out.append({"gpus": gpus, "nics": [nic], "where": nic,
                    "sentence": f"{gpu_range(gpus)} use {nic} ({classes}, {gdr_words})."})
    return out


def gpu_group_section(doc: Mapping) -> dict:
    """The "GPU groups" section of a snapshot document (shape in the module docstring)."""
    return {"switch": _by_switch(doc), "nvlink": _by_nvlink(doc), "numa": _by_numa(doc), "nic": _by_nic(doc),
            "p2p": [g["sentence"] for g in doc.get("gpu_groups") or []]}


# --- the document's gpu_groups (made by the analysis) -------------------------------------------

_TIER_WORDS = {0: "NVLink", 1: "PCIe peer-to-peer inside one PCIe switch", 2: "PCIe peer-to-peer",
               3: "peer-to-peer relayed over NVLink through another GPU"}


def _tier(p: Mapping) -> int | None:
    """How good a pair is for a group: 0 NVLink/NVSwitch, 1 PCIe P2P in one switch (PIX), 2 other
    PCIe P2P (PXB), 3 NVB relay; None without peer-to-peer (SHM)."""
    if not p.get("p2p"):
        return None
    if p["mechanism"] in ("nvlink", "nvswitch") and not p.get("via"):
        return 0
    if p.get("via"):
        return 3
    return 1 if p.get("path_class") == "PIX" else 2


def gpu_groups(pairs: list[dict], limit: int = 8) -> list[dict]:
    """GPUs to put together (tensor-parallel groups): maximal cliques of GPUs with peer-to-peer
    between every two members, best first (NVLink before PCIe switch before other PCIe P2P before
    NVB relays; then bigger, then faster). Cliques are taken at each quality level, so a DGX-1 cube
    mesh lists its NVLink quads even though NVB relays connect all eight GPUs."""
    G = nx.Graph()
    for p in pairs:
        t = _tier(p)
        if t is not None:
            G.add_edge(p["a"], p["b"], tier=t, gbs=p.get("bottleneck_gbs"), cls=p.get("path_class"))
    found: dict[frozenset, dict] = {}
    for level in (0, 1, 2, 3):
        H = nx.Graph([(a, b) for a, b, d in G.edges(data=True) if d["tier"] <= level])
        for clique in nx.find_cliques(H):
            key = frozenset(clique)
            if len(key) < 2 or key in found:
                continue
            members = natural_sorted(key)
            edges = [G.edges[a, b] for i, a in enumerate(members) for b in members[i + 1:]]
            worst = max(e["tier"] for e in edges)
            gbs = [e["gbs"] for e in edges if e["gbs"] is not None]
            classes = sorted({e["cls"] for e in edges if e["cls"]})
            low = min(gbs) if gbs else None
            found[key] = {"gpus": members, "link": ("nvlink", "pcie_switch", "pcie_p2p", "nvb")[worst],
                          "classes": classes, "bottleneck_gbs": low, "_tier": worst}
    groups = sorted(found.values(), key=lambda g: (g["_tier"], -len(g["gpus"]), -(g["bottleneck_gbs"] or 0),
                                                   natural_key(g["gpus"][0])))
    # drop a group contained in a better-or-equal listed one
    out: list[dict] = []
    for g in groups:
        if any(set(g["gpus"]) <= set(o["gpus"]) and o["_tier"] <= g["_tier"] for o in out):
            continue
        out.append(g)
    for g in out:
        names = g["gpus"]
        listed = ", ".join(names[:-1]) + " and " + names[-1]
        speed = f", at least {g['bottleneck_gbs']:.1f} GB/s per direction" if g["bottleneck_gbs"] else ""
        between = "between them" if len(names) == 2 else "between every two of them"
        tier = g.pop("_tier")
        words = "xGMI" if tier == 0 and all(c.startswith("XGMI") for c in g["classes"]) else _TIER_WORDS[tier]
        g["sentence"] = (f"Group {listed}: {words} {between} "
                         f"({'/'.join(g['classes'])}{speed}).")
    return out[:limit]
