"""Routes between host NICs through the discovered fabric, indexed once for path queries.

A :class:`FabricView` is a fabric graph (``apps.domain.fabric.build_fabric``) with the hosts
attached to it (``fabric.attach_hosts``), prepared so that a GPU-to-remote-GPU path query
(``apps.domain.cluster.path_between(..., fabric=view)``, ``ClusterIndex(docs, fabric=view)``)
never rebuilds anything:

* **NIC -> leaf**: ``(host, NIC name)`` -> the attachment row (CA, CA port, leaf, leaf port and
  how the host was joined: ``port_guid``, ``node_guid`` or ``name``), built once from
  ``attachments``; hosts match exactly or by short name (``fabric.host_key``).
* **Switch adjacency**: every usable bundle between switches (and LID-only nodes, which may be
  switches: ``fabric.route`` lets them carry traffic too) as plain tuples.
* **Leaf -> leaf route summaries** (:class:`LeafRoute`), computed on first use and kept (the
  newest :data:`ROUTE_CACHE` pairs), and the breadth-first search from each switch they grew.

The route model is ``fabric.route``'s: subnet managers route on minimum-hop paths and spread
destinations over the equal-cost ones (up/down and ftree routing; adaptive routing spreads packets
over the same set), so the capacity between two leaves is the **minimum cut** of the union of their
minimum-hop paths, not the slowest cable: two leaves joined through 8 spines by 2 cables each have
16 cables between them. ``fabric.route`` answers that per adapter pair by searching the whole
graph (hundreds of milliseconds on a 2,000-switch fabric). A summary here searches from both
leaves at once, a level at a time from the smaller side, and stops at the first level where the
searches meet (so a three-tier route touches a few hundred switches, and each switch's search is
kept for the next query); the recorded predecessors give the layered graph of every equal-cost
route. One pass over it counts the routes, sums each stage and pushes a flow forward (each switch
splitting what it receives over its bundles by capacity): the narrowest stage is a cut, and when the
pushed flow reaches it, it is a minimum cut; otherwise Dinic's maximum flow finds the cut. The
tests check that both give the same equal-cost counts and cuts on the real SuperPOD capture and on
small fabrics.

``FabricView.build(G, attachments)`` takes what ``apps.ingest.fabrics.cluster_fabric`` holds: the
graph and an ``attach_hosts`` result (``None``: the hosts come from the node descriptions).

:meth:`FabricView.route` answers ``host_a/NIC -> host_b/NIC``::

    {"fabric": "discovered" | "assumed",   # assumed: a NIC is not in the fabric (reason says why)
     "reason": str | None,
     "reachable": bool,   # discovered but False: a NIC's link is not Active, or no route joins
                          # the leaves over usable links (reason says which)
     "src", "dst": attachment rows {"nic", "port", "ca", "ca_name", "leaf", "leaf_name", "leaf_port",
                   "match"} | None,
     "links": [LINK, ...],        # NIC -> leaf, one per switch-to-switch stage, leaf -> NIC
     "switches": [{"node", "name", "tier", "choices"}],   # the switches between the links;
                                  # choices: how many switches are equal-cost at that position
     "equal_cost_paths": int, "equal_cost_port_paths": int,   # routes as switch sequences / cables
     "cut": {"gbs", "expected_gbs",   # the narrowest cut between the two NICs, GB/s per direction
             "where": "fabric" | "host link", "leaf_cut_gbs", "leaf_cut_expected_gbs",
             "bundles": [[from name, to name], ...], "stage": index into links | None} | None}

    LINK = {"from", "to" (node ids), "from_name", "to_name", "from_port", "to_port",
            "tier" ("host-leaf", "leaf-spine", "spine-core"...), "width", "speed", "state",
            "links" (cables in this bundle), "gbs", "expected_gbs" (this bundle, usable cables),
            "usable", "stage_bundles", "stage_links", "stage_gbs", "stage_expected_gbs"}
            # stage_*: every equal-cost bundle of that stage together (the capacity the routes
            # spread over); for a host link, the link itself

Bandwidths are GB/s per direction, as in ``apps.domain.fabric``.

>>> from apps.domain.fabric import attach_hosts, build_fabric
>>> G = build_fabric({"switches": [{"guid": "0x1", "name": "leaf1"}], "links": [
...     {"a": {"guid": "0x1", "port": 1}, "b": {"guid": "0xa", "port": 1}, "width": "4X", "speed": "NDR"},
...     {"a": {"guid": "0x1", "port": 2}, "b": {"guid": "0xb", "port": 1}, "width": "4X", "speed": "NDR"}],
...     "cas": [{"guid": "0xa", "name": "n1 mlx5_0", "host": "n1"},
...             {"guid": "0xb", "name": "n2 mlx5_0", "host": "n2"}]})
>>> view = FabricView.build(G, attach_hosts(G))
>>> r = view.route("n1", "mlx5_0", "n2", "mlx5_0")
>>> r["fabric"], [s["name"] for s in r["switches"]], r["cut"]["gbs"]
('discovered', ['leaf1'], 50.0)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx

from apps.domain.fabric import attach_hosts, host_key, host_ports_from_ib
from apps.domain.names import natural_key

__all__ = ["FabricView", "LeafRoute", "Stage", "ROUTE_CACHE", "IB_SECTIONS", "host_ports_of"]

#: The host sections that give adapters' port and node GUIDs, most exact first.
IB_SECTIONS = ("sysfs_ib", "ibv_devinfo", "ibstatus", "ibstat")

#: Leaf pairs whose route summaries a view keeps (the oldest are dropped first).
ROUTE_CACHE = 16384

_TRANSIT = ("switch", "unknown")  # the node types routes pass through (fabric.route's rule)
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Stage:
    """One hop position between two leaves: every equal-cost bundle from position ``index`` to the next."""

    index: int
    bundles: int
    links: int
    gbs: float
    expected_gbs: float
    unknown_rate: bool  # a usable cable whose width or speed the capture does not give


@dataclass(frozen=True, slots=True)
class LeafRoute:
    """The minimum-hop routes from one leaf (or any switch) to another.

    ``path`` is one route (node ids, widest bundle first at each step), ``levels`` the number of
    switches at each position over all equal-cost routes, ``stages`` the bundles between positions;
    ``cut_gbs``/``cut_expected_gbs`` the minimum cut (None when a cable's rate is unknown or the
    leaves are the same switch), ``cut`` its bundles as ``(from, to)`` node ids and ``cut_stages``
    the stages they belong to.
    """

    src: str
    dst: str
    reachable: bool
    path: tuple[str, ...]
    levels: tuple[int, ...]
    stages: tuple[Stage, ...]
    equal_cost_paths: int
    equal_cost_port_paths: int
    cut_gbs: float | None
    cut_expected_gbs: float | None
    cut: tuple[tuple[str, str], ...]
    cut_stages: tuple[int, ...] = ()  # the positions (stage indexes) the cut's bundles leave from

    @property
    def hops(self) -> int:
        return len(self.path) - 1


def host_ports_of(results: Mapping[str, Mapping[str, Any]]) -> dict[str, list[dict]]:
    """``{host: GUID rows}`` for ``fabric.attach_hosts`` from each host's parser results
    (``{host: {section kind: result}}``, e.g. ``HostAnalysis.results``): every InfiniBand section
    the host sent (:data:`IB_SECTIONS`), each port once."""
    out: dict[str, list[dict]] = {}
    for host, kinds in results.items():
        rows, seen = out.setdefault(host, []), set()
        for kind in IB_SECTIONS:
            if kinds.get(kind) is None:
                continue
            for row in host_ports_from_ib({host: kinds[kind]})[host]:
                key = (row["nic"], row["port"], row["port_guid"], row["node_guid"])
                if key not in seen:
                    seen.add(key)
                    rows.append(row)
    return out


class _Search:
    """A breadth-first search from one switch over the usable switch bundles, grown a level at a
    time on demand and kept (a leaf is asked about again and again): ``levels[k]`` the nodes ``k``
    hops away, ``dist`` their hop counts and ``pred`` every minimum-hop predecessor of each."""

    __slots__ = ("levels", "dist", "pred")

    def __init__(self, root: str) -> None:
        self.levels: list[list[str]] = [[root]]
        self.dist: dict[str, int] = {root: 0}
        self.pred: dict[str, list[str]] = {}

    def level(self, adj: Mapping, k: int) -> list[str]:
        """The nodes ``k`` hops away (growing the search up to there)."""
        levels, dist, pred = self.levels, self.dist, self.pred
        while len(levels) <= k:
            frontier, depth, nxt = levels[-1], len(levels), []
            for n in frontier:
                for m in adj.get(n, ()):
                    dm = dist.get(m)
                    if dm is None:
                        dist[m] = depth
                        pred[m] = [n]
                        nxt.append(m)
                    elif dm == depth:
                        pred[m].append(n)
            levels.append(nxt)
        return levels[k]


def _max_flow(n: int, arcs: list[tuple[int, int]], caps: list[float], s: int, t: int,
              levels: list[int] | None = None, bound: float | None = None) -> tuple[float, set[int] | None]:
    """Dinic's maximum flow on a small graph (nodes ``0..n-1``, ``arcs[i]`` of capacity ``caps[i]``);
    and the nodes the source still reaches at the end (the source side of a minimum cut).

    ``levels``: the nodes' positions when every arc goes one position forward (the first level
    graph, no search needed). ``bound``: the capacity of a known cut; a flow that reaches it is
    maximal, and the side is then None (that cut is a minimum one).
    """
    head: list[list[int]] = [[] for _ in range(n)]
    to: list[int] = []
    cap: list[float] = []
    for (u, v), c in zip(arcs, caps):  # arc 2k forward, 2k + 1 its residual
        head[u].append(len(to))
        head[v].append(len(to) + 1)
        to += (v, u)
        cap += (c, 0.0)
    total = 0.0
    level = levels
    while True:
        if bound is not None and total >= bound - 1e-6:
            return total, None
        if level is None:
            level = [-1] * n
            level[s] = 0
            queue = [s]
            for u in queue:
                nl = level[u] + 1
                for e in head[u]:
                    v = to[e]
                    if level[v] < 0 and cap[e] > _EPS:
                        level[v] = nl
                        queue.append(v)
            if level[t] < 0:
                return total, set(queue)
        nxt = [0] * n

        def push(u: int, f: float) -> float:
            if u == t:
                return f
            arcs_u, lu = head[u], level[u] + 1
            while nxt[u] < len(arcs_u):
                e = arcs_u[nxt[u]]
                v = to[e]
                if cap[e] > _EPS and level[v] == lu:
                    got = push(v, f if f < cap[e] else cap[e])
                    if got > _EPS:
                        cap[e] -= got
                        cap[e ^ 1] += got
                        return got
                nxt[u] += 1
            return 0.0

        while True:
            f = push(s, float("inf"))
            if f <= _EPS:
                break
            total += f
        level = None


def _dinic_cut(a: str, b: str, layers: list[list[str]], succ: Mapping[str, list], narrowest: Stage,
               stage_edges: list[list[tuple[str, str]]], field: int) -> tuple[float, tuple]:
    """The maximum a -> b flow of a layered graph over capacity ``bundle[field]``, and a minimum
    cut's bundles (the narrowest stage when the flow reaches it)."""
    index = {n: i for i, n in enumerate(n for layer in layers for n in layer)}
    level = [k for k, layer in enumerate(layers) for _n in layer]
    arcs, caps, keys = [], [], []
    for u, out in succ.items():
        for v, d in out:
            arcs.append((index[u], index[v]))
            caps.append(d[field])
            keys.append((u, v))
    bound = narrowest.gbs if field == 0 else narrowest.expected_gbs
    value, side = _max_flow(len(index), arcs, caps, index[a], index[b], level, bound)
    if side is None:
        return value, tuple(sorted(stage_edges[narrowest.index]))
    return value, tuple(sorted(k for k, (i, j) in zip(keys, arcs) if i in side and j not in side))


class FabricView:
    """A fabric graph and its host attachments, indexed for routes between host NICs.

    Build it with :meth:`build`; it never changes the graph. Lookups and route summaries are
    cached on the view, so one view should serve many queries (build one per stored fabric and
    share it: route summaries are computed under a lock, lookups need none).
    """

    def __init__(self, G: nx.Graph, attachments: Mapping[str, Any]) -> None:
        self.graph = G
        self.attachments = attachments
        self._nics: dict[str, dict[str, list[dict]]] = {}
        self._hosts: dict[str, str] = {}
        self._owner: dict[str, tuple[str, str | None]] = {}
        self._adj: dict[str, dict[str, tuple]] = {}  # node -> {neighbour: (gbs, expected, cables, unknown)}
        self._routes: dict[tuple[str, str], LeafRoute] = {}
        self._searches: dict[str, _Search] = {}
        self._lock = threading.Lock()  # summaries grow shared searches: one at a time per view
        self._memo: dict[str, Any] = {}

    # --- building ---------------------------------------------------------------------------------

    @classmethod
    def build(cls, G: nx.Graph, attachments: Mapping[str, Any] | None = None) -> FabricView:
        """Index ``G`` and the hosts' attachments (``fabric.attach_hosts``; None: by node descriptions)."""
        view = cls(G, attachments if attachments is not None else attach_hosts(G))
        view._index_hosts()
        view._index_switches()
        return view

    def _index_hosts(self) -> None:
        for host, rows in (self.attachments.get("hosts") or {}).items():
            nics = self._nics.setdefault(host, {})
            for r in rows:
                nics.setdefault(str(r.get("nic")) if r.get("nic") is not None else "", []).append(r)
                self._owner.setdefault(r["ca"], (host, r.get("nic")))
            self._hosts.setdefault(host, host)
            self._hosts.setdefault(host_key(host), host)

    def _index_switches(self) -> None:
        nodes = self.graph.nodes
        transit = {n for n, d in nodes(data=True) if d["type"] in _TRANSIT}
        adj = self._adj
        for u, v, e in self.graph.edges(data=True):
            if u in transit and v in transit and e["usable_count"]:
                unknown = any(lk["usable"] and lk["gbs"] is None for lk in e["links"])
                data = (e["gbs"], e["expected_gbs"], e["usable_count"], unknown)
                adj.setdefault(u, {})[v] = data
                adj.setdefault(v, {})[u] = data

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per view (for derived tables other modules keep on it)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    # --- hosts ------------------------------------------------------------------------------------

    def host(self, host: str) -> str | None:
        """The fabric's name for ``host`` (exact, else by short name), or None."""
        return self._hosts.get(host) or self._hosts.get(host_key(host))

    def hosts(self) -> list[str]:
        """The hosts the fabric has adapters of, in natural order."""
        return sorted(self._nics, key=natural_key)

    def host_nics(self, host: str) -> dict[str, dict]:
        """``{NIC name: attachment row}`` of a host (the first linked row of each NIC), natural order."""
        h = self.host(host)
        out: dict[str, dict] = {}
        for nic in sorted((self._nics.get(h) or {}) if h else (), key=natural_key):
            rows = self._nics[h][nic]
            out[nic] = next((r for r in rows if r.get("leaf")), rows[0])
        return out

    def owner(self, ca: str) -> tuple[str, str | None] | None:
        """``(host, NIC name)`` of a host adapter node, None when no host claims it."""
        return self._owner.get(ca)

    def attachment(self, host: str, nic: str, port: int | None = None) -> dict | None:
        """The attachment row of ``host``'s ``nic`` (its ``port`` when the adapter has several), or None."""
        h = self.host(host)
        rows = (self._nics.get(h) or {}).get(nic) if h else None
        if not rows:
            return None
        if port is not None:
            rows = [r for r in rows if r.get("port") == port] or rows
        return next((r for r in rows if r.get("leaf")), rows[0])

    def cable(self, row: Mapping) -> dict | None:
        """The cable of an attachment row: its link record (``fabric.build_fabric``), None when unlinked."""
        ca, leaf = row.get("ca"), row.get("leaf")
        if not ca or not leaf or not self.graph.has_edge(ca, leaf):
            return None
        links = self.graph.edges[ca, leaf]["links"]
        return next((lk for lk in links if lk["ports"].get(ca) == row.get("port")), links[0])

    def tier(self, n: str) -> str:
        d = self.graph.nodes[n]
        return d.get("tier") or ("host" if d["type"] == "ca" else d["type"])

    def name(self, n: str) -> str:
        return self.graph.nodes[n].get("name") or n

    # --- routes -----------------------------------------------------------------------------------

    @property
    def cached_routes(self) -> int:
        """How many leaf-pair route summaries the view holds."""
        return len(self._routes)

    def leaf_route(self, a: str, b: str) -> LeafRoute:
        """The minimum-hop routes between switches ``a`` and ``b`` (cached)."""
        key = (a, b)
        got = self._routes.get(key)
        if got is None:
            with self._lock:
                got = self._routes.get(key)
                if got is None:
                    got = self._routes[key] = self._summarize(a, b)
                    while len(self._routes) > ROUTE_CACHE:
                        del self._routes[next(iter(self._routes))]
        return got

    def _search(self, n: str) -> _Search:
        got = self._searches.get(n)
        if got is None:
            got = self._searches[n] = _Search(n)
            while len(self._searches) > ROUTE_CACHE:
                del self._searches[next(iter(self._searches))]
        return got

    def _summarize(self, a: str, b: str) -> LeafRoute:
        if a == b:
            return LeafRoute(a, b, True, (a,), (1,), (), 1, 1, None, None, ())
        adj = self._adj
        sa, sb = self._search(a), self._search(b)
        ka = kb = 0
        fa, fb, meet = sa.levels[0], sb.levels[0], []
        # grow the smaller side a level at a time; the first level that meets the other side's
        # search (as far as it has gone) holds the routes' meeting nodes
        while fa and fb and not meet:
            if len(fa) <= len(fb):
                ka += 1
                fa = sa.level(adj, ka)
                meet = [m for m in fa if sb.dist.get(m, ka + kb + 1) <= kb]
            else:
                kb += 1
                fb = sb.level(adj, kb)
                meet = [m for m in fb if sa.dist.get(m, ka + kb + 1) <= ka]
        if not meet:
            return LeafRoute(a, b, False, (), (), (), 0, 0, None, None, ())
        return self._route_of(a, b, *self._dag(meet, sa.pred, sb.pred, ka, kb))

    def _dag(self, meet: list[str], pa: dict, pb: dict, ka: int, kb: int) -> tuple[list[list[str]], dict]:
        """The equal-cost routes as a layered graph: the nodes at each position (a first, b last) and
        ``{u: [(v, bundle), ...]}`` oriented a -> b. Meeting nodes are ``ka`` hops from a and ``kb``
        from b (when the searches first meet no shorter route exists), so every route runs
        a -> meet -> b."""
        adj = self._adj
        succ: dict[str, list[tuple[str, tuple]]] = {}
        layers: list[list[str]] = [[] for _ in range(ka + kb + 1)]
        layers[ka] = list(meet)
        for k in range(ka, 0, -1):  # back to a along the recorded predecessors
            seen: dict[str, None] = {}
            for x in layers[k]:
                ax = adj[x]
                for y in pa[x]:
                    succ.setdefault(y, []).append((x, ax[y]))
                    seen[y] = None
            layers[k - 1] = list(seen)
        for k in range(ka, ka + kb):  # on to b
            seen = {}
            for x in layers[k]:
                ax = adj[x]
                out = succ.setdefault(x, [])
                for z in pb[x]:
                    out.append((z, ax[z]))
                    seen[z] = None
            layers[k + 1] = list(seen)
        return layers, succ

    def _route_of(self, a: str, b: str, layers: list[list[str]], succ: dict) -> LeafRoute:
        """Counts, stages and the minimum cut of the layered graph of equal-cost routes.

        One pass over the layers counts the routes, sums each stage and pushes a flow forward
        (every switch splits what it receives over its bundles by capacity, dropping what they
        cannot take): what reaches ``b`` is a feasible flow, and the narrowest stage is a cut; when
        they meet that stage is a minimum cut. Otherwise Dinic's maximum flow decides."""
        paths, ports, flow = {a: 1}, {a: 1}, {a: float("inf")}
        stages, stage_edges = [], []
        ratio, uniform = None, True  # one expected/spec share on every bundle (bandwidth.ib_port)
        for k, layer in enumerate(layers[:-1]):
            bundles = cables = 0
            gbs = expected = 0.0
            unknown = False
            here = []
            for u in layer:
                pu, qu, fu = paths[u], ports[u], flow.get(u, 0.0)
                out = succ.get(u, ())
                total = 0.0
                for _v, d in out:
                    total += d[0]
                share = (1.0 if fu >= total else fu / total) if total else 0.0
                for v, (g, x, c, unk) in out:
                    paths[v] = paths.get(v, 0) + pu
                    ports[v] = ports.get(v, 0) + qu * c
                    flow[v] = flow.get(v, 0.0) + g * share
                    here.append((u, v))
                    cables += c
                    gbs += g
                    expected += x
                    if unk:
                        unknown = True
                    if g and uniform:
                        r = x / g
                        if ratio is None:
                            ratio = r
                        elif abs(r - ratio) > 1e-3:
                            uniform = False
            bundles = len(here)
            stages.append(Stage(k, bundles, cables, round(gbs, 4), round(expected, 4), unknown))
            stage_edges.append(here)
        narrowest = min(stages, key=lambda st: st.gbs)  # a cut: every route crosses each stage once
        if flow.get(b, 0.0) >= narrowest.gbs - 1e-6:
            cut_gbs, cut = narrowest.gbs, tuple(sorted(stage_edges[narrowest.index]))
        else:
            cut_gbs, cut = _dinic_cut(a, b, layers, succ, narrowest, stage_edges, 0)
        if uniform:
            expected_cut = cut_gbs * (ratio if ratio is not None else 0.0)
        else:  # links of differing efficiency: a flow of its own
            expected_cut = _dinic_cut(a, b, layers, succ, min(stages, key=lambda st: st.expected_gbs), stage_edges,
                                      1)[0]
        unknown = any(s.unknown_rate for s in stages)
        path = [a]
        while path[-1] != b:
            path.append(max(succ[path[-1]], key=lambda vd: (vd[1][0], vd[0]))[0])
        level = {n: k for k, layer in enumerate(layers) for n in layer}
        return LeafRoute(a, b, True, tuple(path), tuple(len(layer) for layer in layers), tuple(stages),
                         paths.get(b, 0), ports.get(b, 0), None if unknown else round(cut_gbs, 4),
                         None if unknown else round(expected_cut, 4), cut,
                         tuple(sorted({level[u] for u, _v in cut})))

    def route(self, host_a: str, nic_a: str, host_b: str, nic_b: str, *, port_a: int | None = None,
              port_b: int | None = None) -> dict:
        """The fabric part of ``host_a/nic_a -> host_b/nic_b`` (schema in the module docstring)."""
        ra, rb = self.attachment(host_a, nic_a, port_a), self.attachment(host_b, nic_b, port_b)
        for host, nic, row in ((host_a, nic_a, ra), (host_b, nic_b, rb)):
            why = self._not_attached(host, nic, row)
            if why:
                return _assumed(why, ra, rb)
        if ra["ca"] == rb["ca"]:
            return _assumed(f"{host_a}/{nic_a} and {host_b}/{nic_b} are the same adapter in the fabric "
                            f"({ra['ca_name']})", ra, rb)
        if not ra.get("leaf") or not rb.get("leaf"):
            return self._direct(host_a, nic_a, ra, host_b, nic_b, rb)
        down = [(h, n, r) for h, n, r in ((host_a, nic_a, ra), (host_b, nic_b, rb))
                if not (self.cable(r) or {}).get("usable")]
        if down:
            h, n, r = down[0]
            lk = self.cable(r) or {}
            return {**_assumed(None, ra, rb), "fabric": "discovered", "reachable": False,
                    "reason": f"{h}/{n}'s link to {r['leaf_name']} port {r['leaf_port']} is "
                              f"{lk.get('state') or 'not usable'}: no traffic passes"}
        lr = self.leaf_route(ra["leaf"], rb["leaf"])
        if not lr.reachable:
            return {**_assumed(None, ra, rb), "fabric": "discovered", "reachable": False,
                    "reason": f"no route between {ra['leaf_name']} and {rb['leaf_name']} over usable links "
                              "(the fabric is split)"}
        return self._discovered(ra, rb, lr)

    def _not_attached(self, host: str, nic: str, row: Mapping | None) -> str | None:
        if row is not None:
            return None
        h = self.host(host)
        if h is None:
            return f"no adapter of the fabric is joined to {host}"
        known = sorted((n for n in self._nics.get(h, {}) if n), key=natural_key)
        names = ", ".join(known[:-1]) + f" and {known[-1]}" if len(known) > 1 else "".join(known)
        return f"{host}/{nic} is not in the fabric (the fabric joins {h}'s {names or 'unnamed adapters'})"

    def _host_link(self, row: Mapping, outward: bool) -> dict:
        lk = self.cable(row) or {}
        ca, leaf = row["ca"], row["leaf"]
        u, v = (ca, leaf) if outward else (leaf, ca)
        gbs, exp = (lk.get("gbs"), lk.get("expected_gbs")) if lk.get("usable") else (0.0, 0.0)
        return {"from": u, "to": v, "from_name": self.name(u), "to_name": self.name(v),
                "from_port": (lk.get("ports") or {}).get(u), "to_port": (lk.get("ports") or {}).get(v),
                "tier": f"host-{self.tier(leaf)}" if outward else f"{self.tier(leaf)}-host",
                "width": lk.get("width"), "speed": lk.get("speed"), "state": lk.get("state"), "links": 1,
                "gbs": gbs, "expected_gbs": exp, "usable": bool(lk.get("usable")),
                "stage_bundles": 1, "stage_links": 1, "stage_gbs": gbs, "stage_expected_gbs": exp}

    def _stage_link(self, u: str, v: str, stage: Stage) -> dict:
        e = self.graph.edges[u, v]
        first = next(lk for lk in e["links"] if lk["usable"])
        return {"from": u, "to": v, "from_name": self.name(u), "to_name": self.name(v),
                "from_port": first["ports"][u], "to_port": first["ports"][v],
                "tier": f"{self.tier(u)}-{self.tier(v)}", "width": first["width"], "speed": first["speed"],
                "state": first["state"], "links": e["usable_count"], "gbs": e["gbs"],
                "expected_gbs": e["expected_gbs"], "usable": True, "stage_bundles": stage.bundles,
                "stage_links": stage.links, "stage_gbs": None if stage.unknown_rate else stage.gbs,
                "stage_expected_gbs": None if stage.unknown_rate else stage.expected_gbs}

    def _switch(self, n: str, choices: int) -> dict:
        return {"node": n, "name": self.name(n), "tier": self.tier(n), "choices": choices}

    def _discovered(self, ra: dict, rb: dict, lr: LeafRoute) -> dict:
        first, last = self._host_link(ra, True), self._host_link(rb, False)
        links = [first] + [self._stage_link(u, v, s) for (u, v), s in zip(zip(lr.path, lr.path[1:]), lr.stages)]
        links.append(last)
        switches = [self._switch(n, c) for n, c in zip(lr.path, lr.levels)]
        own = min(first["gbs"] or 0.0, last["gbs"] or 0.0)
        own_exp = min(first["expected_gbs"] or 0.0, last["expected_gbs"] or 0.0)
        known = None not in (first["gbs"], last["gbs"])
        if lr.hops == 0:
            cut_gbs, cut_exp, where, stage, bundles = own, own_exp, "host link", None, []
        else:
            leaf_gbs = lr.cut_gbs
            narrower = leaf_gbs is not None and leaf_gbs < own
            cut_gbs = min(own, leaf_gbs) if leaf_gbs is not None else None
            cut_exp = min(own_exp, lr.cut_expected_gbs) if lr.cut_expected_gbs is not None else None
            where = "fabric" if narrower else "host link"
            stage = 1 + lr.cut_stages[0] if narrower and lr.cut_stages else None  # links[0] is the host link
            bundles = [[self.name(u), self.name(v)] for u, v in lr.cut] if narrower else []
        if not known:
            cut_gbs = cut_exp = None
        return {"fabric": "discovered", "reason": None, "reachable": True, "src": ra, "dst": rb, "links": links,
                "switches": switches, "equal_cost_paths": lr.equal_cost_paths,
                "equal_cost_port_paths": lr.equal_cost_port_paths,
                "cut": {"gbs": cut_gbs, "expected_gbs": cut_exp, "where": where,
                        "leaf_cut_gbs": lr.cut_gbs if lr.hops else None,
                        "leaf_cut_expected_gbs": lr.cut_expected_gbs if lr.hops else None,
                        "bundles": bundles, "stage": stage}}

    def _direct(self, host_a: str, nic_a: str, ra: dict, host_b: str, nic_b: str, rb: dict) -> dict:
        """Two adapters cabled to each other (no switch), or one of them not cabled at all."""
        G = self.graph
        if G.has_edge(ra["ca"], rb["ca"]):
            e = G.edges[ra["ca"], rb["ca"]]
            lk = next((x for x in e["links"] if x["usable"]), e["links"][0])
            gbs, exp = (lk["gbs"], lk["expected_gbs"]) if lk["usable"] else (0.0, 0.0)
            link = {"from": ra["ca"], "to": rb["ca"], "from_name": ra["ca_name"], "to_name": rb["ca_name"],
                    "from_port": lk["ports"][ra["ca"]], "to_port": lk["ports"][rb["ca"]], "tier": "host-host",
                    "width": lk["width"], "speed": lk["speed"], "state": lk["state"], "links": e["usable_count"],
                    "gbs": gbs, "expected_gbs": exp, "usable": lk["usable"], "stage_bundles": 1,
                    "stage_links": e["usable_count"], "stage_gbs": gbs, "stage_expected_gbs": exp}
            return {"fabric": "discovered", "reason": None, "reachable": bool(lk["usable"]), "src": ra, "dst": rb,
                    "links": [link], "switches": [], "equal_cost_paths": 1, "equal_cost_port_paths": 1,
                    "cut": {"gbs": gbs, "expected_gbs": exp, "where": "host link", "leaf_cut_gbs": None,
                            "leaf_cut_expected_gbs": None, "bundles": [], "stage": None}}
        host, nic, row = (host_a, nic_a, ra) if not ra.get("leaf") else (host_b, nic_b, rb)
        port = f" port {row['port']}" if row.get("port") is not None else ""
        return _assumed(f"{host}/{nic} ({row['ca_name']}{port}) has no link to a switch in this capture", ra, rb)


def _assumed(reason: str | None, ra: Mapping | None, rb: Mapping | None) -> dict:
    return {"fabric": "assumed", "reason": reason, "reachable": False, "src": ra, "dst": rb, "links": [],
            "switches": [], "equal_cost_paths": 0, "equal_cost_port_paths": 0, "cut": None}
