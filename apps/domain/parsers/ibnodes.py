"""Parser for ``ibswitches``, ``ibhosts`` and ``ibnodes`` (infiniband-diags), one node per line.

The three scripts filter ``ibnetdiscover`` output through awk and print one line per node
(``scripts/ibswitches.in``, ``ibhosts.in``; ``ibnodes`` prints both); ``ibnetdiscover -l``/``-S``/``-H``
print the same lines with ``devid``/``vendid`` added. The tab after the type is often lost in
pasted copies (``Ca: 0x...``)::

    Ca      : 0x0002c903000d7aac ports 1 "kube-node-100 HCA-1"
    Switch  : 0x0002c9020046c588 ports 36 "Infiniscale-IV Mellanox Technologies" base port 0 lid 2 lmc 0
    Ca      : 0xe09d730300859334 ports 1 devid 0x1021 vendid 0x2c9 "a06-p1-dgx-02-c10 HCA-1"

Kinds and their one schema (a :class:`apps.domain.parsers.fabric_common.FabricResult`, see ``_fabric``):

* ``ibswitches`` (``parse_switches``): ``switches`` only (``source`` ``"ibswitches"``); a ``Ca``
  line is an error (that text is ``ibnodes``).
* ``ibhosts`` (``parse_hosts``): ``cas`` only (``source`` ``"ibhosts"``); a ``Switch`` line is an error.
* ``ibnodes`` (``parse``): both, and routers (``Router``/``Rt`` lines, ``cas[].kind`` ``router``).

Each node has ``guid`` (its node GUID), ``name`` (the node description), ``num_ports`` and, for a
switch, ``lid``/``lmc``/``enhanced_port0``; ``ports`` and ``links`` are empty (these tools print
no links). ``devid``/``vendid`` as printed (lower case) when present. ``cas[].host`` as in ``_fabric``.

Quirks handled: discovery errors the scripts pass through (``src/query_smp.c:199; umad (DR path
...) bad status 110; Connection timed out``, ``ibwarn: ...``) become warnings: the list is then
partial; a pasted command line before the first node is skipped with a warning; a GUID listed
twice is a warning (first kept).
"""

from __future__ import annotations

import re

from apps.domain.errors import ParseError
from apps.domain.parsers.fabric_common import (
    DIAG_RE,
    CaNode,
    FabricResult,
    Switch,
    ca_kind,
    fabric_guid,
    host_of,
    is_fabric_echo,
)
from apps.domain.parsers.text import clean_lines

NODE_RE = re.compile(
    r"^\s*(Switch|Ca|Router|Rt)\s*:\s*(0x[0-9a-fA-F]{1,16})\s+ports\s+(\d+)\s+"
    r"(?:devid\s+(0x[0-9a-fA-F]+)\s+vendid\s+(0x[0-9a-fA-F]+)\s+)?\"(.*)\"(.*?)\s*$"
)
_PORT0_RE = re.compile(r"^\s*(base|enhanced)\s+port\s+0\s+lid\s+(\d+)\s+lmc\s+(\d+)\s*$")
_TYPES = {"Switch": "switch", "Ca": "ca", "Router": "router", "Rt": "router"}


def node_of(m: re.Match, no: int, line: str, kind: str) -> Switch | CaNode:
    """The record of one matched node line (``NODE_RE``); ``kind`` names errors."""
    node_type, guid_text, ports, devid, vendid, desc, tail = m.groups()
    guid = fabric_guid(guid_text)
    common = dict(num_ports=int(ports), devid=devid.lower() if devid else None,
                  vendid=vendid.lower() if vendid else None)
    if _TYPES[node_type] == "switch":
        lid = lmc = enhanced = None
        if tail.strip():
            p0 = _PORT0_RE.match(tail)
            if not p0:
                raise ParseError(kind, no, line, "expected 'base|enhanced port 0 lid N lmc N' after the switch name")
            enhanced, lid, lmc = p0.group(1) == "enhanced", int(p0.group(2)), int(p0.group(3))
        return Switch(guid=guid, name=desc, lid=lid, lmc=lmc, enhanced_port0=enhanced, **common)
    router = _TYPES[node_type] == "router"
    return CaNode(guid=guid, name=desc, host=None if router else host_of(desc), kind=ca_kind(desc, router),
                  node_guid=guid, **common)


def read_node_list(lines: list[str], kind: str, allowed: set[str], warnings: list[str]) -> FabricResult:
    """Read node-list lines (types in ``allowed``: ``switch``, ``ca``, ``router``) into a result."""
    switches: list[Switch] = []
    cas: list[CaNode] = []
    seen: set[str] = set()
    first_diag: tuple[int, str] | None = None
    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        m = NODE_RE.match(line)
        if m is None:
            if DIAG_RE.search(line):
                warnings.append(f"line {no}: discovery reported: {stripped} (the list may be partial)")
                first_diag = first_diag or (no, line)
                continue
            if not (switches or cas) and is_fabric_echo(line):
                warnings.append(f"line {no}: skipped command line {stripped!r}")
                continue
            raise ParseError(kind, no, line, "expected a node line like 'Switch : 0x<guid> ports N \"<name>\" ...'")
        node_type = _TYPES[m.group(1)]
        if node_type not in allowed:
            other = "ibnodes" if kind != "ibnodes" else "ibnetdiscover"
            raise ParseError(kind, no, line, f"a {m.group(1)} line in {kind} output (this text is {other} output)")
        node = node_of(m, no, line, kind)
        if node.guid in seen:
            warnings.append(f"line {no}: node {node.guid} listed twice; first kept")
            continue
        seen.add(node.guid)
        (switches if isinstance(node, Switch) else cas).append(node)
    if not switches and not cas:
        if first_diag:
            raise ParseError(kind, first_diag[0], first_diag[1], "discovery failed and listed no node")
        no, line = next(((n, ln) for n, ln in enumerate(lines, 1) if ln.strip()), (0, ""))
        raise ParseError(kind, no, line, "no node line found" if no else "the text is empty")
    return FabricResult(source=kind, switches=tuple(switches), cas=tuple(cas), links=(), warnings=tuple(warnings))


def parse(text: str) -> FabricResult:
    """Parse ``ibnodes`` (or ``ibnetdiscover -l``) output: switches, CAs and routers."""
    return read_node_list(clean_lines(text), "ibnodes", {"switch", "ca", "router"}, [])


def parse_switches(text: str) -> FabricResult:
    """Parse ``ibswitches`` output: switch lines only."""
    return read_node_list(clean_lines(text), "ibswitches", {"switch"}, [])


def parse_hosts(text: str) -> FabricResult:
    """Parse ``ibhosts`` output: CA lines only."""
    return read_node_list(clean_lines(text), "ibhosts", {"ca"}, [])


_DETECT_RE = re.compile(r"^\s*(Switch|Ca|Router|Rt)\s*:\s*0x[0-9a-fA-F]{1,16}\s+ports\s+\d+\s", re.M)


def _types(text: str) -> tuple[set[str], bool]:
    head = text[:6000]
    found = {_TYPES[m.group(1)] for m in _DETECT_RE.finditer(head)}
    return found, "devid 0x" in head


def detect(text: str) -> int:
    """ibnodes: switch and CA lines together (or ``ibnetdiscover -l`` lines with devid/vendid)."""
    found, listed = _types(text)
    if not found:
        return 0
    if listed or len(found) > 1:
        return 92
    return 40


def detect_switches(text: str) -> int:
    """ibswitches: switch lines only."""
    found, listed = _types(text)
    return 90 if found == {"switch"} and not listed else 0


def detect_hosts(text: str) -> int:
    """ibhosts: CA lines only."""
    found, listed = _types(text)
    return 90 if found == {"ca"} and not listed else 0
