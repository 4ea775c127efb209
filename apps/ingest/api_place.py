"""The placement endpoint of the API (``/api/v1/``; registered by ``apps.ingest.api``).

    POST /api/v1/clusters/{c}/place          {"nodes", "gpus_per_node"} or {"gpus"} (+ "seed"?) -> 200

``place`` answers ``apps.ingest.placing.cluster_placement`` (fields: ``hosts``, ``nodelist``,
``hostfile``, ``cuda_visible_devices`` and ``nccl_ib_hca`` per host, ``torchrun``,
``expected_busbw_gbs``, ``random_busbw_gbs``, ``skipped`` [{host, reason}], ...); a job that does
not fit or a bad field answers 400 ``invalid_field`` naming the field; viewer role (it changes
nothing). The drawings of a snapshot (``/snapshots/{id}/figure/...``) are the explorer's
(``apps.explorer.api_figures``).
"""

from __future__ import annotations

import json

from django.http import HttpRequest
from ninja.security import django_auth

from apps.ingest import access
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
