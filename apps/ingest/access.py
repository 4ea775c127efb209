"""Who may do what in which cluster: roles, membership, and the querysets every read filters by.

A person's role in a cluster is the highest of
  * the ``ClusterGrant`` rows given to them,
  * the grants given to any group (team) they are in,
  * ``viewer`` when the cluster is ``open_to_all_users`` (the demo cluster, unless configured otherwise),
and superusers are ``admin`` everywhere. Roles include the ones below them:

=========  ==================================================================
viewer     pages, API listings, snapshots, raw reports, paths, import status
editor     + paste and upload reports, create share links of its paths
admin      + agent tokens and members (grant / revoke)
=========  ==================================================================

Creating a cluster takes the ``ingest.add_cluster`` permission (superusers have it); whoever
creates one from the paste page becomes its admin.

A cluster the person cannot view does not exist for them: pages and the API answer 404, never
403, so names of other teams' clusters do not leak. ``require`` raises ``NoAccess`` (a 404 to
the caller) for a cluster that is not visible, and ``RoleTooLow`` (403) for one that is visible
with a lower role than needed.

Signatures::

    role_of(user, cluster) -> str | None
    has_role(user, cluster, role) -> bool
    covers(have, role) -> bool                      role_of's answer includes role
    require(user, cluster, role) -> None            raises NoAccess / RoleTooLow
    visible_clusters(user) -> QuerySet[Cluster]
    clusters_with_role(user, role) -> QuerySet[Cluster]
    visible_cluster_ids(user) -> set[int] | None     None: every cluster (superuser)
    grant(*, username, cluster, role=VIEWER, group=None) -> ClusterGrant
    revoke(*, username, cluster, group=None) -> int  grants removed
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import Q, QuerySet

from apps.ingest.models import Cluster, ClusterGrant, Role

VIEWER, EDITOR, ADMIN = Role.VIEWER.value, Role.EDITOR.value, Role.ADMIN.value
ROLE_RANK = {VIEWER: 1, EDITOR: 2, ADMIN: 3}
ROLES = tuple(ROLE_RANK)


class NoAccess(LookupError):
    """The cluster is not visible to this person (answered as 404: it does not exist for them)."""


class RoleTooLow(PermissionError):
    """The cluster is visible, but the action needs a higher role (answered as 403)."""

    def __init__(self, cluster: Cluster, role: str, needed: str):
        super().__init__(f"your role in cluster {cluster.name!r} is {role}; this needs {needed}")
        self.cluster, self.role, self.needed = cluster, role, needed


def _check_role(role: str) -> None:
    if role not in ROLE_RANK:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")


def _grants_of(user) -> Q:
    """The grants that apply to ``user``: given to them or to one of their groups."""
    return Q(user=user) | Q(group__in=user.groups.all())


def grants_sql(cluster_id_sql: str) -> str:
    """SQL selecting the roles of the grants that apply to a user (``_grants_of``) in the cluster
    whose id is the SQL expression ``cluster_id_sql``; the user's id comes as two ``%s`` parameters,
    after any of ``cluster_id_sql``. The same rows as ``ClusterGrant.objects.filter(_grants_of(user),
    cluster_id=...)``, written out because every page and API call asks it once and Django took 1.5
    of the 1.8 ms to build that query; ``apps.ingest.selectors`` reads it with a path's hosts."""
    q = connection.ops.quote_name
    grant, member = ClusterGrant._meta, get_user_model().groups.through._meta

    def col(meta, name: str) -> str:
        return q(meta.get_field(name).column)

    return (f"SELECT {col(grant, 'role')} FROM {q(grant.db_table)} WHERE {col(grant, 'cluster')} = {cluster_id_sql} "
            f"AND ({col(grant, 'user')} = %s OR {col(grant, 'group')} IN (SELECT {col(member, 'group')} FROM "
            f"{q(member.db_table)} WHERE {col(member, 'user')} = %s))")


def _granted_roles(user, cluster_id: int) -> list[str]:
    with connection.cursor() as cur:
        cur.execute(grants_sql("%s"), [cluster_id, user.pk, user.pk])
        return [row[0] for row in cur.fetchall()]


def role_of(user, cluster: Cluster, *, granted: list[str] | None = None) -> str | None:
    """The person's role in ``cluster``, or None when they may not see it. ``granted``: the roles
    of their grants there, when already read (``grants_sql``)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    roles = _granted_roles(user, cluster.pk) if granted is None else granted
    best = max((ROLE_RANK[r] for r in roles if r in ROLE_RANK), default=0)
    if cluster.open_to_all_users:
        best = max(best, ROLE_RANK[VIEWER])
    return next((r for r, rank in ROLE_RANK.items() if rank == best), None)


def has_role(user, cluster: Cluster, role: str) -> bool:
    _check_role(role)
    return covers(role_of(user, cluster), role)


def covers(have: str | None, role: str) -> bool:
    """Whether the role ``have`` (``role_of``'s answer; None: no access) includes ``role``."""
    return have is not None and ROLE_RANK[have] >= ROLE_RANK[role]


def require(user, cluster: Cluster, role: str) -> None:
    """Return when the person has ``role`` in ``cluster``; else raise NoAccess or RoleTooLow."""
    _check_role(role)
    have = role_of(user, cluster)
    if have is None:
        raise NoAccess(f"no cluster {cluster.name!r}")
    if ROLE_RANK[have] < ROLE_RANK[role]:
        raise RoleTooLow(cluster, have, role)


def clusters_with_role(user, role: str) -> QuerySet[Cluster]:
    """The clusters where the person has at least ``role`` (a queryset: filter further, count, page)."""
    _check_role(role)
    if user is None or not user.is_authenticated or not user.is_active:
        return Cluster.objects.none()
    if user.is_superuser:
        return Cluster.objects.all()
    enough = [r for r, rank in ROLE_RANK.items() if rank >= ROLE_RANK[role]]
    granted = ClusterGrant.objects.filter(_grants_of(user), role__in=enough).values("cluster_id")
    where = Q(pk__in=granted)
    if role == VIEWER:
        where |= Q(open_to_all_users=True)
    return Cluster.objects.filter(where)


def visible_clusters(user) -> QuerySet[Cluster]:
    return clusters_with_role(user, VIEWER)


def visible_cluster_ids(user) -> set[int] | None:
    """Ids of the clusters the person may view; None means all of them (a superuser)."""
    if user is not None and user.is_authenticated and user.is_active and user.is_superuser:
        return None
    return set(visible_clusters(user).values_list("pk", flat=True))


def can_create_clusters(user) -> bool:
    return bool(user is not None and user.is_authenticated and user.has_perm("ingest.add_cluster"))


# --------------------------------------------------------------------------------------------
# Membership changes (manage.py grant / revoke, the paste page's new clusters)


def _cluster(cluster: Cluster | str) -> Cluster:
    if isinstance(cluster, Cluster):
        return cluster
    found = Cluster.objects.filter(name=cluster).first()
    if found is None:
        raise LookupError(f"no cluster {cluster!r}")
    return found


def _subject(username: str | None, group: str | None) -> dict:
    if bool(username) == bool(group):
        raise ValueError("give a user name or a group, not both")
    if group:
        found = Group.objects.filter(name=group).first()
        if found is None:
            raise LookupError(f"no group {group!r} (create it in the admin, or with --create-group)")
        return {"group": found}
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise LookupError(f"no user {username!r}")
    return {"user": user}


def grant(*, cluster: Cluster | str, role: str = VIEWER, username: str | None = None,
          group: str | None = None) -> ClusterGrant:
    """Give a user (or a group) ``role`` in ``cluster``, replacing the role they had there."""
    _check_role(role)
    subject = _subject(username, group)
    row, _ = ClusterGrant.objects.update_or_create(cluster=_cluster(cluster), **subject, defaults={"role": role})
    return row


def revoke(*, cluster: Cluster | str, username: str | None = None, group: str | None = None) -> int:
    """Remove the user's (or group's) grant in ``cluster``; the number of grants removed (0 or 1)."""
    subject = _subject(username, group)
    deleted, _ = ClusterGrant.objects.filter(cluster=_cluster(cluster), **subject).delete()
    return deleted
