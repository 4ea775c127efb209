"""The vendored Plotly.js is the one the pinned plotly package ships (figures and library agree)."""

from __future__ import annotations

import re
from pathlib import Path

import plotly

VENDOR = Path(__file__).resolve().parent.parent / "static" / "vendor"


def test_vendored_plotly_matches_python_package() -> None:
    bundled = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    version = re.search(rb"plotly\.js v(\d+\.\d+\.\d+)", bundled.read_bytes()[:2000]).group(1).decode()
    vendored = VENDOR / f"plotly-{version}.min.js"
    assert vendored.exists(), f"static/vendor lacks plotly-{version}.min.js (the plotly package's Plotly.js)"
    assert vendored.read_bytes() == bundled.read_bytes()
