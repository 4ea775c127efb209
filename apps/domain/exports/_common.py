"""Helpers the export formats share: the error they raise, text made safe for XML and for
one-line comments, and the snapshot document check (``natural_key`` is :mod:`apps.domain.names`')."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from apps.domain.names import natural_key

__all__ = ["ExportError", "natural_key", "xml_text", "comment_text", "checked_doc"]

# characters XML 1.0 cannot carry at all (C0 controls but tab/newline/CR, lone surrogates, U+FFFE/F)
_XML_BAD_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


class ExportError(ValueError):
    """A document (or fabric) that the requested format cannot express; the message says why and
    what to send so that it can."""


def xml_text(value: Any) -> str:
    """``value`` as text XML 1.0 can hold: characters it cannot (NUL, escape, other C0
    controls) written as ``\\x1b``-style escapes; everything else unchanged (the XML writer
    escapes ``<``, ``&`` and quotes)."""
    return _XML_BAD_RE.sub(lambda m: m.group(0).encode("unicode_escape", "backslashreplace").decode("ascii"),
                           str(value))


def comment_text(value: Any) -> str:
    """``value`` for a one-line comment of any of the formats: control characters escaped,
    newlines as spaces, and no ``--`` (which may not appear inside an XML comment) nor ``-->``."""
    text = " ".join(str(value).split())
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    while "--" in text:
        text = text.replace("--", "-")
    return text


def checked_doc(doc: Mapping[str, Any]) -> dict:
    """The snapshot document with the keys documents stored before them lack filled in
    (``HostAnalysis.from_dict``); raises ExportError when ``doc`` is not a snapshot document."""
    from apps.domain.analysis import HostAnalysis

    try:
        return HostAnalysis.from_dict(doc).doc
    except (ValueError, TypeError, AttributeError) as exc:
        raise ExportError(str(exc)) from None
