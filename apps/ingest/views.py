"""The one plain view of the ingest app: the node agent script, served for ``curl | python3 -``."""

from __future__ import annotations

from pathlib import Path

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

AGENT_PATH = Path(__file__).resolve().parent / "agent" / "topoweb_agent.py"


@require_GET
def agent_script(request: HttpRequest) -> HttpResponse:
    # Public on purpose: the script holds no secret, and a node has no login to fetch it with.
    response = HttpResponse(AGENT_PATH.read_bytes(), content_type="text/x-python; charset=utf-8")
    response["Content-Disposition"] = 'inline; filename="topoweb_agent.py"'
    return response
