"""Parser for ``iblinkinfo`` (infiniband-diags): every port of every node, with width, speed and state.

Commands::

    iblinkinfo            # one block per node: "CA: <name>:" / "Switch: 0x<guid> <name>:", a line per port
    iblinkinfo -l         # line mode: one line per port, each with both GUIDs and the node name
    iblinkinfo -p         # the same as the default with " (HOQ:N VL_Stall:N)" after each link
    iblinkinfo | grep Up  # filtered copies: port lines without their headers (read as far as they go)

Layout (iblinkinfo.c ``print_node_header``/``print_port``; a CA port line starts with the port
GUID, a switch port line with the switch's LID; the far end is LID, port, description and the
``Could be ...`` notes of ibdiag_common.c ``get_max_msg``)::

    CA: teaker-9 HCA-1:
          0xf45214030091ba51      6    1[  ] ==( 4X          10.0 Gbps Active/  LinkUp)==>       2    3[  ] "Infiniscale-IV Mellanox Technologies" ( )
    Switch: 0x0002c902004b2678 Infiniscale-IV Mellanox Technologies:
               2    1[  ] ==( 4X          10.0 Gbps Active/  LinkUp)==>       3    1[  ] "teaker-11 HCA-1" ( )
               2    8[  ] ==(                Down/ Polling)==>             [  ] "" ( )
               2   21[  ] ==( 1X      53.125 Gbps Active/  LinkUp)==>      19    5[  ] "sw2" (Could be 4X Could be 106.25 Gbps)

Result: one :class:`apps.domain.parsers.fabric_common.FabricResult`, whose JSON is the contract (every
field is described in ``_fabric``'s docstring)::

    {"source": "iblinkinfo" | "iblinkinfo -l", "initiated_from": null,
     "switches": [{"guid", "name", "lid", "ports": [PORT], ...}],       # num_ports, devid...: null here
     "cas": [{"guid", "name", "host", "kind", "alias", "ports": [PORT], ...}],
     "links": [{"a": END, "b": END, "width", "speed", "state", "could_be_width", "could_be_speed"}],
     "warnings": [str]}
    PORT = {"port", "state", "phys_state", "width", "speed", "lane_gbps", "lid", "port_guid",
            "could_be_width", "could_be_speed", "peer": END | null};  END = {"guid", "port", "lid", "name"}

Every printed port is kept, down ones too (``state`` ``Down``, ``phys_state`` ``Polling``/``Disabled``,
no ``peer``). iblinkinfo names far ends by LID:
they are resolved to the node that owns that LID in the same output (a switch's LID on its port
lines, a CA port's on its own); a far end whose LID no block owns (a cut or filtered output) keeps
``guid`` null with its LID and name, with a warning. ``lane_gbps`` is the per-lane rate as printed
and ``speed`` its generation (``25.78125`` -> ``EDR``; ``10.0 Gbps (FDR10)`` -> ``FDR10``; the
rate table of ``apps.domain.bandwidth``).

Variants and quirks handled:

* CA blocks in traversal order, not all before the switches; dual-port CAs (two port lines under
  one ``CA:``); switchless fabrics (CAs cabled back to back).
* Filtered copies (``| grep Up``): port lines without headers; a CA is then known by its port GUID
  and a switch by its LID, named from what the far ends print. An ``...`` line (elided by the
  person who pasted) is skipped with a warning.
* A CA whose own block and its peer print different names (renamed between runs, or a node-name
  map): the block's name is kept, the other is its ``alias``.
* ``Could be 4X`` / ``Could be 14.0625 Gbps`` / ``Could be FDR10 (...)``: ``could_be_width`` /
  ``could_be_speed`` of the port and of its link.
"""

from __future__ import annotations

import re

from apps.domain.bandwidth import ib_speed_from_lane
from apps.domain.errors import ParseError
from apps.domain.parsers.fabric_common import (
    DIAG_RE,
    CaNode,
    End,
    FabricPort,
    FabricResult,
    Link,
    Switch,
    ca_kind,
    dedupe_links,
    fabric_guid,
    host_of,
    is_fabric_echo,
    paused_gc,
    width_of,
)
from apps.domain.parsers._ib import normalise_phys_state, normalise_state
from apps.domain.parsers.text import clean_lines

KIND = "iblinkinfo"

_HEADER_RE = re.compile(r"^\s*(CA|Switch|Router)\s*:\s*(?:(0x[0-9a-fA-F]{1,16})\s+)?(.*?):?\s*$")
_PORT_RE = re.compile(
    r"^\s*(?:(0x[0-9a-fA-F]{1,16})\s+(?:\"(.*?)\"\s+)?)?(\d+)\s+(\d+)\[\s*(\d*)\s*\]\s*"
    r"==\((.*?)\)(?:\s*\(HOQ:\d+ VL_Stall:\d+\))?==>\s*(.*?)\s*$"
)
_LINK_RE = re.compile(r"^\s*(?:(\d+X)\s+(\d+(?:\.\d+)?)\s+Gbps(\s*\(FDR10\))?\s+)?(\S+)\s*/\s*(\S+)\s*$")
_REMOTE_RE = re.compile(r"^(?:(0x[0-9a-fA-F]{1,16})\s+)?(\d+)\s+(\d+)\[\s*(\d*)\s*\]\s+\"(.*)\"\s*\((.*)\)$")
_DOWN_REMOTE_RE = re.compile(r'^\[\s*\]\s+""\s+\(\s*\)$')
_COULD_RE = re.compile(r"Could be (\d+X|FDR10|\d+(?:\.\d+)?\s*Gbps)")
_TYPES = {"CA": "ca", "Switch": "switch", "Router": "router"}


def _could_be(text: str) -> tuple[str | None, str | None]:
    width = speed = None
    for token in _COULD_RE.findall(text):
        if token.endswith("X"):
            width = token
        elif token == "FDR10":
            speed = "FDR10"
        else:
            speed = ib_speed_from_lane(float(token.split()[0]))
    return width, speed


def _link_fields(inner: str, no: int, line: str) -> dict:
    m = _LINK_RE.match(inner)
    if m is None:
        raise ParseError(KIND, no, line, "link field not like '( 4X 25.78125 Gbps Active/ LinkUp)'")
    width, lane, fdr10, state, phys = m.groups()
    lane_gbps = float(lane) if lane else None
    speed = "FDR10" if fdr10 else ib_speed_from_lane(lane_gbps)
    return {"width": width_of(width), "lane_gbps": lane_gbps, "speed": speed,
            "state": normalise_state(state) or state, "phys_state": normalise_phys_state(phys) or phys}


def _remote(text: str, no: int, line: str) -> tuple[dict | None, str | None, str | None]:
    """(far end {guid, lid, port, name} or None, could_be_width, could_be_speed)."""
    if _DOWN_REMOTE_RE.match(text) or text == '"Port not available"':
        return None, None, None
    m = _REMOTE_RE.match(text)
    if m is None:
        raise ParseError(KIND, no, line, "far end not like '<lid> <port>[  ] \"<name>\" ( )'")
    guid, lid, port, _ext, name, notes = m.groups()
    width, speed = _could_be(notes)
    return {"guid": fabric_guid(guid) if guid else None, "lid": int(lid), "port": int(port), "name": name}, width, speed


def _new_node(node_type: str, guid: str | None, name: str | None, no: int) -> dict:
    return {"type": node_type, "guid": guid, "name": name, "lid": None, "ports": [], "line_no": no}


def _read(lines: list[str], warnings: list[str]) -> tuple[list[dict], bool]:
    """Nodes (dicts with raw port rows) in order, and whether the text was in line mode."""
    nodes: list[dict] = []
    node: dict | None = None
    line_mode = False
    headerless: dict[tuple, dict] = {}
    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        m = _HEADER_RE.match(line) if stripped[0] in "CSR" else None
        if m:
            node = _new_node(_TYPES[m.group(1)], fabric_guid(m.group(2)) if m.group(2) else None, m.group(3), no)
            nodes.append(node)
            continue
        m = _PORT_RE.match(line)
        if m:
            guid, line_name, lid, port, _ext, inner, rest = m.groups()
            row = {"no": no, "lid": int(lid), "port": int(port), **_link_fields(inner, no, line)}
            row["remote"], row["could_be_width"], row["could_be_speed"] = _remote(rest, no, line)
            if line_name is not None:  # line mode: every line names its node
                line_mode = True
                key = ("line", fabric_guid(guid))
                owner = headerless.get(key)
                if owner is None:
                    owner = headerless[key] = _new_node("unknown", fabric_guid(guid), line_name.strip(), no)
                    nodes.append(owner)
                row["port_guid"] = fabric_guid(guid)
                owner["ports"].append(row)
                continue
            if guid is not None:  # a CA port (switch port lines carry no GUID)
                row["port_guid"] = fabric_guid(guid)
                if node is None or node["type"] == "switch":
                    owner = _new_node("ca", None, None, no)  # headerless: a filtered copy
                    nodes.append(owner)
                else:
                    owner = node
            else:
                if node is None or node["type"] != "switch":
                    key = ("switch-lid", int(lid))
                    owner = headerless.get(key)
                    if owner is None:
                        owner = headerless[key] = _new_node("switch", None, None, no)
                        nodes.append(owner)
                else:
                    owner = node
            owner["ports"].append(row)
            continue
        if stripped in ("...", "\u2026"):
            warnings.append(f"line {no}: '...' (lines left out by whoever copied the output)")
            continue
        if DIAG_RE.search(line):
            warnings.append(f"line {no}: discovery reported: {stripped} (the listing may be partial)")
            continue
        if not nodes and is_fabric_echo(line):
            warnings.append(f"line {no}: skipped command line {stripped!r}")
            continue
        raise ParseError(KIND, no, line, "unrecognised line in iblinkinfo output")
    if not any(n["ports"] for n in nodes):
        no, line = next(((n, ln) for n, ln in enumerate(lines, 1) if ln.strip()), (0, ""))
        raise ParseError(KIND, no, line, "no port line ('... ==( 4X ... )==> ...') found: this is not iblinkinfo output"
                         if no else "the text is empty")
    if headerless and not line_mode:
        warnings.append("port lines without their 'CA:'/'Switch:' headers (output filtered, e.g. '| grep Up'): "
                        "nodes are known by port GUID or LID only")
    return nodes, line_mode


def _settle_line_mode(nodes: list[dict]) -> None:
    """Line mode prints no node types: a GUID on several port lines (all ports share the switch's) is a switch."""
    for n in nodes:
        if n["type"] == "unknown":
            n["type"] = "switch" if len({r["port"] for r in n["ports"]}) > 1 or any(
                r["port"] > 2 for r in n["ports"]) else "ca"


def _identify(nodes: list[dict]) -> tuple[dict, dict]:
    """Set each node's guid/lid; return LID owners: switch lid -> node, CA port lid -> (node, port)."""
    switch_lids: dict[int, dict] = {}
    port_lids: dict[int, tuple[dict, int]] = {}
    for n in nodes:
        if n["type"] == "switch":
            n["lid"] = n["ports"][0]["lid"] if n["ports"] else None
            if n["lid"]:
                switch_lids[n["lid"]] = n
            if n["guid"] is None and n["ports"] and n["ports"][0].get("port_guid"):
                n["guid"] = n["ports"][0]["port_guid"]
        else:
            if n["guid"] is None and n["ports"]:
                n["guid"] = n["ports"][0].get("port_guid")
            for r in n["ports"]:
                if r["lid"]:
                    port_lids[r["lid"]] = (n, r["port"])
    return switch_lids, port_lids


def _resolve(remote: dict, switch_lids: dict, port_lids: dict) -> tuple[dict | None, End]:
    lid, port, name = remote["lid"], remote["port"], remote["name"]
    owner = switch_lids.get(lid) if lid else None
    if owner is None and lid and lid in port_lids:
        owner = port_lids[lid][0]
    if owner is None and remote["guid"]:
        return None, End(remote["guid"], port, lid, name)
    return owner, End(owner["guid"] if owner else None, port, lid, name)


def _name_from_peers(nodes: list[dict], switch_lids: dict, port_lids: dict, warnings: list[str]) -> None:
    """Fill names the text does not print (headerless nodes) and aliases from what peers call a node."""
    for n in nodes:
        for r in n["ports"]:
            remote = r["remote"]
            if remote is None:
                continue
            owner, _end = _resolve(remote, switch_lids, port_lids)
            if owner is None:
                continue
            if owner["name"] is None:
                owner["name"] = remote["name"]
            elif owner["name"] != remote["name"] and "alias" not in owner:
                owner["alias"] = remote["name"]
                if owner["type"] != "switch":
                    warnings.append(f"{owner['guid']} is {owner['name']!r} in its own block but {remote['name']!r} "
                                    "to its peer (renamed, or a node-name map); kept as alias")


def _records(nodes: list[dict], switch_lids: dict, port_lids: dict, warnings: list[str]):
    switches, cas, links = [], [], []
    unresolved: set[tuple] = set()
    for n in nodes:
        ports = []
        for r in n["ports"]:
            peer = None
            if r["remote"] is not None:
                owner, peer = _resolve(r["remote"], switch_lids, port_lids)
                if owner is None and peer.guid is None and (peer.lid, peer.port) not in unresolved:
                    unresolved.add((peer.lid, peer.port))
                    warnings.append(f"line {r['no']}: no block owns LID {peer.lid} ({peer.name!r}): far end kept by "
                                    "LID only (output cut or filtered?)")
                local = End(n["guid"], r["port"], r["lid"], n["name"])
                links.append(Link(local, peer, r["width"], r["speed"], r["state"], r["could_be_width"],
                                  r["could_be_speed"]))
            ports.append(FabricPort(port=r["port"], state=r["state"], phys_state=r["phys_state"], width=r["width"],
                                    speed=r["speed"], lane_gbps=r["lane_gbps"], lid=r["lid"],
                                    port_guid=None if n["type"] == "switch" else r.get("port_guid"),
                                    could_be_width=r["could_be_width"], could_be_speed=r["could_be_speed"],
                                    peer=peer))
        if n["type"] == "switch":
            switches.append(Switch(guid=n["guid"], name=n["name"], lid=n["lid"], ports=tuple(ports)))
        else:
            router = n["type"] == "router"
            cas.append(CaNode(guid=n["guid"], name=n["name"], host=None if router else host_of(n["name"]),
                              kind=ca_kind(n["name"], router), alias=n.get("alias"), ports=tuple(ports)))
    return tuple(switches), tuple(cas), links


def parse(text: str) -> FabricResult:
    """Parse ``iblinkinfo`` output (default, ``-l`` line mode, ``-p``, or a filtered copy)."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    with paused_gc():
        return _parse_lines(lines)


def _parse_lines(lines: list[str]) -> FabricResult:
    warnings: list[str] = []
    nodes, line_mode = _read(lines, warnings)
    nodes = [n for n in nodes if n["ports"] or n["guid"]]
    if line_mode:
        _settle_line_mode(nodes)
    switch_lids, port_lids = _identify(nodes)
    _name_from_peers(nodes, switch_lids, port_lids, warnings)
    switches, cas, links = _records(nodes, switch_lids, port_lids, warnings)
    return FabricResult(source=f"{KIND} -l" if line_mode else KIND, switches=switches, cas=cas,
                        links=dedupe_links(links, warnings), warnings=tuple(warnings))


_DETECT_RE = re.compile(r"\d+\[\s*\d*\s*\]\s*==\(.*\)==>", re.M)


def detect(text: str) -> int:
    """Score iblinkinfo output: port lines ``<lid> <port>[  ] ==( ... )==> ...``."""
    head = text[:6000]
    if not _DETECT_RE.search(head):
        return 0
    score = 80
    if re.search(r"^\s*(?:CA|Switch)\s*:", head, re.M):
        score += 15
    return score
