"""Ingestion writes: enrollment, report submission, processing, rebuilds, sweeps and bulk imports.

Every state change of the ingest tables goes through this module; views, tasks and management
commands call it. Signatures (all keyword-only after the first ``*``):

Enrollment
    ``create_cluster(*, name, description="") -> Cluster``
    ``issue_token(*, cluster, name="", user=None) -> (AgentToken, secret: str)``
        the secret (``tw_<8 hex>_<43 chars>``) exists only in this return value; the table keeps
        its sha256 and the visible prefix ``tw_<8 hex>``.
    ``authenticate_token(secret) -> AgentToken | None``  (None: unknown or revoked)
    ``check_token(secret) -> (AgentToken | None, reason)``
    ``revoke_token(prefix_or_id) -> AgentToken``  (raises ``LookupError`` naming the problem)

Reports
    ``submit_report(*, cluster, report, via, user=None, token=None, source_name="") -> (Upload, created)``
        ``report`` is the decoded dict or the raw bytes/str of a ``topoweb.report/1`` JSON
        document; raises ``ReportRejected`` (``.status`` 400/413, ``.code``, ``.message``,
        ``.details``) when it cannot be accepted, and then writes nothing. A new upload's
        ``notices`` list what was not used as sent (a ``collected_at`` ahead of the clock). ``created`` is False when the same report
        (sha256 of canonical JSON of hostname + sections) is already stored in that cluster;
        the existing upload is then returned. Processing is enqueued after commit; a broker
        failure is logged and leaves the upload ``received`` for the sweeper.
    ``process_upload(upload_id) -> str``  the upload's status afterwards; idempotent.
    ``rebuild_snapshots(*, cluster=None, host=None, progress=None) -> RebuildSummary``
    ``sweep_uploads(*, older_than_seconds=None) -> list[int]``  ids re-enqueued

Bulk import
    ``iter_report_sources(path, *, name=None) -> ReportListing``  (the reports found; damage and
        member-limit notices; read and verified to the end of the archive's compressed stream)
    ``import_reports(*, cluster, path, user=None, progress=None, sources=None) -> ImportSummary``
        (synchronous; one bad member never stops the rest)
    ``start_import(*, cluster, path_or_fileobj, user) -> ImportJob``  (background, pollable)
    ``run_import_job(job_id) -> None``  (the worker side of ``start_import``; the job always
        ends ``done``, ``done_with_errors`` or ``failed``)

Report envelope (``topoweb.report/1``)::

    {"schema": "topoweb.report/1", "hostname": str, "collected_at": ISO-8601 (optional),
     "agent_version": str (optional), "meta": {...} (optional),
     "sections": {kind: raw text, ...}, "unavailable": {kind: reason, ...} (optional)}
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import os
import re
import secrets
import shutil
import tarfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from pathlib import Path
from typing import Any, Callable

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.domain.errors import ParseError
from apps.domain.parsers import KINDS
from apps.ingest import archive
from apps.ingest.models import AgentToken, Cluster, Host, ImportJob, Snapshot, Upload

log = logging.getLogger(__name__)

REPORT_SCHEMA = "topoweb.report/1"
MAX_NESTING = 32  # levels of objects/lists within the report's meta, sections, unavailable
TOKEN_PREFIX_LEN = 11  # "tw_" + 8 hex digits
HOSTNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
CLUSTER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SEVERITIES = ("CRIT", "HIGH", "MED", "LOW", "INFO")


# --------------------------------------------------------------------------------------------
# Enrollment


def check_cluster_name(name: str) -> None:
    """Raise ValueError naming the rule when ``name`` cannot be a cluster name."""
    if not CLUSTER_NAME_RE.match(name or ""):
        raise ValueError(
            f"cluster name {name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )


def create_cluster(*, name: str, description: str = "") -> Cluster:
    check_cluster_name(name)
    if Cluster.objects.filter(name=name).exists():
        raise ValueError(f"cluster {name!r} already exists")
    return Cluster.objects.create(name=name, description=description)


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def issue_token(*, cluster: Cluster, name: str = "", user=None) -> tuple[AgentToken, str]:
    """Create a token for ``cluster``; the clear secret is returned once and never stored."""
    while True:
        prefix = "tw_" + secrets.token_hex(4)
        if not AgentToken.objects.filter(prefix=prefix).exists():
            break
    secret = f"{prefix}_{secrets.token_urlsafe(32)}"
    token = AgentToken.objects.create(
        cluster=cluster, name=name, prefix=prefix, token_hash=hash_token(secret), created_by=user
    )
    return token, secret


def check_token(secret: str) -> tuple[AgentToken | None, str]:
    """Look up an agent token; returns (token, "") or (None, reason a person can act on)."""
    secret = (secret or "").strip()
    if not secret or len(secret) > 200:
        return None, "missing or malformed bearer token"
    # token_hash is unique: no ORDER BY (first() would sort by the Meta ordering, joining on the name)
    token = next(iter(AgentToken.objects.select_related("cluster").filter(token_hash=hash_token(secret)).order_by()),
                 None)
    if token is None:
        return None, "unknown token"
    if token.revoked_at is not None:
        return None, f"token {token.prefix} was revoked on {token.revoked_at:%Y-%m-%d %H:%M} UTC"
    now = timezone.now()
    # One write a minute at most: the hot path of 500 agents must not update a row per report.
    if token.last_used_at is None or now - token.last_used_at > timedelta(seconds=60):
        AgentToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token, ""


def authenticate_token(secret: str) -> AgentToken | None:
    """The active token with this secret, or None (unknown or revoked)."""
    return check_token(secret)[0]


def revoke_token(prefix_or_id: str) -> AgentToken:
    """Revoke by database id, visible prefix (``tw_3f9a1c2b``), a longer start, or the whole token."""
    value = (prefix_or_id or "").strip()
    if value.isdigit():
        matches = list(AgentToken.objects.filter(pk=int(value)))
    elif len(value) >= TOKEN_PREFIX_LEN:
        matches = list(AgentToken.objects.filter(prefix=value[:TOKEN_PREFIX_LEN]))
    elif len(value) >= 4:
        matches = list(AgentToken.objects.filter(prefix__startswith=value))
    else:
        raise LookupError("give a token id, its prefix (tw_ and 8 hex digits) or the token itself")
    if not matches:
        raise LookupError(f"no token matches {value!r}")
    if len(matches) > 1:
        raise LookupError(f"{value!r} matches {len(matches)} tokens: " + ", ".join(t.prefix for t in matches))
    token = matches[0]
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


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


def _parse_collected_at(value: Any) -> datetime | None:
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
    collected_at = _parse_collected_at(raw_time) if raw_time is not None else None
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
# Submission


def submit_report(
    *,
    cluster: Cluster,
    report: dict | bytes | str,
    via: str,
    user=None,
    token: AgentToken | None = None,
    source_name: str = "",
) -> tuple[Upload, bool]:
    """Store one report verbatim and schedule its processing; see the module docstring."""
    if via not in Upload.Via.values:
        raise ValueError(f"via must be one of {Upload.Via.values}, got {via!r}")
    if token is not None and token.cluster_id != cluster.pk:
        # A token writes only into its own cluster; callers must never get here.
        raise PermissionError(f"token {token.prefix} belongs to another cluster")
    if isinstance(report, dict):
        raw = json.dumps(report, ensure_ascii=False)
        data, raw = decode_report(raw)
    else:
        data, raw = decode_report(report)
    size = len(raw.encode("utf-8", "surrogatepass")) if not isinstance(report, (bytes, bytearray)) else len(report)
    env = validate_envelope(data)
    digest = content_hash(env.hostname, env.sections)
    now = timezone.now()
    collected_at, notice = _trusted_collected_at(env, now)

    # Nothing is written unless the whole report is accepted: the host and the upload in one transaction.
    with transaction.atomic():
        # The host first (a resent report names a known host, whose last_seen_at it refreshes too):
        # one upsert, INSERT for a new host or UPDATE of last_seen_at for a known one.
        host_id = _insert_on_conflict(Host(cluster=cluster, hostname=env.hostname, last_seen_at=now),
                                      conflict=("cluster_id", "hostname"), update=("last_seen_at",))
        upload = Upload(cluster=cluster, host_id=host_id, via=via, token=token, user=user,
                        source_name=source_name[:500], raw=raw, size_bytes=size, content_hash=digest,
                        collected_at=collected_at, agent_version=env.agent_version, received_at=now)
        # One INSERT ... ON CONFLICT DO NOTHING: a report already stored in this cluster (resent, or
        # racing in from another request; unique cluster + content_hash) inserts nothing.
        upload.pk = _insert_on_conflict(upload, conflict=("cluster_id", "content_hash"))
    if upload.pk is None:
        existing = Upload.objects.filter(cluster=cluster, content_hash=digest).order_by().first()
        if existing is None:  # pragma: no cover - the conflicting row cannot vanish: uploads are never deleted
            raise IntegrityError(f"upload of {env.hostname} conflicted with a row that is gone")
        return existing, False
    upload._state.adding = False
    upload.notices = [notice] if notice else []
    # Enqueue only after COMMIT, or the worker may not see the row yet (at once in autocommit).
    transaction.on_commit(lambda: enqueue_upload(upload.pk))
    return upload, True


def _trusted_collected_at(env: Envelope, now: datetime) -> tuple[datetime | None, str]:
    """The ``collected_at`` a snapshot is dated by, and a notice when the report's own is not used.

    A time more than ``CLOCK_SKEW_SECONDS`` ahead of the server's clock (a node whose clock is
    wrong; a report dated 2999 would stay its host's latest snapshot for ever) or outside the years
    2000-9000 is not used: the snapshot is dated by its arrival (``received_at``). The raw report
    keeps the time it was sent with."""
    if env.collected_at_ignored:
        return None, f"{env.collected_at_ignored}; the snapshot is dated by its arrival instead"
    if env.collected_at is not None and env.collected_at > now + timedelta(seconds=settings.CLOCK_SKEW_SECONDS):
        return None, (f"collected_at {env.collected_at:%Y-%m-%dT%H:%M:%SZ} is more than "
                      f"{settings.CLOCK_SKEW_SECONDS} s ahead of the server's clock; the snapshot is dated by its "
                      "arrival instead (check the node's clock)")
    return env.collected_at, ""


def _insert_on_conflict(obj, *, conflict: tuple[str, ...], update: tuple[str, ...] = (),
                prepared: dict[str, Any] | None = None) -> int | None:
    """INSERT ``obj`` unless a row with the same ``conflict`` columns exists; the new row's id, or
    None. With ``update`` columns, an existing row gets those columns from ``obj`` instead and
    its id is returned (an upsert).

    One statement (PostgreSQL and SQLite >= 3.35 both read ``ON CONFLICT ... DO NOTHING / DO
    UPDATE ... RETURNING``); the columns and values come from the model's own fields, so the
    statement follows the model. ``prepared`` maps field names to values already in database
    form (a JSON field's serialised text), sent as they are."""
    meta = obj._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    prepared = prepared or {}
    values = [prepared[f.name] if f.name in prepared and prepared[f.name] is not None
              else f.get_db_prep_save(f.pre_save(obj, add=True), connection) for f in fields]
    action = ("DO UPDATE SET " + ", ".join(f"{quote(c)} = EXCLUDED.{quote(c)}" for c in update)) if update \
        else "DO NOTHING"
    sql = (f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
           f"VALUES ({', '.join(['%s'] * len(fields))}) "
           f"ON CONFLICT ({', '.join(quote(c) for c in conflict)}) {action} RETURNING {quote(meta.pk.column)}")
    with connection.cursor() as cur:
        cur.execute(sql, values)
        row = cur.fetchone()
    return row[0] if row else None


def _eager() -> bool:
    return bool(getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False))


# Keep a broker outage from stalling the request: one quick retry, then leave it to the sweeper.
_PUBLISH_RETRY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}


def enqueue_upload(upload_id: int) -> bool:
    """Hand an upload to the workers (in-process when no broker is configured).

    Returns False when the broker cannot be reached: the upload stays ``received`` and
    ``sweep_uploads`` re-enqueues it later, so an outage delays reports but loses none.
    """
    from apps.ingest.tasks import process_upload_task

    if _eager():
        process_upload_task.apply_async((upload_id,))
        return True
    try:
        process_upload_task.apply_async((upload_id,), retry=True, retry_policy=_PUBLISH_RETRY)
    except Exception:  # kombu/redis raise several types; none may turn a stored report into a 500
        log.exception("could not enqueue upload %s; it stays 'received' for sweep_uploads", upload_id)
        return False
    return True


# --------------------------------------------------------------------------------------------
# Processing


@dataclass
class _Outcome:
    document: dict | None = None
    error: dict | None = None
    document_json: str | None = None  # ``document`` serialised (once: it is what the database stores)


def _error_dict(exc: ParseError, sections: dict[str, str]) -> dict:
    section = exc.kind if exc.kind in sections else None
    if section is None:
        # A parser module may serve several kinds (topo -m and topo -mp); name the one sent.
        module = KINDS[exc.kind].module if exc.kind in KINDS else None
        candidates = [k for k in sections if KINDS[k].module == module]
        section = candidates[0] if len(candidates) == 1 else exc.kind
    return {"section": section, "line_no": exc.line_no, "line": exc.line, "reason": exc.reason}


def _analyze(raw: str) -> _Outcome:
    """Parse and analyse a stored report. Never raises: every failure becomes an error dict."""
    from apps.domain.analysis import analyze_host

    try:
        data = json.loads(raw)
        env = validate_envelope(data)
    except (ValueError, ReportRejected) as exc:  # only reachable for rows written before a rule changed
        return _Outcome(error={"section": None, "line_no": 0, "line": "", "reason": f"invalid report: {exc}"})
    try:
        # The analysis is ours alone: its document needs no defensive copy (to_dict would copy).
        analysis = analyze_host(env.sections, env.hostname)
        document, text = analysis.doc, analysis.doc_json
    except ParseError as exc:
        return _Outcome(error=_error_dict(exc, env.sections))
    except SoftTimeLimitExceeded:
        raise  # the task's time is up: process_upload records it
    except Exception as exc:  # an analysis bug must fail this upload, not the worker or the request
        log.exception("analysis of host %s failed", env.hostname)
        return _Outcome(error={"section": None, "line_no": 0, "line": "",
                               "reason": f"internal error while analysing the report: {type(exc).__name__}: {exc}"})
    # The analysis's own JSON text is stored unless it may hold NaN or Infinity (not JSON;
    # PostgreSQL rejects them): rare, and then checked exactly (a name containing "NaN" is fine).
    if text is None or "NaN" in text or "Infinity" in text:
        try:
            text = json.dumps(document, allow_nan=False)
        except ValueError:
            document = _json_safe(document)
            text = json.dumps(document, allow_nan=False)
    return _Outcome(document=document, document_json=text)


def _json_safe(value: Any) -> Any:
    """Replace NaN/Infinity (not JSON; PostgreSQL rejects them) with None, deeply."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _nic_models(document: dict) -> str:
    groups = Counter()
    for nic in document.get("nics") or []:
        if nic.get("compute") is False:
            continue
        rate = nic.get("rate_gbps")
        layer = {"InfiniBand": "IB", "Ethernet": "Eth"}.get(nic.get("link_layer") or "", "")
        label = (f"{rate:g} Gb/s" if isinstance(rate, (int, float)) else "NIC") + (f" {layer}" if layer else "")
        groups[label] += 1
    return ", ".join(f"{n}x {label}" for label, n in groups.most_common())[:200]


def _snapshot_fields(document: dict) -> dict:
    summary = document.get("summary") or {}
    severities = Counter(f.get("severity") for f in document.get("findings") or [])
    return {
        "document": document,
        "fingerprint": str(summary.get("fingerprint") or "")[:128],
        "crit_count": severities["CRIT"], "high_count": severities["HIGH"], "med_count": severities["MED"],
        "low_count": severities["LOW"], "info_count": severities["INFO"],
        "gpu_count": int(summary.get("gpu_count") or 0),
        "gpu_model": str(summary.get("gpu_model") or "")[:200],
        "nic_count": int(summary.get("nic_count") or 0),
        "active_nic_count": int(summary.get("active_nic_count") or 0),
        "nic_models": _nic_models(document),
    }


def _store_outcome(upload: Upload, outcome: _Outcome, *, from_status: str | None,
                   attempt: int | None = None) -> str:
    """Write the result of an analysis and return the upload's status afterwards.

    ``from_status`` guards against a concurrent claimant, and ``attempt`` (the attempt number
    the claim returned) against a later claim of the same upload: when the row no longer matches,
    nothing is written and its current status is returned. A finished upload holds no lease."""
    now = timezone.now()
    with transaction.atomic():
        rows = Upload.objects.filter(pk=upload.pk)
        if from_status is not None:
            rows = rows.filter(status=from_status)
        if attempt is not None:
            rows = rows.filter(attempts=attempt)
        if outcome.error is not None:
            if not rows.update(status=Upload.Status.FAILED, error=outcome.error, finished_at=now,
                               lease_expires_at=None):
                return _current_status(upload.pk)
            Snapshot.objects.filter(upload_id=upload.pk).delete()  # derived from a report that no longer reads
            return Upload.Status.FAILED
        if not rows.update(status=Upload.Status.DONE, error=None, finished_at=now, lease_expires_at=None):
            return _current_status(upload.pk)
        fields = {"host_id": upload.host_id, "collected_at": upload.collected_at or upload.received_at,
                  **_snapshot_fields(outcome.document)}
        # One INSERT ... ON CONFLICT (upload_id) DO UPDATE (a rebuild replaces the snapshot), with
        # the document as the JSON text _analyze already made (update_or_create took a locking
        # SELECT, a savepoint and the INSERT, and serialised the document again).
        snapshot = Snapshot(upload_id=upload.pk, **fields)
        _insert_on_conflict(snapshot, conflict=("upload_id",),
                    update=tuple(Snapshot._meta.get_field(name).column for name in ("built_at", *fields)),
                    prepared={"document": outcome.document_json})
    return Upload.Status.DONE


def _current_status(upload_id: int) -> str:
    return Upload.objects.filter(pk=upload_id).values_list("status", flat=True).first() or "missing"


def _lease_until(now: datetime) -> datetime:
    """The end of a lease taken at ``now``: PROCESSING_LEASE_SECONDS, longer than the hard time limit."""
    return now + timedelta(seconds=settings.PROCESSING_LEASE_SECONDS)


def _leaseless_started_before(now: datetime) -> datetime:
    """A ``processing`` row without a lease (claimed before leases existed) is held for one lease
    from its ``started_at``: it may be taken again once ``started_at`` is before this."""
    return now - timedelta(seconds=settings.PROCESSING_LEASE_SECONDS)


def _lease_expired(now: datetime) -> Q:
    """``processing`` uploads whose worker's lease has run out (it died, or was killed)."""
    return Q(status=Upload.Status.PROCESSING) & (
        Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True, started_at__lt=_leaseless_started_before(now)))


def attempts_used_error(upload_id: int, attempts: int) -> dict:
    """The ``error`` of an upload failed because no attempt to process it finished."""
    return {"section": None, "line_no": 0, "line": "",
            "reason": (f"processing did not finish after {attempts} attempts (the worker died or timed out each "
                       f"time); the raw report is kept: GET /api/v1/uploads/{upload_id}/report returns it, and "
                       "manage.py rebuild_snapshots analyses it again after a fix")}


def time_limit_error() -> dict:
    """The ``error`` of an upload whose analysis ran past TOPOWEB_TASK_SOFT_TIME_LIMIT."""
    return {"section": None, "line_no": 0, "line": "",
            "reason": (f"analysis took longer than {settings.TASK_SOFT_TIME_LIMIT} s "
                       "(TOPOWEB_TASK_SOFT_TIME_LIMIT) and was stopped; the raw report is kept")}


def _claim(upload_id: int, now: datetime) -> Upload | None:
    """Take an upload for processing, in one UPDATE ... RETURNING.

    Claimable: ``received``, or ``processing`` with an expired lease (its worker died or was
    killed). A claim sets ``processing``, counts the attempt and takes a lease until
    ``_lease_until(now)``. A claimable upload that has already used ``MAX_ATTEMPTS`` attempts is
    not claimed again: the same statement marks it ``failed`` (``attempts_used_error``).

    Returns an unsaved Upload with pk, status (``processing``, or ``failed`` for that last case),
    attempts (this attempt's number), host_id, raw, collected_at and received_at; None when a
    worker holds it (lease running) or it is finished."""
    table = connection.ops.quote_name(Upload._meta.db_table)
    adapt = connection.ops.adapt_datetimefield_value
    max_attempts = settings.MAX_ATTEMPTS
    error = Upload._meta.get_field("error").get_db_prep_save(attempts_used_error(upload_id, max_attempts),
                                                             connection)
    used_up = "attempts >= %s"
    with connection.cursor() as cur:
        # Every SET expression reads the row as it was; attempts is set last all the same.
        cur.execute(
            f"UPDATE {table} SET "
            f"status = CASE WHEN {used_up} THEN %s ELSE %s END, "
            f"error = CASE WHEN {used_up} THEN %s ELSE error END, "
            f"finished_at = CASE WHEN {used_up} THEN %s ELSE finished_at END, "
            f"started_at = CASE WHEN {used_up} THEN started_at ELSE %s END, "
            f"lease_expires_at = CASE WHEN {used_up} THEN NULL ELSE %s END, "
            f"attempts = CASE WHEN {used_up} THEN attempts ELSE attempts + 1 END "
            "WHERE id = %s AND (status = %s OR (status = %s AND (lease_expires_at < %s "
            "OR (lease_expires_at IS NULL AND started_at < %s)))) "
            "RETURNING status, attempts, host_id, raw, collected_at, received_at",
            [max_attempts, Upload.Status.FAILED, Upload.Status.PROCESSING,
             max_attempts, error,
             max_attempts, adapt(now),
             max_attempts, adapt(now),
             max_attempts, adapt(_lease_until(now)),
             max_attempts,
             upload_id, Upload.Status.RECEIVED, Upload.Status.PROCESSING, adapt(now),
             adapt(_leaseless_started_before(now))],
        )
        row = cur.fetchone()
    if row is None:
        return None
    status, attempts, host_id, raw, collected_at, received_at = row
    convert = getattr(connection.ops, "convert_datetimefield_value", None)  # SQLite returns text
    if convert is not None:
        collected_at, received_at = (convert(v, None, connection) if v is not None else None
                                     for v in (collected_at, received_at))
    return Upload(pk=upload_id, status=status, attempts=attempts, host_id=host_id, raw=raw,
                  collected_at=collected_at, received_at=received_at)


def process_upload(upload_id: int) -> str:
    """Parse and analyse one upload and store its snapshot; safe to call any number of times.
    Returns the upload's status afterwards (``missing`` for an unknown id).

    The upload is claimed with a conditional UPDATE (``_claim``), so two workers given the same
    id never both process it, and a redelivered task for a ``done`` or ``failed`` upload, or for
    one whose lease a worker holds, does nothing. An upload whose lease expired (its worker
    died or was killed) is claimed again, up to ``MAX_ATTEMPTS`` attempts; then it is failed.
    An analysis stopped by the task's soft time limit fails the upload at once
    (``time_limit_error``): the same report would take as long again.
    """
    upload = _claim(upload_id, timezone.now())
    if upload is None:
        return _current_status(upload_id)
    if upload.status == Upload.Status.FAILED:
        log.warning("upload %s failed: none of its %d attempts finished (the worker died or timed out)",
                    upload_id, upload.attempts)
        return Upload.Status.FAILED
    # Parse outside any transaction: a 1 MB lspci -vvv must not hold row locks.
    try:
        outcome = _analyze(upload.raw)
    except SoftTimeLimitExceeded:
        log.warning("upload %s: analysis stopped after %d s (TOPOWEB_TASK_SOFT_TIME_LIMIT)", upload_id,
                    settings.TASK_SOFT_TIME_LIMIT)
        outcome = _Outcome(error=time_limit_error())
    return _store_outcome(upload, outcome, from_status=Upload.Status.PROCESSING, attempt=upload.attempts)


@dataclass
class RebuildSummary:
    total: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0  # being processed by a worker right now
    failures: list[tuple[int, str, dict]] = field(default_factory=list)  # (upload id, host, error)


def rebuild_snapshots(
    *, cluster: Cluster | None = None, host: Host | None = None, progress: Callable[[Upload], None] | None = None
) -> RebuildSummary:
    """Re-derive every snapshot (of a cluster / host) from its stored raw upload.

    Uploads that are ``done`` or ``failed`` are analysed again (a parser fix can turn a failed
    upload into a snapshot, or the reverse); ``received`` ones are processed; ones a worker is
    processing right now are skipped. Raw uploads are never changed.
    """
    uploads = Upload.objects.all()
    if cluster is not None:
        uploads = uploads.filter(cluster=cluster)
    if host is not None:
        uploads = uploads.filter(host=host)
    summary = RebuildSummary()
    for upload in uploads.select_related("host").order_by("pk").iterator(chunk_size=50):
        summary.total += 1
        if upload.status == Upload.Status.PROCESSING:
            summary.skipped += 1
        elif upload.status == Upload.Status.RECEIVED:
            status = process_upload(upload.pk)
            _count(summary, upload, status)
        else:
            status = _store_outcome(upload, _analyze(upload.raw), from_status=upload.status)
            _count(summary, upload, status)
        if progress is not None:
            progress(upload)
    return summary


def _count(summary: RebuildSummary, upload: Upload, status: str) -> None:
    if status == Upload.Status.DONE:
        summary.done += 1
    elif status == Upload.Status.FAILED:
        summary.failed += 1
        error = Upload.objects.filter(pk=upload.pk).values_list("error", flat=True).first() or {}
        summary.failures.append((upload.pk, upload.host.hostname, error))
    else:
        summary.skipped += 1


def sweep_uploads(*, older_than_seconds: int | None = None) -> list[int]:
    """Re-enqueue uploads stuck ``received`` (broker down at submit time) or left ``processing``
    with an expired lease (the worker died or was killed).

    An upload is picked when it was received (a ``received`` one), and last re-enqueued, more
    than ``older_than_seconds`` (default ``SWEEP_AFTER_SECONDS``) ago; an upload whose lease a
    worker holds never is. The sweeper changes no status: the worker's claim decides (another
    attempt, or ``failed`` once ``MAX_ATTEMPTS`` are used). Pending import jobs of the same age
    are re-enqueued too. Returns the upload ids handed to the broker.
    """
    age = settings.SWEEP_AFTER_SECONDS if older_than_seconds is None else older_than_seconds
    now = timezone.now()
    cutoff = now - timedelta(seconds=age)
    ids = list(
        Upload.objects.filter(Q(status=Upload.Status.RECEIVED, received_at__lt=cutoff) | _lease_expired(now))
        .filter(Q(last_enqueued_at__isnull=True) | Q(last_enqueued_at__lt=cutoff))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    sent = []
    for upload_id in ids:
        Upload.objects.filter(pk=upload_id).update(last_enqueued_at=timezone.now())
        if enqueue_upload(upload_id):
            sent.append(upload_id)
        else:
            Upload.objects.filter(pk=upload_id).update(last_enqueued_at=None)
            break  # the broker is still down; the next sweep tries again
    for job_id in ImportJob.objects.filter(status=ImportJob.Status.PENDING, created_at__lt=cutoff).values_list(
        "pk", flat=True
    ):
        enqueue_import(job_id)
    _end_abandoned_imports(now)
    if ids:
        log.info("sweep_uploads: re-enqueued %d of %d stuck uploads", len(sent), len(ids))
    return sent


def _end_abandoned_imports(now: datetime) -> int:
    """End ``failed`` the import jobs still ``running`` past their hard time limit (+ 60 s): their
    worker died or was killed, and nothing else would ever end them. Running the import again
    is safe: the reports already stored are recognised as such."""
    limit = settings.IMPORT_TIME_LIMIT + 60
    ended = ImportJob.objects.filter(status=ImportJob.Status.RUNNING,
                                     started_at__lt=now - timedelta(seconds=limit)).update(
        status=ImportJob.Status.FAILED, finished_at=now,
        message=(f"the import stopped without finishing: its worker died or was killed (it ran past "
                 f"TOPOWEB_IMPORT_TIME_LIMIT, {settings.IMPORT_TIME_LIMIT} s); the counts show how far it got. "
                 "Import the same archive again: reports already stored are recognised and skipped."))
    if ended:
        log.warning("sweep_uploads: ended %d abandoned import job(s)", ended)
    return ended


# --------------------------------------------------------------------------------------------
# Bulk import

IMPORT_MAX_ERRORS = 1000  # rejected members an import lists by name; the rest are only counted
ERRORS_WRITE_EVERY = 100  # an import job's error list is saved at most once per this many members
PROGRESS_WRITE_SECONDS = 0.5  # an import job's counters are saved at most this often (and at the end)
_TEXT_MAX = 500  # longest file name or error message kept per rejected member


def import_max_members() -> int:
    """Most members one import reads: entries of an archive, files of a folder (TOPOWEB_IMPORT_MAX_MEMBERS)."""
    return int(getattr(settings, "IMPORT_MAX_MEMBERS", 100_000))


def import_max_errors() -> int:
    """Most rejected members an import lists in its errors (``IMPORT_MAX_ERRORS``)."""
    return int(getattr(settings, "IMPORT_MAX_ERRORS", IMPORT_MAX_ERRORS))


def _clean_text(text: str, limit: int = _TEXT_MAX) -> str:
    """``text`` cut to ``limit`` characters, storable in any database text or JSON column: lone
    surrogates (undecodable bytes of tar member names) and NUL become backslash escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")[:limit]


@dataclass(frozen=True)
class ReportSource:
    """One report found in a folder or archive: a JSON file or a capture folder."""

    name: str
    load: Callable[[], dict]


@dataclass
class ReportListing:
    """The reports found at one path, in the order they are stored, and how the listing ended.

    ``members`` counts what was read: an archive's entries (files, folders, links), a folder's
    files. ``damage`` is "" unless the archive is truncated or corrupt; it then names the
    archive, the last member read before the damage and the reason (``apps.ingest.archive``),
    and ``sources`` holds what was listed before that point. ``limit`` is "" unless the listing
    stopped at ``import_max_members()``; it then says what was left unread. Iterating gives the
    sources; ``close()`` (or ``with``) releases the archive their loaders read from.
    """

    name: str
    sources: list[ReportSource] = field(default_factory=list)
    members: int = 0
    damage: str = ""
    limit: str = ""
    closer: Callable[[], None] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.sources)

    def __iter__(self):
        return iter(self.sources)

    def close(self) -> None:
        closer, self.closer = self.closer, None
        if closer is not None:
            closer()

    def __enter__(self) -> ReportListing:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def report_from_captures(files: dict[str, bytes], *, default_hostname: str, where: str) -> dict:
    """Build a report from a capture folder: ``<kind>.txt`` files and an optional ``hostname.txt``."""
    sections: dict[str, str] = {}
    for name, data in sorted(files.items()):
        kind = name[:-4]
        if name.endswith(".txt") and kind in KINDS:
            sections[kind] = data.decode("utf-8", errors="replace")
    hostname = files.get("hostname.txt", b"").decode("utf-8", errors="replace").strip() or default_hostname
    if not sections:
        raise ReportRejected(f"{where}: no <kind>.txt capture files", code="invalid_report")
    return {"schema": REPORT_SCHEMA, "hostname": hostname, "sections": sections,
            "meta": {"source": "capture folder"}, "unavailable": {}}


def _load_json_report(data: bytes, where: str) -> dict:
    report, _ = decode_report(data)
    return report


def _is_capture_name(name: str) -> bool:
    return name == "hostname.txt" or (name.endswith(".txt") and name[:-4] in KINDS)


def iter_report_sources(path: str | os.PathLike | io.IOBase, *, name: str | None = None) -> ReportListing:
    """List the reports in a folder, a ``.tar.gz``/``.tgz``/``.tar`` archive, or one JSON file.

    A ``*.json`` file is one agent report. A folder holding ``<kind>.txt`` files (and optionally
    ``hostname.txt``; else the folder name is the hostname) is one capture folder. Archives are
    read in memory, member by member; nothing is extracted to disk. At most
    ``import_max_members()`` members are read (``ReportListing.limit`` says when more were
    left). An archive is read and verified to the end of its compressed stream before this
    returns: damage is reported in ``ReportListing.damage``, not raised. ``name`` is the name
    messages use (default: the file or folder name). Raises ``OSError`` or
    ``tarfile.TarError`` only when the path cannot be read at all. Close the listing after use.
    """
    max_members = import_max_members()
    if isinstance(path, (str, os.PathLike)):
        p = Path(path)
        label = name or p.name
        if p.is_dir():
            return _sources_from_dir(p, label, max_members)
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no such file or folder")
        if p.suffix == ".json":
            return ReportListing(label, [ReportSource(label, lambda: _load_json_report(_read_limited(p), label))],
                                 members=1)
        return _sources_from_tar(archive.open_tar(p), label, max_members)
    label = name or Path(getattr(path, "name", "") or "archive").name
    return _sources_from_tar(archive.open_tar(fileobj=path), label, max_members)


def _sources_from_dir(root: Path, label: str, max_members: int) -> ReportListing:
    """The reports under a folder, reading at most ``max_members`` files (in sorted order)."""
    listing = ReportListing(label)
    last = ""
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        folder_path = Path(folder)
        rel = folder_path.relative_to(root)
        names = sorted(files)
        over = len(names) > max_members - listing.members
        if over:
            names = names[:max_members - listing.members]
        listing.members += len(names)
        if names:
            last = str(rel / names[-1])
        for name in names:
            if name.endswith(".json") and not name.startswith("."):
                fp = folder_path / name
                listing.sources.append(ReportSource(str(rel / name), lambda fp=fp, n=str(rel / name): _load_json_report(
                    _read_limited(fp), n)))
        captures = [n for n in names if _is_capture_name(n) and n != "hostname.txt"]
        if captures:
            where = str(rel) if str(rel) != "." else root.name

            def load(folder_path=folder_path, where=where) -> dict:
                data = {n: _read_limited(folder_path / n) for n in os.listdir(folder_path) if _is_capture_name(n)}
                return report_from_captures(data, default_hostname=folder_path.name, where=where)

            listing.sources.append(ReportSource(where + "/", load))
        if over:  # max_members >= 1, so at least one file was read: ``last`` names it
            listing.limit = (f"{label} holds more than {max_members} files (TOPOWEB_IMPORT_MAX_MEMBERS); "
                             f"files after {last} were not read")
            break
    return listing


def _read_limited(fp: Path) -> bytes:
    size = fp.stat().st_size
    if size > settings.MAX_REPORT_BYTES:
        raise ReportRejected(f"{size} bytes; the limit is {settings.MAX_REPORT_BYTES}", status=413, code="too_large")
    return fp.read_bytes()


def _sources_from_tar(tar: tarfile.TarFile, archive_name: str, max_members: int) -> ReportListing:
    """The reports of an open archive, in archive order, after ``archive.scan_tar`` has read and
    verified it. Sources are returned in the order their first member is stored, so that
    importing them reads the archive forwards once more (no rewind per member)."""
    scan = archive.scan_tar(tar, archive_name=archive_name, max_members=max_members)
    limit = settings.MAX_REPORT_BYTES

    def read(member: tarfile.TarInfo) -> bytes:
        if member.size > limit:
            raise ReportRejected(f"{member.size} bytes; the limit is {limit}", status=413, code="too_large")
        fh = tar.extractfile(member)
        return fh.read() if fh else b""

    entries: list[ReportSource | str] = []  # a JSON report, or the name of a capture folder
    folders: dict[str, list[tarfile.TarInfo]] = {}
    for m in scan.files:
        base = m.name.rsplit("/", 1)[-1]
        if base.startswith("._"):  # macOS resource forks in tarballs
            continue
        if base.endswith(".json"):
            entries.append(ReportSource(m.name, lambda m=m: _load_json_report(read(m), m.name)))
        elif _is_capture_name(base):
            folder = m.name.rsplit("/", 1)[0] if "/" in m.name else ""
            if folder not in folders:
                folders[folder] = []
                entries.append(folder)
            folders[folder].append(m)
    sources: list[ReportSource] = []
    for entry in entries:
        if isinstance(entry, ReportSource):
            sources.append(entry)
            continue
        items = folders[entry]
        if all(m.name.endswith("/hostname.txt") or m.name == "hostname.txt" for m in items):
            continue
        default_host = entry.rstrip("/").rsplit("/", 1)[-1] or Path(archive_name).name.split(".")[0]

        def load(items=items, folder=entry, default_host=default_host) -> dict:
            data = {m.name.rsplit("/", 1)[-1]: read(m) for m in items}
            return report_from_captures(data, default_hostname=default_host, where=folder or archive_name)

        sources.append(ReportSource((entry or archive_name) + "/", load))
    over = archive.over_limit_message(archive_name, max_members, scan.last_name) if scan.over_limit else ""
    return ReportListing(archive_name, sources, members=scan.count, damage=scan.damage, limit=over,
                         closer=tar.close)


@dataclass
class ImportSummary:
    """What one import did.

    ``errors`` lists (file, message) for the first ``max_errors`` rejected members;
    ``errors_omitted`` counts the rejected members past those. ``damage`` and ``limit`` are the
    listing's (see ``ReportListing``); ``status`` and ``describe()`` give the outcome in the
    words of ``ImportJob``.
    """

    total: int = 0
    created: int = 0
    duplicates: int = 0
    rejected: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)  # (file, message)
    errors_omitted: int = 0
    upload_ids: list[int] = field(default_factory=list)  # the uploads created
    damage: str = ""
    limit: str = ""
    max_errors: int = field(default_factory=import_max_errors)

    @property
    def processed(self) -> int:
        return self.created + self.duplicates + self.rejected

    def reject(self, name: str, message: str) -> None:
        """Count one rejected member; list it while fewer than ``max_errors`` are listed."""
        self.rejected += 1
        if len(self.errors) < self.max_errors:
            self.errors.append((_clean_text(name), _clean_text(message)))
        else:
            self.errors_omitted += 1

    @property
    def status(self) -> str:
        """``failed`` for a damaged archive, ``done_with_errors`` when members were rejected or
        left unread (member limit), else ``done``."""
        if self.damage:
            return ImportJob.Status.FAILED
        if self.rejected or self.limit:
            return ImportJob.Status.DONE_WITH_ERRORS
        return ImportJob.Status.DONE

    def describe(self) -> str:
        """One line: the damage or the limit when there is one, then the counts."""
        counts = (f"{self.created} new, {self.duplicates} already stored, {self.rejected} rejected "
                  f"of {self.total} reports")
        if self.damage:
            counts = "imported before the damage: " + counts
        return "; ".join([note for note in (self.damage, self.limit) if note] + [counts])


def import_reports(
    *,
    cluster: Cluster,
    path: str | os.PathLike | io.IOBase,
    user=None,
    progress: Callable[[str, ImportSummary], None] | None = None,
    sources: ReportListing | list[ReportSource] | None = None,
) -> ImportSummary:
    """Submit every report found at ``path`` (or in ``sources``, a listing already made) into
    ``cluster`` (via ``import``); one bad member never stops the rest.

    Whatever loading or submitting one member raises -- ``ReportRejected``, an unreadable or
    truncated member, ``RecursionError``, ``UnicodeError``, ``ValueError``, any other
    ``Exception`` but ``MemoryError`` and Celery's ``SoftTimeLimitExceeded``, which stop the
    import -- is recorded for that member (``ImportSummary.reject``) and the import goes on. Each member is submitted in a transaction of its own (a savepoint
    inside an outer one), so a database error undoes that member alone. ``progress`` is called
    after every member. A listing made here is closed here; one passed in is the caller's.
    """
    listing = iter_report_sources(path) if sources is None else sources
    try:
        summary = ImportSummary(total=len(listing), damage=getattr(listing, "damage", ""),
                                limit=getattr(listing, "limit", ""))
        for source in listing:
            try:
                upload, created = _import_one(cluster=cluster, source=source, user=user)
            except (MemoryError, SoftTimeLimitExceeded):  # the process or the task is out of room or time
                raise
            except Exception as exc:
                summary.reject(source.name, _member_error(source.name, exc))
            else:
                if created:
                    summary.created += 1
                    summary.upload_ids.append(upload.pk)
                else:
                    summary.duplicates += 1
            if progress is not None:
                progress(source.name, summary)
    finally:
        if sources is None:
            listing.close()
    return summary


def _import_one(*, cluster: Cluster, source: ReportSource, user) -> tuple[Upload, bool]:
    """Load one source and submit it in its own transaction; raises what either raises."""
    report = source.load()
    with transaction.atomic():
        return submit_report(cluster=cluster, report=report, via=Upload.Via.IMPORT, user=user,
                             source_name=_clean_text(source.name))


def _member_error(name: str, exc: Exception) -> str:
    """The reason recorded for a member whose import raised ``exc``."""
    if isinstance(exc, ReportRejected):
        return exc.message
    if isinstance(exc, archive.STREAM_ERRORS):
        return f"cannot read: {archive.describe_stream_error(exc)}"
    log.warning("import of %s failed: %s: %s", _clean_text(name), type(exc).__name__, _clean_text(str(exc)))
    return f"cannot import: {type(exc).__name__}: {exc}"


def import_errors_omitted(job: ImportJob) -> int:
    """Rejected members of a finished job that ``job.errors`` does not list (past the cap); 0
    while the job runs (its error list is saved at most every ``ERRORS_WRITE_EVERY`` members)."""
    if job.finished_at is None:
        return 0
    return max(0, job.failed_count - len(job.errors or []))


def _import_dir() -> Path:
    return Path(getattr(settings, "IMPORT_UPLOAD_DIR", settings.VAR_DIR / "imports"))


def start_import(*, cluster: Cluster, path_or_fileobj, user) -> ImportJob:
    """Queue a bulk import and return its ``ImportJob`` (poll ``GET /api/v1/imports/{id}``).

    ``path_or_fileobj`` is a server-side path (folder or archive) or an uploaded file object
    (e.g. Django's ``UploadedFile``); a file object is copied under ``var/imports/`` first so a
    worker can read it after the request ends (workers must share that folder).
    """
    if isinstance(path_or_fileobj, (str, os.PathLike)):
        p = Path(path_or_fileobj)
        if not p.exists():
            raise FileNotFoundError(f"{p}: no such file or folder")
        stored, name = str(p.resolve()), p.name
    else:
        name = Path(getattr(path_or_fileobj, "name", "") or "upload.tar.gz").name
        folder = _import_dir()
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{uuid.uuid4().hex}-{re.sub(r'[^A-Za-z0-9._-]', '_', name)[:100]}"
        with open(target, "wb") as out:
            if hasattr(path_or_fileobj, "chunks"):
                for chunk in path_or_fileobj.chunks():
                    out.write(chunk)
            else:
                shutil.copyfileobj(path_or_fileobj, out)
        stored = str(target)
    with transaction.atomic():
        job = ImportJob.objects.create(cluster=cluster, user=user, source_name=name, stored_path=stored)
        transaction.on_commit(lambda: enqueue_import(job.pk))
    return job


def enqueue_import(job_id: int) -> bool:
    from apps.ingest.tasks import run_import_job_task

    if _eager():
        run_import_job_task.apply_async((job_id,))
        return True
    try:
        run_import_job_task.apply_async((job_id,), retry=True, retry_policy=_PUBLISH_RETRY)
    except Exception:
        log.exception("could not enqueue import job %s; it stays 'pending' for sweep_uploads", job_id)
        return False
    return True


def run_import_job(job_id: int) -> None:
    """Run a queued import to its end; a job that is not ``pending`` (started or finished) is left alone.

    The job always ends with ``finished_at`` set and one of: ``done`` (every member imported or
    already stored), ``done_with_errors`` (some members rejected -- listed in ``errors`` -- or
    members past ``TOPOWEB_IMPORT_MAX_MEMBERS`` left unread, said in ``message``), ``failed``
    (the archive cannot be read, or is truncated or corrupt -- the reports before the damage
    are imported and ``message`` names where it broke -- or the import itself raised:
    ``message`` says what). Every ``Exception`` is caught and logged here; any other
    ``BaseException`` (a worker shutting down) marks the job ``failed`` and propagates.
    Progress (counters, errors) is saved as ``_JobProgress`` says.
    """
    if not ImportJob.objects.filter(pk=job_id, status=ImportJob.Status.PENDING).update(
        status=ImportJob.Status.RUNNING, started_at=timezone.now()
    ):
        return
    job = None
    progress = _JobProgress(job_id)
    try:
        job = ImportJob.objects.select_related("cluster", "user").get(pk=job_id)
        status, message = _run_import(job, progress)
    except Exception as exc:
        log.exception("import job %s stopped on an internal error", job_id)
        status, message = ImportJob.Status.FAILED, progress.crash_message(exc)
    except BaseException as exc:
        progress.finish(ImportJob.Status.FAILED, progress.crash_message(exc, interrupted=True))
        raise
    finally:
        if job is not None:
            _discard_stored(job)
    progress.finish(status, message)


def _run_import(job: ImportJob, progress: _JobProgress) -> tuple[str, str]:
    """List and import one job's archive or folder; (final status, message)."""
    try:
        listing = iter_report_sources(job.stored_path, name=job.source_name)
    except archive.STREAM_ERRORS as exc:
        return ImportJob.Status.FAILED, f"cannot read {job.source_name}: {archive.describe_stream_error(exc)}"
    with listing:
        if not listing and not (listing.damage or listing.limit):
            return ImportJob.Status.FAILED, (f"{job.source_name}: no *.json reports and no folders of "
                                             "<kind>.txt captures found")
        progress.start(len(listing))
        summary = import_reports(cluster=job.cluster, path=job.stored_path, user=job.user, progress=progress,
                                 sources=listing)
    return summary.status, summary.describe()


class _JobProgress:
    """Saves an import job's progress as ``import_reports`` goes: the counters in one small
    UPDATE at most every ``PROGRESS_WRITE_SECONDS``; the error list with them, only when it
    changed and at most every ``ERRORS_WRITE_EVERY`` members (it holds at most
    ``import_max_errors()`` entries); everything, with the final status, in ``finish``."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.total = 0
        self.summary: ImportSummary | None = None
        self._errors_saved = 0  # entries of the error list in the database
        self._since_errors_saved = 0  # members since the error list was last saved
        self._saved_at = float("-inf")  # time.monotonic() of the last progress write

    def start(self, total: int) -> None:
        self.total = total
        ImportJob.objects.filter(pk=self.job_id).update(total=total)

    def __call__(self, name: str, summary: ImportSummary) -> None:
        self.summary = summary
        self._since_errors_saved += 1
        now = time.monotonic()
        if now - self._saved_at < PROGRESS_WRITE_SECONDS:
            return
        self._saved_at = now
        fields = self._counters()
        if len(summary.errors) != self._errors_saved and self._since_errors_saved >= ERRORS_WRITE_EVERY:
            fields.update(self._errors())
        ImportJob.objects.filter(pk=self.job_id).update(**fields)

    def _counters(self) -> dict:
        s = self.summary
        return {"processed": s.processed, "created_count": s.created, "duplicate_count": s.duplicates,
                "failed_count": s.rejected}

    def _errors(self) -> dict:
        self._errors_saved, self._since_errors_saved = len(self.summary.errors), 0
        return {"errors": [{"file": f, "error": e} for f, e in self.summary.errors]}

    def crash_message(self, exc: BaseException, *, interrupted: bool = False) -> str:
        done = self.summary.processed if self.summary is not None else 0
        if isinstance(exc, SoftTimeLimitExceeded):
            return (f"the import ran past the task time limit (TOPOWEB_TASK_SOFT_TIME_LIMIT, "
                    f"{getattr(settings, 'TASK_SOFT_TIME_LIMIT', '?')} s) after {done} of {self.total} reports")
        what = "was interrupted" if interrupted else "stopped on an internal error"
        return f"the import {what} after {done} of {self.total} reports: {type(exc).__name__}: {exc}"

    def finish(self, status: str, message: str) -> None:
        """Save the final status, message, counters and error list; never raises. After a
        failed write (a database error, a value the database refuses) the status alone is
        written once more, on a fresh connection where one may be opened: a job never stays
        ``running`` while the database takes writes."""
        end = {"status": status, "message": _clean_text(message, 4000), "finished_at": timezone.now()}
        fields = dict(end)
        if self.summary is not None:
            fields.update(self._counters())
            fields.update(self._errors())
        try:
            ImportJob.objects.filter(pk=self.job_id).update(**fields)
            return
        except Exception:
            log.exception("could not save the end of import job %s; saving its status alone", self.job_id)
        try:
            if not connection.in_atomic_block:
                connection.close()
            ImportJob.objects.filter(pk=self.job_id).update(**end)
        except Exception:
            log.exception("could not save the end of import job %s; it stays running", self.job_id)


def _discard_stored(job: ImportJob) -> None:
    """Delete an archive we copied for the worker (never a path the user pointed at)."""
    try:
        p = Path(job.stored_path)
        if p.is_file() and p.parent.resolve() == _import_dir().resolve():
            p.unlink()
    except OSError:
        log.warning("could not delete %s", job.stored_path)
