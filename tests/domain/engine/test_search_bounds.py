"""The channel search's bounds: what they allow is read off the captures, and a search they prove
cannot beat the graph kept is not run.

On the 16-GCD MI250 capture (``rccl_topo_expl_topo_16p1h_mi250_broadcom_sw.xml``) every GCD has 7
xGMI links (its ``<xgmi ... count=...>`` lines add up to 7): GCD 0000:4e:00.0 has 4 to its package
sibling 0000:51:00.0, 1 to 0000:56:00.0 and 2 to 0000:0e:00.0; 0000:51:00.0 has 4 to 0000:4e:00.0
and 1 each to 0000:56:00.0, 0000:59:00.0 and 0000:11:00.0. So that package (and each package the
same way) has 3 + 3 = 6 xGMI links to the rest of the box. A ring visits every GCD and comes back,
so it leaves the package once and enters it once: at 18 GB/s a 36 GB/s xGMI link carries 2
channels each way, the package's 6 links 12; at 24 GB/s a link carries one, the 6 links 6. Each GCD
alone would allow more (7 links: 14 at 18 GB/s), which is why the per-GPU bound could not stop the
searches at lower speeds that can never beat 12 rings x 18 GB/s.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from apps.domain import nccl_search, nccl_search_core
from apps.domain import nccl_search_tables as tables_mod
from apps.domain.analysis import analyze_host
from apps.domain.estimate import clear_caches, link_figures
from apps.domain.nccl_search import BALANCED_TREE, RING
from apps.domain.paths import nccl_rank

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MI250 = FIXTURES / "nccl_topo_xml" / "rccl_topo_expl_topo_16p1h_mi250_broadcom_sw.xml"
P40 = FIXTURES / "nvidia_smi_topo" / "paddle_8xp40_pcie_switches_soc.txt"


def _system(kind: str, path: Path):
    return link_figures(analyze_host({kind: path.read_text()}, path.stem).doc)


def test_the_xgmi_links_are_36_gbs_each_as_the_counts_say():
    system = _system("nccl_topo_xml", MI250)
    # GPU0 is 0000:4e:00.0 (dev 0): count 4 to its sibling GPU1, 2 to GPU4 (0000:0e:00.0), 1 to GPU2
    assert system.cap[("GPU0", "GPU1")] == 4 * 36.0
    assert system.cap[("GPU0", "GPU4")] == 2 * 36.0
    assert system.cap[("GPU0", "GPU2")] == 36.0


def test_ring_cut_is_a_package_s_six_links():
    tb = tables_mod.tables(_system("nccl_topo_xml", MI250))
    nvl = nccl_rank("NVL")
    assert tb.ring_cut(nvl, tables_mod.units(18.0)) == 12
    assert tb.ring_cut(nvl, tables_mod.units(24.0)) == 6
    assert tb.ring_cut(nvl, tables_mod.units(36.0)) == 6  # one channel per link each way still
    assert tb.ring_cut(nvl, tables_mod.units(48.0)) == 0  # no xGMI link carries 48 GB/s


def test_ring_cut_does_not_apply_where_paths_share_links():
    # 8 P40s over PCIe switches and the CPUs: GPU paths share the switches' uplinks
    tb = tables_mod.tables(_system("nvidia_smi_topo", P40))
    assert tb.ring_cut(nccl_rank("SYS"), tables_mod.units(10.0)) is None


def _ring_and_speeds(monkeypatch, system, inter: bool) -> tuple:
    """``compute(system, RING)`` cold, and the per-channel speed of every search it ran (inside the
    node the intra speed, across nodes the speed to the NETs)."""
    clear_caches()
    speeds = []
    real = nccl_search_core.run

    def run(tb, p, *args):
        speeds.append(p.bw_inter if inter else p.bw_intra)
        return real(tb, p, *args)

    monkeypatch.setattr(nccl_search.core, "run", run)
    return nccl_search.compute(system, RING, inter=inter), speeds


def test_searches_that_cannot_beat_twelve_rings_at_18_are_not_run(monkeypatch):
    ring, speeds = _ring_and_speeds(monkeypatch, _system("nccl_topo_xml", MI250), inter=False)
    assert (ring.n_channels, ring.bw_intra, ring.budget_hit) == (12, 18.0, False)
    # 20 GB/s: 6 rings (120); 15: 12 (180); 12 and 9: 18 and 24 rings, 216 = 12 x 18, not better
    assert min(speeds) == 18.0
    assert 20.0 not in speeds


# The 8x H100 at Princeton's Della (nvidia-smi topo -m, NIC rates stated 400 Gb/s InfiniBand as the
# calibration does): mlx5_0 and mlx5_1 are PIX to GPU0 only, mlx5_3 and mlx5_4 to GPU4 only,
# mlx5_2 to GPU3 and mlx5_5 to GPU6: four PCIe switches, each holding one GPU. Every path between a
# NIC and a GPU crosses its switch's link to that GPU (the other GPUs reach it over NVLink, PXN), so
# the six 400G NICs carry what four GPU links carry: at 48 GB/s a channel fills a link.


def _della():
    from tests.domain.engine.test_estimate_stable import CASES

    return link_figures(CASES["della_8xh100_6nic_400ib"]())


def test_net_flow_counts_the_switch_links_the_nics_share():
    system = _della()
    pxn = nccl_rank("PXN")
    tb = tables_mod.tables(system)
    assert len(tb.net_names) == 6
    assert system.cap[("GPU0", "switch:inferred:0")] == 48.0  # the x16 link of GPU0's switch
    for up in (False, True):
        assert tb.net_flow(pxn, False, tables_mod.units(48.0), up) == 4
        assert tb.net_flow(pxn, False, tables_mod.units(24.0), up) == 8


def test_rings_across_nodes_stop_at_what_the_switch_links_carry(monkeypatch):
    ring, speeds = _ring_and_speeds(monkeypatch, _della(), inter=True)
    # 4 x 48 GB/s found, doubled as ncclTopoDupChannels does
    assert (ring.n_channels, ring.bw_inter, ring.budget_hit) == (8, 24.0, False)
    # 45, 42 and 40 GB/s: 4 channels at most, never more than 4 x 48
    assert set(speeds) == {48.0}


def test_same_channels_start_at_one_gpu_from_the_nets_that_reach_it():
    tb = tables_mod.tables(_della())
    # at PIX only the switch's own NICs reach a GPU: GPU0 and GPU4 have two each
    assert tb.same_start_units(nccl_rank("PIX"), False, tables_mod.units(48.0)) == 2
    assert tb.same_start_units(nccl_rank("PIX"), False, tables_mod.units(24.0)) == 4


# --- the bounds never change what a search finds -------------------------------------------------
# SYNTHETIC layouts: 8 GPUs with a random switchless NVLink mesh (at most 6 links a GPU, as on V100),
# two sockets, 2 or 4 NICs each on one GPU's PCIe switch, stated 200 Gb/s InfiniBand. Each is
# searched twice, with the bounds and without them; where the search without them ends within its
# step budget (no `budget_hit`, no fallback), both must find the same channels, channel for channel.


def _random_topo(seed: int) -> str:
    rng = random.Random(seed)
    n, m = 8, rng.choice([2, 4])
    links: dict[tuple[int, int], int] = {}
    degree = [0] * n
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    rng.shuffle(pairs)
    for a, b in pairs:
        k = rng.choice([1, 1, 2])
        if degree[a] + k <= 6 and degree[b] + k <= 6 and rng.random() < 0.6:
            links[(a, b)] = links[(b, a)] = k
            degree[a] += k
            degree[b] += k
    socket = [0 if g < 4 else 1 for g in range(n)]
    nic_gpu = rng.sample(range(n), m)
    names = [f"GPU{i}" for i in range(n)] + [f"NIC{j}" for j in range(m)]

    def gpu_of(i: int) -> int:
        return i if i < n else nic_gpu[i - n]

    def cell(x: int, y: int) -> str:
        if x == y:
            return " X "
        if (x, y) in links:
            return f"NV{links[(x, y)]}"
        if gpu_of(x) == gpu_of(y):
            return "PIX"
        return "NODE" if socket[gpu_of(x)] == socket[gpu_of(y)] else "SYS"

    lines = ["\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity"]
    for i, name in enumerate(names):
        s = socket[gpu_of(i)]
        tail = f"\t{s * 24}-{s * 24 + 23}\t{s}" if i < n else "\t\t"
        lines.append(name + "\t" + "\t".join(cell(i, j) for j in range(len(names))) + tail)
    lines += ["", "NIC Legend:", ""] + [f"  NIC{j}: mlx5_{j}" for j in range(m)]
    return "\n".join(lines) + "\n"


def _graphs(system) -> list:
    out = []
    for inter in (False, True):
        ring = nccl_search.compute(system, RING, inter=inter)
        tree = nccl_search.compute(system, BALANCED_TREE, inter=inter, min_channels=ring.n_channels,
                                   max_channels=ring.n_channels)
        out += [ring, tree]
    return out


def _key(g) -> tuple:
    return g.n_channels, g.bw_intra, g.bw_inter, g.channels, g.nets


@pytest.mark.parametrize("seed", range(12))
def test_the_bounds_find_what_the_search_without_them_finds(seed, monkeypatch):
    from tests.domain.engine.test_estimate_stable import _stated

    text = _random_topo(seed)
    doc = _stated(analyze_host({"nvidia_smi_topo": text}, f"synthetic-mesh-{seed}").doc, 200, "InfiniBand")
    system = link_figures(doc)
    clear_caches()
    bounded = _graphs(system)
    with monkeypatch.context() as m:
        m.setattr(tables_mod.Tables, "ring_cut", lambda self, ti, bw: None)
        m.setattr(tables_mod.Tables, "net_flow", lambda self, te, tree, bw, up: 1 << 30)
        m.setattr(tables_mod.Tables, "same_start_units", lambda self, te, tree, bw: 1 << 30)
        m.setattr(tables_mod.Tables, "start_nets", lambda self, te, tree: None)
        clear_caches()
        plain = _graphs(system)
    compared = 0
    for i, (a, b) in enumerate(zip(bounded, plain)):
        if b.budget_hit or b.fallback:
            continue  # the search without the bounds stopped at its budget: it is not NCCL's answer either
        if i % 2 and _key(bounded[i - 1])[:3] != _key(plain[i - 1])[:3]:
            continue  # a tree searched for another ring's channel count
        assert _key(a) == _key(b), (seed, i)
        compared += 1
    assert compared >= 2  # at least the searches inside the node
