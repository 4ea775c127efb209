"""The InfiniBand fabric as a graph: switches, CAs and the links between them, from ibnetdiscover/iblinkinfo.

Input: a parsed ``ibnetdiscover`` or ``iblinkinfo`` result (:class:`apps.domain.parsers.fabric_common.FabricResult`
or its JSON, the contract documented in ``apps/domain/parsers/fabric_common.py``).

The graph (``build_fabric``) is an ``nx.Graph``:

* **Nodes** ``"ib:<guid>"`` (``"ib:lid<N>"`` for a node the text names only by LID) with
  ``type`` (``switch``, ``ca`` or ``unknown``), ``kind`` (CAs: ``hca``, ``aggregation_node``,
  ``router``), ``name``, ``alias``, ``host`` (CAs: from the node description), ``guid``,
  ``node_guid``, ``lid``, ``tier`` (switches: ``leaf``, ``spine``, ``core``, ``tier4``...; see
  :func:`tiers`), ``inferred`` (a node only its peers mention) and ``ports``
  ``{port: {"state", "phys_state", "width", "speed", "port_guid", "peer", "peer_port",
  "could_be_width", "could_be_speed"}}`` as the tool printed them.
* **Edges**: one per pair of nodes, the bundle of physical links between them (leaf-spine pairs
  often have two cables): ``links`` (one dict per cable: ``ports {node: port}``, ``width``,
  ``speed``, ``state``, ``gbs``/``expected_gbs`` per direction from ``bandwidth.ib_link``,
  ``usable`` (Active, or a state the tool does not print), ``could_be_width``/``could_be_speed``),
  ``count``, ``usable_count``, ``gbs`` and ``expected_gbs`` (the usable links' sum: the bundle's
  capacity per direction), ``min_link_gbs``.
* ``G.graph``: ``source`` and ``warnings`` (the parser's, plus what building noticed).

Bandwidths are GB/s per direction (``bandwidth.ib_link``: width x lane rate / 8). Functions take
``G`` first and return plain data; none changes ``G``.

>>> G = build_fabric({"switches": [{"guid": "0x1", "name": "leaf1"}], "links": [
...     {"a": {"guid": "0x1", "port": 1}, "b": {"guid": "0xa", "port": 1}, "width": "4X", "speed": "NDR"},
...     {"a": {"guid": "0x1", "port": 2}, "b": {"guid": "0xb", "port": 1}, "width": "4X", "speed": "NDR"}],
...     "cas": [{"guid": "0xa", "name": "n1 mlx5_0", "host": "n1"}, {"guid": "0xb", "name": "n2 mlx5_0", "host": "n2"}]})
>>> tiers(G)
{'ib:0x0000000000000001': 'leaf'}
>>> r = route(G, "ib:0x000000000000000a", "ib:0x000000000000000b")
>>> [h["to_name"] for h in r["hops"]], r["equal_cost_paths"], r["bottleneck_gbs"]
(['leaf1', 'n2 mlx5_0'], 1, 50.0)
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

import networkx as nx

from apps.domain.bandwidth import LinkBandwidth, ib_link
from apps.domain.parsers.fabric_common import device_of, fabric_guid, host_of, paused_gc

__all__ = [
    "node_id",
    "build_fabric",
    "tiers",
    "host_cas",
    "USABLE_STATES",
    "is_switch",
    "is_host_ca",
    "attach_hosts",
    "host_ports_from_ib",
    "host_key",
    "route",
    "uplink_sharing",
    "summary",
]

USABLE_STATES = (None, "Active")  # port states a link carries traffic in (None: the capture does not say)
_TIER_NAMES = ("leaf", "spine", "core")


def node_id(guid: str | None, lid: int | None = None) -> str:
    """``"ib:<guid>"``, or ``"ib:lid<N>"`` when the GUID is unknown.

    >>> node_id("0x2c5eab0300b87b40"), node_id(None, 5)
    ('ib:0x2c5eab0300b87b40', 'ib:lid5')
    """
    if guid:
        return f"ib:{guid}" if len(guid) == 18 and guid[:2] == "0x" else f"ib:{fabric_guid(guid) or guid}"
    if lid is None:
        raise ValueError("a fabric node needs a GUID or a LID")
    return f"ib:lid{lid}"


# --- building --------------------------------------------------------------------------------------


Getter = Callable[..., Any]  # getattr for parser records, dict.get for their JSON: (obj, field, default)


def _f(obj: Any, name: str, default: Any = None) -> Any:
    """A field of a parser record or of its JSON mapping (the graph reads either without converting)."""
    if type(obj) is dict:  # JSON; anything else is a parser record (an exact type test: this runs per field)
        return obj.get(name, default)
    return getattr(obj, name, default)


def _end_id(get: Getter, end: Any) -> str:
    return node_id(get(end, "guid"), get(end, "lid"))


def _port_attrs(get: Getter, port: Any) -> dict:
    peer = get(port, "peer")
    return {"state": get(port, "state"), "phys_state": get(port, "phys_state"), "width": get(port, "width"),
            "speed": get(port, "speed"), "port_guid": get(port, "port_guid"),
            "peer": _end_id(get, peer) if peer else None, "peer_port": get(peer, "port") if peer else None,
            "could_be_width": get(port, "could_be_width"), "could_be_speed": get(port, "could_be_speed")}


def _add_nodes(G: nx.Graph, get: Getter, data: Any) -> None:
    for sw in get(data, "switches", ()):
        G.add_node(node_id(get(sw, "guid"), get(sw, "lid")), type="switch", name=get(sw, "name"), guid=get(sw, "guid"),
                   lid=get(sw, "lid"), num_ports=get(sw, "num_ports"), alias=None, host=None, kind=None,
                   node_guid=get(sw, "guid"), inferred=False,
                   ports={get(p, "port"): _port_attrs(get, p) for p in get(sw, "ports", ())})
    for ca in get(data, "cas", ()):
        ports = {get(p, "port"): _port_attrs(get, p) for p in get(ca, "ports", ())}
        lid = next((get(p, "lid") for p in get(ca, "ports", ()) if get(p, "lid")), None)
        name, alias = get(ca, "name"), get(ca, "alias")
        G.add_node(node_id(get(ca, "guid"), lid), type="ca", kind=get(ca, "kind", "hca"), name=name, alias=alias,
                   host=get(ca, "host") or host_of(name) or host_of(alias), guid=get(ca, "guid"),
                   node_guid=get(ca, "node_guid"), lid=lid, num_ports=get(ca, "num_ports"), inferred=False, ports=ports)


def _add_peer_node(G: nx.Graph, get: Getter, end: Any) -> str:
    """A node only a link names (a cut or filtered output): a CA when its name has a host in it."""
    n = _end_id(get, end)
    if n not in G:
        name = get(end, "name")
        host = host_of(name)
        G.add_node(n, type="ca" if host else "unknown", kind="hca" if host else None, name=name, alias=None,
                   host=host, guid=get(end, "guid"), node_guid=None, lid=get(end, "lid"), num_ports=None,
                   inferred=True, ports={})
    ports = G.nodes[n]["ports"]
    if get(end, "port") not in ports:
        ports[get(end, "port")] = {"state": None, "phys_state": None, "width": None, "speed": None, "port_guid": None,
                                  "peer": None, "peer_port": None, "could_be_width": None, "could_be_speed": None}
    return n


def _link_record(get: Getter, link: Any, u: str, v: str) -> dict:
    width, speed, state = get(link, "width"), get(link, "speed"), get(link, "state")
    bw = _bandwidth(width, speed)
    return {"ports": {u: get(get(link, "a"), "port"), v: get(get(link, "b"), "port")}, "width": width, "speed": speed,
            "state": state, "gbs": bw.spec_gbs, "expected_gbs": bw.expected_gbs, "usable": state in USABLE_STATES,
            "could_be_width": get(link, "could_be_width"), "could_be_speed": get(link, "could_be_speed")}


@lru_cache(maxsize=256)
def _bandwidth(width: str | None, speed: str | None) -> LinkBandwidth:
    return ib_link(width, speed)


def _add_links(G: nx.Graph, get: Getter, data: Any, warnings: list[str]) -> None:
    for link in get(data, "links", ()):
        a, b = get(link, "a"), get(link, "b")
        u, v = _add_peer_node(G, get, a), _add_peer_node(G, get, b)
        if u == v:
            warnings.append(f"{u}: port {get(a, 'port')} is cabled to its own port {get(b, 'port')} (ignored)")
            continue
        for n, end, other, other_end in ((u, a, v, b), (v, b, u, a)):
            port = G.nodes[n]["ports"][get(end, "port")]
            if port["peer"] is None:
                port["peer"], port["peer_port"] = other, get(other_end, "port")
        if not G.has_edge(u, v):
            G.add_edge(u, v, links=[])
        G.edges[u, v]["links"].append(_link_record(get, link, u, v))


def _sum_bundles(G: nx.Graph) -> None:
    for _u, _v, d in G.edges(data=True):
        usable = [lk for lk in d["links"] if lk["usable"]]
        d["count"] = len(d["links"])
        d["usable_count"] = len(usable)
        d["gbs"] = round(sum(lk["gbs"] or 0.0 for lk in usable), 4)
        d["expected_gbs"] = round(sum(lk["expected_gbs"] or 0.0 for lk in usable), 4)
        d["min_link_gbs"] = min((lk["gbs"] for lk in usable if lk["gbs"] is not None), default=None)


def build_fabric(parsed: Any) -> nx.Graph:
    """Build the fabric graph of a parsed ``ibnetdiscover``/``iblinkinfo`` result.

    Parameters
    ----------
    parsed : FabricResult or its JSON mapping
        ``switches``, ``cas``, ``links`` (and ``source``, ``warnings``) as the fabric parsers return them.

    Returns
    -------
    nx.Graph
        Nodes and edge bundles as described in the module docstring, switches tagged with their
        ``tier``.
    """
    get: Getter = dict.get if type(parsed) is dict else getattr  # JSON, or the parser's records
    warnings = list(get(parsed, "warnings", ()))
    G = nx.Graph(source=get(parsed, "source"), warnings=warnings)
    with paused_gc():
        _add_nodes(G, get, parsed)
        _add_links(G, get, parsed, warnings)
        _sum_bundles(G)
    for n, tier in tiers(G).items():
        G.nodes[n]["tier"] = tier
    return G


# --- structure ------------------------------------------------------------------------------------


def is_switch(G: nx.Graph, n: str) -> bool:
    """Whether node ``n`` of a fabric graph is a switch."""
    return G.nodes[n]["type"] == "switch"


def is_host_ca(G: nx.Graph, n: str) -> bool:
    """Whether node ``n`` is a host adapter (a CA of kind ``hca``: not a SHARP aggregation node, not a router)."""
    d = G.nodes[n]
    return d["type"] == "ca" and d.get("kind") == "hca"


def host_cas(G: nx.Graph) -> list[str]:
    """The host adapters (CAs of kind ``hca``: not SHARP aggregation nodes, not routers), in graph order."""
    return [n for n in G if is_host_ca(G, n)]


def tiers(G: nx.Graph) -> dict[str, str]:
    """Each switch's tier, derived from the graph alone.

    A **leaf** is a switch with a host adapter attached; a **spine** a switch one hop above the
    nearest leaf, **core** two hops; farther ones ``tier4``, ``tier5``... Switches no leaf reaches
    are ``unattached``. SHARP aggregation nodes (CAs inside every Quantum switch) do not make a
    leaf.

    Returns
    -------
    dict
        ``{switch node: tier}``.
    """
    switches = [n for n in G if is_switch(G, n)]
    depth = {s: 0 for s in switches if any(is_host_ca(G, m) for m in G[s])}
    queue = deque(depth)
    while queue:
        s = queue.popleft()
        for m in G[s]:
            if m not in depth and is_switch(G, m):
                depth[m] = depth[s] + 1
                queue.append(m)
    return {s: _tier_name(depth.get(s)) for s in switches}


def _tier_name(depth: int | None) -> str:
    if depth is None:
        return "unattached"
    return _TIER_NAMES[depth] if depth < len(_TIER_NAMES) else f"tier{depth + 1}"


def _leaf_ports(G: nx.Graph, ca: str) -> list[dict]:
    """Per port of a CA: the switch and switch port it is cabled to (None for an unlinked port)."""
    out = []
    for port, p in sorted(G.nodes[ca]["ports"].items()):
        leaf = p["peer"] if p["peer"] in G and G.nodes[p["peer"]]["type"] == "switch" else None
        out.append({"port": port, "port_guid": p["port_guid"], "leaf": leaf, "leaf_name": G.nodes[leaf]["name"]
                    if leaf else None, "leaf_port": p["peer_port"] if leaf else None})
    return out


# --- hosts ----------------------------------------------------------------------------------------


def host_ports_from_ib(reports: Mapping[str, Any]) -> dict[str, list[dict]]:
    """The host -> NIC ports mapping :func:`attach_hosts` takes, from parsed ``ibstat``/``ibv_devinfo``/``sysfs_ib``.

    Parameters
    ----------
    reports : mapping
        ``{host: IbResult}`` (``apps.domain.parsers._ib``; its JSON works too).

    Returns
    -------
    dict
        ``{host: [{"nic", "port", "port_guid", "node_guid"}]}``, every InfiniBand port that has a GUID
        (a RoCE port, link layer Ethernet, is never in an InfiniBand discovery; a port whose link layer
        was not reported is kept).
    """
    out: dict[str, list[dict]] = {}
    for host, result in reports.items():
        rows = out.setdefault(host, [])
        for ca in _f(result, "cas", ()):
            for p in _f(ca, "ports", ()):
                if str(_f(p, "link_layer") or "").lower() == "ethernet":
                    continue
                if _f(p, "port_guid") or _f(ca, "node_guid"):
                    rows.append({"nic": _f(ca, "name"), "port": _f(p, "number"), "port_guid": _f(p, "port_guid"),
                                 "node_guid": _f(ca, "node_guid")})
    return out


def _guid_index(G: nx.Graph) -> tuple[dict, dict]:
    by_port: dict[str, tuple[str, int]] = {}
    by_node: dict[str, str] = {}
    for n in host_cas(G):
        d = G.nodes[n]
        for port, p in d["ports"].items():
            if p["port_guid"]:
                by_port[p["port_guid"]] = (n, port)
        for guid in (d.get("node_guid"), d.get("guid")):
            if guid:
                by_node.setdefault(guid, n)
    return by_port, by_node


def _attachment(G: nx.Graph, ca: str, port: int | None, nic: str | None, match: str) -> list[dict]:
    rows = [r for r in _leaf_ports(G, ca) if port is None or r["port"] == port] or [
        {"port": port, "port_guid": None, "leaf": None, "leaf_name": None, "leaf_port": None}]
    return [{"nic": nic, "ca": ca, "ca_name": G.nodes[ca]["name"], "match": match, **r} for r in rows]


def host_key(host: str) -> str:
    """How hosts are matched across sources: the short, lower-case name (``Node17.cluster`` -> ``node17``)."""
    return host.split(".")[0].lower()


def attach_hosts(G: nx.Graph, host_ports: Mapping[str, Iterable[Mapping]] | None = None) -> dict:
    """Which leaf switch and port each host's adapters are cabled to.

    Joins the hosts' NIC ports to the fabric's CAs exactly by port GUID (``match: "port_guid"``),
    else by node GUID and port number (``"node_guid"``); CAs left over are given to a host by
    the host name in their node description (``"name"``: ``node17 HCA-1`` -> ``node17``; a
    short-name match counts, ``node17`` = ``node17.cluster``), which is only as good as the
    names the fabric's nodes were given.

    Parameters
    ----------
    host_ports : mapping, optional
        ``{host: [{"nic", "port", "port_guid", "node_guid"}]}`` (:func:`host_ports_from_ib` builds it
        from ``ibstat``/``ibv_devinfo``). Without it every host comes from node descriptions.

    Returns
    -------
    dict
        ``{"hosts": {host: [{"nic", "port", "port_guid", "ca", "ca_name", "leaf", "leaf_name",
        "leaf_port", "match"}]}, "unmatched": [the host_ports rows no CA has]}``; ``leaf`` is None
        for a port that is not linked to a switch.
    """
    by_port, by_node = _guid_index(G)
    hosts: dict[str, list[dict]] = {}
    unmatched: list[dict] = []
    claimed: set[str] = set()
    for host, rows in (host_ports or {}).items():
        for row in rows:
            pg, ng = fabric_guid(row.get("port_guid") or ""), fabric_guid(row.get("node_guid") or "")
            if pg and pg in by_port:
                ca, port = by_port[pg]
                hosts.setdefault(host, []).extend(_attachment(G, ca, port, row.get("nic"), "port_guid"))
            elif ng and ng in by_node:
                ca = by_node[ng]
                hosts.setdefault(host, []).extend(_attachment(G, ca, row.get("port"), row.get("nic"), "node_guid"))
            else:
                unmatched.append({"host": host, **dict(row)})
                continue
            claimed.add(ca)
    known = {host_key(h): h for h in (host_ports or {})}
    for ca in host_cas(G):
        d = G.nodes[ca]
        if ca in claimed or not d.get("host"):
            continue
        host = known.get(host_key(d["host"]), d["host"])
        nic = device_of(d.get("name")) or device_of(d.get("alias"))
        hosts.setdefault(host, []).extend(_attachment(G, ca, None, nic, "name"))
    return {"hosts": hosts, "unmatched": unmatched}


# --- routes ---------------------------------------------------------------------------------------


def _resolve(G: nx.Graph, ref: str) -> str:
    """A node id, a GUID (node or port, with or without ``0x``) -> node id; else KeyError."""
    if ref in G:
        return ref
    guid = fabric_guid(ref.removeprefix("ib:"))
    if guid and f"ib:{guid}" in G:
        return f"ib:{guid}"
    for n, d in G.nodes(data=True):
        if guid and any(p["port_guid"] == guid for p in d["ports"].values()):
            return n
    raise KeyError(f"no fabric node {ref!r}")


_TRANSIT = ("switch", "unknown")  # unknown nodes (named by LID only) may be switches: let them carry traffic


def _depths(G: nx.Graph, source: str, ends: tuple[str, str], stop: str | None = None,
            limit: int | None = None) -> dict[str, int]:
    """Hop counts from ``source`` over usable bundles, through switches only (CAs other than ``ends``
    are skipped, and a CA is never passed through). Stops after the level that reaches ``stop``,
    or at depth ``limit``."""
    nodes, adj = G.nodes, G.adj
    depth = {source: 0}
    frontier = [source]
    while frontier and (stop is None or stop not in depth) and (limit is None or depth[frontier[0]] < limit):
        level = depth[frontier[0]] + 1
        nxt = []
        for n in frontier:
            if n != source and nodes[n]["type"] not in _TRANSIT:
                continue
            for m, e in adj[n].items():
                if m not in depth and e["usable_count"] and (nodes[m]["type"] in _TRANSIT or m in ends):
                    depth[m] = level
                    nxt.append(m)
        frontier = nxt
    return depth


def _shortest_dag(G: nx.Graph, a: str, b: str) -> tuple[nx.DiGraph, dict[str, int]]:
    """The union of the minimum-hop a -> b paths, oriented a -> b, each bundle with its ``capacity``
    (``gbs``) and ``expected`` (``expected_gbs``); and the hop counts from ``a`` (empty DAG when b
    is unreachable)."""
    da = _depths(G, a, (a, b), stop=b)
    D = nx.DiGraph()
    if b not in da:
        return D, da
    db = _depths(G, b, (a, b), limit=da[b])
    total = da[b]
    on = {n for n, d in da.items() if d + db.get(n, total + 1) == total}
    for x in on:
        for y, e in G.adj[x].items():
            if y in on and da[y] == da[x] + 1 and e["usable_count"]:
                D.add_edge(x, y, capacity=e["gbs"], expected=e["expected_gbs"])
    return D, da


def _count_paths(G: nx.Graph, D: nx.DiGraph, a: str, da: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """Minimum-hop path counts from ``a`` over the DAG: node paths, and port paths (parallel cables multiply)."""
    nodes, ports = {a: 1}, {a: 1}
    for n in sorted(D, key=da.__getitem__):
        for m in D.successors(n):
            nodes[m] = nodes.get(m, 0) + nodes.get(n, 0)
            ports[m] = ports.get(m, 0) + ports.get(n, 0) * G.edges[n, m]["usable_count"]
    return nodes, ports


def _hop(G: nx.Graph, u: str, v: str) -> dict:
    d = G.edges[u, v]
    first = next(lk for lk in d["links"] if lk["usable"])
    return {"from": u, "to": v, "from_name": G.nodes[u]["name"], "to_name": G.nodes[v]["name"],
            "from_port": first["ports"][u], "to_port": first["ports"][v], "links": d["usable_count"],
            "width": first["width"], "speed": first["speed"], "link_gbs": first["gbs"], "bundle_gbs": d["gbs"],
            "expected_gbs": d["expected_gbs"]}


def _leaf(G: nx.Graph, ca: str) -> str | None:
    return next((r["leaf"] for r in _leaf_ports(G, ca) if r["leaf"]), None)


def _one_path(D: nx.DiGraph, a: str, b: str) -> list[str]:
    """One minimum-hop path through the DAG, preferring the widest bundle at each step (ties: by id)."""
    path = [a]
    while path[-1] != b:
        n = path[-1]
        path.append(max(D.successors(n), key=lambda m: (D.edges[n, m]["capacity"], m)))
    return path


def route(G: nx.Graph, ca_a: str, ca_b: str) -> dict:
    """The minimum-hop routes between two adapters, how many there are, and their narrowest cut.

    InfiniBand subnet managers route on minimum-hop paths (up/down in a fat tree) and spread
    destinations over the equal-cost ones, so the capacity between two adapters is the minimum
    cut of the union of those paths, not the slowest single cable: two leaves joined through 8
    spines by 2 cables each have 16 cables between them. Paths pass through switches only.

    Parameters
    ----------
    ca_a, ca_b : str
        Node ids (``"ib:0x..."``) or GUIDs (node or port) of two adapters.

    Returns
    -------
    dict
        ``hops``: one of the routes, a dict per hop (``from``/``to`` ids and names, ports, ``links``
        in the bundle, ``width``, ``speed``, ``link_gbs``, ``bundle_gbs``, ``expected_gbs``);
        ``equal_cost_paths`` (node sequences) and ``equal_cost_port_paths`` (counting parallel
        cables); ``bottleneck_gbs`` / ``bottleneck_expected_gbs``: the minimum cut between the two
        adapters over those routes, GB/s per direction; ``bottleneck``: ``"fabric"`` when the
        switches are narrower than both adapters' own links, else ``"host link"``;
        ``leaf_cut_gbs``: the minimum cut between the two leaves (None when they share a leaf or
        have none); ``cut``: the bundles forming the minimum cut (``[from, to]`` pairs).
        Unreachable: ``hops`` empty, counts 0, bottleneck None.
    """
    a, b = _resolve(G, ca_a), _resolve(G, ca_b)
    if a == b:
        raise ValueError(f"route from {a} to itself")
    D, da = _shortest_dag(G, a, b)
    if b not in D:
        return {"hops": [], "equal_cost_paths": 0, "equal_cost_port_paths": 0, "bottleneck_gbs": None,
                "bottleneck_expected_gbs": None, "bottleneck": None, "leaf_cut_gbs": None, "cut": []}
    nodes, ports = _count_paths(G, D, a, da)
    cut_gbs, (side_a, _side_b) = nx.minimum_cut(D, a, b)
    cut = sorted([u, v] for u, v in D.edges if u in side_a and v not in side_a)
    expected = nx.maximum_flow_value(D, a, b, capacity="expected")
    leaf_a, leaf_b = _leaf(G, a), _leaf(G, b)
    leaf_cut = None
    if leaf_a and leaf_b and leaf_a != leaf_b:
        L, _dl = _shortest_dag(G, leaf_a, leaf_b)
        leaf_cut = round(nx.maximum_flow_value(L, leaf_a, leaf_b), 4) if leaf_b in L else 0.0
    own = min(sum(D.edges[a, m]["capacity"] for m in D.successors(a)),
              sum(D.edges[m, b]["capacity"] for m in D.predecessors(b)))
    path = _one_path(D, a, b)
    return {"hops": [_hop(G, u, v) for u, v in zip(path, path[1:])],
            "equal_cost_paths": nodes.get(b, 0), "equal_cost_port_paths": ports.get(b, 0),
            "bottleneck_gbs": round(cut_gbs, 4), "bottleneck_expected_gbs": round(expected, 4),
            "bottleneck": "fabric" if cut_gbs < own else "host link", "leaf_cut_gbs": leaf_cut, "cut": cut}


def uplink_sharing(G: nx.Graph, hosts: Iterable[str] | None = None, attachments: Mapping | None = None) -> dict:
    """Per leaf: the hosts' links on it, its uplinks, and how oversubscribed the uplinks are.

    Parameters
    ----------
    hosts : iterable of str, optional
        Only these hosts' adapters count (a job's nodes); every host adapter when omitted, also
        those no host claims (``hosts`` then lists the hosts known by name or GUID).
    attachments : mapping, optional
        An :func:`attach_hosts` result, to say which CA is whose (GUID joins); without it the
        hosts come from the node descriptions.

    Returns
    -------
    dict
        ``{leaf: {"name", "hosts", "host_links", "down_gbs", "uplinks", "up_gbs", "oversubscription"}}``
        for every leaf with one of the hosts: ``host_links``/``down_gbs`` the hosts' usable links on
        the leaf and their GB/s, ``uplinks``/``up_gbs`` the leaf's usable links to switches of a
        higher tier, ``oversubscription`` = ``down_gbs / up_gbs`` (None without uplinks).
    """
    owner = {}
    for host, rows in ((attachments or attach_hosts(G))["hosts"]).items():
        for row in rows:
            owner[row["ca"]] = host
    wanted = None if hosts is None else {host_key(h) for h in hosts}
    out: dict[str, dict] = {}
    for leaf, tier in tiers(G).items():
        if tier != "leaf":
            continue
        down = [(ca, G.edges[leaf, ca]) for ca in G[leaf] if is_host_ca(G, ca)
                and (wanted is None or (ca in owner and host_key(owner[ca]) in wanted))]
        if not down:
            continue
        up = [G.edges[leaf, s] for s in G[leaf] if is_switch(G, s) and G.nodes[s].get("tier") != "leaf"]
        down_gbs = round(sum(d["gbs"] for _ca, d in down), 4)
        up_gbs = round(sum(d["gbs"] for d in up), 4)
        out[leaf] = {"name": G.nodes[leaf]["name"], "hosts": sorted({owner[ca] for ca, _d in down if ca in owner}),
                     "host_links": sum(d["usable_count"] for _ca, d in down), "down_gbs": down_gbs,
                     "uplinks": sum(d["usable_count"] for d in up), "up_gbs": up_gbs,
                     "oversubscription": round(down_gbs / up_gbs, 3) if up_gbs else None}
    return out


# --- summary --------------------------------------------------------------------------------------


def summary(G: nx.Graph) -> dict:
    """Counts: switches per tier, host adapters, other CAs, links (physical), hosts named."""
    tier_count = Counter(d.get("tier") for _n, d in G.nodes(data=True) if d["type"] == "switch")
    return {"switches": sum(tier_count.values()), "tiers": dict(sorted(tier_count.items())),
            "host_adapters": len(host_cas(G)),
            "other_cas": sum(1 for _n, d in G.nodes(data=True) if d["type"] == "ca" and d.get("kind") != "hca"),
            "links": sum(d["count"] for _u, _v, d in G.edges(data=True)),
            "hosts": len({G.nodes[n]["host"] for n in host_cas(G) if G.nodes[n]["host"]})}
