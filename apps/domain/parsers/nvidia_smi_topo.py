"""Parser for the matrices of ``nvidia-smi topo``: ``-m``, ``-mp`` and ``-p2p r|w|n|a|p``.

Commands (registry kinds):

- ``nvidia-smi topo -m`` (``--matrix``), kind ``nvidia_smi_topo``: the link matrix, ``parse``;
- ``nvidia-smi topo -mp`` (``--matrix_pci``), kind ``nvidia_smi_topo_pci``: the "PCI only" matrix
  (NVLink pairs show their PCIe path instead of ``NV#``), ``parse_pci``;
- ``nvidia-smi topo -p2p r|w|n|a|p`` (``--p2pstatus``), kind ``nvidia_smi_p2p``: the P2P
  capability matrix (read, write, nvlink, atomics, pcie), ``parse_p2p``.

Sample (``-m``, trimmed; tabs between fields in the raw output)::

            GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID
    GPU0     X      NV18    PXB     0-55,112-167    0               N/A
    GPU1    NV18     X      NODE    0-55,112-167    0               N/A
    NIC0    PXB     NODE     X

    Legend:

      X    = Self
      ...
      NV#  = Connection traversing a bonded set of # NVLinks

    NIC Legend:

      NIC0: mlx5_0

Result: :class:`TopoMatrix` (frozen), as JSON via ``to_jsonable``:

- ``variant``: ``"link"`` (-m), ``"pci"`` (-mp) or ``"p2p"``;
- ``p2p_mode``: ``"r"``, ``"w"``, ``"n"``, ``"a"``, ``"p"`` when a pasted command line states it, else null;
- ``legend``: legend generation seen (domain.md 3.1): ``"current"`` (SYS/NODE lines),
  ``"nvlink_legacy"`` (SOC, "Connection traversing ..."), ``"oldest"`` (SOC, "Path traverses ..."),
  ``"p2p"`` (the ``-p2p`` legend: OK/CNS/GNS/TNS/NS/DR/U), or null when no legend was printed;
- ``columns``: device labels of the header in order (GPUs then NICs), as printed;
- ``affinity_columns``: the trailing header columns, canonical spelling, in order
  (``"CPU Affinity"``, ``"NUMA Affinity"``, ``"GPU NUMA ID"``; none for ``-p2p``);
- ``gpus``: ``{index, name: "GPU0", cpu_affinity, numa_affinity, gpu_numa_id}``; affinity values
  are strings as printed (``"0-55,112-167"``, ``"0,3-9,11-17"``), ``N/A`` or blank -> null;
- ``nics``: ``{name: matrix label ("NIC0" or "mlx5_0"), device: HCA name ("mlx5_0", "mlx5_bond_0",
  "rocep49s0") from the header or the ``NIC Legend``, null when the text does not say}``;
- ``matrix``: row label -> column label -> token as printed (``"NV12"``, ``"PIX"``, ``"X"``,
  ``"SOC"``, ``"OK"``, ``"CNS"``...), the self cell is ``"X"``; null only for a broken cell that
  could not be recovered; rows missing from a partial capture are absent;
- ``warnings``: everything recovered rather than read cleanly, each naming its line.

Recovery rules (hazards of domain.md 3.4, all seen in real uploads):

- cells are whitespace-separated tokens, so expanded tabs, runs of spaces and ANSI-underlined
  headers read the same; in a tab-separated line, cells that lost the tab between them are
  reported;
- merged tokens (``PXBNODE``, ``SYSSYS``, header ``NIC7NIC8``) are split against the vocabulary,
  the header's column count deciding how many cells a row must yield; a last cell merged with the
  CPU affinity (``SYS0-55``) is split the same way;
- a broken last cell that lost a tab *and* letters (``PH0-115``: ``PHB`` + ``0-115``) leaves the
  rest of the row unambiguous: the affinity is read from the rest, and the cell takes the token of
  its mirror cell (the matrix is symmetric by construction) when the mirror starts with the
  surviving letters -- that is what a user of the capture wants, the GPU-NIC distance; without a
  usable mirror the cell is null. Both cases are warnings. Any other token outside the
  vocabulary is a ``ParseError`` naming the line and the token;
- a header that disagrees with complete, square rows (or is missing) is rebuilt from the row
  labels, with a warning; rows missing from a partial capture are a warning;
- asymmetric cells and non-``X`` self cells are warnings.

Pure helpers for other modules: :func:`normalize_token`, :data:`TOKEN_ORDER` and :func:`path_rank`
(the topo -m vocabulary, defined once in :mod:`apps.domain.names`), :func:`nvlink_count` and
:func:`render` (writes a result back as nvidia-smi-style tab-separated text; ``parse(render(r))``
gives the same gpus, nics and matrix).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from apps.domain.errors import ParseError
from apps.domain.limits import check_labels
from apps.domain.names import TOKEN_ORDER, normalize_token, nv_count, path_rank
from apps.domain.parsers.text import clean_lines

__all__ = [
    "TopoGpu", "TopoNic", "TopoMatrix", "parse", "parse_pci", "parse_p2p", "detect", "detect_pci",
    "detect_p2p", "normalize_token", "TOKEN_ORDER", "path_rank", "nvlink_count", "render",
]

KIND_LINK = "nvidia_smi_topo"
KIND_PCI = "nvidia_smi_topo_pci"
KIND_P2P = "nvidia_smi_p2p"


_LINK_WORDS = frozenset({"X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC"})
_P2P_WORDS = frozenset({"X", "OK", "CNS", "GNS", "TNS", "NS", "DR", "U"})
_P2P_ONLY = _P2P_WORDS - {"X"}
_CELL_WORDS = _LINK_WORDS | _P2P_WORDS | {f"NV{i}" for i in range(1, 100)}  # fast-path lookups
_FRAGMENT_OF = ("NODE", "SYS", "SOC", "PHB", "PXB", "PIX", "NV", "CNS", "GNS", "TNS", "NS", "DR", "OK")

_CELL_ALT = r"NV\d{1,4}|NODE|SYS|SOC|PHB|PXB|PIX|CNS|GNS|TNS|NS|DR|OK|X|U"
_CPULIST = r"\d{1,7}(?:-\d{1,7})?(?:,\d{1,7}(?:-\d{1,7})?)*"
_CELL_RE = re.compile(_CELL_ALT)
_CELLS_RE = re.compile(rf"(?:{_CELL_ALT})+")
_CELLS_AFF_RE = re.compile(rf"((?:{_CELL_ALT})+)({_CPULIST})")
_BROKEN_RE = re.compile(rf"([A-Z]{{1,3}})({_CPULIST})")
_NV_RE = re.compile(r"NV(\d{1,4})")
_AFFINITYISH_RE = re.compile(rf"{_CPULIST}|N/A")
_TOKEN_RE = re.compile(r"\S+")
_WARN_LINE_RE = re.compile(r"line (\d+):")

_GPU_LABEL_RE = re.compile(r"GPU(\d{1,5})")
_NIC_LABEL_RE = re.compile(r"NIC\d{1,5}")
# A device label: GPU<i>, NIC<i> or an RDMA device name (mlx5_0, mlx4_0, mlx5_bond_0, rocep49s0).
_LABEL_RE = re.compile(r"GPU\d{1,5}|NIC\d{1,5}|[a-z][a-z0-9_]{0,40}\d")
_MERGED_LABELS_RE = re.compile(r"(?:GPU\d{1,5}|NIC\d{1,5}|mlx\d_(?:bond_)?\d{1,4})+")
_LABEL_PIECE_RE = re.compile(r"GPU\d{1,5}|NIC\d{1,5}|mlx\d_(?:bond_)?\d{1,4}")
_AFF_COL_RE = re.compile(r"CPU\s*Affinity|NUMA\s*Affinity|GPU\s*NUMA\s*ID", re.IGNORECASE)
_AFF_CANON = {"cpu": "CPU Affinity", "numa": "NUMA Affinity", "gpu": "GPU NUMA ID"}
_AFF_FIELD = {"CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity", "GPU NUMA ID": "gpu_numa_id"}

_LEGEND_RE = re.compile(r"\s*Legend\s*:?\s*", re.IGNORECASE)
_NIC_LEGEND_RE = re.compile(r"\s*NIC\s+Legend\s*:?\s*", re.IGNORECASE)
_NIC_ENTRY_RE = re.compile(r"\s*(NIC\d{1,5})\s*:\s*(\S+)\s*")
_LEGEND_ENTRY_RE = re.compile(r"\s*(NV#|[A-Z]{1,4})\s*=\s*(\S.*?)\s*")
_CMD_RE = re.compile(
    r"nvidia-smi\s+topo\s+(-mp|--matrix_pci|-m|--matrix|-p2p|--p2pstatus)\b(?:[ \t]+([rwnap])\b)?"
)


@dataclass(frozen=True)
class TopoGpu:
    """One ``GPU<i>`` row: its index and the affinity columns as printed (null for N/A or blank)."""

    index: int
    name: str
    cpu_affinity: str | None = None
    numa_affinity: str | None = None
    gpu_numa_id: str | None = None


@dataclass(frozen=True)
class TopoNic:
    """One NIC column: its matrix label and the HCA name it stands for (null when unknown)."""

    name: str
    device: str | None = None


@dataclass(frozen=True)
class TopoMatrix:
    """A parsed ``nvidia-smi topo`` matrix (see the module docstring for the schema)."""

    variant: str
    p2p_mode: str | None
    legend: str | None
    columns: tuple[str, ...]
    affinity_columns: tuple[str, ...]
    gpus: tuple[TopoGpu, ...]
    nics: tuple[TopoNic, ...]
    matrix: dict[str, dict[str, str | None]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


# --------------------------------------------------------------------------- token helpers


def nvlink_count(tok: str) -> int | None:
    """Number of bonded NVLinks of an ``NV<n>`` token (``"NV12"`` -> 12), else None."""
    return nv_count(tok)


def _is_cell(tok: str) -> bool:
    return tok in _LINK_WORDS or tok in _P2P_WORDS or _NV_RE.fullmatch(tok) is not None


def _is_link_token(tok: str) -> bool:
    return tok in _LINK_WORDS or _NV_RE.fullmatch(tok) is not None


# --------------------------------------------------------------------------- line readers


def _header_of(line: str) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]] | None:
    """Split a header line into device labels and affinity columns, each ``(text, start, end)``.

    Returns None when the line is not a matrix header: it must start with ``GPU<i>``, hold only
    device labels before the affinity columns, and no cell token.
    """
    m = _AFF_COL_RE.search(line)
    region_end = m.start() if m else len(line)
    labels: list[tuple[str, int, int]] = []
    for t in _TOKEN_RE.finditer(line, 0, region_end):
        tok = t.group()
        if _CELLS_RE.fullmatch(tok) or not (_LABEL_RE.fullmatch(tok) or _MERGED_LABELS_RE.fullmatch(tok)):
            return None
        labels.append((tok, t.start(), t.end()))
    if not labels or not labels[0][0].startswith("GPU") or not _GPU_LABEL_RE.match(labels[0][0]):
        return None
    aff: list[tuple[str, int, int]] = []
    pos = region_end
    for a in _AFF_COL_RE.finditer(line, region_end):
        if line[pos:a.start()].strip():
            return None  # words between the affinity columns: prose, not a header
        aff.append((_AFF_CANON[{"c": "cpu", "n": "numa", "g": "gpu"}[a.group()[0].lower()]], a.start(), a.end()))
        pos = a.end()
    if line[pos:].strip():
        return None
    return labels, aff


def _row_start(line: str) -> str | None:
    """The label of a line that looks like a matrix row (label then a cell token), else None."""
    toks = line.split(None, 2)
    if len(toks) < 2 or not _LABEL_RE.fullmatch(toks[0]):
        return None
    second = toks[1]
    if _CELLS_RE.fullmatch(second) or _CELLS_AFF_RE.fullmatch(second):
        return toks[0]
    return None


@dataclass
class _Row:
    line_no: int
    label: str
    cells: list[str | None]
    affinity: dict[str, str | None]
    broken: dict[int, tuple[str, str]]  # cell index -> (as printed, surviving letters)
    notes: list[str]


def _untabbed(line: str, spans: list[tuple[int, int]]) -> list[int]:
    """Indexes i (>= 1) of spans whose gap to span i-1 holds no tab, when the line has tabs."""
    if "\t" not in line:
        return []
    return [i for i in range(1, len(spans)) if "\t" not in line[spans[i - 1][1]:spans[i][0]]]


def _read_row(kind: str, line_no: int, line: str, columns: list[str], aff_cols: list[str]) -> _Row:
    """Read one matrix row against ``columns``; raise ParseError on a structural problem."""
    n = len(columns)
    # Fast path, the common case: one clean cell per tab field (raw output) or per word (no tabs).
    if "\t" in line:
        fields = line.split("\t")
        cand = [f.strip() for f in fields[1:n + 1]]
        if len(cand) == n and len(fields[0].split()) == 1 and all(c in _CELL_WORDS for c in cand):
            rest = fields[n + 1:]
            if not any(_CELLS_RE.fullmatch(x) for f in rest for x in f.split()):
                affinity, note = _read_affinity("\t" + "\t".join(rest) if rest else "", aff_cols)
                return _Row(line_no, fields[0].strip(), list(cand), affinity, {}, [note] if note else [])
    else:
        words = line.split()
        cand = words[1:n + 1]
        if len(cand) == n and all(c in _CELL_WORDS for c in cand):
            rest = words[n + 1:]
            if not any(_CELLS_RE.fullmatch(x) for x in rest):
                affinity, note = _read_affinity(" ".join(rest), aff_cols)
                return _Row(line_no, words[0], list(cand), affinity, {}, [note] if note else [])
    tokens = list(_TOKEN_RE.finditer(line))
    label = tokens[0].group()
    cells: list[str | None] = []
    spans: list[tuple[int, int]] = [tokens[0].span()]
    first_col: list[int] = [-1]  # column index of the first cell of each span
    merged: list[str] = []
    broken: dict[int, tuple[str, str]] = {}
    aff_text: str | None = None
    k = 1
    while len(cells) < n:
        if k >= len(tokens):
            raise ParseError(kind, line_no, line, f"row {label} has {len(cells)} cells but the header has "
                                                  f"{n} columns (truncated row?)")
        t = tokens[k]
        tok = t.group()
        k += 1
        first_col.append(len(cells))
        spans.append(t.span())
        if _is_cell(tok):
            cells.append(tok)
            continue
        if _CELLS_RE.fullmatch(tok):
            pieces = _CELL_RE.findall(tok)
            if len(cells) + len(pieces) > n:
                raise ParseError(kind, line_no, line, f"row {label}: token {tok!r} gives more cells than the "
                                                      f"header's {n} columns")
            merged.append(f"{tok!r} into {' '.join(repr(p) for p in pieces)}")
            cells.extend(pieces)
            continue
        m = _CELLS_AFF_RE.fullmatch(tok)
        if m and len(cells) + len(_CELL_RE.findall(m.group(1))) == n:
            pieces = _CELL_RE.findall(m.group(1))
            merged.append(f"{tok!r} into cell(s) {' '.join(repr(p) for p in pieces)} and affinity {m.group(2)!r}")
            cells.extend(pieces)
            aff_text = m.group(2) + line[t.end():]
            break
        m = _BROKEN_RE.fullmatch(tok)
        if m and len(cells) == n - 1 and any(w.startswith(m.group(1)) and w != m.group(1) for w in _FRAGMENT_OF):
            broken[len(cells)] = (tok, m.group(1))
            cells.append(None)
            aff_text = m.group(2) + line[t.end():]
            break
        column = columns[len(cells)]
        if _AFFINITYISH_RE.fullmatch(tok):
            raise ParseError(kind, line_no, line, f"row {label} has {len(cells)} cells but the header has {n} "
                                                  f"columns (truncated row?); {tok!r} stands where column "
                                                  f"{column} should be")
        raise ParseError(kind, line_no, line, f"unknown token {tok!r} in row {label}, column {column} "
                                              f"(expected X, NV#, PIX, PXB, PHB, NODE, SYS, SOC or a P2P "
                                              f"status OK/CNS/GNS/TNS/NS/DR/U)")
    if aff_text is None:
        aff_text = line[spans[-1][1]:]
    notes = []
    if merged:
        notes.append(f"split merged token{'s' if len(merged) > 1 else ''} " + " and ".join(merged))
    lost = _untabbed(line, spans)
    if lost:
        where = ", ".join(f"{columns[first_col[i] - 1]}|{columns[first_col[i]]}" if first_col[i] > 0
                          else f"{label}|{columns[0]}" for i in lost)
        notes.append(f"cells not separated by a tab (tab lost in copy) between columns {where}")
    extra = next((x for x in aff_text.split() if _CELLS_RE.fullmatch(x)), None)
    if extra is not None:
        raise ParseError(kind, line_no, line, f"row {label} has more cells than the header's {n} columns "
                                              f"(extra {extra!r})")
    affinity, aff_note = _read_affinity(aff_text, aff_cols)
    if aff_note:
        notes.append(aff_note)
    return _Row(line_no, label, cells, affinity, broken, notes)


def _read_affinity(text: str, cols: list[str]) -> tuple[dict[str, str | None], str | None]:
    """Assign the text after the last cell to the affinity columns; return (values, note)."""
    values: dict[str, str | None] = {c: None for c in cols}
    parts: list[str]
    tabbed = "\t" in text
    if tabbed:
        parts = text.split("\t")
        if not parts[0].strip():
            parts = parts[1:]  # the separator after the last cell
        parts = [p.strip() for p in parts]
        if any(" " in p for p in parts):
            tabbed = False  # tabs and spaces mixed: fall back to whitespace fields
    if tabbed:
        # nvidia-smi prints "<numa>\t\t<gpu numa id>": drop that empty field before GPU NUMA ID.
        if "GPU NUMA ID" in cols and len(parts) > len(cols):
            i = cols.index("GPU NUMA ID")
            if i < len(parts) and parts[i] == "":
                del parts[i]
        while len(parts) > len(cols) and parts[-1] == "":
            parts.pop()
    else:
        parts = text.split()
    note = None
    if len(parts) > len(cols):
        note = f"ignored text after the matrix cells: {' '.join(p for p in parts[len(cols):] if p)!r}"
        parts = parts[:len(cols)]
    elif not tabbed and 0 < len(parts) < len(cols):
        note = (f"{len(parts)} value(s) for {len(cols)} affinity columns "
                f"({', '.join(cols)}); assigned from the left")
    for col, val in zip(cols, parts):
        values[col] = None if val in ("", "N/A") else val
    return values, note


# --------------------------------------------------------------------------- legend


def _legend_generation(entries: dict[str, str]) -> str | None:
    if not entries:
        return None
    if set(entries) & _P2P_ONLY:
        return "p2p"
    if "SOC" in entries:
        return "oldest" if entries["SOC"].lower().startswith("path") else "nvlink_legacy"
    if "SYS" in entries or "NODE" in entries:
        return "current"
    descs = " ".join(entries.values()).lower()
    if "path traverses" in descs:
        return "oldest"
    if "single pcie switch" in descs:
        return "nvlink_legacy"
    return "current"


def _legend_says_pci(entries: dict[str, str], generation: str | None) -> bool:
    """A complete distance legend without the ``NV#`` line is the ``-mp`` ("PCI only") legend."""
    if "NV#" in entries:
        return False
    if generation == "current":
        return {"SYS", "NODE", "PHB", "PXB", "PIX"} <= set(entries)
    if generation == "nvlink_legacy":
        return {"SOC", "PHB", "PXB", "PIX"} <= set(entries)
    return False  # the oldest legend never had NV#: it cannot tell


# --------------------------------------------------------------------------- the parser


def _parse(text: str, kind: str) -> TopoMatrix:
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(kind, 0, "", "the text is empty; expected the output of `nvidia-smi topo -m`")
    warnings: list[str] = []

    p2p_mode: str | None = None
    cmd_variant: str | None = None
    for line in lines:
        c = _CMD_RE.search(line)
        if c:
            flag = c.group(1)
            cmd_variant = "pci" if flag in ("-mp", "--matrix_pci") else "p2p" if "p2p" in flag else "link"
            p2p_mode = c.group(2) if cmd_variant == "p2p" else None
            break

    # 1. The header (or, failing that, the first row).
    header_idx: int | None = None
    header: tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]] | None = None
    first_row_idx: int | None = None
    for i, line in enumerate(lines):
        header = _header_of(line)
        if header:
            header_idx = i
            break
        if _row_start(line) is not None and _GPU_LABEL_RE.fullmatch(_row_start(line) or ""):
            first_row_idx = i
            break
    if header_idx is None and first_row_idx is None:
        raise ParseError(kind, 0, "", "no topology matrix found: expected a header line starting with 'GPU0' "
                                      "(the output of `nvidia-smi topo -m`)")

    columns: list[str] = []
    aff_cols: list[str] = []
    if header is not None and header_idx is not None:
        hline = lines[header_idx]
        spans: list[tuple[int, int]] = []
        for tok, start, end in header[0]:
            pieces = _LABEL_PIECE_RE.findall(tok) if _MERGED_LABELS_RE.fullmatch(tok) else [tok]
            if len(pieces) > 1:
                warnings.append(f"line {header_idx + 1}: split merged header label {tok!r} into "
                                f"{' '.join(repr(p) for p in pieces)}")
            columns.extend(pieces)
            spans.append((start, end))
        check_labels(kind, header_idx + 1, hline, columns)  # before any row is read
        aff_cols = [name for name, _, _ in header[1]]
        spans.extend((s, e) for _, s, e in header[1])
        names = [tok for tok, _, _ in header[0]] + aff_cols
        lost = _untabbed(hline, spans)
        if lost:
            warnings.append(f"line {header_idx + 1}: header columns separated by spaces, not tabs: "
                            + ", ".join(f"{names[i - 1]!r}|{names[i]!r}" for i in lost))
        seen: set[str] = set()
        for col in columns + aff_cols:
            if col in seen:
                raise ParseError(kind, header_idx + 1, hline, f"the header names column {col!r} twice")
            seen.add(col)
        start = header_idx + 1
    else:
        start = first_row_idx or 0
        warnings.append(f"line {start + 1}: no header line before the matrix; header rebuilt from rows")

    # 2. The row lines: labelled lines until the legend or other text.
    row_lines: list[int] = []
    end = len(lines)
    for i in range(start, len(lines)):
        line = lines[i]
        if not line.strip():
            continue
        if _LEGEND_RE.fullmatch(line) or _NIC_LEGEND_RE.fullmatch(line):
            end = i
            break
        label = line.split(None, 1)[0]
        if label in columns or _row_start(line) is not None:
            row_lines.append(i)
            continue
        end = i
        break
    if not row_lines:
        at = header_idx if header_idx is not None else start
        raise ParseError(kind, at + 1, lines[at], "the matrix header is not followed by any row")

    # 3. Read the rows against the header, or rebuild the header from complete rows.
    def read_all(cols: list[str]) -> list[_Row]:
        rows: list[_Row] = []
        for i in row_lines:
            label = lines[i].split(None, 1)[0]
            if label not in cols:
                raise ParseError(kind, i + 1, lines[i], f"row {label!r} is not a column of the header "
                                                       f"({' '.join(cols)})")
            rows.append(_read_row(kind, i + 1, lines[i], cols, aff_cols))
        return rows

    row_labels = [lines[i].split(None, 1)[0] for i in row_lines]
    rebuildable = (len(set(row_labels)) == len(row_labels) and all(_LABEL_RE.fullmatch(x) for x in row_labels)
                   and _GPU_LABEL_RE.fullmatch(row_labels[0]) is not None)
    if not columns:
        if not rebuildable:
            raise ParseError(kind, row_lines[0] + 1, lines[row_lines[0]], "no header line and the row labels "
                                                                          "do not form a matrix")
        columns = list(row_labels)
        aff_cols = ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
        rows = read_all(columns)
        used = max((i + 1 for r in rows for i, c in enumerate(aff_cols) if r.affinity.get(c)), default=0)
        aff_cols = aff_cols[:used]
    else:
        try:
            rows = read_all(columns)
        except ParseError as first_error:
            if not rebuildable or row_labels == columns:
                raise
            try:
                rows = read_all(list(row_labels))
            except ParseError:
                raise first_error from None
            warnings.append(f"line {(header_idx or 0) + 1}: header lists {len(columns)} devices but the "
                            f"{len(row_labels)} rows form a square matrix; header rebuilt from rows")
            columns = list(row_labels)

    for row in rows:
        warnings.extend(f"line {row.line_no}: {note}" for note in row.notes)
    matrix: dict[str, dict[str, str | None]] = {}
    row_line: dict[str, int] = {}
    for row in rows:
        if row.label in matrix:
            raise ParseError(kind, row.line_no, lines[row.line_no - 1], f"a second row for {row.label}")
        matrix[row.label] = dict(zip(columns, row.cells))
        row_line[row.label] = row.line_no

    # 4. Broken cells: take the mirror cell when it agrees with the surviving letters.
    for row in rows:
        for idx, (printed, letters) in row.broken.items():
            col = columns[idx]
            mirror = matrix.get(col, {}).get(row.label)
            where = f"line {row.line_no}: cell {row.label}/{col} printed as {printed!r} lost its tab and letters"
            if mirror is not None and mirror.startswith(letters):
                matrix[row.label][col] = mirror
                warnings.append(f"{where}; took {mirror!r} from the mirror cell {col}/{row.label} "
                                f"(line {row_line[col]}) and read the rest as the affinity")
            else:
                warnings.append(f"{where}; no mirror cell to recover it from, left null")

    # 5. Variant: which vocabulary the cells use, the legend, the command line.
    link_at = p2p_at = None
    for row in rows:
        toks = set(matrix[row.label].values())
        toks.discard(None)
        toks.discard("X")
        p2p_here = toks & _P2P_ONLY
        if link_at is None and len(p2p_here) < len(toks):
            link_at = (row.line_no, next(t for t in matrix[row.label].values() if t and _is_link_token(t) and t != "X"))
        if p2p_at is None and p2p_here:
            p2p_at = (row.line_no, next(t for t in matrix[row.label].values() if t in p2p_here))
    if link_at and p2p_at:
        ln, tok = max(link_at, p2p_at)
        raise ParseError(kind, ln, lines[ln - 1], f"the matrix mixes topology tokens ({link_at[1]!r}) with P2P "
                                                  f"status tokens ({p2p_at[1]!r}); token {tok!r}")

    entries: dict[str, str] = {}
    nic_legend: dict[str, str] = {}
    in_legend = False
    extra_matrix_at: int | None = None
    for i in range(end, len(lines)):
        line = lines[i]
        if _LEGEND_RE.fullmatch(line):
            if entries or nic_legend:
                break  # a second legend belongs to a second matrix
            in_legend = True
            continue
        if _NIC_LEGEND_RE.fullmatch(line):
            in_legend = False
            continue
        e = _NIC_ENTRY_RE.fullmatch(line)
        if e:
            nic_legend.setdefault(e.group(1), e.group(2))
            continue
        e = _LEGEND_ENTRY_RE.fullmatch(line)
        if e and in_legend:
            entries.setdefault(e.group(1), e.group(2))
            continue
        if _header_of(line):
            extra_matrix_at = i
            break
    if extra_matrix_at is not None:
        warnings.append(f"line {extra_matrix_at + 1}: the text holds another matrix after the first; "
                        f"only the first was read")
    legend = _legend_generation(entries)

    header_line = (header_idx if header_idx is not None else row_lines[0]) + 1
    hl = lines[header_line - 1]
    if p2p_at or legend == "p2p" or (cmd_variant == "p2p" and not link_at):
        variant = "p2p"
    elif cmd_variant == "pci" or (cmd_variant is None and _legend_says_pci(entries, legend)):
        variant = "pci"
    else:
        variant = "link"
    if kind == KIND_LINK and variant == "p2p":
        raise ParseError(kind, header_line, hl, "this is `nvidia-smi topo -p2p` output (P2P status matrix); "
                                                "read it as nvidia_smi_p2p")
    if kind == KIND_PCI:
        nv = next(((r.line_no, t) for r in rows for t in matrix[r.label].values() if t and _NV_RE.fullmatch(t)),
                  None)
        if variant == "p2p":
            raise ParseError(kind, header_line, hl, "this is `nvidia-smi topo -p2p` output, not `topo -mp`")
        if nv:
            raise ParseError(kind, nv[0], lines[nv[0] - 1], f"cell {nv[1]!r} is an NVLink token, which `topo -mp` "
                                                            f"(PCI only) never prints: this is `topo -m` output")
        if "NV#" in entries or cmd_variant == "link":
            raise ParseError(kind, header_line, hl, "the legend or command line says `topo -m`, not `topo -mp`")
        if variant != "pci":
            warnings.append("nothing in the text tells `topo -mp` from `topo -m` (no legend); read as -mp")
            variant = "pci"
    if kind == KIND_P2P and variant != "p2p":
        if link_at or legend not in (None, "p2p") or cmd_variant in ("link", "pci"):
            what = repr(link_at[1]) if link_at else "the legend or command line"
            ln = link_at[0] if link_at else header_line
            raise ParseError(kind, ln, lines[ln - 1], f"{what} shows a topology matrix (`topo -m`/`-mp`), "
                                                      f"not `topo -p2p` output")
        warnings.append("nothing in the text confirms `topo -p2p` output (no legend, only X cells); read as -p2p")
        variant = "p2p"

    # 6. Consistency checks (warnings only).
    present = set(matrix)
    missing = [c for c in columns if c not in present]
    if missing:
        warnings.append(f"no row for {', '.join(missing)} (partial capture?); "
                        f"their cells in the rows present were read")
    pos = {c: i for i, c in enumerate(columns)}
    for r, row_cells in matrix.items():
        pr = pos[r]
        for c, tok in row_cells.items():
            if tok is None:
                continue
            if (r == c) != (tok == "X"):
                warnings.append(f"line {row_line[r]}: cell {r}/{c} reads {tok!r}"
                                + (", expected 'X' on the diagonal" if r == c else ", 'X' off the diagonal"))
            if pos[c] > pr and c in matrix:
                back = matrix[c].get(r)
                if back is not None and back != tok and normalize_token(back) != normalize_token(tok):
                    warnings.append(f"line {row_line[r]}: asymmetric cells {r}/{c} {tok!r} and {c}/{r} {back!r} "
                                    f"(line {row_line[c]})")

    # 7. Devices.
    by_label = {row.label: row for row in rows}
    gpus: list[TopoGpu] = []
    nics: list[TopoNic] = []
    for col in columns:
        g = _GPU_LABEL_RE.fullmatch(col)
        if g:
            aff = by_label[col].affinity if col in by_label else {}
            gpus.append(TopoGpu(int(g.group(1)), col, **{_AFF_FIELD[k]: v for k, v in aff.items()}))
            continue
        if _NIC_LABEL_RE.fullmatch(col):
            device = nic_legend.get(col)
            if device is None and nic_legend:
                warnings.append(f"the NIC Legend does not name {col}")
        else:
            device = col
        nics.append(TopoNic(col, device))
        if col in by_label and any(by_label[col].affinity.values()):
            warnings.append(f"line {by_label[col].line_no}: ignored affinity values on NIC row {col}")
    stray = [k for k in nic_legend if k not in columns]
    if stray:
        warnings.append(f"the NIC Legend names {', '.join(stray)}, which the matrix does not show")
    if not gpus:
        raise ParseError(kind, header_line, hl, "the matrix has no GPU column")

    # Warnings in line order (stable), the ones about the whole matrix last.
    warnings.sort(key=lambda w: int(m.group(1)) if (m := _WARN_LINE_RE.match(w)) else 1 << 30)
    return TopoMatrix(
        variant=variant,
        p2p_mode=p2p_mode if variant == "p2p" else None,
        legend=legend,
        columns=tuple(columns),
        affinity_columns=tuple(aff_cols),
        gpus=tuple(gpus),
        nics=tuple(nics),
        matrix=matrix,
        warnings=tuple(warnings),
    )


def parse(text: str) -> TopoMatrix:
    """Parse ``nvidia-smi topo -m`` output (``-mp`` text is accepted too, with ``variant="pci"``)."""
    return _parse(text, KIND_LINK)


def parse_pci(text: str) -> TopoMatrix:
    """Parse ``nvidia-smi topo -mp`` output; ``-m`` (NVLink cells or ``NV#`` legend) and ``-p2p`` text fail."""
    return _parse(text, KIND_PCI)


def parse_p2p(text: str) -> TopoMatrix:
    """Parse ``nvidia-smi topo -p2p r|w|n|a|p`` output; topology matrices (``-m``/``-mp``) fail."""
    return _parse(text, KIND_P2P)


# --------------------------------------------------------------------------- detectors

_SNIFF_ROW_RE = re.compile(rf"^[ \t]*GPU\d{{1,5}}[ \t]+((?:{_CELL_ALT})+\b.*)$", re.MULTILINE)
_SNIFF_NV_LEGEND_RE = re.compile(r"^[ \t]*NV#[ \t]*=", re.MULTILINE)
_SNIFF_DIST_LEGEND_RE = re.compile(r"^[ \t]*(SYS|SOC|NODE|PHB|PXB|PIX)[ \t]*=[ \t]*(Connection|Path) trav",
                                   re.MULTILINE)


def _sniff(text: str) -> tuple[str | None, bool, bool]:
    """Cheap look at a text: (first matrix's vocabulary "link"/"p2p"/None, says -mp, says p2p)."""
    head = text[:20000]
    vocab = None
    for m in _SNIFF_ROW_RE.finditer(head):
        pieces = [p for tok in m.group(1).split() if _CELLS_RE.fullmatch(tok) for p in _CELL_RE.findall(tok)]
        if any(_is_link_token(p) and p != "X" for p in pieces):
            vocab = "link"
            break
        if any(p in _P2P_ONLY for p in pieces):
            vocab = "p2p"
            break
        vocab = vocab or "x-only"
    cmd = _CMD_RE.search(head)
    p2p_said = bool(cmd and "p2p" in cmd.group(1)) or "= Status Ok" in head or "= Chipset not supported" in head
    legend_tokens = {m.group(1) for m in _SNIFF_DIST_LEGEND_RE.finditer(head)}
    pci_said = bool(cmd and cmd.group(1) in ("-mp", "--matrix_pci")) or (
        not _SNIFF_NV_LEGEND_RE.search(head)
        and ({"SYS", "NODE", "PHB", "PXB", "PIX"} <= legend_tokens or {"SOC", "PHB", "PXB", "PIX"} <= legend_tokens)
        and "Connection trav" in head
    )
    if vocab == "x-only":
        vocab = None
    return vocab, pci_said, p2p_said


def detect(text: str) -> int:
    """Score ``text`` as ``nvidia-smi topo -m`` output (0-100)."""
    vocab, pci_said, p2p_said = _sniff(text)
    if vocab == "p2p" or (vocab is None and p2p_said):
        return 0
    if vocab == "link":
        return 50 if pci_said else 95
    if "Affinity" in text[:20000] and _SNIFF_ROW_RE.search(text[:20000]):
        return 60
    return 0


def detect_pci(text: str) -> int:
    """Score ``text`` as ``nvidia-smi topo -mp`` output (0-100): only when the text says so."""
    vocab, pci_said, _ = _sniff(text)
    if not pci_said or vocab == "p2p":
        return 0
    head = text[:20000]
    if any(_NV_RE.fullmatch(tok) for m in _SNIFF_ROW_RE.finditer(head) for tok in m.group(1).split()):
        return 0
    return 97 if vocab == "link" else 40


def detect_p2p(text: str) -> int:
    """Score ``text`` as ``nvidia-smi topo -p2p`` output (0-100)."""
    vocab, _, p2p_said = _sniff(text)
    if vocab == "p2p":
        return 95
    if vocab is None and p2p_said and _SNIFF_ROW_RE.search(text[:20000]):
        return 90
    return 0


# --------------------------------------------------------------------------- render

_LEGENDS = {
    "current": (
        ("X", "Self"),
        ("SYS", "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)"),
        ("NODE", "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node"),
        ("PHB", "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)"),
        ("PXB", "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)"),
        ("PIX", "Connection traversing at most a single PCIe bridge"),
        ("NV#", "Connection traversing a bonded set of # NVLinks"),
    ),
    "nvlink_legacy": (
        ("X", "Self"),
        ("SOC", "Connection traversing PCIe as well as the SMP link between CPU sockets(e.g. QPI)"),
        ("PHB", "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)"),
        ("PXB", "Connection traversing multiple PCIe switches (without traversing the PCIe Host Bridge)"),
        ("PIX", "Connection traversing a single PCIe switch"),
        ("NV#", "Connection traversing a bonded set of # NVLinks"),
    ),
    "oldest": (
        ("X", "Self"),
        ("SOC", "Path traverses a socket-level link (e.g. QPI)"),
        ("PHB", "Path traverses a PCIe host bridge"),
        ("PXB", "Path traverses multiple PCIe internal switches"),
        ("PIX", "Path traverses a PCIe internal switch"),
    ),
    "p2p": (
        ("X", "Self"), ("OK", "Status Ok"), ("CNS", "Chipset not supported"), ("GNS", "GPU not supported"),
        ("TNS", "Topology not supported"), ("NS", "Not supported"), ("DR", "Disabled by regkey"), ("U", "Unknown"),
    ),
}


def render(result: TopoMatrix) -> str:
    """Write ``result`` back as nvidia-smi-style text (tab-separated, legend, NIC Legend).

    ``parse(render(r))`` (or ``parse_pci``/``parse_p2p`` by ``r.variant``) returns the same
    ``gpus``, ``nics`` and ``matrix``. A null cell (unrecoverable broken cell) is written as
    ``?`` and does not round-trip.
    """
    p2p = result.variant == "p2p"
    cols = list(result.columns)
    aff = list(result.affinity_columns)
    gpu_of = {g.name: g for g in result.gpus}
    out = ["\t" + "\t".join(cols + aff)]
    for label in cols:
        row = result.matrix.get(label)
        if row is None:
            continue
        cells = []
        for c in cols:
            tok = row.get(c)
            cells.append("?" if tok is None else (" X " if tok == "X" and not p2p else tok))
        line = (" " if p2p else "") + label + "\t" + "\t".join(cells)
        if aff:
            g = gpu_of.get(label)
            fields = []
            for col in aff:
                val = getattr(g, _AFF_FIELD[col]) if g else None
                fields.append(("N/A" if val is None else val) if g else "")
                if col == "NUMA Affinity" and "GPU NUMA ID" in aff:
                    fields.append("")  # nvidia-smi's double tab before GPU NUMA ID
            line += "\t" + "\t".join(fields)
        out.append(line)
    legend = result.legend
    if legend in _LEGENDS:
        out += ["", "Legend:", ""]
        for tok, desc in _LEGENDS[legend]:
            if result.variant == "pci" and tok == "NV#":
                continue
            out.append(f"  {tok:<4} = {desc}")
    named = [n for n in result.nics if n.device is not None and _NIC_LABEL_RE.fullmatch(n.name)]
    if named:
        out += ["", "NIC Legend:", ""]
        out += [f"  {n.name}: {n.device}" for n in named]
    return "\n".join(out) + "\n"
