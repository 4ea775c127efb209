"""Ingestion writes: enrollment and report submission.

Every state change of the ingest tables goes through ``services`` (this module),
``processing`` (uploads into snapshots, rebuilds, sweeps) and ``imports`` (bulk imports);
views, tasks and management commands call them. Signatures (keyword-only after the ``*``):

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
        document (``apps.ingest.reports``); raises ``ReportRejected`` (``.status`` 400/413,
        ``.code``, ``.message``, ``.details``) when it cannot be accepted, and then writes
        nothing. A new upload's ``notices`` list what was not used as sent (a ``collected_at``
        ahead of the clock). ``created`` is False when the same report (sha256 of canonical JSON
        of hostname + sections) is already stored in that cluster; the existing upload is then
        returned. Processing is enqueued after commit; a broker failure is logged and leaves
        the upload ``received`` for the sweeper.
    ``enqueue_upload(upload_id) -> bool``  hand an upload to the workers (False: broker down)
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from apps.ingest.models import AgentToken, Cluster, Host, Upload
from apps.ingest.reports import Envelope, content_hash, decode_report, validate_envelope

log = logging.getLogger(__name__)

TOKEN_PREFIX_LEN = 11  # "tw_" + 8 hex digits
CLUSTER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


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
        host_id = insert_on_conflict(Host(cluster=cluster, hostname=env.hostname, last_seen_at=now),
                                      conflict=("cluster_id", "hostname"), update=("last_seen_at",))
        upload = Upload(cluster=cluster, host_id=host_id, via=via, token=token, user=user,
                        source_name=source_name[:500], raw=raw, size_bytes=size, content_hash=digest,
                        collected_at=collected_at, agent_version=env.agent_version, received_at=now)
        # One INSERT ... ON CONFLICT DO NOTHING: a report already stored in this cluster (resent, or
        # racing in from another request; unique cluster + content_hash) inserts nothing.
        upload.pk = insert_on_conflict(upload, conflict=("cluster_id", "content_hash"))
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


def insert_on_conflict(obj, *, conflict: tuple[str, ...], update: tuple[str, ...] = (),
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


def tasks_in_process() -> bool:
    """True when no broker is configured: tasks run in this process (``make run``, tests)."""
    return bool(getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False))


# Keep a broker outage from stalling the request: one quick retry, then leave it to the sweeper.
PUBLISH_RETRY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}


def enqueue_upload(upload_id: int) -> bool:
    """Hand an upload to the workers (in-process when no broker is configured).

    Returns False when the broker cannot be reached: the upload stays ``received`` and
    ``sweep_uploads`` re-enqueues it later, so an outage delays reports but loses none.
    """
    from apps.ingest.tasks import process_upload_task

    if tasks_in_process():
        process_upload_task.apply_async((upload_id,))
        return True
    try:
        process_upload_task.apply_async((upload_id,), retry=True, retry_policy=PUBLISH_RETRY)
    except Exception:  # kombu/redis raise several types; none may turn a stored report into a 500
        log.exception("could not enqueue upload %s; it stays 'received' for sweep_uploads", upload_id)
        return False
    return True


