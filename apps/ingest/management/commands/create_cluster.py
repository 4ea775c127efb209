"""python manage.py create_cluster NAME [--description TEXT] [--token-name N]

Creates a cluster and an agent token for it; the token is printed alone on the LAST line
(``TOKEN=$(python manage.py create_cluster prod | tail -n1)``). It is shown only this once.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from apps.ingest import services


class Command(BaseCommand):
    help = "Create a cluster and print a new agent token for it on the last line."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="cluster name: letters, digits, '.', '_', '-' (at most 64)")
        parser.add_argument("--description", default="", help="free text shown in the UI")
        parser.add_argument("--token-name", default="initial", help="label of the first token (default: initial)")

    def handle(self, *args, name: str, description: str, token_name: str, **options) -> None:
        try:
            with transaction.atomic():
                cluster = services.create_cluster(name=name, description=description)
                token, secret = services.issue_token(cluster=cluster, name=token_name)
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        self.stderr.write(f"created cluster {cluster.name!r} (id {cluster.pk})")
        self.stderr.write(f"agent token {token.prefix} (id {token.pk}) for cluster {cluster.name!r}; "
                          "it is shown only now. On each node:")
        self.stderr.write(f"  curl -fsS http://SERVER/agent.py | python3 - --server http://SERVER --token {secret}")
        self.stdout.write(secret)
