"""Parser for ``ibstat`` (infiniband-diags), including ``ibstat <ca>``, ``ibstat <ca> <port>`` and ``ibstat -p``.

Commands::

    ibstat                # every CA and port
    ibstat mlx5_0         # one CA (same layout)
    ibstat mlx5_0 1       # one port: a bare "Port 1:" block, no CA line (CA name null)
    ibstat -p             # port GUIDs only, one "0x..." per line

Layout (ibstat.c ``ca_dump``/``port_dump``; one tab per level, but pasted copies often have spaces,
mixed tabs/spaces or none, so lines are recognised by their words, not their indentation)::

    CA 'mlx5_0'
            CA type: MT4129
            Number of ports: 1
            Firmware version: 28.39.1002
            Hardware version: 0
            Node GUID: 0x946dae0300cde72c
            System image GUID: 0x946dae0300cde72c
            Port 1:
                    State: Active                    Down | Initializing | Armed | Active
                    Physical state: LinkUp           Sleep | Polling | Disabled | PortConfigurationTraining |
                                                     LinkUp | LinkErrorRecovery | PhyTest
                    Rate: 400                        integer Gb/s; "2.5" for 1X SDR; "40 (FDR10)"
                    Base lid: 75                     decimal; 65535 = unassigned; 0 on RoCE
                    LMC: 0
                    SM lid: 334
                    Capability mask: 0xa751e848
                    Port GUID: 0x946dae0300cde72c
                    Link layer: InfiniBand           or Ethernet (RoCE)

Result: :class:`apps.domain.parsers._ib.IbResult` (``source`` ``"ibstat"`` or ``"ibstat -p"``) whose
``cas`` hold :class:`~apps.domain.parsers._ib.Ca` / :class:`~apps.domain.parsers._ib.Port` records;
see ``_ib`` for every field. ibstat does not print width, so ``Port.width`` is null and
``Port.speed_name`` is only set for ``FDR10``.

Variants and quirks handled:

* CAs in lexical order (``mlx5_1``, ``mlx5_10``, ``mlx5_2``): kept in the order printed.
* ``ibpanic: ...`` / ``ibwarn: ...`` lines (ibstat exits 255 when a CA vanishes mid-run, printing
  ``ibpanic: [pid] main: stat of IB device 'mlx5_8' failed``): kept as warnings; if no CA was
  printed at all the text is an error.
* A pasted prompt/command line before the first CA (``$ ibstat``) is skipped with a warning.
* Lines an author trimmed (no ``Port GUID:``, no firmware lines) give a warning naming what is
  missing, and a CA printing fewer ``Port N:`` blocks than ``Number of ports:`` is flagged.
* SR-IOV virtual functions (``CA type: MT4124``), BlueField and ConnectX Ethernet ports (``Link layer:
  Ethernet``, ``Port GUID: 0x0``) read like any other CA.
"""

from __future__ import annotations

import re

from apps.domain.errors import ParseError
from apps.domain.parsers._ib import (
    ZERO_GUID,
    Ca,
    IbResult,
    Port,
    PortFields,
    canonical_guid,
    is_command_echo,
    missing_lines,
    normalise_phys_state,
    normalise_state,
    parse_int,
    parse_rate,
    port_guids_of,
)
from apps.domain.parsers.text import clean_lines

KIND = "ibstat"

_CA_RE = re.compile(r"^\s*CA\s+'([^']*)'\s*$")
_PORT_RE = re.compile(r"^\s*Port\s+(\d+)\s*:\s*$")
_KV_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 ]*?)\s*:\s*(.*?)\s*$")
_GUID_LINE_RE = re.compile(r"^\s*0x[0-9a-fA-F]{1,16}\s*$")
_DIAG_RE = re.compile(r"^\s*(ibpanic|ibwarn|ibstat|iberror)\s*:\s*(.*)$")

# ibstat label -> Ca field
_CA_KEYS = {
    "ca type": "ca_type",
    "number of ports": "num_ports",
    "firmware version": "firmware_version",
    "hardware version": "hardware_version",
    "node guid": "node_guid",
    "system image guid": "system_image_guid",
}
# ibstat label -> Port field (raw text kept until the block is finished)
_PORT_KEYS = {
    "state": "State",
    "physical state": "Physical state",
    "rate": "Rate",
    "base lid": "Base lid",
    "lmc": "LMC",
    "sm lid": "SM lid",
    "capability mask": "Capability mask",
    "port guid": "Port GUID",
    "link layer": "Link layer",
}
_CA_LABELS = ("CA type", "Number of ports", "Firmware version", "Hardware version", "Node GUID", "System image GUID")


class _PortAcc:
    __slots__ = ("number", "line_no", "raw")

    def __init__(self, number: int, line_no: int) -> None:
        self.number = number
        self.line_no = line_no
        self.raw: dict[str, tuple[int, str, str]] = {}  # label -> (line_no, line, value)


class _CaAcc:
    __slots__ = ("name", "line_no", "fields", "ports")

    def __init__(self, name: str | None, line_no: int) -> None:
        self.name = name
        self.line_no = line_no
        self.fields: dict[str, object] = {}
        self.ports: list[Port] = []


def _where(ca: _CaAcc | None) -> str:
    return f"CA '{ca.name}'" if ca and ca.name is not None else "the port listing"


def _finish_port(acc: _PortAcc, ca: _CaAcc, warnings: list[str]) -> Port:
    raw = acc.raw
    where = f"port {acc.number} of {_where(ca)}"

    fields = PortFields(KIND, raw, where)
    value, as_int = fields.value, fields.as_int

    state_raw, phys_raw = value("State"), value("Physical state")
    state = fields.normalised("State", normalise_state, warnings)
    phys = fields.normalised("Physical state", normalise_phys_state, warnings)
    rate_raw = value("Rate")
    rate = speed = None
    if rate_raw is not None:
        rate, _width, speed = parse_rate(rate_raw)
        if rate is None:
            item = raw["Rate"]
            raise ParseError(KIND, item[0], item[1], f"'Rate:' of {where} is not a rate in Gb/s")
    guid_raw = value("Port GUID")
    guid = None
    if guid_raw is not None:
        guid = canonical_guid(guid_raw)
        if guid is None:
            item = raw["Port GUID"]
            raise ParseError(KIND, item[0], item[1], f"'Port GUID:' of {where} is not a GUID")
    mask = value("Capability mask")
    if mask is not None:
        if parse_int(mask) is None:
            item = raw["Capability mask"]
            raise ParseError(KIND, item[0], item[1], f"'Capability mask:' of {where} is not a hex number")
        mask = mask.lower()
    missing = [label for label in _PORT_KEYS.values() if label not in raw]
    if missing:
        warnings.append(missing_lines(where, missing))
    return Port(
        number=acc.number,
        state=state,
        state_raw=state_raw,
        phys_state=phys,
        phys_state_raw=phys_raw,
        rate_gbps=rate,
        rate_raw=rate_raw,
        speed_name=speed,
        link_layer=value("Link layer"),
        base_lid=as_int("Base lid"),
        lmc=as_int("LMC"),
        sm_lid=as_int("SM lid"),
        capability_mask=mask,
        port_guid=guid,
    )


def _finish_ca(acc: _CaAcc, warnings: list[str]) -> Ca:
    if acc.name is not None:
        missing = [label for label in _CA_LABELS if _CA_KEYS[label.lower()] not in acc.fields]
        if missing:
            warnings.append(missing_lines(_where(acc), missing))
    num_ports = acc.fields.get("num_ports")
    if isinstance(num_ports, int) and len(acc.ports) < num_ports:
        warnings.append(
            f"{_where(acc)} has {num_ports} ports but {len(acc.ports)} 'Port N:' block(s) were printed (output cut?)"
        )
    return Ca(name=acc.name, ports=tuple(acc.ports), **acc.fields)  # type: ignore[arg-type]


def _parse_port_guids(lines: list[str], warnings: list[str]) -> IbResult:
    guids = []
    for no, line in enumerate(lines, 1):
        if not line.strip() or (not guids and is_command_echo(line)):
            if line.strip():
                warnings.append(f"line {no}: skipped command line {line.strip()!r}")
            continue
        if not _GUID_LINE_RE.match(line):
            raise ParseError(KIND, no, line, "expected one port GUID (0x...) per line, as 'ibstat -p' prints")
        guid = canonical_guid(line.strip())
        if guid != ZERO_GUID:  # Ethernet ports of some adapters have none
            guids.append(guid)
    return IbResult(source="ibstat -p", cas=(), port_guids=tuple(guids), warnings=tuple(warnings))


def parse(text: str) -> IbResult:
    """Parse ``ibstat`` / ``ibstat <ca>`` / ``ibstat <ca> <port>`` / ``ibstat -p`` output."""
    lines = clean_lines(text)
    warnings: list[str] = []
    first = next(((no, line) for no, line in enumerate(lines, 1) if line.strip() and not is_command_echo(line)), None)
    if first is None:
        if any(line.strip() for line in lines):
            no, line = next((no, line) for no, line in enumerate(lines, 1) if line.strip())
            raise ParseError(KIND, no, line, "only a command line, no ibstat output")
        raise ParseError(KIND, 0, "", "the text is empty")
    if _GUID_LINE_RE.match(first[1]):
        return _parse_port_guids(lines, warnings)

    cas: list[Ca] = []
    ca: _CaAcc | None = None
    port: _PortAcc | None = None
    first_diag: tuple[int, str, str] | None = None
    seen_names: set[str] = set()
    started = False

    def close_port() -> None:
        nonlocal port
        if port is not None and ca is not None:
            ca.ports.append(_finish_port(port, ca, warnings))
        port = None

    def close_ca() -> None:
        nonlocal ca
        close_port()
        if ca is not None:
            cas.append(_finish_ca(ca, warnings))
        ca = None

    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        head = stripped[:2]  # cheap dispatch: most lines are "Key: value"
        m = _CA_RE.match(line) if head == "CA" else None
        if m:
            close_ca()
            name = m.group(1).strip()
            if not name:
                raise ParseError(KIND, no, line, "CA line without a CA name")
            if name in seen_names:
                warnings.append(f"line {no}: CA '{name}' printed twice")
            seen_names.add(name)
            ca = _CaAcc(name, no)
            started = True
            continue
        m = _PORT_RE.match(line) if head == "Po" else None
        if m:
            close_port()
            if ca is None:
                if cas:
                    raise ParseError(KIND, no, line, "'Port N:' block outside any CA")
                ca = _CaAcc(None, no)  # "ibstat <ca> <port>" prints a bare port block
            number = int(m.group(1))
            if any(p.number == number for p in ca.ports):
                warnings.append(f"line {no}: port {number} of {_where(ca)} printed twice")
            port = _PortAcc(number, no)
            started = True
            continue
        m = _DIAG_RE.match(line) if head == "ib" else None
        if m:
            warnings.append(f"line {no}: ibstat reported: {stripped}")
            if first_diag is None:
                first_diag = (no, line, stripped)
            continue
        if not started and is_command_echo(line):
            warnings.append(f"line {no}: skipped command line {stripped!r}")
            continue
        m = _KV_RE.match(line)
        if not m:
            raise ParseError(KIND, no, line, f"unrecognised line in ibstat output (inside {_where(ca)})"
                             if ca else "unrecognised line; ibstat output starts with a CA 'name' line")
        label, value = m.group(1).lower(), m.group(2)
        if label in _PORT_KEYS:
            key = _PORT_KEYS[label]
            if port is None:
                raise ParseError(KIND, no, line, f"expected 'Port N:' before '{key}:' inside {_where(ca)}"
                                 if ca else f"'{key}:' before any CA 'name' line")
            if key in port.raw:
                warnings.append(f"line {no}: '{key}:' repeated in port {port.number} of {_where(ca)}; last kept")
            port.raw[key] = (no, line, value)
            continue
        if label in _CA_KEYS:
            field = _CA_KEYS[label]
            if ca is None or ca.name is None:
                raise ParseError(KIND, no, line, f"'{m.group(1)}:' before any CA 'name' line")
            if field in ca.fields:
                warnings.append(f"line {no}: '{m.group(1)}:' repeated in {_where(ca)}; last kept")
            if field == "num_ports":
                n = parse_int(value)
                if n is None:
                    raise ParseError(KIND, no, line, f"'Number of ports:' of {_where(ca)} is not a number")
                ca.fields[field] = n
            elif field in ("node_guid", "system_image_guid"):
                guid = canonical_guid(value)
                if guid is None:
                    raise ParseError(KIND, no, line, f"'{m.group(1)}:' of {_where(ca)} is not a GUID")
                ca.fields[field] = guid
            else:
                ca.fields[field] = value
            continue
        if ca is None:
            raise ParseError(KIND, no, line, "unrecognised line; ibstat output starts with a CA 'name' line")
        warnings.append(f"line {no}: unknown field '{m.group(1)}:' in {_where(ca)} ignored")
    close_ca()

    if not cas:
        if first_diag is not None:
            no, line, stripped = first_diag
            raise ParseError(KIND, no, line, f"ibstat failed and printed no CA: {stripped}")
        raise ParseError(KIND, first[0], first[1], "no CA 'name' line found: this is not ibstat output")
    guids = port_guids_of(cas)
    return IbResult(source="ibstat", cas=tuple(cas), port_guids=guids, warnings=tuple(warnings))


_DETECT_CA_RE = re.compile(r"^\s*CA '[^']+'\s*$", re.M)


def detect(text: str) -> int:
    """Score ibstat output: CA 'x' blocks with CA type / Port N: / Physical state lines."""
    head = text[:4000]
    score = 0
    if _DETECT_CA_RE.search(head):
        score += 50
    if "CA type:" in head:
        score += 20
    if "Physical state:" in head:
        score += 15
    if "Link layer:" in head or "Base lid:" in head:
        score += 10
    if score:
        return min(score, 95)
    lines = [ln for ln in head.splitlines() if ln.strip()]
    if lines and all(_GUID_LINE_RE.match(ln) for ln in lines[:20]):
        return 40  # ibstat -p: port GUIDs alone
    return 0
