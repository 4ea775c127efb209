"""What-if and plan endpoints of the API (``/api/v1/``; registered by ``apps.ingest.api``).

    POST   /api/v1/whatif                  {"snapshot": ID | "sections": {...}, "edits": [...]}
                                           -> {"before", "after", "changes"} (nothing stored)
    POST   /api/v1/clusters/{c}/plans      {"name", "description"?, "snapshot" | "sections", "edits"} -> 201
    GET    /api/v1/clusters/{c}/plans      the cluster's plans
    GET    /api/v1/plans/{id}              a plan and its what-if
    PUT    /api/v1/plans/{id}              {"name"?, "description"?, "edits"?}
    DELETE /api/v1/plans/{id}              -> 204

A what-if of a snapshot needs the viewer role in its cluster; one of pasted sections only a login.
Plans: viewers read, editors write (403 when the role is too low, 404 when the cluster is not
visible). A bad edit answers 400 ``invalid_edit`` with ``index`` and ``field``. Every answer
carries the label ``Plan (what-if, not reported)``: a plan is never a snapshot.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Status
from ninja.security import django_auth

from apps.ingest import access, plans
from apps.ingest.api import api, error
from apps.ingest.models import Cluster, Plan, Snapshot


def _body(request: HttpRequest) -> dict | HttpResponse:
    declared = request.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > settings.MAX_REPORT_BYTES + 64 * 1024:
        return error(request, f"body is {declared} bytes; the limit is {settings.MAX_REPORT_BYTES} "
                     "(TOPOWEB_MAX_REPORT_BYTES)", 413, "too_large")
    try:
        body = json.loads(request.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return error(request, f"body is not JSON: {exc}", 400, "not_json")
    if not isinstance(body, dict):
        return error(request, "body must be a JSON object", 400, "not_json")
    return body


def _plan_error(request: HttpRequest, exc: plans.PlanError) -> HttpResponse:
    return error(request, exc.message, 400, exc.code, field=exc.field, **exc.details)


def _snapshot(request: HttpRequest, value: Any) -> Snapshot | HttpResponse:
    if isinstance(value, bool) or not isinstance(value, int):
        return error(request, f"snapshot: must be a snapshot id, got {value!r}", 400, "invalid_field", field="snapshot")
    snap = Snapshot.objects.select_related("host", "host__cluster", "upload").filter(pk=value).first()
    if snap is None or not access.has_role(request.user, snap.host.cluster, access.VIEWER):
        return error(request, f"no snapshot {value}", 404, "not_found")
    return snap


def _cluster(request: HttpRequest, name: str) -> Cluster | HttpResponse:
    c = access.visible_clusters(request.user).filter(name=name).first()
    return c if c is not None else error(request, f"no cluster {name!r}", 404, "not_found")


def _plan(request: HttpRequest, plan_id: int) -> Plan | HttpResponse:
    try:
        return plans.plan_for(plan_id, request.user)
    except Plan.DoesNotExist:
        return error(request, f"no plan {plan_id}", 404, "not_found")


def _out(request: HttpRequest, plan: Plan) -> dict:
    return {**plans.plan_dict(plan), "url": request.build_absolute_uri(reverse("explorer:plan", args=[plan.pk]))}


@api.post("/whatif", auth=django_auth, url_name="whatif",
          summary="A host with what-if edits: before, after and what changed (nothing is stored)")
def post_whatif(request: HttpRequest):
    body = _body(request)
    if isinstance(body, HttpResponse):
        return body
    snap = None
    if body.get("snapshot") is not None:
        snap = _snapshot(request, body["snapshot"])
        if isinstance(snap, HttpResponse):
            return snap
    try:
        result = plans.evaluate(edits=body.get("edits"), snapshot=snap,
                                sections=None if snap is not None else body.get("sections"))
    except plans.PlanError as exc:
        return _plan_error(request, exc)
    return {"label": plans.PLAN_LABEL, **result}


@api.get("/clusters/{cluster}/plans", auth=django_auth, url_name="cluster-plans", summary="The cluster's plans")
def list_plans(request: HttpRequest, cluster: str):
    c = _cluster(request, cluster)
    if isinstance(c, HttpResponse):
        return c
    return [_out(request, p) for p in plans.cluster_plans(c)]


@api.post("/clusters/{cluster}/plans", auth=django_auth, url_name="cluster-plans-create",
          response={201: dict[str, Any]}, summary="Save a what-if as a plan (editor)")
def create_plan(request: HttpRequest, cluster: str):
    c = _cluster(request, cluster)
    if isinstance(c, HttpResponse):
        return c
    body = _body(request)
    if isinstance(body, HttpResponse):
        return body
    snap = None
    if body.get("snapshot") is not None:
        snap = _snapshot(request, body["snapshot"])
        if isinstance(snap, HttpResponse):
            return snap
    try:
        plan = plans.create_plan(cluster=c, user=request.user, name=body.get("name"), edits=body.get("edits"),
                                 snapshot=snap, sections=None if snap is not None else body.get("sections"),
                                 description=str(body.get("description") or ""))
    except access.RoleTooLow as exc:
        return error(request, str(exc), 403, "forbidden")
    except plans.PlanError as exc:
        return _plan_error(request, exc)
    return Status(201, _out(request, plan))


@api.get("/plans/{plan_id}", auth=django_auth, url_name="plan", summary="A plan and its what-if")
def get_plan(request: HttpRequest, plan_id: int):
    plan = _plan(request, plan_id)
    if isinstance(plan, HttpResponse):
        return plan
    try:
        result, problem = plans.evaluate_plan(plan), None
    except plans.PlanError as exc:
        result, problem = None, exc.message
    return {**_out(request, plan), "whatif": result, "error": problem}


@api.put("/plans/{plan_id}", auth=django_auth, url_name="plan-update", summary="Change a plan (editor)")
def update_plan(request: HttpRequest, plan_id: int):
    plan = _plan(request, plan_id)
    if isinstance(plan, HttpResponse):
        return plan
    body = _body(request)
    if isinstance(body, HttpResponse):
        return body
    try:
        plan = plans.update_plan(plan, user=request.user, name=body.get("name"), description=body.get("description"),
                                 edits=body.get("edits"))
    except access.RoleTooLow as exc:
        return error(request, str(exc), 403, "forbidden")
    except plans.PlanError as exc:
        return _plan_error(request, exc)
    return _out(request, plan)


@api.delete("/plans/{plan_id}", auth=django_auth, url_name="plan-delete", summary="Delete a plan (editor)")
def delete_plan(request: HttpRequest, plan_id: int):
    plan = _plan(request, plan_id)
    if isinstance(plan, HttpResponse):
        return plan
    try:
        plans.delete_plan(plan, user=request.user)
    except access.RoleTooLow as exc:
        return error(request, str(exc), 403, "forbidden")
    return HttpResponse(status=204)
