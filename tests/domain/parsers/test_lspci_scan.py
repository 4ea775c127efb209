"""The lspci -vvv parser's scans in C (``apps/domain/parsers/_lspci_scan.c``) are its Python ones.

``lspci_verbose._segments_python``, ``_details_python`` and ``_has_marker_python`` are the
reference. Each real capture (the fixtures and every file of ``shared/realdata/lspci_vvv``), and
the same captures damaged at random (cut, tabs turned to spaces, non-ASCII white space and names
that make the text two or four bytes a character, carriage returns, lines joined), must give the
same segments, detail lines and marker answers both ways, and parse() the same result.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from apps.domain import build_native
from apps.domain.parsers import lspci_verbose as L

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lspci_verbose"
REALDATA = Path(__file__).resolve().parents[3].parent / "shared" / "realdata" / "lspci_vvv"
PYTHON_ONLY = os.environ.get("TOPOWEB_SEARCH_CORE") == "python"
needs_c = pytest.mark.skipif(L._native is None, reason="apps/domain/parsers/_lspci_scan.c is not built")


def _captures() -> list[Path]:
    assert REALDATA.is_dir(), f"{REALDATA} is missing: the real captures this test reads are not there"
    return sorted(FIXTURES.glob("*.txt")) + sorted(p for p in REALDATA.iterdir() if p.is_file())


CAPTURES = _captures()


def test_the_scans_are_built():
    # make install compiles them with the channel search's C (build_native); without a C compiler
    # the Python scans run, and this says so
    if PYTHON_ONLY:
        pytest.skip("TOPOWEB_SEARCH_CORE=python")
    assert L._native is not None, "apps/domain/parsers/_lspci_scan.c is not built: run make install"


def _same_scans(text: str) -> int:
    """Both ways over ``text``: every segment, its detail lines and its marker answer; the lines seen."""
    native = L._native
    segments = L._segments_python(text)
    assert native.segments(text) == segments
    lines = 0
    for a, e, b, _ in segments:
        expected = L._details_python(text, e, b)
        assert native.details(text, e, b, L._DETAIL_KEYS, "Capabilities", L._CAPABILITY_WORDS) == expected, (a, b)
        assert native.has_marker(text, a, b, L.DETAIL_MARKERS) == L._has_marker_python(text, a, b), (a, b)
        lines += len(expected)
    # ranges that start and end anywhere, not only at segment bounds
    rng = random.Random(len(text))
    for _ in range(20):
        a = rng.randrange(len(text) + 1)
        b = rng.randrange(a, len(text) + 1)
        assert native.details(text, a, b, L._DETAIL_KEYS, "Capabilities", L._CAPABILITY_WORDS) == \
            L._details_python(text, a, b)
        assert native.has_marker(text, a, b, L.DETAIL_MARKERS) == L._has_marker_python(text, a, b)
    return lines


def _parsed_both_ways(text: str, monkeypatch):
    def parse():
        try:
            return L.parse(text)
        except Exception as exc:  # a ParseError must be the same one
            return type(exc), str(exc)

    with_c = parse()
    with monkeypatch.context() as m:
        m.setattr(L, "_native", None)
        without = parse()
    return with_c, without


@needs_c
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_every_real_capture_scans_and_parses_the_same(path, monkeypatch):
    text = path.read_text(encoding="utf-8", errors="replace")
    assert _same_scans(text) > 0 or "grep" in path.name
    with_c, without = _parsed_both_ways(text, monkeypatch)
    assert with_c == without


def _damaged(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    kind = rng.randrange(7)
    if kind == 0:  # cut short anywhere
        return text[: rng.randrange(len(text) + 1)]
    if kind == 1:  # copied from a web page: tabs as spaces
        return text.replace("\t", "    ")
    if kind == 2:  # non-ASCII white space inside the indentation (a str of two bytes a character)
        lines[i] = "\t\u2003" + lines[i].lstrip()
    elif kind == 3:  # a name beyond the Basic Multilingual Plane (four bytes a character)
        lines[i] = lines[i] + " \U0001F600"
    elif kind == 4:  # carriage returns kept on a few lines
        for j in rng.sample(range(len(lines)), min(5, len(lines))):
            lines[j] += "\r"
    elif kind == 5:  # two lines joined
        if i + 1 < len(lines):
            lines[i: i + 2] = [lines[i] + " " + lines[i + 1]]
    else:  # a key's colon turned to a space, or a no-break space before a key
        lines[i] = lines[i].replace(":", " ", 1) if rng.random() < 0.5 else lines[i].replace("\t", "\t\u00a0", 1)
    return "\n".join(lines)


@needs_c
@pytest.mark.parametrize("seed", range(40))
def test_damaged_captures_scan_and_parse_the_same(seed, monkeypatch):
    rng = random.Random(seed)
    path = CAPTURES[seed % len(CAPTURES)]
    text = path.read_text(encoding="utf-8", errors="replace")
    for _ in range(3):
        text = _damaged(text, rng)
    if not text:
        text = " "
    _same_scans(text)
    with_c, without = _parsed_both_ways(text, monkeypatch)
    assert with_c == without


@needs_c
@pytest.mark.parametrize("text", ["", "\n", "\t\n", "x", "\tLnkCap: Port #0", "0000:00:00.0 Host bridge: X\n\tBus:",
                                  "a\n\tCapabilities: [40] Express", "\n\t NUMA node:0\n", "z\n\tBus: primary=00"])
def test_short_texts_scan_the_same(text):
    _same_scans(text)


@needs_c
def test_ranges_outside_the_text_are_refused():
    text = "0000:00:00.0 Host bridge: X\n\tLnkCap: Port #0\n"
    for a, b in ((-1, 3), (5, 4), (0, len(text) + 1)):
        with pytest.raises(ValueError, match="outside the text"):
            L._native.details(text, a, b, L._DETAIL_KEYS, "Capabilities", L._CAPABILITY_WORDS)
        with pytest.raises(ValueError, match="outside the text"):
            L._native.has_marker(text, a, b, L.DETAIL_MARKERS)
    with pytest.raises(TypeError):
        L._native.details(text, 0, 3, ("LnkCap", 7), "Capabilities", L._CAPABILITY_WORDS)
    with pytest.raises(TypeError):
        L._native.has_marker(text, 0, 3, ("",))


@needs_c
def test_a_module_older_than_its_source_is_not_used(monkeypatch, caplog):
    name = "apps.domain.parsers._lspci_scan"
    assert build_native.load(name) is not None  # this build is current
    monkeypatch.setattr(build_native, "source_sha", lambda path=None: "0" * 16)
    with caplog.at_level("WARNING"):
        assert build_native.load(name) is None
    assert "older than apps/domain/parsers/_lspci_scan.c" in caplog.text
