"""The node report envelope (``topoweb.report/1``): decoding and checking a received body.

``decode_report(raw) -> (dict, text)`` checks size and JSON syntax; ``validate_envelope(data) ->
Envelope`` checks the shape, every error naming the field at fault (``ReportRejected``: ``.status``
400/413, ``.code``, ``.message``, ``.details``); ``content_hash(hostname, sections)`` makes a
resent report a duplicate of the first; ``check_posted_text`` checks a posted command output (a
run, a fabric discovery) the same way for every kind. Nothing here writes.

Report envelope::

    {"schema": "topoweb.report/1", "hostname": str, "collected_at": ISO-8601 (optional),
     "agent_version": str (optional), "meta": {...} (optional),
     "sections": {kind: raw text, ...}, "unavailable": {kind: reason, ...} (optional)}
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any

from django.conf import settings

from apps.domain.parsers import KINDS


REPORT_SCHEMA = "topoweb.report/1"
MAX_NESTING = 32  # levels of objects/lists within the report's meta, sections, unavailable
HOSTNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


# --------------------------------------------------------------------------------------------
# Report envelope


class ReportRejected(ValueError):
    """A report that cannot be accepted; ``status`` is the HTTP status the API answers."""

    def __init__(self, message: str, *, status: int = 400, code: str = "invalid_report", **details: Any):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.details = details

    def as_dict(self) -> dict:
        return {"error": self.message, "code": self.code, **self.details}


@dataclass(frozen=True)
class Envelope:
    hostname: str
    sections: dict[str, str]
    unavailable: dict[str, str]
    meta: dict
    collected_at: datetime | None
    agent_version: str
    collected_at_ignored: str = ""  # why a collected_at that was sent is not used ("" when it is)


def _field_error(field_name: str, message: str) -> ReportRejected:
    return ReportRejected(f"{field_name}: {message}", code="invalid_field", field=field_name)


def decode_report(raw: bytes | str) -> tuple[dict, str]:
    """Check size and JSON syntax of a received body; return (decoded dict, text as received)."""
    # surrogatepass: a str holding a lone surrogate is measured here and refused, naming its
    # field, by validate_envelope
    size = len(raw.encode("utf-8", "surrogatepass")) if isinstance(raw, str) else len(raw)
    limit = settings.MAX_REPORT_BYTES
    if size > limit:
        raise ReportRejected(
            f"report is {size} bytes; the limit is {limit} bytes (TOPOWEB_MAX_REPORT_BYTES)",
            status=413, code="too_large", limit=limit,
        )
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ReportRejected(f"report is not UTF-8 text (byte {exc.start})", code="not_json") from None
    else:
        text = raw
    if not text.strip():
        raise ReportRejected("report body is empty; expected a topoweb.report/1 JSON document", code="not_json")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ReportRejected(f"report is not JSON: {exc}", code="not_json") from None
    except RecursionError:
        raise ReportRejected(f"report is nested too deeply to read (JSON objects or lists within each other; "
                             f"at most {MAX_NESTING} levels are accepted)", code="invalid_field", field="(root)") from None
    if not isinstance(data, dict):
        raise ReportRejected(
            f"report must be a JSON object, got {type(data).__name__}", code="invalid_field", field="(root)"
        )
    return data, text


def _check_strings(value: Any, field_name: str, depth: int = 0) -> None:
    """Every string of ``value`` is valid Unicode text (no lone UTF-16 surrogate such as a JSON
    ``"\\ud800"``, which no database or hash can encode) and containers nest at most ``MAX_NESTING``
    deep; the error names the field (``meta.a.b``, ``sections.ibstat``)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _field_error(field_name, f"holds an unpaired UTF-16 surrogate ({value[exc.start]!r} at character "
                                           f"{exc.start}); send text, not raw bytes") from None
        return
    if not isinstance(value, (dict, list)):
        return
    if depth >= MAX_NESTING:
        raise _field_error(field_name, f"nested deeper than {MAX_NESTING} levels")
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        if isinstance(key, str):
            _check_strings(key, field_name, depth + 1)
        _check_strings(item, f"{field_name}.{key}", depth + 1)


def parse_collected_at(value: Any) -> datetime | None:
    """``collected_at`` as an aware UTC datetime; None when it lies outside the years topoweb can
    store (before 2000 or past 9000: a node whose clock is wrong); a 400 when it is no time at all."""
    if not isinstance(value, str):
        raise _field_error("collected_at", "must be an ISO 8601 time string, e.g. 2025-01-31T12:00:00Z")
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise _field_error(
            "collected_at", f"{value[:40]!r} is not an ISO 8601 time, e.g. 2025-01-31T12:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt_timezone.utc)
    try:
        moment = moment.astimezone(dt_timezone.utc)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+05:00
        return None
    return moment if 2000 <= moment.year <= 9000 else None


def validate_envelope(data: dict) -> Envelope:
    """Check the shape of a decoded report; every error names the field at fault.

    ``collected_at`` outside the years 2000-9000 reads as absent (``collected_at_ignored`` says
    so); ``submit_report`` also ignores one too far ahead of the server's clock."""
    schema = data.get("schema")
    if schema is None:
        raise _field_error("schema", f"missing; expected {REPORT_SCHEMA!r}")
    if schema != REPORT_SCHEMA:
        raise _field_error("schema", f"unsupported schema {schema!r}; this server reads {REPORT_SCHEMA!r}")

    hostname = data.get("hostname")
    if not isinstance(hostname, str) or not hostname.strip():
        raise _field_error("hostname", "missing or not a string")
    hostname = hostname.strip()
    if not HOSTNAME_RE.match(hostname):
        raise _field_error(
            "hostname", f"{hostname[:80]!r} is not a host name (letters, digits, '.', '_', '-'; at most 253)"
        )

    sections = data.get("sections")
    if not isinstance(sections, dict):
        raise _field_error("sections", "missing or not an object of {kind: text}")
    if not sections:
        raise _field_error("sections", "is empty; a report needs at least one section")
    for kind, text in sections.items():
        if kind not in KINDS:
            raise ReportRejected(
                f"sections: unknown section kind {kind!r}; known kinds: {', '.join(KINDS)}",
                code="unknown_kind", field=f"sections.{kind}", kind=kind, known_kinds=list(KINDS),
            )
        if not isinstance(text, str):
            raise _field_error(f"sections.{kind}", f"must be the command's text output, got {type(text).__name__}")
        if not text.strip():
            raise _field_error(f"sections.{kind}", "is empty; report a missing tool under 'unavailable' instead")
        if "\x00" in text:
            raise _field_error(f"sections.{kind}", "contains NUL characters; expected text output")

    unavailable = data.get("unavailable", {})
    if unavailable is None:
        unavailable = {}
    if not isinstance(unavailable, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in unavailable.items()
    ):
        raise _field_error("unavailable", "must be an object of {kind: reason text}")

    meta = data.get("meta", {})
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise _field_error("meta", "must be an object")

    raw_time = data.get("collected_at")
    collected_at = parse_collected_at(raw_time) if raw_time is not None else None
    ignored = raw_time is not None and collected_at is None

    agent_version = data.get("agent_version", "") or ""
    if not isinstance(agent_version, str):
        raise _field_error("agent_version", "must be a string")

    for name, value in (("sections", sections), ("unavailable", unavailable), ("meta", meta),
                        ("agent_version", agent_version)):
        _check_strings(value, name)

    return Envelope(
        hostname=hostname, sections=dict(sections), unavailable=dict(unavailable), meta=meta,
        collected_at=collected_at, agent_version=agent_version[:40],
        collected_at_ignored=f"collected_at {str(raw_time)[:40]!r} is outside the years 2000-9000" if ignored else "",
    )


def content_hash(hostname: str, sections: dict[str, str]) -> str:
    """sha256 of the canonical JSON of hostname + sections: equal hardware facts, equal hash."""
    canonical = json.dumps(
        {"hostname": hostname, "sections": sections}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------
# Posted command output (runs, fabric discoveries)


def check_posted_text(text: Any, *, what: str, limit: int, setting: str, empty_hint: str) -> str:
    """A command's output as posted (a run, a fabric discovery): text, at most ``limit`` bytes (413 naming
    ``setting``), not empty (400 saying what to send: ``empty_hint``), no NUL, valid UTF-8; else
    ``ReportRejected`` naming the field ``text``."""
    if not isinstance(text, str):
        raise ReportRejected(f"text: {what} as text is required", code="invalid_field", field="text")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ReportRejected(f"text is {size} bytes; the limit is {limit} bytes ({setting})", status=413,
                             code="too_large", limit=limit)
    if not text.strip():
        raise ReportRejected(f"text is empty: {empty_hint}", code="invalid_field", field="text")
    if "\x00" in text:
        raise ReportRejected("text contains NUL characters; expected a command's text output", code="invalid_field",
                             field="text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ReportRejected("text holds an unpaired UTF-16 surrogate; send text, not raw bytes", code="invalid_field",
                             field="text") from None
    return text
