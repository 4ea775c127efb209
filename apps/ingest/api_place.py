"""Placement and figure export endpoints of the API (``/api/v1/``; registered by ``apps.ingest.api``).

    POST /api/v1/clusters/{c}/place          {"nodes", "gpus_per_node"} or {"gpus"} (+ "seed"?) -> 200
    GET  /api/v1/snapshots/{id}/figure/{name}.svg|.png   a drawing of the snapshot (viewer)

``place`` answers ``apps.ingest.placing.cluster_placement`` (fields: ``hosts``, ``nodelist``,
``hostfile``, ``cuda_visible_devices`` and ``nccl_ib_hca`` per host, ``torchrun``,
``expected_busbw_gbs``, ``random_busbw_gbs``, ``skipped`` [{host, reason}], ...); a job that does
not fit or a bad field answers 400 ``invalid_field`` naming the field; viewer role (it changes
nothing). Figures: ``apps.explorer.figure_export``; a name it does not know answers 404, PNG where
it cannot be drawn here 501 ``png_unavailable`` with the reason.
"""

from __future__ import annotations

import json
import re

from django.http import HttpRequest, HttpResponse
from ninja.security import django_auth

from apps.explorer import figure_export
from apps.ingest import access
from apps.ingest.models import Snapshot
from apps.ingest.placing import PlacementError, cluster_placement

JOB_FIELDS = ("nodes", "gpus_per_node", "gpus", "seed")


def register(api, error) -> None:
    """Add the endpoints to ``api`` (``error(request, message, status, code, **details)`` answers errors)."""

    @api.post("/clusters/{cluster}/place", auth=django_auth, url_name="cluster-place",
              summary="Place a job (nodes x gpus_per_node, or gpus) on the cluster's healthy hosts",
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                  "schema": {"type": "object", "properties": {f: {"type": "integer"} for f in JOB_FIELDS}}}}}})
    def place(request: HttpRequest, cluster: str):
        c = access.visible_clusters(request.user).filter(name=cluster).first()
        if c is None:
            return error(request, f"no cluster {cluster!r}", 404, "not_found")
        try:
            body = json.loads(request.body or b"{}")
        except ValueError as exc:
            return error(request, f"body: not JSON ({exc})", 400, "invalid_field", field="body")
        if not isinstance(body, dict):
            return error(request, "body: a JSON object is expected", 400, "invalid_field", field="body")
        unknown = sorted(set(body) - set(JOB_FIELDS))
        if unknown:
            return error(request, f"{unknown[0]}: not a field of a job (give {', '.join(JOB_FIELDS)})", 400,
                         "invalid_field", field=unknown[0])
        seed = body.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            return error(request, f"seed: must be a whole number, not {str(seed)[:20]!r}", 400, "invalid_field",
                         field="seed")
        try:
            return cluster_placement(c, nodes=body.get("nodes"), gpus_per_node=body.get("gpus_per_node"),
                                     gpus=body.get("gpus"), seed=seed)
        except PlacementError as exc:
            return error(request, str(exc), 400, "invalid_field", field=exc.field)

    @api.get("/snapshots/{snapshot_id}/figure/{filename}", auth=django_auth, url_name="snapshot-figure",
             summary="A drawing of a snapshot as SVG or PNG (host, gpu_matrix, nic_matrix)")
    def figure(request: HttpRequest, snapshot_id: int, filename: str):
        s = Snapshot.objects.select_related("host", "host__cluster").filter(pk=snapshot_id).first()
        if s is None or not access.has_role(request.user, s.host.cluster, access.VIEWER):
            return error(request, f"no snapshot {snapshot_id}", 404, "not_found")
        name, _, fmt = filename.rpartition(".")
        if name not in figure_export.FIGURES or fmt not in figure_export.FORMATS:
            return error(request, f"no figure {filename!r}: the figures are "
                         f"{', '.join(n + '.svg|.png' for n in figure_export.FIGURES)}", 404, "not_found")
        try:
            body, content_type = figure_export.render(s.document, name, fmt)
        except figure_export.PngUnavailable as exc:
            return error(request, str(exc), 501, "png_unavailable")
        response = HttpResponse(body, content_type=content_type)
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", s.host.hostname)
        response["Content-Disposition"] = f'inline; filename="{stem}-{s.pk}-{name}.{fmt}"'
        return response
