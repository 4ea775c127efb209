"""python manage.py recheck_runs [--cluster NAME] [--since DATE]: read every stored run again and check it against
the snapshots now in force, printing how many runs changed verdict (and from what to what)."""

from __future__ import annotations

from datetime import datetime
from datetime import timezone as dt_timezone

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from apps.ingest import runs
from apps.ingest.models import Cluster


def parse_since(value: str) -> datetime:
    """``2025-03-01`` or an ISO 8601 time (``2025-03-01T12:00:00Z``); UTC when no zone is given."""
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"--since {value!r}: expected a date (2025-03-01) or an ISO 8601 time", returncode=2) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt_timezone.utc)


class Command(BaseCommand):
    help = ("Re-check stored runs (read again from their raw text) against the snapshots now in force, after a "
            "parser or engine change or rebuild_snapshots; prints the verdict changes.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", help="only the runs of this cluster (name)")
        parser.add_argument("--since", help="only runs measured at or after this date or time (ISO 8601)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args, cluster: str | None, since: str | None, no_progress: bool, **options) -> None:
        c = None
        if cluster:
            c = Cluster.objects.filter(name=cluster).first()
            if c is None:
                raise CommandError(f"no cluster {cluster!r}", returncode=2)
        moment = parse_since(since) if since else None
        total = runs.runs_to_recheck(cluster=c, since=moment).count()
        bar = tqdm(total=total, unit="run", disable=no_progress or total == 0, file=self.stderr._out)
        summary = runs.recheck_runs(cluster=c, since=moment, progress=lambda run: bar.update(1))
        bar.close()
        for line in summary.lines():
            self.stdout.write(line)
