"""Parse the topoweb node agent's listing of ``/sys/bus/pci/devices/*`` (the ``sysfs_pci`` section).

This is the contract between the agent and the server (domain.md 4.2 join 5, 4.3). It gives, for
every PCI function, its sysfs ancestry (root complex, root port, switch ports), NUMA node, local
CPUs and PCIe link speed/width, without root and without lspci.

Format ``topoweb sysfs_pci v1`` (UTF-8 text, ``\\n`` line ends):

* Line 1: ``# topoweb sysfs_pci v1``.
* Line 2: ``# columns: `` followed by the column names separated by single spaces. v1 writes::

      # columns: path class vendor device numa_node current_link_speed current_link_width max_link_speed max_link_width local_cpulist driver

  The parser reads columns by these names, so a later version may add columns at the end; a
  missing optional column reads as unknown. Only ``path`` is required.
* Then one line per device, in any order: the column values separated by ONE TAB character
  (sysfs speed strings contain spaces: ``32.0 GT/s PCIe``). Each value is the sysfs attribute file
  of that name with surrounding whitespace stripped, except ``path`` (``os.path.realpath`` of
  ``/sys/bus/pci/devices/<bdf>``) and ``driver`` (the last component of the ``driver`` link). An
  attribute that is absent or unreadable (EACCES, EIO, no link on a host bridge) is written as
  ``-``. Tabs or newlines inside a value (never seen) are written as spaces.
* Other lines starting with ``#`` are comments and are ignored; blank lines are ignored.

Reference agent code (Python 3.6 stdlib)::

    import os
    COLUMNS = ["class", "vendor", "device", "numa_node", "current_link_speed", "current_link_width",
               "max_link_speed", "max_link_width", "local_cpulist"]

    def read_attr(d, name):
        try:
            with open(os.path.join(d, name)) as f:
                return " ".join(f.read().split()) or "-"
        except (OSError, UnicodeDecodeError):
            return "-"

    def sysfs_pci_listing(root="/sys/bus/pci/devices"):
        out = ["# topoweb sysfs_pci v1",
               "# columns: path " + " ".join(COLUMNS) + " driver"]
        for name in sorted(os.listdir(root)):
            d = os.path.join(root, name)
            try:
                driver = os.path.basename(os.readlink(os.path.join(d, "driver")))
            except OSError:
                driver = "-"
            out.append("\\t".join([os.path.realpath(d)] + [read_attr(d, c) for c in COLUMNS] + [driver]))
        return "\\n".join(out) + "\\n"

Example line (tabs shown as ``→``)::

    /sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0→0x030200→0x10de→0x2330→0→32.0 GT/s PCIe→16→32.0 GT/s PCIe→16→0-55,112-167→nvidia

Result :class:`SysfsPci`: ``devices`` (tuple of :class:`SysfsPciDevice`, in listed order) and
``warnings``. Per device:

* ``bdf``: canonical ``dddd:bb:dd.f`` (last path component; domains wider than 4 hex digits, as
  Intel VMD uses, keep all their digits).
* ``ancestry``: BDFs from the root port down to the parent, excluding the device itself: the PCI
  address components that follow the root complex in the path.
* ``root_complex``: the path component before the first BDF of that chain, as printed
  (``"pci0000:17"``); like NCCL (xml.cc), the nearest non-address component above the device.
  ``None`` when the path has no such component (an agent that wrote an unresolved path).
* ``class_code`` (``"0302"``, base class and subclass as ``lspci -nn`` prints them), ``prog_if``
  (``"00"``), ``vendor_id`` / ``device_id`` (``"10de"`` / ``"2330"``, 4 lowercase hex digits).
* ``numa_node``: int; ``-1`` (no NUMA information) -> ``None``.
* ``current_link_speed_gts`` / ``max_link_speed_gts``: float GT/s from either kernel spelling
  (``8 GT/s`` up to 5.6, ``8.0 GT/s PCIe`` later); ``Unknown`` -> ``None``.
* ``current_link_width`` / ``max_link_width``: int; ``Unknown`` or ``255`` -> ``None``; ``0`` (link
  down) is kept.
* ``local_cpulist``: the kernel's list as printed (``"0-55,112-167"``).
* ``driver``: bound driver name or ``None``.
* ``line_no``: 1-based line of the device.

A line with the wrong number of fields, or a path that is not a PCI device path, raises
:class:`ParseError`. A value that cannot be read (e.g. ``class`` not hex) becomes ``None`` with a
warning. A listing without the header lines is read with the v1 columns and a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.domain.errors import ParseError
from apps.domain.parsers._pcie import parse_link_speed, parse_link_width
from apps.domain.parsers.text import clean_lines

KIND = "sysfs_pci"

__all__ = ["SysfsPci", "SysfsPciDevice", "V1_COLUMNS", "parse", "detect"]

V1_COLUMNS: tuple[str, ...] = (
    "path", "class", "vendor", "device", "numa_node", "current_link_speed", "current_link_width",
    "max_link_speed", "max_link_width", "local_cpulist", "driver",
)
_MAGIC = "# topoweb sysfs_pci"


@dataclass(frozen=True)
class SysfsPciDevice:
    bdf: str
    ancestry: tuple[str, ...]
    root_complex: str | None
    class_code: str | None
    prog_if: str | None
    vendor_id: str | None
    device_id: str | None
    numa_node: int | None
    current_link_speed_gts: float | None
    current_link_width: int | None
    max_link_speed_gts: float | None
    max_link_width: int | None
    local_cpulist: str | None
    driver: str | None
    line_no: int


@dataclass(frozen=True)
class SysfsPci:
    devices: tuple[SysfsPciDevice, ...]
    warnings: tuple[str, ...]


_BDF_RE = re.compile(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_HEX_RE = re.compile(r"^(?:0x)?([0-9a-fA-F]+)$")
_DETECT_LINE_RE = re.compile(r"^/sys/(?:devices|bus/pci/devices)/\S*[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\t", re.MULTILINE)


def _bdf(component: str) -> str | None:
    m = _BDF_RE.match(component)
    if not m:
        return None
    domain = int(m.group(1), 16)
    return f"{domain:04x}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"


def _hex(value: str | None, digits: int) -> str | None:
    if value is None:
        return None
    m = _HEX_RE.match(value)
    if not m:
        raise ValueError(value)
    return f"{int(m.group(1), 16):0{digits}x}"


def parse(text: str) -> SysfsPci:
    """Parse a ``topoweb sysfs_pci v1`` listing (format and schema in the module docstring)."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the sysfs PCI listing is empty")
    warnings: list[str] = []
    columns: tuple[str, ...] | None = None
    saw_magic = False
    devices: list[SysfsPciDevice] = []
    seen: dict[str, int] = {}
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            body = line[1:].strip()
            if line.startswith(_MAGIC):
                saw_magic = True
                version = line[len(_MAGIC) :].strip()
                if version != "v1":
                    warnings.append(f"line {line_no}: format version {version!r}; read as v1")
            elif body.startswith("columns:"):
                columns = tuple(body[len("columns:") :].split())
                if "path" not in columns:
                    raise ParseError(KIND, line_no, line, "the columns line does not name the 'path' column")
                if len(set(columns)) != len(columns):
                    raise ParseError(KIND, line_no, line, "the columns line names a column twice")
            continue
        if columns is None:
            columns = V1_COLUMNS
            warnings.append(
                f"line {line_no}: no '# columns:' header before the first device; read with the v1 columns "
                + " ".join(V1_COLUMNS)
            )
        fields = line.split("\t")
        if len(fields) != len(columns):
            raise ParseError(
                KIND, line_no, line,
                f"expected {len(columns)} tab-separated fields ({' '.join(columns)}), found {len(fields)}",
            )
        row = {c: (None if v.strip() in ("-", "") else v.strip()) for c, v in zip(columns, fields)}
        path = row.get("path")
        if path is None or not path.startswith("/"):
            raise ParseError(KIND, line_no, line, "the path field must be an absolute sysfs path")
        parts = [p for p in path.split("/") if p]
        bdf = _bdf(parts[-1]) if parts else None
        if bdf is None:
            raise ParseError(
                KIND, line_no, line, "the path must end in a PCI address like /sys/devices/pci0000:17/0000:17:00.0"
            )
        chain: list[str] = []
        i = len(parts) - 2
        while i >= 0:
            up = _bdf(parts[i])
            if up is None:
                break
            chain.append(up)
            i -= 1
        chain.reverse()
        root_complex = parts[i] if i >= 0 and parts[i] not in ("devices", "sys") else None
        if root_complex is None:
            warnings.append(f"line {line_no}: {bdf}: the path shows no root complex (was it resolved with realpath?)")
        if bdf in seen:
            warnings.append(f"line {line_no}: {bdf} was already listed at line {seen[bdf]}; the later line is ignored")
            continue
        seen[bdf] = line_no

        def field(name: str, conv, what: str):
            raw = row.get(name)
            if raw is None:
                return None
            try:
                return conv(raw)
            except (ValueError, TypeError):
                warnings.append(f"line {line_no}: {bdf}: cannot read {what} {raw!r}; left unknown")
                return None

        cls = field("class", lambda v: _hex(v, 6), "class")
        numa = field("numa_node", int, "numa_node")
        cur_speed_raw, max_speed_raw = row.get("current_link_speed"), row.get("max_link_speed")
        cur_speed = parse_link_speed(cur_speed_raw)
        max_speed = parse_link_speed(max_speed_raw)
        for raw, value, name in ((cur_speed_raw, cur_speed, "current_link_speed"), (max_speed_raw, max_speed, "max_link_speed")):
            if raw is not None and value is None and not raw.lower().startswith("unknown"):
                warnings.append(f"line {line_no}: {bdf}: cannot read {name} {raw!r}; left unknown")
        devices.append(
            SysfsPciDevice(
                bdf=bdf,
                ancestry=tuple(chain),
                root_complex=root_complex,
                class_code=cls[:4] if cls and len(cls) == 6 else cls,
                prog_if=cls[4:] if cls and len(cls) == 6 else None,
                vendor_id=field("vendor", lambda v: _hex(v, 4), "vendor"),
                device_id=field("device", lambda v: _hex(v, 4), "device"),
                numa_node=None if numa is None or numa < 0 else numa,
                current_link_speed_gts=cur_speed,
                current_link_width=parse_link_width(row.get("current_link_width")),
                max_link_speed_gts=max_speed,
                max_link_width=parse_link_width(row.get("max_link_width")),
                local_cpulist=row.get("local_cpulist"),
                driver=row.get("driver"),
                line_no=line_no,
            )
        )
    if not devices:
        raise ParseError(KIND, 0, "", "the listing has header lines but no device lines")
    if not saw_magic:
        warnings.insert(0, "no '# topoweb sysfs_pci v1' first line; read as v1")
    return SysfsPci(tuple(devices), tuple(warnings))


def detect(text: str) -> int:
    """Score ``text`` as the agent's sysfs PCI listing: 100 with its header, 80 for bare lines."""
    head = text.lstrip("\ufeff")[:4000]
    if head.startswith(_MAGIC):
        return 100
    if _DETECT_LINE_RE.search(head):
        return 80
    return 0
