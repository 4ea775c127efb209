"""python manage.py refresh_layouts [--cluster C]: rebuild the layout groups kept at ingest."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.ingest import layouts
from apps.ingest.models import Cluster


class Command(BaseCommand):
    help = ("Place every host in its layout group again from its newest snapshot (Host.latest_snapshot, "
            "Host.layout, LayoutGroup). Ingest keeps them up to date; run this after restoring a backup "
            "or to fill them for hosts stored before they existed (the cluster page also does it once).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", help="only this cluster (default: every cluster)")

    def handle(self, *args, cluster: str | None, **options) -> None:
        clusters = Cluster.objects.order_by("name")
        if cluster:
            clusters = clusters.filter(name=cluster)
            if not clusters.exists():
                raise CommandError(f"no cluster {cluster!r}", returncode=2)
        for c in clusters:
            placed = layouts.refresh_cluster(c)
            groups = c.layouts.filter(host_count__gt=0).count()
            self.stdout.write(f"{c.name}: {placed} host(s) placed in {groups} layout group(s)")
