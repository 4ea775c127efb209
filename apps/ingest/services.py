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
        ``.details``) when it cannot be accepted. ``created`` is False when the same report
        (sha256 of canonical JSON of hostname + sections) is already stored in that cluster;
        the existing upload is then returned. Processing is enqueued after commit; a broker
        failure is logged and leaves the upload ``received`` for the sweeper.
    ``process_upload(upload_id) -> str``  the upload's status afterwards; idempotent.
    ``rebuild_snapshots(*, cluster=None, host=None, progress=None) -> RebuildSummary``
    ``sweep_uploads(*, older_than_seconds=None) -> list[int]``  ids re-enqueued

Bulk import
    ``import_reports(*, cluster, path, user=None, progress=None) -> ImportSummary``  (synchronous)
    ``start_import(*, cluster, path_or_fileobj, user) -> ImportJob``  (background, pollable)
    ``run_import_job(job_id) -> None``  (the worker side of ``start_import``)

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
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from pathlib import Path
from typing import Any, Callable

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.domain.errors import ParseError
from apps.domain.parsers import KINDS
from apps.ingest.models import AgentToken, Cluster, Host, ImportJob, Snapshot, Upload

log = logging.getLogger(__name__)

REPORT_SCHEMA = "topoweb.report/1"
TOKEN_PREFIX_LEN = 11  # "tw_" + 8 hex digits
HOSTNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
CLUSTER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SEVERITIES = ("CRIT", "HIGH", "MED", "LOW", "INFO")


def processing_stale_seconds() -> int:
    """After this long in ``processing`` an upload is presumed orphaned (its worker died)."""
    return int(getattr(settings, "PROCESSING_STALE_SECONDS", max(600, settings.SWEEP_AFTER_SECONDS)))


# --------------------------------------------------------------------------------------------
# Enrollment


def create_cluster(*, name: str, description: str = "") -> Cluster:
    if not CLUSTER_NAME_RE.match(name or ""):
        raise ValueError(
            f"cluster name {name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
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


def _field_error(field_name: str, message: str) -> ReportRejected:
    return ReportRejected(f"{field_name}: {message}", code="invalid_field", field=field_name)


def decode_report(raw: bytes | str) -> tuple[dict, str]:
    """Check size and JSON syntax of a received body; return (decoded dict, text as received)."""
    size = len(raw.encode("utf-8")) if isinstance(raw, str) else len(raw)
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
    if not isinstance(data, dict):
        raise ReportRejected(
            f"report must be a JSON object, got {type(data).__name__}", code="invalid_field", field="(root)"
        )
    return data, text


def validate_envelope(data: dict) -> Envelope:
    """Check the shape of a decoded report; every error names the field at fault."""
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

    collected_at = data.get("collected_at")
    if collected_at is not None:
        if not isinstance(collected_at, str):
            raise _field_error("collected_at", "must be an ISO 8601 time string, e.g. 2025-01-31T12:00:00Z")
        try:
            collected_at = datetime.fromisoformat(collected_at.strip().replace("Z", "+00:00"))
        except ValueError:
            raise _field_error(
                "collected_at", f"{collected_at[:40]!r} is not an ISO 8601 time, e.g. 2025-01-31T12:00:00Z"
            ) from None
        if collected_at.tzinfo is None:
            collected_at = collected_at.replace(tzinfo=dt_timezone.utc)

    agent_version = data.get("agent_version", "") or ""
    if not isinstance(agent_version, str):
        raise _field_error("agent_version", "must be a string")

    return Envelope(
        hostname=hostname, sections=dict(sections), unavailable=dict(unavailable), meta=meta,
        collected_at=collected_at, agent_version=agent_version[:40],
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
    size = len(raw.encode("utf-8")) if not isinstance(report, (bytes, bytearray)) else len(report)
    env = validate_envelope(data)
    digest = content_hash(env.hostname, env.sections)
    now = timezone.now()

    # The host first (a resent report names a known host, whose last_seen_at it refreshes too):
    # one upsert, INSERT for a new host or UPDATE of last_seen_at for a known one.
    host_id = _insert_on_conflict(Host(cluster=cluster, hostname=env.hostname, last_seen_at=now),
                          conflict=("cluster_id", "hostname"), update=("last_seen_at",))
    upload = Upload(cluster=cluster, host_id=host_id, via=via, token=token, user=user, source_name=source_name[:500],
                    raw=raw, size_bytes=size, content_hash=digest, collected_at=env.collected_at,
                    agent_version=env.agent_version, received_at=now)
    # One INSERT ... ON CONFLICT DO NOTHING: a report already stored in this cluster (resent, or
    # racing in from another request; unique cluster + content_hash) inserts nothing.
    upload.pk = _insert_on_conflict(upload, conflict=("cluster_id", "content_hash"))
    if upload.pk is None:
        existing = Upload.objects.filter(cluster=cluster, content_hash=digest).order_by().first()
        if existing is None:  # pragma: no cover - the conflicting row cannot vanish: uploads are never deleted
            raise IntegrityError(f"upload of {env.hostname} conflicted with a row that is gone")
        return existing, False
    upload._state.adding = False
    # Enqueue only after COMMIT, or the worker may not see the row yet (at once in autocommit).
    transaction.on_commit(lambda: enqueue_upload(upload.pk))
    return upload, True


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


def _store_outcome(upload: Upload, outcome: _Outcome, *, from_status: str | None) -> str:
    """Write the result of an analysis; ``from_status`` guards against a concurrent claimant."""
    now = timezone.now()
    with transaction.atomic():
        rows = Upload.objects.filter(pk=upload.pk)
        if from_status is not None:
            rows = rows.filter(status=from_status)
        if outcome.error is not None:
            Snapshot.objects.filter(upload_id=upload.pk).delete()  # derived from a report that no longer reads
            rows.update(status=Upload.Status.FAILED, error=outcome.error, finished_at=now)
            return Upload.Status.FAILED
        fields = {"host_id": upload.host_id, "collected_at": upload.collected_at or upload.received_at,
                  **_snapshot_fields(outcome.document)}
        # One INSERT ... ON CONFLICT (upload_id) DO UPDATE (a rebuild replaces the snapshot), with
        # the document as the JSON text _analyze already made (update_or_create took a locking
        # SELECT, a savepoint and the INSERT, and serialised the document again).
        snapshot = Snapshot(upload_id=upload.pk, **fields)
        _insert_on_conflict(snapshot, conflict=("upload_id",),
                    update=tuple(Snapshot._meta.get_field(name).column for name in ("built_at", *fields)),
                    prepared={"document": outcome.document_json})
        rows.update(status=Upload.Status.DONE, error=None, finished_at=now)
    return Upload.Status.DONE


def _claim(upload_id: int, now: datetime) -> Upload | None:
    """``received`` (or stale ``processing``) -> ``processing``, returning what processing needs
    (an unsaved Upload with pk, host_id, raw, collected_at, received_at) in the same statement;
    None when another worker holds it or it is finished."""
    table = connection.ops.quote_name(Upload._meta.db_table)
    stale = now - timedelta(seconds=processing_stale_seconds())
    adapt = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {table} SET status = %s, attempts = attempts + 1, started_at = %s "
            "WHERE id = %s AND (status = %s OR (status = %s AND started_at < %s)) "
            "RETURNING host_id, raw, collected_at, received_at",
            [Upload.Status.PROCESSING, adapt(now), upload_id, Upload.Status.RECEIVED, Upload.Status.PROCESSING,
             adapt(stale)],
        )
        row = cur.fetchone()
    if row is None:
        return None
    host_id, raw, collected_at, received_at = row
    convert = getattr(connection.ops, "convert_datetimefield_value", None)  # SQLite returns text
    if convert is not None:
        collected_at, received_at = (convert(v, None, connection) if v is not None else None
                                     for v in (collected_at, received_at))
    return Upload(pk=upload_id, host_id=host_id, raw=raw, collected_at=collected_at, received_at=received_at)


def process_upload(upload_id: int) -> str:
    """Parse and analyse one upload and store its snapshot; safe to call any number of times.

    The upload is claimed with a conditional UPDATE (``received`` -> ``processing``), so two
    workers given the same id never both process it, and a redelivered task for a ``done`` or
    ``failed`` upload does nothing. An upload left ``processing`` longer than
    ``processing_stale_seconds()`` (its worker died) may be claimed again.
    """
    now = timezone.now()
    upload = _claim(upload_id, now)
    if upload is None:
        status = Upload.objects.filter(pk=upload_id).values_list("status", flat=True).first()
        return status or "missing"
    # Parse outside any transaction: a 1 MB lspci -vvv must not hold row locks.
    outcome = _analyze(upload.raw)
    return _store_outcome(upload, outcome, from_status=Upload.Status.PROCESSING)


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
    """Re-enqueue uploads stuck ``received`` (broker down at submit time) or orphaned ``processing``.

    An upload is picked when it was received, and last re-enqueued, more than
    ``older_than_seconds`` (default ``SWEEP_AFTER_SECONDS``) ago. Pending import jobs of the same
    age are re-enqueued too. Returns the upload ids handed to the broker.
    """
    age = settings.SWEEP_AFTER_SECONDS if older_than_seconds is None else older_than_seconds
    now = timezone.now()
    cutoff = now - timedelta(seconds=age)
    stale = now - timedelta(seconds=processing_stale_seconds())
    orphaned = list(
        Upload.objects.filter(status=Upload.Status.PROCESSING, started_at__lt=stale).values_list("pk", flat=True)
    )
    if orphaned:
        Upload.objects.filter(pk__in=orphaned, status=Upload.Status.PROCESSING, started_at__lt=stale).update(
            status=Upload.Status.RECEIVED
        )
    ids = list(
        Upload.objects.filter(status=Upload.Status.RECEIVED, received_at__lt=cutoff)
        .filter(Q(last_enqueued_at__isnull=True) | Q(last_enqueued_at__lt=cutoff))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    ids = sorted(set(ids) | set(orphaned))
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
    if ids:
        log.info("sweep_uploads: re-enqueued %d of %d stuck uploads", len(sent), len(ids))
    return sent


# --------------------------------------------------------------------------------------------
# Bulk import


@dataclass(frozen=True)
class ReportSource:
    """One report found in a folder or archive: a JSON file or a capture folder."""

    name: str
    load: Callable[[], dict]


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


def iter_report_sources(path: str | os.PathLike | io.IOBase) -> list[ReportSource]:
    """List the reports in a folder, a ``.tar.gz``/``.tgz``/``.tar`` archive, or one JSON file.

    A ``*.json`` file is one agent report. A folder holding ``<kind>.txt`` files (and optionally
    ``hostname.txt``; else the folder name is the hostname) is one capture folder. Archives are
    read in memory, member by member; nothing is extracted to disk.
    """
    if isinstance(path, (str, os.PathLike)):
        p = Path(path)
        if p.is_dir():
            return _sources_from_dir(p)
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no such file or folder")
        if p.suffix == ".json":
            return [ReportSource(p.name, lambda: _load_json_report(p.read_bytes(), p.name))]
        return _sources_from_tar(tarfile.open(p, "r:*"), p.name)
    return _sources_from_tar(tarfile.open(fileobj=path, mode="r:*"), getattr(path, "name", "archive"))


def _sources_from_dir(root: Path) -> list[ReportSource]:
    sources: list[ReportSource] = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        folder_path = Path(folder)
        rel = folder_path.relative_to(root)
        for name in sorted(files):
            if name.endswith(".json") and not name.startswith("."):
                fp = folder_path / name
                sources.append(ReportSource(str(rel / name), lambda fp=fp, n=str(rel / name): _load_json_report(
                    _read_limited(fp), n)))
        captures = [n for n in files if _is_capture_name(n) and n != "hostname.txt"]
        if captures:
            where = str(rel) if str(rel) != "." else root.name

            def load(folder_path=folder_path, where=where) -> dict:
                data = {n: _read_limited(folder_path / n) for n in os.listdir(folder_path) if _is_capture_name(n)}
                return report_from_captures(data, default_hostname=folder_path.name, where=where)

            sources.append(ReportSource(where + "/", load))
    return sources


def _read_limited(fp: Path) -> bytes:
    size = fp.stat().st_size
    if size > settings.MAX_REPORT_BYTES:
        raise ReportRejected(f"{size} bytes; the limit is {settings.MAX_REPORT_BYTES}", status=413, code="too_large")
    return fp.read_bytes()


def _sources_from_tar(tar: tarfile.TarFile, archive_name: str) -> list[ReportSource]:
    members = [m for m in tar.getmembers() if m.isfile()]
    limit = settings.MAX_REPORT_BYTES

    def read(member: tarfile.TarInfo) -> bytes:
        if member.size > limit:
            raise ReportRejected(f"{member.size} bytes; the limit is {limit}", status=413, code="too_large")
        fh = tar.extractfile(member)
        return fh.read() if fh else b""

    sources: list[ReportSource] = []
    folders: dict[str, list[tarfile.TarInfo]] = {}
    for m in sorted(members, key=lambda m: m.name):
        base = m.name.rsplit("/", 1)[-1]
        if base.startswith("._"):  # macOS resource forks in tarballs
            continue
        if base.endswith(".json"):
            sources.append(ReportSource(m.name, lambda m=m: _load_json_report(read(m), m.name)))
        elif _is_capture_name(base):
            folders.setdefault(m.name.rsplit("/", 1)[0] if "/" in m.name else "", []).append(m)
    for folder, items in sorted(folders.items()):
        if all(m.name.endswith("/hostname.txt") or m.name == "hostname.txt" for m in items):
            continue
        default_host = folder.rstrip("/").rsplit("/", 1)[-1] or Path(archive_name).name.split(".")[0]

        def load(items=items, folder=folder, default_host=default_host) -> dict:
            data = {m.name.rsplit("/", 1)[-1]: read(m) for m in items}
            return report_from_captures(data, default_hostname=default_host, where=folder or archive_name)

        sources.append(ReportSource((folder or archive_name) + "/", load))
    return sources


@dataclass
class ImportSummary:
    total: int = 0
    created: int = 0
    duplicates: int = 0
    rejected: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)  # (file, message)
    upload_ids: list[int] = field(default_factory=list)  # the uploads created


def import_reports(
    *,
    cluster: Cluster,
    path: str | os.PathLike | io.IOBase,
    user=None,
    progress: Callable[[str, ImportSummary], None] | None = None,
    sources: list[ReportSource] | None = None,
) -> ImportSummary:
    """Submit every report found at ``path`` into ``cluster`` (via ``import``); one bad file never stops the rest."""
    if sources is None:
        sources = iter_report_sources(path)
    summary = ImportSummary(total=len(sources))
    for source in sources:
        try:
            report = source.load()
            upload, created = submit_report(
                cluster=cluster, report=report, via=Upload.Via.IMPORT, user=user, source_name=source.name
            )
        except ReportRejected as exc:
            summary.rejected += 1
            summary.errors.append((source.name, exc.message))
        except (OSError, tarfile.TarError, EOFError) as exc:
            summary.rejected += 1
            summary.errors.append((source.name, f"cannot read: {exc}"))
        else:
            if created:
                summary.created += 1
                summary.upload_ids.append(upload.pk)
            else:
                summary.duplicates += 1
        if progress is not None:
            progress(source.name, summary)
    return summary


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
    """Run a queued import, saving progress as it goes; a job already started does nothing."""
    now = timezone.now()
    if not ImportJob.objects.filter(pk=job_id, status=ImportJob.Status.PENDING).update(
        status=ImportJob.Status.RUNNING, started_at=now
    ):
        return
    job = ImportJob.objects.select_related("cluster").get(pk=job_id)
    try:
        sources = iter_report_sources(job.stored_path)
    except (OSError, tarfile.TarError, EOFError) as exc:
        ImportJob.objects.filter(pk=job_id).update(
            status=ImportJob.Status.FAILED, message=f"cannot read {job.source_name}: {exc}", finished_at=timezone.now()
        )
        _discard_stored(job)
        return
    ImportJob.objects.filter(pk=job_id).update(total=len(sources))

    def progress(name: str, s: ImportSummary) -> None:
        ImportJob.objects.filter(pk=job_id).update(
            processed=s.created + s.duplicates + s.rejected, created_count=s.created,
            duplicate_count=s.duplicates, failed_count=s.rejected,
            errors=[{"file": f, "error": e} for f, e in s.errors],
        )

    summary = import_reports(cluster=job.cluster, path=job.stored_path, user=job.user, progress=progress,
                             sources=sources)
    ImportJob.objects.filter(pk=job_id).update(
        status=ImportJob.Status.DONE, finished_at=timezone.now(),
        message=(f"{summary.created} new, {summary.duplicates} already stored, "
                 f"{summary.rejected} rejected of {summary.total} reports"),
    )
    _discard_stored(job)


def _discard_stored(job: ImportJob) -> None:
    """Delete an archive we copied for the worker (never a path the user pointed at)."""
    try:
        p = Path(job.stored_path)
        if p.is_file() and p.parent.resolve() == _import_dir().resolve():
            p.unlink()
    except OSError:
        log.warning("could not delete %s", job.stored_path)
