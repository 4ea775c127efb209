"""python manage.py sweep_uploads [--older-than SECONDS]: re-enqueue uploads stuck 'received'."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.ingest import processing


class Command(BaseCommand):
    help = ("Re-enqueue uploads left 'received' (broker down at submit time) for longer than SWEEP_AFTER_SECONDS, "
            "and 'processing' ones whose lease expired (the worker died or was killed). The Celery beat task "
            "does the same periodically.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--older-than", type=int, default=None, metavar="SECONDS",
                            help=f"age threshold (default SWEEP_AFTER_SECONDS = {settings.SWEEP_AFTER_SECONDS})")

    def handle(self, *args, older_than: int | None, **options) -> None:
        sent = processing.sweep_uploads(older_than_seconds=older_than)
        if sent:
            self.stdout.write(f"re-enqueued {len(sent)} uploads: {', '.join(map(str, sent))}")
        else:
            self.stdout.write("nothing to re-enqueue")
