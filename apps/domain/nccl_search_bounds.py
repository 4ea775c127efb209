"""The bounds of the channel search: how many more channels can still fit, and what beats the graph kept.

A run of :mod:`apps.domain.nccl_search_core` (and of its C twin, ``apps/domain/_search_core.c``)
keeps the graph ``ncclTopoCompareGraphs`` prefers (:func:`better`, search.cc L445-468) and cuts a
partial search whose channels plus what still fits cannot beat it (:func:`cuts`, :func:`fit`,
:func:`first_kept`); the driver (:mod:`apps.domain.nccl_search`) skips a whole search whose
:func:`upper_bound` cannot. Each bound only ends searches that could find nothing the kept graph
does not beat: NCCL's search reaches the same channels, in more steps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from apps.domain.nccl_search_tables import BALANCED_TREE, NVLS, RING, TREE, Tables, units

if TYPE_CHECKING:
    from apps.domain.nccl_search_core import Params

__all__ = ["EPS", "better", "cuts", "fit", "first_kept", "upper_bound"]

EPS = 1e-9


def better(p: Params, ref, n: int, hops: int, n_gpus: int) -> bool:
    """``ncclTopoCompareGraphs`` (L445-468): whether ``n`` channels of ``p`` with ``hops`` hops
    beat the kept graph ``ref``."""
    if ref is None:
        return True
    if p.pattern == NVLS:
        return (ref.n_channels < n <= n_gpus) or n * p.bw_inter > ref.n_channels * ref.bw_inter
    if n * p.bw_intra > ref.n_channels * ref.bw_intra + EPS:
        return True
    if n * p.bw_intra < ref.n_channels * ref.bw_intra - EPS:
        return False
    return ref.pattern == p.pattern and ref.cross_nic == p.cross_nic and hops < ref.hops


def cuts(p: Params, best, reach: int) -> bool:
    """Whether ``reach`` channels at most (found + still fitting) cannot beat the kept graph."""
    return best is not None and reach * p.bw_intra <= best.n_channels * best.bw_intra + EPS


def _chain(us: list[int], limit: int) -> int:
    """The most chains ``r <= limit`` such that for every ``R <= r`` the GPUs' link units ``us``
    lack at most ``R`` in all: ``sum(max(0, R - u)) <= R``."""
    us = sorted(us)
    i, cnt, s, m = 0, 0, 0, len(us)
    for r in range(1, limit + 1):
        while i < m and us[i] < r:
            s += us[i]
            cnt += 1
            i += 1
        if cnt * r - s > r:
            return r - 1
    return limit


def fit(tb: Tables, res: list[int], nres: list[int], p: Params, ti: int, te: int, inter: bool,
        bw: int, bw_net: int, enough: int = 0) -> int:
    """How many more channels the residual links ``res`` (and NETs ``nres``) could hold at most.
    A ring inside a node leaves and enters every GPU once; a chain (a tree, or a ring across nodes
    between its NETs) leaves every GPU but its last and enters every GPU but its first over GPU
    links: R more chains need, over GPUs, sum of max(0, R - units) <= R for the links out and in.

    With ``enough``, the count may stop as soon as it is below ``enough``: the value returned is
    then a bound above the count, and below ``enough`` too (what a caller deciding a cut needs)."""
    out = p.max_channels
    n = tb.n
    firsts, lasts, net_firsts, net_lasts = tb.ends(ti, te, inter)
    if inter:
        u = 0
        for v in nres:
            u += v // bw_net
        if u < out:
            out = u
        if out and p.pattern == RING and not tb.can_close(te, p.cross_nic):
            return 0
        if out < enough:
            return out
    if n > 1 and p.pattern == RING and not inter:
        for ends in (firsts, lasts):
            for ks in ends:
                u = 0
                for k in ks:
                    u += res[k] // bw
                if u < out:
                    out = u
                    if out < enough:
                        return out
    elif n > 1:
        outs, ins = [], []
        for ends, units_of in ((firsts, outs), (lasts, ins)):
            for ks in ends:
                u = 0
                for k in ks:
                    u += res[k] // bw
                units_of.append(u)
            out = _chain(units_of, out)
            if out < enough:
                return out
        if p.pattern == RING:  # and each GPU leaves and enters once per channel, to a GPU or a NET
            for g in range(n):
                u = outs[g]
                for k in net_firsts[g]:
                    u += res[k] // bw_net
                if u < out:
                    out = u
                u = ins[g]
                for k in net_lasts[g]:
                    u += res[k] // bw_net
                if u < out:
                    out = u
                if out < enough:
                    return out
    return out


def first_kept(p: Params, best, min_channels: int) -> int:
    """The fewest channels (found and still fitting) that the kept graph ``best`` does not cut."""
    if best is None:
        return min_channels
    t = max(min_channels, int((best.n_channels * best.bw_intra + EPS) / p.bw_intra) - 1)
    while cuts(p, best, t):
        t += 1
    return t


def upper_bound(tb: Tables, p: Params, ti: int, te: int, inter: bool, tight: bool = True) -> int:
    """The most channels that can fit at ``p``'s speed: :func:`fit` on the whole links and, when
    ``tight``, for rings inside a node every cut of the GPUs (``Tables.ring_cut``), across nodes
    the links of the NET paths (``Tables.net_flow``) and for the same channels the NETs that can
    start a channel at one GPU (``Tables.same_start_units``)."""
    if p.pattern == NVLS:
        return p.max_channels
    out = fit(tb, tb.cap0, tb.net0, p, ti, te, inter, units(p.bw_intra), units(p.bw_inter))
    if not tight:
        return out
    if p.pattern == RING and not inter and out:
        cut = tb.ring_cut(ti, units(p.bw_intra))
        if cut is not None and cut < out:
            out = cut
    if inter and out:
        trees = p.pattern in (BALANCED_TREE, TREE)
        bwe = units(p.bw_inter)
        if p.same == 1:
            out = min(out, tb.same_start_units(te, trees, bwe))
        # every channel comes down one NET->GPU path and goes back up one GPU->NET path (a
        # balanced tree two, each with half the bandwidth)
        out = min(out, tb.net_flow(te, trees, bwe, False),
                  tb.net_flow(te, trees, bwe // 2, True) // 2 if p.pattern == BALANCED_TREE else
                  tb.net_flow(te, trees, bwe, True))
    return out
