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
it: a search that cannot beat the graph already kept is not run (its bound: every GPU's links; for
rings inside a node every split of the GPUs, ``Tables.ring_cut``; across nodes the links of the
NET paths, ``Tables.net_flow``, and for the same channels the NETs of one GPU,
``Tables.same_start_units``), and a partial one is cut when the links left cannot hold enough
channels to beat it (``nccl_search_bounds.fit``: each ring channel leaves and enters every GPU once,
a chain every GPU but its ends); a state already searched (the same residual bandwidth on every
link and NET, the same channel so far) is not searched again;
among candidates NCCL ranks equal, the one with the fewest unvisited GPUs to go on to is tried
first (on a switchless mesh, so that a channel rarely strands a GPU); and the step budgets are
topoweb's (``TIMEOUT``, ``STEP_BUDGET``). On NVSwitch boards the bounds end every search early; on
large switchless meshes a search may stop at its budget before NCCL's would, and the graph says so
(``budget_hit``).

The work is split by stage: this module is ``ncclTopoCompute``'s driver (the speed lists, the
passes and their order, the budgets, ``ncclTopoDupChannels``, the fallback);
:mod:`apps.domain.nccl_search_tables` the integer view of the system it searches (GPUs, NETs and
links as indexes, capacities as integer MB/s, the tables each path-type limit needs), kept per
system; :mod:`apps.domain.nccl_search_core` one ``ncclTopoSearchRec`` run on that view. A run is a
function of its effective parameters (the path-type limits as the paths see them), its time, the
steps left and the graph kept, which it reads only through the comparisons it records: a later run
that matches an earlier one on all of these is that run, and the driver reuses its outcome
(``_Searcher.run``) rather than searching again. The search finds the same channels as before
this split (``tests/domain/engine/test_estimate_stable.py``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace

from apps.domain import nccl_search_bounds as bounds
from apps.domain import nccl_search_core as core
from apps.domain import nccl_search_tables as tables_mod
from apps.domain.nccl_search_core import Graph, Params
from apps.domain.nccl_search_tables import BALANCED_TREE, NVLS, RING, TREE, type_name
from apps.domain.nccl_system import System
from apps.domain.paths import nccl_rank

__all__ = ["Graph", "compute", "speeds", "clear_caches", "RING", "BALANCED_TREE", "TREE", "NVLS", "STEP_BUDGET"]

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
#: topoweb's budgets: each search gets 1/8 of NCCL's and one ``compute`` at most ``STEP_BUDGET``
#: steps (NCCL: 2^19), set when a step cost 3 us in Python against NCCL's fraction of one in C++.
#: The C recursion (``nccl_search_native``) makes a step cost 0.05 us, but the budgets stay these,
#: so that a host without it (no C compiler) finds the same channels. On NVSwitch boards the
#: bounds below end every search long before; on switchless meshes of 8 GPUs the channels are
#: NCCL's; on larger meshes a search may stop earlier than NCCL's would, and the graph says so
#: (``budget_hit``): its channel count is then a lower bound.
TIMEOUT = NCCL_TIMEOUT >> 3
TIMEOUT_TREE = NCCL_TIMEOUT >> 3
TIMEOUT_SAME = NCCL_TIMEOUT_SAME
STEP_BUDGET = 20_000


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


def clear_caches() -> None:
    """Forget the integer views of the systems searched (``nccl_search_tables``)."""
    tables_mod.clear()


@dataclass
class _Searcher:
    """The state ``ncclTopoCompute`` keeps across its runs: the graph kept so far (``best``, its
    ``graph``), the upper bounds per speed and limits, and the runs already made that a later run
    with the same effective parameters replays (``core.Record``)."""

    tb: tables_mod.Tables
    inter: bool
    best: Graph | None = None
    _ub: dict = field(default_factory=dict)
    _runs: dict = field(default_factory=dict)

    def limits(self, p: Params) -> tuple[int, int]:
        return self.tb.effective(p.type_intra, p.type_inter, self.inter)

    def upper_bound(self, p: Params, tight: bool = True) -> int:
        """The most channels that can fit at ``p``'s speed (``bounds.upper_bound``; without
        ``tight``, ``bounds.fit`` alone). A search that reaches it stops; one whose bound cannot beat
        the kept graph is not run, and a partial search whose channels plus what still fits cannot
        beat it is cut (topoweb's branch and bound: the answer NCCL's search reaches, without the
        time its budgets spend)."""
        ti, te = self.limits(p)
        key = (p.pattern, p.bw_intra, p.bw_inter, ti, te, p.max_channels, self.inter and p.same == 1, tight)
        got = self._ub.get(key)
        if got is None:
            got = self._ub[key] = bounds.upper_bound(self.tb, p, ti, te, self.inter, tight)
        return got

    def hopeless(self, p: Params) -> bool:
        """Whether a search at ``p`` cannot give a graph ``ncclTopoCompareGraphs`` would keep (the
        links' bound first; the cuts and flows of the tight one only where it does not tell)."""
        if p.pattern == NVLS:
            return False
        best = self.best
        for tight in (False, True):
            ub = self.upper_bound(p, tight)
            if ub < p.min_channels or (best is not None and
                                       ub * p.bw_intra <= best.n_channels * best.bw_intra + 1e-9):
                return True
        return False

    def run(self, p: Params, time: int, steps: int) -> tuple[int, int]:
        """One ``ncclTopoSearchRec`` from ``time`` with ``steps`` counted; (time left, steps).

        A run is a function of its effective parameters (path-type limits as the paths see them),
        its time, the steps left and the graph kept; the graph kept enters only through the
        comparisons the run's :class:`~apps.domain.nccl_search_core.Record` lists. So a run that
        kept no graph, with the same effective parameters and time as a later one, whose record
        the later graph answers the same way, and that stayed clear of the step budget with the
        later run's steps too, is the later run: its outcome is reused, not searched again."""
        ti, te = self.limits(p)
        key = (p.pattern, p.bw_intra, p.bw_inter, ti, te, p.cross_nic, p.same, p.min_channels, p.max_channels, time)
        for used, left, record in self._runs.get(key, ()):
            if steps + used < STEP_BUDGET and record.replays(p, self.best, self.tb.n):
                return left, steps + used
        out = core.run(self.tb, p, self.inter, time, steps, STEP_BUDGET, self.best, self.upper_bound(p))
        if out.best is self.best and out.steps < STEP_BUDGET:
            self._runs.setdefault(key, []).append((out.steps - steps, out.time, out.record))
        self.best = out.best
        return out.time, out.steps


def _min_max_types(system: System, inter: bool) -> tuple[int, int, int, int]:
    intra = [nccl_rank(p.type) for p in system.gpu_paths.values()]
    lo_i, hi_i = (min(intra), max(intra)) if intra else (nccl_rank("LOC"), nccl_rank("SYS"))
    lo_e, hi_e = nccl_rank("PIX"), nccl_rank("SYS")
    if inter:
        ext = [nccl_rank(p.type) for p in system.to_net.values()]
        if ext:
            # ncclTopoGetGpuMinPath/MaxPath: per GPU the best (worst) path, min (max) over GPUs
            per = {}
            for (g, _n), p in system.to_net.items():
                lo, hi = per.get(g, (99, -1))
                per[g] = (min(lo, nccl_rank(p.type)), max(hi, nccl_rank(p.type)))
            lo_e, hi_e = min(v[0] for v in per.values()), max(v[1] for v in per.values())
        hi_i = hi_e
    if len(system.gpus) <= 1:
        lo_i, hi_i = nccl_rank("LOC"), nccl_rank("SYS") if not inter else hi_i
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
    tb = tables_mod.tables(system)
    kept = tb.kept.get(("types", inter))
    if kept is None:
        kept = tb.kept[("types", inter)] = _min_max_types(system, inter)
    lo_i, hi_i, lo_e, hi_e = kept
    if cc_min < 90:
        hi_e = nccl_rank("SYS")
    cross = cross_nic if (len(system.nets) > 1 and pattern in (RING, BALANCED_TREE, TREE)) and inter else 0
    sp = speeds(system, inter)
    max_bw, total_bw = system.max_bw(inter), system.total_bw()
    scaled_total = total_bw * n / (n - 1) if (n > 1 and pattern != RING) else total_bw
    idx = 0
    while (sp[idx] > max_bw or sp[idx] * min_channels > scaled_total) and idx < len(sp) - 1:
        idx += 1
    same0 = 0 if pattern == NVLS else 1
    tmp = Params(pattern, sp[idx], sp[idx], lo_i, lo_e, 1 if cross == 1 else 0, same0, min_channels, max_channels)
    search = _Searcher(tb, inter)
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
            if search.hopeless(tmp):
                left = budget  # the search could not beat the best graph: as if it ran out of GPUs to try
            else:
                left, steps = search.run(replace(tmp), budget, steps)
            best = search.best
            done = left == -1 or steps >= STEP_BUDGET or (best is not None and best.n_channels * best.bw_inter >=
                                                           total_bw - 1e-9)
            if not done and pass_ == 1:
                nb = best.n_channels if best else 0
                if tmp.same == 1 and not (system.arch == "x86" and system.vendor == "amd" and
                                          tmp.type_intra == nccl_rank("SYS")):
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
                    if tmp.type_intra < max_intra and (nb == 0 or tmp.type_intra < nccl_rank(best.type_intra)):
                        tmp.type_intra += 1
                        if tmp.type_intra < nccl_rank("DIS"):
                            continue
                    tmp.type_intra = lo_i
                    if inter and tmp.type_inter < hi_e and (nb == 0 or tmp.type_inter < nccl_rank(best.type_inter)
                                                            or tmp.type_inter < nccl_rank("PXN")):
                        tmp.type_inter += 1
                        if tmp.type_inter < nccl_rank("DIS"):
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
                tmp = Params(best.pattern, sp[idx], sp[idx], nccl_rank(best.type_intra), nccl_rank(best.type_inter),
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
        return Graph(pattern, 1, 0.1, 0.1, "SYS", type_name(lo_e), 0, 0, (tuple(system.gpus),), ((None, None),),
                     fallback=True)
    return best
