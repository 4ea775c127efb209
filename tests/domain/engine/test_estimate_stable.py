"""The channel search rewritten for speed finds the channels it found before.

``nccl_search`` now runs its recursion on an integer view of NCCL's system
(``nccl_search_tables``, ``nccl_search_core``), replays runs whose outcome cannot differ, and keeps
the view per system. None of that may change a channel: EXPECTED below is what the estimate gave
before the rewrite (commit 5e7e027), for 14 real captures: per graph the channel count, the
per-channel bandwidth inside the node and to the NETs (and whether the search ran out of its
step budget or fell back to NCCL's simple order), and per node count the busbw and algorithm.

The figures were read through by hand against what is known of each platform:

* 8x H100 on NVSwitch with 8 x 400G: NVLS 8 x 40 GB/s, 485.3 GB/s on one node, 442.7 (NVLS tree)
  on 2, the ring's 367.0 / 365.4 on 4 / 8 (docs/calibration.md rows 1, 9, 8, 7);
* DGX-1 V100 (hybrid cube mesh): 6 rings x 20 GB/s side by side, 122.4 = 120 x ETA_INTRA
  (docs/calibration.md "The model in brief"); A100 on NVSwitch: 12 x 20 (244.7);
* GB200 tray: 16 rings x 45 beat NVLS 4 x 90 (test_estimate.py); 16 MI250 GCDs over xGMI:
  12 rings x 18 GB/s, the most the slowest links allow (the search's bound at 18 GB/s);
* PCIe-only boxes (8x P40, ESC8000A): one ring at the PCIe figure.

Two expectations moved since, both where the search had stopped at its step budget: bounds on
the NET paths (``Tables.net_flow``: each channel across nodes comes down one NET->GPU path and goes
back up one, and on these boards two NICs share one GPU's PCIe switch link) end the searches that
cannot beat the graph kept, so the 6-NIC H100 and the 36-NIC H20 find their rings across nodes
within the budget (the same 8 x 24 GB/s, no longer marked "budget"), and the H20 now finds the
tree the 6-NIC H100 finds (8 x 45 / 24 GB/s) where it fell back to NCCL's simple order: its
2-node point is the H100's TREE figure, 253.2 GB/s, instead of NVLS_TREE 221.5.

The captures are the fixtures (tests/fixtures); where a capture does not report its NICs' rate,
the rate a platform's NICs run at is written onto its compute NICs ("stated", as
test_calibration.py does), and the case's name says so.
"""

from __future__ import annotations

import copy
import gc
import weakref
from pathlib import Path

import pytest

from apps.domain import estimate as est
from apps.domain import nccl_search, nccl_search_core
from apps.domain.analysis import analyze_host
from apps.domain.bundle import read_bundle
from tests.domain.engine.test_calibration import layout

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _bundle(name: str) -> dict:
    host, sections = read_bundle(FIXTURES / "bundles" / name)
    return analyze_host(sections, host or name).doc


def _single(kind: str, name: str) -> dict:
    path = FIXTURES / kind / name
    return analyze_host({kind: path.read_text()}, path.stem).doc


def _stated(doc: dict, rate: int, layer: str) -> dict:
    """The document with ``rate`` Gb/s and ``layer`` stated on its compute NICs (not captured)."""
    doc = copy.deepcopy(doc)
    for n in doc["nics"]:
        if n.get("compute"):
            n.update(rate_gbps=rate, link_layer=layer, state="Active", phys_state="LinkUp", active=True)
    return doc


CASES = {
    "mi250_16gcd_xgmi_mesh": lambda: _single("nccl_topo_xml", "rccl_topo_expl_topo_16p1h_mi250_broadcom_sw.xml"),
    "hgx_h100_nvswitch_8x400ib": lambda: layout("hgx-h100-ib"),
    "dgx1_v100_hybrid_cube_mesh_4x100ib": lambda: _stated(_bundle("microway_dgx1_v100"), 100, "InfiniBand"),
    "a100_two_rails_per_gpu_roce": lambda: layout("a100-2rail-roce"),
    "p4de_4efa": lambda: layout("p4de-efa"),
    "xe9680_lspci": lambda: layout("xe9680"),
    "dgx2_16xv100_nvswitch_hwloc": lambda: _single("hwloc_xml", "hwloc_test_nvidiaDGX2.xml"),
    "dgx_a100_12nic_200ib": lambda: _stated(_bundle("dgx_a100_ash6"), 200, "InfiniBand"),
    "paddle_8xp40_pcie": lambda: _bundle("paddle_8xp40"),
    "a100_8nic_roce_topo": lambda: _bundle("paths_deepep_8xa100_8nic_roce"),
    "della_8xh100_6nic_400ib": lambda: _stated(_bundle("paths_della_8xh100_6nic"), 400, "InfiniBand"),
    "esc8000a_4gpu_pcie": lambda: _bundle("stelline_esc8000a"),
    "h20_36nic_400ib": lambda: _stated(_single("nvidia_smi_topo",
                                               "h20_8gpu_nv18_36nic_mlx5_0-31_bond0-3_merged_cols_sglang_issue_14092.txt"),
                                       400, "InfiniBand"),
    "gb200_tray_4gpu": lambda: _single("nvidia_smi_topo", "gb200_4gpu_tray_numa_lists_gpu_numa_id_trimmed.txt"),
}

# (channels, GB/s per channel inside the node, to the NETs[, "budget": the search ran out of its
# step budget][, "fallback": NCCL's simple order]); points: nodes -> (busbw GB/s, algorithm)
EXPECTED = {
    "mi250_16gcd_xgmi_mesh": {
        "intra": {"RING": (12, 18.0, 18.0), "TREE": (12, 18.0, 18.0)},
        "inter": {"RING": (8, 12.0, 12.0, "budget"), "TREE": (8, 18.0, 12.0)},
        "points": {1: (220.2, "RING"), 2: (123.1, "TREE"), 4: (91.8, "RING"), 8: (91.4, "RING"),
                   16: (90.6, "RING"), 32: (89.1, "RING"), 64: (86.3, "RING")},
    },
    "hgx_h100_nvswitch_8x400ib": {
        "intra": {"RING": (12, 30.0, 30.0), "TREE": (12, 30.0, 30.0), "NVLS": (8, 40.0, 60.0)},
        "inter": {"RING": (8, 48.0, 48.0), "TREE": (8, 48.0, 48.0), "NVLS": (8, 40.0, 48.0)},
        "points": {1: (485.3, "NVLS"), 2: (442.7, "NVLS_TREE"), 4: (367.0, "RING"), 8: (365.4, "RING"),
                   16: (362.1, "RING"), 32: (355.8, "RING"), 64: (348.5, "NVLS_TREE")},
    },
    "dgx1_v100_hybrid_cube_mesh_4x100ib": {
        "intra": {"RING": (6, 20.0, 20.0), "TREE": (6, 20.0, 20.0)},
        "inter": {"RING": (4, 12.0, 12.0), "TREE": (4, 20.0, 12.0)},
        "points": {1: (122.4, "RING"), 2: (66.2, "TREE"), 4: (46.0, "RING"), 8: (46.0, "RING"),
                   16: (45.9, "RING"), 32: (45.8, "RING"), 64: (45.5, "RING")},
    },
    "a100_two_rails_per_gpu_roce": {
        "intra": {"RING": (12, 20.0, 20.0), "TREE": (12, 20.0, 20.0)},
        "inter": {"RING": (16, 12.0, 12.0), "TREE": (16, 15.0, 12.0)},
        "points": {1: (244.7, "RING"), 2: (198.6, "TREE"), 4: (183.9, "RING"), 8: (183.5, "RING"),
                   16: (182.7, "RING"), 32: (181.0, "RING"), 64: (177.9, "RING")},
    },
    "p4de_4efa": {
        "intra": {"RING": (12, 20.0, 20.0), "TREE": (12, 20.0, 20.0)},
        "inter": {"RING": (4, 12.0, 12.0), "TREE": (4, 24.0, 12.0)},
        "points": {1: (244.7, "RING"), 2: (79.5, "TREE"), 4: (46.1, "RING"), 8: (46.0, "RING"),
                   16: (46.0, "RING"), 32: (45.9, "RING"), 64: (45.7, "RING")},
    },
    "xe9680_lspci": {
        "intra": {"RING": (12, 30.0, 30.0), "TREE": (12, 30.0, 30.0), "NVLS": (8, 40.0, 60.0)},
        "inter": {},
        "points": {1: (485.3, "NVLS")},
    },
    "dgx2_16xv100_nvswitch_hwloc": {
        "intra": {"RING": (6, 20.0, 20.0), "TREE": (6, 20.0, 20.0)},
        "inter": {},
        "points": {1: (122.3, "RING")},
    },
    "dgx_a100_12nic_200ib": {
        "intra": {"RING": (12, 20.0, 20.0), "TREE": (12, 20.0, 20.0)},
        "inter": {"RING": (8, 24.0, 24.0), "TREE": (8, 30.0, 24.0)},
        "points": {1: (244.7, "RING"), 2: (184.1, "RING"), 4: (183.9, "RING"), 8: (183.5, "RING"),
                   16: (182.7, "RING"), 32: (181.0, "RING"), 64: (177.9, "RING")},
    },
    "paddle_8xp40_pcie": {
        "intra": {"RING": (1, 12.0, 12.0), "TREE": (1, 12.0, 12.0)},
        "inter": {},
        "points": {1: (12.2, "RING")},
    },
    "a100_8nic_roce_topo": {
        "intra": {"RING": (12, 20.0, 20.0), "TREE": (12, 20.0, 20.0)},
        "inter": {"RING": (8, 12.0, 12.0), "TREE": (8, 24.0, 12.0)},
        "points": {1: (244.7, "RING"), 2: (158.9, "TREE"), 4: (92.1, "RING"), 8: (92.0, "RING"),
                   16: (91.7, "RING"), 32: (91.3, "RING"), 64: (90.5, "RING")},
    },
    "della_8xh100_6nic_400ib": {
        "intra": {"RING": (12, 30.0, 30.0), "TREE": (12, 30.0, 30.0), "NVLS": (8, 40.0, 60.0)},
        "inter": {"RING": (8, 24.0, 24.0), "TREE": (8, 45.0, 24.0), "NVLS": (4, 48.0, 48.0)},
        "points": {1: (485.3, "NVLS"), 2: (253.2, "TREE"), 4: (183.9, "RING"), 8: (183.5, "RING"),
                   16: (182.7, "RING"), 32: (181.0, "RING"), 64: (177.9, "RING")},
    },
    "esc8000a_4gpu_pcie": {
        "intra": {"RING": (1, 15.0, 15.0), "TREE": (1, 15.0, 15.0)},
        "inter": {},
        "points": {1: (15.3, "RING")},
    },
    "h20_36nic_400ib": {
        "intra": {"RING": (12, 30.0, 30.0), "TREE": (12, 30.0, 30.0), "NVLS": (8, 40.0, 60.0)},
        "inter": {"RING": (8, 24.0, 24.0), "TREE": (8, 45.0, 24.0), "NVLS": (4, 48.0, 48.0)},
        "points": {1: (485.3, "NVLS"), 2: (253.2, "TREE"), 4: (183.9, "RING"), 8: (183.5, "RING"),
                   16: (182.7, "RING"), 32: (181.0, "RING"), 64: (177.9, "RING")},
    },
    "gb200_tray_4gpu": {
        "intra": {"RING": (16, 45.0, 45.0), "TREE": (16, 60.0, 60.0), "NVLS": (4, 90.0, 90.0)},
        "inter": {},
        "points": {1: (733.8, "RING")},
    },
}


def _graphs(graphs: dict) -> dict:
    return {k: (g.n_channels, g.bw_intra, g.bw_inter) + (("budget",) if g.budget_hit else ())
            + (("fallback",) if g.fallback else ()) for k, g in graphs.items() if g.n_channels}


def test_every_case_has_an_expectation():
    assert set(CASES) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(CASES))
def test_channels_and_busbw_are_those_found_before_the_rewrite(name):
    doc = CASES[name]()
    est.clear_caches()  # cold: the integer view of the system built anew
    env = {str(k): str(v) for k, v in (doc.get("nccl_env") or {}).items()}  # as the estimate reads them
    system = est.link_figures(doc, None, env)
    graphs = est.channel_search(system, env)
    want = EXPECTED[name]
    assert _graphs(graphs.intra) == want["intra"]
    assert _graphs(graphs.inter) == want["inter"]
    got = est.estimate(doc)
    assert {p["nodes"]: (p["busbw_gbs"], p["algorithm"]) for p in got["points"]} == want["points"]


def test_a_second_search_on_the_kept_view_finds_the_same_channels():
    """The integer view is kept per system (the six searches of one layout, a fleet's hosts):
    searching again on it gives the same graphs, channel for channel."""
    doc = CASES["a100_8nic_roce_topo"]()
    est.clear_caches()
    system = est.link_figures(doc)
    first = est.channel_search(system)
    again = est.channel_search(system)
    assert first == again
    est.clear_caches()
    assert est.channel_search(system) == first


def test_replayed_runs_change_nothing(monkeypatch):
    """A run the driver replays (same effective parameters, a record the kept graph answers the
    same way) gives what searching it again gives: on the 16-GCD mesh, where the tree search
    tries path types that let the same xGMI links through, the search with replays and the one
    without find the same graph."""
    doc = CASES["mi250_16gcd_xgmi_mesh"]()
    system = est.link_figures(doc)
    replays = []
    real = nccl_search_core.Record.replays

    def counting(self, p, best, n_gpus):
        ok = real(self, p, best, n_gpus)
        replays.append(ok)
        return ok

    monkeypatch.setattr(nccl_search_core.Record, "replays", counting)
    est.clear_caches()
    with_replays = nccl_search.compute(system, "BALANCED_TREE", inter=False, min_channels=12, max_channels=12)
    assert any(replays), "the mesh's tree search replays no run: this test no longer tests replays"
    monkeypatch.setattr(nccl_search_core.Record, "replays", lambda self, p, best, n_gpus: False)
    est.clear_caches()
    without = nccl_search.compute(system, "BALANCED_TREE", inter=False, min_channels=12, max_channels=12)
    assert with_replays == without
    assert (with_replays.n_channels, with_replays.bw_intra) == (12, 18.0)


def test_the_kept_view_does_not_keep_its_system_alive():
    """A worker analyses host after host: the integer view kept for a system goes with it."""
    doc = CASES["a100_8nic_roce_topo"]()
    system = est.link_figures(doc)
    est.channel_search(system)
    ref = weakref.ref(system)
    del system
    gc.collect()
    assert ref() is None
