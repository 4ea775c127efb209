"""Parse verbose ``lspci`` output: PCIe link, port type, ACS, ATS, NUMA and driver per function.

Commands: ``lspci -D -vvv`` (what the topoweb agent runs, as root), ``lspci -vvv``, ``lspci -vv``,
with or without ``-nn`` and ``-D``; also plain ``lspci -D -nn`` (headers only) and concatenations
of several ``lspci -vvv -s <bdf>`` runs. Run without root, lspci prints
``Capabilities: <access denied>`` instead of every capability: no link, ACS or ATS data.

Each device is a block whose first line starts in column 0::

    0000:bc:02.0 PCI bridge [0604]: PMC-Sierra Inc. Device [11f8:4128] (rev 01) (prog-if 00 [Normal decode])

(``BDF class[ [cccc]]: name[ [vvvv:dddd]][ (rev rr)][ (prog-if pp [...])]``) followed by indented
detail lines (tabs, or spaces when copied from a web page). Blank lines between blocks are optional.

Result :class:`LspciVerbose`: ``devices`` (tuple of :class:`PciFunction`, in printed order),
``warnings`` and ``header_only`` (the BDFs of header-only records, below). Per :class:`PciFunction`:

* ``bdf`` canonical ``dddd:bb:dd.f``; ``line_no`` of its header line (1-based).
* ``class_name`` (``"3D controller"``), ``class_code`` (``"0302"``, only with ``-nn``),
  ``prog_if`` (``"00"``), ``name`` (vendor and device as printed, ids and rev removed:
  ``"NVIDIA Corporation Device 2330"``), ``vendor_name`` / ``device_name`` (split only when the
  text starts with a vendor topoweb knows, see ``KNOWN_VENDORS``, or ends in lspci's
  ``<vendor> Device 2330`` fallback, which also means ``device_name`` is ``None``), ``vendor_id`` /
  ``device_id`` (4 lowercase hex digits from ``-nn``; without ``-nn`` the device id is still read
  from lspci's ``Device 2330`` fallback for ids missing from its pci.ids), ``rev`` (``"a1"``).
* ``subsystem`` (text), ``subsystem_vendor_id`` / ``subsystem_device_id`` (``-nn`` only).
* ``numa_node`` (int, ``NUMA node:``), ``iommu_group`` (int), ``physical_slot`` (text),
  ``driver`` (``Kernel driver in use:``), ``kernel_modules`` (tuple).
* ``bus_primary`` / ``bus_secondary`` / ``bus_subordinate``: bridges' ``Bus:`` line as 2-hex-digit
  strings (they are address parts, like ``bb`` in a BDF).
* ``express_version`` (int, ``(v2)``), ``port_type`` from the PCI Express capability as printed:
  ``"Endpoint"``, ``"Legacy Endpoint"``, ``"Root Port"``, ``"Upstream Port"``, ``"Downstream Port"``,
  ``"Root Complex Integrated Endpoint"``, ``"Root Complex Event Collector"``, bridge types;
  ``slot`` (``(Slot+)`` -> True, ``(Slot-)`` -> False, else ``None``).
* Link, from ``LnkCap`` / ``LnkSta`` / ``LnkCap2`` / ``LnkCtl2`` / ``LnkSta2``: ``cap_port``,
  ``cap_speed_gts`` (float), ``cap_width`` (int), ``sta_speed_gts``, ``sta_width``;
  ``sta_speed_note`` / ``sta_width_note`` (``"ok"``, ``"downgraded"``, ``"strange"`` or ``None`` as
  printed) and ``speed_downgraded`` / ``width_downgraded`` (True for ``(downgraded)``, False for
  ``(ok)``, ``None`` when lspci printed no annotation: old pciutils never did, new pciutils omits it
  on root and downstream ports and when the link is at capability -- compare cap vs sta yourself);
  ``supported_speeds_gts`` (tuple from ``LnkCap2: Supported Link Speeds: 2.5-32GT/s``),
  ``target_speed_gts`` (``LnkCtl2: Target Link Speed``), ``lnksta2`` (first ``LnkSta2`` line as
  printed), ``equalization_complete`` (bool from ``LnkSta2``).
* ``acs_cap`` / ``acs_ctl``: :class:`AcsFlags` (``src_valid``, ``trans_blk``, ``req_redir``,
  ``cmplt_redir``, ``upstream_fwd``, ``egress_ctrl``, ``direct_trans``: ``+`` True, ``-`` False,
  absent ``None``) or ``None`` without an ACS capability.
* ``ats`` (an ``Address Translation Service (ATS)`` capability is present), ``ats_enabled``
  (``ATSCtl: Enable+``; ``None`` when not printed).
* ``capabilities_denied``: True when lspci printed ``Capabilities: <access denied>`` (non-root
  run: the capability fields are missing, not wrong; one warning for the whole text).

Damaged input: ``[ ... ]`` elision lines and ``pcilib:`` messages are skipped with a warning; a
shell-prompt line naming ``lspci`` is skipped with a warning. Output filtered with ``grep``
(``lspci -vv | grep -E 'PCI bridge|LnkCap'``): link lines that cannot belong to the header above them
(a second ``LnkCap`` in one block, or lines before any header) are orphans: they are ignored with
one warning listing their lines. If the text has no device header at all (``lspci -vvv | grep
LnkSta``) nothing can be tied to a device: :class:`ParseError` at the first line. A device block
whose ``Advanced Error Reporting`` capability lacks its closing ``HeaderLog`` line at the end of the
text is reported as cut short.

Header-only records: a block whose class is in ``HEADER_ONLY_CLASSES`` (the CPUs' uncore functions,
"System peripheral", "Performance counters", ..., and chipset USB/SMBus/RAM functions: nothing in
topoweb reads more than their header) is not split into lines unless one of ``DETAIL_MARKERS``
(``LnkCap``, ``LnkSta``, ``ACSCtl``, ``ATSCtl``, ``Bus: primary=``) occurs in it, and unless it is
the text's last device block (a capture cut short ends there). Such a record has the header's
fields (``bdf``, ``line_no``, class, name, vendor/device ids, ``rev``, ``prog_if``) and
``capabilities_denied``; every field of its detail lines is empty (``None``, ``()``, ``False``),
its BDF is in ``header_only``, and a warning about its detail lines (a second ``NUMA node``) is
not given. Noise lines inside such a block are still warned about, and a malformed column-0 line
is still an error.

Speed: no block is split into lines. Three scans do the reading: the text is cut at its column-0
lines (``_segments``); a header-only block costs a header match (its fields cached by the header's
text) and one look for ``DETAIL_MARKERS`` (``_has_marker``); in any other block one pass
(``_detail_lines``, the matches of ``_DETAIL_RE``) finds the lines whose key (the text before the
first ``:``) parse() reads, ``Capabilities`` lines only when they name one of
``_CAPABILITY_WORDS``, and only those reach Python. The scans run in C where
``apps/domain/parsers/_lspci_scan.c`` is built (``apps.domain.build_native``), else in Python
(``_segments_python``, ``_details_python``, ``_has_marker_python``: the reference, the same
answers). The Dell XE9680's 16,873 lines: 405 of its 517 functions header-only, 1,383 detail lines
read in the other 112; parsed in 5.3 ms with the C scans, 9.2 with the Python ones.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from apps.domain import build_native
from apps.domain.errors import ParseError
from apps.domain.pci import canonical_bdf
from apps.domain.parsers._pcie import speeds_up_to
from apps.domain.parsers.text import clean_lines, register_plain

KIND = "lspci_verbose"

__all__ = ["AcsFlags", "PciFunction", "LspciVerbose", "KNOWN_VENDORS", "HEADER_ONLY_CLASSES", "DETAIL_MARKERS",
           "parse", "detect"]


@dataclass(frozen=True)
class AcsFlags:
    src_valid: bool | None
    trans_blk: bool | None
    req_redir: bool | None
    cmplt_redir: bool | None
    upstream_fwd: bool | None
    egress_ctrl: bool | None
    direct_trans: bool | None


@dataclass(frozen=True)
class PciFunction:
    bdf: str
    line_no: int
    class_name: str
    class_code: str | None
    prog_if: str | None
    name: str
    vendor_name: str | None
    device_name: str | None
    vendor_id: str | None
    device_id: str | None
    rev: str | None
    subsystem: str | None
    subsystem_vendor_id: str | None
    subsystem_device_id: str | None
    numa_node: int | None
    iommu_group: int | None
    physical_slot: str | None
    driver: str | None
    kernel_modules: tuple[str, ...]
    bus_primary: str | None
    bus_secondary: str | None
    bus_subordinate: str | None
    express_version: int | None
    port_type: str | None
    slot: bool | None
    cap_port: int | None
    cap_speed_gts: float | None
    cap_width: int | None
    sta_speed_gts: float | None
    sta_width: int | None
    sta_speed_note: str | None
    sta_width_note: str | None
    speed_downgraded: bool | None
    width_downgraded: bool | None
    supported_speeds_gts: tuple[float, ...]
    target_speed_gts: float | None
    lnksta2: str | None
    equalization_complete: bool | None
    acs_cap: AcsFlags | None
    acs_ctl: AcsFlags | None
    ats: bool
    ats_enabled: bool | None
    capabilities_denied: bool


@dataclass(frozen=True)
class LspciVerbose:
    devices: tuple[PciFunction, ...]
    warnings: tuple[str, ...]
    header_only: tuple[str, ...] = ()  # BDFs whose detail lines were not read (HEADER_ONLY_CLASSES)


# Vendor names as pci.ids spells them (and lspci prints them), longest first, to split
# "NVIDIA Corporation GH100 [H100 NVSwitch]" into vendor and device names.
KNOWN_VENDORS: tuple[str, ...] = tuple(
    sorted(
        (
            "NVIDIA Corporation",
            "Mellanox Technologies",
            "Mellanox Tech",
            "Intel Corporation",
            "Advanced Micro Devices, Inc. [AMD/ATI]",
            "Advanced Micro Devices, Inc. [AMD]",
            "Broadcom / LSI",
            "Broadcom Inc. and subsidiaries",
            "PLX Technology, Inc.",
            "PMC-Sierra Inc.",
            "Microchip Technology / SMSC",
            "Samsung Electronics Co Ltd",
            "Micron Technology Inc",
            "Amazon.com, Inc.",
            "Red Hat, Inc.",
            "ASPEED Technology, Inc.",
            "Matrox Electronics Systems Ltd.",
            "HighPoint Technologies, Inc.",
            "Marvell Technology Group Ltd.",
            "Realtek Semiconductor Co., Ltd.",
            "Huawei Technologies Co., Ltd.",
            "Xilinx Corporation",
            "Solarflare Communications",
            "Chelsio Communications Inc",
            "Cisco Systems Inc",
            "Google, Inc.",
            "Microsoft Corporation",
            "Habana Labs Ltd.",
            "PLDA",
        ),
        key=len,
        reverse=True,
    )
)

# The same vendors by their first word, longest first (a name can only start with a vendor of
# its own first word).
_VENDORS_BY_WORD: dict[str, tuple[str, ...]] = {
    word: tuple(v for v in KNOWN_VENDORS if v.split(" ", 1)[0] == word)
    for word in {v.split(" ", 1)[0] for v in KNOWN_VENDORS}
}

_HEADER_RE = re.compile(
    r"^(?P<bdf>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) "
    r"(?P<cls>[^:\[]+?)(?: \[(?P<cc>[0-9a-fA-F]{4})\])?: (?P<rest>.*)$"
)
_TAIL_RE = re.compile(
    r"^(?P<name>.*?)(?: \[(?P<vid>[0-9a-fA-F]{4}):(?P<did>[0-9a-fA-F]{4})\])?"
    r"(?: \(rev (?P<rev>[0-9a-fA-F]{2})\))?(?: \(prog-if (?P<pi>[0-9a-fA-F]{2})(?: \[[^\]]*\])?\))?\s*$"
)
_SUBSYS_RE = re.compile(r"^(?P<name>.*?)(?: \[(?P<vid>[0-9a-fA-F]{4}):(?P<did>[0-9a-fA-F]{4})\])?\s*$")
_DEVICE_FALLBACK_RE = re.compile(r"^(?P<vendor>.+?) Device (?P<did>[0-9a-fA-F]{4})$")
_SPEED = r"(?:(?P<{0}>\d+(?:\.\d+)?)\s*(?:GT|Gb)/s|unknown|Unknown)"
_LNKCAP_RE = re.compile(r"Port #(?P<port>\d+), Speed " + _SPEED.format("speed") + r",? Width x(?P<width>\d+)")
_LNKSTA_RE = re.compile(
    r"Speed " + _SPEED.format("speed") + r"(?: \((?P<snote>ok|downgraded|strange)\))?,"
    r" Width x(?P<width>\d+)(?: \((?P<wnote>ok|downgraded|strange)\))?"
)
_LNKCAP2_RE = re.compile(r"Supported Link Speeds: (?:(?P<lo>\d+(?:\.\d+)?)-)?(?P<hi>\d+(?:\.\d+)?)GT/s")
_TARGET_RE = re.compile(r"Target Link Speed: (?P<speed>\d+(?:\.\d+)?)GT/s")
_EXPRESS_RE = re.compile(
    r"^\[[0-9a-fA-F]+(?: v\d+)?\] Express (?:\(v(?P<ver>\d+)\) )?(?P<type>.+?)(?: \(Slot(?P<slot>[+-])\))?, MSI"
)
_BUS_RE = re.compile(
    r"primary=(?P<p>[0-9a-fA-F]{2}), secondary=(?P<s>[0-9a-fA-F]{2}), subordinate=(?P<u>[0-9a-fA-F]{2})"
)
_ACS_FLAGS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
# Every "Flag+" / "Flag-" of an ACSCap/ACSCtl line in one scan (no flag name ends another one, so the
# first match of each flag is where a search for that flag alone would stop).
_ACS_RE = re.compile("(" + "|".join(_ACS_FLAGS) + r")([+-])")
_ORPHAN_KEYS = frozenset({"LnkCap", "LnkSta", "LnkCap2", "LnkCtl2", "LnkSta2", "LnkCtl", "DevSta", "DevCap", "DevCtl"})

# Keys of the detail lines parse() reads (``_DETAIL_RE``); every other detail line is skipped.
_READ_KEYS = frozenset({
    "Capabilities", "LnkCap", "LnkSta", "LnkCap2", "LnkCtl2", "LnkSta2", "HeaderLog", "ACSCap", "ACSCtl", "ATSCtl",
    "NUMA node", "IOMMU group", "Kernel driver in use", "Kernel modules", "Physical Slot", "Bus", "Subsystem",
})

# Classes (as lspci names them) of the functions nothing in topoweb reads beyond the header: a
# whole-machine capture is mostly these (the Dell XE9680's 517 functions: 367 "System peripheral",
# 20 "Generic system peripheral", 16 "Performance counters": the CPUs' uncore), none is a node of
# the host graph (assemble/listing.py keeps bridges, GPUs/accelerators, NICs and storage), and the
# findings read only their names. Their blocks are passed over without splitting them into lines
# unless one of DETAIL_MARKERS occurs in the block: then it is read in full as before.
HEADER_ONLY_CLASSES = frozenset({
    "System peripheral", "Generic system peripheral", "Performance counters", "RAM memory", "FLASH memory",
    "Memory controller", "SMBus", "USB controller", "Serial bus controller", "Communication controller",
    "Audio device", "Multimedia audio controller", "Non-Essential Instrumentation", "Unassigned class", "IOMMU",
})
# Detail lines a finding reads whatever the device (link training, ACS redirect, ATS) or that make a
# function a bridge: a HEADER_ONLY_CLASSES block that has one is read line by line.
DETAIL_MARKERS = ("LnkCap", "LnkSta", "ACSCtl", "ATSCtl", "Bus: primary=")

_SIGNED_INT_RE = re.compile(r"-?[0-9]+")  # NUMA node / IOMMU group values ("-1": no NUMA affinity)

# A line that starts in column 0 (a header, or noise): where a device block can start.
_COLUMN0_RE = re.compile(r"\n([^\t \n][^\n]*)")


def _alternatives(words) -> str:
    """A regex alternation of ``words`` (literal), longest first."""
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


# What a Capabilities line must contain for parse() to read it (``_capability``); the others (Power
# Management, MSI, Vendor Specific, ...: most of a block) are never looked at.
_CAPABILITY_WORDS = ("<access denied>", " Express ", "Advanced Error Reporting", "Address Translation Service",
                     "] Subsystem: ")
# The detail lines parse() reads in a device's block, each found by one scan of the block (``\n``
# first: the regex engine then jumps from line to line): the key (the stripped line's text before
# its first ``:``) and the rest of the line.
_DETAIL_RE = re.compile(
    r"\n[\t ][^\S\n]*(?P<key>" + _alternatives(_READ_KEYS - {"Capabilities"})
    + r"|Capabilities(?=:[^\n]*(?:" + _alternatives(_CAPABILITY_WORDS) + r")))"
    r":(?P<rest>[^\n]*)"
)
_DETAIL_KEYS = tuple(sorted(_READ_KEYS - {"Capabilities"}))  # the keys _DETAIL_RE reads whatever the line says
# Detail lines that belong to no device (before any header, or grep's leftovers): counted as orphans.
_ORPHAN_LINE_RE = re.compile(r"^[\t ][^\S\n]*(?:" + _alternatives(_ORPHAN_KEYS) + r"):", re.MULTILINE)
_NONBLANK_RE = re.compile(r"\S")
_ELISIONS = frozenset({"[ ... ]", "[...]", "...", "[ .. ]"})

_DETECT_HEADER_RE = re.compile(
    r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] [^:\n]+: ", re.MULTILINE
)
_DETECT_DETAIL_RE = re.compile(r"^\s+(?:Control|Capabilities|LnkCap|LnkSta|Kernel driver in use|Subsystem):", re.MULTILINE)
_DETECT_ORPHAN_RE = re.compile(r"^\s+(?:LnkCap|LnkSta|DevSta):\s", re.MULTILINE)


_BLANK_DEVICE: dict = {
    "bdf": "", "line_no": 0, "class_name": "", "class_code": None, "prog_if": None, "name": "",
    "vendor_name": None, "device_name": None, "vendor_id": None, "device_id": None, "rev": None,
    "subsystem": None, "subsystem_vendor_id": None, "subsystem_device_id": None, "numa_node": None,
    "iommu_group": None, "physical_slot": None, "driver": None, "kernel_modules": (),
    "bus_primary": None, "bus_secondary": None, "bus_subordinate": None, "express_version": None,
    "port_type": None, "slot": None, "cap_port": None, "cap_speed_gts": None, "cap_width": None,
    "sta_speed_gts": None, "sta_width": None, "sta_speed_note": None, "sta_width_note": None,
    "speed_downgraded": None, "width_downgraded": None, "supported_speeds_gts": (),
    "target_speed_gts": None, "lnksta2": None, "equalization_complete": None, "acs_cap": None,
    "acs_ctl": None, "ats": False, "ats_enabled": None, "capabilities_denied": False,
}


def _new_device(bdf: str, line_no: int) -> dict:
    """A device's fields before its lines are read (a copy of ``_BLANK_DEVICE``)."""
    dev = _BLANK_DEVICE.copy()
    dev["bdf"] = bdf
    dev["line_no"] = line_no
    return dev


def _bdf(text: str) -> str:
    """``canonical_bdf`` of a header's address (``_HEADER_RE`` admits only addresses): the two
    shapes lspci prints, ``bb:dd.f`` and ``dddd:bb:dd.f``, need only lower case."""
    n = len(text)
    if n == 7:
        return "0000:" + text.lower()
    if n == 12:
        return text.lower()
    return canonical_bdf(text)


def _flag(text: str, name: str) -> bool | None:
    i = text.find(name)
    if i < 0:
        return None
    c = text[i + len(name) : i + len(name) + 1]
    return True if c == "+" else False if c == "-" else None


def _acs(text: str) -> AcsFlags:
    """The flags of an ACSCap/ACSCtl line: the first ``+``/``-`` printed for each, ``None`` when absent."""
    found: dict[str, bool] = {}
    for flag, sign in _ACS_RE.findall(text):
        found.setdefault(flag, sign == "+")
    return AcsFlags(*(found.get(flag) for flag in _ACS_FLAGS))


def _speed(value: str | None) -> float | None:
    return None if value is None else float(value)


def _note_flag(note: str | None) -> bool | None:
    if note == "downgraded":
        return True
    if note == "ok":
        return False
    return None


@functools.lru_cache(maxsize=1024)
def _header_fields(cls: str, cc: str | None, rest: str) -> dict:
    """A device's fields from its header line (``_HEADER_RE``'s ``cls``, ``cc`` and ``rest``: class,
    name, ids, rev, prog-if), the others blank; ``bdf`` and ``line_no`` are the caller's. Cached: a
    whole-machine capture repeats a few dozen headers (the Dell XE9680: 58 for 517 functions), and
    a fleet the same ones. The caller copies the dict before filling it."""
    dev = _new_device("", 0)
    dev["class_name"] = cls.strip()
    dev["class_code"] = cc.lower() if cc else None
    t = _TAIL_RE.match(rest)
    if t is None:  # pragma: no cover - _TAIL_RE matches any text
        dev["name"] = rest.strip()
        return dev
    name = t.group("name").strip()
    dev["name"] = name
    if t.group("vid"):
        dev["vendor_id"] = t.group("vid").lower()
        dev["device_id"] = t.group("did").lower()
    dev["rev"] = t.group("rev").lower() if t.group("rev") else None
    dev["prog_if"] = t.group("pi").lower() if t.group("pi") else None
    vendor = None
    for known in _VENDORS_BY_WORD.get(name.split(" ", 1)[0], ()):  # longest first
        if name.startswith(known + " "):
            vendor = known
            break
    # lspci prints "<vendor> Device 2330" (or "Device [10de:2330]" with -nn) when its
    # pci.ids does not know the device: the vendor is then certain and the name unknown.
    fb = _DEVICE_FALLBACK_RE.match(name)
    unnamed = fb is not None or name.endswith(" Device")
    if fb is not None:
        vendor = vendor or fb.group("vendor")
        if dev["device_id"] is None:
            dev["device_id"] = fb.group("did").lower()
    elif name.endswith(" Device") and vendor is None:
        vendor = name[: -len(" Device")]
    if vendor is not None:
        dev["vendor_name"] = vendor
        dev["device_name"] = None if unnamed else (name[len(vendor) + 1 :] or None)
    return dev


def _header_device(m: re.Match, bdf: str, line_no: int) -> dict:
    """The fields of the device whose header line ``_HEADER_RE`` matched as ``m``."""
    dev = _header_fields(m.group("cls"), m.group("cc"), m.group("rest")).copy()
    dev["bdf"] = bdf
    dev["line_no"] = line_no
    return dev


# --- the three scans: in C where apps/domain/parsers/_lspci_scan.c is built, else these ---------------
# (the Python ones are the reference: tests/domain/parsers/test_lspci_scan.py asks both)

def _segments_python(text: str) -> list[tuple[int, int, int, int]]:
    """(a, e, b, line_no) of each line that starts in column 0 (not blank, not indented), in order:
    the line is ``text[a:e]``, its segment (it and the indented lines under it) ends at ``b`` (the
    newline before the next such line, or the end of the text), ``line_no`` is 1-based."""
    lines = [(m.start(1), m.end(1)) for m in _COLUMN0_RE.finditer(text)]
    if text[:1] not in ("\t", " ", "\n", ""):
        nl = text.find("\n")
        lines.insert(0, (0, len(text) if nl < 0 else nl))
    out = []
    line_no = 1 if not lines else 1 + text.count("\n", 0, lines[0][0])
    for i, (a, e) in enumerate(lines):
        b = lines[i + 1][0] - 1 if i + 1 < len(lines) else len(text)
        out.append((a, e, b, line_no))
        line_no += text.count("\n", a, b) + 1
    return out


def _details_python(text: str, start: int, end: int) -> list[tuple[str, str, int, int]]:
    """(key, rest, at, rest_end) of each detail line in [start, end) that parse() reads
    (``_DETAIL_RE``): ``at`` is the offset of the line, ``rest`` its text after the key's ``:``."""
    return [(d.group("key"), d.group("rest"), d.start() + 1, d.end()) for d in _DETAIL_RE.finditer(text, start, end)]


def _has_marker_python(text: str, start: int, end: int) -> bool:
    """Whether one of ``DETAIL_MARKERS`` occurs in [start, end)."""
    find = text.find
    return any(find(marker, start, end) >= 0 for marker in DETAIL_MARKERS)


_native = build_native.load("apps.domain.parsers._lspci_scan")


def _segments(text: str) -> list[tuple[int, int, int, int]]:
    return _native.segments(text) if _native is not None else _segments_python(text)


def _detail_lines(text: str, start: int, end: int) -> list[tuple[str, str, int, int]]:
    if _native is not None:
        return _native.details(text, start, end, _DETAIL_KEYS, "Capabilities", _CAPABILITY_WORDS)
    return _details_python(text, start, end)


def _has_marker(text: str, start: int, end: int) -> bool:
    return _native.has_marker(text, start, end, DETAIL_MARKERS) if _native is not None else \
        _has_marker_python(text, start, end)


# Detail lines whose only effect is a field of the device (``_read_block`` handles the others).
def _read_lnkcap(dev: dict, rest: str) -> None:
    lm = _LNKCAP_RE.search(rest)
    if lm is not None:
        dev["cap_port"] = int(lm.group("port"))
        dev["cap_speed_gts"] = _speed(lm.group("speed"))
        dev["cap_width"] = int(lm.group("width"))


def _read_lnksta(dev: dict, rest: str) -> None:
    lm = _LNKSTA_RE.search(rest)
    if lm is not None:
        dev["sta_speed_gts"] = _speed(lm.group("speed"))
        dev["sta_width"] = int(lm.group("width"))
        dev["sta_speed_note"] = lm.group("snote")
        dev["sta_width_note"] = lm.group("wnote")
        dev["speed_downgraded"] = _note_flag(lm.group("snote"))
        dev["width_downgraded"] = _note_flag(lm.group("wnote"))


def _read_lnkcap2(dev: dict, rest: str) -> None:
    lm = _LNKCAP2_RE.search(rest)
    if lm is not None:
        hi = float(lm.group("hi"))
        lo = float(lm.group("lo")) if lm.group("lo") else hi
        dev["supported_speeds_gts"] = speeds_up_to(lo, hi)


def _read_lnkctl2(dev: dict, rest: str) -> None:
    lm = _TARGET_RE.search(rest)
    if lm is not None:
        dev["target_speed_gts"] = float(lm.group("speed"))


def _read_lnksta2(dev: dict, rest: str) -> None:
    dev["lnksta2"] = rest
    dev["equalization_complete"] = _flag(rest, "EqualizationComplete")


def _read_acscap(dev: dict, rest: str) -> None:
    dev["acs_cap"] = _acs(rest)


def _read_acsctl(dev: dict, rest: str) -> None:
    dev["acs_ctl"] = _acs(rest)


def _read_atsctl(dev: dict, rest: str) -> None:
    dev["ats_enabled"] = _flag(rest, "Enable")


def _read_driver(dev: dict, rest: str) -> None:
    dev["driver"] = rest or None


def _read_modules(dev: dict, rest: str) -> None:
    dev["kernel_modules"] = tuple(x.strip() for x in rest.split(",") if x.strip())


def _read_slot(dev: dict, rest: str) -> None:
    dev["physical_slot"] = rest or None


def _read_bus(dev: dict, rest: str) -> None:
    bm = _BUS_RE.search(rest)
    if bm is not None:
        dev["bus_primary"] = bm.group("p").lower()
        dev["bus_secondary"] = bm.group("s").lower()
        dev["bus_subordinate"] = bm.group("u").lower()


def _read_subsystem(dev: dict, rest: str) -> None:
    if dev["subsystem"] is None:
        sm = _SUBSYS_RE.match(rest)
        if sm is not None:
            dev["subsystem"] = sm.group("name").strip() or None
            if sm.group("vid"):
                dev["subsystem_vendor_id"] = sm.group("vid").lower()
                dev["subsystem_device_id"] = sm.group("did").lower()


_FIELD_READERS = {
    "LnkCap": _read_lnkcap, "LnkSta": _read_lnksta, "LnkCap2": _read_lnkcap2, "LnkCtl2": _read_lnkctl2,
    "LnkSta2": _read_lnksta2, "ACSCap": _read_acscap, "ACSCtl": _read_acsctl, "ATSCtl": _read_atsctl,
    "Kernel driver in use": _read_driver, "Kernel modules": _read_modules, "Physical Slot": _read_slot,
    "Bus": _read_bus, "Subsystem": _read_subsystem,
}
# A second LnkCap or LnkSta line in a block (once these fields are set) cannot be its device's: grep
# kept the link lines of a device whose header it dropped.
_ONCE_PER_DEVICE = {"LnkCap": ("cap_speed_gts", "cap_width"), "LnkSta": ("sta_speed_gts", "sta_width")}


class _Parse:
    """The state of one parse(): the devices so far, the block being read and what to warn about.

    ``run`` takes the text one segment at a time: a column-0 line (a device header, or noise) and
    the indented lines under it, up to the next column-0 line. A device block is one segment, or
    several when noise lines sit inside it; indented lines before the first column-0 line belong
    to no device."""

    def __init__(self, text: str):
        self.text = text
        self.devices: list[dict] = []
        self.warnings: list[str] = []
        self.orphans: list[int] = []
        self.elided: list[int] = []
        self.skipped: list[int] = []
        self.header_only: list[str] = []
        self.denied = 0
        self.seen: dict[str, int] = {}
        self.dev: dict | None = None  # the block being read; None before the first header or for orphans
        self.orphan_mode = False
        self.passing = False  # in the detail lines of a header-only block: not read
        self.aer_open = 0  # line of an AER capability still waiting for its HeaderLog line
        self.segment = (0, 1)  # offset and line number of the segment being read (for _line)

    def run(self) -> None:
        text = self.text
        segments = _segments(text)
        if not segments or segments[0][0] != 0:  # indented lines first: they belong to no device
            self._orphan_lines(0, segments[0][0] - 1 if segments else len(text))
        header_match = _HEADER_RE.match
        # the last device block is always read in full (a capture cut short ends inside it)
        last = next((i for i in range(len(segments) - 1, -1, -1)
                     if header_match(text[segments[i][0]:segments[i][1]])), 0)
        for i, (a, e, b, line_no) in enumerate(segments):
            self.segment = (a, line_no)
            line = text[a:e]
            m = header_match(line)
            if m is None:
                self._noise(line, line_no)
            elif not (i < last and self._header_only(m, a, b, line_no)):
                self._header(m, line, line_no)
            self._details(e, b)

    def _header_only(self, m: re.Match, a: int, b: int, line_no: int) -> bool:
        """Take the block [a, b) as a header-only record if it is one (HEADER_ONLY_CLASSES); True if so."""
        text = self.text
        if m.group("cls").strip() not in HEADER_ONLY_CLASSES:
            return False
        if _has_marker(text, a, b):
            return False
        bdf = _bdf(m.group("bdf"))
        if bdf in self.seen:
            return False
        self.seen[bdf] = line_no
        dev = self.dev = _header_device(m, bdf, line_no)
        self.devices.append(dev)
        if text.find("Capabilities: <access denied>", a, b) >= 0:  # the one detail a header-only record has
            dev["capabilities_denied"] = True
            self.denied += 1
        self.header_only.append(bdf)
        self.aer_open = 0
        self.orphan_mode = False
        self.passing = True
        return True

    def _header(self, m: re.Match, line: str, line_no: int) -> None:
        """A device header whose block is read (or ignored, if its BDF was listed before)."""
        try:
            bdf = _bdf(m.group("bdf"))
        except ValueError:  # pragma: no cover - the regex only admits addresses
            raise ParseError(KIND, line_no, line, "malformed PCI address") from None
        self.aer_open = 0  # a later block follows, so the one before was not cut
        self.orphan_mode = False
        self.passing = False
        if bdf in self.seen:
            self.warnings.append(
                f"line {line_no}: {bdf} was already listed at line {self.seen[bdf]}; the later block is ignored"
            )
            self.dev = None
            self.orphan_mode = True
            return
        self.seen[bdf] = line_no
        self.dev = _header_device(m, bdf, line_no)
        self.devices.append(self.dev)

    def _noise(self, line: str, line_no: int) -> None:
        """A column-0 line that is no device header: blank, an elision, a prompt or pcilib message, or an error."""
        s = line.strip()
        if not s:
            return
        if s in _ELISIONS:
            self.elided.append(line_no)
        elif s.startswith("pcilib:") or "lspci" in s:
            self.skipped.append(line_no)
        else:
            raise ParseError(
                KIND, line_no, line,
                "expected a device header 'BDF class: vendor device' (as lspci prints it) or an indented detail line",
            )

    def _line(self, at: int) -> int:
        """The line number of the line that starts at offset ``at`` of the segment being read."""
        a, line_no = self.segment
        return line_no + self.text.count("\n", a, at)

    def _details(self, start: int, b: int) -> None:
        """The indented lines [start, b) under a column-0 line."""
        if self.passing or start >= b:
            return
        if self.dev is None or self.orphan_mode:
            self._orphan_lines(start, b)
        else:
            self._read_block(self.dev, start, b)

    def _read_block(self, dev: dict, start: int, b: int) -> None:
        """Read ``dev``'s detail lines in [start, b) (``_DETAIL_RE``: the others are skipped unread)."""
        readers = _FIELD_READERS
        for key, rest, at, rest_end in _detail_lines(self.text, start, b):
            rest = rest.strip()
            reader = readers.get(key)
            if reader is not None:
                filled = _ONCE_PER_DEVICE.get(key)
                if filled is not None and (dev[filled[0]] is not None or dev[filled[1]] is not None):
                    self.orphan_mode = True
                    self.orphans.append(self._line(at))
                    self._orphan_lines(rest_end, b)
                    return
                reader(dev, rest)
            elif key == "Capabilities":
                self._capability(dev, rest, at)
            elif key == "HeaderLog":
                self.aer_open = 0
            elif key == "NUMA node" or key == "IOMMU group":
                self._number(dev, key, rest, at)

    def _capability(self, dev: dict, rest: str, at: int) -> None:
        """A ``Capabilities:`` line (one with _CAPABILITY_WORDS) that starts at offset ``at``."""
        if rest.startswith("<access denied>"):
            if not dev["capabilities_denied"]:
                self.denied += 1
            dev["capabilities_denied"] = True
            return
        if " Express " in rest:
            em = _EXPRESS_RE.match(rest)
            if em is not None:
                dev["express_version"] = int(em.group("ver")) if em.group("ver") else None
                dev["port_type"] = em.group("type").strip()
                slot = em.group("slot")
                dev["slot"] = None if slot is None else slot == "+"
            return
        if "Advanced Error Reporting" in rest:
            self.aer_open = self._line(at)
        elif "Address Translation Service" in rest:
            dev["ats"] = True
        elif "] Subsystem: " in rest and dev["subsystem"] is None:
            dev["subsystem"] = rest.split("] Subsystem: ", 1)[1].strip()

    def _number(self, dev: dict, key: str, rest: str, at: int) -> None:
        """``NUMA node:`` or ``IOMMU group:`` (the line at offset ``at``): the first number is kept, a
        different second one warned about."""
        field = "numa_node" if key == "NUMA node" else "iommu_group"
        if _SIGNED_INT_RE.fullmatch(rest):
            n = int(rest)
            if dev[field] is not None:
                if dev[field] != n:
                    self.warnings.append(
                        f"line {self._line(at)}: a second '{key}' line for {dev['bdf']} says {n}, the first said "
                        f"{dev[field]}; the first is kept"
                    )
                return
            dev[field] = None if n < 0 else n
        elif rest:
            self.warnings.append(f"line {self._line(at)}: '{key}: {rest[:40]}' of {dev['bdf']} is not a number; "
                                 "left unknown")

    def _orphan_lines(self, start: int, b: int) -> None:
        """Note the link/status lines in [start, b) of the segment being read: they have no device."""
        for o in _ORPHAN_LINE_RE.finditer(self.text, start, b):
            self.orphans.append(self._line(o.start()))

    def result(self) -> LspciVerbose:
        text, devices, warnings, orphans = self.text, self.devices, self.warnings, self.orphans
        if not devices:  # the error names the first line that is not blank
            first_content = _NONBLANK_RE.search(text)
            first = text.count("\n", 0, first_content.start()) + 1 if first_content else 1
            if orphans:
                reason = (
                    "no device header line ('BDF class: vendor device') found: the link lines cannot be tied to a "
                    "device (was the output filtered with grep?); send the whole lspci -vvv output"
                )
            else:
                reason = "no device header line ('BDF class: vendor device') found; this is not lspci -vv/-vvv output"
            raise ParseError(KIND, first, text.split("\n")[first - 1], reason)
        if self.aer_open:
            warnings.append(
                f"line {self.aer_open}: the Advanced Error Reporting capability of {devices[-1]['bdf']} ends without "
                "its HeaderLog line at the end of the text: the capture looks cut short and the last device may be "
                "incomplete"
            )
        if orphans:
            warnings.append(
                f"{len(orphans)} link/status line(s) ({_ranges(orphans)}) have no device header of their own (the "
                "output was filtered with grep?); they are ignored"
            )
        if self.elided:
            warnings.append(f"line(s) {_ranges(self.elided)}: lines were elided ('[ ... ]'); fields there are missing")
        if self.skipped:
            warnings.append(
                f"line(s) {_ranges(self.skipped)}: skipped lines that are not lspci output (prompt or pcilib message)")
        if self.denied:
            warnings.append(
                f"{self.denied} device(s) show 'Capabilities: <access denied>' (lspci ran without root): their link, "
                "port type, ACS and ATS fields are missing, not wrong"
            )
        return LspciVerbose(tuple(_function(d) for d in devices), tuple(warnings), tuple(self.header_only))


def parse(text: str) -> LspciVerbose:
    """Parse ``lspci -vvv`` (or ``-vv``/``-nn``/``-D``) output; see the module docstring for the schema."""
    if text.startswith("\ufeff") or "\x1b" in text or "\r" in text:
        text = "\n".join(clean_lines(text))  # clean_lines(text) is text.split("\n") for a clean text
    if not text or text.isspace():  # (not text.strip(): no copy of a megabyte)
        raise ParseError(KIND, 0, "", "the lspci output is empty")
    state = _Parse(text)
    state.run()
    return state.result()


def _plain_function(fn: PciFunction) -> dict:
    """``to_jsonable(fn)`` in one dict copy: every field is an atom but the two tuples and the two
    ACS flag sets (``text.register_plain``)."""
    d = fn.__dict__.copy()
    d["kernel_modules"] = list(d["kernel_modules"])
    d["supported_speeds_gts"] = list(d["supported_speeds_gts"])
    for name in ("acs_cap", "acs_ctl"):
        flags = d[name]
        if flags is not None:
            d[name] = flags.__dict__.copy()
    return d


register_plain(PciFunction, _plain_function)


def _function(fields: dict) -> PciFunction:
    """``PciFunction(**fields)`` without the frozen dataclass's 40 guarded attribute writes (a
    whole-machine capture has 500 functions): ``fields`` holds exactly the dataclass's fields."""
    obj = object.__new__(PciFunction)
    obj.__dict__.update(fields)
    return obj


def _ranges(nums: list[int]) -> str:
    out = []
    start = prev = nums[0]
    for n in nums[1:]:
        if n == prev + 1:
            prev = n
            continue
        out.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = n
    out.append(f"{start}-{prev}" if prev != start else str(start))
    return ", ".join(out)


def detect(text: str) -> int:
    """Score ``text`` as verbose lspci output: 95 with headers and detail lines, 70 headers only
    (``lspci -nn``), 30 for header-less link lines (so the parser can explain what is missing)."""
    head = text[:8000]
    headers = _DETECT_HEADER_RE.search(head)
    if headers:
        return 95 if _DETECT_DETAIL_RE.search(head) else 70
    if _DETECT_ORPHAN_RE.search(head):
        return 30
    return 0
