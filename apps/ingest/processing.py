"""Processing stored uploads into snapshots: claims with leases, poison reports, rebuilds, sweeps.

``process_upload(upload_id) -> str``  the upload's status afterwards; idempotent. The upload is
    claimed with one conditional UPDATE that sets a lease (``PROCESSING_LEASE_SECONDS``, longer
    than the Celery hard time limit): nobody else claims it while the lease holds; after
    ``MAX_ATTEMPTS`` claims that never finished it is failed with the reason.
``rebuild_snapshots(*, cluster=None, host=None, progress=None) -> RebuildSummary``
``sweep_uploads(*, older_than_seconds=None) -> list[int]``  ids re-enqueued (stuck ``received``,
    or ``processing`` with an expired lease); also ends import jobs whose worker died.
``prune_uploads(*, days=None, dry_run=False) -> PruneSummary``  empties the raw text of unchanged
    uploads older than ``RAW_RETENTION_DAYS``.

Unchanged reports: an upload whose document (its JSON text, with the report's counter sections
that runs quote and the InfiniBand sections the fabric join reads, ``HASHED_SECTIONS``; hashed:
``Snapshot.document_hash``) equals the host's latest snapshot's creates no snapshot. It ends ``done`` with ``same_as`` that
snapshot, whose ``confirmed_at`` and the host's ``last_seen_at`` move to the report's time. Any
difference in what the document derives from (a port state, a link width, a counter finding)
makes a new snapshot. A host reporting the same hardware every hour keeps one snapshot.

A snapshot that ``process_upload`` stores re-checks the runs that waited for its host's layout
(``apps.ingest.runs.recheck_after_snapshot``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.domain import verdict
from apps.domain.errors import ParseError
from apps.domain.parsers import KINDS
from apps.domain.run_node import NODE_KINDS
from apps.ingest.fabrics import IB_SECTIONS

# Sections read from a snapshot's raw upload rather than its document: a report that differs in them
# is not the same snapshot (runs quote the counters; the fabric join reads the GUIDs).
HASHED_SECTIONS = tuple(dict.fromkeys(NODE_KINDS + IB_SECTIONS))
from apps.ingest import services
from apps.ingest.imports import enqueue_import
from apps.ingest.models import Cluster, Host, ImportJob, Snapshot, Upload
from apps.ingest.reports import ReportRejected, validate_envelope

log = logging.getLogger(__name__)



# --------------------------------------------------------------------------------------------
# Processing


@dataclass
class _Outcome:
    document: dict | None = None
    error: dict | None = None
    document_json: str | None = None  # ``document`` serialised (once: it is what the database stores)
    evidence: dict[str, str] = field(default_factory=dict)  # the report's HASHED_SECTIONS

    @property
    def document_hash(self) -> str:
        """sha256 of what a snapshot stands for: its document's JSON text and the report's evidence
        sections (``HASHED_SECTIONS``: counters that runs quote from the snapshot's upload, and the
        InfiniBand sections whose port GUIDs the fabric join reads from it)."""
        if not self.document_json:
            return ""
        digest = hashlib.sha256(self.document_json.encode())
        for kind in sorted(self.evidence):
            digest.update(b"\0" + kind.encode() + b"\0" + self.evidence[kind].encode())
        return digest.hexdigest()


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
    return _Outcome(document=document, document_json=text,
                    evidence={k: v for k, v in env.sections.items() if k in HASHED_SECTIONS})


def _json_safe(value: Any) -> Any:
    """Replace NaN/Infinity (not JSON; PostgreSQL rejects them) with None, deeply."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


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
        "nic_models": verdict.nic_models(document),
    }


def _store_outcome(upload: Upload, outcome: _Outcome, *, from_status: str | None,
                   attempt: int | None = None) -> str:
    """``_write_outcome``, then the host's layout group brought up to date (``layouts.host_changed``)."""
    from apps.ingest import layouts, nic_roles

    status, written = _write_outcome(upload, outcome, from_status=from_status, attempt=attempt)
    carried = False
    if status == Upload.Status.DONE:
        carried = nic_roles.carry_forward(upload.pk)  # the user's NIC roles, kept for the NICs still there
    # the document just written names the host's platform without reading it back (unless roles
    # carried forward have rewritten it)
    known = {written: layouts.document_facts(outcome.document)} if written is not None and not carried else None
    layouts.host_changed(upload.host_id, known)
    return status


def _write_outcome(upload: Upload, outcome: _Outcome, *, from_status: str | None,
                   attempt: int | None = None) -> tuple[str, int | None]:
    """Write the result of an analysis; the upload's status afterwards and the id of the snapshot
    written (None when none was: a failure, an unchanged report, a concurrent claimant).

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
                return _current_status(upload.pk), None
            Snapshot.objects.filter(upload_id=upload.pk).delete()  # derived from a report that no longer reads
            return Upload.Status.FAILED, None
        digest = outcome.document_hash
        seen_at = upload.collected_at or upload.received_at
        same = _unchanged_of(upload, digest)
        if same is not None:
            if not rows.update(status=Upload.Status.DONE, error=None, finished_at=now, lease_expires_at=None,
                               same_as_id=same):
                return _current_status(upload.pk), None
            _confirm(same, upload.host_id, seen_at)
            Snapshot.objects.filter(upload_id=upload.pk).delete()  # a rebuild found it equal again
            return Upload.Status.DONE, None
        if not rows.update(status=Upload.Status.DONE, error=None, finished_at=now, lease_expires_at=None,
                           same_as_id=None):
            return _current_status(upload.pk), None
        fields = {"host_id": upload.host_id, "collected_at": seen_at, "document_hash": digest,
                  **_snapshot_fields(outcome.document)}
        # One INSERT ... ON CONFLICT (upload_id) DO UPDATE (a rebuild replaces the snapshot), with
        # the document as the JSON text _analyze already made (update_or_create took a locking
        # SELECT, a savepoint and the INSERT, and serialised the document again).
        snapshot = Snapshot(upload_id=upload.pk, **fields)
        snapshot_id = services.insert_on_conflict(snapshot, conflict=("upload_id",),
                    update=tuple(Snapshot._meta.get_field(name).column for name in ("built_at", *fields)),
                    prepared={"document": outcome.document_json})
    return Upload.Status.DONE, snapshot_id


def _unchanged_of(upload: Upload, digest: str) -> int | None:
    """The id of the snapshot this upload's document repeats, or None (then it makes its own).

    A new upload is compared with its host's latest snapshot (by ``collected_at``). An upload
    already ``unchanged`` that is analysed again (``rebuild_snapshots``) is compared with the
    snapshot it pointed at; one that had its own snapshot keeps it (a rebuild never merges)."""
    if not digest:
        return None
    if upload.status == Upload.Status.DONE and upload.same_as_id is None:
        return None  # a rebuild of an upload that made a snapshot
    if upload.status == Upload.Status.DONE:
        latest = Snapshot.objects.filter(pk=upload.same_as_id).values("pk", "document_hash").first()
    else:
        latest = (Snapshot.objects.filter(host_id=upload.host_id).exclude(upload_id=upload.pk)
                  .order_by("-collected_at", "-id").values("pk", "document_hash").first())
    return latest["pk"] if latest is not None and latest["document_hash"] == digest else None


def _confirm(snapshot_id: int, host_id: int, seen_at: datetime) -> None:
    """A report of the same layout was seen at ``seen_at``: the snapshot's ``confirmed_at`` and the
    host's ``last_seen_at`` move forward to it (never back)."""
    Snapshot.objects.filter(pk=snapshot_id).filter(Q(confirmed_at__isnull=True) | Q(confirmed_at__lt=seen_at)) \
        .update(confirmed_at=seen_at)
    Host.objects.filter(pk=host_id).filter(Q(last_seen_at__isnull=True) | Q(last_seen_at__lt=seen_at)) \
        .update(last_seen_at=seen_at)


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
    status = _store_outcome(upload, outcome, from_status=Upload.Status.PROCESSING, attempt=upload.attempts)
    if status == Upload.Status.DONE:
        _recheck_runs(upload.host_id)
    return status


def _recheck_runs(host_id: int) -> None:
    """Check again the runs that waited for this host's layout (``runs.recheck_after_snapshot``);
    a failure there is logged and never fails the upload."""
    from apps.ingest import runs

    try:
        runs.recheck_after_snapshot(host_id)
    except Exception:
        log.exception("re-checking the runs of host %s failed", host_id)


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
    processing right now are skipped. Raw uploads are never changed; ones ``prune_uploads``
    emptied (unchanged re-reports past the retention) are skipped and keep pointing at their
    snapshot.
    """
    uploads = Upload.objects.all()
    if cluster is not None:
        uploads = uploads.filter(cluster=cluster)
    if host is not None:
        uploads = uploads.filter(host=host)
    summary = RebuildSummary()
    for upload in uploads.select_related("host").order_by("pk").iterator(chunk_size=50):
        summary.total += 1
        if upload.status == Upload.Status.PROCESSING or upload.raw_pruned_at is not None:
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
        if services.enqueue_upload(upload_id):
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


@dataclass
class PruneSummary:
    uploads: int = 0  # raw texts emptied (or, with dry_run, that would be)
    bytes_freed: int = 0  # their size as received
    kept_changed: int = 0  # uploads past the retention kept whole: they made (or failed to make) a snapshot
    days: int = 0


def prune_uploads(*, days: int | None = None, dry_run: bool = False, now: datetime | None = None) -> PruneSummary:
    """Empty the raw text of uploads received more than ``days`` (default ``RAW_RETENTION_DAYS``;
    0 keeps everything) ago that created no snapshot: ``done`` uploads with ``same_as`` (unchanged
    re-reports of a layout already stored). An upload that created or changed a layout, a failed
    one, or one still waiting is never touched. The row stays (status, hash, size, which snapshot
    it confirmed); ``raw`` becomes "" and ``raw_pruned_at`` is set."""
    days = settings.RAW_RETENTION_DAYS if days is None else days
    summary = PruneSummary(days=days)
    if days <= 0:
        return summary
    cutoff = (now or timezone.now()) - timedelta(days=days)
    old = Upload.objects.filter(received_at__lt=cutoff, raw_pruned_at__isnull=True)
    prunable = old.filter(status=Upload.Status.DONE, same_as__isnull=False, snapshot__isnull=True)
    summary.kept_changed = old.exclude(pk__in=prunable.values("pk")).count()
    ids = list(prunable.order_by("pk").values_list("pk", "size_bytes"))
    summary.uploads = len(ids)
    summary.bytes_freed = sum(size for _, size in ids)
    if dry_run or not ids:
        return summary
    stamp = timezone.now()
    for start in range(0, len(ids), 1000):
        chunk = [pk for pk, _ in ids[start:start + 1000]]
        # the same conditions again: an upload re-processed meanwhile into a snapshot is kept
        Upload.objects.filter(pk__in=chunk, status=Upload.Status.DONE, same_as__isnull=False,
                              snapshot__isnull=True, raw_pruned_at__isnull=True).update(raw="", raw_pruned_at=stamp)
    log.info("prune_uploads: emptied the raw text of %d unchanged uploads (%d bytes)", summary.uploads,
             summary.bytes_freed)
    return summary


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


