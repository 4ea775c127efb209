"""The drawings of a snapshot as files, an endpoint of the JSON API (registered on it by ``topoweb.api``).

    GET  /api/v1/snapshots/{id}/figure/{name}.svg|.png   a drawing of the snapshot (viewer)

Names and formats are ``figure_export``'s (``host``, ``gpu_matrix``, ``nic_matrix``; SVG always,
PNG where it can be drawn here); a name it does not know answers 404, PNG where it cannot be drawn
501 ``png_unavailable`` with the reason.
"""

from __future__ import annotations

import re

from django.http import HttpRequest, HttpResponse
from ninja.security import django_auth

from apps.explorer import figure_export
from apps.ingest import access
from apps.ingest.models import Snapshot


def register(api, error) -> None:
    """Add the endpoint to ``api`` (``error(request, message, status, code, **details)`` answers errors)."""

    @api.get("/snapshots/{snapshot_id}/figure/{filename}", auth=django_auth, url_name="snapshot-figure",
             summary="A drawing of a snapshot as SVG or PNG (host, gpu_matrix, nic_matrix)")
    def figure(request: HttpRequest, snapshot_id: int, filename: str):
        s = Snapshot.objects.select_related("host", "host__cluster").filter(pk=snapshot_id).first()
        if s is None or not access.has_role(request.user, s.host.cluster, access.VIEWER):
            return error(request, f"no snapshot {snapshot_id}", 404, "not_found")
        name, _, fmt = filename.rpartition(".")
        if name not in figure_export.FIGURES or fmt not in figure_export.FORMATS:
            return error(request, f"no figure {filename!r}: the figures are "
                         f"{', '.join(n + '.svg|.png' for n in figure_export.FIGURES)}", 404, "not_found")
        try:
            body, content_type = figure_export.render(s.document, name, fmt)
        except figure_export.PngUnavailable as exc:
            return error(request, str(exc), 501, "png_unavailable")
        response = HttpResponse(body, content_type=content_type)
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", s.host.hostname)
        response["Content-Disposition"] = f'inline; filename="{stem}-{s.pk}-{name}.{fmt}"'
        return response
