"""The run pages: one run measured against its layout, and the paste page for measurements.

``run`` shows the verdict in one sentence, measured against expected per message size
(``run_figures``), the evidence lines, the diagnoses with the layout findings they tie to, and
links to the hosts and the path view of the slow pair. ``run_paste`` stores a pasted or uploaded
output through ``apps.ingest.runs.submit_run`` (editor role) and opens its page. The host,
cluster, compare and capacity pages list runs through ``apps.explorer.run_lists``.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from apps.domain.parsers import kinds_of
from apps.explorer import run_figures
from apps.explorer.run_lists import KIND_WORDS, VERDICT_WORDS
from apps.explorer.views import cluster_or_404
from apps.ingest import access, reports
from apps.ingest import runs as ingest_runs
from apps.ingest.models import Run



def _host_links(run: Run) -> tuple[list[dict], dict[str, str]]:
    """The run's hosts for the page (with their snapshot's page) and ``{run host name: path ref prefix}``."""
    rows, refs = [], {}
    by_name = {h["host"]: h for h in (run.result or {}).get("hosts") or []}
    for rh in run.run_hosts.select_related("host", "snapshot").all():
        entry = by_name.get(rh.hostname) or {}
        url = None
        if rh.host_id:
            url = reverse("explorer:host", args=[run.cluster.name, rh.host.hostname])
            if rh.snapshot_id:
                url += f"?snapshot={rh.snapshot_id}"
                refs[rh.hostname] = str(rh.snapshot_id)
        rows.append({"name": rh.hostname, "host": rh.host, "snapshot": rh.snapshot, "url": url,
                     "gpus": [g.get("gpu") or g.get("bdf") or g.get("device") for g in rh.gpus or []],
                     "nics": rh.nics or [], "expected": entry.get("expected_gbs"), "limit": entry.get("limit")})
    return rows, refs


def _slow_pair_url(result: dict, refs: dict[str, str]) -> str | None:
    """The path view of the result's slow pair, between the snapshots the check used."""
    pair = result.get("slow_pair") or {}
    ends = []
    for key in ("src", "dst"):
        host, _, gpu = str(pair.get(key) or "").rpartition("/")
        if host not in refs or not gpu:
            return None
        ends.append(f"{refs[host]}/{gpu}")
    return f"{reverse('explorer:path')}?src={ends[0]}&dst={ends[1]}"


def _evidence_of(result: dict) -> list[dict]:
    """Each finding with its evidence items inline (the page lists them under the finding)."""
    evidence = result.get("evidence") or []
    out = []
    for f in result.get("findings") or []:
        out.append({**f, "lines": [evidence[i] for i in f.get("evidence") or [] if 0 <= i < len(evidence)]})
    return out


@login_required
@require_GET
def run(request: HttpRequest, cluster: str, run_id: int) -> HttpResponse:
    c = cluster_or_404(request, cluster)
    item = Run.objects.filter(pk=run_id, cluster=c).select_related("cluster").first()
    if item is None:
        raise Http404(f"no run {run_id} in cluster {cluster!r}")
    result = item.result or {}
    hosts, refs = _host_links(item)
    return render(request, "explorer/run.html", {
        "run": item, "result": result, "hosts": hosts, "kind": KIND_WORDS.get(item.kind, item.kind or "unreadable"),
        "verdict": VERDICT_WORDS.get(item.verdict, ""), "findings": _evidence_of(result),
        "fig": run_figures.run_figure_json(result) if result else None,
        "path_url": _slow_pair_url(result, refs), "error_text": ingest_runs.run_error_text(item)
        if item.status == Run.Status.FAILED else "",
        "ok_lines": [e for e in result.get("evidence") or [] if e.get("cause") == "ok"],
    })


@login_required
def run_paste(request: HttpRequest) -> HttpResponse:
    """Paste or upload one measurement into a cluster where the person is an editor."""
    clusters = list(access.clusters_with_role(request.user, access.EDITOR).order_by("name"))
    ctx: dict = {"clusters": clusters, "kinds": kinds_of("run"), "errors": [], "max_bytes": settings.MAX_REPORT_BYTES,
                 "form": {"cluster": clusters[0].name if clusters else "", "kind": "", "hosts": "",
                          "collected_at": "", "text": ""}}
    if request.method != "POST":
        return render(request, "explorer/run_paste.html", ctx)
    form = {k: request.POST.get(k, "") for k in ("cluster", "kind", "hosts", "collected_at", "text")}
    ctx["form"] = form
    target = next((c for c in clusters if c.name == form["cluster"]), None)
    if target is None:
        ctx["errors"] = [f"Cluster: no cluster {form['cluster']!r} where you are an editor."]
        return render(request, "explorer/run_paste.html", ctx, status=400)
    text, name = form["text"], "paste"
    upload = request.FILES.get("file")
    if upload is not None:
        if upload.size > settings.MAX_REPORT_BYTES:
            ctx["errors"] = [f"{upload.name} is {upload.size} bytes; the limit is {settings.MAX_REPORT_BYTES} bytes."]
            return render(request, "explorer/run_paste.html", ctx, status=413)
        text, name = upload.read().decode("utf-8", errors="replace"), upload.name
    try:
        item, _created = ingest_runs.submit_run(cluster=target, text=text, kind=form["kind"] or None,
                                                hosts=form["hosts"] or None, collected_at=form["collected_at"] or None,
                                                via="web", user=request.user, source_name=name)
    except reports.ReportRejected as exc:
        ctx["errors"] = [exc.message]
        return render(request, "explorer/run_paste.html", ctx, status=exc.status)
    return redirect("explorer:run", cluster=target.name, run_id=item.pk)
