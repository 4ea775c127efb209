"""Parse the PCI tree drawn by ``lspci -tv`` (also ``lspci -t``, ``-D``, ``-nn``).

Commands: ``lspci -D -tv`` (what the topoweb agent runs), ``lspci -tv``, ``lspci -t``. ``-D`` does
not change the tree (it always shows ``[dddd:bb]`` roots); without ``-v`` devices have no names.

How pciutils draws it (``ls-tree.c``): a host bridge prints ``-[dddd:bb]-`` (one PCI domain/root
bus) or ``-+-[dddd:bb]-`` / `` +-[dddd:bb]-`` / `` \\-[dddd:bb]-`` (several roots, in any order);
each device on a bus is ``+-DD.F`` (more follow) or ``\\-DD.F`` (last), a lone device is
``--DD.F``; a bridge appends ``-[ss-uu]-`` (secondary-subordinate bus numbers, ``-[ss]-`` when
equal) and its own bus follows on the same line; ``-v`` appends ``  <vendor> <device>`` to
non-bridge devices. Continuation lines repeat ``|`` under every still-open branch, so the column of
a ``+-``/``\\-`` says which bus the device sits on. A device's bus number is the first number of
the enclosing bridge's range (``-[54-7b]--`` -> bus ``54``), its domain the root's.

Result :class:`LspciTree`:

* ``roots``: tuple of :class:`Root` in printed order: ``id`` (``"0000:00"``), ``domain``
  (``"0000"``), ``bus`` (``"00"``), ``children`` (canonical BDFs directly on the root bus),
  ``line_no`` (1-based).
* ``devices``: flat tuple of :class:`TreeDevice` in printed order: ``bdf`` (canonical
  ``dddd:bb:dd.f``), ``name`` (text after the address with ``-v``, else ``None``; bridges have
  none), ``parent_bdf`` (the bridge above; ``None`` on a root bus or when that bridge's own bus was
  unknown, see below), ``root`` (``"0000:00"``, ``None`` inside a fragment without root),
  ``secondary_bus_range`` (``"54-7b"``/``"4b"`` for bridges, else ``None``), ``depth`` (bridges
  between the root bus and the device: 0 on the root bus), ``line_no``.
* ``warnings``: tuple of strings for everything recovered rather than read cleanly.

Variants and damaged input handled (all seen in real captures):

* Lines indented as a block (pasted from docs) and a lost or added leading space: a ``+-``/``\\-``
  one column off the branch it belongs to is attached to that branch, with one warning.
* ``+-...`` / ``...`` lines elided by an author: a warning; the devices there are missing.
* Fragments without a root line (a subtree copied out of a larger tree): the fragment's top device
  sits on an unknown bus, so it is **left out** with a warning (never guessed); devices below it are
  kept (their bus is the top bridge's range) with ``parent_bdf`` and ``root`` ``None``.
* A capture cut short (a ``+-`` never followed by its ``\\-``): a warning naming the open branch.
* A leading shell-prompt line containing ``lspci`` is skipped with a warning.

Anything else that is not tree art raises :class:`ParseError` naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.domain.errors import ParseError
from apps.domain.parsers.text import clean_lines

KIND = "lspci_tree"

__all__ = ["LspciTree", "Root", "TreeDevice", "parse", "detect"]


@dataclass(frozen=True)
class Root:
    id: str
    domain: str
    bus: str
    children: tuple[str, ...]
    line_no: int


@dataclass(frozen=True)
class TreeDevice:
    bdf: str
    name: str | None
    parent_bdf: str | None
    root: str | None
    secondary_bus_range: str | None
    depth: int
    line_no: int


@dataclass(frozen=True)
class LspciTree:
    roots: tuple[Root, ...]
    devices: tuple[TreeDevice, ...]
    warnings: tuple[str, ...]


_ROOT_RE = re.compile(r"\[(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{2})\]")
_DEV_RE = re.compile(r"([0-9a-fA-F]{2})\.([0-7])")
_RANGE_RE = re.compile(r"-\[([0-9a-fA-F]{2})(?:-([0-9a-fA-F]{2}))?\]")
_HEX = "0123456789abcdefABCDEF"

# detect(): a root tag as lspci draws it, and device branches.
_DETECT_ROOT_RE = re.compile(r"^[ \t|]*(?:-\+-|-|\+-|\\-)\[[0-9a-fA-F]{4}:[0-9a-fA-F]{2}\]-", re.MULTILINE)
_DETECT_BRANCH_RE = re.compile(r"^[ \t|]*[+\\]-[0-9a-fA-F]{2}\.[0-7](?:-\[|  |$)", re.MULTILINE)


class _Bus:
    """A bus being drawn: where its devices' addresses come from."""

    __slots__ = ("domain", "bus", "parent", "root", "depth", "lo", "hi", "root_rec")

    def __init__(self, domain, bus, parent, root, depth, lo=None, hi=None, root_rec=None):
        self.domain = domain  # "0000" or None when unknown
        self.bus = bus  # "54" or None when unknown
        self.parent = parent  # bdf of the bridge above, or None
        self.root = root  # "0000:00" or None
        self.depth = depth
        self.lo = lo  # bridge range, ints, to check children against
        self.hi = hi
        self.root_rec = root_rec  # the mutable root record (its children list) when a root bus


class _RootList:
    """The column where ``+-[dddd:bb]`` root siblings hang."""

    __slots__ = ()


_ROOT_LIST = _RootList()


class _Parser:
    def __init__(self, lines: list[str]):
        self.lines = lines
        self.cols: dict[int, list] = {}  # column -> [context, open?, line_no]
        self.roots: list[dict] = []
        self.devices: list[TreeDevice] = []
        self.seen: set[str] = set()
        self.warnings: list[str] = []
        self.misaligned: list[int] = []
        self.line_no = 0
        self.line = ""

    def fail(self, reason: str):
        raise ParseError(KIND, self.line_no, self.line, reason)

    # -- columns -------------------------------------------------------------------------
    def _register(self, col: int, ctx, marker: str) -> None:
        for c in [c for c in self.cols if c >= col]:
            del self.cols[c]
        self.cols[col] = [ctx, marker == "+", self.line_no]

    def _lookup(self, col: int, marker: str):
        for c in (col, col + 1, col - 1):
            entry = self.cols.get(c)
            if entry is not None:
                if c != col:
                    self.misaligned.append(self.line_no)
                for d in [d for d in self.cols if d > c]:
                    del self.cols[d]
                entry[1] = marker == "+"
                entry[2] = self.line_no
                return entry[0], c
        return None, col

    # -- grammar -------------------------------------------------------------------------
    def parse_line(self, line_no: int, line: str) -> None:
        self.line_no, self.line = line_no, line
        n = len(line)
        pos = 0
        while pos < n and line[pos] in " |\t":
            pos += 1
        if pos >= n:
            return
        two = line[pos : pos + 2]
        if two in ("+-", "\\-"):
            ctx, col = self._lookup(pos, two[0])
            if ctx is None:
                if line.startswith("[", pos + 2):
                    ctx = _ROOT_LIST
                else:
                    ctx = _Bus(None, None, None, None, 0)
                self._register(pos, ctx, two[0])
            self.item(pos + 2, ctx)
            return
        if line[pos] == "-":
            # first line of a tree: '-[dddd:bb]-...' (one root) or '-+-[dddd:bb]-...' (several)
            p = pos + 1
            if line.startswith("[", p):
                self.item(p, _ROOT_LIST)
                return
            if line[p : p + 2] in ("+-", "\\-") and line.startswith("[", p + 2):
                self._register(p, _ROOT_LIST, line[p])
                self.item(p + 2, _ROOT_LIST)
                return
        if line.strip() in ("...", "[...]", "[ ... ]"):
            self.warnings.append(f"line {line_no}: lines were elided here ('{line.strip()}'); devices there are missing")
            return
        self.fail("expected lspci -t tree art ('-[0000:00]-+-00.0', '+-01.0', '\\-1f.3') at this line")

    def item(self, p: int, ctx) -> None:
        line = self.line
        if line.startswith("...", p):
            self.warnings.append(f"line {self.line_no}: lines were elided here ('+-...'); devices there are missing")
            return
        if line.startswith("[", p):
            m = _ROOT_RE.match(line, p)
            if not m:
                self.fail("malformed root bus tag; expected '[dddd:bb]'")
            domain = _domain(m.group(1))
            bus = m.group(2).lower()
            rid = f"{domain}:{bus}"
            parent = ctx.parent if isinstance(ctx, _Bus) else None
            rec = {"id": rid, "domain": domain, "bus": bus, "children": [], "line_no": self.line_no}
            if ctx is _ROOT_LIST or not isinstance(ctx, _Bus) or ctx.bus is None:
                self.roots.append(rec)
                bus_ctx = _Bus(domain, bus, None, rid, 0, root_rec=rec)
            else:  # a bridge whose range spans several buses drawn as '[dddd:bb]' (rare)
                bus_ctx = _Bus(domain, bus, parent, ctx.root, ctx.depth)
            self.after_bus(m.end(), bus_ctx)
            return
        m = _DEV_RE.match(line, p)
        if not m:
            self.fail("expected a device address 'DD.F' after the branch")
        if not isinstance(ctx, _Bus):
            self.fail("a device is drawn where only root buses '[dddd:bb]' may hang")
        dev, fn = m.group(1).lower(), m.group(2)
        q = m.end()
        bdf = None
        if ctx.bus is not None:
            bdf = f"{ctx.domain}:{ctx.bus}:{dev}.{fn}"
        rm = _RANGE_RE.match(line, q)
        if rm:
            sec = rm.group(1).lower()
            sub = (rm.group(2) or rm.group(1)).lower()
            rng = sec if rm.group(2) is None else f"{sec}-{sub}"
            lo, hi = int(sec, 16), int(sub, 16)
            if hi < lo:
                self.warnings.append(f"line {self.line_no}: bridge {dev}.{fn} has a reversed bus range [{rng}]")
            if ctx.lo is not None and not (ctx.lo <= lo and hi <= ctx.hi):
                self.warnings.append(
                    f"line {self.line_no}: bridge {dev}.{fn} range [{rng}] lies outside its parent's bus range"
                )
            self.add(bdf, None, ctx, rng, dev, fn)
            # In a fragment without a root line the domain is not drawn: 0000 is assumed (and said in
            # the warning add() records for the fragment's top device).
            child = _Bus(ctx.domain or "0000", sec, bdf, ctx.root, ctx.depth + 1, lo, hi)
            self.after_bus(rm.end(), child)
            return
        rest = line[q:]
        name = None
        if rest.strip():
            if not rest[:1].isspace():
                self.fail(f"unexpected text after device address {dev}.{fn}")
            name = rest.strip()
        self.add(bdf, name, ctx, None, dev, fn)

    def after_bus(self, q: int, bus: _Bus) -> None:
        line = self.line
        n = len(line)
        while q < n and line[q] == "-":
            q += 1
        if q >= n or not line[q:].strip():
            return  # empty bus ('-[4b]--') or empty root ('\-[0000:00]-')
        two = line[q : q + 2]
        if two in ("+-", "\\-"):
            self._register(q, bus, two[0])
            self.item(q + 2, bus)
            return
        if line[q] in _HEX or line.startswith("...", q):
            self.item(q, bus)
            return
        self.fail("expected '+-', '\\-' or a device address after the bus")

    def add(self, bdf, name, ctx: _Bus, rng, dev, fn) -> None:
        if bdf is None:
            self.warnings.append(
                f"line {self.line_no}: device {dev}.{fn} has no enclosing root or bridge line (a fragment, or lines "
                "above were elided), so its bus number is unknown; it is left out (devices below it keep their "
                "addresses, in domain 0000 unless a root line said otherwise, with no parent)"
            )
            return
        if bdf in self.seen:
            self.warnings.append(f"line {self.line_no}: {bdf} appears twice; the first one is kept")
            return
        self.seen.add(bdf)
        if ctx.root_rec is not None:
            ctx.root_rec["children"].append(bdf)
        self.devices.append(TreeDevice(bdf, name, ctx.parent, ctx.root, rng, ctx.depth, self.line_no))

    def finish(self) -> LspciTree:
        open_lines = sorted({entry[2] for entry in self.cols.values() if entry[1]})
        if open_lines:
            self.warnings.append(
                "the tree ends while branches opened with '+-' at line(s) "
                + ", ".join(map(str, open_lines))
                + " still expect more devices: the capture looks cut short"
            )
        if self.misaligned:
            self.warnings.append(
                f"{len(self.misaligned)} line(s) ({_ranges(self.misaligned)}) draw their branch one column off the "
                "branch above (a leading space lost or added when copied); attached to that branch"
            )
        roots = tuple(Root(r["id"], r["domain"], r["bus"], tuple(r["children"]), r["line_no"]) for r in self.roots)
        return LspciTree(roots, tuple(self.devices), tuple(self.warnings))


def _domain(text: str | None) -> str:
    """Domain as 4 hex digits; wider ones (Intel VMD uses 10000+) keep all their digits."""
    value = int(text, 16) if text else 0
    return f"{value:04x}"


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


def parse(text: str) -> LspciTree:
    """Parse ``lspci -tv`` / ``lspci -t`` output into roots and a flat device list (module docstring)."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the lspci -t output is empty")
    p = _Parser(lines)
    started = False
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if not started and "lspci" in line and not _looks_like_art(line):
            p.warnings.append(f"line {i}: skipped the command line {line.strip()[:80]!r}")
            continue
        started = True
        p.parse_line(i, line.rstrip())
    if not started:
        raise ParseError(KIND, 0, "", "no tree lines found after the command line")
    if not p.devices and not p.roots:
        raise ParseError(KIND, 1, lines[0], "no PCI device could be read from this tree")
    return p.finish()


def _looks_like_art(line: str) -> bool:
    s = line.lstrip(" |\t")
    return s.startswith(("-[", "-+-[", "+-", "\\-"))


def detect(text: str) -> int:
    """Score ``text`` as ``lspci -t`` output: 95 with a ``[dddd:bb]`` root tag, 60 for bare branches."""
    head = text[:4000]
    if _DETECT_ROOT_RE.search(head):
        return 95
    if len(_DETECT_BRANCH_RE.findall(head)) >= 2:
        return 60
    return 0
