"""Parser for perftest bandwidth tests: ``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw``, ``ib_atomic_bw``
(client or server side; ``-b`` bidirectional; RC, UC, UD, DC, XRC; ``-q N`` QPs; ``-R`` rdma_cm;
``--use_cuda`` / ``--use_cuda_dmabuf``; ``--report_gbits`` or the default MB/sec; ``-a`` sweeps).

Sample (client, trimmed)::

    ---------------------------------------------------------------------------------------
                        RDMA_Write BW Test
     Dual-port       : OFF          Device         : mlx5_1
     Number of qps   : 2            Transport type : IB
     Connection type : DC           Using SRQ      : ON
     TX depth        : 128
     Mtu             : 4096[B]
     Link type       : Ethernet
     GID index       : 3
     rdma_cm QPs     : OFF
     Data ex. method : Ethernet
    ---------------------------------------------------------------------------------------
     local address: LID 0000 QPN 0x902f PSN 0x953f49 RKey 0x0543ba VAddr 0x007fe8ff6f1000 SRQn 00000000
     GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:22:116:220
     remote address: LID 0000 QPN 0xc0cb PSN 0x6d8c61 RKey 0x053823 VAddr 0x007f7329067000 SRQn 0x00c0ca
     GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:22:116:221
    ---------------------------------------------------------------------------------------
     #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
     65536      10000            97.52              97.52              0.186003
    ---------------------------------------------------------------------------------------

Units. perftest prints ``BW peak[MB/sec]`` by default and ``[Gb/sec]`` with ``--report_gbits``. Its
``MB`` is 2^20 bytes: ``print_report_bw`` divides bytes/s by ``format_factor = (report_fmt == MBS) ?
0x100000 : 125000000``, and ``--help`` says "Note: MB=2^20 byte, while Gb=10^9 bits" (both in
linux-rdma/perftest src/perftest_parameters.c). So ``Gb/s = MB/sec * 2^20 * 8 / 10^9`` (x 0.008388608).
The real 10 GbE RoCE capture agrees: its 1100.7 MB/sec plateau is 9.23 Gb/s, at the ~9.26 Gb/s payload
ceiling of MTU 1024 on 10 GbE (a decimal reading, 8.81 Gb/s, would be 5 % below it). Every bandwidth in
the result is Gb/s (``_gbit``), whatever the file used; ``unit`` keeps what it printed. A bidirectional
test reports the sum of both directions (``print_full_bw_report`` adds the remote side's figures).

Result :class:`PerftestResult`, one fixed schema:

``test``             ``ib_write_bw`` / ``ib_read_bw`` / ``ib_send_bw`` / ``ib_atomic_bw`` from the banner (null when the
                     banner names another BW test); ``banner``: the banner as printed (``RDMA_Write BW Test``)
``bidirectional``    the banner says ``Bidirectional``
``side``             ``server`` (a ``Waiting for client`` line, or a send test printing ``RX depth`` without
                     ``TX depth``, or a write/read test printing neither), ``client`` (``TX depth`` printed in a
                     unidirectional test), else null
``device``           the RDMA device (``mlx5_1``); ``link_type`` (``IB`` / ``Ethernet``); ``transport_type`` (``IB``)
``connection``       ``RC`` / ``UC`` / ``UD`` / ``DC`` / ``XRC`` / ``SRD``; ``qps`` (int)
``gid_index``        int or null (IB ports print none); ``mtu_bytes``; ``tx_depth``, ``rx_depth``, ``cq_moderation``,
                     ``max_inline_bytes``, ``outstanding_reads``, ``tos`` (ints or null)
``rdma_cm``          ``rdma_cm QPs : ON``; ``data_exchange`` (``Ethernet`` / ``rdma_cm``); ``use_srq``, ``dual_port``,
                     ``pcie_relax_order`` (bools or null)
``other_fields``     any other ``key : value`` of the banner, as printed
``cuda``             true when GPU memory was used (``--use_cuda``: perftest's ``initializing CUDA`` /
                     ``cuMemAlloc`` lines, or ``--use_cuda`` on an echoed command line); ``gpu``: :class:`Gpu`
                     ``index, name, pci`` (``61:00`` as printed), ``bdf`` (``0000:61:00.0``), ``dmabuf`` (a DMA-BUF
                     line or ``--use_cuda_dmabuf``), or null
``local``, ``remote`` :class:`Endpoint`: ``lid`` (int), ``gid`` (as printed), ``ip`` (the IPv4 of an IPv4-mapped GID),
                     ``qpns`` (ints, one per QP line); null when no address line was printed
``unit``             ``MB/sec`` or ``Gb/sec`` as printed
``rows``             tuple of :class:`Row`: ``bytes, iterations, bw_peak_gbit`` (null when perftest did not measure
                     it: printed 0.00 with a non-zero average, duration mode / server side), ``bw_avg_gbit``,
                     ``msg_rate_mpps``, ``bw_min_gbit`` (the ``BW min`` column of newer builds, else null),
                     ``line_no``
``max_bw_avg_gbit``  the highest ``bw_avg_gbit`` of the rows, ``max_bw_avg_bytes`` its message size (null without rows)
``warnings``         tuple of strings: perftest's own notes (``WARNING: BW peak won't be measured``, ``Conflicting
                     CPU frequency values``, ``Requested mtu is higher than active mtu``...) and the parser's, with
                     ``line N:``

Markdown/reST indentation, tabs between banner fields and misaligned columns are read as whitespace.
Broken input raises :class:`ParseError`: empty text; no banner and no result header (not perftest); a
latency test (``ib_*_lat``: another result table); a result row with a non-numeric cell; a run that failed
before printing results (the error line is named).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from apps.domain.errors import ParseError
from apps.domain.parsers._launch import strip_launcher_prefix
from apps.domain.parsers.text import clean_lines
from apps.domain.pci import canonical_bdf

KIND = "perftest"
MB_TO_GBIT = (1 << 20) * 8 / 1e9  # perftest's MB is 2^20 bytes; Gb is 10^9 bits

_TESTS = {"RDMA_Write": "ib_write_bw", "RDMA_Read": "ib_read_bw", "Send": "ib_send_bw", "Atomic": "ib_atomic_bw"}


@dataclass(frozen=True)
class Gpu:
    index: int | None
    name: str | None
    pci: str | None
    bdf: str | None
    dmabuf: bool


@dataclass(frozen=True)
class Endpoint:
    lid: int | None
    gid: str | None
    ip: str | None
    qpns: tuple[int, ...]


@dataclass(frozen=True)
class Row:
    bytes: int
    iterations: int
    bw_peak_gbit: float | None
    bw_avg_gbit: float
    msg_rate_mpps: float | None
    bw_min_gbit: float | None
    line_no: int


@dataclass(frozen=True)
class PerftestResult:
    test: str | None
    banner: str
    bidirectional: bool
    side: str | None
    device: str | None
    link_type: str | None
    transport_type: str | None
    connection: str | None
    qps: int | None
    gid_index: int | None
    mtu_bytes: int | None
    tx_depth: int | None
    rx_depth: int | None
    cq_moderation: int | None
    max_inline_bytes: int | None
    outstanding_reads: int | None
    tos: int | None
    rdma_cm: bool | None
    data_exchange: str | None
    use_srq: bool | None
    dual_port: bool | None
    pcie_relax_order: bool | None
    other_fields: dict[str, str]
    cuda: bool
    gpu: Gpu | None
    local: Endpoint | None
    remote: Endpoint | None
    unit: str | None
    rows: tuple[Row, ...]
    max_bw_avg_gbit: float | None
    max_bw_avg_bytes: int | None
    warnings: tuple[str, ...]


_BANNER_RE = re.compile(r"^\s*(\w+)(?: (?!Bidirectional\b)(\w+))?( Bidirectional)? BW Test\s*$")
_LAT_BANNER_RE = re.compile(r"^\s*\w+(?: \w+)?(?: Bidirectional)? Latency Test\s*$")
_DASH_RE = re.compile(r"^\s*-{20,}\s*$")
_KV_RE = re.compile(r"([A-Za-z][\w.*\- ]*?)\s*:\s*(\S+)")
_ADDR_RE = re.compile(r"^\s*(local|remote) address: LID (\S+) QPN (\S+)")
_GID_RE = re.compile(r"^\s*GID: ([0-9a-fA-F:]+)\s*$")
_HEADER_RE = re.compile(r"^\s*#bytes\s+")
_COLUMN_RE = re.compile(r"#\w+|[A-Za-z_]+(?: [A-Za-z0-9]+)?\[[^\]]*\]")
_CUDA_RE = re.compile(r"initializing CUDA|cuMemAlloc|allocated GPU buffer|Picking device No\.|creating CUDA Ctx|"
                      r"deallocating GPU buffer|destroying current CUDA Ctx|CUDA device|Listing all CUDA devices|"
                      r"device name = \[|DMA-BUF|dmabuf|making it the current CUDA Ctx")
_PICK_RE = re.compile(r"Picking device No\.\s*(\d+)")
_GPU_NAME_RE = re.compile(r"device name = \[([^\]]+)\]")
_GPU_PCI_RE = re.compile(r"CUDA device (\d+): PCIe address is ([0-9a-fA-F:.]+)")
_WAITING_RE = re.compile(r"Waiting for client")
_FAIL_RE = re.compile(r"Couldn't|Could not|Unable to|Failed to|Completion with error|\bfailed\b|\berror\b|"
                      r"Segmentation fault|No such device|IB device .* not found", re.I)
_COMMAND_RE = re.compile(r"\bib_(write|read|send|atomic)_(bw|lat)\b")

_INT_FIELDS = {"number of qps": "qps", "gid index": "gid_index", "mtu": "mtu_bytes", "tx depth": "tx_depth",
               "rx depth": "rx_depth", "cq moderation": "cq_moderation", "max inline data": "max_inline_bytes",
               "outstand reads": "outstanding_reads", "tos": "tos"}
_BOOL_FIELDS = {"rdma_cm qps": "rdma_cm", "using srq": "use_srq", "dual-port": "dual_port",
                "pcie relax order": "pcie_relax_order"}
_TEXT_FIELDS = {"device": "device", "link type": "link_type", "transport type": "transport_type",
                "connection type": "connection", "data ex. method": "data_exchange"}
_BANNER_FIELD_NAMES = (*_INT_FIELDS.values(), *_BOOL_FIELDS.values(), *_TEXT_FIELDS.values())
_COLUMNS = {"#bytes": "bytes", "#iterations": "iterations", "#sl": "sl", "BW peak": "peak", "BW average": "avg",
            "MsgRate": "rate", "BW min": "min"}


@dataclass
class _Acc:
    """What one pass over the lines has read so far (private to :func:`parse`)."""

    warnings: list[str] = field(default_factory=list)
    banner: str | None = None
    banner_line: int = 0
    fields: dict[str, object] = field(default_factory=dict)
    other: dict[str, str] = field(default_factory=dict)
    cuda: bool = False
    gpu: dict[str, object] = field(default_factory=dict)
    waiting: bool = False
    addresses: dict[str, dict] = field(default_factory=dict)
    last_side: str | None = None
    columns: list[str] | None = None
    unit: str | None = None
    rows: list[Row] = field(default_factory=list)
    peak_unmeasured: int | None = None
    failure: tuple[int, str] | None = None
    command: str | None = None


def _to_number(cell: str, no: int, line: str, column: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise ParseError(KIND, no, line, f"{column} {cell!r} is not a number") from None
    return value


def _read_banner_fields(acc: _Acc, line: str) -> None:
    for key, value in _KV_RE.findall(line):
        low = key.strip().lower()
        if low in _INT_FIELDS:
            digits = re.match(r"-?\d+", value)
            acc.fields[_INT_FIELDS[low]] = int(digits.group(0)) if digits else None
        elif low in _BOOL_FIELDS:
            acc.fields[_BOOL_FIELDS[low]] = {"ON": True, "OFF": False}.get(value.upper())
        elif low in _TEXT_FIELDS:
            acc.fields[_TEXT_FIELDS[low]] = value
        else:
            acc.other[key.strip()] = value


def _read_header(acc: _Acc, line: str, no: int) -> None:
    names = _COLUMN_RE.findall(line)
    columns = []
    for name in names:
        base, _, unit = name.partition("[")
        key = _COLUMNS.get(base.strip())
        if key is None:
            columns.append("other")
            continue
        columns.append(key)
        if key in ("peak", "avg", "min"):
            unit = unit.rstrip("]")
            if unit not in ("MB/sec", "Gb/sec"):
                raise ParseError(KIND, no, line, f"unknown bandwidth unit {unit!r} (perftest prints MB/sec or Gb/sec)")
            acc.unit = unit
    if "bytes" not in columns or "avg" not in columns:
        raise ParseError(KIND, no, line, "result header without '#bytes' and 'BW average' columns")
    acc.columns = columns


def _gbit(value: float, unit: str | None) -> float:
    return round(value * MB_TO_GBIT, 4) if unit == "MB/sec" else value


def _read_row(acc: _Acc, tokens: list[str], no: int, line: str) -> None:
    columns = acc.columns or []
    if len(tokens) != len(columns):
        acc.warnings.append(f"line {no}: result row has {len(tokens)} fields, {len(columns)} expected; skipped")
        return
    cells = {col: _to_number(tok, no, line, col) for col, tok in zip(columns, tokens) if col != "other"}
    if not all(math.isfinite(v) for v in cells.values()):
        acc.warnings.append(f"line {no}: result row with nan/inf values; skipped")
        return
    avg = _gbit(cells["avg"], acc.unit)
    peak = _gbit(cells["peak"], acc.unit) if "peak" in cells else None
    if peak == 0 and avg > 0:
        peak = None
        acc.peak_unmeasured = acc.peak_unmeasured or no
    acc.rows.append(Row(bytes=int(cells["bytes"]), iterations=int(cells.get("iterations", 0)), bw_peak_gbit=peak,
                        bw_avg_gbit=avg, msg_rate_mpps=cells.get("rate"),
                        bw_min_gbit=_gbit(cells["min"], acc.unit) if "min" in cells else None, line_no=no))


def _read_address(acc: _Acc, m: re.Match) -> None:
    side = m.group(1)
    entry = acc.addresses.setdefault(side, {"lid": None, "gid": None, "qpns": []})
    try:
        entry["lid"] = int(m.group(2), 16) if m.group(2).lower().startswith("0x") else int(m.group(2))
    except ValueError:
        entry["lid"] = None
    try:
        entry["qpns"].append(int(m.group(3), 16))
    except ValueError:
        pass
    acc.last_side = side


def _ip_of_gid(gid: str) -> str | None:
    """The IPv4 of an IPv4-mapped GID as perftest prints it (16 decimal octets: ``...:255:255:10:6:145:32``)."""
    parts = gid.split(":")
    if len(parts) != 16 or not all(p.isdecimal() for p in parts):
        return None
    octets = [int(p) for p in parts]
    if octets[:10] == [0] * 10 and octets[10:12] == [255, 255] and all(o < 256 for o in octets[12:]):
        return ".".join(str(o) for o in octets[12:])
    return None


def _read_cuda(acc: _Acc, line: str) -> None:
    acc.cuda = True
    m = _PICK_RE.search(line)
    if m:
        acc.gpu["index"] = int(m.group(1))
    m = _GPU_NAME_RE.search(line)
    if m:
        acc.gpu["name"] = m.group(1)
    m = _GPU_PCI_RE.search(line)
    if m:
        acc.gpu.setdefault("pcis", {})[int(m.group(1))] = m.group(2)  # type: ignore[union-attr]
    if "DMA-BUF" in line or "dmabuf" in line.lower():
        acc.gpu["dmabuf"] = True


def _read_line(acc: _Acc, body: str, no: int, line: str, in_banner: bool) -> None:
    """One line that is not a banner or a dashed rule: banner fields, addresses, the result table,
    CUDA set-up chatter, perftest's own messages (kept as warnings)."""
    stripped = body.strip()
    if in_banner:
        _read_banner_fields(acc, body)
        return
    m = _ADDR_RE.match(body)
    if m:
        _read_address(acc, m)
        return
    m = _GID_RE.match(body)
    if m and acc.last_side:
        acc.addresses[acc.last_side]["gid"] = acc.addresses[acc.last_side]["gid"] or m.group(1)
        return
    if _HEADER_RE.match(body):
        if acc.columns is not None:
            acc.warnings.append(f"line {no}: result header printed again")
        _read_header(acc, body, no)
        return
    tokens = stripped.split()
    if acc.columns is not None and tokens and tokens[0].isdecimal():
        _read_row(acc, tokens, no, line)
        return
    if _CUDA_RE.search(stripped):
        _read_cuda(acc, stripped)
        return
    if _WAITING_RE.search(stripped):
        acc.waiting = True
        return
    m = _COMMAND_RE.search(stripped)
    if m and acc.banner is None and acc.command is None:
        acc.command = stripped
        return
    if stripped.strip("*").strip() == "" or stripped.startswith("Please run the same command"):
        return
    if _FAIL_RE.search(stripped) and acc.failure is None:
        acc.failure = (no, line)
    acc.warnings.append(f"line {no}: perftest: {stripped}")


def parse(text: str) -> PerftestResult:
    """Parse one perftest BW test's output (``ib_write_bw`` / ``ib_read_bw`` / ``ib_send_bw`` / ``ib_atomic_bw``)."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    acc = _Acc()
    in_banner = False
    for no, line in enumerate(lines, 1):
        body, _ = strip_launcher_prefix(line)
        if not body.strip() or body.strip().startswith("```"):
            continue
        if _DASH_RE.match(body):
            in_banner = False
            continue
        m = _BANNER_RE.match(body)
        if m:
            if acc.banner is not None:
                acc.warnings.append(f"line {no}: a second test banner; only the first run is read")
                break
            acc.banner, acc.banner_line, in_banner = body.strip(), no, True
            continue
        if _LAT_BANNER_RE.match(body):
            raise ParseError(KIND, no, line, "a perftest latency test (ib_*_lat); this parser reads the BW tests")
        _read_line(acc, body, no, line, in_banner)
    return _finish(acc, lines)


def _side(acc: _Acc, bidirectional: bool) -> str | None:
    """Which end printed this (see the module docstring); None when the text cannot tell."""
    if acc.waiting:
        return "server"
    if bidirectional or acc.banner is None:
        return None  # both ends print the same banner in a bidirectional test
    if "tx_depth" in acc.fields:
        return "client"
    if "rx_depth" in acc.fields:
        return "server"  # a send test's server prints RX depth only
    return "server" if "data_exchange" in acc.fields else None  # write/read servers print neither depth


def _endpoint(acc: _Acc, side: str) -> Endpoint | None:
    entry = acc.addresses.get(side)
    if entry is None:
        return None
    gid = entry["gid"]
    return Endpoint(lid=entry["lid"], gid=gid, ip=_ip_of_gid(gid) if gid else None, qpns=tuple(entry["qpns"]))


def _gpu(acc: _Acc) -> Gpu | None:
    if not acc.cuda:
        return None
    index = acc.gpu.get("index")
    pcis = acc.gpu.get("pcis") or {}
    pci = pcis.get(index) if index is not None else (next(iter(pcis.values())) if len(pcis) == 1 else None)
    bdf = None
    if pci:
        try:
            bdf = canonical_bdf(pci if "." in pci else pci + ".0")
        except ValueError:
            bdf = None
    return Gpu(index=index, name=acc.gpu.get("name"), pci=pci, bdf=bdf, dmabuf=bool(acc.gpu.get("dmabuf")))


def _finish(acc: _Acc, lines: list[str]) -> PerftestResult:
    if acc.banner is None and acc.columns is None:
        if acc.failure:
            no, line = acc.failure
            raise ParseError(KIND, no, line, f"perftest failed before printing results: {line.strip()}")
        no, line = next((no, line) for no, line in enumerate(lines, 1) if line.strip())
        raise ParseError(KIND, no, line, "not perftest output: no 'BW Test' banner and no '#bytes' result header")
    if not acc.rows:
        if acc.failure:
            no, line = acc.failure
            raise ParseError(KIND, no, line, f"perftest failed before printing results: {line.strip()}")
        acc.warnings.append("no result rows (the run was cut short or failed)")
    if acc.banner is None:
        acc.warnings.append("no test banner: test, device and link settings are unknown")
    if acc.peak_unmeasured:
        acc.warnings.append(f"line {acc.peak_unmeasured}: BW peak printed as 0.00 (not measured: duration mode or "
                            "server side); bw_peak_gbit is null")
    m = _BANNER_RE.match(acc.banner or "")
    verb = m.group(1) if m else None
    bidirectional = bool(m and m.group(3))
    test = _TESTS.get(verb or "")
    if m and test is None:
        acc.warnings.append(f"line {acc.banner_line}: unknown perftest BW test {acc.banner!r}")
    if acc.command and "--use_cuda" in acc.command:
        acc.cuda = True
        if "dmabuf" in acc.command:
            acc.gpu["dmabuf"] = True
    banner_fields = {name: acc.fields.get(name) for name in _BANNER_FIELD_NAMES}
    best = max(acc.rows, key=lambda r: r.bw_avg_gbit, default=None)
    return PerftestResult(
        test=test, banner=acc.banner or "", bidirectional=bidirectional, side=_side(acc, bidirectional),
        other_fields=dict(acc.other), cuda=acc.cuda, gpu=_gpu(acc), local=_endpoint(acc, "local"),
        remote=_endpoint(acc, "remote"), unit=acc.unit, rows=tuple(acc.rows),
        max_bw_avg_gbit=best.bw_avg_gbit if best else None, max_bw_avg_bytes=best.bytes if best else None,
        warnings=tuple(acc.warnings), **banner_fields,  # type: ignore[arg-type]
    )


_DETECT_BANNER_RE = re.compile(r"^\s*(?:RDMA_Write|RDMA_Read|Send|Atomic)(?: \w+)?(?: Bidirectional)? BW Test\s*$",
                               re.M)
_DETECT_HEADER_RE = re.compile(r"#bytes\s+(?:#sl\s+)?#iterations\s+BW peak\[")


def detect(text: str) -> int:
    """Score perftest BW output: the result header (96), the ``... BW Test`` banner (90), banner fields (60)."""
    head = text[:20000]
    if _DETECT_HEADER_RE.search(head):
        return 96
    if _DETECT_BANNER_RE.search(head):
        return 90
    if "Number of qps" in head and "Transport type" in head:
        return 60
    return 0
