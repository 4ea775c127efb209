"""What-if and plan pages: a host with edits beside the original, saved as a plan.

``/c/<cluster>/h/<host>/whatif/?snapshot=ID`` edits one of the host's snapshots (viewers try,
editors save); ``/whatif/`` edits pasted command outputs (nothing is stored unless saved as a plan
of a cluster where the person is an editor); ``/plans/<id>/`` is a plan -- its base, edits, result, and for editors the edit
form and delete -- and the link to share with people who may view the cluster. Editors also get a
read-only link, ``/plans/s/<token>/``: ``django.core.signing`` over the plan's id (no table, as the
capacity page's links), opening without an account for ``TOPOWEB_SHARE_LINK_MAX_AGE_DAYS`` days. A
plan is labelled ``Plan (what-if, not reported)`` everywhere and never creates a snapshot.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.domain.names import natural_key
from apps.domain.whatif import HONOURED_ENV, OPS
from apps.explorer import figure_labels, figures
from apps.explorer.paste import split_paste
from apps.explorer import services as share
from apps.explorer import selectors as ex
from apps.explorer.views import host_or_404
from apps.ingest import access, plans
from apps.ingest.models import Plan

EXAMPLE = [{"op": "set_nic", "name": "mlx5_0", "rate_gbit": 400}]
SALT = "topoweb.plan-share"


def _edits_from(text: str) -> tuple[list | None, str | None]:
    """(edit list, None) from the form's JSON, or (None, the reason it is not JSON)."""
    try:
        value = json.loads(text or "[]")
    except json.JSONDecodeError as exc:
        return None, f"Edits are not JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}."
    return value, None


def _result_context(result: dict, edits: list) -> dict:
    """What the result block shows: the diff, GPU -> NIC before/after rows and the two drawings."""
    before, after, diff = result["before"], result["after"], result["changes"]
    nic_a = {e["gpu"]: e for e in before.get("gpu_nic") or []}
    nic_b = {e["gpu"]: e for e in after.get("gpu_nic") or []}
    rows = [{"gpu": g, "before": nic_a.get(g), "after": nic_b.get(g),
             "changed": (nic_a.get(g) or {}).get("nic") != (nic_b.get(g) or {}).get("nic")
             or (nic_a.get(g) or {}).get("gdr") != (nic_b.get(g) or {}).get("gdr")}
            for g in sorted(set(nic_a) | set(nic_b), key=natural_key)]
    return {"result": result, "before": before, "after": after, "diff": diff, "nic_rows": rows,
            "edits_json": json.dumps(edits, indent=1),
            "fig_a": figures.host_figure_json(before, highlight=diff["highlight_a"], height=460,
                                              title="As reported", plot_width=figure_labels.HALF_WIDTH_PX),
            "fig_b": figures.host_figure_json(after, highlight=diff["highlight_b"], height=460,
                                              title=plans.PLAN_LABEL, plot_width=figure_labels.HALF_WIDTH_PX)}


def _form_context(doc: dict) -> dict:
    """The edit form's vocabulary: ops and their fields, the host's GPUs, NICs and settings."""
    vocab = {"ops": {op: list(req + opt) for op, (req, opt) in OPS.items()},
             "gpus": [g["name"] for g in doc.get("gpus") or []], "nics": [n["name"] for n in doc.get("nics") or []],
             "env_names": sorted(HONOURED_ENV)}
    return {"vocab": vocab, "plan_label": plans.PLAN_LABEL}


@login_required
@require_http_methods(["GET", "POST"])
def whatif(request: HttpRequest, cluster: str, hostname: str) -> HttpResponse:
    h = host_or_404(request, cluster, hostname)
    snap = ex.host_snapshot(h, int(request.GET["snapshot"]) if request.GET.get("snapshot", "").isdigit() else None)
    if snap is None:
        raise Http404(f"host {hostname!r} has no snapshot")
    text = request.POST.get("edits") if request.method == "POST" else request.GET.get("edits")
    edits, problem = _edits_from(text if text is not None else json.dumps(EXAMPLE))
    ctx = {"host": h, "snap": snap, "edits_json": text if text is not None else json.dumps(EXAMPLE, indent=1),
           "can_save": access.has_role(request.user, h.cluster, access.EDITOR), "error": problem,
           **_form_context(snap.document)}
    if edits is not None and (request.method == "POST" or text is not None):
        try:
            ctx.update(_result_context(plans.evaluate(edits=edits, snapshot=snap), edits))
        except plans.PlanError as exc:
            ctx["error"] = exc.message
    if request.method == "POST" and request.POST.get("action") == "save" and ctx.get("result"):
        try:
            plan = plans.create_plan(cluster=h.cluster, user=request.user, name=request.POST.get("name", ""),
                                     edits=edits, snapshot=snap, description=request.POST.get("description", ""))
        except access.RoleTooLow as exc:
            ctx["error"] = f"Cannot save: {exc}."
        except plans.PlanError as exc:
            ctx["error"] = f"Cannot save: {exc.message}"
        else:
            messages.success(request, f"Saved as plan {plan.name!r}.")
            return redirect("explorer:plan", plan_id=plan.pk)
    return render(request, "explorer/plan_whatif.html", ctx, status=400 if ctx["error"] and request.method == "POST"
                  else 200)


def _pasted_sections(text: str, hostname: str) -> tuple[dict | None, str | None]:
    """({kind: text, "hostname": name}, None) of a paste, or (None, what is wrong with it)."""
    if len(text) > settings.MAX_REPORT_BYTES:
        return None, f"The paste is larger than {settings.MAX_REPORT_BYTES} bytes (TOPOWEB_MAX_REPORT_BYTES)."
    parts = split_paste(text)
    bad = next((s for s in parts if s.error or not s.kind), None)
    if bad is not None:
        return None, f"Line {bad.first_line}: {bad.error or 'the kind of this output cannot be told'}."
    if not parts:
        return None, "Paste at least one command output (e.g. nvidia-smi topo -m, then ibstat)."
    return {**{s.kind: s.text for s in parts}, "hostname": hostname.strip() or "pasted-host"}, None


@login_required
@require_http_methods(["GET", "POST"])
def whatif_paste(request: HttpRequest) -> HttpResponse:
    """A what-if of pasted outputs; saved (editors) as a plan of the cluster chosen."""
    clusters = list(access.clusters_with_role(request.user, access.EDITOR).order_by("name"))
    text = request.POST.get("edits") if request.method == "POST" else None
    ctx = {"paste": request.POST.get("text", ""), "hostname": request.POST.get("hostname", ""),
           "clusters": clusters, "edits_json": text if text is not None else json.dumps(EXAMPLE, indent=1),
           "error": None, **_form_context({})}
    if request.method == "POST":
        sections, ctx["error"] = _pasted_sections(ctx["paste"], ctx["hostname"])
        edits, problem = _edits_from(text or "")
        ctx["error"] = ctx["error"] or problem
        if not ctx["error"]:
            try:
                ctx.update(_result_context(plans.evaluate(edits=edits, sections=sections), edits))
                ctx.update(_form_context(ctx["before"]))
            except plans.PlanError as exc:
                ctx["error"] = exc.message
        if not ctx["error"] and request.POST.get("action") == "save":
            target = next((c for c in clusters if c.name == request.POST.get("cluster")), None)
            try:
                if target is None:
                    raise plans.PlanError("cluster", "choose a cluster where you are an editor")
                saved = plans.create_plan(cluster=target, user=request.user, name=request.POST.get("name", ""),
                                          edits=edits, sections=sections,
                                          description=request.POST.get("description", ""))
            except plans.PlanError as exc:
                ctx["error"] = f"Cannot save: {exc.message}"
            else:
                messages.success(request, f"Saved as plan {saved.name!r} of {target.name}.")
                return redirect("explorer:plan", plan_id=saved.pk)
    return render(request, "explorer/plan_paste.html", ctx, status=400 if ctx["error"] else 200)


@login_required
@require_http_methods(["GET", "POST"])
def plan(request: HttpRequest, plan_id: int) -> HttpResponse:
    try:
        p = plans.plan_for(plan_id, request.user)
    except Plan.DoesNotExist:
        raise Http404(f"no plan {plan_id}") from None
    can_edit = access.has_role(request.user, p.cluster, access.EDITOR)
    ctx = {"plan": p, "can_edit": can_edit, "error": None, "edits_json": json.dumps(p.edits, indent=1),
           "share_url": request.build_absolute_uri(reverse("explorer:plan", args=[p.pk])),
           "share_days": settings.SHARE_LINK_MAX_AGE_DAYS,
           **_form_context(p.base_snapshot.document if p.base_snapshot else {})}
    if can_edit:
        token = signing.dumps({"p": p.pk, "by": request.user.get_username()}, salt=SALT)
        ctx["signed_url"] = request.build_absolute_uri(reverse("explorer:plan-shared", args=[token]))
    if request.method == "POST":
        edits, problem = _edits_from(request.POST.get("edits", ""))
        if problem:
            ctx.update(error=problem, edits_json=request.POST.get("edits", ""))
        else:
            try:
                plans.update_plan(p, user=request.user, name=request.POST.get("name", p.name),
                                  description=request.POST.get("description", p.description), edits=edits)
            except access.RoleTooLow as exc:
                ctx["error"] = f"Cannot change this plan: {exc}."
            except plans.PlanError as exc:
                ctx.update(error=exc.message, edits_json=request.POST.get("edits", ""))
            else:
                messages.success(request, "Plan saved.")
                return redirect("explorer:plan", plan_id=p.pk)
    try:
        ctx.update(_result_context(plans.evaluate_plan(p), p.edits))
        ctx["edits_json"] = ctx["edits_json"] if ctx["error"] else json.dumps(p.edits, indent=1)
    except plans.PlanError as exc:
        ctx["error"] = ctx["error"] or exc.message
    return render(request, "explorer/plan.html", ctx, status=400 if ctx["error"] and request.method == "POST" else 200)


@login_required
@require_POST
def plan_delete(request: HttpRequest, plan_id: int) -> HttpResponse:
    try:
        p = plans.plan_for(plan_id, request.user)
        plans.delete_plan(p, user=request.user)
    except Plan.DoesNotExist:
        raise Http404(f"no plan {plan_id}") from None
    except access.RoleTooLow as exc:
        messages.error(request, f"Cannot delete this plan: {exc}.")
        return redirect("explorer:plan", plan_id=plan_id)
    messages.success(request, f"Plan {p.name!r} deleted.")
    return redirect("explorer:cluster", cluster=p.cluster.name)


@require_GET
def plan_shared(request: HttpRequest, token: str) -> HttpResponse:
    """A plan through its signed link, read-only, for anyone holding it (no account)."""
    try:
        payload = signing.loads(token, salt=SALT, max_age=share.max_age())
    except signing.SignatureExpired:
        return render(request, "explorer/share_invalid.html", status=410, context={
            "reason": f"This plan link has expired (links work for {settings.SHARE_LINK_MAX_AGE_DAYS} days)."})
    except signing.BadSignature:
        return render(request, "explorer/share_invalid.html", status=410,
                      context={"reason": "This plan link is not valid (it was changed or cut short)."})
    p = Plan.objects.select_related("cluster", "base_snapshot__host", "created_by").filter(pk=payload.get("p")).first()
    if p is None:
        return render(request, "explorer/share_invalid.html", status=410,
                      context={"reason": "The shared plan no longer exists."})
    ctx = {"plan": p, "readonly": True, "shared_by": payload.get("by"), "can_edit": False, "error": None,
           "edits_json": json.dumps(p.edits, indent=1), "plan_label": plans.PLAN_LABEL}
    try:
        ctx.update(_result_context(plans.evaluate_plan(p), p.edits))
    except plans.PlanError as exc:
        ctx["error"] = exc.message
    return render(request, "explorer/plan.html", ctx)
