"""PCIe link helpers shared by the lspci and sysfs parsers and by the analysis engine.

Link speeds are per-lane transfer rates in GT/s, as ``lspci`` prints them in ``LnkCap``/``LnkSta``
(``Speed 16GT/s``) and as the kernel writes them to ``/sys/bus/pci/devices/<bdf>/*_link_speed``.
The kernel has two spellings (domain.md section 2.1, NCCL topo.cc accepts both):

* kernels <= 5.6: ``2.5 GT/s``, ``5 GT/s``, ``8 GT/s``, ``16 GT/s``;
* later kernels: ``2.5 GT/s PCIe``, ``5.0 GT/s PCIe``, ``8.0 GT/s PCIe``, ``16.0 GT/s PCIe``,
  ``32.0 GT/s PCIe``, ``64.0 GT/s PCIe``;

and prints ``Unknown`` (or ``Unknown speed``) when the link is down or the value is reserved.
Very old ``lspci`` printed ``Gb/s`` instead of ``GT/s``; both are read the same.
"""

from __future__ import annotations

import re

from apps.domain import pci

__all__ = ["GENERATION_BY_SPEED", "pcie_generation", "parse_link_speed", "parse_link_width", "speeds_up_to"]

GENERATION_BY_SPEED = pci.GENERATION_BY_SPEED  # GT/s per lane -> generation (apps.domain.pci)
_SPEEDS = tuple(sorted(GENERATION_BY_SPEED))

_SPEED_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:GT|Gb)/s(?:\s+PCIe)?\s*$", re.IGNORECASE)


def pcie_generation(speed_gts: float) -> int:
    """:func:`apps.domain.pci.pcie_generation` for a speed that must be a PCIe one: 2.5 -> 1, 5 -> 2,
    8 -> 3, 16 -> 4, 32 -> 5, 64 -> 6.

    >>> pcie_generation(16)
    4

    Raises ``ValueError`` for a speed that no PCIe generation uses.
    """
    try:
        gen = pci.pcie_generation(speed_gts)
    except (TypeError, ValueError):
        gen = None
    if gen is None:
        raise ValueError(f"{speed_gts!r} GT/s is not a PCIe link speed (expected one of 2.5, 5, 8, 16, 32, 64)")
    return gen


def parse_link_speed(text: str | None) -> float | None:
    """Read a link speed as printed by lspci or sysfs into GT/s; ``None`` when unknown.

    >>> parse_link_speed("8.0 GT/s PCIe"), parse_link_speed("8 GT/s"), parse_link_speed("16GT/s")
    (8.0, 8.0, 16.0)
    >>> parse_link_speed("Unknown") is None
    True
    """
    if text is None:
        return None
    m = _SPEED_RE.match(text)
    if not m:
        return None
    return float(m.group(1))


def parse_link_width(text: str | None) -> int | None:
    """Read a link width (``16``, ``x16``) into an int; ``None`` for ``Unknown``, ``255`` or junk.

    The kernel prints 255 when the width field is invalid (no link). 0 is kept: the link is down.
    """
    if text is None:
        return None
    t = text.strip()
    if t[:1] in ("x", "X"):
        t = t[1:]
    if not t.isdigit() or not t.isascii():
        return None
    n = int(t)
    return None if n == 255 else n


def speeds_up_to(low: float, high: float) -> tuple[float, ...]:
    """The standard PCIe speeds from ``low`` to ``high`` GT/s inclusive (``LnkCap2`` ranges)."""
    return tuple(s for s in _SPEEDS if low <= s <= high)
