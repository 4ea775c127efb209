"""One ``ncclTopoSearchRec`` run of NCCL's channel search, on the integer view of a system.

:func:`run` is the depth-first search of src/graph/search.cc at v2.30.7-1 for one set of search
parameters (pattern, per-channel speed, path-type limits, NIC crossing, same channels, channel
count bounds) and a time budget: ``ncclTopoSearchRec`` (L849-881) starts channels inside the node
or, across nodes, at a NET (``ncclTopoSearchRecNet`` L724-816); ``ncclTopoSearchTryGpu``
(L358-371) moves to a GPU reserving the path's bandwidth on every link (``followPath`` L81-123,
the 6/5 Intel overhead L81-93); ``ncclTopoSearchRecGpu`` (L621-722) goes on to the next GPU in
``ncclTopoSearchNextGpuSort`` order (L253-326), back to a NET (L646-679, the NETs
``ncclTopoSearchCheckNet`` L593-619 allows) or through the NVSwitch (``ncclTopoSearchTryNvls``
L410-443), and a complete channel is kept when ``ncclTopoCompareGraphs`` (L445-468) prefers it.

topoweb's additions, each leaving the channels NCCL's search reaches unchanged (they only spend
fewer steps getting there; ``apps.domain.nccl_search`` documents them): a state already searched in
this run (the same residual bandwidth on every link and NET, the same channel so far) is not
searched again; a partial graph whose channels plus what still fits (``nccl_search_bounds.fit``)
cannot beat the kept graph is cut; a run that reaches the bound stops; among candidates NCCL ranks equal,
the one with the fewest unvisited GPUs to go on to is tried first (switchless meshes).

Everything runs on integers: GPUs, NETs and links are indexes of :class:`~apps.domain.
nccl_search_tables.Tables`, residual capacities are lists of MB/s, a channel's visited GPUs a bit
mask passed down the recursion, and a state is one integer: the channel's context (its number,
NETs, forced order), the step, the GPU and the mask above the residual state's 61-bit signature
(``SIG_MOD``), updated with each reservation. A :class:`Record` of every comparison with the kept
graph lets the caller replay a run whose outcome cannot depend on the graph kept
(:meth:`Record.replays`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from apps.domain.nccl_search_bounds import better, cuts, first_kept, fit
from apps.domain.nccl_search_tables import BALANCED_TREE, NVLS, RING, SIG_MOD, TREE, Tables, type_name, units

__all__ = ["Graph", "Params", "Record", "Outcome", "run", "run_python", "PCI_TIMEOUT"]

PCI_TIMEOUT = 1 << 10  # RecNet's first PCI-order attempt (L782-788)


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
class Params:
    """The search parameters of one run (``tmpGraph`` of ``ncclTopoCompute``): speeds in GB/s,
    path-type limits as ranks."""

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
class Record:
    """What a run asked of the kept graph: the (channels, hops) it compared with it
    (``ncclTopoCompareGraphs``) and, per channels-that-could-still-fit count, whether that count
    was cut against it. A run that kept no graph behaves the same under any kept graph that
    answers every one of these questions the same way (:meth:`replays`)."""

    compared: set = field(default_factory=set)
    cuts: dict = field(default_factory=dict)

    def replays(self, p: Params, best, n_gpus: int) -> bool:
        """Whether a run with this record, started with kept graph ``best``, takes the same steps."""
        for n, hops in self.compared:
            if better(p, best, n, hops, n_gpus):
                return False
        for reach, cut in self.cuts.items():
            if cuts(p, best, reach) != cut:
                return False
        return True


@dataclass
class Outcome:
    """A run's result: the time left (``-1`` when a graph with the most channels was found), the
    steps counted so far, the kept graph (the one passed in when none better was found) and the
    run's :class:`Record`."""

    time: int
    steps: int
    best: object
    record: Record


class _Abort(Exception):
    """The run can take no further step (stopped, perfect graph found, or out of steps)."""


def run(tb: Tables, p: Params, inter: bool, time: int, steps: int, budget: int, best, ub: int) -> Outcome:
    """One ``ncclTopoSearchRec`` with fresh residuals from ``time`` budget and ``steps`` counted so
    far (at most ``budget`` in all), ``best`` the graph kept, ``ub`` :func:`~apps.domain.nccl_search_bounds.upper_bound`: in C
    (:mod:`apps.domain.nccl_search_native`) where it is built, else :func:`run_python`."""
    native = _native()
    if native is not None and native.available(tb):
        return native.run(tb, p, inter, time, steps, budget, best, ub)
    return run_python(tb, p, inter, time, steps, budget, best, ub)


@functools.cache
def _native():
    from apps.domain import nccl_search_native

    return nccl_search_native


def run_python(tb: Tables, p: Params, inter: bool, time: int, steps: int, budget: int, best, ub: int) -> Outcome:
    """:func:`run` in Python: the reference the C recursion (``apps/domain/_search_core.c``) follows
    step for step."""
    n = tb.n
    pattern = p.pattern
    is_ring, is_nvls, is_btree, is_tree = pattern == RING, pattern == NVLS, pattern == BALANCED_TREE, pattern == TREE
    trees = is_btree or is_tree
    ti, te = tb.effective(p.type_intra, p.type_inter, inter)
    bwi, bwe = units(p.bw_intra), units(p.bw_inter)
    gpr = tb.reserving("gpu", ti, False, bwi)
    if inter:
        upr = tb.reserving("up", te, trees, bwe // 2 if is_btree else bwe)  # a balanced tree halves it
        dnr = tb.reserving("down", te, trees, bwe)
        sel_all = tb.select_nets(None, te)
        sel = tb.kept.get(("nets of", te))
        if sel is None:
            sel = tb.kept[("nets of", te)] = [tb.select_nets(g, te) for g in range(n)]
    else:
        upr = dnr = sel_all = sel = []
    same_starts = tb.start_nets(te, trees) if inter and p.same == 1 and not is_nvls else None
    res = list(tb.cap0)
    nres = list(tb.net0)
    net_delta = tb.kept.get(("net delta", bwe))
    if net_delta is None:
        net_delta = tb.kept[("net delta", bwe)] = [(w * bwe) % SIG_MOD for w in tb.net_weight]
    nvs_in, nvs_out, weight = tb.nvs_in, tb.nvs_out, tb.weight
    nvswitch = tb.nvswitch
    onward = tb.onward(ti)
    next_cache = tb.next_cache.setdefault((pattern, ti), {})
    local_gpu, local_gpus = tb.local_gpu, tb.local_gpus
    cross, same = p.cross_nic, p.same
    min_ch, max_ch = p.min_channels, p.max_channels
    btn0 = (n - 1 if is_ring else 0) if inter else -1  # the step that goes back to a NET
    n1, n_minus_1, net_span = n + 1, n - 1, tb.m + 1
    intra_key = tb.kept.get("intra keys")  # next_cache keys with no NET
    if intra_key is None:
        intra_key = tb.kept["intra keys"] = [((g * 3 + 1) * net_span) << n for g in range(n)]
    record = Record()
    seen: set = set()
    seen_add = seen.add
    contexts: dict = {}
    orders: list[list[int]] = []
    chnets: list[list[int | None]] = []
    left, count, hops, sig = time, steps, 0, 0
    kept = [best, False]  # the graph kept, whether this run changed it
    threshold = [object(), 0]  # for the graph kept: the fewest channels it does not cut

    def take(pt) -> bool:
        """``followPath``: reserve the run's bandwidth on every link of ``pt``, or nothing when a
        link lacks it."""
        nonlocal hops, sig
        k = pt[0]
        if k >= 0:
            if res[k] < pt[1]:
                return False
            res[k] -= pt[1]
        else:
            pairs = pt[4]
            for k, a in pairs:
                if res[k] < a:
                    return False
            for k, a in pairs:
                res[k] -= a
        sig = (sig - pt[2]) % SIG_MOD
        hops += pt[3]
        return True

    def give(pt) -> None:
        nonlocal hops, sig
        k = pt[0]
        if k >= 0:
            res[k] += pt[1]
        else:
            for k, a in pt[4]:
                res[k] += a
        sig = (sig + pt[2]) % SIG_MOD
        hops -= pt[3]

    def context(nch: int, start, end, btn: int, forced: int, replay: tuple | None) -> int:
        """The channel's part of the state key: its number, NETs, where it returns to a NET, the
        forced order and, when replaying, the channel it replays."""
        key = (nch, start, end, btn, forced, replay)
        got = contexts.get(key)
        if got is None:
            got = contexts[key] = len(contexts)
        return got

    def complete() -> None:
        """A channel is complete: count it, keep the graph when better, look for the next."""
        nonlocal left
        nch = len(orders)
        if nch >= min_ch:
            record.compared.add((nch, hops))
            if better(p, kept[0], nch, hops, n):
                kept[0] = Graph(pattern, nch, p.bw_intra, p.bw_inter, type_name(p.type_intra),
                                type_name(p.type_inter), cross, hops,
                                tuple(tuple(tb.gpu_names[g] for g in o) for o in orders),
                                tuple(tuple(None if x is None else tb.net_names[x] for x in c) for c in chnets),
                                same, min_channels=min_ch, max_channels=max_ch)
                kept[1] = True
                if nch == max_ch:
                    left = -1
                    raise _Abort
                if nch >= ub:
                    raise _Abort  # no more channels fit at this speed: nothing better is left to find
        if nch < max_ch and left > 0:
            if not is_nvls:
                if threshold[0] is not kept[0]:
                    threshold[0], threshold[1] = kept[0], first_kept(p, kept[0], min_ch)
                # a bound on what still fits, exact unless it is already too few (then an upper
                # bound that is too few as well: the cut is the same, and recorded for it)
                reach = nch + fit(tb, res, nres, p, ti, te, inter, bwi, bwe, threshold[1] - nch)
                if same_starts is not None:
                    # the same channels across nodes: every further channel replays the first
                    # channel's GPUs (RecNet L769-771) from a NET that reaches its first GPU, has
                    # room and, without NIC crossing, is reached back from the GPU that returns
                    # to a NET (the ring's last, a tree's first)
                    first = orders[0]
                    back = first[0] if trees else first[-1]
                    u = nch
                    for x in same_starts[first[0]]:
                        if cross or upr[back][x] is not None:
                            u += nres[x] // bwe
                    if u < reach:
                        reach = u
                if reach < min_ch:
                    return
                cut = cuts(p, kept[0], reach)
                record.cuts[reach] = cut
                if cut:
                    return
            rec()

    def next_gpus(g: int, step: int, btn: int, mask: int) -> list[int]:
        """``ncclTopoSearchNextGpuSort``'s order of the GPUs not yet in the channel."""
        sort_net = 0 if btn == -1 else (1 if btn == step + 1 else -1)
        net = chnets[-1][0] if sort_net else None
        key = ((((g * 3) + sort_net + 1) * net_span + (0 if net is None else net + 1)) << n) | mask
        got = next_cache.get(key)
        if got is None:
            got = next_cache[key] = _next_order(tb, g, sort_net, net, pattern, ti, mask, onward)
        return got

    def start_channel(g: int, forced: int, btn: int, from_net: int | None = None) -> None:
        """``ncclTopoSearchTryGpu`` at a channel's first GPU: from a NET or from nowhere."""
        orders.append([])
        chnets.append([from_net, None])
        pt = None
        if from_net is not None:
            pt = dnr[from_net][g]
            if pt is None or not take(pt):
                orders.pop(), chnets.pop()
                return
        nch = len(orders)
        replay = tuple(orders[-2]) if forced == 2 and nch > 1 else None
        rec_gpu(g, 0, btn, forced, context(nch, from_net, None, btn, forced, replay), 1 << g)
        if pt is not None:
            give(pt)
        orders.pop(), chnets.pop()

    def rec_gpu(g, step: int, btn: int, forced: int, ctx: int, mask: int) -> None:
        """``ncclTopoSearchRecGpu`` (L621-722) at GPU ``g``, ``mask`` the channel's GPUs so far."""
        nonlocal left, count, hops, sig
        if step < n:
            # a state already searched (same residual links and NETs, same channel so far) leads to
            # the same channels: it is not searched again
            key = (((((ctx * n1) + step) * n + g) << n | mask) << 61) | sig
            if key in seen:
                return
            seen_add(key)
        # the step: out of time ends this branch; out of steps ends the run (nothing after counts)
        if left <= 0:
            return
        if count >= budget:
            raise _Abort
        left -= 1
        count += 1
        if step == n:
            complete()
            return
        order = orders[-1]
        if len(order) <= step:
            order.append(g)
        else:
            order[step] = g
        if step == btn:
            back_to_nic(g, step, forced, mask)
        elif is_nvls:
            try_nvls(g)
        elif step < n_minus_1:
            if forced == 1:
                cands = (step + 1,)
            elif forced == 2 and len(orders) > 1:
                prev = orders[-2]
                cands = (prev[step + 1],) if step + 1 < len(prev) else ()
            elif btn == -1:
                cands = next_cache.get(intra_key[g] | mask)
                if cands is None:
                    cands = next_cache[intra_key[g] | mask] = _next_order(tb, g, 0, None, pattern, ti, mask, onward)
            else:
                cands = next_gpus(g, step, btn, mask)
            row = gpr[g]
            s1 = step + 1
            for h in cands:
                if (mask >> h) & 1:
                    continue
                pt = row[h]
                if pt is None:
                    continue
                # ncclTopoSearchTryGpu (L358-371): followPath to h, on, and back
                k = pt[0]
                if k >= 0:
                    if res[k] < pt[1]:
                        continue
                    res[k] -= pt[1]
                else:
                    ok = True
                    for k2, a in pt[4]:
                        if res[k2] < a:
                            ok = False
                            break
                    if not ok:
                        continue
                    for k2, a in pt[4]:
                        res[k2] -= a
                sig = (sig - pt[2]) % SIG_MOD
                hops += pt[3]
                rec_gpu(h, s1, btn, forced, ctx, mask | (1 << h))
                if k >= 0:
                    res[k] += pt[1]
                else:
                    for k2, a in pt[4]:
                        res[k2] += a
                sig = (sig + pt[2]) % SIG_MOD
                hops -= pt[3]
                if left <= 0:
                    return
        elif is_ring and not inter:
            first = order[0]
            if n == 1:
                rec_gpu(first, step + 1, btn, forced, ctx, mask)
            else:
                pt = gpr[g][first]
                if pt is not None and take(pt):
                    rec_gpu(first, step + 1, btn, forced, ctx, mask)
                    give(pt)
        else:
            rec_gpu(g, n, -1, forced, ctx, mask)
        if len(order) > step:
            del order[step:]

    def back_to_nic(g: int, step: int, forced: int, mask: int) -> None:
        """Step ``backToNet`` of ``ncclTopoSearchRecGpu`` (L646-679): from GPU ``g`` to each NET
        ``ncclTopoSearchCheckNet`` allows, then on (a balanced tree sends half the bandwidth from
        each of its first two GPUs)."""
        c = chnets[-1]
        start = c[0]
        nch = len(orders)
        ch = nch - 1
        nxt = 1 if (is_btree and step == 0) else -1
        replay = tuple(orders[-2]) if forced == 2 and nch > 1 else None
        row = upr[g]
        for net in sel[g]:
            # ncclTopoSearchCheckNet (L593-619)
            if is_tree and net != start:
                continue
            if is_ring and cross == 2:
                if ch & 1 and net != chnets[ch - 1][0]:
                    continue
            elif cross == 0 and net != start:
                continue
            if is_btree and step != 0 and net != c[1]:
                continue
            pt = row[net]
            if pt is None or not take(pt):
                continue
            saved = c[1]
            c[1] = net
            rec_gpu(g, step, nxt, forced, context(nch, start, net, nxt, forced, replay), mask)
            c[1] = saved
            give(pt)
            if left <= 0:
                return

    def try_nvls(head: int) -> None:
        """``ncclTopoSearchTryNvls`` (L410-443): every GPU sends to and receives from the fabric at
        ``bw_intra``, the head twice."""
        nonlocal sig
        taken = []
        ok = True
        for d in range(n):
            need = bwi * (2 if d == head else 1)
            for k in (nvs_in[d], nvs_out[d]):
                if k < 0 or res[k] < need:
                    ok = False
                    break
                res[k] -= need
                sig = (sig - weight[k] * need) % SIG_MOD
                taken.append((k, need))
            if not ok:
                break
        if ok:
            rec_gpu(None, n, -1, 0, 0, 0)
        for k, need in taken:
            res[k] += need
            sig = (sig + weight[k] * need) % SIG_MOD

    def rec_net() -> None:
        """``ncclTopoSearchRecNet`` (L724-816)."""
        nonlocal left, sig
        nets = sel_all
        c = len(orders)
        found = False
        count_nets = len(nets)
        for i in range(count_nets):
            if is_nvls and found:
                break
            net = nets[(c + i) % count_nets]
            if nres[net] < bwe:
                continue
            if is_ring and cross == 2 and c & 1 and net != chnets[c - 1][1]:
                continue
            nres[net] -= bwe
            sig = (sig - net_delta[net]) % SIG_MOD
            local = local_gpu[net]
            if is_nvls:
                heads = {o[0] for o in orders}
                if c < count_nets and local is not None and local not in heads:
                    start_channel(local, 0, 0, net)
                    found = True
            elif c > 0 and same == 1:
                start_channel(orders[-1][0], 2, btn0, net)
            else:
                if c == 0 and not nvswitch:
                    # the first GPU in PCI order, with a time budget of its own (L782-788)
                    saved = left
                    left = PCI_TIMEOUT
                    try:
                        start_channel(0, 1, btn0, net)
                    finally:
                        left = -1 if left == -1 else saved
                if local is not None and left > 0:
                    start_channel(local, 0, btn0, net)
                for g in local_gpus[net]:
                    if g == local or left <= 0:
                        continue
                    start_channel(g, 0, btn0, net)
            nres[net] += bwe
            sig = (sig + net_delta[net]) % SIG_MOD
            if left <= 0:
                return

    def rec() -> None:
        """``ncclTopoSearchRec`` (L849-881): the next channel."""
        if inter:
            rec_net()
            return
        c = len(orders)
        if is_nvls:
            if c < n:
                start_channel(c, 0, -1)
            return
        if c == 0:
            start_channel(0, 1, -1)
        else:
            start_channel(orders[-1][0], 2, -1)
        if same == 0 or c == 0:
            for g in range(n):
                if left <= 0:
                    return
                start_channel(g, 0, -1)

    if count < budget:
        try:
            rec()
        except _Abort:
            pass
    return Outcome(left, count, kept[0] if kept[1] else best, record)


def _next_order(tb: Tables, g: int, sort_net: int, net: int | None, pattern: str, ti: int, mask: int,
                onward: list[int]) -> list[int]:
    """``ncclTopoSearchNextGpuSort`` (L253-326) from ``g``, less the GPUs in ``mask``. Among the
    GPUs NCCL ranks equal (same path bandwidth and hops) the one with the fewest unvisited GPUs to
    go on to comes first: on a switchless mesh a channel then rarely strands a GPU, and the search
    reaches in its budget the channels a longer one finds."""
    got = [h for h in tb.sorted_gpus(g, sort_net, net, pattern, ti) if not (mask >> h) & 1]
    if not tb.nvswitch and len(got) >= 3:
        rank = tb.tie_groups(g, sort_net, net, pattern, ti)
        got.sort(key=lambda h: (rank[h], (onward[h] & ~mask).bit_count()))
    return got
