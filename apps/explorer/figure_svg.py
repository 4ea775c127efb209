"""A small SVG writer for topoweb's own figure specs (``apps.explorer.figures``), with no browser.

It draws what the host drawing and the matrices use, as Plotly would lay them out on a fixed
canvas: scatter traces (``lines`` with ``None`` breaks and ``dash``, ``markers`` with the symbols
of ``figures.KIND_STYLE``, ``text`` with ``textposition``), layout ``shapes`` (rect, line),
``annotations`` (data or paper coordinates, ``xshift``/``yshift``, anchors), the title, a legend
of the named traces, and ``heatmap`` traces (categorical axes, ``zmin``/``zmax`` on the trace's
``[[fraction, colour], ...]`` scale or Viridis, the cell text; scatter points on those categories).
Multi-line text (``<br>``) and ``<span style="color:...">`` in annotations are kept. Axes are
linear on the layout's ``range`` (else the data's extent),
``autorange="reversed"`` honoured on y. Hover text, colour bars and interactivity are left out:
this is the static picture for reports and the API (``figure_export``).

``spec_svg(spec, width=1100) -> str``: a standalone SVG document (UTF-8), every text escaped.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["spec_svg", "VIRIDIS"]

VIRIDIS = ("#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b",
           "#fde725")
DASHES = {"dash": "6,4", "dot": "2,3", "dashdot": "6,3,2,3", "longdash": "10,4", "solid": None}
_TAG = re.compile(r"<[^>]+>")
_BR = re.compile(r"<br\s*/?>", re.I)
_SPAN = re.compile(r'<span style="color:\s*(#[0-9A-Fa-f]{3,8})">(.*?)</span>')
LEGEND_ROW = 16


def _text(value: Any) -> str:
    """Plotly text (``<b>``, ``<br>`` and entities allowed) as plain SVG text, escaped."""
    plain = _TAG.sub(" ", str(value if value is not None else "")).replace("  ", " ").strip()
    return html.escape(html.unescape(plain), quote=True)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


class _Canvas:
    """Data -> pixel coordinates of the plot area."""

    def __init__(self, layout: Mapping, data: Sequence[Mapping], width: int, height: int, legend_h: int) -> None:
        m = layout.get("margin") or {}
        self.left, self.right = float(m.get("l", 40)), width - float(m.get("r", 20))
        self.top, self.bottom = float(m.get("t", 48)), height - float(m.get("b", 20)) - legend_h
        heat = next((t for t in data if t.get("type") == "heatmap"), None)
        # category axes (the matrices): label -> index, cells centred on the indexes
        self.cat_x = {str(v): j for j, v in enumerate((heat or {}).get("x") or [])}
        self.cat_y = {str(v): i for i, v in enumerate((heat or {}).get("y") or [])}
        self.x0, self.x1 = (-0.5, len(self.cat_x) - 0.5) if self.cat_x else \
            self._range(layout.get("xaxis") or {}, data, "x")
        self.y0, self.y1 = (-0.5, len(self.cat_y) - 0.5) if self.cat_y else \
            self._range(layout.get("yaxis") or {}, data, "y")
        self.y_reversed = (layout.get("yaxis") or {}).get("autorange") == "reversed"

    def value(self, v: Any, axis: str) -> float | None:
        """A coordinate as a number: numbers as they are, a category label as its index."""
        if _num(v) is not None:
            return float(v)
        cats = self.cat_x if axis == "x" else self.cat_y
        return float(cats[str(v)]) if v is not None and str(v) in cats else None

    @staticmethod
    def _range(axis: Mapping, data: Sequence[Mapping], key: str) -> tuple[float, float]:
        r = axis.get("range")
        if r and len(r) == 2 and _num(r[0]) is not None and _num(r[1]) is not None:
            return float(r[0]), float(r[1])
        vals = [v for t in data if t.get("type", "scatter") == "scatter"
                for v in (t.get(key) or []) if _num(v) is not None]
        if not vals:
            return 0.0, 1.0
        lo, hi = min(vals), max(vals)
        pad = (hi - lo) * 0.05 or 0.5
        return lo - pad, hi + pad

    def x(self, v: float) -> float:
        return self.left + (v - self.x0) / ((self.x1 - self.x0) or 1.0) * (self.right - self.left)

    def y(self, v: float) -> float:
        frac = (v - self.y0) / ((self.y1 - self.y0) or 1.0)
        return self.top + frac * (self.bottom - self.top) if self.y_reversed else \
            self.bottom - frac * (self.bottom - self.top)

    def paper(self, px: float, py: float) -> tuple[float, float]:
        return self.left + px * (self.right - self.left), self.bottom - py * (self.bottom - self.top)


def _stroke(line: Mapping | None, default: str = "#444") -> str:
    line = line or {}
    dash = DASHES.get(str(line.get("dash") or "solid"))
    out = f'stroke="{html.escape(str(line.get("color") or default))}" stroke-width="{_num(line.get("width")) or 1:g}"'
    return out + (f' stroke-dasharray="{dash}"' if dash else "")


def _marker(symbol: str, cx: float, cy: float, size: float, fill: str, edge: str, edge_w: float) -> str:
    r = size / 2
    hollow = symbol.endswith("-open")
    base = symbol.removesuffix("-open")
    style = (f'fill="none" stroke="{fill}" stroke-width="{max(edge_w, 1.5):g}"' if hollow
             else f'fill="{fill}" stroke="{edge}" stroke-width="{edge_w:g}"')
    if base in ("square", "star-square"):
        return f'<rect x="{cx - r:.1f}" y="{cy - r:.1f}" width="{size:.1f}" height="{size:.1f}" {style}/>'
    if base == "diamond":
        pts = f"{cx:.1f},{cy - r:.1f} {cx + r:.1f},{cy:.1f} {cx:.1f},{cy + r:.1f} {cx - r:.1f},{cy:.1f}"
        return f'<polygon points="{pts}" {style}/>'
    if base == "hexagon":
        pts = " ".join(f"{cx + r * math.cos(math.pi / 3 * k + math.pi / 6):.1f},"
                       f"{cy + r * math.sin(math.pi / 3 * k + math.pi / 6):.1f}" for k in range(6))
        return f'<polygon points="{pts}" {style}/>'
    if base == "x":
        return (f'<path d="M{cx - r:.1f},{cy - r:.1f}L{cx + r:.1f},{cy + r:.1f}M{cx - r:.1f},{cy + r:.1f}'
                f'L{cx + r:.1f},{cy - r:.1f}" stroke="{fill}" stroke-width="3"/>')
    return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" {style}/>'


def _font(font: Mapping | None, size: float = 11, colour: str = "#1d2330") -> str:
    font = font or {}
    return f'font-size="{_num(font.get("size")) or size:g}" fill="{html.escape(str(font.get("color") or colour))}"'


def _scatter(t: Mapping, c: _Canvas) -> list[str]:
    out = []
    xs = [c.value(v, "x") for v in t.get("x") or []]
    ys = [c.value(v, "y") for v in t.get("y") or []]
    mode = str(t.get("mode") or "markers")
    if "lines" in mode:
        segs, cur = [], []
        for x, y in zip(xs, ys):
            if _num(x) is None or _num(y) is None:
                if len(cur) > 1:
                    segs.append(cur)
                cur = []
            else:
                cur.append(f"{c.x(x):.1f},{c.y(y):.1f}")
        if len(cur) > 1:
            segs.append(cur)
        for s in segs:
            out.append(f'<polyline points="{" ".join(s)}" fill="none" {_stroke(t.get("line"))}/>')
    marker = t.get("marker") or {}
    if "markers" in mode:
        colour = marker.get("color") or "#1f77b4"
        edge = (marker.get("line") or {}).get("color") or "#ffffff"
        edge_w = _num((marker.get("line") or {}).get("width")) or 0.0
        for i, (x, y) in enumerate(zip(xs, ys)):
            if _num(x) is None or _num(y) is None:
                continue
            fill = colour[i] if isinstance(colour, list) else colour
            out.append(_marker(str(marker.get("symbol") or "circle"), c.x(x), c.y(y), _num(marker.get("size")) or 8,
                               html.escape(str(fill)), html.escape(str(edge)), edge_w))
    if "text" in mode:
        texts = t.get("text") or []
        pos = str(t.get("textposition") or "middle center")
        size = _num((t.get("textfont") or {}).get("size")) or 10
        dy = {"top": -(_num(marker.get("size")) or 8) / 2 - 4, "bottom": (_num(marker.get("size")) or 8) / 2 + size}
        shift = dy.get(pos.split()[0], size / 3) if "markers" in mode else size / 3
        font = dict(t.get("textfont") or {})
        colours = font.pop("color", None)
        for i, (x, y, s) in enumerate(zip(xs, ys, texts if isinstance(texts, list) else [texts] * len(xs))):
            if _num(x) is None or _num(y) is None or s in (None, ""):
                continue
            colour = colours[i] if isinstance(colours, list) and i < len(colours) else colours
            out.append(f'<text x="{c.x(x):.1f}" y="{c.y(y) + shift:.1f}" text-anchor="middle" '
                       f'{_font({**font, "color": colour}, 10)}>{_text(s)}</text>')
    return out


def _heat_colour(v: Any, lo: float, hi: float, scale: Any = None) -> str:
    """The cell colour: a ``[[fraction, colour], ...]`` scale (the last stop at or below the
    value's fraction: the matrices' stepped scales), else Viridis."""
    z = _num(v)
    if z is None:
        return "#f1f3f5"
    frac = min(max((z - lo) / ((hi - lo) or 1.0), 0.0), 1.0)
    if isinstance(scale, (list, tuple)) and scale and all(isinstance(st, (list, tuple)) and len(st) == 2
                                                          for st in scale):
        colour = str(scale[0][1])
        for at, c in scale:
            if _num(at) is not None and float(at) <= frac:
                colour = str(c)
        return html.escape(colour)
    return VIRIDIS[min(int(frac * len(VIRIDIS)), len(VIRIDIS) - 1)]


def _dark(colour: str) -> bool:
    """Whether text on ``colour`` (``#rrggbb``) should be white, as Plotly picks it on a heatmap."""
    m = re.fullmatch(r"#([0-9a-fA-F]{2})([0-9a-fA-F]{2})([0-9a-fA-F]{2})", colour)
    if not m:
        return False
    r, g, b = (int(x, 16) for x in m.groups())
    return 0.299 * r + 0.587 * g + 0.114 * b < 140


def _heatmap(t: Mapping, c: _Canvas) -> list[str]:
    z = t.get("z") or []
    xs, ys = list(t.get("x") or range(len(z[0]) if z else 0)), list(t.get("y") or range(len(z)))
    if not z or not xs or not ys:
        return []
    vals = [_num(v) for row in z for v in row if _num(v) is not None]
    lo = _num(t.get("zmin")) if _num(t.get("zmin")) is not None else min(vals, default=0.0)
    hi = _num(t.get("zmax")) if _num(t.get("zmax")) is not None else max(vals, default=1.0)
    cw, ch = (c.right - c.left) / len(xs), (c.bottom - c.top) / len(ys)
    text = t.get("text") or []
    out = []
    for j, label in enumerate(xs):
        out.append(f'<text x="{c.left + (j + 0.5) * cw:.1f}" y="{c.top - 6:.1f}" text-anchor="middle" '
                   f'font-size="10" fill="#1d2330">{_text(label)}</text>')
    for i, label in enumerate(ys):
        out.append(f'<text x="{c.left - 6:.1f}" y="{c.top + (i + 0.5) * ch + 4:.1f}" text-anchor="end" '
                   f'font-size="10" fill="#1d2330">{_text(label)}</text>')
        for j in range(len(xs)):
            v = z[i][j] if i < len(z) and j < len(z[i]) else None
            out.append(f'<rect x="{c.left + j * cw + 0.5:.1f}" y="{c.top + i * ch + 0.5:.1f}" width="{cw - 1:.1f}" '
                       f'height="{ch - 1:.1f}" fill="{_heat_colour(v, lo, hi, t.get("colorscale"))}"/>')
            s = text[i][j] if i < len(text) and j < len(text[i]) else ""
            lines = [ln for ln in (_text(x) for x in _BR.split(str(s or ""))) if ln]
            if lines:
                light = _dark(_heat_colour(v, lo, hi, t.get("colorscale")))
                y = c.top + (i + 0.5) * ch + 4 - (6 if len(lines) > 1 or _BR.search(str(s)) else 0)
                out.append(f'<text x="{c.left + (j + 0.5) * cw:.1f}" y="{y:.1f}" text-anchor="middle" '
                           f'font-size="10" fill="{"#ffffff" if light else "#1d2330"}">{lines[0]}</text>')
    return out


def _shape(s: Mapping, c: _Canvas) -> str:
    x0, x1, y0, y1 = (_num(s.get(k)) for k in ("x0", "x1", "y0", "y1"))
    if None in (x0, x1, y0, y1):
        return ""
    px0, px1, py0, py1 = c.x(x0), c.x(x1), c.y(y0), c.y(y1)
    if s.get("type") == "line":
        return f'<line x1="{px0:.1f}" y1="{py0:.1f}" x2="{px1:.1f}" y2="{py1:.1f}" {_stroke(s.get("line"))}/>'
    fill = html.escape(str(s.get("fillcolor") or "none"))
    return (f'<rect x="{min(px0, px1):.1f}" y="{min(py0, py1):.1f}" width="{abs(px1 - px0):.1f}" '
            f'height="{abs(py1 - py0):.1f}" fill="{fill}" {_stroke(s.get("line"))}/>')


def _annotation(a: Mapping, c: _Canvas) -> str:
    x, y = _num(a.get("x")), _num(a.get("y"))
    if x is None or y is None:
        return ""
    if a.get("xref") == "paper" or a.get("yref") == "paper":
        px, py = c.paper(x, y)
    else:
        px, py = c.x(x), c.y(y)
    px += _num(a.get("xshift")) or 0.0
    py -= _num(a.get("yshift")) or 0.0
    anchor = {"left": "start", "right": "end"}.get(str(a.get("xanchor")), "middle")
    size = _num((a.get("font") or {}).get("size")) or 11
    lines = _BR.split(str(a.get("text") or ""))
    py += {"top": size, "bottom": -(len(lines) - 1) * size * 1.3}.get(str(a.get("yanchor")), size / 3)
    spans = "".join(f'<tspan x="{px:.1f}" dy="{0 if k == 0 else size * 1.3:.1f}">{_spans(line)}</tspan>'
                    for k, line in enumerate(lines))
    return f'<text x="{px:.1f}" y="{py:.1f}" text-anchor="{anchor}" {_font(a.get("font"))}>{spans}</text>'


def _spans(line: str) -> str:
    """One line of Plotly text: ``<span style="color:#hex">`` kept as coloured tspans, other tags dropped."""
    out, at = [], 0
    for m in _SPAN.finditer(line):
        out.append(_text(line[at:m.start()]) + " " if line[at:m.start()].strip() else "")
        out.append(f'<tspan fill="{html.escape(m.group(1))}">{_text(m.group(2))}</tspan> ')
        at = m.end()
    out.append(_text(line[at:]))
    return "".join(out).strip()


def _legend_items(data: Sequence[Mapping]) -> list[tuple[str, str]]:
    out = []
    for t in data:
        if t.get("type", "scatter") != "scatter" or t.get("showlegend") is False or not t.get("name"):
            continue
        drawn = t.get("marker") if "markers" in str(t.get("mode")) else t.get("line")
        colour = (drawn or {}).get("color")
        out.append((str(t["name"]), str(colour if isinstance(colour, str) else "#444")))
    return out


def spec_svg(spec: Mapping, width: int = 1100) -> str:
    """The figure spec (``{"data", "layout"}``) as a standalone SVG document."""
    layout, data = spec.get("layout") or {}, list(spec.get("data") or [])
    height = int(_num(layout.get("height")) or 450)
    items = _legend_items(data) if layout.get("showlegend", True) else []
    per_row = max(1, width // 260)
    legend_h = (math.ceil(len(items) / per_row) * LEGEND_ROW + 8) if items else 0
    total = height + legend_h
    c = _Canvas(layout, data, width, total, legend_h)
    title = (layout.get("title") or {}).get("text") if isinstance(layout.get("title"), Mapping) else layout.get("title")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total}" viewBox="0 0 {width} {total}" '
           f'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif">',
           f'<rect width="{width}" height="{total}" '
           f'fill="{html.escape(str(layout.get("paper_bgcolor") or "#ffffff"))}"/>']
    if title:
        out.append(f'<text x="12" y="24" font-size="15" fill="#1d2330">{_text(title)}</text>')
    out += [_shape(s, c) for s in layout.get("shapes") or [] if s.get("layer") == "below"]
    for t in data:
        out += _heatmap(t, c) if t.get("type") == "heatmap" else _scatter(t, c)
    out += [_shape(s, c) for s in layout.get("shapes") or [] if s.get("layer") != "below"]
    out += [_annotation(a, c) for a in layout.get("annotations") or []]
    for k, (name, colour) in enumerate(items):
        x, y = 12 + (k % per_row) * 260, height + 8 + (k // per_row) * LEGEND_ROW
        out.append(f'<rect x="{x}" y="{y}" width="10" height="10" fill="{html.escape(colour)}"/>'
                   f'<text x="{x + 15}" y="{y + 9}" font-size="10.5" fill="#1d2330">{_text(name)}</text>')
    out.append("</svg>")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + "\n".join(s for s in out if s) + "\n"
