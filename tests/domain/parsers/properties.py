"""Shared safety properties of the parsers: any text, and real fixture lines mutated, give a result or a
``ParseError`` of the parser's kind naming a line of the text, and nothing else.

- ``fixture_lines(kind)``: the lines of the real fixtures ``tests/fixtures/<kind>/*.txt`` (or named files);
- ``mutated_lines(lines)``: a strategy drawing fixture lines and mutating each (replace a character, cut,
  re-indent);
- ``edited_document(texts)``: a strategy taking one whole fixture and applying line edits (drop, dup, swap,
  cut, insert, tabs, char, merge), for formats whose structure spans lines (XML, matrices);
- ``assert_parses_or_parse_error(parse, text, kind, detect)``: the property itself; any other exception
  (IndexError, KeyError, ...) propagates and fails the test;
- ``safety_tests(parse, kind, mutated, detect=...)``: the two hypothesis tests (``st.text()`` and the
  mutated fixtures) for one kind, to bind to names in the kind's test module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.domain.errors import ParseError

FIX = Path(__file__).resolve().parents[2] / "fixtures"

SAFETY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def fixture_lines(kind: str, names: Iterable[str] | None = None, pattern: str = "*.txt") -> list[str]:
    """Every line of the fixtures of ``kind`` (all ``pattern`` files, sorted, or only ``names``)."""
    folder = FIX / kind
    paths = [folder / n for n in names] if names is not None else sorted(folder.glob(pattern))
    lines = [line for p in paths for line in p.read_text(errors="replace").splitlines()]
    assert lines, f"no fixture lines for {kind}"
    return lines


def strip_and_indent(prefixes: Sequence[str] = ("", "\t", "  ", "\t\t")):
    """Re-indent: strip the line and put one of ``prefixes`` in front (a ``reindent`` for mutated_lines)."""
    return lambda draw, line: draw(st.sampled_from(list(prefixes))) + line.strip()


def add_spaces(most: int = 3):
    """Re-indent: add 0..``most`` spaces in front (a ``reindent`` for mutated_lines)."""
    return lambda draw, line: " " * draw(st.integers(0, most)) + line


def lstrip(draw, line: str) -> str:
    """Re-indent: drop the leading white space (a ``reindent`` for mutated_lines)."""
    return line.lstrip()


def mutated_lines(lines: Sequence[str], *, max_size: int = 20, replacement=None,
                  reindent: Callable | None = None):
    """Strategy: 1..``max_size`` lines drawn from ``lines``, each kept, with one character replaced by
    ``replacement`` (default: up to 3 arbitrary characters), cut short, or re-indented by ``reindent``."""
    replacement = st.text(max_size=3) if replacement is None else replacement
    top = 3 if reindent is not None else 2

    @st.composite
    def build(draw) -> str:
        out = []
        for line in draw(st.lists(st.sampled_from(list(lines)), min_size=1, max_size=max_size)):
            op = draw(st.integers(0, top))
            if op == 1 and line:
                i = draw(st.integers(0, len(line) - 1))
                line = line[:i] + draw(replacement) + line[i + 1:]
            elif op == 2:
                line = line[: draw(st.integers(0, len(line)))]
            elif op == 3:
                line = reindent(draw, line)
            out.append(line)
        return "\n".join(out)

    return build()


EDITS = ("drop", "dup", "swap", "cut", "insert", "tabs", "char", "merge")


def edited_document(texts: Sequence[str], *, insert_lines: Sequence[str] | None = None,
                    ops: Sequence[str] = ("drop", "dup", "swap", "cut", "insert"),
                    min_edits: int = 0, max_edits: int = 6):
    """Strategy: one of ``texts`` with ``min_edits``..``max_edits`` line edits from ``ops`` (see ``EDITS``):
    drop, duplicate, swap with the next, cut short, insert a line of ``insert_lines`` (default: the lines of
    ``texts``), change the tabs, replace one character, merge with the next."""
    unknown = set(ops) - set(EDITS)
    assert not unknown, unknown
    pool = list(insert_lines) if insert_lines is not None else [ln for t in texts for ln in t.splitlines()]

    @st.composite
    def build(draw) -> str:
        lines = draw(st.sampled_from(list(texts))).split("\n")
        for _ in range(draw(st.integers(min_edits, max_edits))):
            if not lines:
                break
            i = draw(st.integers(0, len(lines) - 1))
            op = draw(st.sampled_from(list(ops)))
            line = lines[i]
            if op == "drop":
                del lines[i]
            elif op == "dup":
                lines.insert(i, line)
            elif op == "swap":
                j = (i + 1) % len(lines)
                lines[i], lines[j] = lines[j], lines[i]
            elif op == "cut":
                lines[i] = line[: draw(st.integers(0, len(line)))]
            elif op == "insert":
                lines.insert(i, draw(st.sampled_from(pool)))
            elif op == "tabs":
                lines[i] = line.replace("\t", draw(st.sampled_from(["", " ", "  ", "\t\t"])))
            elif op == "char":
                at = draw(st.integers(0, len(line)))
                lines[i] = line[:at] + draw(st.characters()) + line[at + 1:]
            elif op == "merge" and i + 1 < len(lines):
                lines[i:i + 2] = [line + lines[i + 1]]
        return "\n".join(lines)

    return build()


def assert_parses_or_parse_error(parse: Callable[[str], object], text: str, kind: str,
                                 detect: Callable[[str], int] | None = None) -> None:
    """``parse(text)`` returns, or raises ``ParseError`` of ``kind`` whose line number is 0 (no line) or a
    line of ``text``; ``detect(text)``, when given, scores 0..100. Any other exception fails the test."""
    try:
        parse(text)
    except ParseError as e:
        assert e.kind == kind, (e.kind, kind)
        assert 0 <= e.line_no <= len(text.splitlines()) + 1, (e.line_no, e.reason)
    if detect is not None:
        score = detect(text)
        assert 0 <= score <= 100, score


def safety_tests(parse: Callable[[str], object], kind: str, mutated, *,
                 detect: Callable[[str], int] | None = None, max_examples: int = 200):
    """The two safety tests of one kind: ``(any_text, mutated_fixtures)``; bind them to ``test_*`` names."""
    chosen = settings(SAFETY_SETTINGS, max_examples=max_examples)

    @chosen
    @given(st.text())
    def any_text(text: str) -> None:
        assert_parses_or_parse_error(parse, text, kind, detect)

    @chosen
    @given(mutated)
    def mutated_fixtures(text: str) -> None:
        assert_parses_or_parse_error(parse, text, kind, detect)

    for fn, what in ((any_text, "any_text"), (mutated_fixtures, "mutated_fixtures")):
        fn.__name__ = fn.__qualname__ = f"test_{kind}_{what}"
    return any_text, mutated_fixtures
