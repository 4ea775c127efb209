"""python manage.py issue_token CLUSTER [--name N]: print a new agent token (last line) for CLUSTER."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.ingest import services
from apps.ingest.models import Cluster


class Command(BaseCommand):
    help = "Issue another agent token for a cluster; the token is printed alone on the last line."

    def add_arguments(self, parser) -> None:
        parser.add_argument("cluster", help="cluster name")
        parser.add_argument("--name", default="", help="label for the token, e.g. the rack it is for")

    def handle(self, *args, cluster: str, name: str, **options) -> None:
        found = Cluster.objects.filter(name=cluster).first()
        if found is None:
            known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none yet (create_cluster NAME)"
            raise CommandError(f"no cluster {cluster!r}; clusters: {known}", returncode=2)
        token, secret = services.issue_token(cluster=found, name=name)
        self.stderr.write(f"agent token {token.prefix} (id {token.pk}) for cluster {found.name!r}; "
                          "it is shown only now")
        self.stdout.write(secret)
