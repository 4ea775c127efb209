"""Admin pages for the ingest tables (read-mostly: raw uploads are never edited)."""

from django.contrib import admin

from apps.ingest.models import AgentToken, Cluster, Host, ImportJob, Snapshot, Upload


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "description", "created_at")
    search_fields = ("name",)


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ("hostname", "cluster", "last_seen_at")
    list_filter = ("cluster",)
    search_fields = ("hostname",)


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "cluster", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = ("cluster",)
    readonly_fields = ("prefix", "token_hash", "created_at", "last_used_at", "created_by")
    search_fields = ("prefix", "name")

    def has_add_permission(self, request) -> bool:  # the secret is shown once: use manage.py issue_token
        return False


@admin.register(Upload)
class UploadAdmin(admin.ModelAdmin):
    list_display = ("id", "host", "via", "status", "attempts", "size_bytes", "received_at")
    list_filter = ("status", "via", "cluster")
    search_fields = ("host__hostname", "content_hash")
    readonly_fields = [f.name for f in Upload._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(Snapshot)
class SnapshotAdmin(admin.ModelAdmin):
    list_display = ("id", "host", "collected_at", "gpu_count", "gpu_model", "nic_count", "crit_count", "high_count")
    list_filter = ("host__cluster",)
    readonly_fields = [f.name for f in Snapshot._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = ("id", "cluster", "source_name", "status", "processed", "total", "created_at")
    readonly_fields = [f.name for f in ImportJob._meta.fields]
