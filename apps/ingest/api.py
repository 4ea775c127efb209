"""The report API, ``/api/v1/`` (django-ninja; OpenAPI page at ``/api/v1/docs``).

Write (agent token, ``Authorization: Bearer tw_...``):
    POST /api/v1/reports                       one topoweb.report/1 JSON document -> 202
    POST /api/v1/runs                          a measurement (also with a login and the editor role) -> 201
Read (logged-in session; the token that sent an upload may also read its status):
    GET  /api/v1/uploads/{id}                  status, error (section, line_no, line, reason)
    GET  /api/v1/uploads/{id}/report           the raw report as received (session only)
    GET  /api/v1/clusters                      clusters with counts
    GET  /api/v1/clusters/{cluster}/hosts      hosts with their latest snapshot summary
    GET  /api/v1/clusters/{cluster}/uploads    recent uploads (?status=failed)
    GET  /api/v1/clusters/{cluster}/hosts/{hostname}/snapshots
    GET  /api/v1/snapshots/{id}                the snapshot document (graph, findings, ...)
    GET  /api/v1/path?src=REF&dst=REF          REF = <snapshot id>/GPU<i> or <cluster>/<host>/GPU<i>
    GET  /api/v1/imports/{id}                  bulk import progress
    GET  /api/v1/runs/{id}                     a run, its verdict and evidence (session, or the token that sent it)
    GET  /api/v1/runs/{id}/raw                 the run's text exactly as received
    GET  /api/v1/clusters/{cluster}/runs       recent runs (?verdict=below_expected)
Fabric (write: agent token, or a login with the editor role; read: session, or the token that sent it):
    POST /api/v1/fabric                        ibnetdiscover, iblinkinfo, LLDP, ibdev2netdev... -> 201
    GET  /api/v1/fabric/{id}                   one fabric upload: summary, warnings, the parser's JSON
    GET  /api/v1/fabric/{id}/raw               its text exactly as received
    GET  /api/v1/clusters/{cluster}/fabric     every fabric upload, newest first, and the one in force
    GET  /api/v1/clusters/{cluster}/fabric/compare?from=ID&to=ID   what changed between two discoveries
    GET  /api/v1/clusters/{cluster}/fabric/job?hosts=...&algorithm=ring   a job's contention on the fabric
Placement (session): apps/ingest/api_place.py
    POST /api/v1/clusters/{cluster}/place      {"nodes", "gpus_per_node"} or {"gpus"}: hosts, GPUs, what to paste
Figures (session): apps/explorer/api_figures.py, added to this API by topoweb/api.py
    GET  /api/v1/snapshots/{id}/figure/{name}.svg|.png   the host drawing or a matrix, server-side

Every error is ``{"error": message, "code": code, ...}``; codes are listed in docs/ingestion.md.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Field, NinjaAPI, Schema, Status
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import HttpBearer, django_auth

from apps.domain.fabric_compare import compare_fabrics
from apps.ingest import access, fabrics, imports, ratelimit, reports, runs, selectors, services
from apps.ingest.models import AgentToken, Cluster, Fabric, Host, ImportJob, Run, Snapshot, Upload
from topoweb import errors

log = logging.getLogger(__name__)

api = NinjaAPI(
    title="topoweb API",
    version="1",
    urls_namespace="api",
    description="Node reports in, topology snapshots and GPU paths out. See docs/ingestion.md.",
)


class AgentTokenAuth(HttpBearer):
    """``Authorization: Bearer tw_...``: an agent token of one cluster."""

    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        found, reason = services.check_token(token)
        if found is None:
            request._topoweb_auth_reason = reason  # shown in the 401 body
        return found


token_auth = AgentTokenAuth()


def error(request: HttpRequest, message: str, status: int, code: str, **details: Any) -> HttpResponse:
    return api.create_response(request, {"error": message, "code": code, **details}, status=status)


@api.exception_handler(AuthenticationError)
def _unauthorized(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    reason = getattr(request, "_topoweb_auth_reason", None)
    if reason:
        return error(request, f"{reason}; ask an administrator for a token (manage.py issue_token)",
                     401, "invalid_token")
    return error(request, "authentication required: a logged-in session, or a Bearer agent token where accepted",
                 401, "unauthorized")


@api.exception_handler(NinjaValidationError)
def _invalid(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    fields = [".".join(str(p) for p in e.get("loc", ())[1:]) or str(e.get("loc")) for e in exc.errors]
    return error(request, f"invalid request: {', '.join(fields)}", 400, "invalid_field",
                 field=fields[0] if fields else None, detail=exc.errors)


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return error(request, str(exc), exc.status_code, "not_found" if exc.status_code == 404 else "error")


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    """No traceback reaches a client, with or without debug: a database outage is 503 with
    ``Retry-After``; anything else is logged and answered 500 JSON."""
    if isinstance(exc, errors.UNAVAILABLE_ERRORS):
        log.warning("database unavailable while serving %s: %s", request.path, exc)
        return errors.unavailable_response(request)
    log.exception("unexpected error while serving %s", request.path)
    return error(request, "internal error; it has been logged", 500, "internal_error")


# ---------------------------------------------------------------------------------------- schemas


class ReportIn(Schema):
    """topoweb.report/1 (documented here; the body is read and checked by services.submit_report)."""

    schema_: str = Field("topoweb.report/1", alias="schema")
    hostname: str
    collected_at: str | None = None
    agent_version: str | None = None
    meta: dict[str, Any] = {}
    sections: dict[str, str]
    unavailable: dict[str, str] = {}


class Accepted(Schema):
    upload_id: int
    status_url: str
    status: str
    duplicate: bool
    warnings: list[str] = []  # what was not used as sent, e.g. a collected_at ahead of the server's clock


class ErrorOut(Schema):
    error: str
    code: str


def _upload_url(request: HttpRequest, upload_id: int) -> str:
    return request.build_absolute_uri(reverse("api:upload-status", args=[upload_id]))


# ---------------------------------------------------------------------------------------- write


@api.post(
    "/reports", auth=token_auth, url_name="reports",
    response={202: Accepted, 400: ErrorOut, 401: ErrorOut, 413: ErrorOut, 429: ErrorOut},
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": ReportIn.model_json_schema()}}}},
    summary="Submit one node report (agent token)",
)
def post_report(request: HttpRequest):
    """Store one report verbatim (202). A resent identical report answers ``duplicate: true``
    with the original upload id. Parsing happens later; poll ``status_url``. A token over
    ``TOPOWEB_RATE_LIMIT_PER_MINUTE`` reports this minute gets 429 with ``Retry-After``."""
    limited = ratelimit.check_reports(request.auth.prefix)
    if limited is not None:
        response = error(request, f"too many reports with this token: at most {limited.limit} a minute "
                         f"(TOPOWEB_RATE_LIMIT_PER_MINUTE); retry after {limited.retry_after} s",
                         429, "rate_limited", retry_after=limited.retry_after)
        response["Retry-After"] = str(limited.retry_after)
        return response
    declared = request.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > settings.MAX_REPORT_BYTES:
        return error(request, f"report is {declared} bytes; the limit is {settings.MAX_REPORT_BYTES} bytes",
                     413, "too_large", limit=settings.MAX_REPORT_BYTES)
    token: AgentToken = request.auth
    try:
        upload, created = services.submit_report(
            cluster=token.cluster, report=request.body, via=Upload.Via.AGENT, token=token
        )
    except reports.ReportRejected as exc:
        return api.create_response(request, exc.as_dict(), status=exc.status)
    return Status(202, {"upload_id": upload.pk, "status_url": _upload_url(request, upload.pk),
                 "status": upload.status if created else Upload.objects.get(pk=upload.pk).status,
                 "duplicate": not created, "warnings": getattr(upload, "notices", [])})


# ---------------------------------------------------------------------------------------- read


@api.get("/uploads/{upload_id}", auth=[django_auth, token_auth], url_name="upload-status",
         summary="Status of an upload (session, or the token that sent it)")
def get_upload(request: HttpRequest, upload_id: int):
    upload = Upload.objects.select_related("cluster", "host").defer("raw").filter(pk=upload_id).first()
    if isinstance(request.auth, AgentToken):
        if upload is None or upload.token_id != request.auth.pk:
            # A token sees only its own uploads; do not tell it whether others exist.
            return error(request, f"no upload {upload_id} sent with this token", 404, "not_found")
    elif upload is None or not access.has_role(request.user, upload.cluster, access.VIEWER):
        return error(request, f"no upload {upload_id}", 404, "not_found")
    status = selectors.upload_status(upload)
    # an unchanged re-report made no snapshot: it confirmed its host's latest one (processing.py)
    status["unchanged"] = upload.same_as_id is not None
    if upload.same_as_id is not None:
        status["snapshot_id"] = upload.same_as_id
    return status


@api.get("/uploads/{upload_id}/report", auth=django_auth, url_name="upload-report",
         summary="The raw report exactly as received")
def get_upload_report(request: HttpRequest, upload_id: int):
    upload = (Upload.objects.select_related("cluster").filter(pk=upload_id)
              .only("raw", "raw_pruned_at", "same_as", "cluster").first())
    if upload is None or not access.has_role(request.user, upload.cluster, access.VIEWER):
        return error(request, f"no upload {upload_id}", 404, "not_found")
    if upload.raw_pruned_at is not None:  # an unchanged re-report past TOPOWEB_RAW_RETENTION_DAYS
        return error(request, f"upload {upload_id} repeated the layout of snapshot {upload.same_as_id}; its raw text "
                     f"was pruned on {upload.raw_pruned_at:%Y-%m-%d} (TOPOWEB_RAW_RETENTION_DAYS): that snapshot's "
                     "upload holds the same report", 410, "pruned", snapshot_id=upload.same_as_id)
    return HttpResponse(upload.raw.encode("utf-8"), content_type="application/json; charset=utf-8")


def _cluster_or_404(request: HttpRequest, name: str) -> Cluster:
    """The cluster of that name if the signed-in person may view it; else 404 (it does not exist for them)."""
    cluster = access.visible_clusters(request.user).filter(name=name).first()
    if cluster is None:
        raise HttpError(404, f"no cluster {name!r}")
    return cluster


@api.get("/clusters", auth=django_auth, url_name="clusters", summary="Clusters with counts")
def list_clusters(request: HttpRequest):
    return [
        {"name": o.cluster.name, "description": o.cluster.description, "hosts": o.host_count,
         "snapshots": o.snapshot_count, "uploads": o.upload_count, "failed_uploads": o.failed_upload_count,
         "pending_uploads": o.pending_upload_count, "last_report_at": o.last_report_at}
        for o in selectors.clusters_overview(access.visible_clusters(request.user))
    ]


def _snapshot_summary(s: Snapshot) -> dict:
    return {"id": s.pk, "upload_id": s.upload_id, "collected_at": s.collected_at, "built_at": s.built_at,
            "fingerprint": s.fingerprint, "gpu_count": s.gpu_count, "gpu_model": s.gpu_model,
            "nic_count": s.nic_count, "active_nic_count": s.active_nic_count, "nic_models": s.nic_models,
            "findings": s.severity_counts}


@api.get("/clusters/{cluster}/hosts", auth=django_auth, url_name="cluster-hosts",
         summary="Hosts of a cluster with their latest snapshot")
def list_hosts(request: HttpRequest, cluster: str):
    c = _cluster_or_404(request, cluster)
    latest = {s.host_id: s for s in selectors.latest_snapshots(c)}
    return [
        {"hostname": h.hostname, "description": h.description, "last_seen_at": h.last_seen_at,
         "latest_snapshot": _snapshot_summary(latest[h.pk]) if h.pk in latest else None}
        for h in Host.objects.filter(cluster=c).order_by("hostname")
    ]


@api.get("/clusters/{cluster}/uploads", auth=django_auth, url_name="cluster-uploads",
         summary="Recent uploads of a cluster (newest first, at most 500)")
def list_uploads(request: HttpRequest, cluster: str, status: str | None = None):
    c = _cluster_or_404(request, cluster)
    qs = Upload.objects.filter(cluster=c).select_related("host", "cluster").defer("raw")
    if status:
        if status not in Upload.Status.values:
            return error(request, f"status must be one of {', '.join(Upload.Status.values)}", 400,
                         "invalid_field", field="status")
        qs = qs.filter(status=status)
    return [selectors.upload_status(u) for u in qs[:500]]


@api.get("/clusters/{cluster}/hosts/{hostname}/snapshots", auth=django_auth, url_name="host-snapshots",
         summary="Snapshots of a host, newest first")
def list_snapshots(request: HttpRequest, cluster: str, hostname: str):
    host = Host.objects.filter(cluster__in=access.visible_clusters(request.user), cluster__name=cluster,
                               hostname=hostname).first()
    if host is None:
        return error(request, f"no host {hostname!r} in cluster {cluster!r}", 404, "not_found")
    return [_snapshot_summary(s) for s in selectors.host_snapshots(host)]


@api.get("/snapshots/{snapshot_id}", auth=django_auth, url_name="snapshot",
         summary="A snapshot and its document (graph, findings, paths, estimate)")
def get_snapshot(request: HttpRequest, snapshot_id: int):
    s = Snapshot.objects.select_related("host", "host__cluster").filter(pk=snapshot_id).first()
    if s is None or not access.has_role(request.user, s.host.cluster, access.VIEWER):
        return error(request, f"no snapshot {snapshot_id}", 404, "not_found")
    return {**_snapshot_summary(s), "cluster": s.host.cluster.name, "hostname": s.host.hostname,
            "document": s.document}


@api.get("/path", auth=django_auth, url_name="path",
         summary="Path between two GPUs (same or different hosts)")
def get_path(request: HttpRequest, src: str = "", dst: str = ""):
    """``src``/``dst``: ``<snapshot id>/GPU<i>`` or ``<cluster>/<host>/GPU<i>`` (latest snapshot)."""
    for name, value in (("src", src), ("dst", dst)):
        if not value:
            return error(request, f"{name}: missing; e.g. ?src=demo/h100-a01/GPU0&dst=12/GPU5", 400,
                         "invalid_field", field=name)
    try:
        return selectors.path_between_refs(src, dst, user=request.user)
    except selectors.RefError as exc:
        return error(request, exc.message, exc.status, "not_found" if exc.status == 404 else "invalid_ref")
    except (KeyError, ValueError) as exc:
        return error(request, f"cannot compute this path: {exc}", 400, "invalid_ref")


@api.get("/imports/{job_id}", auth=django_auth, url_name="import-job", summary="Bulk import progress")
def get_import(request: HttpRequest, job_id: int):
    job = ImportJob.objects.select_related("cluster").filter(pk=job_id).first()
    if job is None or not access.has_role(request.user, job.cluster, access.VIEWER):
        return error(request, f"no import job {job_id}", 404, "not_found")
    return {"id": job.pk, "cluster": job.cluster.name, "source_name": job.source_name, "status": job.status,
            "total": job.total, "processed": job.processed, "created": job.created_count,
            "duplicates": job.duplicate_count, "rejected": job.failed_count, "errors": job.errors,
            "errors_omitted": imports.import_errors_omitted(job),
            "message": job.message, "created_at": job.created_at, "started_at": job.started_at,
            "finished_at": job.finished_at}


# ---------------------------------------------------------------------------------------- runs


class RunIn(Schema):
    """A measurement (documented here; the body is read and checked by ``runs.submit_run``)."""

    kind: str | None = None  # nccl_tests | nccl_log | perftest | p2p_bandwidth; detected when left out
    text: str  # the output exactly as the tool printed it
    cluster: str | None = None  # with a login: the cluster (editor role); a token writes into its own
    hosts: list[str] | dict[str, str] | None = None  # where it ran, when the output does not say
    collected_at: str | None = None  # when it was measured (ISO 8601)
    name: str | None = None  # a file name, shown with line numbers


class RunAccepted(Schema):
    run_id: int
    status: str
    kind: str | None
    verdict: str | None
    reason: str | None
    duplicate: bool
    url: str
    page: str


class RunUnreadable(Schema):
    error: str  # FILE:LINE: reason
    code: str
    run_id: int
    line_no: int
    line: str
    reason: str


def _run_urls(request: HttpRequest, run: Run) -> dict:
    return {"url": request.build_absolute_uri(reverse("api:run", args=[run.pk])),
            "page": request.build_absolute_uri(reverse("explorer:run", args=[run.cluster.name, run.pk]))}


def _text_body(request: HttpRequest, limit: int | None = None, setting: str = "TOPOWEB_MAX_REPORT_BYTES") -> dict | HttpResponse:
    """The JSON object of a posted text (a run, a fabric output), or the error to answer: 429 for a
    token over ``TOPOWEB_RATE_LIMIT_PER_MINUTE``, 413 for a body over the size limit (read from its
    Content-Length before the body is; ``limit`` bytes of text, by default ``TOPOWEB_MAX_REPORT_BYTES``),
    400 for a body that is not a JSON object."""
    limit = settings.MAX_REPORT_BYTES if limit is None else limit
    if isinstance(request.auth, AgentToken):
        limited = ratelimit.check_reports(request.auth.prefix)
        if limited is not None:
            response = error(request, f"too many posts with this token: at most {limited.limit} a minute "
                             f"(TOPOWEB_RATE_LIMIT_PER_MINUTE); retry after {limited.retry_after} s",
                             429, "rate_limited", retry_after=limited.retry_after)
            response["Retry-After"] = str(limited.retry_after)
            return response
    declared = request.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit + 64 * 1024:
        return error(request, f"body is {declared} bytes; the limit is {limit} bytes of text ({setting})",
                     413, "too_large", limit=limit)
    try:
        body = json.loads(request.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return error(request, f"body is not JSON: {exc}", 400, "not_json")
    if not isinstance(body, dict):
        return error(request, "body must be a JSON object {\"text\": ...}", 400, "invalid_field", field="(root)")
    return body


def _run_target(request: HttpRequest, body: dict, what: str = "run") -> Cluster | HttpResponse:
    """The cluster a posted run (or fabric upload: ``what``) goes into: the token's own, or the named
    one where the signed-in person is an editor (404 when they may not see it, 403 when they may
    only view it)."""
    name = body.get("cluster")
    if isinstance(request.auth, AgentToken):
        if name not in (None, "", request.auth.cluster.name):
            return error(request, f"cluster: this token writes into cluster {request.auth.cluster.name!r} only", 400,
                         "invalid_field", field="cluster")
        return request.auth.cluster
    if not isinstance(name, str) or not name:
        return error(request, f"cluster: name the cluster to store the {what} in", 400, "invalid_field",
                     field="cluster")
    cluster = access.visible_clusters(request.user).filter(name=name).first()
    if cluster is None:
        return error(request, f"no cluster {name!r}", 404, "not_found")
    if not access.has_role(request.user, cluster, access.EDITOR):
        return error(request, f"your role in cluster {name!r} is {access.role_of(request.user, cluster)}; submitting "
                     f"{what}s needs editor", 403, "forbidden")
    return cluster


@api.post(
    "/runs", auth=[token_auth, django_auth], url_name="runs",
    response={200: RunAccepted, 201: RunAccepted, 400: RunUnreadable | ErrorOut, 401: ErrorOut, 403: ErrorOut,
              404: ErrorOut, 413: ErrorOut, 429: ErrorOut},
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": RunIn.model_json_schema()}}}},
    summary="Submit a measurement: nccl-tests, an NCCL log, perftest or a P2P test (agent token or editor login)",
)
def post_run(request: HttpRequest):
    """Store the text verbatim, read it and check it against the layouts of the hosts it touched:
    201 with the verdict (200 and ``duplicate: true`` for a text already stored). Text that cannot
    be read answers 400 with ``FILE:LINE: reason`` and the line; it is stored all the same."""
    body = _text_body(request)
    if isinstance(body, HttpResponse):
        return body
    target = _run_target(request, body)
    if isinstance(target, HttpResponse):
        return target
    token = request.auth if isinstance(request.auth, AgentToken) else None
    try:
        run, created = runs.submit_run(
            cluster=target, text=body.get("text"), kind=body.get("kind"), hosts=body.get("hosts"),
            collected_at=body.get("collected_at"), via=Upload.Via.AGENT if token else Upload.Via.WEB, token=token,
            user=None if token else request.user, source_name=str(body.get("name") or "")[:500])
    except reports.ReportRejected as exc:
        return api.create_response(request, exc.as_dict(), status=exc.status)
    if run.status == Run.Status.FAILED:
        e = run.error or {}
        return Status(400, {"error": runs.run_error_text(run), "code": "unreadable_run", "run_id": run.pk,
                            "line_no": e.get("line_no", 0), "line": e.get("line", ""), "reason": e.get("reason", "")})
    return Status(201 if created else 200, {"run_id": run.pk, "status": run.status, "kind": run.kind,
                                            "verdict": run.verdict or None, "reason": run.reason or None,
                                            "duplicate": not created, **_run_urls(request, run)})


def _run_or_404(request: HttpRequest, run_id: int) -> Run | HttpResponse:
    run = Run.objects.select_related("cluster").filter(pk=run_id).first()
    if isinstance(request.auth, AgentToken):
        if run is None or run.token_id != request.auth.pk:
            return error(request, f"no run {run_id} sent with this token", 404, "not_found")
    elif run is None or not access.has_role(request.user, run.cluster, access.VIEWER):
        return error(request, f"no run {run_id}", 404, "not_found")
    return run


@api.get("/runs/{run_id}", auth=[django_auth, token_auth], url_name="run",
         summary="A run: measured, expected, verdict and evidence (session, or the token that sent it)")
def get_run(request: HttpRequest, run_id: int):
    run = _run_or_404(request, run_id)
    if isinstance(run, HttpResponse):
        return run
    return {**selectors.run_summary(run), "result": run.result, **_run_urls(request, run)}


@api.get("/runs/{run_id}/raw", auth=django_auth, url_name="run-raw", summary="The run's text exactly as received")
def get_run_raw(request: HttpRequest, run_id: int):
    run = _run_or_404(request, run_id)
    if isinstance(run, HttpResponse):
        return run
    return HttpResponse(run.raw.encode("utf-8"), content_type="text/plain; charset=utf-8")


@api.get("/clusters/{cluster}/runs", auth=django_auth, url_name="cluster-runs",
         summary="Recent runs of a cluster (newest first, at most 500)")
def list_runs(request: HttpRequest, cluster: str, verdict: str | None = None):
    c = _cluster_or_404(request, cluster)
    if verdict and verdict not in Run.Verdict.values:
        return error(request, f"verdict must be one of {', '.join(Run.Verdict.values)}", 400, "invalid_field",
                     field="verdict")
    return [selectors.run_summary(r) for r in selectors.cluster_runs(c, limit=500, verdict=verdict)]


# ---------------------------------------------------------------------------------------- fabric


class FabricIn(Schema):
    """A fabric output (documented here; the body is read and checked by ``fabrics.submit_fabric``)."""

    text: str  # the output exactly as the tool printed it
    kind: str | None = None  # ibnetdiscover | iblinkinfo | ibswitches | ibhosts | ibnodes | lldpctl_json |
    #                          lldpcli_neighbors | ibdev2netdev; detected when left out
    host: str | None = None  # the host a per-host output (LLDP, ibdev2netdev) is about; ignored for discoveries
    collected_at: str | None = None  # when it was taken (ISO 8601)
    source_name: str | None = None  # a file name, shown with line numbers
    cluster: str | None = None  # with a login: the cluster (editor role); a token writes into its own


class FabricAccepted(Schema):
    fabric_id: int
    status: str
    kind: str | None
    host: str | None
    duplicate: bool
    warnings: list[str]
    summary: dict | None
    in_force: bool
    url: str
    raw_url: str
    page: str


class FabricUnreadable(Schema):
    error: str  # FILE:LINE: reason
    code: str
    fabric_id: int
    line_no: int
    line: str
    reason: str


def _fabric_urls(request: HttpRequest, row: Fabric) -> dict:
    return {"url": request.build_absolute_uri(reverse("api:fabric", args=[row.pk])),
            "raw_url": request.build_absolute_uri(reverse("api:fabric-raw", args=[row.pk])),
            "page": request.build_absolute_uri(fabrics.fabric_page_path(row.cluster.name))}


@api.post(
    "/fabric", auth=[token_auth, django_auth], url_name="fabric-upload",
    response={200: FabricAccepted, 201: FabricAccepted, 400: FabricUnreadable | ErrorOut, 401: ErrorOut,
              403: ErrorOut, 404: ErrorOut, 413: ErrorOut, 429: ErrorOut},
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": FabricIn.model_json_schema()}}}},
    summary="Submit a fabric output: ibnetdiscover, iblinkinfo, ibswitches/ibhosts/ibnodes, LLDP, ibdev2netdev "
            "(agent token or editor login)",
)
def post_fabric(request: HttpRequest):
    """Store the text verbatim and read it: 201 with the stored id, the summary of a discovery and
    its warnings (200 and ``duplicate: true`` for an output already stored). Text that cannot be
    read answers 400 with ``FILE:LINE: reason`` and the line; it is stored all the same."""
    body = _text_body(request, settings.MAX_FABRIC_BYTES, "TOPOWEB_MAX_FABRIC_BYTES")
    if isinstance(body, HttpResponse):
        return body
    target = _run_target(request, body, what="fabric upload")
    if isinstance(target, HttpResponse):
        return target
    token = request.auth if isinstance(request.auth, AgentToken) else None
    try:
        row, created = fabrics.submit_fabric(
            cluster=target, text=body.get("text"), kind=body.get("kind"), host=body.get("host"),
            collected_at=body.get("collected_at"), via=Upload.Via.AGENT if token else Upload.Via.WEB, token=token,
            user=None if token else request.user, source_name=str(body.get("source_name") or "")[:500])
    except reports.ReportRejected as exc:
        return api.create_response(request, exc.as_dict(), status=exc.status)
    if row.status == Fabric.Status.FAILED:
        e = row.error or {}
        return Status(400, {"error": fabrics.fabric_error_text(row), "code": "unreadable_fabric", "fabric_id": row.pk,
                            "line_no": e.get("line_no", 0), "line": e.get("line", ""), "reason": e.get("reason", "")})
    in_force = fabrics.latest_fabric(target)
    return Status(201 if created else 200, {
        "fabric_id": row.pk, "status": row.status, "kind": row.kind or None,
        "host": row.host.hostname if row.host_id else None, "duplicate": not created, "warnings": row.warnings,
        "summary": row.summary, "in_force": in_force is not None and in_force.pk == row.pk, **_fabric_urls(request, row)})


def _fabric_or_404(request: HttpRequest, fabric_id: int) -> Fabric | HttpResponse:
    row = Fabric.objects.select_related("cluster", "host").defer("raw").filter(pk=fabric_id).first()
    if isinstance(request.auth, AgentToken):
        if row is None or row.token_id != request.auth.pk:
            return error(request, f"no fabric upload {fabric_id} sent with this token", 404, "not_found")
    elif row is None or not access.has_role(request.user, row.cluster, access.VIEWER):
        return error(request, f"no fabric upload {fabric_id}", 404, "not_found")
    return row


def _hosts_json(joined: fabrics.ClusterFabric) -> dict:
    return {"attached": joined.attachments["hosts"], "unmatched_ports": joined.attachments["unmatched"],
            "lldp": joined.attachments["lldp"], "unmatched_hosts": joined.unmatched_hosts,
            "unclaimed": joined.unclaimed}


@api.get("/fabric/{fabric_id}", auth=[django_auth, token_auth], url_name="fabric",
         summary="A fabric upload: summary, warnings, the parser's JSON and, for a discovery, the hosts joined to it")
def get_fabric(request: HttpRequest, fabric_id: int):
    """``hosts`` (discoveries): each host's adapters and the leaf ports they are cabled to
    (``match``: ``port_guid``/``node_guid`` exact, ``name`` from node descriptions), the hosts no
    adapter matches and the adapters no host claims; for the fabric in force the hosts' latest
    snapshots, for an older one those in force when it was taken."""
    row = _fabric_or_404(request, fabric_id)
    if isinstance(row, HttpResponse):
        return row
    out = {**fabrics.fabric_summary(row), "document": row.document, "hosts": None, **_fabric_urls(request, row)}
    if row.status == Fabric.Status.OK and row.kind in fabrics.GRAPH_KINDS:
        in_force = fabrics.latest_fabric(row.cluster)
        at = None if in_force is not None and in_force.pk == row.pk else row.taken_at
        out["hosts"] = _hosts_json(fabrics.cluster_fabric(row.cluster, at, fabric=row))
    return out


@api.get("/fabric/{fabric_id}/raw", auth=django_auth, url_name="fabric-raw",
         summary="The fabric output exactly as received")
def get_fabric_raw(request: HttpRequest, fabric_id: int):
    row = _fabric_or_404(request, fabric_id)
    if isinstance(row, HttpResponse):
        return row
    raw = Fabric.objects.values_list("raw", flat=True).get(pk=row.pk)
    return HttpResponse(raw.encode("utf-8"), content_type="text/plain; charset=utf-8")


@api.get("/clusters/{cluster}/fabric", auth=django_auth, url_name="cluster-fabric",
         summary="Fabric uploads of a cluster, newest first (at most 500), and the discovery in force")
def list_fabric(request: HttpRequest, cluster: str, kind: str | None = None):
    c = _cluster_or_404(request, cluster)
    if kind and kind not in fabrics.FABRIC_KINDS:
        return error(request, f"kind must be one of {', '.join(fabrics.FABRIC_KINDS)}", 400, "invalid_field",
                     field="kind")
    in_force = fabrics.latest_fabric(c)
    rows = fabrics.fabric_versions(c, kinds=[kind] if kind else None)[:500]
    return {"cluster": c.name, "in_force": in_force.pk if in_force else None, "page": request.build_absolute_uri(
        fabrics.fabric_page_path(c.name)), "versions": [fabrics.fabric_summary(r) for r in rows]}


@api.get("/clusters/{cluster}/fabric/job", auth=django_auth, url_name="cluster-fabric-job",
         summary="A job's hosts on the fabric in force: leaf uplink contention, rail alignment, L04/L08, a verdict")
def fabric_job(request: HttpRequest, cluster: str, hosts: str = "", algorithm: str = "ring"):
    """``hosts``: the job's hosts in rank order (names, comma or space separated, or globs such as
    ``h100-n0*``); ``algorithm``: ``ring`` or ``tree``. The answer is ``fabrics.job_on_fabric``:
    ``contention`` (``apps.domain.fabric_jobs.job_contention``), ``findings`` (L04, L08),
    ``leaf_rails``, ``verdict``, ``hosts`` as matched and ``unmatched``. 404 without a discovery."""
    c = _cluster_or_404(request, cluster)
    if not hosts.strip():
        return error(request, "hosts: missing; e.g. ?hosts=h100-n0*&algorithm=ring", 400, "invalid_field",
                     field="hosts")
    try:
        report = fabrics.job_on_fabric(c, hosts, algorithm)
    except ValueError as exc:
        field = "algorithm" if str(exc).startswith("algorithm") else "hosts"
        return error(request, str(exc), 400, "invalid_field", field=field)
    if report is None:
        return error(request, f"cluster {c.name!r} has no readable fabric discovery", 404, "not_found")
    return report


def _discovery_of(request: HttpRequest, c: Cluster, name: str, value: str) -> Fabric | HttpResponse | None:
    """The readable discovery ``?<name>=<id>`` of cluster ``c``; None when the parameter is absent."""
    if not value:
        return None
    if not value.isdigit():
        return error(request, f"{name}: a fabric upload id, e.g. ?from=3&to=7", 400, "invalid_field", field=name)
    row = Fabric.objects.select_related("cluster").defer("raw", "document").filter(pk=int(value), cluster=c).first()
    if row is None:
        return error(request, f"{name}: no fabric upload {value} in cluster {c.name!r}", 404, "not_found")
    if row.status != Fabric.Status.OK or row.kind not in fabrics.DISCOVERY_KINDS:
        what = "unreadable" if row.status != Fabric.Status.OK else row.kind
        return error(request, f"{name}: fabric upload {value} is {what}; compare two readable discoveries "
                     f"({', '.join(fabrics.DISCOVERY_KINDS)})", 400, "invalid_field", field=name)
    return row


@api.get("/clusters/{cluster}/fabric/compare", auth=django_auth, url_name="cluster-fabric-compare",
         summary="What changed in the fabric between two discoveries (?from=ID&to=ID)")
def compare_fabric(request: HttpRequest, cluster: str):
    """``to`` defaults to the discovery in force, ``from`` to the one before ``to``. The answer is
    ``apps.domain.fabric_compare.compare_fabrics``: links down and up, cables moved, width/speed
    and state changes, switches and adapters added or removed, one sentence each in ``summary``."""
    c = _cluster_or_404(request, cluster)
    rows = {}
    for name in ("from", "to"):
        found = _discovery_of(request, c, name, request.GET.get(name, ""))
        if isinstance(found, HttpResponse):
            return found
        rows[name] = found
    rows["to"] = rows["to"] or fabrics.latest_fabric(c)
    if rows["to"] is None:
        return error(request, f"cluster {c.name!r} has no readable fabric discovery", 404, "not_found")
    rows["from"] = rows["from"] or fabrics.previous_fabric(rows["to"])
    if rows["from"] is None:
        return error(request, f"from: fabric upload {rows['to'].pk} is the first discovery of cluster {c.name!r}; "
                     "there is nothing before it to compare with", 400, "invalid_field", field="from")
    diff = compare_fabrics(fabrics.fabric_graph(rows["from"]), fabrics.fabric_graph(rows["to"]))
    return {"cluster": c.name, "from": fabrics.fabric_summary(rows["from"]), "to": fabrics.fabric_summary(rows["to"]),
            **diff}


from apps.ingest import api_roles  # noqa: E402  (PUT /snapshots/{id}/nic_roles)
api_roles.register(api, error)
from apps.ingest import api_plans  # noqa: E402,F401  (POST /whatif, plans)
from apps.ingest import api_place  # noqa: E402  (POST /clusters/{c}/place)
api_place.register(api, error)
