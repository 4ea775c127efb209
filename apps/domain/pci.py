"""PCI address helpers shared by every parser and the graph builder.

The canonical key for a PCI function in topoweb is ``dddd:bb:dd.f``: a 4-hex-digit domain,
lowercase (``0000:1b:00.0``). Producers differ (domain.md section 4.1):

* ``nvidia-smi --query-gpu=pci.bus_id`` prints an 8-digit domain in upper case,
  ``00000000:1B:00.0``; the last four domain digits are kept.
* ``lspci`` without ``-D`` omits the domain (``1b:00.0``); domain ``0000`` is assumed.
* NCCL logs print ``busId 1c000``, the hex digits with separators removed
  (``int64ToBusId`` in NCCL's ``src/misc/utils.cc``).

Link speeds are per-lane transfer rates in GT/s; :func:`pcie_generation` is the one map from a
speed to its PCIe generation (``lspci`` ``LnkCap``/``LnkSta``, sysfs ``*_link_speed``, NCCL's XML).
"""

from __future__ import annotations

import re

# GT/s per lane -> PCIe generation (pciutils ls-caps.c link_speed(), PCIe base spec).
GENERATION_BY_SPEED: dict[float, int] = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}

_BDF_RE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})\.(?P<fn>[0-7])$"
)


def canonical_bdf(text: str) -> str:
    """Return ``text`` as a canonical ``dddd:bb:dd.f`` address.

    >>> canonical_bdf("00000000:1B:00.0")
    '0000:1b:00.0'
    >>> canonical_bdf("3b:00.1")
    '0000:3b:00.1'
    >>> canonical_bdf("10000:E0:06.0")
    '10000:e0:06.0'

    Raises ``ValueError`` when ``text`` is not a PCI address.
    """
    m = _BDF_RE.match(text.strip())
    if not m:
        raise ValueError(f"not a PCI address: {text!r}")
    # Keep every significant digit: nvidia-smi's "00000000" folds to "0000", while Intel VMD
    # domains ("10000") stay distinct from domain 0.
    domain = ((m.group("domain") or "0").lower().lstrip("0") or "0").rjust(4, "0")
    return f"{domain}:{int(m.group('bus'), 16):02x}:{int(m.group('dev'), 16):02x}.{m.group('fn')}"


def is_bdf(text: str) -> bool:
    """True when ``text`` parses as a PCI address."""
    return bool(_BDF_RE.match(text.strip()))


def bdf_from_nccl_busid(value: str | int) -> str:
    """Decode NCCL's integer bus id (``1c000`` -> ``0000:1c:00.0``), as ``int64ToBusId`` does."""
    n = int(value, 16) if isinstance(value, str) else int(value)
    return f"{(n >> 20) & 0xFFFF:04x}:{(n & 0xFF000) >> 12:02x}:{(n & 0xFF0) >> 4:02x}.{n & 0xF:01x}"


def pcie_generation(speed_gts: float | None) -> int | None:
    """PCIe generation of a per-lane speed in GT/s (``8`` -> 3, ``2.5`` -> 1); None when the speed
    is unknown or no generation uses it.

    >>> [pcie_generation(s) for s in (2.5, 16.0, 32, 10, None)]
    [1, 4, 5, None, None]
    """
    if speed_gts is None:
        return None
    speed = float(speed_gts)
    for gts, gen in GENERATION_BY_SPEED.items():
        if abs(speed - gts) < 0.01:
            return gen
    return None
