"""The channel search's integer view of one NCCL system, built once per system and kept.

:mod:`apps.domain.nccl_search` searches NCCL's graphs (``ncclTopoCompute``, src/graph/search.cc at
v2.30.7-1) on a :class:`~apps.domain.nccl_system.System`, whose GPUs, links, NETs and paths are
named by strings in dicts. Its recursion (:mod:`apps.domain.nccl_search_core`) visits tens of
thousands of states on a switchless mesh, so it reads this view instead, where

* GPUs are ``0 .. n-1`` in ``system.gpus`` order (NCCL's GPU index), NETs ``0 .. m-1`` in
  ``system.nets`` order, and directed links ``0 .. L-1`` in ``system.cap`` order;
* ``cap0[link]`` / ``net0[net]`` are the capacities in integer MB/s (NCCL rounds its float
  arithmetic to 1/1000, ``SUB_ROUND`` search.cc L78-79), unbounded links ``1 << 50``;
* each path is a :class:`PathT`: the link indexes it reserves bandwidth on, which of them NCCL
  charges 6/5 (``INTEL_P2P_OVERHEAD`` on the PCIe links of an Intel ``PHB`` path, search.cc
  L81-93), the links it counts as hops and its type rank;
* everything the search asks again and again for one path-type limit is a table computed once:
  the GPU and NET paths within the limit (``ncclTopoFollowPath`` refusing farther ones,
  search.cc L148-149), the candidate order of ``ncclTopoSearchNextGpuSort`` (L253-326), the NETs
  of ``ncclTopoSelectNets`` (L541-589), the per-GPU first and last links the search's bound
  counts (``nccl_search_bounds.fit``) and the tighter bounds ``nccl_search_bounds.upper_bound`` asks
  for (:meth:`Tables.ring_cut`, :meth:`Tables.net_flow`, :meth:`Tables.same_start_units`), per
  limit and speed.

:func:`tables` keeps one view per system while the system lives (the six ``compute`` calls of
one channel search read the same), at most :data:`MAX_KEPT`; :func:`clear` forgets them.
"""

from __future__ import annotations

import math
import random
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx

from apps.domain.nccl_local import PathView, channel_nets
from apps.domain.nccl_system import NVS, Path, System
from apps.domain.paths import NCCL_TYPES, nccl_rank

__all__ = ["PathT", "Tables", "min_cut", "tables", "clear", "units", "type_name", "RING", "BALANCED_TREE", "TREE", "NVLS",
           "MAX_KEPT", "SIG_MOD"]

RING, BALANCED_TREE, TREE, NVLS = "RING", "BALANCED_TREE", "TREE", "NVLS"
#: systems whose view is kept: one channel search reads its system's view six times, and the
#: estimate searches each system once (0.3 MB for an 8-GPU host, 3.6 MB for the 16-GCD mesh)
MAX_KEPT = 8
#: the residual state's signature is sum(weight[link] x residual[link]) modulo this prime, with a
#: random 61-bit weight per link and NET: two different residual states share a signature with
#: probability 2^-61, and the signature stays a machine-size integer
SIG_MOD = (1 << 61) - 1
_TYPE_NAMES = NCCL_TYPES  # LOC ... DIS (graph.h), apps.domain.paths
_SYS = nccl_rank("SYS")


def units(gbs: float) -> int:
    """GB/s as integer MB/s (NCCL's 1/1000 rounding); unbounded links as a very large number."""
    return int(round(gbs * 1000)) if math.isfinite(gbs) else 1 << 50


def type_name(rank: int) -> str:
    """The NCCL path type of a rank (``LOC`` ... ``DIS``), ranks past the list clamped."""
    return _TYPE_NAMES[max(0, min(rank, len(_TYPE_NAMES) - 1))]


@dataclass(frozen=True)
class PathT:
    """One path as the search reserves it: ``links`` (indexes into ``cap0``, the path's links that
    carry a capacity), ``pci`` (per link, whether NCCL charges it 6/5), ``hops`` (every link of the
    path, what ``nHops`` counts), ``rank`` (its type), ``bw`` (GB/s of its narrowest link) and
    ``w_plain``/``w_pci`` (the signature weights of its plain and 6/5 links, summed)."""

    links: tuple[int, ...]
    pci: tuple[bool, ...]
    hops: int
    rank: int
    bw: float
    w_plain: int = 0
    w_pci: int = 0


class Tables:
    """The integer view of one system (see the module docstring). Tables that depend on a path
    type limit are computed on first use and kept."""

    def __init__(self, system: System):
        gpus = list(system.gpus)
        self.n = n = len(gpus)
        self.gpu_names = tuple(gpus)
        gi = {g: i for i, g in enumerate(gpus)}
        self.gpu_index = gi
        keys = list(system.cap)
        self.link_keys = keys
        li = self._link_index = {k: i for i, k in enumerate(keys)}
        self.cap0 = [units(system.cap[k]) for k in keys]
        rng = random.Random(0)
        self.weight = [rng.getrandbits(61) % SIG_MOD for _ in keys]
        nets = list(system.nets)
        self.m = len(nets)
        self.net_names = tuple(x.name for x in nets)
        ni = {x.name: i for i, x in enumerate(nets)}
        self.net_index = ni
        self.net_weight = [rng.getrandbits(61) % SIG_MOD for _ in nets]
        self.net0 = [units(x.gbs) for x in nets]
        pci_links = {k for k in keys if not (k[0] == NVS or k[1] == NVS or k[0].startswith("net:")
                                             or k[1].startswith("net:"))}

        w = self.weight

        def path_t(p: Path) -> PathT:
            idx = tuple(li[k] for k in p.links if k in li)
            pci = tuple(bool(p.intel_phb and k in pci_links) for k in p.links if k in li)
            return PathT(idx, pci, len(p.links), nccl_rank(p.type), p.bw,
                         sum(w[k] for k, c in zip(idx, pci) if not c), sum(w[k] for k, c in zip(idx, pci) if c))

        self.gpu_path: list[list[PathT | None]] = [[None] * n for _ in range(n)]
        self.gpu_path_order: list[tuple[int, int]] = []  # (a, b) in system.gpu_paths order
        for (a, b), p in system.gpu_paths.items():
            if a in gi and b in gi:
                self.gpu_path[gi[a]][gi[b]] = path_t(p)
                self.gpu_path_order.append((gi[a], gi[b]))
        self.to_net: list[list[PathT | None]] = [[None] * self.m for _ in range(n)]
        self.from_net: list[list[PathT | None]] = [[None] * n for _ in range(self.m)]
        for (g, net), p in system.to_net.items():
            if g in gi and net in ni:
                self.to_net[gi[g]][ni[net]] = path_t(p)
        for (net, g), p in system.from_net.items():
            if g in gi and net in ni:
                self.from_net[ni[net]][gi[g]] = path_t(p)
        self.nvs_in = [li.get((NVS, g), -1) for g in gpus]   # the fabric's link into each GPU
        self.nvs_out = [li.get((g, NVS), -1) for g in gpus]  # each GPU's link into the fabric
        self.local_gpu = [gi.get(system.local_gpu.get(x.name)) if system.local_gpu.get(x.name) else None
                          for x in nets]
        view = PathView(system.gpus, system.dev, [n.name for n in system.nets], system.to_net, system.from_net)
        self.local_gpus = [[gi[g] for g in view.local_gpus(x.name)] for x in nets]
        self.gpu_pci = [int(system.gpu_pci.get(g, 0)) for g in gpus]
        self.nvswitch = system.nvswitch
        self._view = view
        self._gpu_paths = system.gpu_paths
        self._within: dict = {}
        self._effective: dict = {}
        self._order: dict = {}
        self._ranks: dict = {}
        self._onward: dict = {}
        self._ends: dict = {}
        self._nets: dict = {}
        self._close: dict = {}
        self._cuts: dict = {}
        self._reserve: dict = {}
        self._reservations: dict = {}  # (path, bw) -> its reservation, shared by every limit's rows
        self.kept: dict = {}  # what the driver and the runs keep per system (type range, NET lists)
        self.next_cache: dict = {}  # (pattern, type limit) -> {packed (gpu, sort, net, used): order}
        self.gpu_ranks = sorted({p.rank for row in self.gpu_path for p in row if p is not None})
        self.net_ranks = sorted({p.rank for row in self.to_net for p in row if p is not None} |
                                {p.rank for row in self.from_net for p in row if p is not None})

    # --- the effective limit ---------------------------------------------------------------------
    def effective(self, type_intra: int, type_inter: int, inter: bool) -> tuple[int, int]:
        """The path-type limits as the search sees them: the highest rank of a path the limit lets
        through (a limit between two ranks that paths have lets the same paths through). Kept:
        the driver asks it of every search it considers, a thousand times an estimate."""
        key = (type_intra, type_inter, inter)
        got = self._effective.get(key)
        if got is None:
            ti = max((r for r in self.gpu_ranks if r <= type_intra), default=-1)
            te = max((r for r in self.net_ranks if r <= type_inter), default=-1) if inter else -1
            got = self._effective[key] = (ti, te)
        return got

    # --- paths within a limit ------------------------------------------------------------------
    def gpu_paths_within(self, ti: int) -> list[list[PathT | None]]:
        """``gpu[a][b]``: the GPU path if its type is at most ``ti`` (``ncclTopoFollowPath`` refuses
        a path above the graph's ``typeIntra``), else None."""
        key = ("gpu", ti)
        got = self._within.get(key)
        if got is None:
            got = self._within[key] = [[p if p is not None and p.rank <= ti else None for p in row]
                                       for row in self.gpu_path]
        return got

    def net_paths_within(self, te: int, tree: bool) -> tuple[list[list[PathT | None]], list[list[PathT | None]]]:
        """(``up[g][net]``, ``down[net][g]``): GPU->NET and NET->GPU paths within ``te``; for trees
        a path counts only if the reverse one is within ``te`` too (trees send both ways)."""
        key = ("net", te, tree)
        got = self._within.get(key)
        if got is None:
            up = [[None] * self.m for _ in range(self.n)]
            down = [[None] * self.n for _ in range(self.m)]
            for g in range(self.n):
                for x in range(self.m):
                    u, d = self.to_net[g][x], self.from_net[x][g]
                    if u is not None and u.rank <= te and (not tree or (d is not None and d.rank <= te)):
                        up[g][x] = u
                    if d is not None and d.rank <= te and (not tree or (u is not None and u.rank <= te)):
                        down[x][g] = d
            got = self._within[key] = (up, down)
        return got

    def reserving(self, which: str, limit: int, tree: bool, bw: int) -> dict[int, list[tuple | None]]:
        """The paths of :meth:`gpu_paths_within` (``which`` "gpu") or :meth:`net_paths_within`
        ("up", "down") as one run reserves ``bw`` on them, row by row (built when first read):
        ``(link, amount, signature change, hops, None)`` for a path of one link, ``(-1, 0,
        signature change, hops, ((link, amount), ...))`` otherwise; the amount is ``bw``, or
        ``ceil(bw x 6/5)`` on a 6/5 link."""
        key = (which, limit, tree, bw)
        got = self._reserve.get(key)
        if got is None:
            if which == "gpu":
                rows = self.gpu_paths_within(limit)
            else:
                up, down = self.net_paths_within(limit, tree)
                rows = up if which == "up" else down
            got = self._reserve[key] = _Rows(rows, bw, self._reservations)
        return got

    # --- ncclTopoSearchNextGpuSort -----------------------------------------------------------------
    def _score(self, g: int, h: int, sort_net: int, net: int | None) -> tuple:
        """``struct ncclGpuScore`` of candidate ``h`` from ``g``, as ``cmpScore`` orders it (L191-211)."""
        path = self.gpu_path[g][h]
        inter = (0, 0, 0)
        if sort_net and net is not None:
            npath = self.from_net[net][h]
            inter = (int(npath.bw) if npath else 0, self.gpu_pci[h], npath.hops if npath else 0)
        return (-inter[0], -inter[1], inter[2], -int(path.bw), path.hops, (h - g) % self.n)

    def sorted_gpus(self, g: int, sort_net: int, net: int | None, pattern: str, ti: int) -> list[int]:
        """The GPUs to try after ``g``, best first (``ncclTopoSearchNextGpuSort`` L253-326):
        by path bandwidth and hops (NET path first when the next step returns to a NET); reversed
        when the step after leaves for a NET and all score the same; on NVSwitch only the next and
        previous GPU (L293-324)."""
        key = (g, sort_net, net, pattern, ti)
        got = self._order.get(key)
        if got is not None:
            return got
        n = self.n
        scores = []
        for i in range(1, n):
            h = (g + i) % n
            path = self.gpu_path[g][h]
            if path is None or path.rank > ti:
                continue  # FollowPath refuses it (L148-149): not a candidate worth trying
            scores.append(self._score(g, h, sort_net, net) + (h,))
        scores.sort()
        order = [x[-1] for x in scores]
        if sort_net == -1 and len({(x[3], x[4]) for x in scores}) <= 1:
            order.reverse()
        if self.nvswitch:
            nxt, prv = (g + 1) % n, (g - 1) % n
            firsts = [nxt, prv] if pattern == RING else ([prv, nxt] if pattern == BALANCED_TREE else [nxt])
            order = list(dict.fromkeys(h for h in firsts if h in order))
        self._order[key] = order
        return order

    def tie_groups(self, g: int, sort_net: int, net: int | None, pattern: str, ti: int) -> list[int]:
        """Per GPU, its group in :meth:`sorted_gpus`' order: candidates NCCL ranks equal share one."""
        key = (g, sort_net, net, pattern, ti)
        got = self._ranks.get(key)
        if got is None:
            got = [0] * self.n
            group, last = -1, None
            for h in self.sorted_gpus(g, sort_net, net, pattern, ti):
                score = self._score(g, h, sort_net, net)[:-1]
                if score != last:
                    group, last = group + 1, score
                got[h] = group
            self._ranks[key] = got
        return got

    def onward(self, ti: int) -> list[int]:
        """Per GPU the bit mask of the GPUs it has a path to within ``ti``."""
        got = self._onward.get(ti)
        if got is None:
            got = [0] * self.n
            for a, b in self.gpu_path_order:
                if self.gpu_path[a][b].rank <= ti:
                    got[a] |= 1 << b
            self._onward[ti] = got
        return got

    # --- the bound's links ---------------------------------------------------------------------------
    def ends(self, ti: int, te: int, inter: bool) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """(firsts, lasts, net firsts, net lasts): per GPU the distinct first links of its paths to
        other GPUs, the last links of the paths into it, and (across nodes) the same to and from
        NETs, within the limits; links with a capacity only."""
        key = (ti, te, inter)
        got = self._ends.get(key)
        if got is not None:
            return got
        firsts: list[set] = [set() for _ in range(self.n)]
        lasts: list[set] = [set() for _ in range(self.n)]
        net_firsts: list[set] = [set() for _ in range(self.n)]
        net_lasts: list[set] = [set() for _ in range(self.n)]
        keys = self.link_keys
        for (a, b), path in self._gpu_paths.items():
            if nccl_rank(path.type) > ti or not path.links or a not in self.gpu_index or b not in self.gpu_index:
                continue
            firsts[self.gpu_index[a]].add(path.links[0])
            lasts[self.gpu_index[b]].add(path.links[-1])
        if inter:
            for g in range(self.n):
                name = self.gpu_names[g]
                for x in self._view.nets:
                    up, down = self._view.to_net.get((name, x)), self._view.from_net.get((x, name))
                    if up is not None and nccl_rank(up.type) <= te and up.links:
                        net_firsts[g].add(up.links[0])
                    if down is not None and nccl_rank(down.type) <= te and down.links:
                        net_lasts[g].add(down.links[-1])
        li = {k: i for i, k in enumerate(keys)}
        got = tuple(tuple(tuple(sorted(li[k] for k in s if k in li)) for s in per)
                    for per in (firsts, lasts, net_firsts, net_lasts))
        self._ends[key] = got
        return got

    def ring_cut(self, ti: int, bw: int) -> int | None:
        """The most ring channels at ``bw`` (MB/s) inside the node that every cut of the GPUs lets
        through, or None where the bound does not apply.

        A ring channel visits every GPU and returns to its first, so for any split of the GPUs in
        two it leaves one side and enters it at least once, each time on a GPU path reserving
        ``bw`` (6/5 of it on a charged link). Where no two GPU paths within ``ti`` share a link (a
        switchless NVLink or xGMI mesh of direct links), a pair of GPUs carries at most
        ``cap // amount`` channels on its narrowest link each way, and R rings need, across every
        split, 2R of those in both directions together: R <= (minimum cut) // 2, the minimum
        cut of the GPUs weighted by both directions' channels (Stoer-Wagner, :func:`min_cut`). Where
        paths share a link (PCIe, NVSwitch) a pair's channels are not its own and the bound is
        not used (None): :func:`~apps.domain.nccl_search_bounds.fit` still bounds every GPU."""
        key = (ti, bw)
        if key in self._cuts:
            return self._cuts[key]
        got: int | None = None
        if self.n >= 2:
            over = (bw * 6 + 4) // 5
            owner: dict[int, tuple[int, int]] = {}
            pair: dict[tuple[int, int], int] = {}
            shared = False
            for a, b in self.gpu_path_order:
                p = self.gpu_path[a][b]
                if p.rank > ti:
                    continue
                if not p.links or any(owner.setdefault(k, (a, b)) != (a, b) for k in p.links):
                    shared = True
                    break
                ch = min(self.cap0[k] // (over if c else bw) for k, c in zip(p.links, p.pci))
                edge = (min(a, b), max(a, b))
                pair[edge] = pair.get(edge, 0) + ch
            if not shared:
                got = min_cut(self.n, [(a, b, w) for (a, b), w in pair.items() if w > 0]) // 2
        self._cuts[key] = got
        return got

    def net_flow(self, te: int, tree: bool, bw: int, up: bool) -> int:
        """The most channels whose NET paths fit at ``bw`` (MB/s): each channel across nodes
        reserves ``bw`` on every link of one NET->GPU path (``up`` False: the path into its first
        GPU, the NET carrying it once) or GPU->NET path (``up``: back to a NET), so the channels
        are at most the maximum flow from the NETs to the GPUs (or back) over those paths' links,
        each link carrying ``cap // bw``: NICs behind one PCIe switch uplink share it."""
        key = ("flow", te, tree, bw, up)
        got = self._cuts.get(key)
        if got is None:
            arcs, routes = self._net_arcs(te, tree, up)
            caps = tuple(_BIG if c is None else c // bw for c in arcs.values())
            # speeds that leave every link the same channel count share one flow
            same = ("flow of", te, tree, up, caps)
            got = self._cuts.get(same)
            if got is None:
                got = self._cuts[same] = _max_flow(dict(zip(arcs, caps)), _SOURCE, _SINK, routes)
            self._cuts[key] = got
        return got

    def _net_arcs(self, te: int, tree: bool, up: bool) -> tuple[dict[tuple, int | None], list[tuple]]:
        """The flow network of :meth:`net_flow`: ({(node, node): capacity MB/s, None unbounded},
        each NET path as its arcs from the source to the sink)."""
        key = ("arcs", te, tree, up)
        got = self._cuts.get(key)
        if got is not None:
            return got
        ups, downs = self.net_paths_within(te, tree)
        li = self._link_index
        arcs: dict[tuple, int | None] = {}
        routes: list[tuple] = []
        for x in range(self.m):
            net = ("net", x)
            for g in range(self.n):
                if (ups[g][x] if up else downs[x][g]) is None:
                    continue
                path = (self._view.to_net[(self.gpu_names[g], self.net_names[x])] if up else
                        self._view.from_net[(self.net_names[x], self.gpu_names[g])])
                if not path.links:
                    continue
                for k in path.links:
                    arcs[k] = self.cap0[li[k]] if k in li else None
                start, end = path.links[0][0], path.links[-1][1]
                if up:
                    arcs[(_SOURCE, start)] = arcs[(end, _SINK)] = None
                    routes.append(((_SOURCE, start), *path.links, (end, _SINK)))
                else:
                    arcs[(_SOURCE, net)] = self.net0[x]
                    arcs[(net, start)] = arcs[(end, _SINK)] = None
                    routes.append(((_SOURCE, net), (net, start), *path.links, (end, _SINK)))
        self._cuts[key] = got = (arcs, routes)
        return got

    def start_nets(self, te: int, tree: bool) -> list[list[int]]:
        """Per GPU the NETs with a path into it within ``te``: where a channel of the same channels
        across nodes can start (``nccl_search_core.run`` bounds a partial search with it)."""
        key = ("starts", te, tree)
        got = self._cuts.get(key)
        if got is None:
            _up, down = self.net_paths_within(te, tree)
            got = self._cuts[key] = [[x for x in range(self.m) if down[x][g] is not None] for g in range(self.n)]
        return got

    def same_start_units(self, te: int, tree: bool, bw: int) -> int:
        """The most channels at ``bw`` (MB/s) per NET that can start at one GPU: what a search of
        the same channels across nodes (``sameChannels``) can find at most, since each channel
        after the first replays the first from the same GPU (``ncclTopoSearchRecNet`` L769-771)
        and a NET carries its bandwidth once per channel that starts there."""
        key = ("same", te, tree, bw)
        got = self._cuts.get(key)
        if got is None:
            got = max((sum(self.net0[x] // bw for x in nets) for nets in self.start_nets(te, tree)), default=0)
            self._cuts[key] = got
        return got

    def can_close(self, te: int, cross_nic: int) -> bool:
        """Whether some ring channel can start at a NET and end at a NET the limits and NIC crossing
        allow: a first GPU the NET reaches and another GPU that reaches the end NET."""
        key = (te, cross_nic)
        got = self._close.get(key)
        if got is None:
            got = False
            for x in range(self.m):
                firsts = {g for g in range(self.n) if (q := self.from_net[x][g]) is not None and q.rank <= te}
                ends = [x] if cross_nic == 0 else range(self.m)
                lasts = {g for y in ends for g in range(self.n) if (q := self.to_net[g][y]) is not None
                         and q.rank <= te}
                if firsts and lasts and (self.n == 1 or len(firsts | lasts) > 1):
                    got = True
                    break
            self._close[key] = got
        return got

    # --- ncclTopoSelectNets --------------------------------------------------------------------------
    def select_nets(self, gpu: int | None, te: int) -> list[int]:
        """``ncclTopoSelectNets`` (L541-589): each GPU's preferred NETs channel by channel
        (``ncclTopoGetLocalNet``), then every other NET within ``te``, by path type."""
        key = (gpu, te)
        got = self._nets.get(key)
        if got is not None:
            return got
        out: list[int] = []
        gpus = range(self.n) if gpu is None else [gpu]
        for g in gpus:
            for x in channel_nets(self._view, self.gpu_names[g]):
                if self.net_index[x] not in out:
                    out.append(self.net_index[x])
        for t in range(_SYS + 1):
            if t > te:
                break
            for g in gpus:
                for x in range(self.m):
                    p = self.to_net[g][x]
                    if p is not None and p.rank == t and x not in out:
                        out.append(x)
        self._nets[key] = out
        return out


def min_cut(n: int, edges: list[tuple[int, int, int]]) -> int:
    """The minimum cut of the graph on GPUs ``0 .. n-1`` with weighted ``edges`` (a, b, w), 0 where
    it is not connected: Stoer-Wagner, in C where the channel search's C recursion is built
    (``apps/domain/_search_core.c``; a tenth of networkx's time on these graphs of tens of nodes),
    else networkx's."""
    from apps.domain import nccl_search_native  # imports this module: read when first asked

    fast = nccl_search_native.c_module()
    if fast is not None:
        return fast.min_cut(n, edges)
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_weighted_edges_from(edges)
    return nx.stoer_wagner(graph)[0] if nx.is_connected(graph) else 0


_SOURCE, _SINK = ("source",), ("sink",)  # tuples: never a node name of the system
_BIG = 1 << 40


def _max_flow(capacity: dict[tuple, int], source, sink, routes: Sequence[tuple] = ()) -> int:
    """The maximum flow from ``source`` to ``sink`` over the arcs ``capacity`` ({(u, v): units}):
    as much as each of ``routes`` (paths of arcs) carries in turn, then Edmonds-Karp's
    breadth-first augmenting paths for the rest (any flow augmented until no path is left is a
    maximum one). The networks here have tens of nodes and a flow of a few dozen channels;
    networkx's own builds its residual network at ten times the cost of the search step it
    bounds."""
    res: dict = {}
    for (u, v), c in capacity.items():
        res.setdefault(u, {})[v] = res.get(u, {}).get(v, 0) + c
        res.setdefault(v, {}).setdefault(u, 0)
    if source not in res or sink not in res:
        return 0
    flow = 0
    for route in routes:
        b = min(res[u][v] for u, v in route)
        if b > 0:
            for u, v in route:
                res[u][v] -= b
                res[v][u] += b
            flow += b
    while True:
        parent = {source: None}
        queue = deque([source])
        while queue and sink not in parent:
            u = queue.popleft()
            for v, c in res[u].items():
                if c > 0 and v not in parent:
                    parent[v] = u
                    queue.append(v)
        if sink not in parent:
            return flow
        b, v = _BIG, sink
        while parent[v] is not None:
            u = parent[v]
            b = min(b, res[u][v])
            v = u
        v = sink
        while parent[v] is not None:
            u = parent[v]
            res[u][v] -= b
            res[v][u] += b
            v = u
        flow += b


class _Rows(dict):
    """Rows of reservations (:meth:`Tables.reserving`), each made when first read."""

    def __init__(self, rows: list[list[PathT | None]], bw: int, shared: dict):
        super().__init__()
        self.rows, self.bw, self.over, self.shared = rows, bw, (bw * 6 + 4) // 5, shared

    def __missing__(self, i: int) -> list[tuple | None]:
        row = self[i] = [None if p is None else self._reserve(p) for p in self.rows[i]]
        return row

    def _reserve(self, p: PathT) -> tuple:
        key = (id(p), self.bw)
        got = self.shared.get(key)
        if got is None:
            bw, over = self.bw, self.over
            d = (p.w_plain * bw + p.w_pci * over) % SIG_MOD
            if len(p.links) == 1:
                got = (p.links[0], over if p.pci[0] else bw, d, p.hops, None)
            else:
                got = (-1, 0, d, p.hops, tuple((k, over if c else bw) for k, c in zip(p.links, p.pci)))
            self.shared[key] = got
        return got


_KEPT: dict[int, tuple[weakref.ref, Tables]] = {}


def tables(system: System) -> Tables:
    """The integer view of ``system``, built on first use and kept while the system lives (at
    most :data:`MAX_KEPT` systems)."""
    key = id(system)
    hit = _KEPT.get(key)
    if hit is not None and hit[0]() is system:
        return hit[1]
    t = Tables(system)
    while len(_KEPT) >= MAX_KEPT:
        _KEPT.pop(next(iter(_KEPT), None), None)  # another thread may have dropped it already
    _KEPT[key] = (weakref.ref(system, lambda ref, key=key: _forget(key, ref)), t)
    return t


def _forget(key: int, ref: weakref.ref) -> None:
    """The system of ``key`` is gone: drop its view (unless the id names a newer system now)."""
    hit = _KEPT.get(key)
    if hit is not None and hit[0] is ref:
        _KEPT.pop(key, None)


def clear() -> None:
    """Forget every view kept."""
    _KEPT.clear()
