"""What every figure builder shares: the font, escaping of node-supplied strings, GB/s text, the base layout."""

from __future__ import annotations

import html
from typing import Any

FONT = dict(family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size=12, color="#1d2330")


def esc(value: Any) -> str:
    """Escape a string for Plotly text (which renders some tags and decodes entities)."""
    return html.escape("" if value is None else str(value), quote=False)


def fmt_gbs(v: float | None) -> str:
    return "?" if v is None else f"{v:.1f}"


def base_layout(title: str, height: int, **extra: Any) -> dict:
    layout = dict(title=dict(text=title, x=0.01, font=dict(size=15)), height=height, font=FONT, template="none",
                  margin=dict(l=10, r=10, t=48, b=10), paper_bgcolor="#ffffff", plot_bgcolor="#ffffff",
                  hoverlabel=dict(font=dict(size=12)), legend=dict(font=dict(size=12)))
    layout.update(extra)
    return layout
