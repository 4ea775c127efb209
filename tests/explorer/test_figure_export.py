"""Server-side drawings (apps/explorer/figure_export.py, figure_svg.py) and
``GET /api/v1/snapshots/{id}/figure/{name}.svg|.png``; and the browser's own PNG button.

The document is the real analysis of a demo fleet host (apps/ingest/demo/fleet.py: a real capture's
layout under a SYNTHETIC name): 8 H100 GPUs, 8 NICs."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
from defusedxml import ElementTree
from django.core.management import call_command

from apps.domain.analysis import analyze_host
from apps.explorer import figure_export
from apps.explorer.figure_svg import spec_svg
from apps.ingest.demo.fleet import fleet_hosts
from apps.ingest.models import Snapshot

SVG = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="module")
def doc() -> dict:
    host = next(h for h in fleet_hosts() if h.hostname == "h100-n01")
    return analyze_host(host.snapshots[-1].sections, host.hostname).to_dict()


def _texts(svg: bytes | str) -> list[str]:
    root = ElementTree.fromstring(svg)
    assert root.tag == SVG + "svg"
    return ["".join(t.itertext()) for t in root.iter(SVG + "text")]


def test_the_host_drawing_as_svg_names_every_gpu_and_nic(doc):
    body, kind = figure_export.render(doc, "host", "svg")
    assert kind.startswith("image/svg+xml")
    texts = _texts(body)
    for g in doc["gpus"]:
        assert g["name"] in texts
    for n in doc["nics"]:
        assert any(n["name"] in t for t in texts), n["name"]
    root = ElementTree.fromstring(body)
    assert len(list(root.iter(SVG + "polyline"))) > 8          # PCIe links and NVLink bundles
    assert any(t.startswith("h100-n01") for t in texts)          # the title


def test_the_matrices_as_svg_have_one_cell_per_pair(doc):
    n = len(doc["gpus"])
    root = ElementTree.fromstring(figure_export.render(doc, "gpu_matrix", "svg")[0])
    cells = [r for r in root.iter(SVG + "rect") if r.get("width") != str(figure_export.WIDTH)]
    assert len(cells) == n * n
    assert "NV18" in [t.text for t in root.iter(SVG + "text")]
    nics = len({c["nic"] for c in doc["gpu_nic_matrix"]})
    root = ElementTree.fromstring(figure_export.render(doc, "nic_matrix", "svg")[0])
    assert len([r for r in root.iter(SVG + "rect") if r.get("width") != str(figure_export.WIDTH)]) == n * nics


def test_svg_text_is_escaped():
    """Plotly text is HTML-like: tags (``<b>``, a stray ``<script>``) are dropped, entities the
    figures escaped (a device name with ``<``) come out as the characters, escaped again in SVG."""
    spec = {"data": [{"type": "scatter", "mode": "markers+text", "x": [0], "y": [0],
                      "text": ["&lt;script&gt; &amp; x<script>"], "name": 'a "name"'}],
            "layout": {"title": {"text": "<b>t</b> & u"}, "height": 200}}
    svg = spec_svg(spec)
    assert "<script>" not in svg and "&lt;script&gt; &amp; x" in svg
    assert _texts(svg)[:2] == ["t & u", "<script> & x"]


def test_png_without_kaleido_says_why(doc, monkeypatch):
    monkeypatch.setitem(sys.modules, "kaleido", None)  # an import of it now fails, as where it is not installed
    with pytest.raises(figure_export.PngUnavailable, match="kaleido is not installed"):
        figure_export.render(doc, "host", "png")


@pytest.mark.browser
def test_png_is_drawn_offline_through_the_system_chromium(doc):
    """kaleido drives the system's Chromium (Debian's, installed by ``make test``): a real PNG of
    the figure's width, drawn without any network."""
    body, kind = figure_export.render(doc, "nic_matrix", "png")
    assert kind == "image/png" and body[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(body[16:20], "big")  # the IHDR chunk
    assert width == figure_export.WIDTH


def test_the_api_serves_svg_and_answers_501_for_png_it_cannot_draw(db, logged_in_client, client,
                                                                  django_user_model, monkeypatch,
                                                                  django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        call_command("load_demo", stdout=io.StringIO(), stderr=io.StringIO())
    s = Snapshot.objects.filter(host__hostname="h100-n01").order_by("-collected_at").first()
    r = logged_in_client.get(f"/api/v1/snapshots/{s.pk}/figure/host.svg")
    assert r.status_code == 200 and r["Content-Type"].startswith("image/svg+xml")
    assert "GPU7" in _texts(r.content)
    assert logged_in_client.get(f"/api/v1/snapshots/{s.pk}/figure/gpu_matrix.svg").status_code == 200

    def no_png(spec):
        raise figure_export.PngUnavailable("PNG export needs kaleido")
    monkeypatch.setattr(figure_export, "png_bytes", no_png)
    png = logged_in_client.get(f"/api/v1/snapshots/{s.pk}/figure/nic_matrix.png")
    assert png.status_code == 501 and png.json()["code"] == "png_unavailable" and "kaleido" in png.json()["error"]
    missing = logged_in_client.get(f"/api/v1/snapshots/{s.pk}/figure/fabric.svg")
    assert missing.status_code == 404 and "host.svg|.png" in missing.json()["error"]
    assert logged_in_client.get(f"/api/v1/snapshots/{s.pk}/figure/host.pdf").status_code == 404
    s.host.cluster.open_to_all_users = False
    s.host.cluster.save()
    client.force_login(django_user_model.objects.create_user("eve", password="pw-not-secret"))
    assert client.get(f"/api/v1/snapshots/{s.pk}/figure/host.svg").status_code == 404


def test_every_figure_keeps_plotlys_download_button_and_no_cloud_button():
    js = (ROOT / "static" / "js" / "plots.js").read_text()
    config = re.search(r"const CONFIG = \{(.*?)\};", js, re.S).group(1)
    assert "showSendToCloud: false" in config and "showEditInChartStudio: false" in config
    removed = re.search(r"modeBarButtonsToRemove: \[(.*?)\]", config, re.S).group(1)
    assert "toImage" not in removed and "sendChartToCloud" in removed
    assert "displayModeBar: false" not in js
    users = [p for p in (ROOT / "static" / "js").glob("*.js") if "Plotly.newPlot" in p.read_text()
             or "Plotly.react" in p.read_text()]
    assert [p.name for p in users] == ["plots.js"]   # every figure goes through that one config
