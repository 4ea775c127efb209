"""Parser for nccl-tests output: ``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``,
``alltoall_perf``, ``broadcast_perf``, ``reduce_perf``, ``sendrecv_perf``, ``hypercube_perf``,
``gather_perf``, ``scatter_perf`` (and their ``*_mpi`` builds).

Sample (nccl-tests 2.18, trimmed)::

    # nccl-tests version 2.18.3 nccl-headers=23004 nccl-library=23004
    # Collective test starting: all_reduce_perf
    # nThread 1 nGpus 8 minBytes 1024 maxBytes 17179869184 step: 2(factor) warmup iters: 50 iters: 100 agg iters: 1 validation: 1 graph: 0 unalign: 0
    #
    # Using devices
    #  Rank  0 Group  0 Pid  10204 on nvidiatools-dell-h200-2-workload device  0 [0000:1b:00] NVIDIA H200
    NCCL version 2.30.4+cuda13.2
    #                                                              out-of-place                       in-place
    #       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
     17179869184    4294967296     float     sum      -1  66326.9  259.02  485.66       0  66345.5  258.95  485.52       0
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 178.222
    # Collective test concluded: all_reduce_perf

Variants read (all seen in real captures, tests/fixtures/nccl_tests):

* headers of several versions: with and without the ``root`` column; ``#wrong`` (a count, or ``N/A``
  when validation is off or the in-place check does not apply) or the old ``error`` column (a float);
  the parameter line with or without ``agg iters``, ``graph``, ``unalign``; ``step: N(factor)`` or
  ``step: N(bytes)``; no header at all (the column layout is then taken from the field count, 13 =
  with root, 12 = without);
* the "Using devices" table, old (``Rank 0 Pid ... on host device 0 [0x27] model``) and new
  (``Rank 0 Group 0 Pid ...``, ``[0000:1b:00]`` domain:bus:device) forms;
* launcher prefixes (``srun -l``, ``mpirun --tag-output``, MPICH ``[0]`` tags repeated inside the
  line, see ``_launch``), markdown indentation, code fences;
* NCCL ``INFO``/``WARN`` lines interleaved anywhere (WARN lines and nccl-tests' own ``Test NCCL
  failure`` / ``Test failure`` lines become warnings), "some output truncated" or ``...`` lines;
* a column header printed twice, a row line pasted twice (dropped), a run cut short (rows missing,
  a row cut mid-line, no ``Avg bus bandwidth``), a second collective in the same text (not read).

Result :class:`NcclTestsResult`, one fixed schema (bandwidths GB/s = 1e9 B/s, as nccl-tests prints):

``collective``        ``"all_reduce"``, ``"all_gather"``, ... or null
``collective_source`` ``"header"`` (``# Collective test starting:``), ``"command"`` (a ``*_perf`` command
                      line in the text), ``"inferred"`` (from redop, root, busbw/algbw (domain.md 5.1) and
                      which ``#wrong`` columns were checked: a reduction with root -1 is all_reduce above
                      ratio 1, reduce_scatter below, and at ratio 1 sendrecv when only out-of-place was
                      checked or a 2-rank all_reduce when both were; redop ``none`` below 1 is all_gather
                      (in-place checked) or alltoall (not); a root >= 0 gives reduce / broadcast; anything
                      else stays null) or null
``command``           the command line found in the text, or null
``version``           nccl-tests version (``"2.18.3"``) or null; ``nccl_headers``, ``nccl_library`` (ints)
``nccl_version``      ``"2.30.4+cuda13.2"`` from an ``NCCL version`` line, or null
``params``            :class:`NcclTestsParams` from the ``# nThread`` line (null when absent):
                      ``nthreads, ngpus, min_bytes, max_bytes, step_factor, step_bytes, warmup_iters, iters,
                      agg_iters, validation, graph, unalign, line_no`` (each null when not printed)
``ngpus_per_process`` ``params.ngpus`` (null without the line)
``ranks``             tuple of :class:`Rank`: ``rank, group, pid, host, device, bus_id`` (as printed without
                      brackets: ``"0000:1b:00"`` or ``"0x27"``), ``bdf`` (``"0000:1b:00.0"`` when the domain is
                      printed, else null: old versions print the bus byte only), ``pci_bus`` (int), ``model``,
                      ``line_no``
``nranks``            ``len(ranks)``, or null when the device table is missing
``hosts``             distinct hosts of ``ranks`` in order
``root``              the root of rooted collectives (first row's ``root`` when >= 0), or null
``rows``              tuple of :class:`Row`: ``size_bytes, count, type, redop, root`` (null without the column),
                      ``out_of_place`` and ``in_place`` (:class:`Side`: ``time_us, algbw_gbs, busbw_gbs,
                      wrong`` (int or null for ``N/A``), ``error`` (the old float column, else null); ``N/A``,
                      ``nan`` and ``inf`` cells are null; ``in_place``
                      is null when a cut row lost it), ``line_no``
``peak_busbw_gbs``    the highest out-of-place busbw of any row (null without rows); ``peak_size_bytes`` its size
``plateau_busbw_gbs`` the highest out-of-place busbw over sizes >= 1 GiB (domain.md 5.4), or null
``avg_busbw_gbs``     the ``# Avg bus bandwidth`` figure, or null
``out_of_bounds``     the ``# Out of bounds values`` count, or null
``layout``            ``"root"`` / ``"no_root"``: which column layout was read
``warnings``          tuple of strings; ``line N:`` names the line where one applies

Broken input raises :class:`ParseError`: an empty text, a text with no nccl-tests line at all, a column
header naming columns nccl-tests never printed, a result row whose numeric cell is not a number.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from apps.domain.errors import ParseError
from apps.domain.parsers._launch import strip_launcher_prefix
from apps.domain.parsers.text import clean_lines
from apps.domain.pci import canonical_bdf

KIND = "nccl_tests"
GIB = 1 << 30

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv",
               "hypercube", "gather", "scatter")
_LEAD_COLUMNS = ("size", "count", "type", "redop", "root")
_CHECK_COLUMNS = {"#wrong": "wrong", "wrong": "wrong", "error": "error", "#error": "error"}


@dataclass(frozen=True)
class NcclTestsParams:
    nthreads: int | None
    ngpus: int | None
    min_bytes: int | None
    max_bytes: int | None
    step_factor: int | None
    step_bytes: int | None
    warmup_iters: int | None
    iters: int | None
    agg_iters: int | None
    validation: int | None
    graph: int | None
    unalign: int | None
    line_no: int


@dataclass(frozen=True)
class Rank:
    rank: int
    group: int | None
    pid: int
    host: str
    device: int
    bus_id: str
    bdf: str | None
    pci_bus: int | None
    model: str
    line_no: int


@dataclass(frozen=True)
class Side:
    time_us: float | None
    algbw_gbs: float | None
    busbw_gbs: float | None
    wrong: int | None
    error: float | None


@dataclass(frozen=True)
class Row:
    size_bytes: int
    count: int
    type: str
    redop: str
    root: int | None
    out_of_place: Side
    in_place: Side | None
    line_no: int


@dataclass(frozen=True)
class NcclTestsResult:
    collective: str | None
    collective_source: str | None
    command: str | None
    version: str | None
    nccl_headers: int | None
    nccl_library: int | None
    nccl_version: str | None
    params: NcclTestsParams | None
    ngpus_per_process: int | None
    ranks: tuple[Rank, ...]
    nranks: int | None
    hosts: tuple[str, ...]
    root: int | None
    rows: tuple[Row, ...]
    peak_busbw_gbs: float | None
    peak_size_bytes: int | None
    plateau_busbw_gbs: float | None
    avg_busbw_gbs: float | None
    out_of_bounds: int | None
    layout: str | None
    warnings: tuple[str, ...]


_VERSION_RE = re.compile(r"#\s*nccl-tests version\s+(\S+)(?:\s+nccl-headers=(\d+))?(?:\s+nccl-library=(\d+))?")
_STARTING_RE = re.compile(r"#\s*Collective test (starting|concluded):\s*(\w+)")
_PARAMS_RE = re.compile(r"#\s*nThread\s+\d+")
_PARAM_NUM_RE = re.compile(r"\b(nThread|nGpus|minBytes|maxBytes)\s+(\d+)")
_PARAM_KV_RE = re.compile(r"\b(step|warmup iters|agg iters|iters|validation|graph|unalign):\s*(\d+)(?:\((\w+)\))?")
_RANK_RE = re.compile(r"#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
                      r"\[([^\]]*)\]\s*(.*?)\s*$")
_HEADER_RE = re.compile(r"#\s*size\s+count\s+type\b")
_AVG_RE = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB_RE = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s*(\w*)")
_NCCL_VERSION_RE = re.compile(r"\bNCCL version\s+(\d+\.\d+\.\d+\S*)")
_NCCL_LOG_RE = re.compile(r"\S+:\d+:\d+ \[\d+\] NCCL (INFO|WARN|TRACE|ERROR)\b")
_COMMAND_RE = re.compile(r"(?:^|[\s/])([a-z_]+?)_perf(?:_mpi)?(?=\s|$)")
_FAILURE_RE = re.compile(r"\bTest (?:NCCL |CUDA )?failure\b|\bNCCL failure\b")
_REDUCING_RE = re.compile(r"#\s*Reducing maxBytes to (\d+)")
_CUT_RE = re.compile(r"snip|truncat|^\s*\.{3,}\s*$|^\s*\u2026\s*$", re.I)
_BUS_DOMAIN_RE = re.compile(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-7]))?$")
_BUS_BYTE_RE = re.compile(r"^0x([0-9a-fA-F]{1,2})$")


def _to_float(cell: str, no: int, line: str, column: str) -> float | None:
    """A numeric cell; ``N/A``, ``nan`` and ``inf`` (nccl-tests prints them when nothing was measured) are None."""
    if cell == "N/A":
        return None
    try:
        value = float(cell)
    except ValueError:
        raise ParseError(KIND, no, line, f"{column} {cell!r} is not a number") from None
    return value if math.isfinite(value) else None


def _to_int(cell: str, no: int, line: str, column: str) -> int | None:
    if cell == "N/A":
        return None
    try:
        return int(cell)
    except ValueError:
        raise ParseError(KIND, no, line, f"{column} {cell!r} is not a whole number") from None


def _parse_params(body: str, no: int) -> NcclTestsParams:
    nums = {k: int(v) for k, v in _PARAM_NUM_RE.findall(body)}
    kv: dict[str, int] = {}
    step_unit = None
    for key, value, unit in _PARAM_KV_RE.findall(body):
        kv[key] = int(value)
        if key == "step":
            step_unit = unit or "factor"
    step = kv.get("step")
    return NcclTestsParams(
        nthreads=nums.get("nThread"), ngpus=nums.get("nGpus"), min_bytes=nums.get("minBytes"),
        max_bytes=nums.get("maxBytes"),
        step_factor=step if step_unit == "factor" else None, step_bytes=step if step_unit == "bytes" else None,
        warmup_iters=kv.get("warmup iters"), iters=kv.get("iters"), agg_iters=kv.get("agg iters"),
        validation=kv.get("validation"), graph=kv.get("graph"), unalign=kv.get("unalign"), line_no=no,
    )


def _bus_fields(bus: str) -> tuple[str, str | None, int | None]:
    """``(bus_id as printed, canonical BDF or None, bus number or None)`` of a ``[...]`` device id."""
    bus = bus.strip().lower()
    m = _BUS_DOMAIN_RE.match(bus)
    if m:
        bdf = canonical_bdf(f"{m.group(1)}:{m.group(2)}:{m.group(3)}.{m.group(4) or '0'}")
        return bus, bdf, int(m.group(2), 16)
    m = _BUS_BYTE_RE.match(bus)
    if m:
        return bus, None, int(m.group(1), 16)
    return bus, None, None


def _parse_rank(m: re.Match, no: int) -> Rank:
    bus_id, bdf, pci_bus = _bus_fields(m.group(6))
    return Rank(rank=int(m.group(1)), group=int(m.group(2)) if m.group(2) else None, pid=int(m.group(3)),
                host=m.group(4), device=int(m.group(5)), bus_id=bus_id, bdf=bdf, pci_bus=pci_bus,
                model=m.group(7), line_no=no)


def _header_layout(body: str, no: int, line: str) -> tuple[tuple[str, ...], str]:
    """Map a column header to ``(leading column names, check column kind)``."""
    names = body.lstrip("#").split()
    lead = []
    while names and names[0] in _LEAD_COLUMNS:
        lead.append(names.pop(0))
    if tuple(lead) != _LEAD_COLUMNS[: len(lead)] or len(lead) < 3:
        raise ParseError(KIND, no, line, "column header does not start 'size count type'")
    sides = [names[i:i + 4] for i in range(0, len(names), 4)]
    if len(sides) != 2 or any(s[:3] != ["time", "algbw", "busbw"] or len(s) != 4 for s in sides):
        raise ParseError(KIND, no, line, "column header is not 'time algbw busbw #wrong' for out-of-place and in-place")
    checks = {_CHECK_COLUMNS.get(s[3]) for s in sides}
    if None in checks or len(checks) != 1:
        raise ParseError(KIND, no, line,
                         f"unknown check column {sides[0][3]!r} (nccl-tests prints '#wrong' or 'error')")
    return tuple(lead), checks.pop()


def _side(cells: list[str], check: str, no: int, line: str) -> Side:
    time_us = _to_float(cells[0], no, line, "time")
    algbw = _to_float(cells[1], no, line, "algbw")
    busbw = _to_float(cells[2], no, line, "busbw")
    if check == "wrong":
        return Side(time_us, algbw, busbw, _to_int(cells[3], no, line, "#wrong"), None)
    return Side(time_us, algbw, busbw, None, _to_float(cells[3], no, line, "error"))


def _looks_like_row(tokens: list[str]) -> bool:
    return len(tokens) >= 4 and tokens[0].isdecimal() and tokens[1].isdecimal() and tokens[2][:1].isalpha()


def _parse_row(tokens: list[str], lead: tuple[str, ...], check: str, no: int, line: str,
               warnings: list[str]) -> Row | None:
    width = len(lead) + 8
    if len(tokens) > width:
        warnings.append(f"line {no}: row has {len(tokens)} fields, {width} expected (two rows merged?); skipped")
        return None
    if len(tokens) < len(lead) + 4:
        warnings.append(f"line {no}: row cut short ({len(tokens)} of {width} fields); skipped")
        return None
    root = _to_int(tokens[4], no, line, "root") if "root" in lead else None
    n = len(lead)
    out = _side(tokens[n:n + 4], check, no, line)
    inp = None
    if len(tokens) == width:
        inp = _side(tokens[n + 4:n + 8], check, no, line)
    else:
        warnings.append(f"line {no}: row cut short: in-place columns missing")
    return Row(size_bytes=int(tokens[0]), count=int(tokens[1]), type=tokens[2],
               redop=tokens[3] if len(lead) >= 4 else "", root=root, out_of_place=out, in_place=inp, line_no=no)


def _infer_collective(rows: list[Row]) -> str | None:
    """The collective from redop, root, the busbw/algbw ratio (domain.md 5.1) and which ``#wrong``
    columns nccl-tests checked, when that leaves one candidate; else None."""
    best = max((r for r in rows if r.out_of_place.algbw_gbs and r.out_of_place.busbw_gbs is not None),
               key=lambda r: r.out_of_place.algbw_gbs or 0.0, default=None)
    if best is None or (best.out_of_place.algbw_gbs or 0) < 0.5:
        return None
    ratio = (best.out_of_place.busbw_gbs or 0.0) / (best.out_of_place.algbw_gbs or 1.0)
    if best.root is not None and best.root >= 0:
        return "broadcast" if best.redop == "none" else "reduce"
    oop_checked = any(r.out_of_place.wrong is not None for r in rows)
    ip_checked = any(r.in_place is not None and r.in_place.wrong is not None for r in rows)
    unit = abs(ratio - 1.0) < 0.02
    if best.redop == "none":
        if unit or not oop_checked:
            return None
        return "all_gather" if ip_checked else "alltoall"  # alltoall never checks in-place
    if not unit:
        return "all_reduce" if ratio > 1.0 else "reduce_scatter"
    if oop_checked and not ip_checked:
        return "sendrecv"  # ratio 1 and no in-place check: sendrecv
    return "all_reduce" if oop_checked else None  # ratio 1 with both checks: a 2-rank all_reduce


def _collective_name(word: str) -> str | None:
    name = word[:-5] if word.endswith("_perf") else word
    return name if name in COLLECTIVES else None


def _peak(rows: list[Row], min_size: int = 0) -> tuple[float | None, int | None]:
    best: tuple[float | None, int | None] = (None, None)
    for r in rows:
        bw = r.out_of_place.busbw_gbs
        if bw is not None and r.size_bytes >= min_size and (best[0] is None or bw > best[0]):
            best = (bw, r.size_bytes)
    return best


@dataclass
class _State:
    """What one pass over the lines has read so far (private to :func:`parse`)."""

    warnings: list[str] = field(default_factory=list)
    version: str | None = None
    headers: int | None = None
    library: int | None = None
    nccl_version: str | None = None
    collective: str | None = None
    collective_source: str | None = None
    command: str | None = None
    params: NcclTestsParams | None = None
    ranks: list[Rank] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    layout: tuple[tuple[str, ...], str] | None = None
    header_lines: int = 0
    in_table: bool = False
    ended: bool = False  # the Avg / Out of bounds lines were seen
    avg: float | None = None
    oob: int | None = None
    found: bool = False
    prefixes: dict[str, int] = field(default_factory=dict)
    seen_rows: set[str] = field(default_factory=set)
    repeated_rows: list[int] = field(default_factory=list)


def _read_comment(st: _State, body: str, no: int, line: str) -> bool:
    """Handle a ``#`` line; False when it ends the text (a second collective starts)."""
    m = _HEADER_RE.match(body)
    if m:
        layout = _header_layout(body, no, line)
        if st.layout is not None and st.header_lines:
            st.warnings.append(f"line {no}: column header printed again")
            if layout != st.layout:
                raise ParseError(KIND, no, line, "column header differs from the first one")
        st.layout = layout
        st.header_lines += 1
        st.in_table = True
        st.found = True
        return True
    m = _RANK_RE.match(body)
    if m:
        rank = _parse_rank(m, no)
        if any(r.rank == rank.rank for r in st.ranks):
            st.warnings.append(f"line {no}: rank {rank.rank} listed twice; first kept")
        else:
            st.ranks.append(rank)
        st.found = True
        return True
    m = _AVG_RE.match(body)
    if m:
        st.avg = _to_float(m.group(1), no, line, "average bus bandwidth")
        if st.avg is None:
            st.warnings.append(f"line {no}: average bus bandwidth {m.group(1)!r} read as null")
        st.in_table, st.ended, st.found = False, True, True
        return True
    m = _OOB_RE.match(body)
    if m:
        st.oob = int(m.group(1))
        if m.group(2) and m.group(2).upper() != "OK":
            st.warnings.append(f"line {no}: nccl-tests found {st.oob} out-of-bounds values ({m.group(2)})")
        st.in_table, st.ended, st.found = False, True, True
        return True
    if _PARAMS_RE.match(body):
        if st.params is not None and (st.rows or st.ended):
            st.warnings.append(f"line {no}: a second run starts here; only the first is read")
            return False
        st.params = _parse_params(body, no)
        st.found = True
        return True
    m = _STARTING_RE.match(body)
    if m:
        name = _collective_name(m.group(2))
        if m.group(1) == "starting":
            if st.collective_source == "header" and (st.rows or st.ended):
                st.warnings.append(f"line {no}: a second collective ({m.group(2)}) starts here; only the first is read")
                return False
            if name:
                st.collective, st.collective_source = name, "header"
        st.found = True
        return True
    m = _VERSION_RE.match(body)
    if m:
        st.version = m.group(1)
        st.headers = int(m.group(2)) if m.group(2) else None
        st.library = int(m.group(3)) if m.group(3) else None
        st.found = True
        return True
    m = _REDUCING_RE.match(body)
    if m:
        st.warnings.append(f"line {no}: nccl-tests reduced maxBytes to {m.group(1)} (memory limitation)")
    elif _CUT_RE.search(body):
        st.warnings.append(f"line {no}: output cut here ({body.strip()[:60]!r})")
    return True


def _read_other(st: _State, body: str, no: int, line: str) -> None:
    """Handle a line that is not a ``#`` comment: a row, an NCCL log line, a command, noise."""
    tokens = body.split()
    if _looks_like_row(tokens):
        if st.layout is None:
            st.layout = (_LEAD_COLUMNS, "wrong") if len(tokens) >= 13 else (_LEAD_COLUMNS[:4], "wrong")
            st.warnings.append(f"line {no}: no column header before the first row; "
                               f"{'13' if len(tokens) >= 13 else '12'}-column layout assumed")
        key = " ".join(tokens)
        if key in st.seen_rows:
            st.repeated_rows.append(no)
            return
        st.seen_rows.add(key)
        row = _parse_row(tokens, st.layout[0], st.layout[1], no, line, st.warnings)
        if row is not None:
            st.rows.append(row)
            st.found = True
        st.in_table = True
        return
    m = _NCCL_VERSION_RE.search(body)
    if m and st.nccl_version is None:
        st.nccl_version = m.group(1)
    log = _NCCL_LOG_RE.search(body)
    if log:
        if log.group(1) in ("WARN", "ERROR"):
            st.warnings.append(f"line {no}: NCCL {log.group(1)}: {body[log.end():].strip()}")
        return
    if _FAILURE_RE.search(body):
        st.warnings.append(f"line {no}: {body.strip()}")
        return
    m = _COMMAND_RE.search(body)
    if m and _collective_name(m.group(1)) and not st.rows and st.command is None:
        st.command = body.strip().lstrip("$#+ ").strip()
        if st.collective_source is None:
            st.collective, st.collective_source = _collective_name(m.group(1)), "command"
        return
    if _CUT_RE.search(body):
        st.warnings.append(f"line {no}: output cut here ({body.strip()[:60]!r})")
    elif st.in_table:
        st.warnings.append(f"line {no}: skipped {body.strip()[:80]!r} inside the result table")


def parse(text: str) -> NcclTestsResult:
    """Parse the output of one nccl-tests binary (``*_perf``)."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    st = _State()
    for no, line in enumerate(lines, 1):
        body, launcher = strip_launcher_prefix(line)
        if launcher:
            st.prefixes[launcher] = st.prefixes.get(launcher, no)
        stripped = body.lstrip()
        if not stripped or stripped.startswith("```"):
            continue
        if stripped[0] == "#":
            if not _read_comment(st, stripped, no, line):
                break
        else:
            _read_other(st, stripped, no, line)
    if not st.found:
        no, line = next((no, line) for no, line in enumerate(lines, 1) if line.strip())
        raise ParseError(KIND, no, line, "not nccl-tests output: no '# nThread' line, device list, column header, "
                         "result row or 'Avg bus bandwidth' line")
    return _finish(st)


def _finish(st: _State) -> NcclTestsResult:
    warnings = st.warnings
    for launcher, no in st.prefixes.items():
        warnings.insert(0, f"line {no}: {launcher} prefixes removed from the lines")
    if st.repeated_rows:
        warnings.append(f"{len(st.repeated_rows)} row line(s) repeated verbatim, first at line "
                        f"{st.repeated_rows[0]}; dropped")
    if not st.rows:
        warnings.append("no result rows (the table was cut or left out)")
    elif not st.ended:
        warnings.append("no 'Avg bus bandwidth' line: the run may have been cut short")
    if not st.ranks:
        warnings.append("no 'Using devices' list: ranks, hosts and GPUs are unknown")
    bad = [r for r in st.rows if (r.out_of_place.wrong or 0) > 0 or (r.in_place and (r.in_place.wrong or 0) > 0)]
    if bad:
        warnings.append(f"{len(bad)} row(s) report #wrong > 0 (wrong results), first at line {bad[0].line_no}")
    collective, source = st.collective, st.collective_source
    if collective is None and st.rows:
        collective = _infer_collective(st.rows)
        source = "inferred" if collective else None
    peak, peak_size = _peak(st.rows)
    plateau, _ = _peak(st.rows, GIB)
    root = next((r.root for r in st.rows if r.root is not None and r.root >= 0), None)
    hosts = tuple(dict.fromkeys(r.host for r in st.ranks))
    layout = None
    if st.layout is not None:
        layout = "root" if "root" in st.layout[0] else "no_root"
    return NcclTestsResult(
        collective=collective, collective_source=source, command=st.command, version=st.version,
        nccl_headers=st.headers, nccl_library=st.library, nccl_version=st.nccl_version, params=st.params,
        ngpus_per_process=st.params.ngpus if st.params else None, ranks=tuple(st.ranks),
        nranks=len(st.ranks) or None, hosts=hosts, root=root, rows=tuple(st.rows), peak_busbw_gbs=peak,
        peak_size_bytes=peak_size, plateau_busbw_gbs=plateau, avg_busbw_gbs=st.avg, out_of_bounds=st.oob,
        layout=layout, warnings=tuple(warnings),
    )


_DETECT_HEADER_RE = re.compile(r"#\s*size\s+count\s+type\s+(?:redop\s+)?")
_DETECT_PARAMS_RE = re.compile(r"#\s*nThread\s+\d+\s+nGpus\s+\d+")
_DETECT_ROW_RE = re.compile(r"^\s*\d+\s+\d+\s+(?:float|half|double|bfloat16|int8|uint8|int32|uint32|int64|uint64|"
                            r"f8e4m3|f8e5m2)\s+(?:sum|prod|max|min|avg|none|mulsum)\s")


def detect(text: str) -> int:
    """Score nccl-tests output: its column header (98), ``# nThread`` line (95), ``Avg bus bandwidth`` or
    device list (85), two result rows without any header (70, launcher prefixes allowed). The end of
    the text is searched too: an ``NCCL_DEBUG=INFO`` run prints thousands of log lines before the table."""
    head, tail = text[:20000], text[-6000:]
    if _DETECT_HEADER_RE.search(head) or _DETECT_HEADER_RE.search(tail):
        return 98
    if _DETECT_PARAMS_RE.search(head):
        return 95
    if "# Avg bus bandwidth" in tail or "# Using devices" in head:
        return 85
    rows = sum(1 for line in head.splitlines()[:200] if _DETECT_ROW_RE.match(strip_launcher_prefix(line)[0]))
    return 70 if rows >= 2 else 0
