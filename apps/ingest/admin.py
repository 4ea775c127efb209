"""Admin pages for the ingest tables (read-mostly: raw uploads are never edited).

Superusers see every row. Other staff users (with the Django model permissions) see and change
only the rows of clusters where they hold the admin role (``apps.ingest.access``): a cluster's
admins manage its members and tokens here.
"""

from django.contrib import admin, messages

from apps.ingest import access
from apps.ingest import runs as ingest_runs
from apps.ingest.models import (
    AgentToken, Cluster, ClusterGrant, Fabric, Host, ImportJob, Run, RunHost, Snapshot, Upload,
)


class ClusterScopedAdmin(admin.ModelAdmin):
    """Rows limited to the clusters the staff user administers; ``cluster_path`` leads from the
    model to its cluster (``"pk"`` for the Cluster itself)."""

    cluster_path = "cluster"

    def get_queryset(self, request):
        rows = super().get_queryset(request)
        if request.user.is_superuser:
            return rows
        mine = access.clusters_with_role(request.user, access.ADMIN)
        return rows.filter(**{f"{self.cluster_path}__in": mine})

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "cluster" and not request.user.is_superuser:
            kwargs["queryset"] = access.clusters_with_role(request.user, access.ADMIN)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ClusterGrantInline(admin.TabularInline):
    """Members of a cluster: users and groups with their role (the same as manage.py grant / revoke)."""

    model = ClusterGrant
    extra = 1
    fields = ("user", "group", "role")
    autocomplete_fields = ("user", "group")


@admin.register(Cluster)
class ClusterAdmin(ClusterScopedAdmin):
    cluster_path = "pk"
    list_display = ("name", "description", "open_to_all_users", "created_at")
    list_filter = ("open_to_all_users",)
    search_fields = ("name",)
    inlines = [ClusterGrantInline]


@admin.register(ClusterGrant)
class ClusterGrantAdmin(ClusterScopedAdmin):
    list_display = ("cluster", "user", "group", "role", "created_at")
    list_filter = ("role", ("cluster", admin.RelatedOnlyFieldListFilter))
    search_fields = ("cluster__name", "user__username", "group__name")
    autocomplete_fields = ("user", "group")


@admin.register(Host)
class HostAdmin(ClusterScopedAdmin):
    list_display = ("hostname", "cluster", "last_seen_at")
    list_filter = (("cluster", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("hostname",)


@admin.register(AgentToken)
class AgentTokenAdmin(ClusterScopedAdmin):
    list_display = ("prefix", "cluster", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = (("cluster", admin.RelatedOnlyFieldListFilter),)
    readonly_fields = ("prefix", "token_hash", "created_at", "last_used_at", "created_by")
    search_fields = ("prefix", "name")

    def has_add_permission(self, request) -> bool:  # the secret is shown once: use manage.py issue_token
        return False


@admin.register(Upload)
class UploadAdmin(ClusterScopedAdmin):
    list_display = ("id", "host", "via", "status", "attempts", "size_bytes", "received_at")
    list_filter = ("status", "via", ("cluster", admin.RelatedOnlyFieldListFilter))
    search_fields = ("host__hostname", "content_hash")
    readonly_fields = [f.name for f in Upload._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(Snapshot)
class SnapshotAdmin(ClusterScopedAdmin):
    cluster_path = "host__cluster"
    list_display = ("id", "host", "collected_at", "gpu_count", "gpu_model", "nic_count", "crit_count", "high_count")
    list_filter = (("host__cluster", admin.RelatedOnlyFieldListFilter),)
    readonly_fields = [f.name for f in Snapshot._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(ImportJob)
class ImportJobAdmin(ClusterScopedAdmin):
    list_display = ("id", "cluster", "source_name", "status", "processed", "total", "created_at")
    readonly_fields = [f.name for f in ImportJob._meta.fields]


class RunHostInline(admin.TabularInline):
    """The hosts a run touched, as it names them, with the host and snapshot its check used."""

    model = RunHost
    extra = 0
    fields = ("hostname", "host", "snapshot", "gpus", "nics")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(ClusterScopedAdmin):
    """Measurements as received (the raw text is never edited) and their check; "re-check" reads a
    run again and checks it against the snapshots now in force (as ``manage.py recheck_runs``)."""

    list_display = ("id", "verdict", "kind", "cluster", "host_names", "measured", "expected", "unit", "efficiency",
                    "collected_at", "received_at")
    list_filter = ("verdict", "kind", "status", "via", ("cluster", admin.RelatedOnlyFieldListFilter))
    search_fields = ("source_name", "run_hosts__hostname", "content_hash")
    readonly_fields = [f.name for f in Run._meta.fields]
    inlines = [RunHostInline]
    actions = ["recheck"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("cluster").prefetch_related("run_hosts")

    @admin.display(description="hosts")
    def host_names(self, run: Run) -> str:
        return ", ".join(rh.hostname for rh in run.run_hosts.all())

    def has_add_permission(self, request) -> bool:  # runs arrive through paste, the API, the agent and imports
        return False

    @admin.action(description="Re-check against the snapshots now in force")
    def recheck(self, request, queryset) -> None:
        summary = ingest_runs.recheck_each(queryset.select_related("cluster").order_by("pk"))
        lines = summary.lines()
        self.message_user(request, "; ".join(line.strip() for line in lines),
                          messages.WARNING if summary.errors else messages.SUCCESS)


@admin.register(Fabric)
class FabricAdmin(ClusterScopedAdmin):
    """Fabric discoveries and per-host attachments (ibnetdiscover, iblinkinfo, LLDP...) as received; the
    newest readable discovery of a cluster is the one in force (``apps.ingest.fabrics.latest_fabric``)."""

    list_display = ("id", "cluster", "kind", "host", "status", "size_bytes", "collected_at", "received_at")
    list_filter = ("kind", "status", "via", ("cluster", admin.RelatedOnlyFieldListFilter))
    search_fields = ("source_name", "host__hostname", "content_hash")
    readonly_fields = [f.name for f in Fabric._meta.fields]

    def has_add_permission(self, request) -> bool:  # fabrics arrive through paste, the API, the agent and imports
        return False
