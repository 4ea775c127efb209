"""python manage.py import_reports PATH [--cluster C]: bulk-load agent reports or capture folders.

PATH is a folder, a ``.tar.gz``/``.tgz``/``.tar`` archive or one ``.json`` report. Inside, each
``*.json`` file is one agent report, and each folder holding ``<kind>.txt`` files (plus an
optional ``hostname.txt``; else the folder name is the host name) is one host's captures;
``*.log`` / ``*.out`` files and ``*.txt`` files under a ``runs/`` folder are runs (measurements),
checked against the host of the capture folder they sit in; files under a ``fabric/`` folder and
files named after a fabric kind (``ibnetdiscover.txt``...) are fabric uploads (``apps.ingest.imports``).

The last line printed is the outcome in the words of an import job: ``status: done``,
``done_with_errors`` or ``failed``, then the message. Exit status 0 when every report was
stored and parsed; 1 when some were rejected or failed to parse (runs that could not be read
included: they are kept, and listed with ``FILE:LINE: reason``), or members past
TOPOWEB_IMPORT_MAX_MEMBERS were left unread; 2 when PATH cannot be read, holds no reports, or
the archive is truncated or corrupt (the reports read before the damage are imported).
"""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from apps.ingest import archive, imports, services
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
            listing = imports.iter_report_sources(path)
        except archive.STREAM_ERRORS as exc:
            raise CommandError(f"{path}: {archive.describe_stream_error(exc)}", returncode=2) from None
        with listing:
            summary = self._import(listing, path=path, cluster=cluster, no_progress=no_progress)
        failed = self._print_summary(summary, path)
        self.stdout.write(f"status: {summary.status}: {summary.describe()}")
        if summary.damage:
            self.stderr.write(f"error: {summary.damage}")
            sys.exit(2)
        if summary.rejected or summary.runs_rejected or summary.fabrics_rejected or failed or summary.limit:
            sys.exit(1)

    def _import(self, listing: imports.ReportListing, *, path: str, cluster: str,
                no_progress: bool) -> imports.ImportSummary:
        """Import every listed report into ``cluster`` (created when missing), with a progress bar."""
        if not listing and not (listing.damage or listing.limit):
            raise CommandError(f"{path}: no *.json reports and no folders of <kind>.txt captures found",
                               returncode=2)
        target = Cluster.objects.filter(name=cluster).first()
        if target is None:
            try:
                target = services.create_cluster(name=cluster)
            except ValueError as exc:
                raise CommandError(str(exc), returncode=2) from None
            self.stderr.write(f"created cluster {cluster!r}")
        bar = tqdm(total=len(listing), unit="report", disable=no_progress, file=sys.stderr)
        try:
            return imports.import_reports(cluster=target, path=path, sources=listing,
                                           progress=lambda name, s: bar.update(1))
        finally:
            bar.close()

    def _print_summary(self, summary: imports.ImportSummary, path: str) -> int:
        """Print counts, rejected files and parse failures; return how many failed to parse."""
        out = self.stdout.write
        out(f"{summary.reports_total} reports in {path}: {summary.created} new, {summary.duplicates} "
            f"already stored, {summary.rejected} rejected")
        if summary.runs_total:
            out(summary.describe_runs())
        if summary.fabrics_total:
            out(summary.describe_fabrics())
        for name, message in summary.errors:
            out(f"  rejected {name}: {message}")
        if summary.errors_omitted:
            out(f"  ... and {summary.errors_omitted} more rejected (not listed)")
        uploads = _uploads(summary.upload_ids)
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
        return len(failed)


def _uploads(ids: list[int], chunk: int = 1000) -> list[Upload]:
    """The uploads with these ids, with their hosts, fetched ``chunk`` ids at a time (SQLite
    bounds the number of values one query may carry)."""
    rows: list[Upload] = []
    for start in range(0, len(ids), chunk):
        rows.extend(Upload.objects.filter(pk__in=ids[start:start + chunk]).select_related("host").order_by("pk"))
    return rows
