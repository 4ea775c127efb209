"""Plans: saved what-ifs (``apps.domain.whatif``) of one cluster's hosts.

A plan is a base layout -- one of the cluster's snapshots, or pasted sections -- and an edit list.
It is never reported data: it creates no Snapshot, so it never counts in a fleet statistic, and
every page and answer labels it ``PLAN_LABEL``. Evaluations are cached by (base snapshot, when
it was built, the edits' hash) -- or by the hash of the pasted sections -- because a snapshot's
document is rebuilt only from its stored report.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.core.cache import cache
from django.db import IntegrityError, transaction

from apps.domain.errors import ParseError, UnknownKindError
from apps.domain.whatif import WhatIfError, edits_hash, validate_edits, whatif
from apps.ingest import access
from apps.ingest.models import Cluster, Plan, Snapshot
from apps.ingest.reports import ReportRejected, validate_envelope

__all__ = ["PLAN_LABEL", "PlanError", "snapshot_base", "evaluate", "evaluate_plan", "create_plan", "update_plan",
           "delete_plan", "cluster_plans", "plan_dict", "plan_capacity_options", "plan_capacity_ref", "plan_for"]

PLAN_LABEL = "Plan (what-if, not reported)"
CACHE_SECONDS = 3600
MAX_SECTIONS_BYTES = 5 * 1024 * 1024


class PlanError(ValueError):
    """A plan or a what-if that cannot be made: ``field`` names what is wrong (``name``,
    ``snapshot``, ``sections``, ``edits``, or the bad edit's own field such as ``rate_gbit``);
    ``details`` hold the bad edit's ``index`` and ``op`` (``code`` is then ``invalid_edit``)."""

    def __init__(self, field: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.field, self.message, self.details = field, message, details
        self.code = "invalid_edit" if "index" in details else "invalid_field"


def _edit_error(exc: WhatIfError) -> PlanError:
    return PlanError(exc.field or "edits", str(exc), index=exc.index, op=exc.op)


def snapshot_base(snapshot_id: int) -> dict:
    """What a what-if of a stored snapshot starts from: the report's sections (the whole analysis
    runs again, findings from the parsers included), else -- a raw report emptied -- its document.
    Raises LookupError for an unknown snapshot."""
    snap = Snapshot.objects.select_related("upload").filter(pk=snapshot_id).first()
    if snap is None:
        raise LookupError(f"no snapshot {snapshot_id}")
    return _snapshot_base(snap)


def _snapshot_base(snap: Snapshot) -> dict:
    raw = snap.upload.raw if snap.upload_id else ""
    if raw:
        try:
            env = validate_envelope(json.loads(raw))
            return {**env.sections, "hostname": env.hostname}
        except (ValueError, ReportRejected):
            pass
    return snap.document


def evaluate(*, edits: Any, snapshot: Snapshot | None = None, sections: dict | None = None) -> dict:
    """``{"before", "after", "changes"}`` of ``edits`` on a snapshot or on pasted sections
    (cached); raises PlanError naming the bad edit, section or base."""
    checked = _checked(edits)
    if (snapshot is None) == (sections is None):
        raise PlanError("snapshot", "give the base one way: a snapshot id or pasted sections")
    if snapshot is not None:
        key = f"whatif:s{snapshot.pk}:{snapshot.built_at.timestamp():.0f}:{edits_hash(checked)}"
    else:
        _check_sections(sections)
        blob = json.dumps(sections, sort_keys=True).encode()
        key = f"whatif:p{hashlib.sha256(blob).hexdigest()[:24]}:{edits_hash(checked)}"
    found = cache.get(key)
    if found is not None:
        return found
    base = _snapshot_base(snapshot) if snapshot is not None else dict(sections)
    try:
        result = whatif(base, checked, hostname=base.get("hostname") if isinstance(base, dict) else None)
    except WhatIfError as exc:
        raise _edit_error(exc) from None
    except ParseError as exc:
        raise PlanError("sections", f"{exc.kind}: line {exc.line_no}: {exc.reason}", section=exc.kind,
                        line_no=exc.line_no) from None
    except UnknownKindError as exc:
        raise PlanError("sections", str(exc)) from None
    result["after"]["plan_label"] = PLAN_LABEL
    cache.set(key, result, CACHE_SECONDS)
    return result


def _checked(edits: Any) -> list[dict]:
    try:
        return validate_edits(edits)
    except WhatIfError as exc:
        raise _edit_error(exc) from None


def _check_sections(sections: Any) -> None:
    if not isinstance(sections, dict) or not sections or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in sections.items()):
        raise PlanError("sections", "sections must be an object of section kind -> command output text")
    if sum(len(v) for v in sections.values()) > MAX_SECTIONS_BYTES:
        raise PlanError("sections", f"sections larger than {MAX_SECTIONS_BYTES} bytes")


def evaluate_plan(plan: Plan) -> dict:
    """The plan's what-if (cached); raises PlanError when its base is gone or no longer takes the edits."""
    if plan.base_snapshot_id is None and not plan.base_sections:
        raise PlanError("snapshot", "the plan's base snapshot no longer exists")
    if plan.base_snapshot_id is not None:
        return evaluate(edits=plan.edits, snapshot=plan.base_snapshot)
    return evaluate(edits=plan.edits, sections=plan.base_sections)


# -- writes -------------------------------------------------------------------------------------

def create_plan(*, cluster: Cluster, user, name: str, edits: Any, snapshot: Snapshot | None = None,
                sections: dict | None = None, description: str = "") -> Plan:
    """A new plan; its edits must apply to its base (evaluated once, which also fills the cache).
    ``user`` needs the editor role in ``cluster`` (access.require raises otherwise)."""
    access.require(user, cluster, access.EDITOR)
    name = _name(name)
    if snapshot is not None and snapshot.host.cluster_id != cluster.pk:
        raise PlanError("snapshot", f"snapshot {snapshot.pk} is not a host of cluster {cluster.name!r}")
    checked = _checked(edits)
    evaluate(edits=checked, snapshot=snapshot, sections=sections)
    try:
        with transaction.atomic():
            return Plan.objects.create(cluster=cluster, name=name, description=description or "",
                                       base_snapshot=snapshot, base_sections=sections if snapshot is None else None,
                                       edits=checked, created_by=user if user.is_authenticated else None)
    except IntegrityError:
        raise PlanError("name", f"cluster {cluster.name!r} already has a plan named {name!r}") from None


def update_plan(plan: Plan, *, user, name: str | None = None, description: str | None = None,
                edits: Any = None) -> Plan:
    """Rename, describe or re-edit a plan (editor role); new edits must apply to its base."""
    access.require(user, plan.cluster, access.EDITOR)
    if name is not None:
        plan.name = _name(name)
    if description is not None:
        plan.description = description
    if edits is not None:
        plan.edits = _checked(edits)
        evaluate_plan(plan)
    try:
        with transaction.atomic():
            plan.save()
    except IntegrityError:
        raise PlanError("name", f"cluster {plan.cluster.name!r} already has a plan named {plan.name!r}") from None
    return plan


def delete_plan(plan: Plan, *, user) -> None:
    access.require(user, plan.cluster, access.EDITOR)
    plan.delete()


def _name(name: Any) -> str:
    name = str(name or "").strip()
    if not name or len(name) > 120:
        raise PlanError("name", "a plan needs a name of 1 to 120 characters")
    return name


# -- reads --------------------------------------------------------------------------------------

def plan_for(plan_id: int, user) -> Plan:
    """The plan if ``user`` may view its cluster; raises Plan.DoesNotExist otherwise (404)."""
    plan = Plan.objects.select_related("cluster", "base_snapshot__host", "created_by").filter(pk=plan_id).first()
    if plan is None or not access.has_role(user, plan.cluster, access.VIEWER):
        raise Plan.DoesNotExist(f"no plan {plan_id}")
    return plan


def cluster_plans(cluster: Cluster):
    return Plan.objects.filter(cluster=cluster).select_related("base_snapshot__host", "created_by").order_by("name")


def plan_dict(plan: Plan) -> dict:
    """A plan as the API lists it (without its evaluation)."""
    snap = plan.base_snapshot
    return {"id": plan.pk, "label": PLAN_LABEL, "cluster": plan.cluster.name, "name": plan.name,
            "description": plan.description, "base_snapshot": snap.pk if snap else None,
            "base_host": snap.host.hostname if snap else (plan.base_sections or {}).get("hostname"),
            "pasted_base": plan.base_snapshot_id is None, "edits": plan.edits,
            "created_by": plan.created_by.get_username() if plan.created_by else None,
            "created_at": plan.created_at, "updated_at": plan.updated_at}


def plan_capacity_options(cluster_ids: set[int] | None) -> list[dict]:
    """The plans of the clusters given (None: every cluster) as capacity-page options, shaped as
    the real layouts' (``id``, ``label``, ``cluster``, ``hostname``, ``gpus``): ``id`` is
    ``plan:<pk>`` and the label says ``plan: <name>``."""
    qs = Plan.objects.select_related("cluster", "base_snapshot__host").order_by("cluster__name", "name")
    if cluster_ids is not None:
        qs = qs.filter(cluster_id__in=cluster_ids)
    return [{"id": f"plan:{p.pk}", "label": f"plan: {p.name} ({p.cluster.name})", "cluster": p.cluster.name,
             "hostname": p.base_snapshot.host.hostname if p.base_snapshot else "", "gpus": [], "plan": True}
            for p in qs]


def plan_capacity_ref(ref: str, user) -> tuple[str, dict] | None:
    """(legend name ``plan: <name>``, the plan's after-document) for a capacity ref ``plan:<pk>``
    the person may view; None when it is not one (or cannot be evaluated any more)."""
    pk = ref.removeprefix("plan:")
    if not ref.startswith("plan:") or not pk.isdigit():
        return None
    try:
        plan = plan_for(int(pk), user)
        return f"plan: {plan.name}", evaluate_plan(plan)["after"]
    except (Plan.DoesNotExist, PlanError):
        return None
