"""The paste box splits ethtool -S outputs into an ethtool_stats section (apps/explorer/paste.py): the command line
names the interface, so it stays in the section (a plain prompt line is dropped). The ethtool outputs are the
synthetic fixtures (no real capture in realdata); the topo -m matrix is real."""

from __future__ import annotations

from pathlib import Path

from apps.domain.parsers import KINDS
from apps.explorer.paste import split_paste

FIX = Path(__file__).resolve().parents[1] / "fixtures"
TOPO = (FIX / "nvidia_smi_topo" / "stas00_mleng_2gpu_pcie_phb.txt").read_text()
BNXT = (FIX / "ethtool_stats" / "synthetic_bnxt_two_ports_pasted_after_root_prompts.txt").read_text()
AGENT = (FIX / "ethtool_stats" / "synthetic_h100_roce_mlx5_0_pfc_pause_storm_mlx5_2_discards_no_pfc.txt").read_text()


def test_topo_then_sudo_ethtool_then_two_more_outputs_give_two_sections():
    text = "$ nvidia-smi topo -m\n" + TOPO + "$ sudo ethtool -S enp1s0\nNIC statistics:\n     rx_pause_frames: 3\n" + BNXT
    topo, eth = split_paste(text)
    assert (topo.kind, topo.first_line) == ("nvidia_smi_topo", 2)
    assert (eth.kind, eth.error, eth.first_line) == ("ethtool_stats", None, 2 + topo.line_count)
    names = [i.name for i in KINDS["ethtool_stats"].parse(eth.text).interfaces]
    assert names == ["enp1s0", "enp65s0f0np0", "enp65s0f1np1"]  # the sudo line was kept: it names enp1s0


def test_the_agents_listing_after_ibstat_is_its_own_section():
    ibstat = (FIX / "ibstat" / "gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt").read_text()
    sections = split_paste(ibstat.rstrip("\n") + "\n" + AGENT)
    assert [s.kind for s in sections] == ["ibstat", "ethtool_stats"] and sections[1].text == AGENT
