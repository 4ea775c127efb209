"""python manage.py revoke USER CLUSTER [--group]

Removes the user's (or group's) role in a cluster. Roles that come from a group the user is in,
or from a cluster open to all users, stay; the command says so. Exit 2 for an unknown user,
group or cluster.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.ingest import access
from apps.ingest.models import Cluster


class Command(BaseCommand):
    help = "Remove a user's (or a group's) role in a cluster."

    def add_arguments(self, parser) -> None:
        parser.add_argument("user", help="user name (with --group: group name)")
        parser.add_argument("cluster", help="cluster name")
        parser.add_argument("--group", action="store_true", help="USER names a group, not a user")

    def handle(self, *args, user: str, cluster: str, group: bool, **options) -> None:
        try:
            removed = access.revoke(cluster=cluster, **({"group": user} if group else {"username": user}))
        except (LookupError, ValueError) as exc:
            raise CommandError(str(exc).strip("'\""), returncode=2) from None
        who = f"{'group' if group else 'user'} {user!r}"
        self.stdout.write(f"{who}: {'role removed' if removed else 'had no role of its own'} in cluster {cluster!r}")
        if not group:
            person = get_user_model().objects.get(username=user)
            left = access.role_of(person, Cluster.objects.get(name=cluster))
            if left:
                self.stdout.write(f"{who} is still {left} of {cluster!r} (through a group, superuser status, "
                                  "or a cluster open to all users)")
