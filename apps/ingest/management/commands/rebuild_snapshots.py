"""python manage.py rebuild_snapshots [--cluster C] [--host H] [--local] [--chunk N]: re-derive snapshots from
raw uploads, then re-check the stored runs of the hosts rebuilt (``apps.ingest.runs.recheck_runs``) against the
snapshots now in force.

With a broker (``TOPOWEB_BROKER_URL``) the hosts are split into chunks, one Celery task each, over every
running worker (``apps.ingest.rebuild.fan_out``); ``--local``, or tasks in-process (``make run``), rebuilds
here. Progress (done/total, rate, ETA) goes to stderr."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.ingest import processing, rebuild, runs
from apps.ingest.models import Cluster, Host, Upload

PRINT_EVERY_SECONDS = 2.0


class Command(BaseCommand):
    help = "Rebuild every snapshot (of a cluster / host) from its stored raw upload, over the Celery workers."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", help="only this cluster (name)")
        parser.add_argument("--host", help="only this host name (with --cluster when names repeat)")
        parser.add_argument("--local", action="store_true", help="rebuild in this process, not over the workers")
        parser.add_argument("--chunk", type=int, default=rebuild.CHUNK_HOSTS,
                            help=f"hosts per worker task (default {rebuild.CHUNK_HOSTS})")
        parser.add_argument("--no-progress", action="store_true", help="no progress lines")

    def handle(self, *args, cluster: str | None, host: str | None, local: bool, chunk: int, no_progress: bool,
               **options) -> None:
        if chunk < 1:
            raise CommandError(f"--chunk must be at least 1, not {chunk}", returncode=2)
        c, h = self._scope(cluster, host)
        printer = None if no_progress else self._printer()
        if local or settings.CELERY_TASK_ALWAYS_EAGER:
            summary = self._local(c, h, printer)
            how = "in this process"
        else:
            summary = rebuild.fan_out(cluster=c, host=h, chunk_hosts=chunk, progress=printer)
            how = f"over the workers ({summary.tasks} tasks)"
        if printer is not None:
            printer(None)
        self.stdout.write(f"rebuilt {summary.total} uploads: {summary.done} snapshots, {summary.failed} failed, "
                          f"{summary.skipped} skipped (being processed) {how}")
        for upload_id, hostname, err in summary.failures:
            where = f"{err.get('section')} line {err.get('line_no')}" if err.get("section") else "report"
            self.stdout.write(f"  upload {upload_id} ({hostname}): {where}: {err.get('reason')}")
        unfinished = getattr(summary, "unfinished", [])
        if unfinished:
            self.stdout.write(f"  {len(unfinished)} uploads not rebuilt: no worker finished one for "
                              f"{rebuild.STALL_SECONDS:.0f} s (are workers running? celery -A topoweb worker); "
                              f"first ids: {', '.join(map(str, unfinished[:10]))}")
        if summary.total:  # the runs of the rebuilt hosts were checked against the old snapshots
            rechecked = runs.recheck_runs(hosts=[h]) if h is not None else runs.recheck_runs(cluster=c)
            for line in rechecked.lines():
                self.stdout.write(line)

    def _scope(self, cluster: str | None, host: str | None) -> tuple[Cluster | None, Host | None]:
        c = h = None
        if cluster:
            c = Cluster.objects.filter(name=cluster).first()
            if c is None:
                raise CommandError(f"no cluster {cluster!r}", returncode=2)
        if host:
            hosts = Host.objects.filter(hostname=host)
            if c is not None:
                hosts = hosts.filter(cluster=c)
            hosts = list(hosts)
            if not hosts:
                raise CommandError(f"no host {host!r}" + (f" in cluster {cluster!r}" if c else ""), returncode=2)
            if len(hosts) > 1:
                raise CommandError(f"host {host!r} is in several clusters; add --cluster", returncode=2)
            h = hosts[0]
        return c, h

    def _local(self, c: Cluster | None, h: Host | None, printer) -> processing.RebuildSummary:
        total = Upload.objects.filter(**({"cluster": c} if c else {}), **({"host": h} if h else {})).count()
        start, done = time.monotonic(), 0

        def step(upload) -> None:
            nonlocal done
            done += 1
            if printer is not None:
                printer(rebuild.Progress(done, total, time.monotonic() - start))

        return processing.rebuild_snapshots(cluster=c, host=h, progress=step)

    def _printer(self):
        """A progress callback printing a line at most every PRINT_EVERY_SECONDS, and the last one
        (called with None at the end)."""
        state = {"at": 0.0, "last": None, "printed": None}

        def show(p) -> None:
            now = time.monotonic()
            if p is None:  # the end: the last figures, unless just printed
                if state["last"] is not None and state["last"] is not state["printed"]:
                    self.stderr.write(state["last"].line())
                return
            state["last"] = p
            if now - state["at"] >= PRINT_EVERY_SECONDS:
                state["at"], state["printed"] = now, p
                self.stderr.write(p.line())

        return show
