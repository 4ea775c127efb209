"""Text clean-up shared by the parsers: line endings, ANSI escapes, byte-order marks."""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable
from typing import Any

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


_ATOMS = frozenset((str, int, float, bool, type(None)))
_FIELDS: dict[type, tuple[str, ...]] = {}
_PLAIN: dict[type, Callable[[Any], dict]] = {}


def register_plain(cls: type, plain: Callable[[Any], dict]) -> None:
    """``to_jsonable`` of a ``cls`` instance is ``plain(instance)``: for a parser record there are
    hundreds of (the lspci functions), whose parser knows which of its fields are not atoms. It
    must give what the field-by-field conversion gives (the parser's tests compare the two)."""
    _PLAIN[cls] = plain


def to_jsonable(value):
    """Turn parser records (frozen dataclasses, tuples, enums) into plain JSON-ready values.

    The common exact types are tested first: a parser result is thousands of small dataclasses,
    tuples, lists and strings, and most fields are atoms (no call for them)."""
    t = type(value)
    if t in _ATOMS:
        return value
    atoms = _ATOMS
    if t is dict:
        return {str(k): v if type(v) in atoms else to_jsonable(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [v if type(v) in atoms else to_jsonable(v) for v in value]
    plain = _PLAIN.get(t)
    if plain is not None:
        return plain(value)
    return fields_jsonable(value)


def fields_jsonable(value):
    """``to_jsonable`` of a dataclass instance (or an enum, a subclass of a plain type) field by
    field, whatever ``register_plain`` says."""
    t = type(value)
    atoms = _ATOMS
    names = _FIELDS.get(t)
    if names is None:
        if not dataclasses.is_dataclass(t):
            return _other(value)
        names = _FIELDS[t] = tuple(f.name for f in dataclasses.fields(t))
    own = getattr(value, "__dict__", None)
    if own is not None and len(own) == len(names):
        # a dataclass instance that holds exactly its fields (the parsers' records, the lspci
        # functions built from their field dicts): read its dict in one pass, not field by field
        return {k: v if type(v) in atoms else to_jsonable(v) for k, v in own.items()}
    out = {}
    for name in names:
        v = getattr(value, name)
        out[name] = v if type(v) in atoms else to_jsonable(v)
    return out


def _other(value):
    """Enums, and subclasses of dict, list, tuple and the atoms."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value
