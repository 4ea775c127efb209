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

from pathlib import Path

from apps.domain import nccl_search, nccl_search_core
from apps.domain import nccl_search_tables as tables_mod
from apps.domain.analysis import analyze_host
from apps.domain.estimate import clear_caches, link_figures
from apps.domain.nccl_search import RING
from apps.domain.nccl_system import type_rank

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
    nvl = type_rank("NVL")
    assert tb.ring_cut(nvl, tables_mod.units(18.0)) == 12
    assert tb.ring_cut(nvl, tables_mod.units(24.0)) == 6
    assert tb.ring_cut(nvl, tables_mod.units(36.0)) == 6  # one channel per link each way still
    assert tb.ring_cut(nvl, tables_mod.units(48.0)) == 0  # no xGMI link carries 48 GB/s


def test_ring_cut_does_not_apply_where_paths_share_links():
    # 8 P40s over PCIe switches and the CPUs: GPU paths share the switches' uplinks
    tb = tables_mod.tables(_system("nvidia_smi_topo", P40))
    assert tb.ring_cut(type_rank("SYS"), tables_mod.units(10.0)) is None


def test_searches_that_cannot_beat_twelve_rings_at_18_are_not_run(monkeypatch):
    system = _system("nccl_topo_xml", MI250)
    clear_caches()
    speeds = []
    real = nccl_search_core.run

    def run(tb, p, *args):
        speeds.append(p.bw_intra)
        return real(tb, p, *args)

    monkeypatch.setattr(nccl_search.core, "run", run)
    ring = nccl_search.compute(system, RING, inter=False)
    assert (ring.n_channels, ring.bw_intra, ring.budget_hit) == (12, 18.0, False)
    # 20 GB/s: 6 rings (120); 15: 12 (180); 12 and 9: 18 and 24 rings, 216 = 12 x 18, not better
    assert min(speeds) == 18.0
    assert 20.0 not in speeds
