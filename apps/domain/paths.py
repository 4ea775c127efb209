"""Intra-host paths on a HostGraph: GPU<->GPU pairs and the NIC NCCL gives each GPU.

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
* **NIC choice** (``ncclTopoGetLocalNet``, topo.cc L2039-2075): among active NIC ports, those with
  the highest bandwidth, then the lowest NCCL path type from the GPU; the GPUs closest to the first
  of them share them, each starting at its device index modulo their count (``mirrorBits`` when the
  NIC count is a power of two) and moving one NIC on per channel, so a GPU with two ports on its
  switch uses both and one with nine uses nine (``gpu_nic[].nics``). A NIC farther than ``PXB`` is
  reached through PXN when an NVLink peer of the GPU is the NIC's local GPU and is ``PIX``/``PXB``
  to it (paths.cc L812-842). :func:`nccl_nics` lists the ports NCCL gives GPU traffic at all:
  every port within GPUDirect reach of some GPU (every rail of a two-NIC-per-GPU host).
* **GDR level.** NCCL's default GPUDirect RDMA level is ``P2C`` (``NCCL_NET_GDR_C2C=1``, the
  default since 2.27: paths.cc L465 and L511 at v2.30.7-1 [S2]; 0 and so ``PXB`` in 2.26). x86
  hosts have no P2C path, so there GDR stops at ``PXB`` (G01); on Grace a GPU attached over
  NVLink-C2C reaches a NIC of its own CPU through ``P2C`` (GPU-C2C-CPU-PCIe-NIC, NCCL's
  ``mergePathType(C2C, PHB)``, paths.cc L203-208 and L794-809) and keeps GDR. Farther, NCCL
  stages the data in host memory local to the GPU. With PXN the proxy GPU's distance counts.
* **Unknown.** A device no source places has no path class: no pair verdict, NIC choice or GDR
  verdict is made for it (mechanism ``unknown``). An NCCL topology file without ``<nvlink>``
  (``graph["nvlink_reported"]`` False) cannot tell NVLink pairs from PCIe ones: its pairs are
  ``unknown`` too, with their PCIe path in the reason.
* **GeForce.** GeForce RTX drivers report PCIe peer access as not supported, which NCCL checks
  (NVML P2P status, paths.cc L373-411 [S2]): without a ``topo -p2p`` matrix such pairs are taken
  as SHM, marked assumed (``shm_cause`` "driver").

Functions take the HostGraph ``G`` first (see the engine contract) and return plain dicts in the
shapes of the snapshot document (``apps/domain/analysis.py``): hop dicts
``{"from", "to", "from_id", "to_id", "kind", "spec_gbs", "expected_gbs", "flows", "assumed", "note"}``
(``assumed``: the figures come from ``bandwidth.assume``, the note says what to send to know).

Optional facts read from the graph when present: ``G.graph["p2p"]`` (``nvidia-smi topo -p2p``
matrices ``{mode: {row: {col: token}}}``), ``G.graph["gdr_module"]`` (False when neither
nvidia_peermem nor DMA-BUF GDR is available), node attr ``gdr`` (False when NCCL's topology dump
says ``gdr="0"`` for the GPU or NIC), node attr ``compute`` on NICs.
"""

from __future__ import annotations

import math
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
    "nic_choice",
    "gpu_nic_choice",
    "gpu_nic_matrix",
    "nccl_nics",
    "route_hops",
    "bottleneck",
    "edge_key",
    "count_flows",
]

# NCCL path types (graph.h) with their order; PHB and NODE are both NCCL's PHB.
NCCL_TYPES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS")
P2P_LEVEL_DEFAULT = "PXB"
GDR_LEVEL_DEFAULT = "P2C"  # NCCL_NET_GDR_C2C=1 (default since 2.27): P2C, which only C2C platforms have
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


def _rank(t: str | None) -> int:
    return _RANKS.get(t, len(NCCL_TYPES))


# --------------------------------------------------------------------------------------------
# the PCIe/CPU tree


def _ancestry(G: nx.Graph, n: str) -> list[str]:
    """``n`` and every node above it, up to its CPU (the tree defined by the ``parent`` attrs)."""
    return hostgraph.ancestors(G, n)


def _cpu_of(G: nx.Graph, n: str) -> str | None:
    return _memoized(G, ("cpu_of", n), lambda: _top_cpu(G, n))


def _top_cpu(G: nx.Graph, n: str) -> str | None:
    top = _ancestry(G, n)[-1]
    return top if G.nodes[top].get("kind") == "cpu" else None


def _socket_path(G: nx.Graph, c1: str, c2: str) -> list[str] | None:
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
    return _cpu_of(G, n) is not None


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
    up_a, up_b = _ancestry(G, a), _ancestry(G, b)
    mid = _socket_path(G, up_a[-1], up_b[-1])
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


def _steps(nodes: Iterable[str]) -> list[tuple[str, str]]:
    nodes = list(nodes)
    return list(zip(nodes, nodes[1:]))


def _name(G: nx.Graph, n: str) -> str:
    d = G.nodes[n] if n in G else {}
    if d.get("kind") in ("gpu", "nic", "cpu"):
        return n
    return d.get("label") or n


def _gbs(d: Mapping) -> float | None:
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
        v = _gbs(h)
        if v is not None and (best[1] is None or v < best[1]):
            best = (i, v)
    return best


def _route_gbs(G: nx.Graph, route: Route) -> float | None:
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
            v = _gbs(G.edges[step[0], step[1]])
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


def _nvlinks(G: nx.Graph, a: str, b: str) -> int:
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


def _nvswitch_links(G: nx.Graph, g: str) -> int:
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
    cb = _cpu_of(G, b)
    ca = _cpu_of(G, a)
    if ca is None or cb is None:
        return None
    up_a = _ancestry(G, a)
    up_b = _ancestry(G, b)
    mid = _socket_path(G, ca, cb)
    if mid is None:
        return None
    nodes_to_cpu = up_a + mid[1:]
    return _steps(nodes_to_cpu) + [("mem", cb)] + _steps(reversed(up_b))


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
    links = _nvlinks(G, a, b)
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
    sa, sb = _nvswitch_links(G, a), _nvswitch_links(G, b)
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
        la, lb = _nvlinks(G, a, k), _nvlinks(G, k, b)
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
    if _rank(ntype) <= _rank(level):
        bad = _p2p_status(G, a, b, False, p2p)
        nodes = tree_route(G, a, b) or [a, b]
        geforce = not bad and not (p2p if p2p is not None else G.graph.get("p2p")) and _geforce(G, a, b)
        if not bad and not geforce:
            return Route(a, b, "pcie_p2p", True,
                         f"PCIe peer-to-peer ({pcls}: within NCCL's default P2P level {level})",
                         pcls, ntype, tuple(_steps(nodes)))
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
    cb = _cpu_of(G, b)
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


# --------------------------------------------------------------------------------------------
# GPU -> NIC


def _nic_rate_gbs(G: nx.Graph, n: str) -> float | None:
    rate = G.nodes[n].get("rate_gbps")
    return round(float(rate) / 8, 4) if rate else None


def _direct_nic_route(G: nx.Graph, g: str, n: str, gdr: bool, note: str | None = None) -> list[tuple[str, str]]:
    """GPU -> NIC: straight over PCIe (GDR) or staged in host memory local to the GPU."""
    if gdr:
        nodes = tree_route(G, g, n)
        return _steps(nodes) if nodes else []
    cg, cn = _cpu_of(G, g), _cpu_of(G, n)
    if cg is None or cn is None:
        return []
    mid = _socket_path(G, cg, cn)
    if mid is None:
        return []
    return _steps(_ancestry(G, g)) + [("mem", cg)] + _steps(mid) + _steps(reversed(_ancestry(G, n)))


def _cell(G: nx.Graph, g: str, n: str) -> tuple[str | None, str | None, float | None]:
    """(topo class, NCCL type, NCCL-style path bandwidth incl. the port rate) for GPU g -> NIC n."""
    return _memoized(G, ("cell", g, n), lambda: _compute_cell(G, g, n))


def _compute_cell(G: nx.Graph, g: str, n: str) -> tuple[str | None, str | None, float | None]:
    cls = path_class(G, g, n)
    if cls is None:
        return None, None, None
    rate = _nic_rate_gbs(G, n)
    if rate is None and _memoized(G, ("some_nic_rate",), lambda: any(_nic_rate_gbs(G, x) for x in nic_names(G))):
        # a port whose rate nobody reported, beside ports whose rates are known: its bandwidth is
        # unknown, not its PCIe path's (which would rank it above every NIC of known rate)
        return cls, _gpu_nic_type(G, g, cls), None
    nodes = tree_route(G, g, n) or []
    specs = [G.edges[u, v].get("spec_gbs") for u, v in _steps(nodes)]
    specs.append(rate)
    vals = [s for s in specs if s is not None]
    return cls, _gpu_nic_type(G, g, cls), (min(vals) if vals else None)


def _gpu_nic_type(G: nx.Graph, g: str, cls: str) -> str | None:
    """NCCL's path type GPU -> NIC: the topo token's type, except that a GPU attached to its CPU over
    NVLink-C2C reaches a NIC of that CPU (PHB/NODE) through P2C, NCCL's ``mergePathType(C2C, PHB)``
    (paths.cc L203-208, L794-809 at v2.30.7-1 [S2])."""
    t = nccl_type(cls)
    if t == "PHB" and G.nodes[g].get("c2c"):
        return "P2C"
    return t


def _is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def _mirror_bits(val: int, pow2: int) -> int:
    """NCCL's mirrorBits: reverse the low log2(pow2) bits of ``val``."""
    mirror, b, mb = 0, 1, pow2 >> 1
    while b < pow2:
        if val & b:
            mirror |= mb
        b <<= 1
        mb >>= 1
    return mirror


def _gpu_dev(G: nx.Graph, g: str) -> int:
    idx = G.nodes[g].get("index")
    return int(idx) if idx is not None else gpu_names(G).index(g)


@dataclass(frozen=True)
class _Cells:
    """Precomputed GPU x NIC cells: {(g, n): (class, nccl type, bw)}."""

    cells: dict
    gpus: list
    nics: list
    memo: dict = field(default_factory=dict, compare=False, repr=False)  # answers without PXN types

    def local_nics(self, g: str, types: Mapping | None = None) -> list[str]:
        """ncclTopoGetLocal(GPU g -> NET): highest path bandwidth, then lowest path type.

        NCCL keeps the candidates with the most bandwidth first and breaks ties by path type
        (topo.cc ``ncclTopoGetLocal``: ``bw > maxBw || (bw == maxBw && type < minType)``), so a
        400 Gb/s NIC across the host bridge wins over a 100 Gb/s NIC on the GPU's own switch.
        """
        if not types:
            key = ("nics", g)
            if key not in self.memo:
                self.memo[key] = self._local_nics(g, None)
            return self.memo[key]
        return self._local_nics(g, types)

    def _local_nics(self, g: str, types: Mapping | None) -> list[str]:
        cand = [(n, (types or {}).get((g, n)) or self.cells[g, n][1], self.cells[g, n][2]) for n in self.nics
                if self.cells[g, n][1] is not None]
        return _most_bandwidth_then_closest(cand)

    def local_gpus(self, n: str) -> list[str]:
        key = ("gpus", n)
        if key not in self.memo:
            self.memo[key] = self._local_gpus(n)
        return self.memo[key]

    def _local_gpus(self, n: str) -> list[str]:
        cand = [(g, self.cells[g, n][1], self.cells[g, n][2]) for g in self.gpus if self.cells[g, n][1] is not None]
        return _most_bandwidth_then_closest(cand)


def _local_net(G: nx.Graph, cells: _Cells, g: str, channel: int = 0, types: Mapping | None = None) -> str | None:
    """``ncclTopoGetLocalNetType`` (topo.cc L2039-2075 at v2.30.7-1 [S3]): GPU ``g``'s NIC on ``channel``.

    The ``n`` NICs closest to the GPU are shared by the ``k`` GPUs closest to the first of them:
    the GPU starts at its device index modulo ``k`` (bits mirrored when ``n`` is a power of two) and
    each channel moves one NIC on, over ``ceil(n / k)`` NICs (``NCCL_NETDEVS_POLICY`` AUTO). Two
    GPUs of one PCIe switch with four NICs take the first and the third; one GPU with nine ports
    on its switch starts at the first and uses all nine."""
    nets = cells.local_nics(g, types)
    if not nets:
        return None
    gpus = cells.local_gpus(nets[0]) or [g]
    net = _gpu_dev(G, g) % len(gpus)
    if _is_pow2(len(nets)):
        net = _mirror_bits(net, len(nets))
    net += channel % max(1, -(-len(nets) // len(gpus)))
    return nets[net % len(nets)]


def _channel_nets(G: nx.Graph, cells: _Cells, g: str, types: Mapping | None = None) -> list[str]:
    """The NICs GPU ``g``'s channels use in turn (``_local_net`` for channel 0, 1, ... until it
    comes back to the first), as ``ncclTopoPrefNetsChannelFirst`` lists them (search.cc L507-529)."""
    out: list[str] = []
    for c in range(64):
        n = _local_net(G, cells, g, c, types)
        if n is None or (out and n == out[0]):
            break
        if n not in out:
            out.append(n)
    return out


def _local_gpu(G: nx.Graph, cells: _Cells, n: str) -> str | None:
    """ncclTopoGetLocalGpu: the closest GPU that picks this NIC on some channel."""
    gpus = cells.local_gpus(n)
    for c in range(4):
        for g in gpus:
            if _local_net(G, cells, g, c) == n:
                return g
    return None


_FAR = "far"  # sentinel: beyond the default GDR level; the caller words the reason


def _gdr_block(G: nx.Graph, g: str, n: str, ntype: str | None) -> str | None:
    """Why GPUDirect RDMA is off between GPU g and NIC n (None when it is on)."""
    if G.graph.get("gdr_module") is False:
        detail = G.graph.get("gdr_module_detail")
        return ("no GPUDirect RDMA kernel support (neither nvidia_peermem nor DMA-BUF"
                + (f"; host_info: {detail}" if detail else "") +
                "): NCCL stages every inter-node byte in host memory")
    if G.nodes[n].get("gdr") is False:
        return f"NCCL's topology dump marks {n} without GPUDirect RDMA support (gdr=0)"
    if G.nodes[g].get("gdr") is False:
        return f"NCCL's topology dump marks {g} without GPUDirect RDMA support (gdr=0)"
    if ntype is None:
        return f"the PCIe path between {g} and {n} is unknown"
    if _rank(ntype) > _rank(GDR_LEVEL_DEFAULT):
        return _FAR
    return None


def _far_reason(g: str, n: str, cls: str, gcpu: str | None) -> str:
    where = {
        "PHB": "through the CPU's PCIe host bridge",
        "NODE": "between PCIe host bridges of the CPU",
        "SYS": "across the inter-socket link",
    }.get(cls, cls)
    return (f"{n} is {cls} from {g} ({where}), beyond NCCL's default GPUDirect RDMA level (PXB on x86; P2C "
            f"only where a GPU sits on NVLink-C2C): data is staged in host memory{' of ' + gcpu if gcpu else ''} "
            f"near {g}")


def _candidates(G: nx.Graph, include_inactive: bool) -> list[str]:
    out = []
    for n in nic_names(G):
        d = G.nodes[n]
        if d.get("role") in ("storage", "management"):  # a user's word: kept off NCCL (NCCL_IB_HCA)
            continue
        if not include_inactive and (d.get("active") is False or
                                     (d.get("state") and str(d.get("state")).lower() != "active")):
            continue
        out.append(n)
    return out


def _most_bandwidth_then_closest(cand: list[tuple[str, str, float | None]]) -> list[str]:
    """NCCL's ``ncclTopoGetLocal`` order over (name, path type, path GB/s): the most bandwidth,
    then the lowest path type among those; unknown bandwidth counts as 0 (type decides)."""
    if not cand:
        return []
    top = max((bw or 0.0) for _, _, bw in cand)
    cand = [(x, t) for x, t, bw in cand if math.isclose(bw or 0.0, top, rel_tol=1e-6)]
    best = min(_rank(t) for _, t in cand)
    return [x for x, t in cand if _rank(t) == best]


def _cells(G: nx.Graph, nics: list[str]) -> _Cells:
    gpus = gpu_names(G)
    return _Cells({(g, n): _cell(G, g, n) for g in gpus for n in nics}, gpus, nics)


def nic_choice(G: nx.Graph, *, include_inactive: bool = False) -> dict[str, dict]:
    """Per GPU: the NIC NCCL would use and how (internal records; see :func:`gpu_nic_choice`).

    Returns {gpu: {"nic", "nics", "path_class", "nccl_path", "gdr", "reason", "pxn_via", "route",
    "pxn_route"}}; ``nic`` is the GPU's NIC on channel 0, ``nics`` every NIC its channels use in
    turn; GPUs with no reachable NIC are absent.
    """
    nics = _candidates(G, include_inactive)
    cells = _cells(G, nics)
    gpus = cells.gpus
    # PXN (paths.cc L812-842, v2.30.7-1): GPU g reaches a NIC n through n's local GPU p when p is
    # at most P2C from n (PIX/PXB on x86; NCCL_PXN_C2C=1, L719 and L828), NVLink-connected to g,
    # and has more bandwidth to n than g or g's own path goes through the CPU (beyond PXN).
    local_gpu = {n: _local_gpu(G, cells, n) for n in nics}
    pxn: dict[tuple[str, str], str] = {}
    types: dict[tuple[str, str], str] = {}
    for n in nics:
        p = local_gpu[n]
        if p is None:
            continue
        pcls, ptype, pbw = cells.cells[p, n]
        if _rank(ptype) > _rank("P2C") or _gdr_block(G, p, n, ptype) is not None:
            continue
        for g in gpus:
            if g == p:
                continue
            cls, t, bw = cells.cells[g, n]
            if t is None:
                continue
            if not (_nvlinks(G, g, p) or (_nvswitch_links(G, g) and _nvswitch_links(G, p))):
                continue
            if (pbw or 0) > (bw or 0) or _rank(t) > _rank("PXN"):
                pxn[g, n] = p
                types[g, n] = "PXN"
    out: dict[str, dict] = {}
    for g in gpus:
        n = _local_net(G, cells, g, 0, types)
        if n is None:
            continue
        cls, t, _bw = cells.cells[g, n]
        via = pxn.get((g, n))
        gcpu = _cpu_of(G, g)
        block = _gdr_block(G, g, n, t)
        gdr = block is None
        reason = ("GPUDirect RDMA over NVLink-C2C and the CPU's PCIe (path P2C; NCCL_NET_GDR_C2C=1, NCCL's "
                  "default since 2.27)" if gdr and t == "P2C" else
                  "GPUDirect RDMA: the NIC reads and writes GPU memory directly over PCIe" if gdr else (
                      _far_reason(g, n, cls, gcpu) if block == _FAR else block))
        route = Route(g, n, "gdr" if gdr else "host_staged", gdr, reason, cls, t,
                      tuple(_direct_nic_route(G, g, n, gdr)),
                      notes={"mem": f"GPUDirect RDMA off: {g}'s data is staged in host memory"
                                    f"{' of ' + gcpu if gcpu else ''}, the NIC reads it from there"})
        pxn_route = None
        if via is not None:
            pblock = _gdr_block(G, via, n, cells.cells[via, n][1])
            pgdr = pblock is None
            hop0 = (g, via) if _nvlinks(G, g, via) else None
            first = [hop0] if hop0 else [("nvsw", g), ("nvsw_in", via)]
            pxn_route = Route(g, n, "pxn", pgdr,
                              f"PXN: {g} sends over NVLink to {via}, which is "
                              f"{cells.cells[via, n][0]} to {n}" + (" and uses GPUDirect RDMA" if pgdr else ""),
                              cls, "PXN", tuple(first + _direct_nic_route(G, via, n, pgdr)), via=via)
        out[g] = {"nic": n, "nics": _channel_nets(G, cells, g, types), "path_class": cls,
                  "nccl_path": t if via is None else "PXN", "gdr": gdr,
                  "reason": reason, "pxn_via": via, "route": route, "pxn_route": pxn_route}
    return out


def _send_route(rec: dict) -> Route:
    """What NCCL uses for sending: PXN when available (GPU->NIC direction only), else direct."""
    return rec["pxn_route"] or rec["route"]


def gpu_nic_choice(G: nx.Graph, choice: Mapping[str, dict] | None = None) -> list[dict]:
    """The ``gpu_nic`` entries: per GPU, the NIC NCCL would pick, class, GDR and why, the hops
    (the GPU's own path), and the PXN relay when one exists (``pxn_via``, ``pxn_hops``).

    Hop flows count the GPUs whose traffic crosses each link when every GPU talks to its NIC
    at once (sending through PXN where NCCL would).
    """
    choice = nic_choice(G) if choice is None else choice
    flows = count_flows(_send_route(r) for r in choice.values())
    share = Counter(r["nic"] for r in choice.values())
    out = []
    for g in gpu_names(G):
        rec = choice.get(g)
        if rec is None:
            continue
        n = rec["nic"]
        hops = route_hops(G, rec["route"], flows)
        idx, gbs = bottleneck(hops)
        port = _nic_port_gbs(G, n)
        bw = min((v for v in (gbs, port) if v is not None), default=None)
        entry = {
            "gpu": g, "nic": n, "label": G.nodes[n].get("nic_label") or G.nodes[n].get("label"),
            "path_class": rec["path_class"],
            "nccl_path": rec["nccl_path"], "gdr": rec["gdr"], "reason": rec["reason"], "bandwidth_gbs": bw,
            "bottleneck": idx, "nic_share": share[n], "pxn_via": rec["pxn_via"], "hops": hops,
            "pxn_hops": None, "pxn_gdr": None, "pxn_bandwidth_gbs": None, "nics": list(rec.get("nics") or [n]),
        }
        if rec["pxn_route"] is not None:
            ph = route_hops(G, rec["pxn_route"], flows)
            pgbs = bottleneck(ph)[1]
            entry.update(pxn_hops=ph, pxn_gdr=rec["pxn_route"].p2p,
                         pxn_bandwidth_gbs=min((v for v in (pgbs, port) if v is not None), default=None))
        out.append(entry)
    return out


def _nic_port_gbs(G: nx.Graph, n: str) -> float | None:
    """Expected GB/s of the NIC port (edge attr-free: from rate_gbps)."""
    from apps.domain.bandwidth import ib_port

    return ib_port(G.nodes[n].get("rate_gbps")).expected_gbs


def nccl_nics(G: nx.Graph, *, include_inactive: bool = True) -> list[str]:
    """The NIC ports NCCL's channel search gives GPU traffic, in device order.

    NCCL uses every RDMA port it finds and spreads channels over them (``ncclTopoSelectNets``,
    search.cc L541-589, at v2.30.7-1 [S5]); its ring and tree search reaches a NET from a GPU at
    most ``PXN`` away and widens that only when nothing is found (``typeInter``, L1229-1234): a
    channel enters a node at a NIC within the GPUDirect level (``PIX``/``PXB``, ``P2C`` through
    NVLink-C2C) of some GPU and leaves it there or through PXN. So a port is NCCL's when some GPU
    is that close to it -- every port of a two-rail host (two NICs per GPU, dual-port adapters,
    nine ports on one switch), not only the one each GPU takes on channel 0; a storage or
    management port that every GPU reaches only across the CPU is not. When no port is that
    close to any GPU, NCCL settles for the closest ones: the ports at the best distance any GPU
    has. ``include_inactive``: as if every port were up (a Down compute port stays compute)."""
    nics = _candidates(G, include_inactive)
    if not nics:
        return []
    cells = _cells(G, nics)
    best: dict[str, int] = {}
    for g in cells.gpus:
        for n in nics:
            t = cells.cells[g, n][1]
            if t is not None:
                best[n] = min(best.get(n, _rank("DIS")), _rank(t))
    if not best:
        return []
    near = [n for n in nics if best.get(n, _rank("DIS")) <= _rank(GDR_LEVEL_DEFAULT)]
    if near:
        return near
    closest = min(best.values())
    return [n for n in nics if best.get(n) == closest]


def gpu_nic_matrix(G: nx.Graph) -> list[dict]:
    """Every GPU x NIC cell: topo class, NCCL type, GDR (by distance) and bottleneck GB/s."""
    out = []
    nics = nic_names(G)
    ports = {n: _nic_port_gbs(G, n) for n in nics}
    for g in gpu_names(G):
        for n in nics:
            cls = path_class(G, g, n)
            t = _gpu_nic_type(G, g, cls) if cls else None
            gdr = _gdr_block(G, g, n, t) is None
            r = Route(g, n, "", gdr, "", cls, t, tuple(_direct_nic_route(G, g, n, gdr)))
            gbs = _route_gbs(G, r) if cls is not None else None
            port = ports[n]
            bw = min((v for v in (gbs, port) if v is not None), default=None)
            out.append({"gpu": g, "nic": n, "path_class": cls, "nccl_path": t, "gdr": gdr, "bandwidth_gbs": bw})
    return out
