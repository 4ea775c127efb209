"""Rebuild snapshots at fleet scale: the hosts to rebuild split into chunks, one Celery task per
chunk (``tasks.rebuild_hosts_task``), any number of workers on any number of machines, and the
progress read from the database.

A chunk holds whole hosts: each host's uploads are rebuilt in order by one worker
(``processing.rebuild_snapshots(host=...)``), so a report found equal to the one before it (an
unchanged re-report) is compared with the snapshot rebuilt just before, never with one another
worker is rewriting. Tasks return nothing (no result backend is needed): an upload is rebuilt
when its ``finished_at`` moves past the moment the rebuild started, which is what ``fan_out``
counts; the uploads a worker holds right now and the ones whose raw text was pruned are skipped,
as the in-process rebuild skips them. With tasks in-process (no ``TOPOWEB_BROKER_URL``) the
chunks run one after the other in this process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db.models import Q

from apps.ingest import processing
from apps.ingest.models import Cluster, Host, Upload

CHUNK_HOSTS = 16  # hosts per task: a few seconds of work, so progress moves and a lost task costs little
POLL_SECONDS = 1.0
STALL_SECONDS = 900.0  # no upload finished for this long: stop waiting and name what is left


@dataclass
class Progress:
    done: int
    total: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        return (self.total - self.done) / self.rate if self.rate > 0 else None

    def line(self) -> str:
        """``rebuilt 512/1024 uploads (50%), 48.2 uploads/s, ETA 11 s``."""
        pct = 100.0 * self.done / self.total if self.total else 100.0
        eta = self.eta_seconds
        eta_text = "ETA -" if eta is None else f"ETA {eta:.0f} s"
        return f"rebuilt {self.done}/{self.total} uploads ({pct:.0f}%), {self.rate:.1f} uploads/s, {eta_text}"


@dataclass
class FanOutSummary(processing.RebuildSummary):
    tasks: int = 0
    unfinished: list[int] = field(default_factory=list)  # upload ids no worker finished before the stall limit


def hosts_in(cluster: Cluster | None = None, host: Host | None = None) -> list[int]:
    """Ids of the hosts to rebuild (those with an upload), in id order."""
    if host is not None:
        return [host.pk]
    rows = Host.objects.filter(uploads__isnull=False)
    if cluster is not None:
        rows = rows.filter(cluster=cluster)
    return sorted(set(rows.values_list("pk", flat=True)))


def chunks(ids: list[int], size: int = CHUNK_HOSTS) -> list[list[int]]:
    if size < 1:
        raise ValueError(f"chunk size must be at least 1, not {size}")
    return [ids[i:i + size] for i in range(0, len(ids), size)]


def rebuild_hosts(host_ids: Iterable[int]) -> processing.RebuildSummary:
    """Rebuild every upload of each host (a chunk's work: what ``rebuild_hosts_task`` runs)."""
    total = processing.RebuildSummary()
    for host in Host.objects.filter(pk__in=list(host_ids)).order_by("pk"):
        s = processing.rebuild_snapshots(host=host)
        total.total += s.total
        total.done += s.done
        total.failed += s.failed
        total.skipped += s.skipped
        total.failures += s.failures
    return total


def _skipped() -> Q:
    """Uploads a rebuild leaves alone: held by a worker now, or whose raw text was pruned."""
    return Q(status=Upload.Status.PROCESSING) | Q(raw_pruned_at__isnull=False)


def fan_out(*, cluster: Cluster | None = None, host: Host | None = None, chunk_hosts: int = CHUNK_HOSTS,
            progress: Callable[[Progress], None] | None = None, poll_seconds: float = POLL_SECONDS,
            stall_seconds: float = STALL_SECONDS) -> FanOutSummary:
    """Send one ``rebuild_hosts_task`` per chunk of hosts and wait until every upload is rebuilt,
    calling ``progress`` after each poll; returns the counts as the in-process rebuild does, the
    number of tasks, and the uploads left unfinished when no upload finished for ``stall_seconds``.

    An upload counts as rebuilt once its ``finished_at`` differs from what it was before the
    tasks were sent (not "later than now": the workers' clocks need not agree with this one's)."""
    from apps.ingest.tasks import rebuild_hosts_task

    host_ids = hosts_in(cluster, host)
    scope = Upload.objects.all()
    if cluster is not None:
        scope = scope.filter(cluster=cluster)
    if host is not None:
        scope = scope.filter(host=host)
    skipped = scope.filter(_skipped()).count()
    before = dict(scope.exclude(_skipped()).values_list("pk", "finished_at"))
    summary = FanOutSummary(total=len(before) + skipped, skipped=skipped)
    clock = time.monotonic()
    parts = chunks(host_ids, chunk_hosts)
    for part in parts:  # in-process (eager), each call rebuilds its chunk before returning
        rebuild_hosts_task.delay(part)
    summary.tasks = len(parts)
    rebuilt: set[int] = set()
    last_move = time.monotonic()
    while True:
        moved = {pk for pk, at in scope.values_list("pk", "finished_at")
                 if pk in before and at is not None and at != before[pk]}
        now = time.monotonic()
        if len(moved) > len(rebuilt):
            last_move = now
        rebuilt = moved
        if progress is not None:
            progress(Progress(len(rebuilt), len(before), now - clock))
        if len(rebuilt) >= len(before):
            break
        if now - last_move > stall_seconds:
            summary.unfinished = sorted(set(before) - rebuilt)
            break
        time.sleep(poll_seconds)
    done = scope.filter(status=Upload.Status.DONE).values_list("pk", flat=True)
    summary.done = sum(1 for pk in done if pk in rebuilt)
    for pk, hostname, error in (scope.filter(status=Upload.Status.FAILED)
                                .values_list("pk", "host__hostname", "error").order_by("pk")):
        if pk in rebuilt:
            summary.failed += 1
            summary.failures.append((pk, hostname, error or {}))
    return summary
