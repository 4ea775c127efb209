"""python manage.py rebuild_snapshots [--cluster C] [--host H]: re-derive snapshots from raw uploads, then re-check
the stored runs of the hosts rebuilt (``apps.ingest.runs.recheck_runs``) against the snapshots now in force."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from apps.ingest import processing, runs
from apps.ingest.models import Cluster, Host, Upload


class Command(BaseCommand):
    help = "Rebuild every snapshot (of a cluster / host) from its stored raw upload."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", help="only this cluster (name)")
        parser.add_argument("--host", help="only this host name (with --cluster when names repeat)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args, cluster: str | None, host: str | None, no_progress: bool, **options) -> None:
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
        total = Upload.objects.filter(**({"cluster": c} if c else {}), **({"host": h} if h else {})).count()
        bar = tqdm(total=total, unit="upload", disable=no_progress or total == 0, file=self.stderr._out)
        summary = processing.rebuild_snapshots(cluster=c, host=h, progress=lambda upload: bar.update(1))
        bar.close()
        self.stdout.write(f"rebuilt {summary.total} uploads: {summary.done} snapshots, {summary.failed} failed, "
                          f"{summary.skipped} skipped (being processed)")
        for upload_id, hostname, err in summary.failures:
            where = f"{err.get('section')} line {err.get('line_no')}" if err.get("section") else "report"
            self.stdout.write(f"  upload {upload_id} ({hostname}): {where}: {err.get('reason')}")
        if summary.total:  # the runs of the rebuilt hosts were checked against the old snapshots
            rechecked = runs.recheck_runs(hosts=[h]) if h is not None else runs.recheck_runs(cluster=c)
            for line in rechecked.lines():
                self.stdout.write(line)
