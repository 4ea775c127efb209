"""The channel search's recursion in C (``apps/domain/_search_core.c``) is the Python one, run for run.

``nccl_search_core.run_python`` is the reference; ``nccl_search_native.run`` hands the same
tables to C. Every run the driver makes on the real captures of ``test_estimate_stable.py``
(14 layouts, 200-odd runs: rings, trees and NVLS, inside a node and across nodes, the 16-GCD mesh
whose ring across nodes stops at the step budget) and on SYNTHETIC random NVLink meshes, with
the bounds on and off, is made by both from the same state, and both must leave the same time,
count the same steps, keep the same graph (channel for channel) and record the same comparisons.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from apps.domain import estimate as est
from apps.domain import nccl_search, nccl_search_core, nccl_search_native
from apps.domain import nccl_search_tables as tables_mod
from apps.domain.analysis import analyze_host
from tests.domain.engine.test_estimate_stable import CASES, _stated
from tests.domain.engine.test_search_bounds import _graphs, _random_topo

PYTHON_ONLY = os.environ.get("TOPOWEB_SEARCH_CORE") == "python"


def test_the_c_recursion_is_built():
    # make install compiles it; a checkout without a C compiler runs the Python one (and says
    # so here, unless TOPOWEB_SEARCH_CORE=python asks for that)
    if PYTHON_ONLY:
        pytest.skip("TOPOWEB_SEARCH_CORE=python")
    assert nccl_search_native._search_core is not None, "apps/domain/_search_core.c is not built: run make install"


def _outcome(o) -> tuple:
    return o.time, o.steps, o.best, o.record.compared, o.record.cuts


class _Both:
    """``nccl_search_core.run`` replaced by: both recursions from the same state, compared."""

    def __init__(self):
        self.runs = self.kept = self.compared = 0
        self.differ: list = []

    def __call__(self, tb, p, inter, time, steps, budget, best, ub):
        a = nccl_search_core.run_python(tb, dataclasses.replace(p), inter, time, steps, budget, best, ub)
        b = nccl_search_native.run(tb, dataclasses.replace(p), inter, time, steps, budget, best, ub)
        self.runs += 1
        self.kept += a.best is not best
        self.compared += len(a.record.compared)
        if _outcome(a) != _outcome(b):
            self.differ.append((p, inter, time, steps, _outcome(a)[:2], _outcome(b)[:2]))
        return a


needs_c = pytest.mark.skipif(nccl_search_native._search_core is None, reason="the C recursion is not built")


@needs_c
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_run_of_the_real_layouts_is_the_same_in_c(name, monkeypatch):
    both = _Both()
    monkeypatch.setattr(nccl_search_core, "run", both)
    system = est.link_figures(CASES[name]())
    est.clear_caches()
    est.channel_search(system)
    assert both.runs and both.kept, "no run kept a graph: this case tests nothing"
    assert both.differ == []


@needs_c
def test_the_mesh_s_runs_include_a_stop_at_the_step_budget(monkeypatch):
    # the 16-GCD MI250 mesh: its ring across nodes runs into STEP_BUDGET, the C recursion stops
    # at the same step (and with the same graph) as the Python one
    both = _Both()
    monkeypatch.setattr(nccl_search_core, "run", both)
    system = est.link_figures(CASES["mi250_16gcd_xgmi_mesh"]())
    est.clear_caches()
    ring = nccl_search.compute(system, nccl_search.RING, inter=True)
    assert ring.budget_hit and (ring.n_channels, ring.bw_inter) == (8, 12.0)
    assert both.differ == [] and both.runs >= 5


@needs_c
@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("bounds", [True, False])
def test_random_meshes_search_the_same_in_c(seed, bounds, monkeypatch):
    doc = _stated(analyze_host({"nvidia_smi_topo": _random_topo(100 + seed)}, f"synthetic-mesh-{seed}").doc,
                  200, "InfiniBand")
    system = est.link_figures(doc)
    both = _Both()
    monkeypatch.setattr(nccl_search_core, "run", both)
    if not bounds:  # more states searched: what the bounds would have cut
        monkeypatch.setattr(tables_mod.Tables, "ring_cut", lambda self, ti, bw: None)
        monkeypatch.setattr(tables_mod.Tables, "net_flow", lambda self, te, tree, bw, up: 1 << 30)
        monkeypatch.setattr(tables_mod.Tables, "same_start_units", lambda self, te, tree, bw: 1 << 30)
        monkeypatch.setattr(tables_mod.Tables, "start_nets", lambda self, te, tree: None)
    est.clear_caches()
    _graphs(system)
    assert both.runs and both.compared
    assert both.differ == []


@needs_c
def test_python_only_when_asked(monkeypatch):
    tb = tables_mod.tables(est.link_figures(CASES["p4de_4efa"]()))
    assert nccl_search_native.available(tb)
    monkeypatch.setenv("TOPOWEB_SEARCH_CORE", "python")
    assert not nccl_search_native.available(tb)


@needs_c
@pytest.mark.parametrize("seed", range(40))
def test_the_minimum_cut_is_networkx_s(seed, monkeypatch):
    # SYNTHETIC weighted graphs of 2 to 24 nodes, some not connected (cut 0)
    import random

    rng = random.Random(seed)
    n = rng.randint(2, 24)
    edges = [(a, b, rng.randint(1, 12)) for a in range(n) for b in range(a + 1, n) if rng.random() < 0.3]
    fast = tables_mod.min_cut(n, edges)
    monkeypatch.setenv("TOPOWEB_SEARCH_CORE", "python")
    assert fast == tables_mod.min_cut(n, edges)


@needs_c
def test_tables_with_an_index_out_of_range_are_refused_not_read(monkeypatch):
    # the C side checks every index of the tables once, before searching: a table made wrong by a
    # future change is an error naming it, never a read outside an array
    system = est.link_figures(CASES["dgx1_v100_hybrid_cube_mesh_4x100ib"]())
    est.clear_caches()
    tb = tables_mod.tables(system)
    p = nccl_search_core.Params(nccl_search.RING, 20.0, 20.0, 9, 9, 0, 1, 1, 32)
    ti, te = tb.effective(p.type_intra, p.type_inter, False)
    good = nccl_search_native.spec(tb, p, False, ti, te)
    bad = dict(good)
    first = next(i for i, x in enumerate(good["gpu"]) if x is not None and len(x) > 3)
    bad["gpu"] = list(good["gpu"])
    bad["gpu"][first] = (*good["gpu"][first][:3], len(tb.cap0) + 5, False)
    key = ("native", ti, te, False, False, False)
    assert tb.kept[key] is good
    monkeypatch.setitem(tb.kept, key, bad)
    with pytest.raises(ValueError, match="link"):
        nccl_search_native.run(tb, p, False, 2048, 0, 20_000, None, 32)
    monkeypatch.setitem(tb.kept, key, good)
    assert nccl_search_native.run(tb, p, False, 2048, 0, 20_000, None, 32).best is not None


@needs_c
def test_a_module_older_than_its_source_is_not_used(monkeypatch, caplog):
    # a checkout updated without make install: the module's digest is not the source's
    from apps.domain import build_native

    assert nccl_search_native._load() is not None  # this build is current
    monkeypatch.setattr(build_native, "source_sha", lambda path=None: "0" * 16)
    with caplog.at_level("WARNING"):
        assert nccl_search_native._load() is None
    assert "older than apps/domain/_search_core.c" in caplog.text


@needs_c
@pytest.mark.parametrize("cross", [0, 1])
@pytest.mark.parametrize("name", ["hgx_h100_nvswitch_8x400ib", "della_8xh100_6nic_400ib", "a100_two_rails_per_gpu_roce",
                                  "dgx1_v100_hybrid_cube_mesh_4x100ib"])
def test_nic_crossing_as_the_environment_sets_it_searches_the_same_in_c(name, cross, monkeypatch):
    # NCCL_CROSS_NIC=0 and =1 (the default, 2, is what the cases above search)
    both = _Both()
    monkeypatch.setattr(nccl_search_core, "run", both)
    system = est.link_figures(CASES[name]())
    est.clear_caches()
    ring = nccl_search.compute(system, nccl_search.RING, inter=True, cross_nic=cross)
    nccl_search.compute(system, nccl_search.BALANCED_TREE, inter=True, cross_nic=cross,
                        min_channels=ring.n_channels, max_channels=ring.n_channels)
    assert both.runs and both.kept
    assert both.differ == []
