"""Parser for the GPU inventory query (domain.md 4.2 join 1, 4.3)::

    nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,compute_cap,pstate,pcie.link.gen.gpucurrent,\
pcie.link.gen.max,pcie.link.gen.gpumax,pcie.link.gen.hostmax,pcie.link.width.current,pcie.link.width.max \
--format=csv[,noheader][,nounits]

Input forms:

* **With a header** (``--format=csv``): the first line names the columns, e.g.
  ``index, uuid, pci.bus_id, name, compute_cap, pstate, pcie.link.gen.gpucurrent, ...``. Any subset of
  the known columns in any order is read, as long as ``index`` and ``pci.bus_id`` are present.
  A unit suffix in a header (``memory.total [MiB]``) is ignored. Aliases: ``pcie.link.gen.current``
  (older drivers' name for ``gpucurrent``), ``gpu_uuid``, ``gpu_bus_id``, ``gpu_name``. Other columns
  are skipped with a warning.
* **Without a header** (``noheader``): the column order of the command above is assumed; rows may
  have fewer fields (a shorter query keeping that order, e.g. ``index,uuid,pci.bus_id``), never more.

Cells: ``[N/A]``, ``N/A``, ``[Not Supported]``, ``[Unknown Error]``, ``[Insufficient Permissions]`` and
empty cells read as null with no warning (nvidia-smi prints them for fields a GPU or driver lacks).
A unit after a number (``4 GT/s``-style text when ``nounits`` is absent) is stripped. The PCI
address is canonicalised (``00000000:1B:00.0`` -> ``0000:1b:00.0``, domain.md 4.1).
A first line that is nvidia-smi's own complaint (``Field "pcie.link.gen.gpumax" is not a valid field
to query.``) is an error naming it.

Result :class:`GpuInventory`:

``gpus``: tuple of :class:`GpuRow` in printed order: ``index`` (int), ``uuid`` (``GPU-...``), ``bdf``
(canonical), ``name``, ``compute_cap`` (text, ``9.0``), ``pstate`` (``P0``), ``link_gen_current``,
``link_gen_max``, ``link_gen_gpu_max``, ``link_gen_host_max``, ``link_width_current``,
``link_width_max`` (ints or null). A column absent from the input is null.

``columns``: the query field names in input order (as printed without units, or the assumed order
for ``noheader``). ``header``: whether the input had a header line. ``warnings``: tuple of strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.domain.errors import ParseError
from apps.domain.parsers.text import clean_lines
from apps.domain.pci import canonical_bdf, is_bdf

KIND = "nvidia_smi_gpus"

QUERY_FIELDS = (
    "index",
    "uuid",
    "pci.bus_id",
    "name",
    "compute_cap",
    "pstate",
    "pcie.link.gen.gpucurrent",
    "pcie.link.gen.max",
    "pcie.link.gen.gpumax",
    "pcie.link.gen.hostmax",
    "pcie.link.width.current",
    "pcie.link.width.max",
)
# query field (and aliases) -> GpuRow attribute
_ATTR = {
    "index": "index",
    "uuid": "uuid",
    "gpu_uuid": "uuid",
    "pci.bus_id": "bdf",
    "gpu_bus_id": "bdf",
    "name": "name",
    "gpu_name": "name",
    "compute_cap": "compute_cap",
    "pstate": "pstate",
    "pcie.link.gen.gpucurrent": "link_gen_current",
    "pcie.link.gen.current": "link_gen_current",
    "pcie.link.gen.max": "link_gen_max",
    "pcie.link.gen.gpumax": "link_gen_gpu_max",
    "pcie.link.gen.hostmax": "link_gen_host_max",
    "pcie.link.width.current": "link_width_current",
    "pcie.link.width.max": "link_width_max",
}
_INT_ATTRS = {"link_gen_current", "link_gen_max", "link_gen_gpu_max", "link_gen_host_max", "link_width_current",
              "link_width_max"}


@dataclass(frozen=True)
class GpuRow:
    index: int
    uuid: str | None = None
    bdf: str | None = None
    name: str | None = None
    compute_cap: str | None = None
    pstate: str | None = None
    link_gen_current: int | None = None
    link_gen_max: int | None = None
    link_gen_gpu_max: int | None = None
    link_gen_host_max: int | None = None
    link_width_current: int | None = None
    link_width_max: int | None = None


@dataclass(frozen=True)
class GpuInventory:
    gpus: tuple[GpuRow, ...]
    columns: tuple[str, ...]
    header: bool
    warnings: tuple[str, ...]


_NULLS = {"", "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]",
          "[gpu is lost]", "[gpu requires reset]", "unknown"}
_UNIT_RE = re.compile(r"^\s*(\d+)\s*(?:[A-Za-z/%]+(?:/s)?)?\s*$")
_HEADER_UNIT_RE = re.compile(r"\s*\[[^\]]*\]\s*$")
_NVSMI_COMPLAINT_RE = re.compile(
    r"^\s*(Field \".*\" is not a valid field to query|Invalid combination|NVIDIA-SMI has failed|No devices were found"
    r"|Failed to|Unable to|ERROR:|Error:)",
    re.I,
)
_PROMPT_RE = re.compile(r"^\s*(?:.*[$#>]\s*)?(?:sudo\s+)?nvidia-smi\b")


def _split(line: str) -> list[str]:
    return [cell.strip() for cell in line.split(",")]


def _is_header(cells: list[str]) -> bool:
    return any(_HEADER_UNIT_RE.sub("", c).lower() in _ATTR for c in cells)


def parse(text: str) -> GpuInventory:
    """Parse ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` output."""
    lines = clean_lines(text)
    warnings: list[str] = []
    rows = [(no, line) for no, line in enumerate(lines, 1) if line.strip()]
    if not rows:
        raise ParseError(KIND, 0, "", "the text is empty")
    while rows and _PROMPT_RE.match(rows[0][1]):
        warnings.append(f"line {rows[0][0]}: skipped command line {rows[0][1].strip()!r}")
        rows = rows[1:]
    if not rows:
        raise ParseError(KIND, 0, "", "only a command line, no nvidia-smi output")
    no, first = rows[0]
    if _NVSMI_COMPLAINT_RE.match(first):
        raise ParseError(KIND, no, first, f"nvidia-smi refused the query: {first.strip()}")

    cells = _split(first)
    header = _is_header(cells)
    if header:
        columns = tuple(_HEADER_UNIT_RE.sub("", c).strip() for c in cells)
        lowered = [c.lower() for c in columns]
        attrs: list[str | None] = []
        for col, low in zip(columns, lowered):
            attr = _ATTR.get(low)
            if attr is None:
                warnings.append(f"column '{col}' is not used")
            elif attr in attrs:
                raise ParseError(KIND, no, first, f"column '{col}' appears twice")
            attrs.append(attr)
        if "index" not in attrs or "bdf" not in attrs:
            raise ParseError(KIND, no, first, "the header must name both 'index' and 'pci.bus_id' columns")
        data = rows[1:]
    else:
        columns = QUERY_FIELDS
        attrs = [_ATTR[c] for c in QUERY_FIELDS]
        data = rows

    gpus: list[GpuRow] = []
    seen: set[int] = set()
    width: int | None = None
    for no, line in data:
        if _NVSMI_COMPLAINT_RE.match(line):
            raise ParseError(KIND, no, line, f"nvidia-smi reported an error: {line.strip()}")
        cells = _split(line)
        if header and len(cells) != len(attrs):
            raise ParseError(KIND, no, line, f"row has {len(cells)} fields but the header names {len(attrs)}")
        if not header:
            if len(cells) > len(QUERY_FIELDS):
                raise ParseError(KIND, no, line, f"row has {len(cells)} fields; without a header the "
                                 f"{len(QUERY_FIELDS)}-column order {','.join(QUERY_FIELDS)} is assumed")
            if len(cells) < 3:
                raise ParseError(KIND, no, line, "without a header each row needs at least index, uuid, pci.bus_id")
            if width is None:
                width = len(cells)
            elif len(cells) != width:
                raise ParseError(KIND, no, line, f"row has {len(cells)} fields but the first row has {width}")
        values: dict[str, object] = {}
        for attr, cell in zip(attrs, cells):
            if attr is None:
                continue
            if cell.lower() in _NULLS:
                values[attr] = None
                continue
            if attr == "index":
                if not (cell.isascii() and cell.isdigit()):
                    raise ParseError(KIND, no, line, f"GPU index {cell!r} is not a number")
                values[attr] = int(cell)
            elif attr == "bdf":
                if not is_bdf(cell):
                    raise ParseError(KIND, no, line, f"pci.bus_id {cell!r} is not a PCI address")
                values[attr] = canonical_bdf(cell)
            elif attr in _INT_ATTRS:
                m = _UNIT_RE.match(cell)
                if not m:
                    raise ParseError(KIND, no, line, f"{columns[attrs.index(attr)]} {cell!r} is not a number")
                values[attr] = int(m.group(1))
            else:
                values[attr] = cell
        if values.get("index") is None:
            raise ParseError(KIND, no, line, "row without a GPU index")
        if values.get("bdf") is None:
            raise ParseError(KIND, no, line, "row without a pci.bus_id")
        index = values["index"]
        if index in seen:
            warnings.append(f"line {no}: GPU index {index} listed twice")
        seen.add(index)  # type: ignore[arg-type]
        gpus.append(GpuRow(**values))  # type: ignore[arg-type]
    if not gpus:
        raise ParseError(KIND, no, lines[no - 1], "a header but no GPU rows")
    used = columns if header else QUERY_FIELDS[: width or 0]
    return GpuInventory(gpus=tuple(gpus), columns=tuple(used), header=header, warnings=tuple(warnings))


_DETECT_HEADER_RE = re.compile(r"^\s*index\s*,.*pci\.bus_id", re.I | re.M)
_DETECT_ROW_RE = re.compile(r"^\s*\d+\s*,\s*GPU-[0-9A-Fa-f-]+\s*,\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]",
                            re.M)


def detect(text: str) -> int:
    """Score ``--query-gpu`` CSV: a header naming index and pci.bus_id, or rows ``0, GPU-..., 00000000:1B:00.0``."""
    head = text[:4000]
    if _DETECT_HEADER_RE.search(head):
        return 95
    if _DETECT_ROW_RE.search(head):
        return 85
    return 0
