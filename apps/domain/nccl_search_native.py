"""``nccl_search_core.run`` in C: the same run, step for step, some fifty times faster.

The recursion of :mod:`apps.domain.nccl_search_core` costs about 3 us a step in CPython, and a
channel search on a switchless mesh takes tens of thousands of steps (NCCL's own, in C++, takes
hundreds of thousands in its budgets). ``apps/domain/_search_core.c`` is that recursion written
over the same integer tables: this module hands it the tables of one run (:func:`spec`, kept per
system and limits in ``Tables.kept``), asks :meth:`Tables.sorted_gpus` for each candidate order it
needs, and makes the :class:`~apps.domain.nccl_search_core.Outcome` from what it returns.

The Python recursion stays the reference: ``tests/domain/engine/test_search_native.py`` runs
both on every run of the cases' searches and on random meshes and asks for the same time left,
steps, graph and record. The C one is used when it is built (``make install`` compiles it with
the C compiler Python was built with), is as new as its source (the module carries the source's
digest: a checkout updated without ``make install`` runs the Python one, with a warning), and the
system has at most :data:`MAX_GPUS` GPUs (a GPU set is one 64-bit mask);
``TOPOWEB_SEARCH_CORE=python`` keeps to the Python one.
"""

from __future__ import annotations

import os

from apps.domain import build_native
from apps.domain.nccl_search_core import Graph, Outcome, Params, Record
from apps.domain.nccl_search_tables import BALANCED_TREE, NVLS, RING, SIG_MOD, TREE, Tables, type_name, units

__all__ = ["MAX_GPUS", "available", "c_module", "run", "spec"]

MAX_GPUS = 64
_PATTERN = {RING: 0, BALANCED_TREE: 1, TREE: 2, NVLS: 3}


def _load():
    """The built module, unless it is missing (no compiler at install) or older than its source
    (a checkout updated without ``make install``): then None, and the Python recursion runs."""
    return build_native.load("apps.domain._search_core")


_search_core = _load()


def c_module():
    """The C module where it is built, current and wanted (``TOPOWEB_SEARCH_CORE`` is not
    ``python``), else None."""
    if _search_core is None or os.environ.get("TOPOWEB_SEARCH_CORE", "auto") == "python":
        return None
    return _search_core


def available(tb: Tables) -> bool:
    """Whether the C recursion is built, wanted and can search ``tb``'s system."""
    return c_module() is not None and 1 <= tb.n <= MAX_GPUS


def _paths(tb: Tables, key: tuple, rows, width: int, count: int) -> list:
    """Path rows (``Tables.gpu_paths_within``, ``net_paths_within``) as one list of ``None`` or
    ``(plain links' weight, 6/5 links' weight, hops, link, charged 6/5, ...)``, the weights modulo
    ``SIG_MOD``: what C needs to reserve any bandwidth on them as ``Tables.reserving`` does. Kept
    in ``tb.kept`` under ``key``."""
    got = tb.kept.get(key)
    if got is not None:
        return got
    out = tb.kept[key] = []
    for i in range(count):
        for p in rows[i][:width]:
            if p is None:
                out.append(None)
            else:
                out.append((p.w_plain % SIG_MOD, p.w_pci % SIG_MOD, p.hops,
                            *(v for pair in zip(p.links, p.pci) for v in pair)))
    return out


def spec(tb: Tables, p: Params, inter: bool, ti: int, te: int) -> dict:
    """The tables one run reads, as ``nccl_search_core.run`` reads them (its speeds apart: C
    reserves them), kept per limits."""
    trees = p.pattern in (BALANCED_TREE, TREE)
    starts = inter and p.same == 1 and p.pattern != NVLS
    key = ("native", ti, te, inter, trees, starts)
    got = tb.kept.get(key)
    if got is not None:
        return got
    n, m = tb.n, tb.m
    firsts, lasts, net_firsts, net_lasts = tb.ends(ti, te, inter)
    got = {
        "n": n, "m": m, "nvswitch": bool(tb.nvswitch),
        "gpu": _paths(tb, ("native gpu", ti), tb.gpu_paths_within(ti), n, n), "up": [], "down": [],
        "same_starts": tb.start_nets(te, trees) if starts else None,
        "local_gpu": [-1 if g is None else g for g in tb.local_gpu],
        "local_gpus": tb.local_gpus, "net_weight": tb.net_weight,
        "weight": tb.weight, "nvs_in": tb.nvs_in, "nvs_out": tb.nvs_out,
        "cap0": tb.cap0, "net0": tb.net0, "onward": tb.onward(ti),
        "firsts": firsts, "lasts": lasts, "net_firsts": net_firsts, "net_lasts": net_lasts,
    }
    if inter:
        up, down = tb.net_paths_within(te, trees)
        got["up"] = _paths(tb, ("native up", te, trees), up, m, n)
        got["down"] = _paths(tb, ("native down", te, trees), down, n, m)
        got["sel"] = [tb.select_nets(g, te) for g in range(n)]
        got["sel_all"] = tb.select_nets(None, te)
    tb.kept[key] = got
    return got


def run(tb: Tables, p: Params, inter: bool, time: int, steps: int, budget: int, best, ub: int) -> Outcome:
    """``nccl_search_core.run``, in C."""
    ti, te = tb.effective(p.type_intra, p.type_inter, inter)
    pattern = p.pattern
    nvswitch = tb.nvswitch

    def order_of(g: int, sort_net: int, net: int) -> tuple:
        x = None if net < 0 else net
        order = tb.sorted_gpus(g, sort_net, x, pattern, ti)
        ranks = tb.tie_groups(g, sort_net, x, pattern, ti) if not nvswitch and len(order) >= 3 else None
        return order, ranks

    kept = None if best is None else (best.n_channels, best.bw_intra, best.bw_inter, best.hops,
                                      best.pattern == pattern, best.cross_nic)
    can_close = tb.can_close(te, p.cross_nic) if inter and pattern == RING else True
    kept_orders = tb.kept.setdefault(("native orders", pattern, ti), {})
    left, count, changed, hops, orders, nets, compared, cuts = _search_core.run(
        spec(tb, p, inter, ti, te), order_of, kept_orders, _PATTERN[pattern], int(inter), units(p.bw_intra),
        units(p.bw_inter), p.bw_intra, p.bw_inter, p.cross_nic, p.same, p.min_channels, p.max_channels, time, steps,
        budget, ub, can_close, kept)
    if changed:
        best = Graph(pattern, len(orders), p.bw_intra, p.bw_inter, type_name(p.type_intra), type_name(p.type_inter),
                     p.cross_nic, hops, tuple(tuple(tb.gpu_names[g] for g in o) for o in orders),
                     tuple(tuple(None if x < 0 else tb.net_names[x] for x in c) for c in nets), p.same,
                     min_channels=p.min_channels, max_channels=p.max_channels)
    return Outcome(left, count, best, Record(set(compared), dict(cuts)))
