"""python manage.py revoke_token TOKEN_PREFIX_OR_ID: revoke an agent token (its next report gets 401)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.ingest import services


class Command(BaseCommand):
    help = "Revoke an agent token by id, by its visible prefix (tw_xxxxxxxx) or by the whole token."

    def add_arguments(self, parser) -> None:
        parser.add_argument("token", metavar="TOKEN_PREFIX_OR_ID")

    def handle(self, *args, token: str, **options) -> None:
        try:
            revoked = services.revoke_token(token)
        except LookupError as exc:
            raise CommandError(str(exc).strip("'\""), returncode=2) from None
        self.stdout.write(f"revoked {revoked.prefix} (id {revoked.pk}, cluster {revoked.cluster.name!r}, "
                          f"name {revoked.name!r}) at {revoked.revoked_at:%Y-%m-%d %H:%M:%S} UTC")
