"""Plotly figures of a run's check (``apps.domain.runs.check_run`` result): pure functions, as in
``figures.py`` (``*_spec`` returns the plain ``{"data", "layout"}`` dict, ``*_figure`` a validated
Figure for the tests, ``*_figure_json`` the page's JSON). ``static/js/plots.js`` draws them with the
site's modebar (no cloud buttons).

* nccl-tests: measured busbw (out-of-place, and in-place dotted) against message size with the
  expected curve of the layout, on a log-2 size axis; GB/s per direction as nccl-tests prints.
* perftest: average bandwidth against message size with the line the port and its path allow, Gb/s.
* P2P tests: each GPU pair's copy bandwidth beside the layout's figure.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import plotly.graph_objects as go

from apps.domain.run_causes import size_text
from apps.explorer.figures import FONT, esc, to_json

__all__ = ["run_spec", "run_figure", "run_figure_json", "VERDICT_COLOURS"]

MEASURED, IN_PLACE, EXPECTED = "#2457c5", "#748ffc", "#d9480f"
VERDICT_COLOURS = {"healthy": "#2b8a3e", "below_expected": "#f08c00", "broken": "#c92a2a",
                   "not_comparable": "#868e96"}


def _layout(title: str, height: int, **extra: Any) -> dict:
    layout = dict(title=dict(text=title, x=0.01, font=dict(size=15)), height=height, font=FONT, template="none",
                  paper_bgcolor="#ffffff", plot_bgcolor="#ffffff", hovermode="x unified",
                  legend=dict(orientation="h", y=-0.2, yanchor="top", x=0, font=dict(size=11)),
                  margin=dict(l=64, r=20, t=48, b=110))
    layout.update(extra)
    return layout


def _size_axis(sizes: list[int]) -> dict:
    """A log axis over message sizes with ticks at powers of two (every other one past 16 ticks)."""
    lo, hi = math.floor(math.log2(min(sizes))), math.ceil(math.log2(max(sizes)))
    step = 1 if hi - lo <= 16 else 2 if hi - lo <= 32 else 4
    ticks = [2 ** k for k in range(lo, hi + 1, step)]
    return dict(type="log", tickvals=ticks, ticktext=[size_text(t) for t in ticks], gridcolor="#eef1f6",
                title=dict(text="message size (bytes, log-2 scale)"),
                range=[math.log10(min(sizes)) - 0.08, math.log10(max(sizes)) + 0.08])


def _curve_spec(result: Mapping, height: int) -> dict:
    kind = result["kind"]
    points = [p for p in result.get("points") or [] if p.get("size_bytes")]
    perftest = kind == "perftest"
    unit = "Gb/s" if perftest else "GB/s"
    key_m, key_e = ("measured_gbit", "expected_gbit") if perftest else ("measured_busbw_gbs", "expected_busbw_gbs")
    x = [p["size_bytes"] for p in points]
    labels = [size_text(s) for s in x]
    expected = result.get("expected") or {}
    data = [dict(type="scatter", mode="lines+markers", x=x, y=[p.get(key_m) for p in points], customdata=labels,
                 name="measured" + ("" if perftest else " busbw (out-of-place)"), line=dict(color=MEASURED, width=3),
                 marker=dict(size=7), hovertemplate=f"%{{customdata}}: <b>%{{y:.2f}} {unit}</b><extra>measured</extra>")]
    if not perftest and any(p.get("measured_in_place_busbw_gbs") is not None for p in points):
        data.append(dict(type="scatter", mode="lines", x=x, y=[p.get("measured_in_place_busbw_gbs") for p in points],
                         name="measured busbw (in-place)", line=dict(color=IN_PLACE, width=1.5, dash="dot"),
                         customdata=labels, hovertemplate=f"%{{customdata}}: %{{y:.2f}} {unit}<extra>in-place</extra>"))
    if any(p.get(key_e) is not None for p in points):
        host = expected.get("layout_host") or expected.get("host")
        where = f" ({esc(host)})" if host else ""
        data.append(dict(type="scatter", mode="lines", x=x, y=[p.get(key_e) for p in points], customdata=labels,
                         name=f"expected from the layout{where}" + (" *" if expected.get("assumed") else ""),
                         line=dict(color=EXPECTED, width=2.5, dash="dash"),
                         hovertemplate=f"%{{customdata}}: %{{y:.2f}} {unit}<extra>expected</extra>"))
    what = "average bandwidth" if perftest else "bus bandwidth (busbw)"
    title = f"Measured {what} against message size" + (", with the layout's expected curve" if len(data) > 1 else "")
    yaxis = dict(title=dict(text=f"{what}, {unit}" + ("" if perftest else " per GPU")), rangemode="tozero",
                 gridcolor="#eef1f6")
    return {"data": data, "layout": _layout(title, height, xaxis=_size_axis(x) if x else {}, yaxis=yaxis)}


def _pairs_spec(result: Mapping, height: int) -> dict:
    pairs = result.get("pairs") or []
    names = [f"{p['a']}->{p['b']}" for p in pairs]
    data = [dict(type="bar", x=names, y=[p["measured_gbs"] for p in pairs], name="measured copy", marker=dict(
        color=MEASURED), hovertemplate="%{x}: <b>%{y:.1f} GB/s</b><extra>measured</extra>")]
    if any(p.get("expected_gbs") for p in pairs):
        data.append(dict(type="scatter", mode="markers", x=names, y=[p.get("expected_gbs") for p in pairs],
                         name="expected from the layout", marker=dict(color=EXPECTED, symbol="line-ew-open", size=22,
                                                                      line=dict(width=3)),
                         hovertemplate="%{x}: %{y:.1f} GB/s<extra>expected</extra>"))
    return {"data": data, "layout": _layout("GPU-to-GPU copy bandwidth per pair", height, hovermode="closest",
                                            yaxis=dict(title=dict(text="GB/s per direction"), rangemode="tozero",
                                                       gridcolor="#eef1f6"),
                                            xaxis=dict(title=dict(text="GPU pair (source -> destination)")))}


def run_spec(result: Mapping, height: int = 440) -> dict | None:
    """The figure of one run's check, or None when it has nothing to draw (an NCCL log, no rows)."""
    if result.get("kind") == "p2p_bandwidth" and result.get("pairs"):
        return _pairs_spec(result, height)
    if result.get("kind") in ("nccl_tests", "perftest") and result.get("points"):
        return _curve_spec(result, height)
    return None


def run_figure(result: Mapping, **kw: Any) -> go.Figure | None:
    """``run_spec`` as a validated Figure (for the tests)."""
    spec = run_spec(result, **kw)
    return go.Figure(data=spec["data"], layout=spec["layout"]) if spec else None


def run_figure_json(result: Mapping, **kw: Any) -> str | None:
    spec = run_spec(result, **kw)
    return to_json(spec) if spec else None
