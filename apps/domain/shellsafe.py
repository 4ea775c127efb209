"""Device names are data: which names may go into suggested settings, and shell-safe export lines.

Device names (GPUs, HCAs, netdevs) come from node reports and pasted text. The NCCL settings topoweb
suggests are built from them and copied into a shell, so:

* ``is_safe_name(name)``: whether a name stays within ``SAFE_NAME`` (``[A-Za-z0-9_.:/-]+``), the
  characters real device names use. A name outside it is kept as reported in the snapshot
  document, flagged by rule X02 and never put into a suggested setting.
* ``export_line(name, value)``: ``export NAME=VALUE`` with the value quoted by ``shlex.quote``, so
  whatever the value holds, a POSIX shell assigns exactly that string and runs nothing. The host
  page's copy block and ``manage.py analyze --format text`` both print settings through it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["SAFE_NAME", "ENV_NAME", "is_safe_name", "printable", "export_line", "export_block"]

SAFE_NAME = re.compile(r"^[A-Za-z0-9_.:/-]+$")
ENV_NAME = re.compile(r"^NCCL_[A-Z0-9_]+$")  # the variables topoweb suggests


def is_safe_name(name: Any) -> bool:
    """True when ``name`` is a non-empty string of ``SAFE_NAME`` characters only (``$``, ``;``,
    quotes, spaces, newlines, non-ASCII letters: False)."""
    # fullmatch, not match: "$" in SAFE_NAME would also accept a name ending in a newline
    return isinstance(name, str) and SAFE_NAME.fullmatch(name) is not None


def printable(name: Any) -> str:
    """``name`` for a one-line message: characters that do not print (newline, escape, NUL ...)
    written as ``\\n``, ``\\x1b``, ``\\x00``; everything else as it is."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(name))


def export_line(name: str, value: Any, *, comment: str | None = None, export: bool = True) -> str:
    """One shell line assigning ``value`` to ``name``: ``export NAME='VALUE'`` (``export=False``:
    ``NAME='VALUE'``), the value quoted with ``shlex.quote`` (left bare when it needs no quoting,
    e.g. ``=mlx5_0,mlx5_1``), then ``  # comment`` on the same line (newlines in the comment become
    spaces). Raises ValueError when ``name`` is not an ``NCCL_[A-Z0-9_]+`` variable or the value
    holds a NUL byte (no shell variable can)."""
    if not isinstance(name, str) or ENV_NAME.fullmatch(name) is None:
        raise ValueError(f"not an NCCL variable name: {printable(name)}")
    text = str(value)
    if "\x00" in text:
        raise ValueError(f"{name}: a value with a NUL byte cannot be set in a shell")
    line = ("export " if export else "") + f"{name}={shlex.quote(text)}"
    if comment:
        line += "  # " + " ".join(str(comment).split())
    return line


def export_block(settings: Iterable[Mapping[str, Any]], *, comments: bool = False, export: bool = True) -> list[str]:
    """``export_line`` for each ``{"name", "value", "reason"}`` setting, in order; a setting whose
    name or value ``export_line`` refuses is left out (a stored document may predate these checks).
    ``comments=True`` appends each reason as a comment."""
    out = []
    for s in settings:
        try:
            out.append(export_line(s.get("name"), s.get("value", ""),
                                   comment=s.get("reason") if comments else None, export=export))
        except ValueError:
            continue
    return out
