"""python manage.py grant USER CLUSTER [--role viewer|editor|admin] [--group]

Gives a user (or, with ``--group``, a group: USER is then the group's name) a role in a cluster,
replacing the role they had there. Roles: viewer (read), editor (+ paste, upload, share), admin
(+ tokens and members). Exit 2 when the user, group or cluster does not exist.
"""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError

from apps.ingest import access


class Command(BaseCommand):
    help = "Give a user (or a group) a role in a cluster: viewer, editor or admin."

    def add_arguments(self, parser) -> None:
        parser.add_argument("user", help="user name (with --group: group name)")
        parser.add_argument("cluster", help="cluster name")
        parser.add_argument("--role", choices=access.ROLES, default=access.VIEWER, help="default: viewer")
        parser.add_argument("--group", action="store_true", help="USER names a group (a team), not a user")
        parser.add_argument("--create-group", action="store_true", help="with --group: create the group if missing")

    def handle(self, *args, user: str, cluster: str, role: str, group: bool, create_group: bool, **options) -> None:
        if create_group and group:
            Group.objects.get_or_create(name=user)
        try:
            row = access.grant(cluster=cluster, role=role, **({"group": user} if group else {"username": user}))
        except (LookupError, ValueError) as exc:
            raise CommandError(str(exc).strip("'\""), returncode=2) from None
        self.stdout.write(f"{'group' if group else 'user'} {user!r} is now {row.role} of cluster {cluster!r}")
