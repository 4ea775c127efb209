"""Ingestion tables: clusters, hosts, agent tokens, raw uploads, snapshots and bulk imports.

The raw ``Upload`` is the source of truth: it keeps the report exactly as received and is never
modified or deleted by processing. A ``Snapshot`` is derived from one upload (one host at one
time) and can always be rebuilt from it (``manage.py rebuild_snapshots``).
"""

from __future__ import annotations

import json

import orjson
from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    """What a person may do in a cluster; each role includes the ones before it."""

    VIEWER = "viewer"  # read pages, API listings, snapshots, raw reports, paths
    EDITOR = "editor"  # + paste and upload reports, create share links
    ADMIN = "admin"  # + agent tokens and members


class Cluster(models.Model):
    """A group of hosts that agents report into; every agent token belongs to one cluster.

    People reach a cluster through ``ClusterGrant`` rows (to them or to a group they are in);
    ``open_to_all_users`` makes it readable (viewer) by every signed-in user, as the demo is.
    """

    name = models.CharField(max_length=64, unique=True)
    description = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    open_to_all_users = models.BooleanField(
        default=False, help_text="Every signed-in user may view this cluster (as the demo cluster is).")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ClusterGrant(models.Model):
    """A role in one cluster, given to one user or to one group (a team: ``django.contrib.auth`` Group).

    A person's role in a cluster is the highest of the grants to them and to their groups;
    superusers have every role everywhere (``apps.ingest.access``).
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="grants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="cluster_grants")
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.CASCADE,
                              related_name="cluster_grants")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster__name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(user__isnull=False, group__isnull=True)
                           | models.Q(user__isnull=True, group__isnull=False)),
                name="ingest_grant_user_xor_group"),
            models.UniqueConstraint(fields=["cluster", "user"], name="ingest_grant_unique_user",
                                    condition=models.Q(user__isnull=False)),
            models.UniqueConstraint(fields=["cluster", "group"], name="ingest_grant_unique_group",
                                    condition=models.Q(group__isnull=False)),
        ]

    def __str__(self) -> str:
        who = f"user {self.user}" if self.user_id else f"group {self.group}"
        return f"{who}: {self.role} of {self.cluster}"


class Host(models.Model):
    """One machine of a cluster, named by the hostname its reports carry."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="hosts")
    hostname = models.CharField(max_length=253)
    description = models.TextField(blank=True, default="")  # e.g. demo provenance, "synthetic: ..."
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)  # last report received (duplicates too)
    # kept at ingest by apps.ingest.layouts (manage.py refresh_layouts for rows stored before):
    # the newest snapshot (by collected_at, then id), its layout group, and what differs from the
    # group's reference (``layout_lines``, computed against the snapshots ``layout_compared`` names)
    latest_snapshot = models.ForeignKey("Snapshot", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+")
    layout = models.ForeignKey("LayoutGroup", null=True, blank=True, on_delete=models.SET_NULL, related_name="hosts")
    layout_lines = models.JSONField(null=True, blank=True)
    layout_compared = models.CharField(max_length=100, blank=True, default="")

    class Meta:
        ordering = ["cluster__name", "hostname"]
        constraints = [models.UniqueConstraint(fields=["cluster", "hostname"], name="ingest_host_unique_name")]
        indexes = [models.Index(fields=["cluster", "last_seen_at"], name="ingest_host_seen_idx")]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.hostname}"


class AgentToken(models.Model):
    """A secret an agent presents as ``Authorization: Bearer <token>``; writes into one cluster only.

    Only the sha256 of the token is stored. ``prefix`` (the first characters of the token,
    e.g. ``tw_3f9a1c2b``) is kept in clear so people can tell tokens apart and revoke one.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100, blank=True, default="")
    prefix = models.CharField(max_length=16, unique=True)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster__name", "created_at"]

    def __str__(self) -> str:
        state = " (revoked)" if self.revoked_at else ""
        return f"{self.prefix}... [{self.cluster.name}] {self.name}{state}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Upload(models.Model):
    """One node report as received, byte for byte, and where its processing stands.

    ``raw`` is the request body (UTF-8 JSON) exactly as it arrived; ``content_hash`` is the
    sha256 of the canonical JSON of ``{"hostname", "sections"}`` and makes a resent report a
    duplicate of the first one in the same cluster. ``error`` holds, for a failed upload,
    ``{"section": kind|null, "line_no": int, "line": str, "reason": str}``.
    """

    class Status(models.TextChoices):
        RECEIVED = "received"
        PROCESSING = "processing"
        DONE = "done"
        FAILED = "failed"

    class Via(models.TextChoices):
        AGENT = "agent"
        WEB = "web"
        IMPORT = "import"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="uploads")
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="uploads")
    via = models.CharField(max_length=10, choices=Via.choices)
    token = models.ForeignKey(AgentToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="uploads")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    source_name = models.CharField(max_length=500, blank=True, default="")  # file name for imports / web
    raw = models.TextField()
    size_bytes = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    collected_at = models.DateTimeField(null=True, blank=True)  # as the report says; null when absent
    agent_version = models.CharField(max_length=40, blank=True, default="")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.RECEIVED)
    error = models.JSONField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    received_at = models.DateTimeField(auto_now_add=True)
    last_enqueued_at = models.DateTimeField(null=True, blank=True)  # set by the sweeper
    started_at = models.DateTimeField(null=True, blank=True)
    # While ``processing``: the worker that claimed the upload holds it until then (its lease);
    # only past it may another worker or the sweeper take the upload again.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A ``done`` upload whose document equals its host's latest snapshot's creates none: it points
    # at that snapshot ("unchanged"); ``prune_uploads`` may then empty its ``raw`` (raw_pruned_at).
    same_as = models.ForeignKey("Snapshot", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="confirmations")
    raw_pruned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-received_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "content_hash"], name="ingest_upload_unique_content"),
        ]
        indexes = [models.Index(fields=["status", "received_at"], name="ingest_upload_status_idx")]

    def __str__(self) -> str:
        return f"upload {self.pk} {self.host} ({self.status})"


def read_json(text: str):
    """A stored document's JSON text -> Python values, with orjson (a third of json's time on a
    100 KB document); json reads what orjson refuses (NaN and Infinity, lone surrogates). Only for
    the JSON topoweb writes itself: orjson reads an integer beyond 64 bits as a float, and the
    analysis writes its documents with orjson, which refuses such integers (a fabric's document
    holds ports, counts and rates; its GUIDs are text). A report as a client sent it is read with
    json."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


class DocumentField(models.JSONField):
    """A JSONField read as :func:`read_json` reads (orjson, json for what orjson refuses): the
    snapshot documents (60-110 KB) every page and path reads, the fabrics' (megabytes at 2,000
    switches). Stored, queried and migrated exactly as a JSONField (it deconstructs as one)."""

    def from_db_value(self, value, expression, connection):
        if isinstance(value, str) and self.decoder is None:
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError:
                pass  # not orjson's JSON (or a key's bare text on SQLite): as JSONField reads it
        return super().from_db_value(value, expression, connection)

    def deconstruct(self):
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs

class Snapshot(models.Model):
    """One host at one time: the analysed snapshot document built from one upload.

    ``document`` is ``apps.domain.analysis.HostAnalysis.to_dict()`` (schema in that module);
    the other columns repeat a few of its figures so lists need not load the document.
    """

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="snapshots")
    upload = models.OneToOneField(Upload, on_delete=models.CASCADE, related_name="snapshot")
    collected_at = models.DateTimeField()  # the report's collected_at, else when it was received
    built_at = models.DateTimeField(auto_now=True)
    document = DocumentField()
    fingerprint = models.CharField(max_length=128, blank=True, default="")
    # sha256 of the document's JSON text and the report's counter sections (run_node.NODE_KINDS):
    # equal for two reports only when everything the snapshot stands for is equal (a port state,
    # a counter finding, a counter runs quote); "" for snapshots built before it.
    document_hash = models.CharField(max_length=64, blank=True, default="")
    # the latest time a report of the same layout confirmed this snapshot (null: none since)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    crit_count = models.PositiveIntegerField(default=0)
    high_count = models.PositiveIntegerField(default=0)
    med_count = models.PositiveIntegerField(default=0)
    low_count = models.PositiveIntegerField(default=0)
    info_count = models.PositiveIntegerField(default=0)
    gpu_count = models.PositiveIntegerField(default=0)
    gpu_model = models.CharField(max_length=200, blank=True, default="")
    nic_count = models.PositiveIntegerField(default=0)
    active_nic_count = models.PositiveIntegerField(default=0)
    nic_models = models.CharField(max_length=200, blank=True, default="")  # e.g. "8x 400 Gb/s"
    # what a user said a NIC carries, overriding the engine's classification:
    # {"<nic name>": {"role": "compute"|"storage"|"management", "by": "<username>", "at": "<ISO time>"}}
    nic_roles = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-collected_at", "-id"]
        indexes = [models.Index(fields=["host", "collected_at"], name="ingest_snapshot_host_idx")]

    def __str__(self) -> str:
        return f"snapshot {self.pk} {self.host} @ {self.collected_at:%Y-%m-%d %H:%M}"

    @property
    def severity_counts(self) -> dict[str, int]:
        return {"CRIT": self.crit_count, "HIGH": self.high_count, "MED": self.med_count,
                "LOW": self.low_count, "INFO": self.info_count}


class LayoutGroup(models.Model):
    """The hosts of one cluster whose newest snapshots share a platform and a layout
    (``apps.domain.platforms`` module docstring), kept at ingest by ``apps.ingest.layouts``.

    ``status`` is the group's place in its platform (norm, odd, alone, no-majority); ``reference``
    the snapshot its hosts are compared with (the norm's first host; null for the norm itself and a
    host alone); ``position`` its number on the cluster page."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="layouts")
    platform_key = models.CharField(max_length=400)
    platform = models.CharField(max_length=400)
    fingerprint = models.CharField(max_length=140)
    status = models.CharField(max_length=12, default="norm")
    host_count = models.PositiveIntegerField(default=0)
    platform_size = models.PositiveIntegerField(default=0)
    position = models.PositiveIntegerField(default=0)
    reference = models.ForeignKey(Snapshot, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["cluster", "position"]
        constraints = [models.UniqueConstraint(fields=["cluster", "platform_key", "fingerprint"],
                                               name="ingest_layout_unique")]

    def __str__(self) -> str:
        return f"{self.cluster.name} layout {self.position} ({self.host_count} hosts, {self.status})"


class ImportJob(models.Model):
    """A bulk import of report files (folder or ``.tar.gz``) and its progress, for polling.

    ``errors`` is a list of ``{"file": name, "error": message}``.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"  # every member imported (new or already stored)
        DONE_WITH_ERRORS = "done_with_errors"  # finished; some members rejected (see ``errors``)
        FAILED = "failed"  # the archive could not be read, or the job could not finish (see ``message``)

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="import_jobs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    source_name = models.CharField(max_length=500)
    stored_path = models.CharField(max_length=1000, blank=True, default="")  # archive kept for the worker
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    total = models.PositiveIntegerField(default=0)
    processed = models.PositiveIntegerField(default=0)
    created_count = models.PositiveIntegerField(default=0)
    duplicate_count = models.PositiveIntegerField(default=0)
    failed_count = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)
    message = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"import {self.pk} {self.source_name} ({self.status} {self.processed}/{self.total})"


class Run(models.Model):
    """One measurement (nccl-tests, an NCCL log, perftest, a P2P test) as received, and its check.

    ``raw`` is the text exactly as sent and is never changed; ``content_hash`` (sha256 of ``raw``)
    makes the same text sent again to a cluster a duplicate. ``parsed`` is the parser's result
    (``apps.domain.parsers``, ``to_jsonable``; kept up to 1 MB of JSON, else read again from ``raw``
    when needed) and ``result`` the check of
    ``apps.domain.runs.check_run`` against the snapshots in force on the hosts it touched when it
    was measured; both are derived and rebuilt by ``apps.ingest.runs.check_stored_run``. A run
    that cannot be read is kept ``failed`` with ``error = {"line_no", "line", "reason"}``.
    ``verdict``, ``reason``, ``efficiency``, ``measured`` and ``expected`` repeat the result for lists.
    """

    class Status(models.TextChoices):
        DONE = "done"  # read and checked
        FAILED = "failed"  # the text could not be read (see ``error``); the raw text is kept

    class Verdict(models.TextChoices):
        HEALTHY = "healthy"
        BELOW_EXPECTED = "below_expected"
        BROKEN = "broken"
        NOT_COMPARABLE = "not_comparable"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="runs")
    kind = models.CharField(max_length=32, blank=True, default="")  # a run kind of the parser registry
    via = models.CharField(max_length=10, choices=Upload.Via.choices)
    token = models.ForeignKey(AgentToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    source_name = models.CharField(max_length=500, blank=True, default="")  # the file name, when there is one
    description = models.TextField(blank=True, default="")  # provenance, e.g. the demo's "SYNTHETIC pairing: ..."
    raw = models.TextField()
    size_bytes = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    hosts_hint = models.JSONField(default=list, blank=True)  # the hosts the sender named (list or {run: ours})
    received_at = models.DateTimeField(auto_now_add=True)
    collected_at = models.DateTimeField(null=True, blank=True)  # when it was measured, as the sender says
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DONE)
    error = models.JSONField(null=True, blank=True)
    parsed = models.JSONField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    verdict = models.CharField(max_length=20, choices=Verdict.choices, blank=True, default="")
    reason = models.TextField(blank=True, default="")  # the verdict in one sentence
    efficiency = models.FloatField(null=True, blank=True)
    measured = models.FloatField(null=True, blank=True)  # in ``unit``
    expected = models.FloatField(null=True, blank=True)
    unit = models.CharField(max_length=8, blank=True, default="")
    hosts = models.ManyToManyField(Host, through="RunHost", related_name="runs")

    class Meta:
        ordering = ["-received_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "content_hash"], name="ingest_run_unique_content")]
        indexes = [models.Index(fields=["cluster", "received_at"], name="ingest_run_cluster_idx")]

    def __str__(self) -> str:
        return f"run {self.pk} {self.kind or 'unreadable'} ({self.verdict or self.status})"

    @property
    def measured_at(self):
        """When it was measured: the sender's ``collected_at``, else its arrival."""
        return self.collected_at or self.received_at


class RunHost(models.Model):
    """A host a run touched, as the run names it (``hostname``), with the topoweb host it matched
    (null while no host of that name has reported), the snapshot its check used, and the GPUs
    (``[{"rank", "device", "bdf", "gpu"}]``) and NICs it used there."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="run_hosts")
    host = models.ForeignKey(Host, null=True, blank=True, on_delete=models.CASCADE, related_name="run_hosts")
    hostname = models.CharField(max_length=253)  # as the run (or the sender's hint) names it
    snapshot = models.ForeignKey(Snapshot, null=True, blank=True, on_delete=models.SET_NULL, related_name="run_hosts")
    gpus = models.JSONField(default=list, blank=True)
    nics = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["run", "id"]
        indexes = [models.Index(fields=["hostname"], name="ingest_runhost_name_idx")]

    def __str__(self) -> str:
        return f"run {self.run_id} on {self.hostname}"


class Fabric(models.Model):
    """One fabric output as received (``ibnetdiscover``, ``iblinkinfo``, LLDP, ``ibdev2netdev``...), and its reading.

    Every upload is kept (versioned like host snapshots); the newest readable *discovery*
    (``ibnetdiscover``/``iblinkinfo``) collected at or before a moment is the fabric in force then
    (``apps.ingest.fabrics.latest_fabric``). ``raw`` is the text exactly as sent and is never
    changed; ``content_hash`` (sha256 of kind, host name and text) makes the same output sent again
    a duplicate. ``host`` is set for the per-host kinds (``lldpctl_json``, ``lldpcli_neighbors``,
    ``ibdev2netdev``: what one host's NICs see) and null for discoveries, which describe the
    whole fabric. ``document`` is the parser's JSON (``apps.domain.parsers``; the fabric contract of
    ``apps/domain/parsers/fabric_common.py`` for discoveries), kept up to 4 MB of JSON, else read
    again from ``raw``; ``summary`` is ``apps.domain.fabric.summary`` of its graph (discoveries
    only). Text that cannot be read is kept ``failed`` with ``error = {"line_no", "line", "reason"}``.
    Every write goes through ``apps.ingest.fabrics``.
    """

    class Status(models.TextChoices):
        OK = "ok"  # read (possibly with warnings)
        FAILED = "failed"  # the text could not be read (see ``error``); the raw text is kept

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="fabrics")
    host = models.ForeignKey(Host, null=True, blank=True, on_delete=models.CASCADE, related_name="fabrics")
    kind = models.CharField(max_length=32, blank=True, default="")  # a fabric kind of the parser registry
    raw = models.TextField()
    size_bytes = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    via = models.CharField(max_length=10, choices=Upload.Via.choices)
    token = models.ForeignKey(AgentToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="fabrics")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    source_name = models.CharField(max_length=500, blank=True, default="")  # the file name, when there is one
    collected_at = models.DateTimeField(null=True, blank=True)  # when it was taken, as the sender says
    received_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OK)
    error = models.JSONField(null=True, blank=True)
    document = DocumentField(null=True, blank=True)
    summary = models.JSONField(null=True, blank=True)
    warnings = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-received_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "content_hash"], name="ingest_fabric_unique_content")]
        indexes = [models.Index(fields=["cluster", "received_at"], name="ingest_fabric_cluster_idx")]

    def __str__(self) -> str:
        return f"fabric {self.pk} {self.kind or 'unreadable'} ({self.status})"

    @property
    def taken_at(self):
        """When the output was taken: the sender's ``collected_at``, else its arrival."""
        return self.collected_at or self.received_at


class Plan(models.Model):
    """A saved what-if: a base layout (a snapshot, or a pasted bundle's sections) and a list of edits.

    A plan is never reported data: it is listed under its cluster with its own label and left out
    of every fleet statistic. ``edits`` is the what-if edit list (``apps.domain.whatif``);
    ``base_sections`` holds the pasted sections when there is no ``base_snapshot``.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="plans")
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True, default="")
    base_snapshot = models.ForeignKey(Snapshot, null=True, blank=True, on_delete=models.SET_NULL, related_name="plans")
    base_sections = models.JSONField(null=True, blank=True)
    edits = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="ingest_plan_unique_name")]

    def __str__(self) -> str:
        return f"plan {self.cluster.name}/{self.name}"
