"""GPU -> NIC on a HostGraph: the NIC NCCL gives each GPU, GPUDirect RDMA on or off, PXN, and
every GPU x NIC cell (the GPU<->GPU pairs and the PCIe routes are :mod:`apps.domain.paths`).

Everything here follows NCCL v2.30 defaults (domain.md sections 1c, 3.1):

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
* **Unknown.** A device no source places has no path class: no NIC choice or GDR verdict is made
  for it.

Optional facts read from the graph when present: ``G.graph["gdr_module"]`` (False when neither
nvidia_peermem nor DMA-BUF GDR is available), node attr ``gdr`` (False when NCCL's topology dump
says ``gdr="0"`` for the GPU or NIC), node attr ``compute`` and ``role`` on NICs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import networkx as nx

from apps.domain.hostgraph import lca, memoized
from apps.domain.nccl_local import channel_nets, closest, local_gpu, local_net
from apps.domain.paths import (
    Route,
    ancestry,
    bottleneck,
    count_flows,
    cpu_of,
    edge_gbs,
    gpu_names,
    nccl_rank,
    nccl_type,
    nic_names,
    nvlinks,
    nvswitch_links,
    path_class,
    route_hops,
    socket_path,
    steps_of,
    tree_route,
)

__all__ = ["nic_choice", "gpu_nic_choice", "gpu_nic_matrix", "nccl_nics", "route_min", "GDR_LEVEL_DEFAULT"]

GDR_LEVEL_DEFAULT = "P2C"  # NCCL_NET_GDR_C2C=1 (default since 2.27): P2C, which only C2C platforms have


def _nic_rate_gbs(G: nx.Graph, n: str) -> float | None:
    rate = G.nodes[n].get("rate_gbps")
    return round(float(rate) / 8, 4) if rate else None


def _direct_nic_route(G: nx.Graph, g: str, n: str, gdr: bool, note: str | None = None) -> list[tuple[str, str]]:
    """GPU -> NIC: straight over PCIe (GDR) or staged in host memory local to the GPU."""
    if gdr:
        nodes = tree_route(G, g, n)
        return steps_of(nodes) if nodes else []
    cg, cn = cpu_of(G, g), cpu_of(G, n)
    if cg is None or cn is None:
        return []
    mid = socket_path(G, cg, cn)
    if mid is None:
        return []
    return steps_of(ancestry(G, g)) + [("mem", cg)] + steps_of(mid) + steps_of(reversed(ancestry(G, n)))


def route_min(G: nx.Graph, a: str, b: str, figure: str, *, staged: bool = False) -> float | None:
    """The smallest edge figure on a device-to-device route, without walking the route: ``figure``
    ``"spec"`` (``spec_gbs``) or ``"expected"`` (``expected_gbs``, else ``spec_gbs``: what
    :func:`route_gbs` reads); edges without the figure are skipped, None when none has it.

    The route is :func:`tree_route` (``staged`` False: GPUDirect, up to the lowest common ancestor
    and down, or across the sockets) or the host-staged one (``staged`` True: ``a`` up to its CPU,
    the inter-socket links to ``b``'s CPU, down to ``b``; the host memory copy has no figure). Each
    device's minima up its chain are kept while the graph is frozen, so a GPU x NIC matrix costs
    one lookup a cell. The same value as ``route_gbs`` / a walk over the route's edges."""
    ua, ub = _up_minima(G, a, figure), _up_minima(G, b, figure)
    if ua is None or ub is None:  # a chain step without its edge: walk the route as it is
        steps = _direct_nic_route(G, a, b, not staged)
        return _least(*(_figure(G.edges[u, v], figure) for u, v in steps if u != "mem"))
    ca, cb = ancestry(G, a), ancestry(G, b)
    top_a, top_b = ca[-1], cb[-1]
    if G.nodes[top_a].get("kind") != "cpu" or G.nodes[top_b].get("kind") != "cpu":
        return None  # outside the tree: no route (tree_route None; the staged route needs both CPUs)
    if not staged:
        common = lca(G, a, b)
        if common is not None:
            return _least(ua[common], ub[common])
        if G.has_edge(top_a, top_b):
            return _least(ua[top_a], _figure(G.edges[top_a, top_b], figure), ub[top_b])
    mid = socket_path(G, top_a, top_b)
    if mid is None:
        return None
    return _least(ua[top_a], _socket_min(G, mid, figure), ub[top_b])


def _figure(d: Mapping, figure: str) -> float | None:
    return d.get("spec_gbs") if figure == "spec" else edge_gbs(d)


def _least(*vals: float | None) -> float | None:
    return min((v for v in vals if v is not None), default=None)


def _up_minima(G: nx.Graph, n: str, figure: str) -> dict[str, float | None] | None:
    """{each node of ``n``'s ancestry: the smallest figure over the edges from ``n`` up to it}; None
    when a step of the chain has no edge."""
    return memoized(G, ("up_min", n, figure), lambda: _chain_minima(G, n, figure))


def _chain_minima(G: nx.Graph, n: str, figure: str) -> dict[str, float | None] | None:
    chain = ancestry(G, n)
    out: dict[str, float | None] = {chain[0]: None}
    least = None
    adj = G.adj
    for u, v in zip(chain, chain[1:]):
        d = adj[u].get(v)
        if d is None:
            return None
        x = _figure(d, figure)
        if x is not None and (least is None or x < least):
            least = x
        out[v] = least
    return out


def _socket_min(G: nx.Graph, mid: list[str], figure: str) -> float | None:
    return _least(*(_figure(G.edges[u, v], figure) for u, v in zip(mid, mid[1:])))


def _cell(G: nx.Graph, g: str, n: str) -> tuple[str | None, str | None, float | None]:
    """(topo class, NCCL type, NCCL-style path bandwidth incl. the port rate) for GPU g -> NIC n."""
    return memoized(G, ("cell", g, n), lambda: _compute_cell(G, g, n))


def _compute_cell(G: nx.Graph, g: str, n: str) -> tuple[str | None, str | None, float | None]:
    cls = path_class(G, g, n)
    if cls is None:
        return None, None, None
    rate = _nic_rate_gbs(G, n)
    if rate is None and memoized(G, ("some_nic_rate",), lambda: any(_nic_rate_gbs(G, x) for x in nic_names(G))):
        # a port whose rate nobody reported, beside ports whose rates are known: its bandwidth is
        # unknown, not its PCIe path's (which would rank it above every NIC of known rate)
        return cls, _gpu_nic_type(G, g, cls), None
    vals = [x for x in (route_min(G, g, n, "spec"), rate) if x is not None]
    return cls, _gpu_nic_type(G, g, cls), (min(vals) if vals else None)


def _gpu_nic_type(G: nx.Graph, g: str, cls: str) -> str | None:
    """NCCL's path type GPU -> NIC: the topo token's type, except that a GPU attached to its CPU over
    NVLink-C2C reaches a NIC of that CPU (PHB/NODE) through P2C, NCCL's ``mergePathType(C2C, PHB)``
    (paths.cc L203-208, L794-809 at v2.30.7-1 [S2])."""
    t = nccl_type(cls)
    if t == "PHB" and G.nodes[g].get("c2c"):
        return "P2C"
    return t


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
        return closest(cand)

    def local_gpus(self, n: str) -> list[str]:
        key = ("gpus", n)
        if key not in self.memo:
            self.memo[key] = self._local_gpus(n)
        return self.memo[key]

    def _local_gpus(self, n: str) -> list[str]:
        cand = [(g, self.cells[g, n][1], self.cells[g, n][2]) for g in self.gpus if self.cells[g, n][1] is not None]
        return closest(cand)


class _CellView:
    """:mod:`apps.domain.nccl_local`'s view of the cells: ``types`` are the PXN path types that
    replace a cell's own when NCCL ranks a GPU's NICs."""

    def __init__(self, G: nx.Graph, cells: _Cells, types: Mapping | None = None):
        self.G, self.cells, self.types = G, cells, types
        self._nets: dict[str, list[str]] = {}  # local_net asks once per channel: answered once per GPU

    def local_nets(self, g: str) -> list[str]:
        got = self._nets.get(g)
        if got is None:
            got = self._nets[g] = self.cells.local_nics(g, self.types)
        return got

    def local_gpus(self, n: str) -> list[str]:
        return self.cells.local_gpus(n)

    def device(self, g: str) -> int:
        return _gpu_dev(self.G, g)


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
    if nccl_rank(ntype) > nccl_rank(GDR_LEVEL_DEFAULT):
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
    local = {n: local_gpu(_CellView(G, cells), n) for n in nics}
    pxn: dict[tuple[str, str], str] = {}
    types: dict[tuple[str, str], str] = {}
    for n in nics:
        p = local[n]
        if p is None:
            continue
        pcls, ptype, pbw = cells.cells[p, n]
        if nccl_rank(ptype) > nccl_rank("P2C") or _gdr_block(G, p, n, ptype) is not None:
            continue
        for g in gpus:
            if g == p:
                continue
            cls, t, bw = cells.cells[g, n]
            if t is None:
                continue
            if not (nvlinks(G, g, p) or (nvswitch_links(G, g) and nvswitch_links(G, p))):
                continue
            if (pbw or 0) > (bw or 0) or nccl_rank(t) > nccl_rank("PXN"):
                pxn[g, n] = p
                types[g, n] = "PXN"
    out: dict[str, dict] = {}
    view = _CellView(G, cells, types)
    for g in gpus:
        n = local_net(view, g, 0)
        if n is None:
            continue
        cls, t, _bw = cells.cells[g, n]
        via = pxn.get((g, n))
        gcpu = cpu_of(G, g)
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
            hop0 = (g, via) if nvlinks(G, g, via) else None
            first = [hop0] if hop0 else [("nvsw", g), ("nvsw_in", via)]
            pxn_route = Route(g, n, "pxn", pgdr,
                              f"PXN: {g} sends over NVLink to {via}, which is "
                              f"{cells.cells[via, n][0]} to {n}" + (" and uses GPUDirect RDMA" if pgdr else ""),
                              cls, "PXN", tuple(first + _direct_nic_route(G, via, n, pgdr)), via=via)
        out[g] = {"nic": n, "nics": channel_nets(view, g), "path_class": cls,
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
                best[n] = min(best.get(n, nccl_rank("DIS")), nccl_rank(t))
    if not best:
        return []
    near = [n for n in nics if best.get(n, nccl_rank("DIS")) <= nccl_rank(GDR_LEVEL_DEFAULT)]
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
            # route_gbs of _direct_nic_route(G, g, n, gdr), read off the devices' chains
            gbs = route_min(G, g, n, "expected", staged=not gdr) if cls is not None else None
            port = ports[n]
            bw = min((v for v in (gbs, port) if v is not None), default=None)
            out.append({"gpu": g, "nic": n, "path_class": cls, "nccl_path": t, "gdr": gdr, "bandwidth_gbs": bw})
    return out
