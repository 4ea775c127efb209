"""Runs: measurements stored verbatim, read, and checked against the layouts of the hosts they touched.

Every write of the ``Run`` and ``RunHost`` tables goes through this module; views, the API, the
import and the demo loader call it. Signatures (keyword-only after the ``*``):

``submit_run(*, cluster, text, via, kind=None, hosts=None, collected_at=None, user=None, token=None,
            source_name="", description="") -> (Run, created)``
    Stores the text exactly as sent, reads it (kind detected among the run kinds when not given)
    and checks it at once. ``created`` is False when the same text is already stored in that
    cluster (the stored run is returned). Text that cannot be read is still stored, ``failed``
    with ``error = {"line_no", "line", "reason"}``. Raises ``ReportRejected`` (``.status``,
    ``.code``, ``.message``) for what cannot be stored at all: an empty text, NUL characters, over
    ``TOPOWEB_MAX_REPORT_BYTES``, a kind that is not a run kind, malformed ``hosts`` or
    ``collected_at``; then nothing is written.
    ``hosts``: the hosts it ran on, when the output names none (perftest, P2P tests, table-only
    nccl-tests): a list of host names; or a mapping ``{name in the run: host name in topoweb}``
    when the run's names differ from the reports' (containers, pods), or a list as long as the
    run's own host list, matched in order.
``check_stored_run(run) -> Run``
    (Re)check a stored run: match its hosts (by name, then by short name, case-insensitively), take
    each host's snapshot in force when the run was measured (the latest collected at or before;
    else the first one after, which the result notes), run ``apps.domain.runs.check_run`` and
    store the result and the ``RunHost`` rows.
``recheck_after_snapshot(host_id) -> int``
    Re-check the runs that name this host and were checked without a layout for it, or before the
    snapshot now in force for their time existed (called when a host gets a new snapshot; the
    number re-checked, at most ``RECHECK_LIMIT``).
``recheck_runs(*, cluster=None, since=None, hosts=None, progress=None) -> RecheckSummary`` (``recheck_each(runs)``)
    Read every stored run again from its raw text and check it against the snapshots now in force
    (after a parser or engine change, or ``rebuild_snapshots``); ``summary.changes`` counts
    ``(verdict before, verdict after)`` (``unreadable`` for a text that cannot be read).

A check also passes the causes the hosts' own report sections (``show_gids``, ``ib_counters``,
``ethtool_stats`` of the report in force and of the next one, ``apps.domain.run_node``) and
compares the run with the other stored runs of its shape in the cluster (``apps.domain.run_fleet``:
one host in every slow run, T10; results that spread, T6).
``run_error_text(run) -> str``  ``FILE:LINE: reason`` of a failed run.

Reading and checking are done in the request (or the import) rather than by a worker: a 64-rank
x 30-size nccl-tests output parses in ~2 ms and checks in 4-7 ms, a 100,000-line NCCL log parses in
1.3-2 s and checks in 0.2-0.3 s (docs/ingestion.md, "Runs"), and the API must answer an unreadable
text with a 400 naming the line. The hosts' report sections are read only when a cause asks for them
(a run below its bar): an 8,700-line ``ethtool_stats`` listing (8 ports x 64 rings) parses in ~25-50 ms
on the shared 2-core development machine; a healthy run reads none.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from apps.domain.errors import ParseError, UnknownKindError
from apps.domain.parsers.text import clean_lines
from apps.domain.run_fleet import add_fleet_findings, run_summary
from apps.domain.run_node import NODE_KINDS
from apps.domain.runs import RUN_KINDS, check_run, read_run, run_hosts
from apps.ingest.models import AgentToken, Cluster, Host, Run, RunHost, Snapshot, Upload
from apps.ingest.reports import ReportRejected, check_posted_text

log = logging.getLogger(__name__)

RECHECK_LIMIT = 50  # runs re-checked when one host gets a new snapshot (the most recent first)
FLEET_LIMIT = 200  # other runs of the same shape a check compares with (the most recent first)
# The parser's result is kept with the run up to this size of JSON; a longer one (a log of 50,000
# connections is ~12 MB) is read again from the raw text when the run is checked again.
PARSED_KEEP_BYTES = 1 << 20


# --------------------------------------------------------------------------------------------- submit


def _check_text(text: Any) -> str:
    return check_posted_text(text, what="the run's output", limit=settings.MAX_REPORT_BYTES,
                             setting="TOPOWEB_MAX_REPORT_BYTES",
                             empty_hint="paste the output of nccl-tests, perftest, a P2P test or an NCCL log")


def _check_hosts(hosts: Any) -> list | dict:
    """The sender's host hint, checked: a list of names or a {run name: topoweb name} mapping."""
    if hosts in (None, "", [], {}):
        return []
    if isinstance(hosts, str):
        hosts = [h.strip() for h in hosts.replace(",", " ").split() if h.strip()]
    ok = (isinstance(hosts, list) and all(isinstance(h, str) and h and len(h) <= 253 for h in hosts)) or (
        isinstance(hosts, dict) and all(isinstance(k, str) and isinstance(v, str) and k and v for k, v in hosts.items()))
    if not ok or len(hosts) > 4096:
        raise ReportRejected("hosts: a list of host names, or an object {name in the run: host name in topoweb}",
                             code="invalid_field", field="hosts")
    return hosts


def _check_collected_at(value: Any) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            raise ReportRejected(f"collected_at: {str(value)[:40]!r} is not an ISO 8601 time, e.g. 2025-01-31T12:00:00Z",
                                 code="invalid_field", field="collected_at") from None
    if timezone.is_naive(moment):
        moment = moment.replace(tzinfo=dt_timezone.utc)
    return moment if 2000 <= moment.year <= 9000 else None


def submit_run(*, cluster: Cluster, text: Any, via: str, kind: str | None = None, hosts: Any = None,
               collected_at: Any = None, user=None, token: AgentToken | None = None,
               source_name: str = "", description: str = "") -> tuple[Run, bool]:
    """Store one run verbatim, read and check it; see the module docstring."""
    if via not in Upload.Via.values:
        raise ValueError(f"via must be one of {Upload.Via.values}, got {via!r}")
    if token is not None and token.cluster_id != cluster.pk:
        raise PermissionError(f"token {token.prefix} belongs to another cluster")
    text = _check_text(text)
    if kind not in (None, "", "auto") and kind not in RUN_KINDS:
        raise ReportRejected(f"kind: {kind!r} is not a run kind; run kinds: {', '.join(RUN_KINDS)} (or leave it out "
                             "to detect it)", code="unknown_kind", field="kind", kind=kind, known_kinds=list(RUN_KINDS))
    hint = _check_hosts(hosts)
    moment = _check_collected_at(collected_at)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    existing = Run.objects.filter(cluster=cluster, content_hash=digest).first()
    if existing is not None:
        return existing, False
    # Parse outside the transaction: a 100,000-line log must not hold the write lock.
    kind_read, parsed, error = _read(text, kind)
    kept = parsed if parsed is not None and len(json.dumps(parsed)) <= PARSED_KEEP_BYTES else None
    run = Run(cluster=cluster, kind=kind_read or "", via=via, token=token, user=user, source_name=source_name[:500],
              description=description, raw=text, size_bytes=len(text.encode("utf-8")), content_hash=digest,
              hosts_hint=hint,
              collected_at=moment, status=Run.Status.FAILED if error else Run.Status.DONE, error=error, parsed=kept)
    try:
        with transaction.atomic():
            run.save()
    except IntegrityError:  # the same text raced in from another request
        return Run.objects.get(cluster=cluster, content_hash=digest), False
    if error is None:
        check_stored_run(run, parsed=parsed)
    return run, True


def _read(text: str, kind: str | None) -> tuple[str | None, dict | None, dict | None]:
    """(kind, parsed, error): the error names the line as ``{"line_no", "line", "reason"}``."""
    try:
        kind_read, parsed = read_run(text, kind)
    except ParseError as exc:
        return exc.kind if exc.kind in RUN_KINDS else kind, None, {"line_no": exc.line_no, "line": exc.line,
                                                                   "reason": exc.reason}
    except UnknownKindError as exc:
        return kind, None, {"line_no": 0, "line": "", "reason": str(exc)}
    return kind_read, parsed, None


def run_error_text(run: Run) -> str:
    """``FILE:LINE: reason`` of a run that could not be read."""
    e = run.error or {}
    return f"{run.source_name or 'text'}:{e.get('line_no', 0)}: {e.get('reason', 'unreadable')}"


# --------------------------------------------------------------------------------------------- check


def _short(name: str) -> str:
    return name.split(".")[0].lower()


def _host_names(run: Run, parsed: dict) -> list[tuple[str, str]]:
    """``[(name in the run, host name to look for in topoweb)]`` from the run and the sender's hint."""
    named = [h["host"] for h in run_hosts(run.kind, parsed) if h["host"]]
    hint = run.hosts_hint or []
    if isinstance(hint, dict):
        return [(n, hint.get(n, n)) for n in named] or [(k, v) for k, v in hint.items()]
    if named:
        return list(zip(named, hint)) if len(hint) == len(named) else [(n, n) for n in named]
    return [(h, h) for h in hint]


def _find_hosts(cluster: Cluster, names: list[str]) -> dict[str, Host]:
    """Hosts of ``cluster`` by name: exact, else by short name (before the first dot), case-insensitively."""
    if not names:
        return {}
    where = Q(hostname__in=names)
    for short in {_short(n) for n in names}:
        where |= Q(hostname__iexact=short) | Q(hostname__istartswith=short + ".")
    hosts = list(Host.objects.filter(cluster=cluster).filter(where))
    exact = {h.hostname: h for h in hosts}
    short = {}
    for h in hosts:
        short.setdefault(_short(h.hostname), h)
    return {n: exact.get(n) or short.get(_short(n)) for n in names if exact.get(n) or short.get(_short(n))}


def snapshot_in_force(host: Host, moment: datetime) -> tuple[Snapshot | None, bool]:
    """(snapshot, later): the host's latest snapshot collected at or before ``moment``; else its
    first one after (``later`` True: the layout was reported after the run was measured)."""
    base = Snapshot.objects.filter(host=host).defer("document")
    before = base.filter(collected_at__lte=moment).order_by("-collected_at", "-id").first()
    if before is not None:
        return before, False
    return base.order_by("collected_at", "id").first(), True


def _baseline(run: Run, parsed: dict, host: Host | None) -> dict | None:
    """For a ``--use_cuda`` perftest: the latest host-memory perftest result on the same NIC of the host."""
    if run.kind != "perftest" or not parsed.get("cuda") or host is None:
        return None
    for other in (Run.objects.filter(cluster=run.cluster, kind="perftest", status=Run.Status.DONE,
                                     run_hosts__host=host).exclude(pk=run.pk).order_by("-received_at")[:20]):
        p = other.parsed or {}
        if not p.get("cuda") and p.get("device") == parsed.get("device") and other.result:
            return other.result
    return None


def check_stored_run(run: Run, parsed: dict | None = None) -> Run:
    """Check a stored, readable run against its hosts' snapshots in force; store the result.
    ``parsed``: the parser's result when the caller has it (else the stored one, else the raw
    text is read again)."""
    if run.status != Run.Status.DONE:
        return run
    parsed = parsed or run.parsed or read_run(run.raw, run.kind)[1]
    pairs = _host_names(run, parsed)
    found = _find_hosts(run.cluster, [ours for _, ours in pairs])
    moment = run.measured_at or timezone.now()
    docs, links, later = {}, [], []
    for theirs, ours in pairs:
        host = found.get(ours)
        snap, after = snapshot_in_force(host, moment) if host else (None, False)
        docs[theirs] = None  # named, but no layout known: the check says so
        if snap is not None:
            docs[theirs] = Snapshot.objects.values_list("document", flat=True).get(pk=snap.pk)
            if after:
                later.append(host.hostname)
        links.append((theirs, host, snap))
    main_host = next((h for _, h, _ in links if h is not None), None)
    lines = clean_lines(run.raw)
    baseline = _baseline(run, parsed, main_host)
    result = check_run(run.kind, parsed, docs, raw_lines=lines, name=run.source_name or None, baseline=baseline)
    if result["verdict"] != "healthy" and any(snap for _, _, snap in links):
        # Only a run below its bar quotes its hosts' counters and GIDs: read their reports for it alone
        # (a report holds the whole lspci -vvv; a healthy run need not load it).
        sections = {theirs: host_evidence_sections(host, snap, None if host.hostname in later else moment)
                    for theirs, host, snap in links if snap is not None}
        result = check_run(run.kind, parsed, docs, raw_lines=lines, name=run.source_name or None, baseline=baseline,
                           host_sections=sections)
    if later:
        result["warnings"].append(f"the layout of {', '.join(later)} was reported after this run was measured; it is "
                                  "the one used")
    names = [host.hostname if host else theirs for theirs, host, _ in links]
    result = add_fleet_findings(result, run_summary(run.pk, result, names, name=run.source_name or None),
                                _fleet_peers(run, result))
    _store_result(run, result, links)
    return run


def _report_sections(snapshot_id: int) -> dict[str, str]:
    """The evidence sections (``NODE_KINDS``) of the report a snapshot was built from."""
    raw = Snapshot.objects.filter(pk=snapshot_id).values_list("upload__raw", flat=True).first()
    try:
        report = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    sections = report.get("sections") if isinstance(report, dict) else None
    if not isinstance(sections, dict):
        return {}
    return {k: v for k, v in sections.items() if k in NODE_KINDS and isinstance(v, str)}


def host_evidence_sections(host: Host, snap: Snapshot, moment: datetime | None) -> list[dict]:
    """The samples ``check_run`` quotes for one host: the report of ``snap`` (in force at the run)
    and, when ``moment`` is given, the host's next report after it (counters that rose across the run)."""
    samples = []
    chosen = [snap]
    if moment is not None:
        nxt = (Snapshot.objects.filter(host=host, collected_at__gt=moment).defer("document")
               .order_by("collected_at", "id").first())
        if nxt is not None:
            chosen.append(nxt)
    for s in chosen:
        sections = _report_sections(s.pk)
        if sections:
            samples.append({"source": f"{host.hostname} report of {s.collected_at:%Y-%m-%d %H:%M} UTC "
                                      f"(snapshot #{s.pk})", "sections": sections})
    return samples


def _fleet_peers(run: Run, result: dict) -> list[dict]:
    """Summaries of the cluster's other checked runs of the same kind and shape (``run_fleet``)."""
    shape = result.get("shape") or {}
    if not (result.get("measured") or {}).get("value"):
        return []
    rows = (Run.objects.filter(cluster_id=run.cluster_id, kind=run.kind, status=Run.Status.DONE,
                               measured__isnull=False)
            .exclude(pk=run.pk).filter(**{f"result__shape__{k}": v for k, v in shape.items() if v is not None})
            .order_by("-received_at", "-id")
            .values("pk", "source_name", "efficiency", "result__kind", "result__shape", "result__measured")
            [:FLEET_LIMIT])
    rows = list(rows)
    names: dict[int, set[str]] = {}
    for run_id, hostname, theirs in RunHost.objects.filter(run_id__in=[r["pk"] for r in rows]).values_list(
            "run_id", "host__hostname", "hostname"):
        names.setdefault(run_id, set()).add(hostname or theirs)
    out = []
    for r in rows:
        other = {"kind": r["result__kind"], "shape": r["result__shape"], "measured": r["result__measured"],
                 "efficiency": r["efficiency"]}
        summary = run_summary(r["pk"], other, names.get(r["pk"], ()), name=r["source_name"] or None)
        if summary is not None:
            out.append(summary)
    return out


def _json_ready(result: dict) -> dict:
    """The result as the database stores it (JSON without NaN or Infinity)."""
    return json.loads(json.dumps(result, allow_nan=False, default=str))


def _store_result(run: Run, result: dict, links: list[tuple[str, Host | None, Snapshot | None]]) -> None:
    by_name = {h["host"]: h for h in result.get("hosts") or []}
    measured, expected = result.get("measured") or {}, result.get("expected") or {}
    run.result = _json_ready(result)
    run.verdict = result["verdict"]
    run.reason = result["reason"]
    run.efficiency = result.get("efficiency")
    run.measured = measured.get("value")
    run.expected = expected.get("value")
    run.unit = measured.get("unit") or expected.get("unit") or ""
    run.checked_at = timezone.now()
    with transaction.atomic():
        run.save(update_fields=["result", "verdict", "reason", "efficiency", "measured", "expected", "unit", "checked_at"])
        RunHost.objects.filter(run=run).delete()
        RunHost.objects.bulk_create([
            RunHost(run=run, host=host, hostname=theirs[:253], snapshot=snap,
                    gpus=(by_name.get(theirs) or {}).get("gpus") or [], nics=(by_name.get(theirs) or {}).get("nics") or [])
            for theirs, host, snap in links])


def recheck_after_snapshot(host_id: int) -> int:
    """Re-check the runs naming this host that had no layout for it, or whose layout is older than
    the snapshot now in force for their time; the number re-checked."""
    # One query: the host, its newest snapshot as layouts.host_changed has just placed it
    # (Host.latest_snapshot), and whether its cluster has a checked run at all (most have none,
    # and then there is no run to look for)
    host = (Host.objects.filter(pk=host_id).select_related("latest_snapshot")
            .only("id", "cluster_id", "hostname", "latest_snapshot__id", "latest_snapshot__collected_at")
            .annotate(has_runs=Exists(Run.objects.filter(cluster_id=OuterRef("cluster_id"), status=Run.Status.DONE)))
            .order_by().first())
    if host is None or host.latest_snapshot is None or not host.has_runs:
        return 0
    latest = {"pk": host.latest_snapshot.pk, "collected_at": host.latest_snapshot.collected_at}
    short = _short(host.hostname)
    rows = (RunHost.objects.filter(run__cluster_id=host.cluster_id, run__status=Run.Status.DONE)
            .filter(Q(host=host) | Q(host__isnull=True, hostname__iexact=host.hostname)
                    | Q(host__isnull=True, hostname__iexact=short))
            .filter(Q(snapshot__isnull=True) | Q(snapshot__collected_at__lt=latest["collected_at"]))
            .values_list("run_id", flat=True).distinct())
    ids = sorted(set(rows), reverse=True)[:RECHECK_LIMIT]
    done = 0
    for run in Run.objects.filter(pk__in=ids).select_related("cluster"):
        if run.measured_at >= latest["collected_at"] or not run.run_hosts.filter(host=host).exists():
            check_stored_run(run)
            done += 1
    return done


# --------------------------------------------------------------------------------------------- re-check


UNREADABLE = "unreadable"  # the verdict word of a run whose text cannot be read


@dataclass
class RecheckSummary:
    """What ``recheck_runs`` did: ``changes[(before, after)]`` runs (verdicts, or ``unreadable``)."""

    total: int = 0
    changes: Counter = field(default_factory=Counter)
    errors: list[tuple[int, str]] = field(default_factory=list)  # (run id, what went wrong)

    def lines(self) -> list[str]:
        """The summary as printed by ``recheck_runs`` and ``rebuild_snapshots``."""
        changed = {k: n for k, n in self.changes.items() if k[0] != k[1]}
        same = Counter({k[0]: n for k, n in self.changes.items() if k[0] == k[1]})
        out = [f"re-checked {self.total} runs: {sum(same.values())} unchanged, {sum(changed.values())} changed"
               + (f", {len(self.errors)} failed" if self.errors else "")]
        if same:
            out.append("  unchanged: " + ", ".join(f"{n} {v}" for v, n in sorted(same.items())))
        out += [f"  {a} -> {b}: {n}" for (a, b), n in sorted(changed.items(), key=lambda kv: (-kv[1], kv[0]))]
        out += [f"  run {run_id}: {why}" for run_id, why in self.errors]
        return out


def _verdict_word(run: Run) -> str:
    if run.status != Run.Status.DONE:
        return UNREADABLE
    return run.verdict or "unchecked"


def recheck_run(run: Run) -> tuple[str, str]:
    """Read ``run`` again from its raw text (a parser fix may change what it says, or make an
    unreadable text readable) and check it against the snapshots now in force; (before, after)."""
    before = _verdict_word(run)
    kind, parsed, error = _read(run.raw, run.kind or None)
    run.kind = kind or run.kind
    run.error = error
    run.status = Run.Status.FAILED if error else Run.Status.DONE
    run.parsed = parsed if parsed is not None and len(json.dumps(parsed)) <= PARSED_KEEP_BYTES else None
    if error:
        run.result, run.verdict, run.reason = None, "", ""
        run.efficiency = run.measured = run.expected = None
        RunHost.objects.filter(run=run).delete()  # an unreadable text names no host
    run.save(update_fields=["kind", "error", "status", "parsed", "result", "verdict", "reason", "efficiency",
                            "measured", "expected"])
    if error is None:
        check_stored_run(run, parsed=parsed)
    return before, _verdict_word(run)


def runs_to_recheck(*, cluster: Cluster | None = None, since: datetime | None = None,
                    hosts: Iterable[Host] | None = None):
    """The stored runs ``recheck_runs`` reads again: of a cluster, measured at or after ``since``,
    touching one of ``hosts`` (by the host matched, or by name while it was unknown)."""
    rows = Run.objects.all()
    if cluster is not None:
        rows = rows.filter(cluster=cluster)
    if since is not None:
        rows = rows.filter(Q(collected_at__gte=since) | Q(collected_at__isnull=True, received_at__gte=since))
    if hosts is not None:
        hosts = list(hosts)
        names = {h.hostname for h in hosts} | {_short(h.hostname) for h in hosts}
        rows = rows.filter(Q(run_hosts__host__in=hosts) | Q(cluster_id__in={h.cluster_id for h in hosts},
                                                             run_hosts__host__isnull=True,
                                                             run_hosts__hostname__in=names)).distinct()
    return rows.order_by("pk")


def _in_chunks(ids: list[int], size: int = 50):
    for i in range(0, len(ids), size):
        yield from Run.objects.filter(pk__in=ids[i:i + size]).select_related("cluster").order_by("pk")


def recheck_each(runs: Iterable[Run], progress: Callable[[Run], None] | None = None) -> RecheckSummary:
    """``recheck_run`` each of ``runs``, each in its own transaction: a run whose check fails is
    counted in ``errors`` and left as it was."""
    summary = RecheckSummary()
    for run in runs:
        summary.total += 1
        before = _verdict_word(run)
        try:
            with transaction.atomic():
                before, after = recheck_run(run)
        except Exception as exc:  # one bad run must not stop the re-check of the others
            log.exception("re-checking run %s failed", run.pk)
            summary.errors.append((run.pk, f"{type(exc).__name__}: {exc}"))
            after = before
        summary.changes[(before, after)] += 1
        if progress is not None:
            progress(run)
    return summary


def recheck_runs(*, cluster: Cluster | None = None, since: datetime | None = None, hosts: Iterable[Host] | None = None,
                 progress: Callable[[Run], None] | None = None) -> RecheckSummary:
    """Read and check again the stored runs selected as ``runs_to_recheck`` does (``recheck_each``)."""
    ids = list(runs_to_recheck(cluster=cluster, since=since, hosts=hosts).values_list("pk", flat=True))
    return recheck_each(_in_chunks(ids), progress)  # ids first: each check writes while the list is read
