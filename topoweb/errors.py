"""What a client sees when something goes wrong: never a traceback, never the URL patterns.

``handler404`` and ``handler500`` are Django's error views for the whole site (``topoweb.urls``).
Under ``/api/`` they answer the API's JSON error shape ``{"error", "code"}``; elsewhere a short
page. A database that cannot be reached (restart, failover, ``max_connections``) is not a server
bug: the answer is ``503`` with ``Retry-After`` (the agent waits that long and sends again), and
the report is never half-written.
"""

from __future__ import annotations

import logging
import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 30  # a database restart or failover usually takes seconds to a minute
UNAVAILABLE_ERRORS = (OperationalError, InterfaceError)


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def unavailable_response(request: HttpRequest) -> HttpResponse:
    """503 with ``Retry-After``: JSON under /api/, a page elsewhere."""
    message = "the database is unavailable; nothing was stored, retry later"
    if is_api(request):
        response: HttpResponse = JsonResponse(
            {"error": message, "code": "unavailable", "retry_after": RETRY_AFTER_SECONDS}, status=503)
    else:
        response = _page("errors/503.html", 503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def _page(template: str, status: int) -> HttpResponse:
    # Standalone templates (no base.html): rendering them must not need the database.
    return HttpResponse(loader.get_template(template).render(), status=status)


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        return JsonResponse({"error": f"no such API endpoint: {request.path}", "code": "not_found"}, status=404)
    return _page("errors/404.html", 404)


def handler500(request: HttpRequest) -> HttpResponse:
    exc = sys.exc_info()[1]
    if isinstance(exc, UNAVAILABLE_ERRORS):
        log.warning("database unavailable while serving %s: %s", request.path, exc)
        return unavailable_response(request)
    if is_api(request):
        return JsonResponse({"error": "internal error; it has been logged", "code": "internal_error"}, status=500)
    return _page("errors/500.html", 500)
