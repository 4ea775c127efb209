"""Errors raised by the domain core."""

from __future__ import annotations


class ParseError(ValueError):
    """A section of a node report could not be read.

    ``kind`` is the parser's registry name, ``line_no`` the 1-based line of the input where
    reading failed (0 when the failure is not tied to one line, e.g. empty input), ``line`` that
    line's text as received (without its line ending) and ``reason`` a plain sentence for a human.
    """

    def __init__(self, kind: str, line_no: int, line: str, reason: str) -> None:
        self.kind = kind
        self.line_no = line_no
        self.line = line
        self.reason = reason
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = f"line {self.line_no}" if self.line_no else "input"
        shown = f": {self.line.strip()[:120]!r}" if self.line.strip() else ""
        return f"{self.kind}: {where}: {self.reason}{shown}"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "line_no": self.line_no, "line": self.line, "reason": self.reason}

    def __reduce__(self):  # picklable, so it crosses process and Celery boundaries intact
        return (type(self), (self.kind, self.line_no, self.line, self.reason))


class UnknownKindError(ValueError):
    """``detect_kind`` could not tell what command produced a text, or a kind name is unknown."""
