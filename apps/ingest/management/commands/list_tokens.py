"""python manage.py list_tokens [CLUSTER]: the agent tokens (prefix, id, cluster, name, last use, state)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from apps.ingest.models import AgentToken


class Command(BaseCommand):
    help = "List agent tokens (never their secrets)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("cluster", nargs="?", help="only this cluster")

    def handle(self, *args, cluster: str | None, **options) -> None:
        tokens = AgentToken.objects.select_related("cluster").order_by("cluster__name", "pk")
        if cluster:
            tokens = tokens.filter(cluster__name=cluster)
        for t in tokens:
            used = f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "never"
            state = f"revoked {t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "active"
            self.stdout.write(f"{t.pk}\t{t.prefix}\t{t.cluster.name}\t{t.name or '-'}\tlast used {used}\t{state}")
