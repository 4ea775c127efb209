"""Parser for ``ibstatus`` (the infiniband-diags shell script that cats ``/sys/class/infiniband``).

Commands::

    ibstatus              # every device and port
    ibstatus mlx5_0       # one device; ``ibstatus mlx5_0:1`` one port (same layout)

Layout (one block per port, a blank line between blocks; values are the kernel sysfs strings)::

    Infiniband device 'mlx5_0' port 1 status:
            default gid:     fe80:0000:0000:0000:0015:5dff:fd34:11eb      ports/1/gids/0
            base lid:        0x33bf                                        ports/1/lid (hex)
            sm lid:          0x1                                           ports/1/sm_lid (hex)
            state:           4: ACTIVE                                     ports/1/state
            phys state:      5: LinkUp                                     ports/1/phys_state
            rate:            200 Gb/sec (4X HDR)                           ports/1/rate
            link_layer:      InfiniBand                                    ports/1/link_layer

Result: :class:`apps.domain.parsers._ib.IbResult` with ``source`` ``"ibstatus"``. Blocks of the same
device are merged into one :class:`~apps.domain.parsers._ib.Ca` (ports in the order printed). Per
port: ``state``/``phys_state`` normalised to ibstat's words (``4: ACTIVE`` -> ``Active``) with the raw
text kept, ``rate_gbps`` / ``width`` / ``speed_name`` split out of ``200 Gb/sec (4X HDR)`` (ibstat
loses the width; this keeps it), ``base_lid``/``sm_lid`` converted from hex, ``default_gid`` as
printed (null for the script's ``unknown``) and ``port_guid`` taken from its interface-id (low 64
bits), as ibstat's libibumad does. ibstatus prints no CA-level facts: those fields stay null.

Variants: ``Fatal error: ...`` lines (a device whose sysfs files vanished) become warnings; a
block missing some of the seven lines (authors often keep only ``rate``/``link_layer``) parses
with a warning naming the missing lines; a pasted ``$ ibstatus`` line before the first block is
skipped with a warning.
"""

from __future__ import annotations

import re

from apps.domain.errors import ParseError
from apps.domain.parsers._ib import (
    Ca,
    IbResult,
    Port,
    PortFields,
    guid_from_gid,
    is_command_echo,
    missing_lines,
    normalise_phys_state,
    normalise_state,
    parse_rate,
    port_guids_of,
)
from apps.domain.parsers.text import clean_lines

KIND = "ibstatus"

_HEAD_RE = re.compile(r"^\s*Infiniband device\s+'([^']*)'\s+port\s+(\d+)\s+status\s*:\s*$", re.I)
_KV_RE = re.compile(r"^\s*([A-Za-z][A-Za-z_ ]*?)\s*:\s*(.*?)\s*$")
_DIAG_RE = re.compile(r"^\s*(Fatal error|ibstatus|ibwarn|ibpanic)\b.*", re.I)
_LABELS = ("default gid", "base lid", "sm lid", "state", "phys state", "rate", "link_layer")


def _finish(name: str, number: int, raw: dict[str, tuple[int, str, str]], warnings: list[str]) -> Port:
    where = f"port {number} of '{name}'"

    fields = PortFields(KIND, raw, where)
    value, as_int = fields.value, fields.as_int

    state_raw, phys_raw = value("state"), value("phys state")
    state = fields.normalised("state", normalise_state, warnings)
    phys = fields.normalised("phys state", normalise_phys_state, warnings)
    rate_raw = value("rate")
    rate = width = speed = None
    if rate_raw is not None:
        rate, width, speed = parse_rate(rate_raw)
        if rate is None:
            item = raw["rate"]
            raise ParseError(KIND, item[0], item[1], f"'rate:' of {where} is not like '200 Gb/sec (4X HDR)'")
    gid = value("default gid")
    if gid is not None and (not gid or gid.lower() == "unknown"):
        gid = None  # the script prints "unknown" when gids/0 cannot be read (e.g. Azure Ethernet VFs)
    missing = [label for label in _LABELS if label not in raw]
    if missing:
        warnings.append(missing_lines(where, missing))
    return Port(
        number=number,
        state=state,
        state_raw=state_raw,
        phys_state=phys,
        phys_state_raw=phys_raw,
        rate_gbps=rate,
        rate_raw=rate_raw,
        width=width,
        speed_name=speed,
        link_layer=value("link_layer"),
        base_lid=as_int("base lid"),
        sm_lid=as_int("sm lid"),
        port_guid=guid_from_gid(gid) if gid else None,
        default_gid=gid,
    )


def parse(text: str) -> IbResult:
    """Parse ``ibstatus`` output into CAs and ports."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    warnings: list[str] = []
    ports_by_ca: dict[str, list[Port]] = {}
    current: tuple[str, int, int] | None = None  # (name, port number, header line)
    raw: dict[str, tuple[int, str, str]] = {}
    first_diag: tuple[int, str] | None = None

    def close() -> None:
        if current is not None:
            name, number, _ = current
            ports = ports_by_ca.setdefault(name, [])
            if any(p.number == number for p in ports):
                warnings.append(f"port {number} of '{name}' printed twice")
            ports.append(_finish(name, number, raw, warnings))

    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        m = _HEAD_RE.match(line)
        if m:
            close()
            name = m.group(1).strip()
            if not name:
                raise ParseError(KIND, no, line, "device line without a device name")
            current, raw = (name, int(m.group(2)), no), {}
            continue
        if _DIAG_RE.match(line) and not (current is None and is_command_echo(line)):
            warnings.append(f"line {no}: ibstatus reported: {stripped}")
            first_diag = first_diag or (no, line)
            continue
        if current is None and is_command_echo(line):
            warnings.append(f"line {no}: skipped command line {stripped!r}")
            continue
        m = _KV_RE.match(line)
        if current is None:
            raise ParseError(KIND, no, line, "expected \"Infiniband device '<name>' port <n> status:\"")
        if not m:
            raise ParseError(KIND, no, line, f"unrecognised line in the block of port {current[1]} of '{current[0]}'")
        label = m.group(1).lower()
        if label not in _LABELS:
            warnings.append(f"line {no}: unknown field '{m.group(1)}:' ignored")
            continue
        if label in raw:
            warnings.append(f"line {no}: '{label}:' repeated in port {current[1]} of '{current[0]}'; last kept")
        raw[label] = (no, line, m.group(2))
    close()
    if not ports_by_ca:
        if first_diag is not None:
            raise ParseError(KIND, first_diag[0], first_diag[1], "ibstatus failed and printed no device")
        raise ParseError(KIND, 0, "", "no \"Infiniband device '<name>' port <n> status:\" line found")
    cas = tuple(Ca(name=name, ports=tuple(ports)) for name, ports in ports_by_ca.items())
    guids = port_guids_of(cas)
    return IbResult(source="ibstatus", cas=cas, port_guids=guids, warnings=tuple(warnings))


_DETECT_RE = re.compile(r"^\s*Infiniband device '[^']+' port \d+ status:", re.M | re.I)


def detect(text: str) -> int:
    """Score ibstatus output by its ``Infiniband device 'x' port N status:`` headers."""
    head = text[:4000]
    if not _DETECT_RE.search(head):
        return 0
    score = 80
    if "phys state:" in head or "link_layer:" in head or "rate:" in head:
        score += 15
    return score
