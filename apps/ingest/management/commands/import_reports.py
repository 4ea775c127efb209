"""python manage.py import_reports PATH [--cluster C]: bulk-load agent reports or capture folders.

PATH is a folder, a ``.tar.gz``/``.tgz``/``.tar`` archive or one ``.json`` report. Inside, each
``*.json`` file is one agent report, and each folder holding ``<kind>.txt`` files (plus an
optional ``hostname.txt``; else the folder name is the host name) is one host's captures.
Exit status 0 when every report was stored and parsed, 1 when some were rejected or failed.
"""

from __future__ import annotations

import sys
import tarfile

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from apps.ingest import services
from apps.ingest.models import Cluster, Upload


class Command(BaseCommand):
    help = "Import agent report JSON files / capture folders from a folder or a .tar.gz."

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", help="folder, .tar.gz/.tgz/.tar archive, or one .json report")
        parser.add_argument("--cluster", default="default",
                            help="cluster to import into (default: 'default'); created when missing")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args, path: str, cluster: str, no_progress: bool, **options) -> None:
        try:
            sources = services.iter_report_sources(path)
        except (OSError, tarfile.TarError, EOFError) as exc:
            raise CommandError(f"{path}: {exc}", returncode=2) from None
        if not sources:
            raise CommandError(f"{path}: no *.json reports and no folders of <kind>.txt captures found",
                               returncode=2)
        target = Cluster.objects.filter(name=cluster).first()
        if target is None:
            try:
                target = services.create_cluster(name=cluster)
            except ValueError as exc:
                raise CommandError(str(exc), returncode=2) from None
            self.stderr.write(f"created cluster {cluster!r}")
        bar = tqdm(total=len(sources), unit="report", disable=no_progress, file=sys.stderr)
        summary = services.import_reports(cluster=target, path=path, sources=sources,
                                          progress=lambda name, s: bar.update(1))
        bar.close()

        out = self.stdout.write
        out(f"{summary.total} reports in {path}: {summary.created} new, {summary.duplicates} already stored, "
            f"{summary.rejected} rejected")
        for name, message in summary.errors:
            out(f"  rejected {name}: {message}")
        uploads = Upload.objects.filter(pk__in=summary.upload_ids).select_related("host").order_by("pk")
        failed = [u for u in uploads if u.status == Upload.Status.FAILED]
        pending = sum(1 for u in uploads if u.status in (Upload.Status.RECEIVED, Upload.Status.PROCESSING))
        done = sum(1 for u in uploads if u.status == Upload.Status.DONE)
        out(f"processing: {done} snapshots built, {len(failed)} failed to parse, {pending} queued for workers")
        for u in failed:
            e = u.error or {}
            where = f"section {e.get('section')} line {e.get('line_no')}" if e.get("section") else "report"
            out(f"  failed {u.source_name} (upload {u.pk}, host {u.host.hostname}): {where}: {e.get('reason')}")
            if e.get("line"):
                out(f"      {e['line'].rstrip()[:160]}")
        if summary.rejected or failed:
            sys.exit(1)
