"""The explorer pages: clusters, cluster overview, host, path, compare, paste, capacity, share links.

Views read through ``apps.ingest.selectors`` / ``apps.explorer.selectors`` and write through
``apps.ingest.services`` / ``apps.explorer.services``; figures come from ``figures.py``.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from apps.domain.compare import compare_docs
from apps.domain.fabric_compare import compare_fabrics
from apps.domain.errors import ParseError
from apps.domain import gpu_groups
from apps.explorer import capacity as capacity_page
from apps.domain import labels
from apps.explorer import cluster_page, compare_pages, figure_labels, figures, path_fabric, run_lists
from apps.explorer import selectors as ex
from apps.explorer import verdict as verdict_page
from apps.explorer import services as share
from apps.explorer.paste import FABRIC_KINDS, PASTE_KINDS, Section, split_paste
from apps.ingest import access, fabrics
from apps.ingest import processing as ingest_processing
from apps.ingest import reports as ingest_reports
from apps.ingest import selectors as ingest
from apps.ingest import services as ingest_services
from apps.ingest.models import Cluster, Host, Snapshot, Upload

SEVERITIES = ("CRIT", "HIGH", "MED", "LOW", "INFO")


def cluster_or_404(request: HttpRequest, name: str) -> Cluster:
    """The cluster if the person may view it; else 404 (other teams' clusters do not exist for them)."""
    c = access.visible_clusters(request.user).filter(name=name).first()
    if c is None:
        raise Http404(f"no cluster {name!r}")
    return c


def host_or_404(request: HttpRequest, cluster: str, hostname: str) -> Host:
    return host_and_role_or_404(request, cluster, hostname)[0]


def host_and_role_or_404(request: HttpRequest, cluster: str, hostname: str) -> tuple[Host, str]:
    """The host and the person's role in its cluster (read once); 404 when they may not view it."""
    try:
        h = ingest.get_host(cluster, hostname)
    except Host.DoesNotExist:
        h = None
    role = access.role_of(request.user, h.cluster) if h is not None else None
    if h is None or not access.covers(role, access.VIEWER):
        raise Http404(f"no host {hostname!r} in cluster {cluster!r}")
    return h, role


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


# -- clusters ---------------------------------------------------------------------------------


@login_required
@require_GET
def clusters(request: HttpRequest) -> HttpResponse:
    from apps.explorer import home  # the fleet home page: clusters and problems ranked by cost

    ctx = home.home(access.visible_clusters(request.user))
    base = request.build_absolute_uri("/").rstrip("/")
    return render(request, "explorer/clusters.html", {**ctx, "base_url": base})


@login_required
@require_GET
def cluster(request: HttpRequest, cluster: str) -> HttpResponse:
    c = cluster_or_404(request, cluster)
    return render(request, "explorer/cluster.html", {
        **cluster_page.context(c, request.GET),
        "runs": run_lists.runs_table(ingest.cluster_runs(c, 20)),
        "base_url": request.build_absolute_uri("/").rstrip("/"),
    })


# -- host -------------------------------------------------------------------------------------


HOST_HISTORY = 100  # snapshots in the host page's picker
WIDE_DRAWING_DEVICES = 10  # GPUs + NICs above which the host drawing takes the page's whole width


def _pending_upload(h: Host, upload_id: int | None) -> Upload | None:
    """The upload ``?upload=`` names when it is this host's and still being read (None without one)."""
    if upload_id is None:
        return None
    return (Upload.objects.filter(pk=upload_id, host=h).exclude(status=Upload.Status.DONE)
            .defer("raw").first())


@login_required
@require_GET
def host(request: HttpRequest, cluster: str, hostname: str) -> HttpResponse:
    h, role = host_and_role_or_404(request, cluster, hostname)
    history = list(ingest.host_snapshots(h)[:HOST_HISTORY])
    snap = ex.snapshot_in(history, h, _int(request.GET.get("snapshot")))
    # a report just pasted and still being read by a worker: the page says so and refreshes
    pending = _pending_upload(h, _int(request.GET.get("upload")))
    if snap is None:
        uploads = Upload.objects.filter(host=h).defer("raw").order_by("-received_at")[:5]
        return render(request, "explorer/host_empty.html", {"host": h, "uploads": uploads, "pending": pending,
                                                            "runs": run_lists.runs_table(ingest.host_runs(h, 20))})
    doc = ingest.get_snapshot_doc(snap.pk)
    previous = ex.previous_in(history, snap, complete=len(history) < HOST_HISTORY)
    # verdict, banner, advice held back, NIC roles; and the findings, settings, GPU-NIC rows and NIC rates
    ctx = verdict_page.host_context(doc, snap, request.user, role)
    # more devices than a 3/5-wide card draws legibly at 1366 px: the drawing takes the whole row
    wide = len(doc.get("gpus") or []) + len(doc.get("nics") or []) > WIDE_DRAWING_DEVICES
    return render(request, "explorer/host.html", {
        "host": h, "snap": snap, "doc": doc, "history": history, "previous": previous, "pending": pending,
        "fig_host": figures.host_figure_json(doc, plot_width=figure_labels.PLOT_WIDTH_PX if wide else figure_labels.CARD_WIDTH_PX),
        "wide_drawing": wide,
        # no chart without a cell to draw: the template says why instead
        "fig_gpu": figures.gpu_matrix_figure_json(doc) if doc.get("gpu_pairs") else None,
        "fig_nic": figures.nic_matrix_figure_json(doc) if doc.get("gpu_nic_matrix") else None,
        "gpu_model": labels.gpu_model(doc.get("summary"), snap.gpu_model),
        "nic_header": labels.nic_header(doc.get("summary")),
        "assumptions": doc.get("assumptions") or [],
        "runs": run_lists.runs_table(ingest.host_runs(h, 20)),
        "p2p_gaps": gpu_groups.p2p_gap_section(doc), "gpu_group_section": gpu_groups.gpu_group_section(doc),
        **ctx,
    })


# -- path -------------------------------------------------------------------------------------


def _pickers(request: HttpRequest) -> tuple[list[dict], dict]:
    """The newest snapshot of every host the person may view as ``{"id", "label", "gpu_count", ...}``,
    read from summary columns only: GPU names are sent for the hosts on show and fetched for
    others on demand."""
    ids = access.visible_cluster_ids(request.user)
    options = [{**r, "label": f"{r['cluster']}/{r['hostname']}"} for r in ex.latest_snapshot_rows(ids)]
    return options, {o["id"]: o for o in options}


def _endpoint(snapshot: Snapshot, gpu: str) -> dict:
    return {"ref": f"{snapshot.pk}/{gpu}", "snapshot": snapshot, "gpu": gpu, "host": snapshot.host,
            "label": f"{snapshot.host.hostname}/{gpu}"}


def _gdr_words(doc: dict, gpu: str) -> dict | None:
    """The GPU's NIC and GDR/PXN words: the one model every page reads (``apps.domain.verdict.gdr_pxn``)."""
    return verdict_page.gdr_words(doc, gpu)


def _path_context(src_ref: str, dst_ref: str, user) -> dict:
    """Resolve both ends (in clusters ``user`` may view) and compute the path; raises ``ingest.RefError``."""
    snap_a, gpu_a = ingest.resolve_gpu_ref(src_ref, user)
    snap_b, gpu_b = ingest.resolve_gpu_ref(dst_ref, user)
    doc_a = snap_a.document
    doc_b = doc_a if snap_b.pk == snap_a.pk else snap_b.document
    # what ingest.path_between_refs answers (through the cluster's fabric), on the documents already read
    result = ingest.path_between_snapshots(snap_a, gpu_a, snap_b, gpu_b, doc_a=doc_a, doc_b=doc_b)
    hops = result.get("hops") or []
    bn = result.get("bottleneck")
    return {"assumed_any": any(h.get("assumed") for h in hops),
            "bottleneck_assumed": isinstance(bn, int) and 0 <= bn < len(hops) and bool(hops[bn].get("assumed")),
            "src": _endpoint(snap_a, gpu_a), "dst": _endpoint(snap_b, gpu_b), "result": result, "hops": hops,
            "fig_path": figures.path_figure_json(result, [doc_a, doc_b]), "fabric": path_fabric.fabric_panel(result),
            "gdr_src": _gdr_words(doc_a, gpu_a), "gdr_dst": _gdr_words(doc_b, gpu_b),
            "doc_a": doc_a, "doc_b": doc_b}


@login_required
@require_GET
def path(request: HttpRequest) -> HttpResponse:
    src, dst = request.GET.get("src", "").strip(), request.GET.get("dst", "").strip()
    options, by_id = _pickers(request)
    ctx: dict = {"options": options, "src_ref": src, "dst_ref": dst, "error": None,
                 "share_days": settings.SHARE_LINK_MAX_AGE_DAYS}
    left = right = None
    try:
        if src and dst:
            ctx.update(_path_context(src, dst, request.user))
            left, right = ctx["src"]["snapshot"], ctx["dst"]["snapshot"]
        elif src:
            left, gpu = ingest.resolve_gpu_ref(src, request.user)
            ctx["src"] = _endpoint(left, gpu)
    except ingest.RefError as exc:
        ctx["error"] = exc.message
    want_right = _int(request.GET.get("dst_host"))
    if want_right and want_right in by_id:
        right = ex.snapshot_with_host(want_right)
    if left is not None and right is None:
        other = next((o for o in options if o["id"] != left.pk and o["gpu_count"]), None)
        right = ex.snapshot_with_host(other["id"]) if other else left
    docs = {}  # documents already read for the path panel are not read again
    if ctx.get("result"):
        docs = {left.pk: ctx["doc_a"], right.pk: ctx["doc_b"]}
    for side, snap in (("left", left), ("right", right)):
        if snap is None:
            continue
        if snap.pk not in docs:
            docs[snap.pk] = ingest.get_snapshot_doc(snap.pk)
        verb = "source" if side == "left" else "destination"
        ctx[f"fig_{side}"] = figures.host_figure_json(
            docs[snap.pk], height=440, legend=False, plot_width=figure_labels.HALF_WIDTH_PX,
            title=f"{figures.esc(snap.host.hostname)}: click a GPU to set the {verb}")
        ctx[side] = snap
    # the host selectors list every host (id, label, GPU count); GPU names only for the hosts on
    # show (path.js fetches another host's names when it is picked)
    gpus = {pk: [g.get("name") for g in d.get("gpus") or []] for pk, d in docs.items()}
    shown = [ctx[k]["snapshot"].pk for k in ("src", "dst") if ctx.get(k)]
    gpus.update(ex.gpu_names([pk for pk in shown if pk not in gpus]))
    ctx["pickers"] = {"options": [[o["id"], o["label"], o["gpu_count"]] for o in options],
                      "gpus": {str(pk): names for pk, names in gpus.items()}}
    return render(request, "explorer/path.html", ctx)


@login_required
@require_GET
def path_gpus(request: HttpRequest, snapshot_id: int) -> JsonResponse:
    """``{"gpus": ["GPU0", ...]}`` of one snapshot, for the path selectors."""
    snap = ex.snapshot_with_host(snapshot_id)
    visible = snap is not None and access.has_role(request.user, snap.host.cluster, access.VIEWER)
    names = ex.gpu_names([snapshot_id]) if visible else {}
    if snapshot_id not in names:
        return JsonResponse({"error": f"no snapshot {snapshot_id}"}, status=404)
    return JsonResponse({"gpus": names[snapshot_id]})


@login_required
@require_POST
def share_create(request: HttpRequest) -> HttpResponse:
    try:
        snap_a, gpu_a = ingest.resolve_gpu_ref(request.POST.get("src", ""), request.user)
        snap_b, gpu_b = ingest.resolve_gpu_ref(request.POST.get("dst", ""), request.user)
        for snap in (snap_a, snap_b):
            access.require(request.user, snap.host.cluster, access.EDITOR)
    except ingest.RefError as exc:
        messages.error(request, f"Cannot share this path: {exc.message}")
        return redirect("explorer:path")
    except access.RoleTooLow as exc:
        messages.error(request, f"Cannot share this path: {exc} (share links are for editors).")
        return redirect("explorer:path")
    link, token = share.create_share_link(src=f"{snap_a.pk}/{gpu_a}", dst=f"{snap_b.pk}/{gpu_b}", user=request.user)
    url = request.build_absolute_uri(reverse("explorer:share-view", args=[token]))
    messages.success(request, f"Read-only link (works without an account for {settings.SHARE_LINK_MAX_AGE_DAYS} "
                              f"days, revocable under Shared links): {url}")
    return redirect(f"{reverse('explorer:path')}?src={link.src}&dst={link.dst}&shared={link.pk}")


@require_GET
def share_view(request: HttpRequest, token: str) -> HttpResponse:
    link, why = share.resolve_share_token(token)
    if link is None:
        return render(request, "explorer/share_invalid.html", {"reason": why}, status=410)
    try:
        ctx = _path_context(link.src, link.dst, ingest.ANYONE)  # the link is the sender's authority
    except ingest.RefError as exc:
        return render(request, "explorer/share_invalid.html",
                      {"reason": f"The shared path no longer exists: {exc.message}"}, status=410)
    ctx.update({"readonly": True, "link": link, "expires": link.created_at + share.max_age()})
    return render(request, "explorer/share_path.html", ctx)


@login_required
def share_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        link = share.revoke_share_link(link_id=_int(request.POST.get("link")) or 0, user=request.user)
        if link is None:
            messages.error(request, "No such link of yours.")
        else:
            messages.success(request, f"Link {link.pk} revoked: it no longer opens.")
        return redirect("explorer:share-list")
    links = ex.share_links_of(request.user)
    now = timezone.now()
    rows = [{"link": ln, "expired": ln.created_at + share.max_age() < now,
             "expires": ln.created_at + share.max_age()} for ln in links]
    return render(request, "explorer/share_list.html", {"rows": rows})


# -- compare ----------------------------------------------------------------------------------


@login_required
@require_GET
def compare(request: HttpRequest, cluster: str, hostname: str) -> HttpResponse:
    """Two snapshots of a host, or (``?with=HOST``) this host against another host of its cluster,
    such as the norm host of its layout group."""
    h = host_or_404(request, cluster, hostname)
    history = list(ingest.host_snapshots(h)[:200])
    ref = compare_pages.reference_host(h.cluster, request.GET.get("with"))
    if request.GET.get("with") and ref is None:
        messages.error(request, f"No host {request.GET['with']!r} in cluster {h.cluster.name!r}: comparing two "
                                "snapshots of this host instead.")
    b = ex.host_snapshot(h, _int(request.GET.get("b")))
    if ref is not None:
        a = ex.host_snapshot(ref, _int(request.GET.get("a")))
    else:
        a = ex.host_snapshot(h, _int(request.GET.get("a"))) if request.GET.get("a") else (b and ex.previous_snapshot(b))
    ctx = {"host": h, "history": history, "a": a, "b": b, "ref": ref,
           "history_a": list(ingest.host_snapshots(ref)[:200]) if ref else history,
           "norm": compare_pages.layout_norm(h.cluster, h)}
    if a is None or b is None:
        return render(request, "explorer/compare.html", ctx)
    doc_a, doc_b = ingest.get_snapshot_doc(a.pk), ingest.get_snapshot_doc(b.pk)
    diff = compare_docs(doc_a, doc_b)
    title_a = f"{ref.hostname}: snapshot {a.pk}" if ref else f"Before: snapshot {a.pk}"
    title_b = f"{h.hostname}: snapshot {b.pk}" if ref else f"After: snapshot {b.pk}"
    ctx.update({
        "diff": diff, "doc_a": doc_a, "doc_b": doc_b, "runs": run_lists.before_after(a, b),
        "fig_a": figures.host_figure_json(doc_a, highlight=diff["highlight_a"], height=460, title=title_a,
                                          plot_width=figure_labels.HALF_WIDTH_PX),
        "fig_b": figures.host_figure_json(doc_b, highlight=diff["highlight_b"], height=460, title=title_b,
                                          plot_width=figure_labels.HALF_WIDTH_PX),
    })
    return render(request, "explorer/compare.html", ctx)


def _parse_moment(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


@login_required
@require_GET
def cluster_compare(request: HttpRequest, cluster: str) -> HttpResponse:
    """The cluster at two moments: each host's snapshot in force then, compared; and the fabric
    discovery in force then, compared, when both moments have one. Both pickers always hold a
    moment: the last change by default, "after" now."""
    c = cluster_or_404(request, cluster)
    t_a, t_b = _parse_moment(request.GET.get("a")), _parse_moment(request.GET.get("b")) or timezone.now()
    a_raw, b_raw, chosen = request.GET.get("a", ""), request.GET.get("b", ""), None
    if not a_raw and not b_raw:
        t_a, chosen = compare_pages.compare_default(c)
    newest = compare_pages.newest_snapshot_time(c)
    a_raw = compare_pages.moment_value(t_a) if t_a else (compare_pages.moment_value(newest) if newest else a_raw)
    b_raw = compare_pages.moment_value(t_b)
    rows = []
    if t_a is not None:
        for h in Host.objects.filter(cluster=c).order_by("hostname"):
            sa, sb = ex.snapshot_at(h, t_a), ex.snapshot_at(h, t_b)
            if sa is None and sb is None:
                continue
            if sa is None or sb is None or sa.pk == sb.pk:
                rows.append({"host": h, "a": sa, "b": sb, "diff": None})
                continue
            rows.append({"host": h, "a": sa, "b": sb,
                         "diff": compare_docs(ingest.get_snapshot_doc(sa.pk), ingest.get_snapshot_doc(sb.pk))})
    rows.sort(key=lambda r: (not (r["diff"] and r["diff"]["changed"]), r["host"].hostname))  # changes first
    return render(request, "explorer/cluster_compare.html", {"cluster": c, "rows": rows, "t_a": t_a, "t_b": t_b,
                                                              "a_raw": a_raw, "b_raw": b_raw, "chosen": chosen,
                                                              "fabric": _fabric_change(c, t_a, t_b)})


FABRIC_LINES_SHOWN = 50  # fabric changes listed on the compare page; the API lists them all


def _fabric_change(c: Cluster, t_a: datetime | None, t_b: datetime) -> dict | None:
    """The fabric part of the cluster at two moments: the discovery in force at each and what
    changed between them in sentences; None unless both moments have a fabric."""
    if t_a is None:
        return None
    fa, fb = fabrics.latest_fabric(c, t_a), fabrics.latest_fabric(c, t_b)
    if fa is None or fb is None:
        return None
    out = {"a": fa, "b": fb, "diff": None, "lines": [], "more": 0, "page": fabrics.fabric_page_path(c.name),
           "api": reverse("api:cluster-fabric-compare", args=[c.name]) + f"?from={fa.pk}&to={fb.pk}"}
    if fa.pk != fb.pk:
        out["diff"] = compare_fabrics(fabrics.fabric_graph(fa), fabrics.fabric_graph(fb))
        out["lines"] = out["diff"]["summary"][:FABRIC_LINES_SHOWN]
        out["more"] = max(0, len(out["diff"]["summary"]) - FABRIC_LINES_SHOWN)
    return out


# -- paste ------------------------------------------------------------------------------------


def _section_error(exc: ParseError, section) -> dict:
    box_line = section.first_line + max(exc.line_no, 1) - 1
    return {"section": section.kind, "line_no": exc.line_no, "box_line": box_line, "line": exc.line,
            "reason": exc.reason}


def _paste_sections(texts: list[str]) -> tuple[dict[str, str], list[dict], list[tuple[int, Section]]]:
    """The report sections of the pasted boxes, each parsed once to check it, the errors, and the
    fabric outputs (``(box, section)``: stored as fabric uploads, not in the report).

    A kind pasted twice (in one box or in two) is refused, naming both places: a report holds
    one output of each command, and keeping either one silently would lose the other."""
    sections: dict[str, str] = {}
    where: dict[str, int] = {}
    errors: list[dict] = []
    fabric: list[tuple[int, Section]] = []
    parts = [(box, s) for box, text in enumerate(texts, start=1) for s in split_paste(text)]
    if not parts:
        errors.append({"reason": "Paste at least one command output (e.g. nvidia-smi topo -m), "
                                 "or choose an agent report file."})
    for box, s in parts:
        if s.kind in where and s.kind is not None:
            errors.append({"box": box, "box_line": s.first_line, "section": s.kind,
                           "reason": f"a second {s.kind} output (box {where[s.kind]} has one already): paste each "
                                     "command's output once, or remove one of them"})
            continue
        if s.error or s.kind is None:
            errors.append({"box": box, "box_line": s.first_line, "reason": s.error or "unknown kind"})
            continue
        try:
            PASTE_KINDS[s.kind].parse(s.text)
        except ParseError as exc:
            errors.append({"box": box, **_section_error(exc, s)})
            continue
        if s.kind in FABRIC_KINDS:
            fabric.append((box, s))
        else:
            sections[s.kind] = s.text
        where[s.kind] = box
    return sections, errors, fabric


class PasteRefused(Exception):
    """Why a paste cannot go into the cluster asked for, and the HTTP status to answer."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message, self.status = message, status


def _paste_target(request: HttpRequest, form: dict) -> tuple[Cluster | None, str | None]:
    """(existing cluster, or the name of a cluster to create): pasting takes the editor role in an
    existing cluster, and the permission to create clusters for a new one; raises PasteRefused."""
    name = (form["new_cluster"] or form["cluster"]).strip()
    visible = access.visible_clusters(request.user).filter(name=name).first()
    if visible is not None:
        if not access.has_role(request.user, visible, access.EDITOR):
            raise PasteRefused(f"Cluster: your role in {name!r} is {access.role_of(request.user, visible)}; "
                               "pasting reports needs editor. Ask one of its admins.", status=403)
        return visible, None
    if form["new_cluster"].strip():
        if not access.can_create_clusters(request.user):
            raise PasteRefused("Cluster: you may not create clusters; choose one where you are an editor.")
        if Cluster.objects.filter(name=name).exists():
            raise PasteRefused(f"Cluster: the name {name!r} is taken; choose another one.")
        try:
            ingest_services.check_cluster_name(name)
        except ValueError as exc:
            raise PasteRefused(f"Cluster: {exc}") from None
        return None, name
    raise PasteRefused(f"Cluster: no cluster {name!r} of yours; choose one where you are an editor.")


def _too_large(request: HttpRequest) -> bool:
    """Whether the request body is over the report limit (plus room for the form), read from its
    Content-Length before any of the body is read."""
    declared = request.META.get("CONTENT_LENGTH") or ""
    return declared.isdigit() and int(declared) > settings.MAX_REPORT_BYTES + 64 * 1024


@login_required
def paste(request: HttpRequest) -> HttpResponse:
    clusters_ = list(access.clusters_with_role(request.user, access.EDITOR).order_by("name"))
    can_create = access.can_create_clusters(request.user)
    ctx: dict = {"clusters": clusters_, "kinds": PASTE_KINDS, "errors": [], "form": {}, "can_create": can_create,
                 "max_bytes": settings.MAX_REPORT_BYTES}
    if request.method != "POST":
        ctx["form"] = {"cluster": clusters_[0].name if clusters_ else "",
                       "new_cluster": "" if clusters_ or not can_create else "pasted"}
        return render(request, "explorer/paste.html", ctx)
    if _too_large(request):
        ctx["errors"] = [{"reason": f"The upload is larger than the limit of {settings.MAX_REPORT_BYTES} bytes "
                                    "(TOPOWEB_MAX_REPORT_BYTES); nothing was read."}]
        return render(request, "explorer/paste.html", ctx, status=413)
    form = {k: request.POST.get(k, "") for k in ("cluster", "new_cluster", "hostname")}
    texts = [t for t in request.POST.getlist("text") if t.strip()]
    ctx["form"], ctx["texts"] = form, texts or [""]
    try:
        target, new_name = _paste_target(request, form)
    except PasteRefused as exc:
        ctx["errors"] = [{"reason": exc.message}]
        return render(request, "explorer/paste.html", ctx, status=exc.status)
    upload_file = request.FILES.get("report")
    if upload_file is not None:
        if upload_file.size > settings.MAX_REPORT_BYTES:
            ctx["errors"] = [{"reason": f"{upload_file.name} is {upload_file.size} bytes; the limit is "
                                        f"{settings.MAX_REPORT_BYTES} bytes (TOPOWEB_MAX_REPORT_BYTES)."}]
            return render(request, "explorer/paste.html", ctx, status=413)
        report, source_name, fabric = upload_file.read(), upload_file.name, []
    else:
        sections, errors, fabric = _paste_sections(texts)
        if not form["hostname"].strip() and (sections or any(s.kind in fabrics.HOST_KINDS for _, s in fabric)):
            errors.append({"reason": "Host name: give the name of the machine these outputs came from."})
        if errors:
            ctx["errors"] = errors
            return render(request, "explorer/paste.html", ctx, status=400)
        report = {"schema": ingest_reports.REPORT_SCHEMA, "hostname": form["hostname"].strip(),
                  "sections": sections, "meta": {"source": "web paste"}} if sections else None
        source_name = "paste"
    try:
        # A new cluster exists only if its first report is accepted: a failed paste creates nothing.
        with transaction.atomic():
            c = target
            if c is None:
                c = ingest_services.create_cluster(name=new_name)
                access.grant(cluster=c, role=access.ADMIN, username=request.user.get_username())
            upload = None
            if report is not None:
                upload, _created = ingest_services.submit_report(cluster=c, report=report, via=Upload.Via.WEB,
                                                                 user=request.user, source_name=source_name)
            stored = _paste_fabric(request, c, fabric, form["hostname"])
    except ingest_reports.ReportRejected as exc:
        ctx["errors"] = [{"reason": exc.message}]
        return render(request, "explorer/paste.html", ctx, status=exc.status)
    if stored:
        messages.success(request, _fabric_message(stored, c))
    if upload is None:
        return redirect(fabrics.fabric_page_path(c.name))
    return _after_paste(request, c, upload, ctx)


def _paste_fabric(request: HttpRequest, c: Cluster, fabric: list[tuple[int, Section]], hostname: str) -> list:
    """Store the pasted fabric outputs (read already) as fabric uploads of ``c``."""
    return [fabrics.submit_fabric(cluster=c, text=s.text, kind=s.kind, host=hostname.strip() or None,
                                  via=Upload.Via.WEB, user=request.user, source_name=f"paste (box {box})")
            for box, s in fabric]


def _fabric_message(stored: list, c: Cluster) -> str:
    """One line saying what the pasted fabric outputs became, and where the fabric page is."""
    parts = []
    for row, created in stored:
        what = row.kind + (f" of {row.host.hostname}" if row.host_id else "")
        summary = row.summary or {}
        counts = (f": {summary.get('switches', 0)} switches, {summary.get('host_adapters', 0)} host adapters, "
                  f"{summary.get('links', 0)} links" if summary else "")
        parts.append(f"{what}{counts} ({'stored as' if created else 'already stored:'} fabric upload {row.pk})")
    return f"Fabric: {'; '.join(parts)}. The cluster's fabric: {fabrics.fabric_page_path(c.name)}"


def _after_paste(request: HttpRequest, c: Cluster, upload: Upload, ctx: dict) -> HttpResponse:
    """Open the host page on the pasted report's snapshot. With in-process tasks (``make run``) the
    report is analysed here, within the report caps; with workers the request does no analysis
    and the host page says the report is being read."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        ingest_processing.process_upload(upload.pk)  # idempotent: a no-op if it ran on commit already
    upload.refresh_from_db(fields=["status", "error"])
    if upload.status == Upload.Status.FAILED:
        err = upload.error or {}
        ctx["errors"] = [{"section": err.get("section"), "line_no": err.get("line_no"), "line": err.get("line"),
                          "reason": err.get("reason")}]
        return render(request, "explorer/paste.html", ctx, status=400)
    url = reverse("explorer:host", args=[c.name, upload.host.hostname])
    snap = Snapshot.objects.filter(upload=upload).only("pk").first()
    return redirect(f"{url}?snapshot={snap.pk}" if snap else f"{url}?upload={upload.pk}")


@login_required
@require_POST
def paste_detect(request: HttpRequest) -> JsonResponse:
    text = request.POST.get("text", "")
    if len(text) > settings.MAX_REPORT_BYTES:
        return JsonResponse({"error": "text too large"}, status=413)
    return JsonResponse({"sections": [s.as_dict() for s in split_paste(text)]})


# -- capacity ---------------------------------------------------------------------------------


def capacity(request: HttpRequest) -> HttpResponse:
    """The capacity page; its logic (defaults, table, CSV, share links) is ``apps.explorer.capacity``."""
    return capacity_page.capacity(request)
