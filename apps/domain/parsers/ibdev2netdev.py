"""Parser for ``ibdev2netdev`` (MLNX_OFED / DOCA-OFED script): which network interface each RDMA port is.

Commands and layout (the script loops over ``/sys/class/net`` and prints one line per netdev
whose PCI resource matches an RDMA device; ``-v`` adds the PCI address, device id, part number,
VPD description, firmware and the IB port state)::

    ibdev2netdev
        mlx5_0 port 1 ==> ib0 (Up)
        mlx5_an0 port 1 ==> eth1 (Up)
        mlx5_1 port 1 ==> eth02 (Down)
    ibdev2netdev -v
        0000:07:00.0 mlx5_0 (MT4123 - MCX653106A-HDAT) ConnectX-6 VPI adapter card fw 20.31.1014 port 1 (ACTIVE) ==> ib0 (Up)

Result :class:`Ibdev2netdevResult`:

``entries``   tuple of :class:`NetdevMap` in the order printed:
    ``ca``             RDMA device name (``mlx5_0``, ``mlx5_ib3``, ``mlx5_bond_0``).
    ``port``           1-based port number.
    ``netdev``         network interface (``ib0``, ``ibp129s0``, ``enp1s0f0``, ``eth02``).
    ``netdev_state``   ``Up`` / ``Down`` (the netdev's carrier, not the IB port state: an IPoIB
                       netdev is Down until ``ip link set up`` even on an Active port); null for ``NA``.
    ``bdf``, ``device_id``, ``part_number``, ``description``, ``firmware_version``, ``port_state``
                       ``-v`` only (``0000:07:00.0``, ``MT4123``, ``MCX653106A-HDAT``, the VPD product
                       name, ``20.31.1014``, the IB port state in ibstat's words ``Active``/``Down``...);
                       null otherwise.
``warnings``  tuple of strings: anything recovered rather than read cleanly.

A pasted prompt/command line before the first entry is skipped with a warning; the same
``ca``/``port`` printed twice (two netdevs, e.g. a VF representor) keeps both with a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.domain.errors import ParseError
from apps.domain.parsers.fabric_common import is_fabric_echo
from apps.domain.parsers._ib import normalise_state
from apps.domain.parsers.text import clean_lines
from apps.domain.pci import canonical_bdf

KIND = "ibdev2netdev"


@dataclass(frozen=True)
class NetdevMap:
    ca: str
    port: int
    netdev: str
    netdev_state: str | None
    bdf: str | None = None
    device_id: str | None = None
    part_number: str | None = None
    description: str | None = None
    firmware_version: str | None = None
    port_state: str | None = None


@dataclass(frozen=True)
class Ibdev2netdevResult:
    entries: tuple[NetdevMap, ...]
    warnings: tuple[str, ...]


_SHORT_RE = re.compile(r"^\s*(\S+)\s+port\s+(\d+)\s+==>\s+(\S+)\s+\(\s*(\w+)\s*\)\s*$")
_VERBOSE_RE = re.compile(
    r"^\s*([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(\S+)\s+\(\s*(\S+)\s+-\s+(.*?)\s*\)\s*(.*?)\s*"
    r"fw\s+(\S+)\s+port\s+(\d+)\s+\(\s*(\S+)\s*\)\s+==>\s+(\S+)\s+\(\s*(\w+)\s*\)\s*$"
)
_STATES = {"up": "Up", "down": "Down", "na": None}


def _state(raw: str, no: int, line: str) -> str | None:
    key = raw.lower()
    if key not in _STATES:
        raise ParseError(KIND, no, line, f"netdev state '({raw})' is not Up, Down or NA")
    return _STATES[key]


def _entry(line: str, no: int) -> NetdevMap | None:
    m = _VERBOSE_RE.match(line)
    if m:
        bdf, ca, devid, part, desc, fw, port, pstate, netdev, nstate = m.groups()
        return NetdevMap(ca=ca, port=int(port), netdev=netdev, netdev_state=_state(nstate, no, line),
                         bdf=canonical_bdf(bdf), device_id=None if devid == "NA" else devid,
                         part_number=None if part.strip() in ("", "NA") else part.strip(),
                         description=desc or None, firmware_version=None if fw == "NA" else fw,
                         port_state=normalise_state(pstate) if pstate != "NA" else None)
    m = _SHORT_RE.match(line)
    if m:
        ca, port, netdev, nstate = m.groups()
        return NetdevMap(ca=ca, port=int(port), netdev=netdev, netdev_state=_state(nstate, no, line))
    return None


def parse(text: str) -> Ibdev2netdevResult:
    """Parse ``ibdev2netdev`` / ``ibdev2netdev -v`` output."""
    lines = clean_lines(text)
    entries: list[NetdevMap] = []
    warnings: list[str] = []
    seen: set[tuple[str, int]] = set()
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        entry = _entry(line, no)
        if entry is None:
            if not entries and is_fabric_echo(line):
                warnings.append(f"line {no}: skipped command line {line.strip()!r}")
                continue
            raise ParseError(KIND, no, line, "expected '<ca> port <n> ==> <netdev> (Up|Down)'")
        if (entry.ca, entry.port) in seen:
            warnings.append(f"line {no}: {entry.ca} port {entry.port} maps to a second netdev ({entry.netdev})")
        seen.add((entry.ca, entry.port))
        entries.append(entry)
    if not entries:
        if any(line.strip() for line in lines):
            no, line = next((n, ln) for n, ln in enumerate(lines, 1) if ln.strip())
            raise ParseError(KIND, no, line, "only a command line, no ibdev2netdev output")
        raise ParseError(KIND, 0, "", "the text is empty")
    return Ibdev2netdevResult(entries=tuple(entries), warnings=tuple(warnings))


_DETECT_RE = re.compile(r"^\s*\S.*?\bport\s+\d+\s+(?:\(\s*\S+\s*\)\s+)?==>\s+\S+\s+\(\s*(?:Up|Down|NA)\s*\)\s*$", re.M)


def detect(text: str) -> int:
    """Score ibdev2netdev output: ``<ca> port <n> ==> <netdev> (Up|Down)`` lines."""
    hits = len(_DETECT_RE.findall(text[:4000]))
    return min(60 + 10 * hits, 95) if hits else 0
