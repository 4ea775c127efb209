"""``PUT /api/v1/snapshots/{id}/nic_roles``: a user's word on what NICs carry (login, editor role).

Body: ``{"mlx5_4": "compute"|"storage"|"management"|null, ...}`` (null clears that NIC's role).
Answer: ``{"snapshot", "nic_roles": {"mlx5_4": {"role", "by", "at"}}, "nics": [{"name", "compute"}],
"nccl_settings"}`` after the snapshot is analysed again with the roles (``apps.ingest.nic_roles``).
Errors: 404 not_found (no such snapshot, or not visible), 403 forbidden (viewer), 400 invalid_field
(a NIC not in the snapshot, a role not in the list, a body that is not an object), 409
report_gone (the report text is no longer kept).
"""

from __future__ import annotations

import json

from django.http import HttpRequest
from ninja.security import django_auth

from apps.ingest import access, nic_roles
from apps.ingest.models import Snapshot


def register(api, error) -> None:
    """Add the endpoint to ``api`` (``error(request, message, status, code, **details)`` answers errors)."""

    @api.put("/snapshots/{snapshot_id}/nic_roles", auth=django_auth, url_name="snapshot-nic-roles",
             summary="Set or clear NIC roles (compute, storage, management) of a snapshot")
    def put_nic_roles(request: HttpRequest, snapshot_id: int):
        s = Snapshot.objects.select_related("host", "host__cluster", "upload").filter(pk=snapshot_id).first()
        if s is None or not access.has_role(request.user, s.host.cluster, access.VIEWER):
            return error(request, f"no snapshot {snapshot_id}", 404, "not_found")
        if not access.has_role(request.user, s.host.cluster, access.EDITOR):
            return error(request, f"setting NIC roles in cluster {s.host.cluster.name!r} needs the editor role",
                         403, "forbidden")
        try:
            body = json.loads(request.body or b"null")
        except ValueError as exc:
            return error(request, f"body: not JSON ({exc})", 400, "invalid_field", field="body")
        try:
            s = nic_roles.set_roles(s, body, request.user)
        except ValueError as exc:
            return error(request, str(exc), 400, "invalid_field", field=str(exc).split(":", 1)[0])
        except nic_roles.RolesUnavailable as exc:
            return error(request, str(exc), 409, "report_gone")
        doc = s.document or {}
        return {"snapshot": s.pk, "nic_roles": s.nic_roles,
                "nics": [{"name": n.get("name"), "compute": n.get("compute")} for n in doc.get("nics") or []],
                "nccl_settings": doc.get("nccl_settings") or []}
