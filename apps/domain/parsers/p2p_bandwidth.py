"""Parser for GPU-to-GPU copy benchmarks: CUDA samples' ``p2pBandwidthLatencyTest`` and NVIDIA's
``nvbandwidth``.

p2pBandwidthLatencyTest (cuda-samples ``Samples/5_Domain_Specific/p2pBandwidthLatencyTest``, trimmed)::

    [P2P (Peer-to-Peer) GPU Bandwidth Latency Test]
    Device: 0, NVIDIA H100 80GB HBM3, pciBusID: 19, pciDeviceID: 0, pciDomainID:0
    Device=0 CAN Access Peer Device=1
    P2P Connectivity Matrix
         D\\D     0     1
         0	     1     1
    Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)
       D\\D     0      1
         0 1516.99  38.24
    Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)
    Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)
    Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)
    P2P=Disabled Latency Matrix (us)
       GPU     0      1
         0   2.10  12.83

       CPU     0      1
         0   2.11   5.91
    P2P=Enabled Latency (P2P Writes) Matrix (us)

Older samples print ``P2P Cliques:`` with ``[0 1]`` lines instead of the connectivity matrix, titles
without ``(P2P Writes)`` and a latency matrix without the CPU block; ``--p2p_read`` prints ``(P2P Reads)``.

nvbandwidth (github.com/NVIDIA/nvbandwidth, v0.4-v0.10, trimmed)::

    nvbandwidth Version: v0.5
    CUDA Runtime Version: 12040
    Driver Version: 550.54.15
    Device 0: NVIDIA H100 80GB HBM3 (00000000:1b:00)
    Running device_to_device_memcpy_read_ce.
    memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)
               0         1
     0       N/A    392.67
     1    392.41       N/A
    SUM device_to_device_memcpy_read_ce 785.08

Several nvbandwidth runs concatenated (a ``###`` separator, the version block again) read as one list.

Result :class:`P2pBandwidth`, one fixed schema:

``tool``          ``p2pBandwidthLatencyTest`` or ``nvbandwidth``
``version``       nvbandwidth's version (``v0.5``), else null; ``cuda_runtime_version``, ``cuda_driver_version``,
                  ``driver_version`` as printed (nvbandwidth), else null
``devices``       tuple of :class:`Device`: ``index, name, bus_id`` (as printed, null when absent), ``bdf``
                  (canonical ``0000:19:00.0``, null when absent), ``line_no``
``peer_access``   tuple of :class:`PeerAccess` (``Device=0 CAN Access Peer Device=1``): ``src, dst, can_access,
                  line_no``
``connectivity``  the ``P2P Connectivity Matrix`` as a :class:`Matrix` (values 1/0), or null
``cliques``       tuple of tuples of device indexes (``P2P Cliques:``), empty when not printed
``matrices``      tuple of :class:`Matrix` in printed order:
                  ``title`` (as printed); ``testcase`` (nvbandwidth's ``Running X.`` name, else null);
                  ``measure`` (``bandwidth`` / ``latency``); ``unit`` (``GB/s`` = 1e9 B/s as both tools print,
                  ``us``, ``ns``); ``p2p`` (P2P=Enabled true, Disabled false, nvbandwidth null); ``bidirectional``;
                  ``p2p_mode`` (``writes`` / ``reads`` / null); ``engine`` (nvbandwidth ``CE`` / ``SM``, else null);
                  ``row_kind`` / ``col_kind`` (``GPU`` / ``CPU``); ``direction`` (nvbandwidth ``->``, ``<-``, ``<->``;
                  p2pBandwidthLatencyTest rows are sources and columns destinations: ``->``); ``block``
                  (p2pBandwidthLatencyTest latency: ``GPU`` or ``CPU``, who timed it; else null); ``row_ids``,
                  ``col_ids``; ``values`` (rows of floats; null for ``N/A``, and for ``nan``/``inf`` with a warning);
                  ``sum`` and ``coefficient_of_variation`` (nvbandwidth ``SUM`` / ``COEFFICIENT_OF_VARIATION``
                  lines, else null); ``line_no`` (the title's line)
``waived``        nvbandwidth testcases reported ``Waived`` (their names when printed, else ``""``)
``warnings``      tuple of strings

Broken input raises :class:`ParseError`: an empty text, a text of neither tool, a matrix row whose
cells are not numbers, or a matrix row wider than its header.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from apps.domain.errors import ParseError
from apps.domain.parsers.text import clean_lines
from apps.domain.pci import canonical_bdf

KIND = "p2p_bandwidth"
P2P_TOOL = "p2pBandwidthLatencyTest"
NVB_TOOL = "nvbandwidth"


@dataclass(frozen=True)
class Device:
    index: int
    name: str
    bus_id: str | None
    bdf: str | None
    line_no: int


@dataclass(frozen=True)
class PeerAccess:
    src: int
    dst: int
    can_access: bool
    line_no: int


@dataclass(frozen=True)
class Matrix:
    title: str
    testcase: str | None
    measure: str
    unit: str
    p2p: bool | None
    bidirectional: bool
    p2p_mode: str | None
    engine: str | None
    row_kind: str
    col_kind: str
    direction: str
    block: str | None
    row_ids: tuple[int, ...]
    col_ids: tuple[int, ...]
    values: tuple[tuple[float | None, ...], ...]
    sum: float | None
    coefficient_of_variation: float | None
    line_no: int


@dataclass(frozen=True)
class P2pBandwidth:
    tool: str
    version: str | None
    cuda_runtime_version: str | None
    cuda_driver_version: str | None
    driver_version: str | None
    devices: tuple[Device, ...]
    peer_access: tuple[PeerAccess, ...]
    connectivity: Matrix | None
    cliques: tuple[tuple[int, ...], ...]
    matrices: tuple[Matrix, ...]
    waived: tuple[str, ...]
    warnings: tuple[str, ...]


_P2P_TITLE_RE = re.compile(r"^\s*(?:(Unidirectional|Bidirectional) )?P2P=(Enabled|Disabled) (Bandwidth|Latency)"
                           r"(?: \(P2P (Writes|Reads)\))? Matrix \((GB/s|us)\)\s*$")
_NVB_TITLE_RE = re.compile(r"^\s*(?:memcpy|memory)\s+(?:latency\s+)?(CE|SM)?\s*(CPU|GPU)\(row\) (->|<-|<->) "
                           r"(CPU|GPU)\(column\)\s*(bandwidth|latency)?\s*\(([^)]+)\)")
_P2P_DEVICE_RE = re.compile(r"^\s*Device: (\d+), (.+?), pciBusID: ([0-9a-fA-F]+), pciDeviceID: ([0-9a-fA-F]+), "
                            r"pciDomainID:\s*([0-9a-fA-F]+)\s*$")
_NVB_DEVICE_RE = re.compile(r"^\s*Device (\d+): (.+?)(?: \(([0-9a-fA-F]+:[0-9a-fA-F]+:[0-9a-fA-F]+(?:\.\d)?)\))?\s*$")
_ACCESS_RE = re.compile(r"^\s*Device=(\d+) (CAN|CANNOT) Access Peer Device=(\d+)\s*$")
_CONNECTIVITY_RE = re.compile(r"^\s*P2P Connectivity Matrix\s*$")
_CLIQUES_RE = re.compile(r"^\s*P2P Cliques:\s*$")
_CLIQUE_RE = re.compile(r"^\s*\[([\d ]+)\]\s*$")
_MATRIX_HEAD_RE = re.compile(r"^\s*(D\\D|GPU|CPU)?((?:\s+\d+)+)\s*$")
_RUNNING_RE = re.compile(r"^\s*Running (\w+)\.?\s*$")
_SUM_RE = re.compile(r"^\s*SUM (\w+) (\S+)\s*$")
_CV_RE = re.compile(r"^\s*COEFFICIENT_OF_VARIATION (\w+) (\S+)\s*$")
_WAIVED_RE = re.compile(r"^\s*Waived:?\s*(\w*)")
_META_RE = re.compile(r"^\s*(nvbandwidth Version|CUDA Runtime Version|CUDA Driver Version(?: \(API\))?|"
                      r"Driver Version):\s*(.+?)\s*$")
_TOOL_TITLE = "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]"


@dataclass
class _Open:
    """A matrix being read: its title facts, header ids and rows so far."""

    facts: dict
    line_no: int
    block: str | None = None
    col_ids: tuple[int, ...] | None = None
    rows: list[tuple[int, tuple[float | None, ...]]] = field(default_factory=list)


@dataclass
class _Acc:
    """What one pass over the lines has read so far (private to :func:`parse`)."""

    warnings: list[str] = field(default_factory=list)
    tool: str | None = None
    meta: dict[str, str] = field(default_factory=dict)
    devices: dict[int, Device] = field(default_factory=dict)
    access: list[PeerAccess] = field(default_factory=list)
    connectivity: Matrix | None = None
    cliques: list[tuple[int, ...]] = field(default_factory=list)
    in_cliques: bool = False
    matrices: list[Matrix] = field(default_factory=list)
    open: _Open | None = None
    testcase: str | None = None
    waived: list[str] = field(default_factory=list)


def _cell(text: str, no: int, line: str, warnings: list[str]) -> float | None:
    """A matrix cell: a float, or None for ``N/A`` (not measured) and ``nan``/``inf`` (with a warning)."""
    if text.upper() in ("N/A", "NA", "-"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise ParseError(KIND, no, line, f"matrix cell {text!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        warnings.append(f"line {no}: cell {text!r} read as not measured (null)")
        return None
    return value


def _p2p_facts(m: re.Match) -> dict:
    return {"title": m.group(0).strip(), "measure": m.group(3).lower(), "unit": m.group(5),
            "p2p": m.group(2) == "Enabled", "bidirectional": m.group(1) == "Bidirectional",
            "p2p_mode": m.group(4).lower() if m.group(4) else None, "engine": None, "row_kind": "GPU",
            "col_kind": "GPU", "direction": "->"}


def _nvb_facts(m: re.Match, line: str) -> dict:
    unit = m.group(6)
    measure = (m.group(5) or ("latency" if "latency" in line else "bandwidth")).lower()
    return {"title": line.strip(), "measure": measure, "unit": unit, "p2p": None,
            "bidirectional": m.group(3) == "<->", "p2p_mode": None, "engine": m.group(1), "row_kind": m.group(2),
            "col_kind": m.group(4), "direction": m.group(3)}


def _close(acc: _Acc) -> None:
    """Finish the open matrix (or matrix block) and store it."""
    op = acc.open
    if op is None or op.col_ids is None:
        if op is not None:
            acc.warnings.append(f"line {op.line_no}: matrix {op.facts['title']!r} has no rows")
        acc.open = None
        return
    facts = dict(op.facts)
    title = facts.pop("title")
    matrix = Matrix(title=title, testcase=acc.testcase if acc.tool == NVB_TOOL else None, block=op.block,
                    row_ids=tuple(r for r, _ in op.rows), col_ids=op.col_ids,
                    values=tuple(v for _, v in op.rows), sum=None, coefficient_of_variation=None,
                    line_no=op.line_no, **facts)
    if not op.rows:
        acc.warnings.append(f"line {op.line_no}: matrix {title!r} has a header but no rows")
    if facts["measure"] == "connectivity":
        acc.connectivity = matrix
    else:
        acc.matrices.append(matrix)
    acc.open = None


def _matrix_line(acc: _Acc, line: str, no: int) -> bool:
    """Feed a header or row line to the open matrix; False when the line is not part of it."""
    op = acc.open
    if op is None:
        return False
    m = _MATRIX_HEAD_RE.match(line)
    if m and (m.group(1) or op.col_ids is None):
        if op.col_ids is not None:  # a second block under one title (latency: GPU then CPU)
            block_facts, first = op.facts, op.line_no
            _close(acc)
            acc.open = _Open(block_facts, first)
            op = acc.open
        op.col_ids = tuple(int(x) for x in m.group(2).split())
        op.block = m.group(1) if m.group(1) in ("GPU", "CPU") and op.facts["measure"] == "latency" else None
        return True
    tokens = line.split()
    if op.col_ids is not None and tokens and tokens[0].isdecimal():
        if len(tokens) - 1 > len(op.col_ids):
            raise ParseError(KIND, no, line, f"matrix row has {len(tokens) - 1} cells, the header {len(op.col_ids)}")
        values = tuple(_cell(t, no, line, acc.warnings) for t in tokens[1:])
        if len(values) < len(op.col_ids):
            acc.warnings.append(f"line {no}: matrix row cut short ({len(values)} of {len(op.col_ids)} cells)")
            values = values + (None,) * (len(op.col_ids) - len(values))
        op.rows.append((int(tokens[0]), values))
        return True
    return False


def _read_device(acc: _Acc, line: str, no: int) -> bool:
    m = _P2P_DEVICE_RE.match(line)
    if m:
        bus = f"{int(m.group(5), 16):04x}:{int(m.group(3), 16):02x}:{int(m.group(4), 16):02x}.0"
        acc.devices.setdefault(int(m.group(1)), Device(int(m.group(1)), m.group(2), bus, canonical_bdf(bus), no))
        return True
    m = _NVB_DEVICE_RE.match(line) if acc.tool == NVB_TOOL else None
    if m:
        bus = m.group(3)
        bdf = canonical_bdf(bus if "." in bus else bus + ".0") if bus else None
        acc.devices.setdefault(int(m.group(1)), Device(int(m.group(1)), m.group(2), bus, bdf, no))
        return True
    return False


def _read_summary(acc: _Acc, line: str, no: int) -> bool:
    """nvbandwidth's ``SUM`` / ``COEFFICIENT_OF_VARIATION`` lines, attached to the last matrix."""
    for regex, name in ((_SUM_RE, "sum"), (_CV_RE, "coefficient_of_variation")):
        m = regex.match(line)
        if m:
            if acc.matrices and acc.matrices[-1].testcase in (m.group(1), None):
                acc.matrices[-1] = replace(acc.matrices[-1], **{name: _cell(m.group(2), no, line, acc.warnings)})
            else:
                acc.warnings.append(f"line {no}: {m.group(1)} summary without its matrix")
            return True
    return False


def _read_line(acc: _Acc, line: str, no: int) -> None:
    """One line of either tool's output."""
    if _matrix_line(acc, line, no):
        return
    _close(acc)
    m = _P2P_TITLE_RE.match(line)
    if m:
        acc.tool = acc.tool or P2P_TOOL
        acc.open = _Open(_p2p_facts(m), no)
        return
    m = _NVB_TITLE_RE.match(line)
    if m:
        acc.tool = acc.tool or NVB_TOOL
        acc.open = _Open(_nvb_facts(m, line), no)
        return
    if _CONNECTIVITY_RE.match(line):
        acc.tool = acc.tool or P2P_TOOL
        acc.open = _Open({"title": line.strip(), "measure": "connectivity", "unit": "", "p2p": None,
                          "bidirectional": False, "p2p_mode": None, "engine": None, "row_kind": "GPU",
                          "col_kind": "GPU", "direction": "->"}, no)
        return
    if _read_device(acc, line, no) or _read_summary(acc, line, no):
        return
    m = _ACCESS_RE.match(line)
    if m:
        acc.access.append(PeerAccess(int(m.group(1)), int(m.group(3)), m.group(2) == "CAN", no))
        return
    _read_other(acc, line, no)


def _read_other(acc: _Acc, line: str, no: int) -> None:
    """Tool banners, cliques, nvbandwidth's metadata, testcase names and waivers; notes are skipped."""
    if _CLIQUES_RE.match(line):
        acc.in_cliques = True
        return
    m = _CLIQUE_RE.match(line)
    if m and acc.in_cliques:
        acc.cliques.append(tuple(int(x) for x in m.group(1).split()))
        return
    acc.in_cliques = False
    if line.strip() == _TOOL_TITLE:
        acc.tool = acc.tool or P2P_TOOL
        return
    m = _META_RE.match(line)
    if m:
        if m.group(1) == "nvbandwidth Version":
            acc.tool = acc.tool or NVB_TOOL
        key = {"nvbandwidth Version": "version", "CUDA Runtime Version": "cuda_runtime_version",
               "Driver Version": "driver_version"}.get(m.group(1), "cuda_driver_version")
        acc.meta.setdefault(key, m.group(2))
        return
    m = _RUNNING_RE.match(line)
    if m:
        acc.tool = acc.tool or NVB_TOOL
        acc.testcase = m.group(1)
        return
    m = _WAIVED_RE.match(line)
    if m:
        acc.waived.append(m.group(1))


def parse(text: str) -> P2pBandwidth:
    """Parse ``p2pBandwidthLatencyTest`` or ``nvbandwidth`` output."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    acc = _Acc()
    for no, line in enumerate(lines, 1):
        if not line.strip():
            if acc.open is not None and acc.open.facts["measure"] != "latency":
                _close(acc)
            continue
        _read_line(acc, line, no)
    _close(acc)
    if acc.tool is None or not (acc.matrices or acc.connectivity or acc.devices or acc.access):
        no, line = next((no, line) for no, line in enumerate(lines, 1) if line.strip())
        raise ParseError(KIND, no, line, "neither p2pBandwidthLatencyTest nor nvbandwidth output: no device "
                         "list and no bandwidth or latency matrix")
    if not acc.matrices:
        acc.warnings.append("no bandwidth or latency matrix (the output was cut short?)")
    if acc.waived:
        acc.warnings.append(f"{len(acc.waived)} nvbandwidth testcase(s) waived (not run on this system)")
    return P2pBandwidth(
        tool=acc.tool, version=acc.meta.get("version"), cuda_runtime_version=acc.meta.get("cuda_runtime_version"),
        cuda_driver_version=acc.meta.get("cuda_driver_version"), driver_version=acc.meta.get("driver_version"),
        devices=tuple(acc.devices[i] for i in sorted(acc.devices)), peer_access=tuple(acc.access),
        connectivity=acc.connectivity, cliques=tuple(acc.cliques), matrices=tuple(acc.matrices),
        waived=tuple(acc.waived), warnings=tuple(acc.warnings),
    )


_DETECT_P2P_RE = re.compile(r"P2P=(?:Enabled|Disabled) (?:Bandwidth|Latency)")
_DETECT_NVB_RE = re.compile(r"nvbandwidth Version|(?:memcpy|memory) (?:latency )?(?:CE|SM) (?:CPU|GPU)\(row\)")


def detect(text: str) -> int:
    """Score p2pBandwidthLatencyTest (its banner or ``P2P=Enabled ... Matrix`` titles) and nvbandwidth
    (its version line or ``memcpy CE GPU(row) -> GPU(column)`` titles) output."""
    head = text[:20000]
    if _TOOL_TITLE in head or _DETECT_P2P_RE.search(head) or _DETECT_NVB_RE.search(head):
        return 98
    return 0
