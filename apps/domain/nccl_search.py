"""NCCL's channel search on one host: how many rings, trees and NVLS channels, at what bandwidth.

``compute(system, pattern, inter=...)`` follows ``ncclTopoCompute`` (src/graph/search.cc at
v2.30.7-1): for a pattern (``RING``, ``BALANCED_TREE``, ``NVLS``) it looks for as many channels as
fit at a per-channel bandwidth taken from NCCL's speed list, each channel reserving that
bandwidth on every link its paths cross (``followPath``, L81-123), so channels share links only
as far as their capacity allows: on switchless NVLink or xGMI meshes the rings found are the
disjoint ones the links can carry, on NVSwitch boards each GPU's fabric link is split. The search
is NCCL's depth-first one (``ncclTopoSearchRec``/``RecGpu``/``RecNet``, L621-881), with its
candidate order (``ncclTopoSearchNextGpuSort`` L253-326: path bandwidth, hops, next/previous GPU
first on NVSwitch), its passes (L1162-1287: first a solution, lowering the speed while it still
gains, trying other path types and crossing NICs, then raising the speed), its per-search time
budgets (L331-335) and the channel duplication of ``ncclTopoDupChannels`` (L1036-1049).

Across nodes (``inter``) a ring channel starts at a NET, visits every GPU and returns to a NET
(the same one, or with ``NCCL_CROSS_NIC=2``, the default, alternately another), each NET carrying
its bandwidth once per channel that starts there (``ncclTopoSearchRecNet`` L724-816).

The result is a :class:`Graph`: ``n_channels``, ``bw_intra``/``bw_inter`` (GB/s per channel),
``type_intra``/``type_inter`` and the GPU order of each channel, what ``ncclTopoTuneModel`` reads.

Speeds for AMD GPUs are RCCL's list (rccl src/graph/search.cc L900-904 at 0cbce2a7): RCCL's search
is NCCL's with xGMI links as NVLinks.

Where this search differs from NCCL's, it is to reach NCCL's answer in less time, never to change
it: a search that cannot beat the graph already kept is not run, and a partial one is cut when the
links left cannot hold enough channels to beat it (:meth:`_Search._fit`: each ring channel leaves
and enters every GPU once, a chain every GPU but its ends); a state already searched (the same
residual bandwidth on every link and NET, the same channel so far) is not searched again; among
candidates NCCL ranks equal, the one with the fewest unvisited GPUs to go on to is tried first (on a
switchless mesh, so that a channel rarely strands a GPU); and the step budgets are topoweb's
(``TIMEOUT``, ``STEP_BUDGET``). On NVSwitch boards the bounds end every search early; on large
switchless meshes a search may stop at its budget before NCCL's would, and the graph says so
(``budget_hit``).
"""

from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass, field, replace

from apps.domain.nccl_system import NVS, System, local_net, type_rank

__all__ = ["Graph", "compute", "speeds", "RING", "BALANCED_TREE", "TREE", "NVLS", "STEP_BUDGET"]

RING, BALANCED_TREE, TREE, NVLS = "RING", "BALANCED_TREE", "TREE", "NVLS"

# search.cc L1051-1067 at v2.30.7-1
SPEED_INTRA = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
SPEED_INTER = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24,
               0.12)
SM90_INTRA = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
SM90_INTER = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)
SM100_INTRA = (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)
SM100_INTER = (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
               0.24, 0.12)
RCCL_SPEEDS = (48.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12)

# NCCL's per-search budgets in visited steps (search.cc L331-335)
NCCL_TIMEOUT = 1 << 14
NCCL_TIMEOUT_SAME = 1 << 8
GLOBAL_TIMEOUT = 1 << 19
#: topoweb's budgets: a step of this search costs about a hundred of NCCL's C++ steps, so each
#: search gets 1/8 of NCCL's and one ``compute`` at most ``STEP_BUDGET`` steps (NCCL: 2^19). On
#: NVSwitch boards the bounds below end every search long before; on switchless meshes of 8 GPUs
#: the channels are NCCL's; on larger meshes a search may stop earlier than NCCL's would, and the
#: graph says so (``budget_hit``): its channel count is then a lower bound.
TIMEOUT = NCCL_TIMEOUT >> 3
TIMEOUT_TREE = NCCL_TIMEOUT >> 3
TIMEOUT_SAME = NCCL_TIMEOUT_SAME
STEP_BUDGET = 20_000
_PCI_TIMEOUT = 1 << 10  # RecNet's first PCI-order attempt (L782-788)


def speeds(system: System, inter: bool) -> tuple[float, ...]:
    """NCCL's per-channel speed list for this system's GPUs and whether NETs are in the search."""
    if system.amd:
        return RCCL_SPEEDS
    sm = system.sm or 0
    if sm >= 100:
        return SM100_INTER if inter else SM100_INTRA
    if sm >= 90:
        return SM90_INTER if inter else SM90_INTRA
    return SPEED_INTER if inter else SPEED_INTRA


@dataclass(frozen=True)
class Graph:
    """One NCCL graph (``struct ncclTopoGraph``): ``pattern``, ``n_channels``, per-channel
    ``bw_intra``/``bw_inter`` GB/s, path types, ``cross_nic``, and per channel the GPU order
    (``channels``) and the (first, last) NET (``nets``, None inside one node)."""

    pattern: str
    n_channels: int = 0
    bw_intra: float = 0.0
    bw_inter: float = 0.0
    type_intra: str = "LOC"
    type_inter: str = "PIX"
    cross_nic: int = 0
    hops: int = 0
    channels: tuple[tuple[str, ...], ...] = ()
    nets: tuple[tuple[str | None, str | None], ...] = ()
    same_channels: int = 1
    fallback: bool = False
    budget_hit: bool = False
    min_channels: int = 1
    max_channels: int = 32

    @property
    def bw(self) -> float:
        """Channels x per-channel intra-node bandwidth (what ``ncclTopoCompareGraphs`` ranks)."""
        return self.n_channels * self.bw_intra


@dataclass
class _Params:
    pattern: str
    bw_intra: float
    bw_inter: float
    type_intra: int
    type_inter: int
    cross_nic: int
    same: int
    min_channels: int
    max_channels: int


@dataclass
class _State:
    """The mutable state of one ``ncclTopoSearchRec`` run (residual link and NET bandwidth)."""

    cap: dict
    net_bw: dict
    orders: list = field(default_factory=list)
    nets: list = field(default_factory=list)
    used: list = field(default_factory=list)
    hops: int = 0
    time: int = 0
    steps: int = 0
    ub: int = 0
    stop: bool = False
    sig: int = 0
    masks: list = field(default_factory=list)


class _Search:
    """One ``ncclTopoCompute`` run (see the module docstring)."""

    def __init__(self, system: System, inter: bool, budget: int):
        self.s = system
        self.inter = inter and bool(system.nets)
        self.gpus = list(system.gpus)
        self.n = len(self.gpus)
        self.index = {g: i for i, g in enumerate(self.gpus)}
        self.budget = budget
        self.best: Graph | None = None
        self.params: _Params | None = None
        self.st: _State | None = None
        self.pci_links = {k for k in system.cap if not (k[0] == NVS or k[1] == NVS or k[0].startswith("net:")
                                                       or k[1].startswith("net:"))}
        self.cap0 = {k: _units(v) for k, v in system.cap.items()}
        rng = random.Random(0)
        self.weight = {k: rng.getrandbits(48) for k in self.cap0}
        self.net_weight = {n.name: rng.getrandbits(48) for n in system.nets}
        self.bw_intra = self.bw_inter = 0
        self._nets_pref: dict = {}
        self._gpus_of: dict = {}
        self._needs: dict = {}
        self._order_cache: dict = {}
        self._rank_of: dict = {}
        self._ub: dict = {}
        self._ends_cache: dict = {}
        self._seen: set = set()
        self.bit = {g: 1 << i for i, g in enumerate(self.gpus)}

    # --- links -------------------------------------------------------------------------------------
    # Capacities are held in MB/s integers (NCCL rounds its float arithmetic to 1/1000, SUB_ROUND
    # search.cc L78-79); the residual state's signature is a sum over links of a random weight
    # times the residual, updated with each reservation.
    def _need(self, path) -> tuple:
        """(link, weight, PCIe) of each link of ``path``: PCIe links of an Intel PHB path carry 6/5."""
        key = id(path)
        got = self._needs.get(key)
        if got is None:
            got = self._needs[key] = (path, tuple(
                (k, self.weight.get(k, 0), bool(path.intel_phb and k in self.pci_links))
                for k in path.links if k in self.cap0))
        return got[1]

    def _take(self, path, bw: int) -> bool:
        """``followPath``: reserve ``bw`` on every link of ``path``, or nothing when a link lacks it."""
        cap = self.st.cap
        need = self._need(path)
        over = (bw * 6 + 4) // 5
        for k, _w, pci in need:
            if cap[k] < (over if pci else bw):
                return False
        sig = self.st.sig
        for k, w, pci in need:
            v = over if pci else bw
            cap[k] -= v
            sig -= w * v
        self.st.sig = sig
        self.st.hops += len(path.links)
        return True

    def _give(self, path, bw: int) -> None:
        cap = self.st.cap
        over = (bw * 6 + 4) // 5
        sig = self.st.sig
        for k, w, pci in self._need(path):
            v = over if pci else bw
            cap[k] += v
            sig += w * v
        self.st.sig = sig
        self.st.hops -= len(path.links)

    def _gpu_path(self, a: str, b: str):
        p = self.s.gpu_paths.get((a, b))
        if p is None or type_rank(p.type) > self.params.type_intra:
            return None
        return p

    def _net_path(self, g: str, net: str, to_net: bool):
        p = self.s.to_net.get((g, net)) if to_net else self.s.from_net.get((net, g))
        if p is None or type_rank(p.type) > self.params.type_inter:
            return None
        if self.params.pattern in (BALANCED_TREE, TREE):  # trees check the reverse path's type too
            rev = self.s.from_net.get((net, g)) if to_net else self.s.to_net.get((g, net))
            if rev is None or type_rank(rev.type) > self.params.type_inter:
                return None
        return p

    def _tick(self) -> bool:
        st = self.st
        if st.stop or st.time <= 0 or st.steps >= self.budget:
            return False
        st.time -= 1
        st.steps += 1
        return True

    # --- the recursion -----------------------------------------------------------------------------
    def run(self, params: _Params, time: int, steps: int) -> tuple[int, int]:
        """One ``ncclTopoSearchRec`` with fresh residuals; returns (time left, steps used)."""
        self.params = params
        self._seen = set()
        self.bw_intra, self.bw_inter = _units(params.bw_intra), _units(params.bw_inter)
        self.st = _State(cap=dict(self.cap0), net_bw={n.name: _units(n.gbs) for n in self.s.nets}, time=time,
                         steps=steps, ub=self.upper_bound(params))
        self._rec()
        return self.st.time, self.st.steps

    def _ends(self, p: _Params) -> list[tuple[tuple, tuple, tuple, tuple]]:
        """Per GPU, the first links of the paths leaving it and the last links of the paths entering
        it, to and from other GPUs and (across nodes) to and from NETs, within ``p``'s path types."""
        key = (p.type_intra, p.type_inter)
        got = self._ends_cache.get(key)
        if got is not None:
            return got
        out = []
        for g in self.gpus:
            firsts, lasts, net_firsts, net_lasts = set(), set(), set(), set()
            for (a, b), path in self.s.gpu_paths.items():
                if type_rank(path.type) > p.type_intra or not path.links:
                    continue
                if a == g:
                    firsts.add(path.links[0])
                if b == g:
                    lasts.add(path.links[-1])
            if self.inter:
                for net in self.s.nets:
                    up, down = self.s.to_net.get((g, net.name)), self.s.from_net.get((net.name, g))
                    if up is not None and type_rank(up.type) <= p.type_inter and up.links:
                        net_firsts.add(up.links[0])
                    if down is not None and type_rank(down.type) <= p.type_inter and down.links:
                        net_lasts.add(down.links[-1])
            out.append(tuple(tuple(k for k in x if k in self.cap0) for x in (firsts, lasts, net_firsts, net_lasts)))
        self._ends_cache[key] = out
        return out

    def _fit(self, cap: dict, net_bw: dict, p: _Params, bw: int, bw_net: int) -> int:
        """How many more channels the residual links could hold at most. A ring inside a node
        leaves and enters every GPU once; a chain (a tree, or a ring across nodes between its
        NETs) leaves every GPU but its last and enters every GPU but its first over GPU links:
        R more chains need, over GPUs, sum of max(0, R - units) <= R for the links out and in."""
        fit = p.max_channels
        ends = self._ends(p)
        if self.n > 1 and p.pattern == RING and not self.inter:
            for firsts, lasts, _nf, _nl in ends:
                fit = min(fit, sum(cap[k] // bw for k in firsts), sum(cap[k] // bw for k in lasts))
        elif self.n > 1:
            outs = [sum(cap[k] // bw for k in f) for f, _l, _nf, _nl in ends]
            ins = [sum(cap[k] // bw for k in l) for _f, l, _nf, _nl in ends]
            r = 0
            while r < fit and sum(max(0, r + 1 - u) for u in outs) <= r + 1 and \
                    sum(max(0, r + 1 - u) for u in ins) <= r + 1:
                r += 1
            fit = r
            if p.pattern == RING:  # and each GPU leaves and enters once per channel, to a GPU or a NET
                for (f, l, nf, nl), u_out, u_in in zip(ends, outs, ins):
                    fit = min(fit, u_out + sum(cap[k] // bw_net for k in nf), u_in + sum(cap[k] // bw_net for k in nl))
        if self.inter:
            fit = min(fit, sum(v // bw_net for v in net_bw.values()))
            if fit and p.pattern == RING and not self._can_close(p):
                fit = 0
        return fit

    def _can_close(self, p: _Params) -> bool:
        """Whether some ring channel can start at a NET and end at a NET ``p``'s path types and
        NIC crossing allow: a first GPU the NET reaches and another GPU that reaches the end NET."""
        key = ("close", p.type_inter, p.cross_nic)
        if key not in self._ub:
            ok = False
            for net in self.s.nets:
                firsts = {g for g in self.gpus if (q := self.s.from_net.get((net.name, g))) is not None
                          and type_rank(q.type) <= p.type_inter}
                ends = [net] if p.cross_nic == 0 else list(self.s.nets)
                lasts = {g for m in ends for g in self.gpus if (q := self.s.to_net.get((g, m.name))) is not None
                         and type_rank(q.type) <= p.type_inter}
                if firsts and lasts and (self.n == 1 or len(firsts | lasts) > 1):
                    ok = True
                    break
            self._ub[key] = ok
        return self._ub[key]

    def upper_bound(self, p: _Params) -> int:
        """The most channels that can fit at ``p``'s speed (:meth:`_fit` on the whole links). A
        search that reaches it stops; one whose bound cannot beat the best graph is not run, and a
        partial search whose channels plus what still fits cannot beat it is cut (topoweb's
        branch and bound: the answer NCCL's search reaches, without the time its budgets spend)."""
        if p.pattern == NVLS:
            return p.max_channels
        key = (p.pattern, p.bw_intra, p.bw_inter, p.type_intra, p.type_inter, p.max_channels)
        if key not in self._ub:
            self._ub[key] = self._fit(self.cap0, {n.name: _units(n.gbs) for n in self.s.nets}, p,
                                      _units(p.bw_intra), _units(p.bw_inter))
        return self._ub[key]

    def _rec(self) -> None:
        if self.inter:
            self._rec_net()
            return
        st, p = self.st, self.params
        c = len(st.orders)
        if p.pattern == NVLS:
            if c < self.n:
                self._try_gpu(0, None, self.gpus[c], 0, -1)
            return
        if c == 0:
            self._try_gpu(0, None, self.gpus[0], 1, -1)
        else:
            self._try_gpu(0, None, st.orders[-1][0], 2, -1)
        if p.same == 0 or c == 0:
            for g in self.gpus:
                self._try_gpu(0, None, g, 0, -1)

    def _start_channel(self) -> None:
        self.st.masks.append(0)
        self.st.used.append(set())
        self.st.orders.append([])
        self.st.nets.append([None, None])

    def _end_channel(self) -> None:
        self.st.masks.pop()
        self.st.used.pop()
        self.st.orders.pop()
        self.st.nets.pop()

    def _try_gpu(self, step: int, frm, g: str, forced: int, back_to_net: int, from_net: str | None = None) -> None:
        """``ncclTopoSearchTryGpu`` (L358-371): move to GPU ``g`` (from GPU ``frm``, from NET
        ``from_net``, or from nowhere at a channel's start) and continue the search there."""
        st = self.st
        if step == 0:
            self._start_channel()
            if from_net is not None:
                st.nets[-1][0] = from_net
        path, bw = None, self.bw_intra
        if frm is not None:
            path = self._gpu_path(frm, g)
        elif from_net is not None:
            path, bw = self._net_path(g, from_net, to_net=False), self.bw_inter
        if (frm is not None or from_net is not None) and (path is None or not self._take(path, bw)):
            if step == 0:
                self._end_channel()
            return
        st.used[-1].add(g)
        mask = st.masks[-1]
        st.masks[-1] = mask | self.bit[g]
        self._rec_gpu(g, step, back_to_net, forced)
        st.masks[-1] = mask
        st.used[-1].discard(g)
        if path is not None:
            self._give(path, bw)
        if step == 0:
            self._end_channel()

    def _back_to_net(self) -> int:
        p = self.params
        if not self.inter:
            return -1
        return self.n - 1 if p.pattern == RING else 0

    def _complete(self) -> None:
        """A channel is complete: count it, keep the graph when better, look for the next."""
        st, p = self.st, self.params
        n = len(st.orders)
        if n >= p.min_channels and self._better(n):
            self.best = Graph(p.pattern, n, p.bw_intra, p.bw_inter, _type(p.type_intra), _type(p.type_inter),
                              p.cross_nic, st.hops, tuple(tuple(o) for o in st.orders),
                              tuple(tuple(x) for x in st.nets), p.same, min_channels=p.min_channels,
                              max_channels=p.max_channels)
            if n == p.max_channels:
                st.time = -1
            elif n >= st.ub:
                st.stop = True  # no more channels fit at this speed: nothing better is left to find
        if n < p.max_channels and st.time > 0 and not st.stop:
            if p.pattern != NVLS:
                fit = self._fit(st.cap, st.net_bw, p, self.bw_intra, self.bw_inter)
                if n + fit < p.min_channels or (self.best is not None and (n + fit) * p.bw_intra <=
                                                self.best.n_channels * self.best.bw_intra + 1e-9):
                    return
            self._rec()

    def _better(self, n: int) -> bool:
        """``ncclTopoCompareGraphs`` (L445-468)."""
        ref, p = self.best, self.params
        if ref is None:
            return True
        if p.pattern == NVLS:
            return (ref.n_channels < n <= self.n) or n * p.bw_inter > ref.n_channels * ref.bw_inter
        if n * p.bw_intra > ref.n_channels * ref.bw_intra + 1e-9:
            return True
        if n * p.bw_intra < ref.n_channels * ref.bw_intra - 1e-9:
            return False
        return ref.pattern == p.pattern and ref.cross_nic == p.cross_nic and self.st.hops < ref.hops

    def _rec_gpu(self, g: str | None, step: int, back_to_net: int, forced: int) -> None:
        """``ncclTopoSearchRecGpu`` (L621-722)."""
        st, p = self.st, self.params
        if step < self.n:
            # a state already searched (same residual links and NETs, same channel so far) leads to
            # the same channels: it is not searched again (topoweb's shortcut for NCCL's budgets)
            replay = tuple(st.orders[-2]) if forced == 2 and len(st.orders) > 1 else None
            key = (st.sig, len(st.orders), step, g, st.masks[-1] if st.masks else 0, tuple(st.nets[-1]) if st.nets
                   else None, back_to_net, forced, replay)
            if key in self._seen:
                return
            self._seen.add(key)
        if not self._tick():
            return
        if step == self.n:
            self._complete()
            return
        order = st.orders[-1]
        if len(order) <= step:
            order.append(g)
        else:
            order[step] = g
        if step == back_to_net:
            self._back_to_nic(g, step, forced)
        elif p.pattern == NVLS:
            self._try_nvls(g)
        elif step < self.n - 1:
            for nxt in self._next_gpus(g, step, back_to_net, forced):
                if nxt not in st.used[-1]:
                    self._try_gpu(step + 1, g, nxt, forced, back_to_net)
                    if st.time <= 0:
                        return
        elif p.pattern == RING and not self.inter:
            first = order[0]
            path = self._gpu_path(g, first) if self.n > 1 else None
            if self.n == 1:
                self._rec_gpu(first, step + 1, back_to_net, forced)
            elif path is not None and self._take(path, self.bw_intra):
                self._rec_gpu(first, step + 1, back_to_net, forced)
                self._give(path, self.bw_intra)
        else:
            self._rec_gpu(g, self.n, -1, forced)
        if len(order) > step:
            del order[step:]

    def _back_to_nic(self, g: str, step: int, forced: int) -> None:
        """Step ``backToNet`` of ``ncclTopoSearchRecGpu`` (L646-679): from GPU ``g`` to each NET
        ``ncclTopoSearchCheckNet`` allows, then on (a balanced tree sends half the bandwidth from
        each of its first two GPUs)."""
        st, p = self.st, self.params
        start = st.nets[-1][0]
        for net in self._select_nets(g):
            if not self._check_net(start, net, step):
                continue
            bw = self.bw_inter // 2 if p.pattern == BALANCED_TREE else self.bw_inter
            nxt = 1 if (p.pattern == BALANCED_TREE and step == 0) else -1
            path = self._net_path(g, net, to_net=True)
            if path is None or not self._take(path, bw):
                continue
            saved = st.nets[-1][1]
            st.nets[-1][1] = net
            self._rec_gpu(g, step, nxt, forced)
            st.nets[-1][1] = saved
            self._give(path, bw)
            if st.time <= 0:
                return

    def _check_net(self, start: str | None, net: str, step: int) -> bool:
        """``ncclTopoSearchCheckNet`` (L593-619) for this system's NETs."""
        p = self.params
        if p.pattern == TREE and net != start:
            return False
        c = len(self.st.orders) - 1
        if p.pattern == RING and p.cross_nic == 2:
            if c & 1 and net != self.st.nets[c - 1][0]:
                return False
        elif p.cross_nic == 0 and net != start:
            return False
        if p.pattern == BALANCED_TREE and step != 0 and net != self.st.nets[-1][1]:
            return False
        return True

    def _try_nvls(self, head: str) -> None:
        """``ncclTopoSearchTryNvls`` (L410-443): every GPU sends to and receives from the fabric at
        ``bw_intra``, the head twice."""
        st = self.st
        taken = []
        ok = True
        for d in self.gpus:
            need = self.bw_intra * (2 if d == head else 1)
            for key in ((NVS, d), (d, NVS)):
                if st.cap.get(key, 0) < need:
                    ok = False
                    break
                st.cap[key] -= need
                st.sig -= self.weight[key] * need
                taken.append((key, need))
            if not ok:
                break
        if ok:
            self._rec_gpu(None, self.n, -1, 0)
        for key, need in taken:
            st.cap[key] += need
            st.sig += self.weight[key] * need

    def _next_gpus(self, g: str, step: int, back_to_net: int, forced: int) -> list[str]:
        """``ncclTopoSearchNextGpuSort``, or the forced PCI / replay order."""
        st = self.st
        if forced == 1:
            return [self.gpus[step + 1]]
        if forced == 2 and len(st.orders) > 1:
            prev = st.orders[-2]
            return [prev[step + 1]] if step + 1 < len(prev) else []
        sort_net = 0 if back_to_net == -1 else (1 if back_to_net == step + 1 else -1)
        net = st.nets[-1][0] if sort_net else None
        key = (g, sort_net, net, self.params.pattern, self.params.type_intra)
        order = self._order_cache.get(key)
        if order is None:
            order = self._order_cache[key] = self._sorted_gpus(g, sort_net, net)
        used = st.used[-1]
        left = [h for h in order if h not in used]
        if self.s.nvswitch or len(left) < 3:
            return left
        # Among the GPUs NCCL ranks equal (same path bandwidth and hops) the one with the fewest
        # unvisited GPUs to go on to comes first: on a switchless mesh a channel then rarely strands
        # a GPU, and the search reaches in its budget the channels a longer one finds.
        rank = self._rank_of.get(key)
        if rank is None:
            rank = self._rank_of[key] = self._tie_groups(g, sort_net, net, order)
        onward = self._onward
        return sorted(left, key=lambda h: (rank[h], sum(1 for u in onward(h) if u not in used)))

    def _tie_groups(self, g: str, sort_net: int, net: str | None, order: list[str]) -> dict[str, int]:
        """Each candidate's group in NCCL's order: candidates NCCL ranks equal share a group."""
        out, group, last = {}, -1, None
        for h in order:
            score = self._score(g, h, sort_net, net)[:-1]
            if score != last:
                group, last = group + 1, score
            out[h] = group
        return out

    def _onward(self, h: str) -> list[str]:
        key = ("onward", h, self.params.type_intra)
        got = self._order_cache.get(key)
        if got is None:
            got = self._order_cache[key] = [b for (a, b), p in self.s.gpu_paths.items()
                                            if a == h and type_rank(p.type) <= self.params.type_intra]
        return got

    def _score(self, g: str, h: str, sort_net: int, net: str | None) -> tuple:
        """``struct ncclGpuScore`` of candidate ``h`` from ``g``, as ``cmpScore`` orders it (L191-211)."""
        path = self.s.gpu_paths[(g, h)]
        inter = (0, 0, 0)
        if sort_net and net is not None:
            npath = self.s.from_net.get((net, h))
            inter = (int(npath.bw) if npath else 0, int(self.s.gpu_pci.get(h, 0)), len(npath.links) if npath else 0)
        start = self.index[g]
        return (-inter[0], -inter[1], inter[2], -int(path.bw), len(path.links), (self.index[h] - start) % self.n)

    def _sorted_gpus(self, g: str, sort_net: int, net: str | None) -> list[str]:
        start = self.index[g]
        scores = []
        for i in range(1, self.n):
            h = self.gpus[(start + i) % self.n]
            path = self.s.gpu_paths.get((g, h))
            if path is None or type_rank(path.type) > self.params.type_intra:
                continue  # FollowPath refuses it (L148-149): not a candidate worth trying
            scores.append(self._score(g, h, sort_net, net) + (h,))
        scores.sort()
        order = [x[-1] for x in scores]
        if sort_net == -1 and len({(x[3], x[4]) for x in scores}) <= 1:
            order.reverse()
        if self.s.nvswitch:
            # NVSwitches prefer a limited set of peers: next and previous GPU only (L293-324)
            nxt, prv = self.gpus[(start + 1) % self.n], self.gpus[(start - 1) % self.n]
            firsts = [nxt, prv] if self.params.pattern == RING else ([prv, nxt] if self.params.pattern in (
                BALANCED_TREE,) else [nxt])
            return list(dict.fromkeys(h for h in firsts if h in order))
        return order

    # --- NETs ----------------------------------------------------------------------------------
    def _select_nets(self, gpu: str | None) -> list[str]:
        """``ncclTopoSelectNets`` (L541-589): each GPU's preferred NETs channel by channel, then every
        other NET within ``type_inter``."""
        key = (gpu, self.params.type_inter)
        if key in self._nets_pref:
            return self._nets_pref[key]
        out: list[str] = []
        gpus = self.gpus if gpu is None else [gpu]
        for g in gpus:
            first = None
            for c in range(64):
                n = local_net(_View(self.s), g, c)
                if n is None or (c > 0 and n == first):
                    break
                first = first or n
                if n not in out:
                    out.append(n)
        for t in range(type_rank("SYS") + 1):
            if t > self.params.type_inter:
                break
            for g in gpus:
                for net in self.s.nets:
                    p = self.s.to_net.get((g, net.name))
                    if p is not None and type_rank(p.type) == t and net.name not in out:
                        out.append(net.name)
        self._nets_pref[key] = out
        return out

    def _rec_net(self) -> None:
        """``ncclTopoSearchRecNet`` (L724-816)."""
        st, p = self.st, self.params
        nets = self._select_nets(None)
        c = len(st.orders)
        found = False
        for i in range(len(nets)):
            if p.pattern == NVLS and found:
                break
            net = nets[(c + i) % len(nets)]
            if st.net_bw.get(net, 0) < self.bw_inter:
                continue
            if p.pattern == RING and p.cross_nic == 2 and c & 1 and net != st.nets[c - 1][1]:
                continue
            st.net_bw[net] -= self.bw_inter
            st.sig -= self.net_weight[net] * self.bw_inter
            local = self.s.local_gpu.get(net)
            if p.pattern == NVLS:
                heads = {o[0] for o in st.orders}
                if c < len(nets) and local is not None and local not in heads:
                    self._try_gpu(0, None, local, 0, 0, from_net=net)
                    found = True
            elif c > 0 and p.same == 1:
                self._try_gpu(0, None, st.orders[-1][0], 2, self._back_to_net(), from_net=net)
            else:
                if c == 0 and not self.s.nvswitch:
                    saved = st.time
                    st.time = _PCI_TIMEOUT
                    self._try_gpu(0, None, self.gpus[0], 1, self._back_to_net(), from_net=net)
                    st.time = -1 if st.time == -1 else saved
                if local is not None and st.time > 0:
                    self._try_gpu(0, None, local, 0, self._back_to_net(), from_net=net)
                for g in self._local_gpus(net):
                    if g == local or st.time <= 0:
                        continue
                    self._try_gpu(0, None, g, 0, self._back_to_net(), from_net=net)
            st.net_bw[net] += self.bw_inter
            st.sig += self.net_weight[net] * self.bw_inter
            if st.time <= 0 or st.stop:
                return

    def _local_gpus(self, net: str) -> list[str]:
        if net not in self._gpus_of:
            self._gpus_of[net] = _View(self.s).local_gpus(net)
        return self._gpus_of[net]


class _View:
    """``local_net``'s view of a system (its GPU<->NET paths after PXN)."""

    def __init__(self, system: System):
        self.s = system
        self.dev = system.dev

    def local_nets(self, g: str) -> list[str]:
        items = [(n.name, self.s.to_net[(g, n.name)]) for n in self.s.nets if (g, n.name) in self.s.to_net]
        return _local(items)

    def local_gpus(self, net: str) -> list[str]:
        items = [(g, self.s.from_net[(net, g)]) for g in self.s.gpus if (net, g) in self.s.from_net]
        return _local(items)


def _local(items) -> list[str]:
    if not items:
        return []
    top = max(p.bw for _, p in items)
    best = [(x, p) for x, p in items if abs(p.bw - top) < 1e-6]
    low = min(type_rank(p.type) for _, p in best)
    return [x for x, p in best if type_rank(p.type) == low]


_TYPE_NAMES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS")


def _type(rank: int) -> str:
    return _TYPE_NAMES[max(0, min(rank, len(_TYPE_NAMES) - 1))]


def _min_max_types(system: System, inter: bool) -> tuple[int, int, int, int]:
    intra = [type_rank(p.type) for p in system.gpu_paths.values()]
    lo_i, hi_i = (min(intra), max(intra)) if intra else (type_rank("LOC"), type_rank("SYS"))
    lo_e, hi_e = type_rank("PIX"), type_rank("SYS")
    if inter:
        ext = [type_rank(p.type) for p in system.to_net.values()]
        if ext:
            # ncclTopoGetGpuMinPath/MaxPath: per GPU the best (worst) path, min (max) over GPUs
            per = {}
            for (g, _n), p in system.to_net.items():
                lo, hi = per.get(g, (99, -1))
                per[g] = (min(lo, type_rank(p.type)), max(hi, type_rank(p.type)))
            lo_e, hi_e = min(v[0] for v in per.values()), max(v[1] for v in per.values())
        hi_i = hi_e
    if len(system.gpus) <= 1:
        lo_i, hi_i = type_rank("LOC"), type_rank("SYS") if not inter else hi_i
    return lo_i, hi_i, lo_e, hi_e


def _dup_channels(g: Graph, cc_min: int) -> Graph:
    """``ncclTopoDupChannels`` (L1036-1049)."""
    if g.n_channels == 0 or g.pattern == NVLS or g.bw_intra < 25.0:
        return g
    if cc_min > 80 and g.bw_intra < 50.0 and g.n_channels > 4:
        return g
    dup = min(g.n_channels * 2, g.max_channels)
    div = -(-dup // g.n_channels)
    chans = (g.channels * 2)[:dup]
    nets = (g.nets * 2)[:dup]
    return replace(g, n_channels=dup, bw_intra=g.bw_intra / div, bw_inter=g.bw_inter / div, channels=chans, nets=nets)


def _units(gbs: float) -> int:
    """GB/s as integer MB/s (NCCL's 1/1000 rounding); unbounded links as a very large number."""
    return int(round(gbs * 1000)) if math.isfinite(gbs) else 1 << 50


def _hopeless(search: _Search, p: _Params) -> bool:
    """Whether a ring search at ``p`` cannot give a graph ``ncclTopoCompareGraphs`` would keep."""
    if p.pattern == NVLS:
        return False
    ub = search.upper_bound(p)
    if ub < p.min_channels:
        return True
    best = search.best
    return best is not None and ub * p.bw_intra <= best.n_channels * best.bw_intra + 1e-9


def compute(system: System, pattern: str, *, inter: bool, min_channels: int = 1, max_channels: int | None = None,
            cross_nic: int = 2) -> Graph:
    """``ncclTopoCompute`` for ``pattern`` on ``system`` (NETs in the search when ``inter``).

    ``min_channels``/``max_channels`` as init.cc L1174-1215 sets them: rings 1..32, trees exactly
    the ring's channel count, NVLS 1..64 (then capped to the GPU count, L1124-1138).
    ``cross_nic`` is ``NCCL_CROSS_NIC`` (default 2)."""
    inter = inter and bool(system.nets)
    n = len(system.gpus)
    if max_channels is None:
        max_channels = 32 if pattern == RING else 64
    if n == 0:
        return Graph(pattern)
    cc_min = 0 if system.amd else (system.sm or 0)
    if pattern == NVLS:
        if not system.nvswitch or cc_min < 90 or n < 2:
            return Graph(pattern)
        max_channels = min(32, n)  # NCCL_MAX_NVLS_ARITY (device.h L213)
        if not inter:
            min_channels = max_channels
    if n == 1 and pattern != RING:
        pattern = TREE
    lo_i, hi_i, lo_e, hi_e = _min_max_types(system, inter)
    if cc_min < 90:
        hi_e = type_rank("SYS")
    cross = cross_nic if (len(system.nets) > 1 and pattern in (RING, BALANCED_TREE, TREE)) and inter else 0
    sp = speeds(system, inter)
    max_bw, total_bw = system.max_bw(inter), system.total_bw()
    scaled_total = total_bw * n / (n - 1) if (n > 1 and pattern != RING) else total_bw
    idx = 0
    while (sp[idx] > max_bw or sp[idx] * min_channels > scaled_total) and idx < len(sp) - 1:
        idx += 1
    same0 = 0 if pattern == NVLS else 1
    tmp = _Params(pattern, sp[idx], sp[idx], lo_i, lo_e, 1 if cross == 1 else 0, same0, min_channels, max_channels)
    search = _Search(system, inter, STEP_BUDGET)
    steps = 0
    global_left = GLOBAL_TIMEOUT
    pass_ = 1
    old = sys.getrecursionlimit()
    if old < 20000:
        sys.setrecursionlimit(20000)
    try:
        while True:
            budget = TIMEOUT_SAME if tmp.same else (TIMEOUT_TREE if tmp.pattern == TREE else TIMEOUT)
            global_left -= budget
            if _hopeless(search, tmp):
                left = budget  # the search could not beat the best graph: as if it ran out of GPUs to try
            else:
                left, steps = search.run(replace(tmp), budget, steps)
            best = search.best
            done = left == -1 or steps >= STEP_BUDGET or (best is not None and best.n_channels * best.bw_inter >=
                                                           total_bw - 1e-9)
            if not done and pass_ == 1:
                nb = best.n_channels if best else 0
                if tmp.same == 1 and not (system.arch == "x86" and system.vendor == "amd" and
                                          tmp.type_intra == type_rank("SYS")):
                    tmp.same = 0
                    continue
                tmp.same = same0
                global_left += left if left != -1 else 0
                if not (global_left < 0 and nb):
                    if cc_min >= 90 and tmp.pattern == BALANCED_TREE:
                        tmp.pattern = TREE
                        continue
                    tmp.pattern = pattern
                    max_intra = tmp.type_inter if inter else hi_i
                    if tmp.type_intra < max_intra and (nb == 0 or tmp.type_intra < type_rank(best.type_intra)):
                        tmp.type_intra += 1
                        if tmp.type_intra < type_rank("DIS"):
                            continue
                    tmp.type_intra = lo_i
                    if inter and tmp.type_inter < hi_e and (nb == 0 or tmp.type_inter < type_rank(best.type_inter)
                                                            or tmp.type_inter < type_rank("PXN")):
                        tmp.type_inter += 1
                        if tmp.type_inter < type_rank("DIS"):
                            continue
                    tmp.type_inter = lo_e
                    if cross == 2 and tmp.cross_nic == 0 and pattern in (RING, BALANCED_TREE):
                        tmp.cross_nic = 2
                        continue
                    tmp.cross_nic = 1 if cross == 1 else 0
                    if idx < len(sp) - 1 and (nb == 0 or sp[idx + 1] / best.bw_inter > 0.49):
                        idx += 1
                        tmp.bw_intra = tmp.bw_inter = sp[idx]
                        continue
            # done
            if pass_ == 1:
                best = search.best
                if best is None:
                    break
                best = _dup_channels(best, cc_min)
                search.best = best
                idx = 0
                while sp[idx] > best.bw_inter + 1e-9 and idx < len(sp) - 1:
                    idx += 1
                tmp = _Params(best.pattern, sp[idx], sp[idx], type_rank(best.type_intra), type_rank(best.type_inter),
                              best.cross_nic, best.same_channels, best.n_channels, max_channels)
                pass_ = 2
                left = -1
            if pass_ == 2 and left != 0 and idx > 0 and steps < STEP_BUDGET:
                best = search.best
                if pattern == RING:
                    if tmp.bw_intra > best.bw_intra + 1e-9:
                        break  # a faster ring was not found: higher speeds will not be either
                    idx -= 1
                    tmp.bw_intra = tmp.bw_inter = sp[idx]
                    continue
                if pattern == NVLS and abs(tmp.bw_inter - best.bw_inter) < 1e-9 and tmp.bw_inter < tmp.bw_intra * 2:
                    tmp.min_channels = tmp.max_channels = best.n_channels
                    idx -= 1
                    tmp.bw_inter = sp[idx]
                    continue
                if pattern != NVLS and abs(tmp.bw_intra - best.bw_intra) < 1e-9 and tmp.bw_intra < tmp.bw_inter * 2:
                    idx -= 1
                    tmp.bw_intra = sp[idx]
                    continue
            break
    finally:
        sys.setrecursionlimit(old)
    best = search.best
    if best is not None and steps >= STEP_BUDGET:
        best = replace(best, budget_hit=True)
    if best is None or best.n_channels == 0:
        if pattern == NVLS:
            return Graph(pattern)
        # "Could not find a path ... falling back to simple order" (L1289-1300)
        return Graph(pattern, 1, 0.1, 0.1, "SYS", _type(lo_e), 0, 0, (tuple(system.gpus),), ((None, None),),
                     fallback=True)
    return best
