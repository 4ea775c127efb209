"""The vendored Plotly.js is the one the pinned plotly package ships (figures and library agree)."""

from __future__ import annotations

import re
from pathlib import Path

import plotly
import pytest

VENDOR = Path(__file__).resolve().parent.parent / "static" / "vendor"


def test_vendored_plotly_matches_python_package() -> None:
    bundled = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    version = re.search(rb"plotly\.js v(\d+\.\d+\.\d+)", bundled.read_bytes()[:2000]).group(1).decode()
    vendored = VENDOR / f"plotly-{version}.min.js"
    assert vendored.exists(), f"static/vendor lacks plotly-{version}.min.js (the plotly package's Plotly.js)"
    assert vendored.read_bytes() == bundled.read_bytes()


@pytest.mark.django_db
def test_api_docs_load_nothing_from_outside(client):
    """An air-gapped site gets a working /api/v1/docs: Swagger UI from topoweb's own static files."""
    import re

    body = client.get("/api/v1/docs").content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', body)
    assert any(s.endswith("swagger-ui-bundle.js") for s in sources), sources
    assert not [s for s in sources if re.match(r"(https?:)?//", s)], sources
