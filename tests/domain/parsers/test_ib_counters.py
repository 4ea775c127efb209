"""The agent's ib_counters listing (format in apps/domain/parsers/ib_counters.py). The fixtures are synthetic:
no real capture of /sys/class/infiniband/*/ports/*/counters is in realdata (their SOURCES rows say what each
models)."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, ib_counters
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def parse(name: str):
    return ib_counters.parse((FIX / "ib_counters" / name).read_text())


def test_eight_ib_ports_and_a_roce_bond_with_uptime():
    r = parse("synthetic_h100_8x_cx7_ndr_mlx5_5_link_errors.txt")
    assert r.uptime_s == 1296000.42 and r.warnings == ()
    assert [(p.ca, p.port, p.link_layer, p.state) for p in r.ports][-2:] == [
        ("mlx5_9", 1, "InfiniBand", "Active"), ("mlx5_bond_0", 1, "Ethernet", "Active")]
    p5 = next(p for p in r.ports if p.ca == "mlx5_5")
    assert (p5.counters["link_downed"], p5.counters["link_error_recovery"], p5.counters["symbol_error"]) == (3, 12, 48213)
    assert len(p5.counters) == 21 and "rnr_nak_retry_err" in p5.hw_counters


def test_cut_short_listing_without_header_is_read_with_warnings():
    r = parse("synthetic_listing_without_header_cut_short.txt")
    assert r.uptime_s == 86400.0 and [p.ca for p in r.ports] == ["mlx5_0", "mlx5_1"]
    assert r.warnings == ("no '# topoweb ib_counters v1' header line",
                          "no closing 'end' line: the listing may be cut short")


@pytest.mark.parametrize("text,line_no,reason", [
    ("", 0, "empty"),
    ("# topoweb ib_counters v1\nport 1 counter symbol_error 0\n", 2, "before any other line"),
    ("ca mlx5_0\nport x counter symbol_error 0\n", 2, "expected 'port <number>"),
    ("ca mlx5_0\nport 1 counter symbol_error 1.5\n", 2, "not a non-negative integer"),
    ("ca mlx5_0\nca mlx5_0\n", 2, "listed twice"),
    ("ca mlx5_0\nend\nca mlx5_1\n", 3, "after the 'end' line"),
    ("uptime_s soon\nca mlx5_0\n", 1, "not a number of seconds"),
    ("# just a comment\n", 0, "no 'ca <name>' block"),
])
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        ib_counters.parse(text)
    assert (info.value.kind, info.value.line_no) == ("ib_counters", line_no)
    assert reason in info.value.reason


def test_unknown_keys_of_a_newer_agent_are_skipped_with_a_warning():
    r = ib_counters.parse("# topoweb ib_counters v2\nca mlx5_0\nport 1 speed fast\nfirmware x\nport 1 counter a 1\nend\n")
    assert r.ports[0].counters == {"a": 1}
    assert r.warnings == ("line 1: listing format v2; read as v1", "line 3: unknown port attribute 'speed' skipped",
                          "line 4: unknown key 'firmware' skipped")


def test_detect():
    for path in sorted((FIX / "ib_counters").glob("*.txt")):
        if path.with_name(path.stem + ".error.json").exists():
            continue
        assert ib_counters.detect(path.read_text()) >= 75 and detect_kind(path.read_text()) == "ib_counters"
    for path in sorted((FIX / "sysfs_ib").glob("*.txt")):
        assert ib_counters.detect(path.read_text()) == 0


test_fuzz_any_text, test_fuzz_mutated_real_lines = safety_tests(
    ib_counters.parse, "ib_counters", mutated_lines(fixture_lines("ib_counters"), max_size=25),
    detect=ib_counters.detect)
