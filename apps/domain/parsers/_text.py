"""Text clean-up shared by the parsers: line endings, ANSI escapes, byte-order marks."""

from __future__ import annotations

import dataclasses
import enum
import re

# CSI sequences (colours, underline) and the rarer OSC ones; support threads paste both.
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def clean_lines(text: str) -> list[str]:
    """Split ``text`` into lines with CRLF/CR endings, ANSI escapes and a BOM removed.

    Line numbers used in ``ParseError`` are 1-based indexes into this list, which keeps them
    equal to the line numbers of the text as the user sent it (no lines are dropped here).
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x1b" in text:  # a plain search first: the regex scan costs a millisecond per megabyte
        text = ANSI_RE.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")


def to_jsonable(value):
    """Turn parser records (frozen dataclasses, tuples, enums) into plain JSON-ready values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value
