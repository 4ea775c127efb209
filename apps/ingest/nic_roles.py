"""A user's word on what a NIC carries, kept with the snapshot (``Snapshot.nic_roles``).

``set_roles(snapshot, changes, user) -> Snapshot``  ``changes``: {"mlx5_4": "compute"|"storage"|
    "management"|None} (None clears); checked by ``apps.domain.verdict.check_roles`` (ValueError
    naming the NIC). The roles are stored as {"mlx5_4": {"role", "by", "at"}} and the snapshot's
    document is analysed again from its upload with them (``analyze_host(..., nic_roles=)``):
    NIC roles, GPU->NIC choices, NCCL_IB_HCA and findings follow the user. About 70 ms for an
    8-GPU, 12-port host, once per change; pages then read the stored document.
``carry_forward(upload_id) -> bool``  after a snapshot is written: a new snapshot of a host takes
    the roles of the host's previous snapshot for the NICs it still has, and a rebuilt one keeps
    its own; either way its document is analysed with them. False when there was nothing to do.

The document's ``document_hash`` stays the hash of the report's own analysis, so an unchanged
report still finds its snapshot (``apps.ingest.processing``).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from django.db import transaction
from django.db.models import JSONField, OuterRef, Subquery
from django.utils import timezone

from apps.domain.analysis import analyze_host
from apps.domain import verdict
from apps.domain.verdict import check_roles
from apps.ingest.models import Snapshot
from apps.ingest.reports import validate_envelope

__all__ = ["RolesUnavailable", "set_roles", "carry_forward", "role_names"]


class RolesUnavailable(RuntimeError):
    """The snapshot's report text is no longer kept, so it cannot be analysed again."""


def role_names(nic_roles: dict | None) -> dict[str, str]:
    """{"mlx5_4": "storage"} from the stored {"mlx5_4": {"role", "by", "at"}}."""
    return {k: v["role"] for k, v in (nic_roles or {}).items() if isinstance(v, dict) and v.get("role")}


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _reanalysed(snapshot: Snapshot, roles: dict[str, str]) -> dict:
    raw = snapshot.upload.raw
    if not raw:
        raise RolesUnavailable(f"snapshot {snapshot.pk}: the report it was built from is no longer kept, so it "
                               "cannot be analysed with NIC roles; send a new report of this host")
    env = validate_envelope(json.loads(raw))
    doc = analyze_host(env.sections, env.hostname, nic_roles=roles).doc
    text = json.dumps(doc)
    return _finite(doc) if ("NaN" in text or "Infinity" in text) else doc


def _summary_fields(document: dict) -> dict:
    """The snapshot's list columns that a NIC role can change."""
    summary = document.get("summary") or {}
    severities = Counter(f.get("severity") for f in document.get("findings") or [])
    return {"document": document, "fingerprint": str(summary.get("fingerprint") or "")[:128],
            "crit_count": severities["CRIT"], "high_count": severities["HIGH"], "med_count": severities["MED"],
            "low_count": severities["LOW"], "info_count": severities["INFO"],
            "nic_models": verdict.nic_models(document)}


def _store(snapshot: Snapshot, stored: dict) -> Snapshot:
    fields = _summary_fields(_reanalysed(snapshot, role_names(stored)))
    fields["nic_roles"] = stored
    Snapshot.objects.filter(pk=snapshot.pk).update(**fields)
    for k, v in fields.items():
        setattr(snapshot, k, v)
    return snapshot


def _layout_changed(host_id: int) -> None:
    from apps.ingest import layouts

    layouts.host_changed(host_id)


def set_roles(snapshot: Snapshot, changes: Any, user) -> Snapshot:
    """Apply ``changes`` to the snapshot's roles and analyse it again; raises ValueError (a bad NIC
    name or role) or RolesUnavailable."""
    names = [n.get("name") for n in (snapshot.document or {}).get("nics") or []]
    checked = check_roles(changes, names)
    stored = dict(snapshot.nic_roles or {})
    at = timezone.now().isoformat(timespec="seconds")
    by = getattr(user, "username", None) or str(user)
    for nic, role in checked.items():
        if role is None:
            stored.pop(nic, None)
        else:
            stored[nic] = {"role": role, "by": by, "at": at}
    with transaction.atomic():
        snapshot = _store(snapshot, stored)
    _layout_changed(snapshot.host_id)
    return snapshot


def carry_forward(upload_id: int) -> bool:
    """Bring the roles to the snapshot just written for ``upload_id`` (module docstring)."""
    # The document and the upload (its raw report: a megabyte with a whole-machine lspci -vvv) are
    # read only when there are roles to carry; most snapshots have none. The roles of the host's
    # previous snapshot with roles come in the same statement (a subquery), read when its own are none.
    before = (Snapshot.objects.filter(host_id=OuterRef("host_id"), collected_at__lte=OuterRef("collected_at"))
              .exclude(pk=OuterRef("pk")).exclude(nic_roles={}).order_by("-collected_at", "-id")
              .values("nic_roles")[:1])
    snap = (Snapshot.objects.defer("document").filter(upload_id=upload_id)
            .annotate(roles_before=Subquery(before, output_field=JSONField())).first())
    if snap is None:
        return False
    stored = dict(snap.nic_roles or {})
    if not stored:
        before = snap.roles_before
        if not before:
            return False
        have = {n.get("name") for n in (snap.document or {}).get("nics") or []}
        stored = {k: v for k, v in (before or {}).items() if k in have}
    if not stored:
        return False
    try:
        _store(snap, stored)
    except RolesUnavailable:
        return False
    return True
