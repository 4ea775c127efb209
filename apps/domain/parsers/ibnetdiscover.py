"""Parser for ``ibnetdiscover`` (infiniband-diags): the default topology, ``-p`` ports report, ``-l`` list.

Commands::

    ibnetdiscover                    # topology: one block per node, one line per linked port
    ibnetdiscover --node-name-map F  # the same, peers and switches named from the map
    ibnetdiscover -f                 # the same, " s=N w=N v=N" after each port line
    ibnetdiscover -p                 # ports report: one line per port of every node
    ibnetdiscover -l | -S | -H       # node lists: read as ibnodes (see that module)

Topology layout (ibnetdiscover.c ``out_switch``/``out_switch_port``/``out_ca``/``out_ca_port``; tabs,
often spaces in pasted copies; node GUIDs in ``"S-<16 hex>"``/``"H-<16 hex>"`` names, port GUIDs
in parentheses without ``0x`` and without leading zeros)::

    # Initiated from node e09d730300156ff6 port e09d730300156ff6
    vendid=0x2c9
    devid=0xd2f2
    sysimgguid=0x2c5eab0300b87b40
    switchguid=0x2c5eab0300b87b40(2c5eab0300b87b40)
    Switch  65 "S-2c5eab0300b87b40"   # "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" enhanced port 0 lid 73 lmc 0
    [1]     "H-e09d7303007a4bd8"[1](e09d7303007a4bd8)   # "a08-p1-dgx-04-c01 mlx5_5" lid 647 4xNDR
    [35]    "S-2c5eab0300c26280"[32]                    # "MF0;A10-P1-IBSPINE-02:MQM9701/U1" lid 236 4xNDR

    vendid=0x2c9
    devid=0x1021
    caguid=0xe09d730300859334
    Ca      1 "H-e09d730300859334"    # "a06-p1-dgx-02-c10 HCA-1"
    [1](e09d730300859334)   "S-2c5eab0300b87a80"[10]    # lid 500 lmc 0 "MF0;A09-P1-IBLEAF-01-02:MQM9701/U1" lid 120 4xNDR

Ports report layout (``dump_ports_report``)::

    CA    44  1 0x0002c903000d7aad 4x QDR - SW     2 17 0x0002c9020046c588 ( 'node1 HCA-1' - 'sw1' )
    SW     2 19 0x0002c9020046c588 4x SDR                                    'sw1'

Result: one :class:`apps.domain.parsers.fabric_common.FabricResult`, whose JSON is the contract (every
field is described in ``_fabric``'s docstring)::

    {"source": "ibnetdiscover" | "ibnetdiscover -p" | "ibnetdiscover -l",
     "initiated_from": {"node_guid", "port_guid"} | null,       # header comment, topology form only
     "switches": [{"guid", "name", "num_ports", "lid", "lmc", "enhanced_port0", "devid", "vendid",
                   "system_image_guid", "ports": [PORT]}],
     "cas": [{"guid", "name", "host", "kind", "alias", "node_guid", "num_ports", "devid", "vendid",
              "system_image_guid", "ports": [PORT]}],
     "links": [{"a": END, "b": END, "width", "speed", "state", "could_be_width", "could_be_speed"}],
     "warnings": [str]}
    PORT = {"port", "state", "phys_state", "width", "speed", "lane_gbps", "lid", "port_guid",
            "could_be_width", "could_be_speed", "peer": END | null};  END = {"guid", "port", "lid", "name"}

GUIDs are ``0x`` + 16 lower-case hex digits; ``width`` ``4X``, ``speed`` ``NDR``; each link once. Ports are those
printed (the topology form lists linked ports only); ibnetdiscover prints no port state, so
``state``/``phys_state`` are null. The ports report prints port GUIDs only: there a CA is one
record per port GUID (``node_guid`` null).

Variants and quirks handled:

* GUIDs with and without ``0x``, short (``switchguid=0xb8cffff0053ee(b8cffff0053ee)``, 2009
  captures) or upper case: all normalised (``_fabric.fabric_guid``).
* Node-name maps: peers are printed with the map's names, a CA's own line with its description;
  the peers' name is kept as ``alias``.
* Discovery errors printed before or among the blocks (``src/query_smp.c:199; umad (DR path ...)
  bad status 110; Connection timed out``, ``ibwarn: [pid] mad_rpc: _do_madrpc failed; ...``):
  warnings; the result is then partial. A peer named by a port line but without a block of its
  own (a node that stopped answering) is recorded from what its peers say, with a warning.
* ``-g`` grouping lines (``Chassis N``, ``# Spine Nodes``, ``Non-Chassis Nodes``, ``Hostname:``),
  ``[ext N]`` external port numbers and ``-f`` tails are read and ignored.
* A CA with no port lines (run from a CA whose port is not linked): kept, with a warning.
* Width/speed ``??``/``???`` (a speed the tool does not know): null, with a warning.
"""

from __future__ import annotations

import re

from apps.domain.errors import ParseError
from apps.domain.parsers import ibnodes
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
    speed_of,
    width_of,
)
from apps.domain.parsers.text import clean_lines

KIND = "ibnetdiscover"

_HEX = r"[0-9a-fA-F]{1,16}"
_ID_KEYS = {"vendid", "devid", "sysimgguid", "switchguid", "caguid", "rtguid"}
_ID_VALUE_RE = re.compile(rf"^\s*(0x{_HEX}|{_HEX})(?:\({_HEX}\))?\s*(?:#.*)?$")
_NODE_RE = re.compile(rf'^\s*(Switch|Ca|Rt)\s+(\d+)\s+"([SHR?])-({_HEX})"\s*(?:#\s*"(.*)"(.*))?$')
_PORT0_RE = re.compile(r"^\s*(base|enhanced)\s+port\s+0\s+lid\s+(\d+)\s+lmc\s+(\d+)")
_PORT_RE = re.compile(
    rf'^\s*\[(\d+)\](?:\[ext \d+\])?(?:\(({_HEX})\))?\s*"([SHR?])-({_HEX})"\[(\d+)\](?:\[ext \d+\])?\s*'
    rf'(?:\(({_HEX})\))?\s*#\s*(?:lid (\d+) lmc (\d+) )?"(.*)"\s+lid\s+(\d+)\s+(\S+)(.*)$'
)
_LINKSPEED_RE = re.compile(r"^(\d+x|\?\?)(.+)$", re.I)
_INIT_RE = re.compile(rf"^#\s*Initiated from node\s+({_HEX})\s+port\s+({_HEX})\s*$")
_GROUPING_RE = re.compile(r"^\s*(?:Chassis\s+\d+|Non-Chassis Nodes|Hostname:)")
_PTYPE = {"S": "switch", "H": "ca", "R": "router", "?": "ca"}
_NTYPE = {"Switch": "switch", "Ca": "ca", "Rt": "router"}
_PORTS_RE = re.compile(
    r"^\s*(SW|CA|RT|\?\?)\s+(\d+)\s+(\d+)\s+(0x[0-9a-fA-F]{16})\s+(\S+)\s+(\S+)"
    r"(?:\s+-\s+(SW|CA|RT|\?\?)\s+(\d+)\s+(\d+)\s+(0x[0-9a-fA-F]{16})\s+\(\s*'(.*)'\s+-\s+'(.*)'\s*\)|\s+'(.*)')\s*$"
)
_RTYPE = {"SW": "switch", "CA": "ca", "RT": "router", "??": "ca"}


def _node(node_type: str, guid: str, line_no: int, **fields) -> dict:
    return {"type": node_type, "guid": guid, "line_no": line_no, "ports": {}, "name": None, **fields}


_LINKSPEEDS: dict[str, tuple[str | None, str | None]] = {}


def _width_speed(token: str, no: int, warnings: list[str]) -> tuple[str | None, str | None]:
    """``4xNDR`` -> ``("4X", "NDR")``; a token the tools' tables do not know is a warning (once per token and text)."""
    known = _LINKSPEEDS.get(token)
    if known is None:
        m = _LINKSPEED_RE.match(token)
        known = (width_of(m.group(1)), speed_of(m.group(2))) if m else (None, None)
        if len(_LINKSPEEDS) < 256:
            _LINKSPEEDS[token] = known
    if known[0] is None or known[1] is None:
        note = f"link width/speed {token!r} not known (kept as unknown)"
        if not any(w.endswith(note) for w in warnings):
            warnings.append(f"line {no}: {note}")
    return known


def _id_value(text: str) -> str | None:
    """``0x2c5eab0300b87b40(2c5eab0300b87b40)`` / ``0x2c9`` (maybe a ``# Chassis`` comment after) -> the number."""
    m = _ID_VALUE_RE.match(text)
    return m.group(1) if m else None


def _link_key(guid: str, port: int, peer_guid: str, peer_port: int) -> tuple:
    if guid < peer_guid or (guid == peer_guid and port <= peer_port):
        return (guid, port, peer_guid, peer_port)
    return (peer_guid, peer_port, guid, port)


def _header(m: re.Match, ids: dict, no: int, line: str) -> dict:
    ntype, nports, _prefix, hexguid, desc, tail = m.groups()
    guid = fabric_guid(hexguid)
    own = ids.get("switchguid") or ids.get("caguid") or ids.get("rtguid")
    node = _node(_NTYPE[ntype], guid, no, name=desc, num_ports=int(nports), devid=ids.get("devid"),
                 vendid=ids.get("vendid"), sysimg=ids.get("sysimgguid"), id_guid=own)
    if node["type"] == "switch" and tail:
        p0 = _PORT0_RE.match(tail)
        if p0:
            node.update(enhanced=p0.group(1) == "enhanced", lid=int(p0.group(2)), lmc=int(p0.group(3)))
    return node


def _read_topology(lines: list[str], warnings: list[str]) -> dict:
    """One pass over the topology text: nodes, links (each once, keyed by its two ends), what peers say."""
    nodes: dict[str, dict] = {}
    links: dict[tuple, Link] = {}
    peer_types: dict[str, str] = {}  # GUID -> node type, as the peers' "S-"/"H-" names say
    peer_port_guids: dict[tuple[str, int], str] = {}  # (CA GUID, port) -> port GUID, as its peers print it
    ids: dict[str, str] = {}
    node: dict | None = None
    initiated: dict | None = None
    first_diag: tuple[int, str] | None = None
    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        head = stripped[0]
        if head == "[":
            m = _PORT_RE.match(line)
            if m is None:
                raise ParseError(KIND, no, line, "port line not like '[N] \"S-<guid>\"[M] # \"<name>\" lid L 4xNDR'")
            if node is None:
                raise ParseError(KIND, no, line, "port line before any Switch/Ca line")
            (port_s, local_pg, ptype, peer_hex, peer_port_s, peer_pg, local_lid, _lmc, peer_name, peer_lid, token,
             _tail) = m.groups()
            width, speed = _width_speed(token, no, warnings)
            port, peer_port, guid, peer_guid = int(port_s), int(peer_port_s), node["guid"], fabric_guid(peer_hex)
            lid = int(local_lid) if local_lid is not None else node.get("lid")
            peer = End(peer_guid, peer_port, int(peer_lid), peer_name)
            if port in node["ports"]:
                warnings.append(f"line {no}: port {port} of {guid} listed twice; last kept")
            node["ports"][port] = FabricPort(port, None, None, width, speed, None, lid,
                                             fabric_guid(local_pg) if local_pg else None, None, None, peer)
            peer_types[peer_guid] = _PTYPE[ptype]
            if peer_pg:
                peer_port_guids[(peer_guid, peer_port)] = fabric_guid(peer_pg)
            key = _link_key(guid, port, peer_guid, peer_port)
            first = links.get(key)
            if first is None:
                links[key] = Link(End(guid, port, lid, node["name"]), peer, width, speed)
            elif (first.width != width or first.speed != speed) and None not in (width, speed, first.width,
                                                                                 first.speed):
                warnings.append(f"line {no}: the two ends of {guid}[{port}] - {peer_guid}[{peer_port}] disagree on "
                                f"width/speed ({first.width} {first.speed} vs {width} {speed}); first kept")
            continue
        if head == "#":
            im = _INIT_RE.match(stripped)
            if im:
                initiated = {"node_guid": fabric_guid(im.group(1)), "port_guid": fabric_guid(im.group(2))}
            continue
        key_name, eq, value = stripped.partition("=")
        if eq and key_name.strip() in _ID_KEYS:
            value = _id_value(value)
            if value is None:
                raise ParseError(KIND, no, line, f"'{key_name.strip()}=' is not followed by a hex number")
            key_name = key_name.strip()
            if key_name == "vendid":
                ids = {}
            ids[key_name] = value.lower() if key_name in ("vendid", "devid") else fabric_guid(value)
            continue
        m = _NODE_RE.match(line) if head in "SCR" else None
        if m:
            node = _header(m, ids, no, line)
            ids = {}
            if node["id_guid"] and node["id_guid"] != node["guid"]:
                warnings.append(f"line {no}: the node's guid line says {node['id_guid']}, its name {node['guid']}")
            if node["guid"] in nodes:
                warnings.append(f"line {no}: node {node['guid']} has two blocks; the first is kept")
                node = nodes[node["guid"]]
            else:
                nodes[node["guid"]] = node
            continue
        if DIAG_RE.search(line):
            warnings.append(f"line {no}: discovery reported: {stripped} (the topology may be partial)")
            first_diag = first_diag or (no, line)
            continue
        if _GROUPING_RE.match(line):
            continue
        if not nodes and is_fabric_echo(line):
            warnings.append(f"line {no}: skipped command line {stripped!r}")
            continue
        raise ParseError(KIND, no, line, "unrecognised line in ibnetdiscover output")
    if not nodes:
        if first_diag:
            raise ParseError(KIND, first_diag[0], first_diag[1], "discovery failed and printed no node")
        no, line = next(((n, ln) for n, ln in enumerate(lines, 1) if ln.strip()), (0, ""))
        raise ParseError(KIND, no, line, "no Switch or Ca block found: this is not ibnetdiscover output")
    return {"nodes": nodes, "links": links, "peer_types": peer_types, "peer_port_guids": peer_port_guids,
            "initiated": initiated}


def _add_stubs(read: dict, warnings: list[str]) -> None:
    """Record peers that have no block of their own (partial discovery) from what their peers say,
    and keep the name peers use for a node as its ``alias`` when it differs from its own."""
    nodes = read["nodes"]
    for node in list(nodes.values()):
        for p in list(node["ports"].values()):
            peer = p.peer
            other = nodes.get(peer.guid)
            if other is None:
                ptype = read["peer_types"][peer.guid]
                other = nodes[peer.guid] = _node(ptype, peer.guid, 0, name=peer.name, stub=True)
                warnings.append(f"node {peer.guid} ({peer.name!r}) is a peer of {node['guid']} but has no block "
                                "of its own (discovery stopped there?)")
            if other.get("stub"):
                if other["type"] == "switch":
                    other.setdefault("lid", peer.lid)
                if peer.port not in other["ports"]:
                    other["ports"][peer.port] = FabricPort(
                        port=peer.port, lid=None if other["type"] == "switch" else peer.lid,
                        port_guid=read["peer_port_guids"].get((peer.guid, peer.port)),
                        peer=End(node["guid"], p.port, p.lid, node["name"]))
            elif other["name"] != peer.name and "alias" not in other:
                other["alias"] = peer.name


def _records(nodes: dict) -> tuple[tuple[Switch, ...], tuple[CaNode, ...]]:
    switches, cas = [], []
    for n in nodes.values():
        ports = tuple(n["ports"][k] for k in sorted(n["ports"]))
        common = dict(num_ports=n.get("num_ports"), devid=n.get("devid"), vendid=n.get("vendid"),
                      system_image_guid=n.get("sysimg"), ports=ports)
        if n["type"] == "switch":
            switches.append(Switch(guid=n["guid"], name=n["name"], lid=n.get("lid"), lmc=n.get("lmc"),
                                   enhanced_port0=n.get("enhanced"), **common))
        else:
            router = n["type"] == "router"
            host = None if router else (host_of(n["name"]) or host_of(n.get("alias")))
            cas.append(CaNode(guid=n["guid"], name=n["name"], host=host, kind=ca_kind(n["name"], router),
                              alias=n.get("alias"), node_guid=None if n.get("from_ports") else n["guid"],
                              **common))
    return tuple(switches), tuple(cas)


def _parse_topology(lines: list[str], warnings: list[str]) -> FabricResult:
    read = _read_topology(lines, warnings)
    _add_stubs(read, warnings)
    for n in read["nodes"].values():
        if n["type"] != "switch" and not n["ports"] and not n.get("stub"):
            warnings.append(f"CA {n['guid']} ({n['name']!r}) lists no linked port (its port is down, or "
                            "discovery could not leave it)")
    switches, cas = _records(read["nodes"])
    return FabricResult(source=KIND, switches=switches, cas=cas, links=tuple(read["links"].values()),
                        warnings=tuple(warnings), initiated_from=read["initiated"])


def _ports_line(m: re.Match, no: int, nodes: dict, links: list[Link], warnings: list[str]) -> None:
    (ltype, llid, lport, lguid, wtext, stext, rtype, rlid, rport, rguid, lname, rname, lonly) = m.groups()
    guid = fabric_guid(lguid)
    node = nodes.setdefault(guid, _node(_RTYPE[ltype], guid, no, name=lname if rtype else lonly, from_ports=True))
    # an unlinked port's width/speed are not valid (IBA C14-24.2.1): not kept
    width, speed = _width_speed(f"{wtext}{stext}", no, warnings) if rtype else (None, None)
    is_switch = node["type"] == "switch"
    if is_switch:
        node.setdefault("lid", int(llid))
    peer = End(fabric_guid(rguid), int(rport), int(rlid), rname) if rtype else None
    node["ports"][int(lport)] = FabricPort(port=int(lport), width=width, speed=speed, lid=int(llid),
                                           port_guid=None if is_switch else guid, peer=peer)
    if peer is not None:
        node.setdefault("peer_seen", []).append((_RTYPE[rtype], peer, None if rtype == "SW" else peer.guid,
                                                 int(lport), int(llid)))
        links.append(Link(End(guid, int(lport), int(llid), node["name"]), peer, width, speed))


def _parse_ports(lines: list[str], warnings: list[str]) -> FabricResult:
    nodes: dict[str, dict] = {}
    links: list[Link] = []
    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        m = _PORTS_RE.match(line)
        if m:
            _ports_line(m, no, nodes, links, warnings)
            continue
        if DIAG_RE.search(line):
            warnings.append(f"line {no}: discovery reported: {stripped} (the report may be partial)")
            continue
        if not nodes and is_fabric_echo(line):
            warnings.append(f"line {no}: skipped command line {stripped!r}")
            continue
        raise ParseError(KIND, no, line, "unrecognised line in an 'ibnetdiscover -p' ports report")
    for n in list(nodes.values()):
        for ptype, peer, *_rest in n.get("peer_seen", ()):
            if peer.guid not in nodes:
                nodes[peer.guid] = _node(ptype, peer.guid, 0, name=peer.name, from_ports=True, stub=True)
                warnings.append(f"port {peer.guid}[{peer.port}] ({peer.name!r}) is a peer but has no line of "
                                "its own (report cut?)")
    switches, cas = _records(nodes)
    return FabricResult(source=f"{KIND} -p", switches=switches, cas=cas, links=dedupe_links(links, warnings),
                        warnings=tuple(warnings))


def _form(lines: list[str]) -> str:
    """``topology``, ``ports`` or ``list``: the first line that tells."""
    for line in lines[:400]:
        if _PORTS_RE.match(line):
            return "ports"
        if ibnodes.NODE_RE.match(line):
            return "list"
        if _NODE_RE.match(line) or _PORT_RE.match(line) or line.startswith("# Topology") or (
                line.partition("=")[0].strip() in _ID_KEYS):
            return "topology"
    return "topology"


def parse(text: str) -> FabricResult:
    """Parse ``ibnetdiscover`` output (topology, ``-p`` ports report, or ``-l``/``-S``/``-H`` lists)."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    warnings: list[str] = []
    form = _form(lines)
    if form == "list":
        listed = ibnodes.read_node_list(lines, KIND, {"switch", "ca", "router"}, warnings)
        return FabricResult(source=f"{KIND} -l", switches=listed.switches, cas=listed.cas, links=(),
                            warnings=listed.warnings + ("a node list: no links",))
    with paused_gc():
        return _parse_ports(lines, warnings) if form == "ports" else _parse_topology(lines, warnings)


_DETECT_PORT_RE = re.compile(r'^\s*\[\d+\](?:\([0-9a-fA-F]+\))?\s*"[SH]-[0-9a-fA-F]+"\[\d+\]', re.M)
_DETECT_NODE_RE = re.compile(r'^\s*(?:Switch|Ca)\s+\d+\s+"[SH]-[0-9a-fA-F]+"', re.M)
_DETECT_PORTS_RE = re.compile(r"^\s*(?:SW|CA)\s+\d+\s+\d+\s+0x[0-9a-fA-F]{16}\s+\d+x\s+\S+", re.M)


def detect(text: str) -> int:
    """Score ibnetdiscover output: ``"S-<guid>"`` node and port lines, ``switchguid=``/``caguid=``, ports report."""
    head = text[:8000]
    score = 0
    if _DETECT_NODE_RE.search(head):
        score += 50
    if _DETECT_PORT_RE.search(head):
        score += 30
    if "switchguid=" in head or "caguid=" in head:
        score += 15
    if "# Topology file:" in head:
        score += 10
    if score:
        return min(score, 97)
    return 85 if _DETECT_PORTS_RE.search(head) else 0
