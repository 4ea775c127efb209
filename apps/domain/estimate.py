"""Expected all-reduce bus bandwidth of a host layout, as NCCL would run it, and the settings it suggests.

``estimate(doc)`` gives, for 1 to 64 nodes of the layout, the busbw nccl-tests reports for large
all-reduce with NCCL's defaults (``NCCL_*`` settings of the document's ``nccl_env`` honoured), the
algorithm NCCL picks, what ``NCCL_ALGO=Ring`` gives, and the element that limits it. It reads one
model of the host, in named stages:

1. :func:`link_figures` -- NCCL's system (``apps.domain.nccl_system``): the host graph's links with
   the NCCL figures :mod:`apps.domain.bandwidth` put on its edges, the document's GPU pair paths,
   the NETs NCCL uses (every compute port, adapters' ports fused) and the GPU<->NET paths with PXN.
2. :func:`channel_search` -- NCCL's graphs (``apps.domain.nccl_search``): rings, trees and NVLS
   channels found on those links, inside one node and, with the NETs, across nodes. On switchless
   NVLink and xGMI meshes the rings are the ones the links carry side by side (DGX-1 V100: 6 x 20
   GB/s, not one ring of its slowest pair).
3. :func:`nic_sum` -- the node's NIC line rates, every compute port counted.
4. :func:`cost_table` -- NCCL's tuning model (``apps.domain.nccl_tuning``): each algorithm's and
   protocol's bandwidth and latency; :func:`plateau` the choice for 16 GiB messages.

nccl-tests reports NCCL's bus bandwidth for rings and NVLS (busbw = algbw x 2(n-1)/n, and NCCL
times rings and NVLS with algbw = busBw x n/(2(n-1))), and busBw x (n-1)/n for trees (NCCL times
them at busBw / 2). NCCL's figures are what it plans with; what nccl-tests measures differs by an
efficiency set once from published runs (``docs/calibration.md``): ``ETA_INTRA`` for one node,
``ETA_NET`` across nodes. The published rows the model covers are checked by
``tests/domain/engine/test_calibration.py`` (each within +-15 %).

``curve(doc, nodes, sizes)`` times each size with NCCL's latency + bandwidth model for every
enabled algorithm and protocol (tuning.cc L630-655) and reports the one NCCL picks, so small sizes
are latency-bound. ``suggest_nccl_settings(doc)`` lists the NCCL variables the layout calls for.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx

from apps.domain import nccl_search, nccl_tuning
from apps.domain.findings.base import Ctx, as_list, gpu_sort_key, join, normalize_token
from apps.domain.nccl_search import BALANCED_TREE, NVLS, RING, Graph
from apps.domain.nccl_system import NVS, System, build_system, document_graph
from apps.domain.nccl_tuning import Cost
from apps.domain.shellsafe import is_safe_name

__all__ = ["estimate", "curve", "suggest_nccl_settings", "link_figures", "channel_search", "nic_sum", "cost_table",
           "plateau", "clear_caches", "ETA_INTRA", "ETA_NET", "NODE_COUNTS", "PLATEAU_BYTES"]

#: nccl-tests busbw / NCCL's bus bandwidth inside one node: the single-node NVSwitch rows of
#: published_busbw.tsv (docs/calibration.md, "Constants").
ETA_INTRA = 1.02
#: the same across nodes: the 2-, 4- and 8-node H100 rows on 8 x 400G InfiniBand (docs/calibration.md).
ETA_NET = 0.96
NODE_COUNTS = (1, 2, 4, 8, 16, 32, 64)
PLATEAU_BYTES = 16 << 30  # "large messages": the largest size the published rows print


# ---------------------------------------------------------------------------------------- stages


def link_figures(doc: Mapping[str, Any], graph: nx.Graph | None = None, env: Mapping[str, str] | None = None) -> System:
    """Stage 1: NCCL's system for the document (see ``apps.domain.nccl_system``)."""
    return build_system(doc, graph, env)


@dataclass(frozen=True)
class Graphs:
    """Stage 2's result: NCCL's graphs inside one node (``intra``) and across nodes (``inter``),
    each ``{"RING", "TREE", "NVLS"}`` -> :class:`~apps.domain.nccl_search.Graph`."""

    intra: Mapping[str, Graph]
    inter: Mapping[str, Graph] = field(default_factory=dict)


def channel_search(system: System, env: Mapping[str, str] | None = None) -> Graphs:
    """Stage 2: rings, trees and NVLS channels as ``ncclTopoCompute`` finds them (init.cc
    L1174-1216: trees with the ring's channel count; NVLS only where multicast is possible), inside
    one node and, when the host has NETs, across nodes; ``NCCL_CROSS_NIC`` honoured."""
    env = env or {}
    cross = _int(env.get("NCCL_CROSS_NIC"), 2)
    nvls_on = str(env.get("NCCL_NVLS_ENABLE", "2")).strip() != "0"
    out = []
    for inter in (False, True):
        if inter and not system.nets:
            out.append({})
            continue
        ring = nccl_search.compute(system, RING, inter=inter, cross_nic=cross)
        tree = nccl_search.compute(system, BALANCED_TREE, inter=inter, min_channels=ring.n_channels,
                                   max_channels=ring.n_channels, cross_nic=cross)
        graphs = {"RING": ring, "TREE": tree}
        if nvls_on:
            graphs["NVLS"] = nccl_search.compute(system, NVLS, inter=inter)
        if str(env.get("NCCL_COLLNET_ENABLE", "0")).strip() == "1":
            graphs["COLLNET"] = tree  # CollNet's graphs are not searched: the tree's stand for them
        # comm->nChannels = min(tree, ring) (init.cc L1459); a tree this search did not find in its
        # budget (NCCL's longer search finds one with the ring's channel count) does not cut the rings
        n = ring.n_channels if tree.fallback else (min(ring.n_channels, tree.n_channels) or ring.n_channels)
        graphs["RING"] = _with_channels(ring, n)
        graphs["TREE"] = _with_channels(tree, n)
        out.append(graphs)
    return Graphs(out[0], out[1])


def _with_channels(g: Graph, n: int) -> Graph:
    if g.n_channels == n or n <= 0:
        return g
    return replace(g, n_channels=n, channels=g.channels[:n], nets=g.nets[:n])


def nic_sum(system: System) -> tuple[float | None, list[float], str]:
    """Stage 3: (the node's NIC sum GB/s, per adapter, words): every compute port NCCL may use
    counted at its line rate, the ports of one adapter together no more than its PCIe link."""
    per = [round(min(gbs, link) if link else gbs, 2) for _name, gbs, link in system.ports]
    if not per:
        return None, [], ""
    return round(sum(per), 2), per, _nic_sum_text(system)


def _nic_sum_text(system: System) -> str:
    per = [round(min(gbs, link) if link else gbs, 2) for _name, gbs, link in system.ports]
    if len(set(per)) == 1:
        return f"{len(per)} x {_gbs(per[0])}"
    return " + ".join(_num(round(v, 1)) for v in per) + " GB/s"


def cost_table(system: System, graphs: Graphs, nodes: int, env: Mapping[str, str] | None = None
               ) -> dict[tuple[str, str], Cost]:
    """Stage 4: NCCL's tuning table for ``nodes`` nodes (``nccl_tuning.tune``)."""
    return nccl_tuning.tune(system, graphs.intra if nodes == 1 else graphs.inter, nodes, env)


def _efficiency(nodes: int) -> float:
    return ETA_INTRA if nodes == 1 else ETA_NET


def _comm_channels(system: System, graphs: Graphs, nodes: int) -> int:
    """``comm->nChannels`` after ``ncclTopoPostset`` doubled the ring channels (connect.cc L460,
    L480-483), what ``ncclTopoGetAlgoTime``'s ring plateau test divides by."""
    ring = (graphs.intra if nodes == 1 else graphs.inter).get("RING")
    n = min(64, 2 * (ring.n_channels if ring else 1))
    if nodes > 1 and (system.sm or 0) >= 90 and ring is not None and ring.bw_intra > 45.0 and n < 16:
        n = min(64, 2 * n)
    return n


def _timing(system: System, graphs: Graphs, nodes: int) -> dict:
    n_ranks = len(system.gpus) * nodes
    return {"nodes": nodes, "n_ranks": n_ranks, "comm_channels": _comm_channels(system, graphs, nodes),
            "system": system, "efficiency": _efficiency(nodes)}


def _busbw(cost: Cost, n_ranks: int, env: Mapping[str, str], nbytes: int, t_us: float) -> float:
    """nccl-tests' busbw for one all-reduce of ``nbytes`` taking ``t_us``: algbw x its factor."""
    return nbytes / t_us / 1000 * nccl_tuning.nccl_tests_factor(cost.algorithm, n_ranks, env)


def plateau(table: Mapping[tuple[str, str], Cost], timing: Mapping, env: Mapping[str, str],
            only: str | None = None) -> tuple[Cost, float] | None:
    """(the cost NCCL picks for ``PLATEAU_BYTES``, the busbw nccl-tests reports at that size);
    ``only`` restricts to one algorithm."""
    if only:
        table = {k: v for k, v in table.items() if k[0] == only}
    best = nccl_tuning.choose(table, PLATEAU_BYTES, **timing)
    if best is None:
        return None
    cost, t = best
    return cost, round(_busbw(cost, timing["n_ranks"], env, PLATEAU_BYTES, t), 1)


# ---------------------------------------------------------------------------------------- limits


def _usage(system: System, graph: Graph, inter: bool) -> dict:
    """Per directed link, the bandwidth the graph's channels reserve on it (NVLS: each GPU's fabric
    link, twice for the channel's head)."""
    used: dict = {}

    def add(path, bw):
        if path is None:
            return
        for k in path.links:
            used[k] = used.get(k, 0.0) + bw * (1.2 if path.intel_phb and NVS not in k else 1.0)

    for c, order in enumerate(graph.channels):
        if graph.pattern == NVLS:
            head = order[0] if order else None
            for g in system.gpus:
                for k in ((g, NVS), (NVS, g)):
                    used[k] = used.get(k, 0.0) + graph.bw_intra * (2 if g == head else 1)
            continue
        steps = list(zip(order, order[1:]))
        if graph.pattern == RING and not inter and len(order) > 1:
            steps.append((order[-1], order[0]))
        for a, b in steps:
            add(system.gpu_paths.get((a, b)), graph.bw_intra)
        if inter and c < len(graph.nets):
            start, end = graph.nets[c]
            if start:
                add(system.from_net.get((start, order[0])), graph.bw_inter)
            last = order[-1] if graph.pattern == RING else order[0]
            if end:
                add(system.to_net.get((last, end)), graph.bw_inter)
    return used


def _link_words(system: System, key: tuple[str, str]) -> tuple[str, str]:
    """(kind, words) of a directed link of NCCL's system."""
    u, v = key
    if v.startswith("net:") or u.startswith("net:"):
        return "net", f"NIC {(v if v.startswith('net:') else u)[4:]}"
    if NVS in key:
        g = u if v == NVS else v
        return "nvlink", f"{g}'s NVLinks {'into' if v == NVS else 'from'} the NVSwitch fabric"
    if u in system.gpus and v in system.gpus:
        return "nvlink", f"NVLink {u} -> {v}"
    if u.startswith("cpu") and v.startswith("cpu"):
        return "socket", f"CPU socket link {u} -> {v}"
    return "pcie", f"PCIe link {_label(system, u)} -> {_label(system, v)}"


def _label(system: System, node: str) -> str:
    label = system.labels.get(node, node)
    same = sum(1 for x in system.labels.values() if x == label)
    return label if label == node or same == 1 else f"{label} [{node}]"


def _limit(system: System, graphs: Graphs, cost: Cost, nodes: int) -> str:
    """The element that sets the chosen algorithm's figure, in words."""
    inter = nodes > 1
    g = (graphs.inter if inter else graphs.intra).get("NVLS" if cost.algorithm.startswith("NVLS") else
                                                       ("TREE" if cost.algorithm in ("TREE",) or
                                                        cost.algorithm.startswith("COLLNET") else "RING"))
    per = f"{_channels(cost.n_channels)} x {_num(round(cost.per_channel, 2))} GB/s"
    if cost.bound == "per_channel_max":
        return f"NCCL's per-channel {_ALGO_WORDS[cost.algorithm]} maximum ({per})"
    if cost.bound == "ll_max":
        return f"NCCL's LL protocol maximum ({_gbs(cost.bus_bw)})"
    if cost.bound == "nvls_intra":
        return (f"NVLink SHARP in the NVSwitch (NVLS): {_channels(g.n_channels)} x {_num(g.bw_intra)} GB/s on each "
                f"GPU's NVLinks, NCCL's NVLS efficiency {nccl_tuning.NVLS_EFFICIENCY[nccl_tuning.cc_index(system)]}")
    if cost.bound == "nvls_inter":
        nic = _nic_sum_text(system)
        return f"NIC sum across nodes ({nic}) under NVLS tree: {_channels(g.n_channels)} x {_num(g.bw_inter)} GB/s"
    if g is None or g.fallback:
        return "no channel fits NCCL's search: NCCL falls back to one slow ring (0.1 GB/s planned)"
    nics = nic_sum(system)[0]
    if inter and nics and g.n_channels * g.bw_inter >= 0.9 * nics:
        return f"NIC sum across nodes ({_nic_sum_text(system)}): {per}"
    used = _usage(system, g, inter)
    if not used:
        return f"{_ALGO_WORDS[cost.algorithm]} ({per})"
    key = max(used, key=lambda k: (used[k] / max(system.cap.get(k, math.inf), 1e-9), k))
    kind, words = _link_words(system, key)
    cap = system.cap.get(key, math.inf)
    share = f"{_num(round(used[key], 1))} of {_gbs(cap)}" if math.isfinite(cap) else _gbs(used[key])
    if kind == "net":
        return f"NIC sum across nodes ({_nic_sum_text(system)}): {per}"
    if kind == "nvlink":
        return f"NVLink inside the node: {words} ({share}; {per})"
    if kind == "socket":
        return f"the CPU socket link inside the node: {words} ({share}, NCCL's CPU figure; {per})"
    return f"PCIe inside the node: {words} ({share}; {per})"


_ALGO_WORDS = {"RING": "ring", "TREE": "tree", "NVLS": "NVLS", "NVLS_TREE": "NVLS tree",
               "COLLNET_DIRECT": "CollNet direct", "COLLNET_CHAIN": "CollNet chain"}


# ---------------------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class _Model:
    system: System
    graphs: Graphs
    env: Mapping[str, str]
    #: the estimate of this model, once made: it reads nothing else, so the hosts of one layout
    #: share it (each caller gets its own copy)
    memo: dict = field(default_factory=dict)


_CACHE: dict = {}
_LAYOUTS: dict = {}  # layout signature -> _Model: the hosts of a fleet share a few layouts


def _env(doc: Mapping[str, Any], env: Mapping[str, str] | None) -> dict[str, str]:
    if env is not None:
        return {str(k): str(v) for k, v in env.items()}
    raw = doc.get("nccl_env") or {}
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


def clear_caches() -> None:
    """Forget every model kept (the benchmarks time the estimate cold), and the channel search's
    integer views of the systems it searched."""
    _CACHE.clear()
    _LAYOUTS.clear()
    nccl_search.clear_caches()


def _layout_signature(doc: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """A digest of everything the model reads from a document: the graph's nodes and links, the
    GPUs, the NICs' facts, the pairs' paths, the GPU x NIC cells, the GPU model and the settings.
    Two hosts of one layout (a fleet) share it, whatever their names."""
    g = doc.get("graph") or {}
    summary = doc.get("summary") or {}
    blob = [
        [(n.get("id"), n.get("kind"), n.get("parent"), n.get("label"), bool((n.get("attrs") or {}).get("c2c")))
         for n in g.get("nodes") or []],
        [(e.get("source"), e.get("target"), e.get("kind"), e.get("nccl_gbs"), e.get("spec_gbs"), e.get("gen"),
          e.get("width"), e.get("max_gen"), e.get("max_width"), e.get("links"), e.get("fabric"))
         for e in g.get("edges") or []],
        [(x.get("name"), x.get("index"), x.get("model")) for x in doc.get("gpus") or []],
        [(n.get("name"), n.get("node"), n.get("bdf"), n.get("rate_gbps"), n.get("active"), n.get("state"),
          n.get("compute"), n.get("link_layer"), n.get("transport")) for n in doc.get("nics") or []],
        [(p.get("a"), p.get("b"), p.get("mechanism"), p.get("via"), p.get("nccl_path"), p.get("path_class"),
          [(h.get("from_id"), h.get("to_id"), h.get("kind")) for h in p.get("hops") or []])
         for p in doc.get("gpu_pairs") or []],
        [(c.get("gpu"), c.get("nic"), c.get("nccl_path"), c.get("gdr")) for c in doc.get("gpu_nic_matrix") or []],
        summary.get("gpu_model"), g.get("assumed_gpu_model"), g.get("cpu_vendor"), sorted(env.items()),
    ]
    return hashlib.sha1(json.dumps(blob, default=str).encode()).hexdigest()


def _model(doc: Mapping[str, Any], graph: nx.Graph | None, env: Mapping[str, str] | None) -> _Model:
    """The stages' result for one document: kept for the same object (a run checked against a
    document asks for its estimate, then its curve) and for the same layout (a fleet's hosts)."""
    env = _env(doc, env)
    key = (id(doc), tuple(sorted(env.items())))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is doc:
        return hit[1]
    sig = _layout_signature(doc, env)
    model = _LAYOUTS.get(sig)
    if model is None:
        system = link_figures(doc, graph if graph is not None else document_graph(doc), env)
        graphs = channel_search(system, env) if (system.gpus and system.unknown is None) else Graphs({}, {})
        model = _Model(system, graphs, env)
        if len(_LAYOUTS) >= 256:
            _LAYOUTS.pop(next(iter(_LAYOUTS)))
        _LAYOUTS[sig] = model
    if len(_CACHE) >= 32:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (doc, model)
    return model


# ---------------------------------------------------------------------------------------- public


def estimate(doc: Mapping[str, Any], *, graph: nx.Graph | None = None, env: Mapping[str, str] | None = None) -> dict:
    """Expected all-reduce busbw for 1..64 nodes of this layout (``analysis.py`` documents the
    shape under ``estimate``); ``graph`` is the document's HostGraph when at hand (else rebuilt),
    ``env`` the NCCL settings (else the document's ``nccl_env``)."""
    m = _model(doc, graph, env)
    if "estimate" not in m.memo:
        m.memo["estimate"] = _estimate(m)
    return copy.deepcopy(m.memo["estimate"])


def _estimate(m: _Model) -> dict:
    s = m.system
    notes: list[str] = []
    out = {"b_gpu_gbs": None, "b_node_gbs": None, "eta_intra": ETA_INTRA, "eta_net": ETA_NET, "points": [],
           "limiting_link": "", "ring": list(s.gpus), "channels": {}, "nccl_env": sorted(m.env), "notes": notes}
    if not s.gpus:
        out["limiting_link"] = "no GPUs reported"
        notes.append("no GPUs reported: nothing to estimate")
        return out
    if s.unknown is not None:
        out["limiting_link"] = f"unknown inside the node: {s.unknown}"
        notes.append("the GPU pairs' paths are unknown (see limiting_link): NCCL's channels cannot be found, so "
                     "no figure is estimated")
        return out
    b_node, _per, _text = nic_sum(s)
    out["b_node_gbs"] = b_node
    ring1 = m.graphs.intra.get("RING")
    if ring1 is not None and len(s.gpus) > 1:
        out["b_gpu_gbs"] = round(ring1.n_channels * ring1.bw_intra, 2)
        if ring1.channels:
            out["ring"] = list(ring1.channels[0])
    out["channels"] = {where: {name: _graph_dict(g) for name, g in graphs.items() if g.n_channels}
                       for where, graphs in (("intra", m.graphs.intra), ("inter", m.graphs.inter)) if graphs}
    ring_env = {**m.env, "NCCL_ALGO": "Ring"}
    for nodes in NODE_COUNTS:
        point = _point(m, nodes, ring_env)
        if point is not None:
            out["points"].append(point)
    _notes(m, out, notes)
    pts = out["points"]
    out["limiting_link"] = pts[-1]["limit"] if pts else ("a single GPU: no intra-node all-reduce traffic"
                                                         if len(s.gpus) == 1 else "")
    return out


def _point(m: _Model, nodes: int, ring_env: Mapping[str, str]) -> dict | None:
    s = m.system
    if (nodes == 1 and len(s.gpus) < 2) or (nodes > 1 and not s.nets):
        return None
    timing = _timing(s, m.graphs, nodes)
    table = cost_table(s, m.graphs, nodes, m.env)
    best = plateau(table, timing, m.env)
    if best is None:
        return None
    cost, busbw = best
    ring = plateau(cost_table(s, m.graphs, nodes, ring_env), timing, ring_env)
    algos = {}
    for a in nccl_tuning.ALGORITHMS:
        got = plateau(table, timing, m.env, only=a)
        if got is not None:
            algos[a] = got[1]
    return {"nodes": nodes, "busbw_gbs": busbw, "algorithm": cost.algorithm, "protocol": cost.protocol,
            "ring_busbw_gbs": ring[1] if ring else None, "limit": _limit(s, m.graphs, cost, nodes),
            "channels": cost.n_channels, "per_channel_gbs": round(cost.per_channel, 2),
            "nccl_busbw_gbs": round(cost.bus_bw, 1), "algorithms": algos}


def _notes(m: _Model, out: dict, notes: list[str]) -> None:
    s = m.system
    _a, _p, reasons = nccl_tuning.enabled(s, 2, m.env)
    if reasons:
        notes.append("NCCL settings of the host honoured: " + ", ".join(reasons))
    if any(p["algorithm"].startswith("NVLS") for p in out["points"]):
        notes.append("NVLS assumes the driver and the fabric manager support NVLink multicast (NCCL checks "
                     "CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED); NCCL_NVLS_ENABLE=0 gives the ring figure")
    if not s.nets and s.ports:
        notes.append("the NICs are not placed in the host's PCIe tree (no source shows where they sit): NCCL's "
                     "channels to them cannot be found, so multi-node points are not estimated")
    elif not s.nets and len(s.gpus):
        notes.append("no Active compute NIC with a known rate reported: multi-node points are not estimated")
    if s.amd:
        notes.append("AMD GPUs run RCCL: RCCL's speed list is used for the search, NCCL's tuning model for the "
                     "rest (RCCL's own tuning tables are not modelled)")
    if any(g.budget_hit for g in list(m.graphs.intra.values()) + list(m.graphs.inter.values())):
        notes.append("the channel search ran out of its step budget on this mesh: the channel counts (and the "
                     "figures) are lower bounds of what NCCL's longer search may find")
    if any(g.fallback for g in list(m.graphs.intra.values()) + list(m.graphs.inter.values())):
        notes.append("NCCL's search finds no channel on some graph and falls back to one ring planned at 0.1 GB/s")


def _graph_dict(g: Graph) -> dict:
    return {"pattern": g.pattern, "channels": g.n_channels, "bw_intra_gbs": round(g.bw_intra, 3),
            "bw_inter_gbs": round(g.bw_inter, 3), "type_intra": g.type_intra, "type_inter": g.type_inter}


def curve(doc: Mapping[str, Any], nodes: int, sizes: Iterable[int], *, graph: nx.Graph | None = None,
          env: Mapping[str, str] | None = None) -> list[dict]:
    """Expected busbw at each message size (bytes) on ``nodes`` nodes: for each size the algorithm
    and protocol NCCL picks by its time model (latency + size / bandwidth, tuning.cc L630-655) and
    what nccl-tests would report: ``[{"size", "busbw_gbs", "algorithm", "protocol", "latency_us",
    "algo"}]`` (``algo`` the algorithm in lower case). Empty when the layout gives no figure."""
    m = _model(doc, graph, env)
    s = m.system
    if not s.gpus or s.unknown is not None or (nodes > 1 and not s.nets) or len(s.gpus) * nodes < 2:
        return []
    timing = _timing(s, m.graphs, nodes)
    table = cost_table(s, m.graphs, nodes, m.env)
    out = []
    for size in sizes:
        got = nccl_tuning.choose(table, int(size), **timing)
        if got is None:
            return []
        cost, t = got
        busbw = _busbw(cost, timing["n_ranks"], m.env, int(size), t)
        out.append({"size": int(size), "busbw_gbs": round(busbw, 2),
                    "algorithm": cost.algorithm, "protocol": cost.protocol, "latency_us": round(cost.latency_us, 1),
                    "algo": cost.algorithm.lower()})
    return out


def _channels(n: int) -> str:
    return f"{n} channel" + ("" if n == 1 else "s")


def _int(value: Any, default: int) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _gbs(v: float) -> str:
    return f"{_num(round(v, 1))} GB/s"


# ---------------------------------------------------------------------------------------- NCCL settings


def suggest_nccl_settings(doc: Mapping[str, Any]) -> list[dict]:
    """NCCL variables this layout calls for: [{"name", "value", "reason"}].

    Every value is non-empty. Device names outside ``shellsafe.SAFE_NAME`` (rule X02) never go
    into a value: such HCAs and netdevs are left out, the reason says how many, and a variable
    with no name left is not suggested. Reasons name only safe devices."""
    from apps.domain.findings.fabric import ib_hca_value, preferred_layer, unsafe_hcas
    from apps.domain.findings.pcie import nvb_reachable

    ctx = Ctx(doc, {})
    out: list[dict] = []
    layer, keep = preferred_layer(ctx)
    if keep:
        others = [n for n in ctx.nics if n not in keep]
        why = []
        if any(n.get("link_layer") and n.get("link_layer") != layer and ctx.nic_active(n) for n in others):
            why.append(f"it keeps only the {layer} ports (NCCL refuses to mix link layers, F04)")
        down = [n.get("name") for n in others if not ctx.nic_usable(n) and is_safe_name(n.get("name"))]
        if down:
            why.append(f"it leaves out ports that are not Active ({join(sorted(set(down), key=gpu_sort_key))})")
        if any(not ctx.is_compute(n) for n in others):
            why.append("it leaves out storage/management NICs")
        unsafe = unsafe_hcas(ctx.nics)
        if unsafe:
            why.append(f"it leaves out {_unsafe_count(len(unsafe), 'HCA')} (X02)")
        why.append("the leading '=' makes NCCL match names exactly, so mlx5_1 does not also select mlx5_10 (F07)")
        value = ib_hca_value(keep)
        if value:
            kept = sum(1 for n in keep if is_safe_name(n.get("name")))
            state = "Active" if all(ctx.nic_active(n) for n in keep) else "Active (or not reported)"
            out.append({"name": "NCCL_IB_HCA", "value": value,
                        "reason": f"Exact list of the {kept} {state} compute {layer or 'RDMA'} port(s): " +
                                  "; ".join(why) + "."})
        netdevs = []
        for n in keep:
            node = ctx.nodes.get(n.get("node") or "") or {}
            netdevs += [str(d) for d in as_list((node.get("attrs") or {}).get("netdevs"))]
            netdevs += [str(d) for d in as_list(n.get("netdevs"))]
        netdevs = sorted(set(netdevs), key=gpu_sort_key)
        safe = [d for d in netdevs if is_safe_name(d)]
        if safe:
            left_out = len(netdevs) - len(safe)
            unsafe_note = f"; it leaves out {_unsafe_count(left_out, 'interface')} (X02)" if left_out else ""
            out.append({"name": "NCCL_SOCKET_IFNAME", "value": "=" + ",".join(safe),
                        "reason": "Bootstrap over the IP interfaces of the compute HCAs (exact names); use your "
                                  "routable management interface instead if these carry no IP address on every "
                                  f"node{unsafe_note}."})
        if len(keep) > 1:
            rail = ctx.rail_design()
            out.append({"name": "NCCL_CROSS_NIC", "value": "2",
                        "reason": ("One NIC per GPU (rail design): keep the default 2; set 0 only if every rail is "
                                   "its own switch on all nodes, 1 if the fabric is not rail-optimized (F08)."
                                   if rail else
                                   "Several NICs shared by the GPUs: keep the default 2; set 1 if the fabric is not "
                                   "rail-optimized (F08).")})
    names = ctx.gpu_names
    # pairs NCCL sends through host memory because of its P2P level (not a driver that refuses
    # P2P, where NCCL_P2P_LEVEL cannot help, nor pairs whose mechanism is unknown)
    shm = [(a, b, ctx.pair_class(a, b)) for i, a in enumerate(names) for b in names[i + 1:]
           if ctx.pair_class(a, b) in ("PHB", "NODE", "SYS") and not nvb_reachable(ctx, a, b)
           and ctx.pair(a, b).get("shm_cause", "level") == "level"
           and ctx.pair(a, b).get("mechanism") != "unknown"]
    if shm:
        level = "SYS" if any(c == "SYS" for *_, c in shm) else "PHB"
        out.append({"name": "NCCL_P2P_LEVEL", "value": level,
                    "reason": f"{len(shm)} GPU pair(s) use host memory by default (P01/P02). Only set this after "
                              "p2pBandwidthLatencyTest shows healthy P2P on this platform (ACS off, P04); otherwise "
                              "leave it unset."})
    far = [r for r in as_list(doc.get("gpu_nic")) if isinstance(r, Mapping) and not r.get("gdr")
           and normalize_token(r.get("path_class")) in ("PHB", "NODE", "SYS") and not r.get("pxn_via")]
    if far:
        out.append({"name": "NCCL_NET_GDR_LEVEL", "value": "PHB",
                    "reason": f"{len(far)} GPU(s) have no NIC on their PCIe switch, so GPUDirect RDMA is off for them "
                              "(G01). Experiment with this only if a GDR perftest (ib_write_bw --use_cuda) is good; "
                              "remove it otherwise."})
    return out


def _unsafe_count(count: int, what: str) -> str:
    """``"1 HCA whose name has characters unsafe in a shell"`` (the X02 clause of a reason)."""
    return (f"{count} {what}{'' if count == 1 else 's'} whose name{' has' if count == 1 else 's have'} "
            "characters unsafe in a shell")
