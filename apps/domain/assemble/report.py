"""One node report as the assembly stages read it: the parser results and what the stages say.

A parser result may be the parser's frozen dataclass or its ``to_jsonable`` dict; the accessors
here read a field either way (:func:`get_field`, :func:`get_list`) and turn the values parsers
and JSON copies hold into ints, floats, booleans, canonical PCI addresses and NUMA ids (None when
absent or unreadable). :class:`Report` holds the results and collects warnings and disagreements.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from apps.domain.facts import Disagreement
from apps.domain.pci import canonical_bdf, is_bdf

__all__ = ["Report", "to_plain", "get_field", "get_list", "to_int", "to_float", "to_bool", "to_hex", "to_bdf",
           "to_numa"]


@dataclass


class Report:
    """The parser results of one report (``{kind: result}``, empty results dropped), read in place:
    converting 500-function lspci listings costs more than building the graph; JSON dicts work
    the same through :func:`get_field`."""

    results: dict[str, Any]
    hostname: str
    warnings: list[str] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)

    @classmethod
    def of(cls, results: dict[str, Any], hostname: str) -> Report:
        return cls({k: v for k, v in results.items() if v is not None}, hostname)

    def disagree(self, subject: str, message: str, *sources: str) -> None:
        self.disagreements.append(Disagreement(subject, message, tuple(sources)))


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # a dataclass's field names, read once per class


def to_plain(value: Any) -> Any:
    """Dataclasses -> dicts (recursively), tuples -> lists; dicts/scalars as they are."""
    names = _FIELD_NAMES.get(type(value))
    if names is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELD_NAMES[type(value)] = tuple(f.name for f in dataclasses.fields(value))
    if names is not None:
        return {name: to_plain(getattr(value, name)) for name in names}
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if hasattr(value, "value") and type(value).__module__ != "builtins" and hasattr(type(value), "__members__"):
        return value.value  # enums
    return value


def get_field(d: Any, key: str, default: Any = None) -> Any:
    """Field ``key`` of a parser record (a dict or a dataclass); ``default`` when absent or empty."""
    if d is None:
        return default
    v = d.get(key) if isinstance(d, dict) else getattr(d, key, None)
    return default if v is None or v == "" else v


def get_list(d: Any, key: str) -> list:
    return list(get_field(d, key, default=()) or ())


def to_int(value: Any, base: int = 10) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    text = str(value).strip()
    if not text or text.upper() in ("N/A", "NONE", "-"):
        return None
    try:
        if text.lower().startswith("0x"):
            return int(text, 16)
        return int(text, base)
    except ValueError:
        m = re.match(r"-?\d+", text)
        return int(m.group(0)) if m else None


def to_float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        m = re.match(r"\s*(\d+(?:\.\d+)?)", str(value))
        return float(m.group(1)) if m else None


def to_bool(value: Any) -> bool | None:
    """A parser's boolean (``True``/``False``), or a JSON copy of one; None when unknown."""
    if value is None or isinstance(value, bool):
        return value
    n = to_int(value)
    return None if n is None else n != 0


_CANON_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


@functools.lru_cache(maxsize=8192)


def _bdf_text(text: str) -> str | None:
    text = text.strip()
    if _CANON_RE.match(text):
        return text
    if is_bdf(text):
        return canonical_bdf(text)
    m = re.search(r"([0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\s*$", text)
    return canonical_bdf(m.group(0).strip()) if m else None


def to_bdf(value: Any) -> str | None:
    if not value or not isinstance(value, str):
        return None
    return _bdf_text(value)


def to_numa(value: Any) -> int | None:
    n = to_int(value)
    return n if n is not None and n >= 0 else None


_HEX_DIGITS_RE = re.compile("[0-9a-f]+")


def to_hex(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip().lower()
    if text.startswith("0x"):
        text = text[2:]
    return int(text, 16) if _HEX_DIGITS_RE.fullmatch(text) else None
