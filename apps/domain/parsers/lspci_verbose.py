"""Parse verbose ``lspci`` output: PCIe link, port type, ACS, ATS, NUMA and driver per function.

Commands: ``lspci -D -vvv`` (what the topoweb agent runs, as root), ``lspci -vvv``, ``lspci -vv``,
with or without ``-nn`` and ``-D``; also plain ``lspci -D -nn`` (headers only) and concatenations
of several ``lspci -vvv -s <bdf>`` runs. Run without root, lspci prints
``Capabilities: <access denied>`` instead of every capability: no link, ACS or ATS data.

Each device is a block whose first line starts in column 0::

    0000:bc:02.0 PCI bridge [0604]: PMC-Sierra Inc. Device [11f8:4128] (rev 01) (prog-if 00 [Normal decode])

(``BDF class[ [cccc]]: name[ [vvvv:dddd]][ (rev rr)][ (prog-if pp [...])]``) followed by indented
detail lines (tabs, or spaces when copied from a web page). Blank lines between blocks are optional.

Result :class:`LspciVerbose`: ``devices`` (tuple of :class:`PciFunction`, in printed order) and
``warnings``. Per :class:`PciFunction`:

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

Speed: one pass over the lines, keyed on the text before the first ``:``; 10,000 lines take a
few tens of milliseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.domain.errors import ParseError
from apps.domain.pci import canonical_bdf
from apps.domain.parsers._pcie import speeds_up_to
from apps.domain.parsers.text import clean_lines

KIND = "lspci_verbose"

__all__ = ["AcsFlags", "PciFunction", "LspciVerbose", "KNOWN_VENDORS", "parse", "detect"]


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
_ACS_RE = {flag: re.compile(flag + r"([+-])") for flag in _ACS_FLAGS}
_ORPHAN_KEYS = frozenset({"LnkCap", "LnkSta", "LnkCap2", "LnkCtl2", "LnkSta2", "LnkCtl", "DevSta", "DevCap", "DevCtl"})

# Keys of the detail lines parse() reads; every other detail line is skipped.
_READ_KEYS = frozenset({
    "Capabilities", "LnkCap", "LnkSta", "LnkCap2", "LnkCtl2", "LnkSta2", "HeaderLog", "ACSCap", "ACSCtl", "ATSCtl",
    "NUMA node", "IOMMU group", "Kernel driver in use", "Kernel modules", "Physical Slot", "Bus", "Subsystem",
})

_DETECT_HEADER_RE = re.compile(
    r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] [^:\n]+: ", re.MULTILINE
)
_DETECT_DETAIL_RE = re.compile(r"^\s+(?:Control|Capabilities|LnkCap|LnkSta|Kernel driver in use|Subsystem):", re.MULTILINE)
_DETECT_ORPHAN_RE = re.compile(r"^\s+(?:LnkCap|LnkSta|DevSta):\s", re.MULTILINE)


def _new_device(bdf: str, line_no: int) -> dict:
    return {
        "bdf": bdf, "line_no": line_no, "class_name": "", "class_code": None, "prog_if": None, "name": "",
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


def _flag(text: str, name: str) -> bool | None:
    i = text.find(name)
    if i < 0:
        return None
    c = text[i + len(name) : i + len(name) + 1]
    return True if c == "+" else False if c == "-" else None


def _acs(text: str) -> AcsFlags:
    values = []
    for flag in _ACS_FLAGS:
        m = _ACS_RE[flag].search(text)
        values.append(None if m is None else m.group(1) == "+")
    return AcsFlags(*values)


def _speed(value: str | None) -> float | None:
    return None if value is None else float(value)


def _note_flag(note: str | None) -> bool | None:
    if note == "downgraded":
        return True
    if note == "ok":
        return False
    return None


def parse(text: str) -> LspciVerbose:
    """Parse ``lspci -vvv`` (or ``-vv``/``-nn``/``-D``) output; see the module docstring for the schema."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the lspci output is empty")
    devices: list[dict] = []
    warnings: list[str] = []
    orphans: list[int] = []
    elided: list[int] = []
    skipped: list[int] = []
    denied = 0
    seen: dict[str, int] = {}
    dev: dict | None = None  # the block being read; None before the first header or for orphans
    orphan_mode = False
    aer_open = 0  # line of an AER capability still waiting for its HeaderLog line
    first_content = 0

    header_match = _HEADER_RE.match
    for line_no, line in enumerate(lines, 1):
        if not line:
            continue
        c0 = line[0]
        if c0 != "\t" and c0 != " ":
            # column 0: a device header, or noise
            m = header_match(line)
            if m is None:
                s = line.strip()
                if not s:
                    continue
                if not first_content:
                    first_content = line_no
                if s in ("[ ... ]", "[...]", "...", "[ .. ]"):
                    elided.append(line_no)
                    continue
                if s.startswith("pcilib:") or "lspci" in s:
                    skipped.append(line_no)
                    continue
                raise ParseError(
                    KIND, line_no, line,
                    "expected a device header 'BDF class: vendor device' (as lspci prints it) or an indented detail line",
                )
            if not first_content:
                first_content = line_no
            try:
                bdf = canonical_bdf(m.group("bdf"))
            except ValueError:  # pragma: no cover - the regex only admits addresses
                raise ParseError(KIND, line_no, line, "malformed PCI address") from None
            aer_open = 0  # a later block follows, so the one before was not cut
            orphan_mode = False
            if bdf in seen:
                warnings.append(
                    f"line {line_no}: {bdf} was already listed at line {seen[bdf]}; the later block is ignored"
                )
                dev = None
                orphan_mode = True
                continue
            seen[bdf] = line_no
            dev = _new_device(bdf, line_no)
            devices.append(dev)
            dev["class_name"] = m.group("cls").strip()
            cc = m.group("cc")
            dev["class_code"] = cc.lower() if cc else None
            t = _TAIL_RE.match(m.group("rest"))
            if t is not None:
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
            else:  # pragma: no cover - _TAIL_RE matches any text
                dev["name"] = m.group("rest").strip()
            continue

        # an indented detail line
        s = line.strip()
        if not s:
            continue
        if not first_content:
            first_content = line_no
        key, sep, rest = s.partition(":")
        if not sep:
            continue
        if dev is None or orphan_mode:
            if key in _ORPHAN_KEYS:
                orphans.append(line_no)
            continue
        if key not in _READ_KEYS:  # most detail lines (Control, Status, Region, DevCap, ...): one set lookup
            continue
        rest = rest.strip()
        if key == "Capabilities":
            if rest.startswith("<access denied>"):
                if not dev["capabilities_denied"]:
                    denied += 1
                dev["capabilities_denied"] = True
                continue
            if " Express " in rest:
                em = _EXPRESS_RE.match(rest)
                if em is not None:
                    dev["express_version"] = int(em.group("ver")) if em.group("ver") else None
                    dev["port_type"] = em.group("type").strip()
                    slot = em.group("slot")
                    dev["slot"] = None if slot is None else slot == "+"
                continue
            if "Advanced Error Reporting" in rest:
                aer_open = line_no
            elif "Address Translation Service" in rest:
                dev["ats"] = True
            elif "] Subsystem: " in rest and dev["subsystem"] is None:
                dev["subsystem"] = rest.split("] Subsystem: ", 1)[1].strip()
            continue
        if key == "LnkCap":
            if dev["cap_speed_gts"] is not None or dev["cap_width"] is not None:
                orphan_mode = True  # a second LnkCap: grep kept the link lines of a device whose header it dropped
                orphans.append(line_no)
                continue
            lm = _LNKCAP_RE.search(rest)
            if lm is not None:
                dev["cap_port"] = int(lm.group("port"))
                dev["cap_speed_gts"] = _speed(lm.group("speed"))
                dev["cap_width"] = int(lm.group("width"))
            continue
        if key == "LnkSta":
            if dev["sta_speed_gts"] is not None or dev["sta_width"] is not None:
                orphan_mode = True
                orphans.append(line_no)
                continue
            lm = _LNKSTA_RE.search(rest)
            if lm is not None:
                dev["sta_speed_gts"] = _speed(lm.group("speed"))
                dev["sta_width"] = int(lm.group("width"))
                dev["sta_speed_note"] = lm.group("snote")
                dev["sta_width_note"] = lm.group("wnote")
                dev["speed_downgraded"] = _note_flag(lm.group("snote"))
                dev["width_downgraded"] = _note_flag(lm.group("wnote"))
            continue
        if key == "LnkCap2":
            lm = _LNKCAP2_RE.search(rest)
            if lm is not None:
                hi = float(lm.group("hi"))
                lo = float(lm.group("lo")) if lm.group("lo") else hi
                dev["supported_speeds_gts"] = speeds_up_to(lo, hi)
            continue
        if key == "LnkCtl2":
            lm = _TARGET_RE.search(rest)
            if lm is not None:
                dev["target_speed_gts"] = float(lm.group("speed"))
            continue
        if key == "LnkSta2":
            dev["lnksta2"] = rest
            dev["equalization_complete"] = _flag(rest, "EqualizationComplete")
            continue
        if key == "HeaderLog":
            aer_open = 0
            continue
        if key == "ACSCap":
            dev["acs_cap"] = _acs(rest)
            continue
        if key == "ACSCtl":
            dev["acs_ctl"] = _acs(rest)
            continue
        if key == "ATSCtl":
            dev["ats_enabled"] = _flag(rest, "Enable")
            continue
        if key == "NUMA node" or key == "IOMMU group":
            field = "numa_node" if key == "NUMA node" else "iommu_group"
            if rest.lstrip("-").isdigit() and rest.isascii():
                n = int(rest)
                if dev[field] is not None:
                    if dev[field] != n:
                        warnings.append(
                            f"line {line_no}: a second '{key}' line for {dev['bdf']} says {n}, the first said "
                            f"{dev[field]}; the first is kept"
                        )
                    continue
                dev[field] = None if n < 0 else n
            continue
        if key == "Kernel driver in use":
            dev["driver"] = rest or None
            continue
        if key == "Kernel modules":
            dev["kernel_modules"] = tuple(x.strip() for x in rest.split(",") if x.strip())
            continue
        if key == "Physical Slot":
            dev["physical_slot"] = rest or None
            continue
        if key == "Bus":
            bm = _BUS_RE.search(rest)
            if bm is not None:
                dev["bus_primary"] = bm.group("p").lower()
                dev["bus_secondary"] = bm.group("s").lower()
                dev["bus_subordinate"] = bm.group("u").lower()
            continue
        if key == "Subsystem" and dev["subsystem"] is None:
            sm = _SUBSYS_RE.match(rest)
            if sm is not None:
                dev["subsystem"] = sm.group("name").strip() or None
                if sm.group("vid"):
                    dev["subsystem_vendor_id"] = sm.group("vid").lower()
                    dev["subsystem_device_id"] = sm.group("did").lower()
            continue

    if not devices:
        first = first_content or 1
        if orphans:
            reason = (
                "no device header line ('BDF class: vendor device') found: the link lines cannot be tied to a "
                "device (was the output filtered with grep?); send the whole lspci -vvv output"
            )
        else:
            reason = "no device header line ('BDF class: vendor device') found; this is not lspci -vv/-vvv output"
        raise ParseError(KIND, first, lines[first - 1], reason)

    if aer_open and devices:
        warnings.append(
            f"line {aer_open}: the Advanced Error Reporting capability of {devices[-1]['bdf']} ends without its "
            "HeaderLog line at the end of the text: the capture looks cut short and the last device may be incomplete"
        )
    if orphans:
        warnings.append(
            f"{len(orphans)} link/status line(s) ({_ranges(orphans)}) have no device header of their own (the output "
            "was filtered with grep?); they are ignored"
        )
    if elided:
        warnings.append(f"line(s) {_ranges(elided)}: lines were elided ('[ ... ]'); fields there are missing")
    if skipped:
        warnings.append(f"line(s) {_ranges(skipped)}: skipped lines that are not lspci output (prompt or pcilib message)")
    if denied:
        warnings.append(
            f"{denied} device(s) show 'Capabilities: <access denied>' (lspci ran without root): their link, "
            "port type, ACS and ATS fields are missing, not wrong"
        )
    return LspciVerbose(tuple(_function(d) for d in devices), tuple(warnings))


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
