"""python manage.py prune_uploads [--days N] [--dry-run]: empty the raw text of unchanged uploads."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.ingest import processing


class Command(BaseCommand):
    help = ("Empty the raw text of uploads older than TOPOWEB_RAW_RETENTION_DAYS that created no snapshot "
            "(re-reports of an unchanged layout); uploads that created or changed a layout, and failed ones, "
            "are never touched. The Celery beat task does the same every 6 hours.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--days", type=int, default=None,
                            help=f"retention in days (default TOPOWEB_RAW_RETENTION_DAYS = {settings.RAW_RETENTION_DAYS}; "
                                 "0 keeps everything)")
        parser.add_argument("--dry-run", action="store_true", help="count what would be emptied, change nothing")

    def handle(self, *args, days: int | None, dry_run: bool, **options) -> None:
        summary = processing.prune_uploads(days=days, dry_run=dry_run)
        if summary.days <= 0:
            self.stdout.write("retention is 0 days (TOPOWEB_RAW_RETENTION_DAYS): every raw upload is kept")
            return
        verb = "would empty" if dry_run else "emptied"
        self.stdout.write(f"{verb} the raw text of {summary.uploads} unchanged upload(s) older than {summary.days} "
                          f"days, {summary.bytes_freed} bytes freed; kept {summary.kept_changed} older upload(s) that "
                          "created, changed or failed a layout")
