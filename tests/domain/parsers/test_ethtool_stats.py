"""ethtool -S (apps/domain/parsers/ethtool_stats.py). The fixtures are synthetic: no real ethtool -S capture is in
realdata; their counter names are the drivers' documented ones (SOURCES.ethtool_stats.tsv says what each models)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import KINDS, detect_kind, ethtool_stats
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"
MLX5 = "synthetic_h100_roce_mlx5_0_pfc_pause_storm_mlx5_2_discards_no_pfc.txt"


def parse(name: str):
    return ethtool_stats.parse((FIX / "ethtool_stats" / name).read_text())


def test_agent_listing_of_three_mlx5_roce_ports():
    r = parse(MLX5)
    assert [(i.name, i.ca, i.port, i.line_no) for i in r.interfaces] == [
        ("ens108np0", "mlx5_0", 1, 2), ("ens109np0", "mlx5_1", 1, 103), ("ens110np0", "mlx5_2", 1, 204)]
    pfc, clean, no_pfc = r.interfaces
    assert pfc.pause["per_priority"] == {"3": {"rx": 918211, "tx": 12}}
    assert (pfc.pause["rx"], pfc.pause["rx_counter"], pfc.pause["storm_warning"]) == (0, "rx_pause_ctrl_phy", 3)
    assert pfc.discards["rx_discards_phy"] == 4211 and pfc.counter_lines["rx_discards_phy"] == 45
    assert no_pfc.pause["per_priority"] == {}  # mlx5 prints rx_prio<p>_pause only where PFC is on
    assert (no_pfc.discards["rx_discards_phy"], no_pfc.discards["tx_discards_phy"],
            no_pfc.discards["rx_out_of_buffer"]) == (18233, 3, 77)
    assert clean.errors["link_down_events_phy"] == 1 and len(clean.counters) == 99
    assert r.unavailable == {"ens111np0": "ethtool exited with status 94: Cannot get stats strings information: "
                                          "Operation not supported"}


def test_pasted_bnxt_outputs_after_root_and_sudo_prompts():
    r = parse("synthetic_bnxt_two_ports_pasted_after_root_prompts.txt")
    assert [(i.name, i.ca, i.line_no, len(i.counters)) for i in r.interfaces] == [
        ("enp65s0f0np0", None, 1, 44), ("enp65s0f1np1", None, 47, 44)]
    first, second = r.interfaces
    assert first.pause["rx_counter"] == "rx_pause_frames" and first.pause["per_priority"]["3"] == {"rx": 20411, "tx": 7}
    assert first.discards["[1]: rx_discards"] == 315  # a ring counter keeps its "[i]: " prefix
    assert second.errors == {"rx_fcs_err_frames": 2} and r.warnings == ()


def test_a_bare_paste_has_no_interface_name_and_says_so():
    r = parse("synthetic_ice_bare_nic_statistics_without_interface.txt")
    (only,) = r.interfaces
    assert only.name is None and only.pause["rx"] == 1290 and only.pause["rx_counter"] == "link_xoff_rx.nic"
    assert only.pause["per_priority"]["3"] == {"rx": 644, "tx": 0} and only.discards == {"rx_discards.nic": 41}
    assert "without the interface it belongs to" in r.warnings[0]


def test_a_root_prompt_starting_with_hash_opens_a_block():
    r = ethtool_stats.parse("# ethtool -S eth3\nNIC statistics:\n     rx_pause: 4\n")
    assert r.interfaces[0].name == "eth3" and r.interfaces[0].pause["rx"] == 4


def test_cut_short_listing_and_messages_are_warnings():
    text = ("# topoweb ethtool_stats v1\ninterface eth0 ca mlx5_0 port 1\nNIC statistics:\n     rx_discards_phy: 1\n"
            "interface eth1 ca mlx5_1 port 1\nno stats available\n")
    r = ethtool_stats.parse(text)
    assert [i.name for i in r.interfaces] == ["eth0"]
    assert r.warnings == ("line 6: eth1: ethtool says 'no stats available'",
                          "no closing 'end' line: the listing may be cut short", "eth1: no counters listed (line 5)")


@pytest.mark.parametrize("text,line_no,reason", [
    ("", 0, "empty"),
    ("NIC statistics:\n     rx_packets: 12.5\n", 2, "not a non-negative integer"),
    ("interface\n", 1, "expected 'interface <name>"),
    ("interface eth0 port x\n", 1, "expected 'interface <name>"),
    ("interface eth0\nNIC statistics:\n  rx: 1\nend\n  tx: 2\n", 5, "after the 'end' line"),
    ("Settings for eth0:\n", 1, "not an ethtool -S line"),
    ("# topoweb ethtool_stats v1\nend\n", 0, "no counter found"),
])
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        ethtool_stats.parse(text)
    assert (info.value.kind, info.value.line_no) == ("ethtool_stats", line_no)
    assert reason in info.value.reason


def test_detect_and_registry():
    assert "ethtool_stats" in KINDS
    for path in sorted((FIX / "ethtool_stats").glob("*.txt")):
        assert ethtool_stats.detect(path.read_text()) >= 90 and detect_kind(path.read_text()) == "ethtool_stats"
    for other in ("ib_counters", "sysfs_ib", "show_gids", "host_info"):
        for path in sorted((FIX / other).glob("*.txt")):
            assert ethtool_stats.detect(path.read_text(errors="replace")) == 0, path


def test_every_fixture_is_listed_and_synthetic():
    rows = list(csv.reader((FIX / "SOURCES.ethtool_stats.tsv").open(), delimiter="\t"))
    assert {Path(r[0]).name for r in rows} == {p.name for p in (FIX / "ethtool_stats").glob("*.txt")}
    assert all(Path(r[0]).name.startswith("synthetic_") and r[2].startswith("synthetic") for r in rows)


test_fuzz_any_text, test_fuzz_mutated_real_lines = safety_tests(
    ethtool_stats.parse, "ethtool_stats", mutated_lines(fixture_lines("ethtool_stats"), max_size=25),
    detect=ethtool_stats.detect)
