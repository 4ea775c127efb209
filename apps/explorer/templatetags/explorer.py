"""Template helpers: embed a figure's JSON safely, format GB/s."""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

register = template.Library()

# The escapes json_script applies: inside a <script> element these characters only occur in JSON strings.
_ESCAPES = (("<", "\\u003C"), (">", "\\u003E"), ("&", "\\u0026"))


def _escape_json(text: str) -> str:
    """``text`` with json_script's escapes applied. One ``str.replace`` per character (no
    replacement holds another's character, so the order does not matter): many times faster
    than ``str.translate`` with a dict on a figure of a hundred kilobytes."""
    for char, escaped in _ESCAPES:
        text = text.replace(char, escaped)
    return text


@register.simple_tag
def figure_script(element_id: str, figure_json: str, target: str = "") -> str:
    """``<script type="application/json" data-figure=...>`` holding an already-serialised figure."""
    return format_html('<script id="{}" type="application/json" data-figure="{}">{}</script>', element_id,
                       target, mark_safe(_escape_json(str(figure_json))))


@register.filter
def gbs(value) -> str:
    """``27.72`` -> ``"27.7 GB/s"``; ``None`` -> ``"?"``."""
    if value is None or value == "":
        return "?"
    try:
        return f"{float(value):.1f} GB/s"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def get(mapping, key):
    try:
        return mapping.get(key)
    except AttributeError:
        return None


HOP_KINDS = {"pcie": "PCIe", "nvlink": "NVLink", "nvswitch": "NVSwitch", "cpu_link": "CPU link",
             "inter_socket": "inter-socket (UPI / xGMI)", "host_memory_copy": "copy through host memory",
             "fabric": "network (assumed rail switch)", "fabric_link": "InfiniBand cable (discovered)"}


@register.filter
def hop_kind(value) -> str:
    """A hop's ``kind`` in words: ``inter_socket`` -> ``inter-socket (UPI / xGMI)``."""
    return HOP_KINDS.get(value, value or "?")
