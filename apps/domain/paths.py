"""Intra-host paths on a HostGraph: GPU<->GPU pairs and the PCIe/CPU routes between devices (the NIC
NCCL gives each GPU is :mod:`apps.domain.nic_paths`).

Everything here follows NCCL v2.30 defaults (domain.md sections 1a, 1c, 3.1):

* **P2P level.** NCCL does GPU peer-to-peer up to path type ``PXB`` (``p2pLevel = PATH_PXB``,
  paths.cc L356-365, since 2.23; AMD x86 hosts with at most 2 GPUs get ``SYS``). NCCL folds
  nvidia-smi ``PHB`` and ``NODE`` into its ``PHB``. Farther pairs use SHM: the data goes through
  a host-memory buffer local to the receiving GPU (``addInterStep(CPU, cpu(g), GPU, p, GPU, g)``).
* **NVLink.** A direct NVLink bond is path ``NVL``; both GPUs on NVSwitch is ``NVL`` through the
  fabric; a pair without NVLink whose GPUs share an NVLink peer is relayed through that GPU
  (path ``NVB``, N04), which is still peer-to-peer.
* **P2P status.** When ``nvidia-smi topo -p2p r``/``w`` says a pair is not ``OK``, NCCL falls back
  to SHM for PCIe pairs and refuses NVLink pairs (N02, P03).
* **Unknown.** A device no source places has no path class: no pair verdict is made for it
  (mechanism ``unknown``). An NCCL topology file without ``<nvlink>``
  (``graph["nvlink_reported"]`` False) cannot tell NVLink pairs from PCIe ones: its pairs are
  ``unknown`` too, with their PCIe path in the reason.
* **GeForce.** GeForce RTX drivers report PCIe peer access as not supported, which NCCL checks
  (NVML P2P status, paths.cc L373-411 [S2]): without a ``topo -p2p`` matrix such pairs are taken
  as SHM, marked assumed (``shm_cause`` "driver").

Functions take the HostGraph ``G`` first (see the engine contract) and return plain dicts in the
shapes of the snapshot document (``apps/domain/analysis.py``): hop dicts
``{"from", "to", "from_id", "to_id", "kind", "spec_gbs", "expected_gbs", "flows", "assumed", "note"}``
(``assumed``: the figures come from ``assumptions.assume``, the note says what to send to know).

Optional facts read from the graph when present: ``G.graph["p2p"]`` (``nvidia-smi topo -p2p``
matrices ``{mode: {row: {col: token}}}``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import networkx as nx

from apps.domain import hostgraph
from apps.domain.names import cell, natural_key, normalize_token

__all__ = [
    "Route",
    "nccl_type",
    "path_class",
    "tree_route",
    "gpu_names",
    "nic_names",
    "pair_route",
    "gpu_pair",
    "all_gpu_pairs",
    "route_hops",
    "bottleneck",
    "edge_key",
    "count_flows",
    "cpu_of",
    "socket_path",
    "steps_of",
    "ancestry",
    "nvlinks",
    "nvswitch_links",
    "nccl_rank",
    "route_gbs",
    "edge_gbs",
]

# NCCL path types (graph.h) with their order; PHB and NODE are both NCCL's PHB.
NCCL_TYPES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS")
P2P_LEVEL_DEFAULT = "PXB"
P2P_OK = "OK"


def nccl_type(cls: str | None) -> str | None:
    """NCCL path type for a topo -m token: ``NV12`` -> ``NVL``, ``NODE`` -> ``PHB``."""
    if cls is None:
        return None
    cls = normalize_token(cls) or cls  # SOC -> SYS, NV012 -> NV12 (apps.domain.names)
    if cls.startswith("NV") and cls != "NODE":
        return "NVL"
    return "PHB" if cls == "NODE" else cls


_RANKS = {t: i for i, t in enumerate(NCCL_TYPES)}


def nccl_rank(t: str | None) -> int:
    """Place of an NCCL path type in NCCL's order (``LOC`` 0 ... ``DIS``, graph.h); an unknown type
    or None ranks as ``DIS`` (no path). The one path-type order of the engine: the NIC choice here
    and NCCL's system, search and tuning read it."""
    return _RANKS.get(t, _RANKS["DIS"])


# --------------------------------------------------------------------------------------------
# the PCIe/CPU tree


def ancestry(G: nx.Graph, n: str) -> list[str]:
    """``n`` and every node above it, up to its CPU (the tree defined by the ``parent`` attrs)."""
    return hostgraph.ancestors(G, n)


def cpu_of(G: nx.Graph, n: str) -> str | None:
    return _memoized(G, ("cpu_of", n), lambda: _top_cpu(G, n))


def _top_cpu(G: nx.Graph, n: str) -> str | None:
    top = ancestry(G, n)[-1]
    return top if G.nodes[top].get("kind") == "cpu" else None


def socket_path(G: nx.Graph, c1: str, c2: str) -> list[str] | None:
    """CPU nodes from ``c1`` to ``c2`` over inter-socket links (None when not connected)."""
    if c1 == c2:
        return [c1]
    return _memoized(G, ("socket_path", c1, c2), lambda: _shortest_socket_path(G, c1, c2))


def _shortest_socket_path(G: nx.Graph, c1: str, c2: str) -> list[str] | None:
    sub = nx.subgraph_view(G, filter_edge=lambda u, v: G.edges[u, v].get("kind") == "inter_socket")
    try:
        return nx.shortest_path(sub, c1, c2)
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        return None


def _in_tree(G: nx.Graph, n: str) -> bool:
    return cpu_of(G, n) is not None


def tree_route(G: nx.Graph, a: str, b: str) -> list[str] | None:
    """Nodes on the PCIe path from ``a`` to ``b`` (``hostgraph.pcie_path``): up to the lowest
    common ancestor and down, crossing the inter-socket link(s) when the two sit under different
    CPUs. None when ``a`` or ``b`` is outside the tree or the CPUs are not linked."""
    found = _memoized(G, ("tree_route", a, b), lambda: _tree_route(G, a, b))
    return list(found) if found is not None else None


def _tree_route(G: nx.Graph, a: str, b: str) -> list[str] | None:
    if not (_in_tree(G, a) and _in_tree(G, b)):
        return None
    nodes = hostgraph.pcie_path(G, a, b)
    if all(G.has_edge(u, v) for u, v in zip(nodes, nodes[1:])):
        return nodes
    up_a, up_b = ancestry(G, a), ancestry(G, b)
    mid = socket_path(G, up_a[-1], up_b[-1])
    if mid is None:
        return None
    return up_a + mid[1:-1] + list(reversed(up_b))


def path_class(G: nx.Graph, a: str, b: str) -> str | None:
    """topo -m token for the PCIe path between two devices, NVLink ignored
    (``hostgraph.pcie_class``: the lowest common ancestor rule); None when a device is outside
    the PCIe/CPU tree."""
    if a == b:
        return "X"
    if not (_in_tree(G, a) and _in_tree(G, b)):
        return None
    return hostgraph.pcie_class(G, a, b)


# --------------------------------------------------------------------------------------------
# routes and hops


@dataclass(frozen=True)
class Route:
    """A way data moves between two devices.

    ``steps`` are ``(u, v)`` graph edges in travel order, plus two pseudo-steps:
    ``("mem", cpu)`` for a bounce through host memory on that CPU, and ``("nvsw", gpu)`` /
    ``("nvsw_in", gpu)`` for the hop from/into a GPU through the NVSwitch fabric.
    """

    src: str
    dst: str
    mechanism: str
    p2p: bool
    reason: str
    path_class: str | None
    nccl_path: str | None
    steps: tuple[tuple[str, str], ...] = ()
    via: str | None = None
    notes: dict = field(default_factory=dict, compare=False)


def edge_key(step: tuple[str, str]) -> tuple:
    """Key under which a step's link is counted (undirected for graph edges)."""
    if step[0] in ("mem", "nvsw", "nvsw_in"):
        return ("nvsw", step[1]) if step[0] in ("nvsw", "nvsw_in") else step
    return tuple(sorted(step))


def steps_of(nodes: Iterable[str]) -> list[tuple[str, str]]:
    nodes = list(nodes)
    return list(zip(nodes, nodes[1:]))


def _name(G: nx.Graph, n: str) -> str:
    d = G.nodes[n] if n in G else {}
    if d.get("kind") in ("gpu", "nic", "cpu"):
        return n
    return d.get("label") or n


def edge_gbs(d: Mapping) -> float | None:
    """An edge's GB/s as routes count it: expected, else spec."""
    v = d.get("expected_gbs")
    return v if v is not None else d.get("spec_gbs")


def _nvswitch_edges(G: nx.Graph, g: str) -> list[dict]:
    return _memoized(G, ("nvsw_edges", g), lambda: _find_nvswitch_edges(G, g))


def _find_nvswitch_edges(G: nx.Graph, g: str) -> list[dict]:
    return [
        G.edges[g, n]
        for n in G.neighbors(g)
        if G.nodes[n].get("kind") == "nvswitch" and G.edges[g, n].get("kind") == "nvlink"
    ]


def _sum(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(sum(vals), 4) if vals else None


def route_hops(G: nx.Graph, route: Route, flows: Mapping | None = None) -> list[dict]:
    """Hop dicts (snapshot-document shape) for ``route``; ``flows`` maps edge_key -> count."""
    hops = []
    flows = flows or {}
    for step in route.steps:
        f = int(flows.get(edge_key(step), 1) or 1)
        if step[0] == "mem":
            cpu = step[1]
            numa = G.nodes[cpu].get("numa")
            where = f"NUMA node {numa}" if numa is not None else cpu
            hops.append({
                "from": cpu, "to": cpu, "from_id": cpu, "to_id": cpu, "kind": "host_memory_copy",
                "spec_gbs": None, "expected_gbs": None, "flows": f, "assumed": False,
                "note": route.notes.get("mem") or f"data staged in host memory on {where}",
            })
            continue
        if step[0] in ("nvsw", "nvsw_in"):
            g = step[1]
            edges = _nvswitch_edges(G, g)
            links = sum(int(e.get("links") or 0) for e in edges)
            a, b = (g, "NVSwitch") if step[0] == "nvsw" else ("NVSwitch", g)
            hops.append({
                "from": a, "to": b, "from_id": g if a == g else "nvswitch", "to_id": g if b == g else "nvswitch",
                "kind": "nvswitch", "spec_gbs": _sum(e.get("spec_gbs") for e in edges),
                "expected_gbs": _sum(e.get("expected_gbs") for e in edges), "flows": f,
                "assumed": any(bool(e.get("assumed")) for e in edges),
                "note": (f"{links} NVLinks of {g} into the NVSwitch fabric" if links else None)
                if not any(e.get("assumed") for e in edges) else
                "; ".join(x for x in (f"{links} NVLinks of {g} into the NVSwitch fabric" if links else None,
                                      next((e.get("note") for e in edges if e.get("note")), None)) if x),
            })
            continue
        u, v = step
        d = G.edges[u, v]
        hops.append({
            "from": _name(G, u), "to": _name(G, v), "from_id": u, "to_id": v,
            "kind": d.get("kind") or "pcie", "spec_gbs": d.get("spec_gbs"),
            "expected_gbs": d.get("expected_gbs"), "flows": f, "assumed": bool(d.get("assumed")),
            "note": d.get("note"),
        })
    return hops


def bottleneck(hops: list[dict]) -> tuple[int | None, float | None]:
    """Index and GB/s of the slowest hop (expected, else spec); hops without a figure are skipped."""
    best: tuple[int | None, float | None] = (None, None)
    for i, h in enumerate(hops):
        v = edge_gbs(h)
        if v is not None and (best[1] is None or v < best[1]):
            best = (i, v)
    return best


def route_gbs(G: nx.Graph, route: Route) -> float | None:
    """``bottleneck(route_hops(G, route))[1]`` without building the hop dicts."""
    best = None
    for step in route.steps:
        if step[0] == "mem":
            continue
        if step[0] in ("nvsw", "nvsw_in"):
            edges = _nvswitch_edges(G, step[1])
            v = _sum(e.get("expected_gbs") for e in edges)
            if v is None:
                v = _sum(e.get("spec_gbs") for e in edges)
        else:
            v = edge_gbs(G.edges[step[0], step[1]])
        if v is not None and (best is None or v < best):
            best = v
    return best


# --------------------------------------------------------------------------------------------
# GPU pairs


_memoized = hostgraph.memoized  # compute(), remembered under a key while hostgraph.frozen(G) holds


def gpu_names(G: nx.Graph) -> list[str]:
    """GPU node ids ordered by index."""
    return list(_memoized(G, ("gpu_names",), lambda: _gpu_names(G)))


def _gpu_names(G: nx.Graph) -> list[str]:
    gpus = [n for n, d in G.nodes(data=True) if d.get("kind") == "gpu"]
    return sorted(gpus, key=lambda n: (G.nodes[n].get("index") if G.nodes[n].get("index") is not None else 1 << 30, n))


def nic_names(G: nx.Graph) -> list[str]:
    """NIC port node ids in natural name order (NCCL's device order; rail index = position)."""
    return list(_memoized(G, ("nic_names",), lambda: _nic_names(G)))


def _nic_names(G: nx.Graph) -> list[str]:
    return sorted((n for n, d in G.nodes(data=True) if d.get("kind") == "nic"), key=natural_key)


def nvlinks(G: nx.Graph, a: str, b: str) -> int:
    if G.has_edge(a, b) and G.edges[a, b].get("kind") == "nvlink":
        return int(G.edges[a, b].get("links") or 1)
    return 0


def _link_words(G: nx.Graph, a: str, b: str) -> tuple[str, str]:
    """(matrix token, words) of the direct GPU link a-b: NVLink bond or xGMI (RCCL's NVL link)."""
    d = G.edges[a, b]
    token = hostgraph.link_token(d)
    if d.get("fabric") == "xgmi":
        return token, "direct xGMI link (AMD Infinity Fabric, which RCCL treats as an NVLink path)"
    return token, f"direct NVLink bond of {d.get('links')} links ({token})"


def nvswitch_links(G: nx.Graph, g: str) -> int:
    return sum(int(e.get("links") or 1) for e in _nvswitch_edges(G, g))


def _p2p_level(G: nx.Graph) -> str:
    """NCCL's default P2P level: PXB, SYS on AMD x86 with at most 2 GPUs (paths.cc L356-362 at
    v2.30.7-1 [S2]). AMD GPUs run RCCL, whose default is SYS except through Intel, ARM and
    Zhaoxin CPUs (PXB; rccl src/graph/paths.cc L284-302 at commit 0cbce2a7)."""
    vendor = (G.graph.get("cpu_vendor") or "").lower()
    if _amd_gpus(G):
        return P2P_LEVEL_DEFAULT if vendor in ("intel", "arm", "zhaoxin") else "SYS"
    if vendor == "amd" and len(gpu_names(G)) <= 2:
        return "SYS"
    return P2P_LEVEL_DEFAULT


def _amd_gpus(G: nx.Graph) -> bool:
    from apps.domain.bandwidth import gpu_generation

    model = G.graph.get("gpu_model")
    return bool(model) and str(gpu_generation(model).family or "").startswith("AMD")


def _p2p_status(G: nx.Graph, a: str, b: str, nvlink: bool, p2p: Mapping | None) -> tuple[str, str] | None:
    """(mode, token) of the first ``topo -p2p`` matrix saying the pair cannot do P2P, else None."""
    p2p = p2p if p2p is not None else G.graph.get("p2p") or {}
    for mode, matrix in sorted(p2p.items()):
        m = str(mode).lower()[:1]
        if m not in ("r", "w") and not (m == "n" and nvlink):
            continue
        tok = cell(matrix, a, b)
        if tok and tok.strip().upper() not in (P2P_OK, "X"):
            return str(mode), tok.strip().upper()
    return None


_P2P_WORDS = {
    "CNS": "the chipset does not support it",
    "GNS": "the GPU does not support it",
    "TNS": "the topology does not support it",
    "NS": "it is not supported",
    "DR": "it is disabled by a driver registry key",
    "U": "the status is unknown",
}


def _shm_route(G: nx.Graph, a: str, b: str) -> list[tuple[str, str]] | None:
    """a -> host memory local to b (NCCL's SHM / 'divert through the CPU') -> b."""
    cb = cpu_of(G, b)
    ca = cpu_of(G, a)
    if ca is None or cb is None:
        return None
    up_a = ancestry(G, a)
    up_b = ancestry(G, b)
    mid = socket_path(G, ca, cb)
    if mid is None:
        return None
    nodes_to_cpu = up_a + mid[1:]
    return steps_of(nodes_to_cpu) + [("mem", cb)] + steps_of(reversed(up_b))


def pair_route(G: nx.Graph, a: str, b: str, *, p2p: Mapping | None = None) -> Route:
    """How NCCL moves data from GPU ``a`` to GPU ``b`` (defaults of NCCL 2.30).

    >>> G = nx.Graph(cpu_vendor="intel")
    >>> G.add_node("cpu0", kind="cpu", numa=0); G.add_node("rc0", kind="root_complex", parent="cpu0")
    >>> G.add_node("sw", kind="switch", parent="rc0")
    >>> for g in ("GPU0", "GPU1"): G.add_node(g, kind="gpu", index=int(g[3]), parent="sw")
    >>> G.add_edges_from([("rc0", "cpu0", {"kind": "cpu_link"}), ("sw", "rc0", {"kind": "pcie"}),
    ...                   ("GPU0", "sw", {"kind": "pcie"}), ("GPU1", "sw", {"kind": "pcie"})])
    >>> r = pair_route(G, "GPU0", "GPU1"); (r.mechanism, r.p2p, r.path_class)
    ('pcie_p2p', True, 'PIX')
    """
    links = nvlinks(G, a, b)
    pcls = path_class(G, a, b)
    if links:
        bad = _p2p_status(G, a, b, True, p2p)
        steps = ((a, b),)
        token, words = _link_words(G, a, b)
        if bad:
            return Route(a, b, "nvlink", False,
                         f"{a} and {b} share {links} NVLinks but nvidia-smi topo -p2p {bad[0]} says {bad[1]}: "
                         "NCCL stops with 'P2P is disabled between NVLINK connected GPUs' (likely a hardware "
                         "or driver fault)", token, "NVL", steps)
        return Route(a, b, "nvlink", True, words, token, "NVL", steps)
    sa, sb = nvswitch_links(G, a), nvswitch_links(G, b)
    if sa and sb:
        n = min(sa, sb)
        bad = _p2p_status(G, a, b, True, p2p)
        steps = (("nvsw", a), ("nvsw_in", b))
        if bad:
            return Route(a, b, "nvswitch", False,
                         f"{a} and {b} reach each other through NVSwitch but nvidia-smi topo -p2p {bad[0]} says "
                         f"{bad[1]}: NCCL stops with 'P2P is disabled between NVLINK connected GPUs'",
                         f"NV{n}", "NVL", steps)
        return Route(a, b, "nvswitch", True, f"through the NVSwitch fabric ({n} NVLinks per GPU)",
                     f"NV{n}", "NVL", steps)
    # NVB: relay through a GPU that has NVLink to both (NCCL allows one intermediate GPU)
    relays = []
    for k in gpu_names(G):
        if k in (a, b):
            continue
        la, lb = nvlinks(G, a, k), nvlinks(G, k, b)
        if la and lb:
            relays.append((-min(la, lb), G.nodes[k].get("index") or 0, k))
    if relays:
        k = sorted(relays)[0][2]
        bad = _p2p_status(G, a, k, True, p2p) or _p2p_status(G, k, b, True, p2p)
        steps = ((a, k), (k, b))
        if not bad:
            return Route(a, b, "nvlink", True,
                         f"no direct NVLink; NCCL relays through {k} over NVLink (path NVB), still peer-to-peer",
                         pcls, "NVB", steps, via=k)
    level = _p2p_level(G)
    ntype = nccl_type(pcls)
    if pcls is None:
        unplaced = [g for g in (a, b) if G.nodes[g].get("placement") == "unknown"]
        where = f"{' and '.join(unplaced)} {'is' if len(unplaced) == 1 else 'are'} not placed by any source" \
            if unplaced else f"the PCIe path between {a} and {b} is unknown"
        return Route(a, b, "unknown", None, f"{where}: peer-to-peer or SHM cannot be told", None, None, ())
    cause = "level"
    if G.graph.get("nvlink_reported") is False:
        return Route(a, b, "unknown", None,
                     "NVLink not reported (no source of this report shows NVLink, see assumptions): NVLink or "
                     f"not cannot be told; by PCIe alone the pair is {pcls}", pcls, ntype, ())
    if nccl_rank(ntype) <= nccl_rank(level):
        bad = _p2p_status(G, a, b, False, p2p)
        nodes = tree_route(G, a, b) or [a, b]
        geforce = not bad and not (p2p if p2p is not None else G.graph.get("p2p")) and _geforce(G, a, b)
        if not bad and not geforce:
            return Route(a, b, "pcie_p2p", True,
                         f"PCIe peer-to-peer ({pcls}: within NCCL's default P2P level {level})",
                         pcls, ntype, tuple(steps_of(nodes)))
        if geforce:
            cause = "driver"
            reason = (f"the wiring allows PCIe P2P ({pcls}, within NCCL's P2P level {level}) but GeForce drivers "
                      "report peer access as not supported "
                      "(assumed; send nvidia-smi topo -p2p r to know): NCCL uses host memory (SHM), and "
                      "NCCL_P2P_LEVEL cannot change that")
        else:
            cause = "p2p_status"
            reason = (f"the wiring allows PCIe P2P ({pcls}) but nvidia-smi topo -p2p {bad[0]} says {bad[1]} "
                      f"({_P2P_WORDS.get(bad[1], 'P2P is refused')}); NCCL uses host memory (SHM) instead")
    else:
        where = {
            "PHB": "through the CPU's PCIe host bridge",
            "NODE": "between PCIe host bridges of one CPU",
            "SYS": "across the inter-socket link",
        }.get(pcls, pcls)
        reason = (f"path {pcls} ({where}) is beyond NCCL's default P2P level {level}: "
                  "NCCL copies through host memory (SHM)")
    steps = _shm_route(G, a, b) or []
    cb = cpu_of(G, b)
    return Route(a, b, "shm", False, reason, pcls, ntype, tuple(steps),
                 notes={"mem": f"NCCL SHM: {a} writes into a host-memory buffer local to {b} ({cb}), {b} reads it",
                        "shm_cause": cause})


def _geforce(G: nx.Graph, a: str, b: str) -> bool:
    """Both GPUs are GeForce RTX cards (``bandwidth.GpuInfo.geforce``), whose driver refuses PCIe P2P."""
    from apps.domain.bandwidth import gpu_generation

    models = [G.nodes[g].get("model") or G.graph.get("gpu_model") for g in (a, b)]
    return all(m and gpu_generation(m).geforce for m in models)


def _pair_dict(G: nx.Graph, r: Route, flows: Mapping | None = None) -> dict:
    hops = route_hops(G, r, flows)
    idx, gbs = bottleneck(hops)
    return {
        "a": r.src, "b": r.dst, "path_class": r.path_class, "nccl_path": r.nccl_path,
        "mechanism": r.mechanism, "p2p": r.p2p, "reason": r.reason, "via": r.via,
        "bottleneck": idx, "bottleneck_gbs": gbs, "hops": hops,
        # why NCCL uses SHM: "level" (beyond NCCL's P2P level), "p2p_status" (topo -p2p refuses),
        # "driver" (GeForce: assumed refused); null for peer-to-peer and unknown pairs
        "shm_cause": r.notes.get("shm_cause") if r.mechanism == "shm" else None,
        "assumed": r.notes.get("shm_cause") == "driver" or any(h.get("assumed") for h in hops),
    }


def gpu_pair(G: nx.Graph, a: str, b: str, *, p2p: Mapping | None = None, flows: Mapping | None = None) -> dict:
    """The ``gpu_pairs`` entry for ``a`` -> ``b``: mechanism, p2p, reason, hops, bottleneck.

    ``flows`` (edge_key -> count, see :func:`count_flows`) fills each hop's ``flows``; without it
    every hop carries 1 flow.
    """
    return _pair_dict(G, pair_route(G, a, b, p2p=p2p), flows)


def all_gpu_pairs(G: nx.Graph, *, p2p: Mapping | None = None) -> tuple[list[Route], list[dict]]:
    """Routes and ``gpu_pairs`` entries (a < b by index) for every GPU pair; hop flows count
    the pairs that share each link when every pair transfers at once."""
    gpus = gpu_names(G)
    routes = [pair_route(G, a, b, p2p=p2p) for i, a in enumerate(gpus) for b in gpus[i + 1:]]
    flows = count_flows(routes)
    return routes, [_pair_dict(G, r, flows) for r in routes]


def count_flows(routes: Iterable[Route]) -> Counter:
    """Number of routes using each link (edge_key), each route counted once per link."""
    c: Counter = Counter()
    for r in routes:
        for k in {edge_key(s) for s in r.steps}:
            c[k] += 1
    return c
