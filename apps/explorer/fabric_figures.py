"""The fabric figure: an InfiniBand fabric graph (``apps.domain.fabric.build_fabric``) drawn with Plotly.

Pure functions, as in ``figures.py``: :func:`fabric_drawing` decides what to draw (boxes in rows,
the cable bundles between them), :func:`fabric_spec` turns it into the plain ``{"data", "layout"}``
dict, :func:`fabric_figure` into a validated ``plotly.graph_objects.Figure`` (what the tests read)
and :func:`fabric_figure_json` into the page's JSON, drawn by ``static/js/plots.js`` (no cloud
buttons). Nothing here touches the database.

What is drawn:

* **Rows are tiers**, top down: switches no host reaches (``unattached``, and nodes the tools name
  only by LID), then ``tierN`` ... ``core``, ``spine``, ``leaf``, and the **hosts below their leaf**:
  one marker per host and leaf (its HCAs on that leaf), so a rail-optimised host appears under each
  of its leaves. An HCA nobody names is drawn on its own ("HCA no host claims"). SHARP aggregation
  nodes (a CA inside every Quantum switch) are counted in their switch's hover, not drawn.
* **Links** are coloured by speed; the legend says it in words (``NDR 4X 50 GB/s``: generation,
  width and GB/s per direction of one cable, ``bandwidth.ib_link``). Line width grows with the
  number of cables in a bundle. A link trained below its capability (``fabric_health.degraded_links``) is
  overlaid in thick translucent red; a node with a port down that leads somewhere (a peer is known,
  or the port is physically up but not Active) carries a red cross. Ports down with nothing
  attached (empty ports) are only counted in the hover. Hover a marker or the middle of a link for
  switch, port, peer, width and speed.
* **Clicks**: every marker carries ``customdata = [action, target]``: ``["host", URL]`` opens the
  host's page (hosts topoweb knows; ``host_urls`` maps fabric host names to pages), ``["expand",
  ID]`` reloads the page with ``?expand=ID`` (``static/js/fabric.js``).
* **At scale** (more than ``budget`` markers, 150 by default) the hosts of each leaf are one
  marker, and the switches are drawn by group, never one by one: leaves grouped by the set of
  spines they share, every higher tier by the set of lower groups it reaches, and the hosts of
  each leaf group as one marker; a group marker shows its member count and each bundle between
  groups its cable count and summed capacity. One group at a time expands (``expand="leaf-3"``):
  its members are drawn one by one, and their hosts too when they fit in the budget (else one
  marker per leaf, which expands by the leaf's node id). A tier with more than ``MAX_GROUPS``
  distinct sets (an irregular fabric) is cut into ``MAX_GROUPS`` runs of neighbouring groups.
  A fabric of ``SWITCHES_ALONE`` switches or fewer, or one whose groups would be more than half
  its switches, keeps every switch (mode ``switches``) with the hosts of each leaf as one marker,
  expanded by the leaf's node id.

Bandwidths are GB/s per direction (``bandwidth.ib_link``), as everywhere in topoweb. Names that
came from the fabric are HTML-escaped before they go into figure text (see ``figures.esc``).
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import plotly.graph_objects as go

from apps.domain.bandwidth import ib_link, ib_link_gbps
from apps.domain.fabric_health import degraded_links, down_ports
from apps.domain.names import natural_key
from apps.explorer.figures import FONT, esc, to_json

__all__ = ["BUDGET", "MAX_GROUPS", "SWITCHES_ALONE", "Box", "Bundle", "FabricDrawing", "fabric_drawing", "fabric_spec",
           "fabric_figure", "fabric_figure_json", "link_class_label", "short_name", "problem_ports",
           "switch_groups", "SPEED_COLOURS"]

BUDGET = 150  # markers drawn one by one at most; above it the switches are drawn by group
SWITCHES_ALONE = 24  # this many switches or fewer are drawn one by one even past the budget (hosts by leaf)
MAX_GROUPS = 48  # groups per tier at most (an irregular fabric's groups are merged in runs beyond it)
LABEL_LIMIT = 24  # adapters on no switch drawn one by one at most (more: one marker for them all)

# One colour per IB generation, slow to fast; red is kept for what is wrong.
SPEED_COLOURS = {"SDR": "#adb5bd", "DDR": "#94d82d", "QDR": "#fab005", "FDR10": "#f08c00", "FDR": "#e64980",
                 "EDR": "#15aabf", "HDR": "#1c7ed6", "NDR": "#2b8a3e", "XDR": "#7048e8"}
UNKNOWN_SPEED = "#495057"
DEGRADED, DOWN = "#e03131", "#c92a2a"
TIER_COLOURS = {"leaf": "#1c7ed6", "spine": "#0b7285", "core": "#5f3dc4"}
OTHER_TIER = "#868e96"
HOST_COLOUR, UNCLAIMED_COLOUR = "#2f9e44", "#868e96"
PLURAL = {"leaf": "leaves", "spine": "spines", "core": "core switches", "unattached": "unattached switches",
          "unknown": "nodes known by LID only"}
_LIVE_PHYS = ("LinkUp",)  # physically up: a port in this state that is not Active leads somewhere


# -- what to draw ---------------------------------------------------------------------------------


@dataclass
class Box:
    """One marker: a switch, a group of switches, a host's HCAs on one leaf, or the hosts of a leaf (group).

    ``kind``: ``switch``, ``group``, ``host``, ``ca`` (an HCA no host claims), ``hosts`` (aggregate).
    ``nodes``: the fabric nodes it stands for; ``action``/``target``: what a click does.
    """

    id: str
    kind: str
    row: int
    tier: str
    label: str
    nodes: list[str]
    hover: list[str] = field(default_factory=list)
    host: str | None = None
    action: str = ""
    target: str = ""
    parent: str | None = None  # the leaf box a host box hangs under
    x: float = 0.0
    down: int = 0  # ports down that lead somewhere
    idle: int = 0  # ports down with nothing attached
    count: int = 1  # what the marker counts (switches in a group, hosts in an aggregate)


@dataclass
class Bundle:
    """The cables between two boxes."""

    a: str
    b: str
    cables: int = 0
    usable: int = 0
    gbs: float = 0.0
    classes: Counter = field(default_factory=Counter)  # (speed, width) -> usable cables
    degraded: int = 0
    pairs: int = 0  # node pairs (graph edges) behind it
    sample: tuple | None = None  # (u, v, edge data) of the one graph edge, when there is one: ports for the hover


@dataclass
class FabricDrawing:
    """What :func:`fabric_spec` draws. ``mode``: ``detail`` (every switch and host), ``switches`` (every
    switch, the hosts of each leaf as one marker) or ``grouped`` (switches by group)."""

    mode: str
    expanded: str | None
    rows: dict[int, str]
    boxes: dict[str, Box]
    bundles: list[Bundle]
    notes: list[str]
    groups: dict[str, list[str]]  # group id -> member switch nodes (every group of the fabric)

    def expanded_members(self) -> list[Box]:
        """The switch boxes of what is expanded: a group's members, or the one leaf whose hosts are open."""
        if not self.expanded:
            return []
        if self.expanded in self.boxes:
            return [self.boxes[self.expanded]]
        members = set(self.groups.get(self.expanded) or ())
        return [b for b in self.boxes.values() if b.kind == "switch" and b.nodes[0] in members]

    def expanded_label(self) -> str:
        """``group leaf-3: 25 leaves``, or ``the hosts of leaf-00-07``: what is drawn one by one."""
        members = self.expanded_members()
        if self.expanded in self.boxes:
            return f"the hosts of {self.boxes[self.expanded].label}"
        words = PLURAL.get(members[0].tier, "switches") if members else "switches"
        return f"group {self.expanded}: {len(members)} {words}"


def short_name(name: str | None) -> str:
    """A switch's node description without the Mellanox decoration: ``MF0;sw-01:MQM9701/U1`` -> ``sw-01``.

    >>> short_name("MF0;A09-P1-IBLEAF-01-01:MQM9701/U1"), short_name("leaf-00-03"), short_name(None)
    ('A09-P1-IBLEAF-01-01', 'leaf-00-03', '?')
    """
    if not name:
        return "?"
    m = re.match(r"^MF\d;([^:]+):", name)
    return m.group(1) if m else name


def link_class_label(speed: str | None, width: str | None) -> str:
    """The legend's words for one cable: ``NDR 4X 50 GB/s`` (GB/s per direction).

    >>> link_class_label("NDR", "4X"), link_class_label("EDR", "4X"), link_class_label(None, "4X")
    ('NDR 4X 50 GB/s', 'EDR 4X 12.5 GB/s', 'speed unknown')
    """
    gbs = ib_link(width, speed).spec_gbs
    if gbs is None:
        return "speed unknown"
    return f"{speed} {width} {gbs:g} GB/s"


def _class_rank(cls: tuple) -> tuple:
    speed, width = cls
    return (-(ib_link_gbps(width, speed) or 0.0), speed or "", width or "")


def problem_ports(G: nx.Graph, down: Iterable[Mapping] | None = None) -> tuple[list[dict], list[dict]]:
    """Down ports split in two: those that lead somewhere (a peer is known, or the port is physically
    up but not Active: no subnet manager brought it up) and those with nothing attached (an empty port,
    or a cable whose far end is dead: the fabric cannot tell which)."""
    leads, idle = [], []
    for p in down if down is not None else down_ports(G):
        (leads if p.get("peer") or p.get("phys_state") in _LIVE_PHYS else idle).append(dict(p))
    return leads, idle


def _row_names(G: nx.Graph) -> dict[str, int]:
    """Tier -> row: hosts 0, leaf 1, spine 2, core 3, tierN N; unattached / LID-only nodes on top."""
    tiers = {d.get("tier") for _n, d in G.nodes(data=True) if d["type"] == "switch"}
    rows = {"leaf": 1, "spine": 2, "core": 3}
    for t in tiers:
        m = re.match(r"tier(\d+)$", t or "")
        if m:
            rows[t] = int(m.group(1))
    top = max([r for t, r in rows.items() if t in tiers] or [0]) + 1
    return {**{t: r for t, r in rows.items() if t in tiers}, "unattached": top, "unknown": top}


def _classes(G: nx.Graph) -> dict[str, str]:
    """Node -> ``switch`` (switches, and nodes named by LID only: they may be switches), ``hca`` or ``ca``."""
    out = {}
    for n, d in G.nodes(data=True):
        t = d["type"]
        out[n] = "switch" if t in ("switch", "unknown") else "hca" if t == "ca" and d.get("kind") == "hca" else "ca"
    return out


def _tiers(G: nx.Graph) -> dict[str, str]:
    """Switch-like node -> its tier (``unattached`` when no leaf reaches it, ``unknown`` for LID-only nodes)."""
    return {n: (d.get("tier") or "unattached") if d["type"] == "switch" else "unknown"
            for n, d in G.nodes(data=True) if d["type"] in ("switch", "unknown")}


def _switch_order(G: nx.Graph, n: str) -> tuple:
    return natural_key(short_name(G.nodes[n].get("name")) + "\x00" + n)


# -- groups ---------------------------------------------------------------------------------------


def switch_groups(G: nx.Graph, rows: Mapping[str, int], max_groups: int = MAX_GROUPS) -> dict[str, list[str]]:
    """Group id (``leaf-1``, ``spine-2``...) -> member switches, in drawing order.

    Leaves are grouped by the set of higher-tier switches they are cabled to; every higher tier,
    bottom up, by the set of lower groups it reaches; unattached and LID-only nodes form one group
    each. Past ``max_groups`` distinct sets in a tier, neighbouring groups are merged in runs.
    """
    tier_of = _tiers(G)
    by_tier: dict[str, list[str]] = defaultdict(list)
    for n, tier in tier_of.items():
        by_tier[tier].append(n)
    group_of: dict[str, str] = {}
    out: dict[str, list[str]] = {}
    adj = G.adj
    for tier in sorted(by_tier, key=lambda t: rows.get(t, 99)):
        row = rows.get(tier, 99)
        members = sorted(by_tier[tier], key=lambda n: _switch_order(G, n))
        keyed: dict[Any, list[str]] = {}
        for n in members:
            if tier in ("unattached", "unknown"):
                key: Any = tier
            elif tier == "leaf":
                key = frozenset(m for m in adj[n] if m in tier_of and rows.get(tier_of[m], 0) > row)
            else:
                key = frozenset(group_of[m] for m in adj[n] if m in group_of and rows.get(tier_of[m], 99) < row)
            keyed.setdefault(key, []).append(n)
        sets = list(keyed.values())  # in order of each set's first member
        if len(sets) > max_groups:
            per = math.ceil(len(sets) / max_groups)
            sets = [sorted(sum(sets[i:i + per], []), key=lambda n: _switch_order(G, n))
                    for i in range(0, len(sets), per)]
        for i, nodes in enumerate(sets, 1):
            gid = f"{tier}-{i}"
            out[gid] = nodes
            for n in nodes:
                group_of[n] = gid
    return out


# -- hosts ----------------------------------------------------------------------------------------


def _host_units(G: nx.Graph, cls: Mapping[str, str],
                host_of_ca: Mapping[str, str]) -> dict[str | None, dict[str, list[str]]]:
    """Leaf (None: on no switch) -> {host name, or the CA's id when none names it: [its HCAs there]}."""
    units: dict[str | None, dict[str, list[str]]] = defaultdict(dict)
    hosts = G.nodes(data="host")
    for ca, nbrs in G.adjacency():
        if cls[ca] != "hca":
            continue
        key = host_of_ca.get(ca) or hosts[ca] or ca
        leaves = [m for m in nbrs if cls[m] == "switch"] or [None]
        if len(leaves) > 1:
            leaves.sort()
        for leaf in leaves:
            units[leaf].setdefault(key, []).append(ca)
    return units


def _ca_port_lines(G: nx.Graph, ca: str, leaf: str | None) -> list[str]:
    d = G.nodes[ca]
    out = []
    for port, p in sorted(d["ports"].items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        peer = p.get("peer")
        if leaf is not None and peer != leaf:
            continue
        where = (f"{esc(short_name(G.nodes[peer].get('name')))} port {esc(p.get('peer_port'))}"
                 if peer in G else "no peer")
        state = f", {esc(p['state'])}" if p.get("state") else ""
        out.append(f"{esc(d.get('name') or ca)} port {esc(port)} -> {where}: "
                   f"{esc(link_class_label(p.get('speed'), p.get('width')))}{state}")
    return out or [f"{esc(d.get('name') or ca)} ({esc(d.get('guid'))})"]


# -- the drawing ----------------------------------------------------------------------------------


@dataclass
class _Structure:
    """What every drawing of one graph shares, computed once per graph (and join): node classes and
    tiers, rows, groups, hosts per leaf, and the cables summed per leaf (the host side at scale)."""

    cls: dict[str, str]
    tier: dict[str, str]
    rows: dict[str, int]
    groups: dict[str, list[str]]
    group_of: dict[str, str]
    units: dict[str | None, dict[str, list[str]]]
    switch_edges: list[tuple]  # (u, v, cables, usable, gbs, ((speed, width), n)..., edge data) between switches
    ca_edges: dict[str | None, list[tuple]]  # leaf (None: CA to CA) -> (ca, other end, cables, usable, gbs, ...)
    ca_sums: dict[str, tuple]  # leaf -> (cables, usable, gbs, classes Counter, pairs) of its host links
    sharp: Counter  # switch -> SHARP aggregation nodes (and routers) cabled to it


def _edge_row(d: Mapping) -> tuple:
    classes = tuple(Counter((lk["speed"], lk["width"]) for lk in d["links"] if lk["usable"]).items())
    return d["count"], d["usable_count"], d["gbs"] or 0.0, classes, d


def _structure(G: nx.Graph, host_of_ca: Mapping[str, str], max_groups: int) -> _Structure:
    cls, tier = _classes(G), _tiers(G)
    rows = _row_names(G)
    groups = switch_groups(G, rows, max_groups)
    switch_edges: list[tuple] = []
    ca_edges: dict[str | None, list[tuple]] = defaultdict(list)
    sums: dict[str, list] = {}
    sharp: Counter = Counter()
    for u, v, d in G.edges(data=True):
        cu, cv = cls[u], cls[v]
        if cu == "switch" and cv == "switch":
            switch_edges.append((u, v, *_edge_row(d)))
        elif "ca" in (cu, cv):
            for sw, other in ((u, v), (v, u)):
                if cls[sw] == "switch" and cls[other] == "ca":
                    sharp[sw] += 1
        elif cu == "switch" or cv == "switch":
            leaf, ca = (u, v) if cu == "switch" else (v, u)
            row = _edge_row(d)
            ca_edges[leaf].append((ca, leaf, *row))
            acc = sums.setdefault(leaf, [0, 0, 0.0, Counter(), 0])
            acc[0] += row[0]
            acc[1] += row[1]
            acc[2] += row[2]
            acc[3].update(dict(row[3]))
            acc[4] += 1
        else:  # two host adapters cabled back to back
            ca_edges[None].append((u, v, *_edge_row(d)))
    return _Structure(cls, tier, rows, groups, {n: g for g, m in groups.items() for n in m},
                      _host_units(G, cls, host_of_ca), switch_edges, dict(ca_edges),
                      {leaf: tuple(acc) for leaf, acc in sums.items()}, sharp)


_STRUCTURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_STRUCTURES_LOCK = threading.Lock()


def _shared_structure(G: nx.Graph, host_of_ca: Mapping[str, str], max_groups: int) -> _Structure:
    """:func:`_structure`, kept per graph object for the joins last seen with it (graphs are shared and
    never changed: ``apps.ingest.fabrics.fabric_graph``)."""
    with _STRUCTURES_LOCK:
        kept = _STRUCTURES.get(G)
        for join, groups, value in kept or ():
            if join is host_of_ca and groups == max_groups:
                return value
    value = _structure(G, host_of_ca, max_groups)
    with _STRUCTURES_LOCK:
        kept = [k for k in (_STRUCTURES.get(G) or []) if k[0] is not host_of_ca or k[1] != max_groups][-3:]
        _STRUCTURES[G] = kept + [(host_of_ca, max_groups, value)]
    return value


class _Builder:
    """Builds a FabricDrawing in named stages (see :func:`fabric_drawing`)."""

    def __init__(self, G: nx.Graph, structure: _Structure, host_urls: Mapping[str, str], degraded: list[dict],
                 down: list[dict], budget: int):
        self.G, self.s, self.host_urls = G, structure, host_urls
        self.degraded, self.down, self.budget = degraded, down, budget
        self.cls, self.tier, self.rows = structure.cls, structure.tier, structure.rows
        self.groups, self.group_of, self.units = structure.groups, structure.group_of, structure.units
        self.boxes: dict[str, Box] = {}
        self.switch_box: dict[str, str] = {}
        self.unit_box: dict[tuple[str | None, str], str] = {}  # (leaf, CA) -> box, for hosts drawn one by one
        self.agg_of_leaf: dict[str | None, str] = {}  # leaf -> the box of all its hosts, where aggregated
        self.notes: list[str] = []

    # stage 1: which boxes
    def detail_size(self) -> int:
        return len(self.tier) + sum(len(u) for u in self.units.values())

    def add_switch(self, n: str) -> None:
        tier = self.tier[n]
        self.boxes[n] = Box(n, "switch", self.rows[tier], tier, short_name(self.G.nodes[n].get("name") or n), [n])
        self.switch_box[n] = n

    def add_group(self, gid: str, members: list[str]) -> None:
        if len(members) == 1:  # a group of one is drawn as its switch (a click on a leaf draws its hosts)
            self.add_switch(members[0])
            if self.units.get(members[0]):
                self.boxes[members[0]].action, self.boxes[members[0]].target = "expand", gid
            return
        tier = self.tier[members[0]]
        words = PLURAL.get(tier, f"{tier} switches")
        self.boxes[gid] = Box(gid, "group", self.rows[tier], tier, f"{len(members)} {words}", list(members),
                              action="expand", target=gid, count=len(members))
        for n in members:
            self.switch_box[n] = gid

    def add_units(self, leaf: str | None, parent: str | None) -> None:
        """One box per host (or unnamed HCA) cabled to ``leaf``, hung under box ``parent``."""
        for key, cas in self.units.get(leaf, {}).items():
            bid = f"{parent or 'none'}|{key}"
            named = key not in self.cls  # a host name, not a CA's own id
            url = self.host_urls.get(key) if named else None
            box = self.boxes.get(bid)
            if box is None:
                label = key if named else (self.G.nodes[key].get("name") or key)
                box = self.boxes[bid] = Box(bid, "host" if named else "ca", 0, "host", label, [],
                                            host=key if named else None, action="host" if url else "",
                                            target=url or "", parent=parent)
            box.nodes.extend(c for c in cas if c not in box.nodes)
            for ca in cas:
                self.unit_box[(leaf, ca)] = bid

    def add_aggregate(self, leaves: list[str | None], parent: str, target: str) -> None:
        """One box for every host cabled to ``leaves`` (a leaf group, or one leaf of an expanded group)."""
        bid = f"hosts|{parent}"
        box = self.boxes.get(bid) or Box(bid, "hosts", 0, "host", "", [], action="expand" if target else "",
                                         target=target, parent=parent)
        hosts: set[str] = set()
        for leaf in leaves:
            units = self.units.get(leaf, {})
            hosts.update(units)
            for cas in units.values():
                box.nodes.extend(cas)
            if units:
                self.agg_of_leaf[leaf] = bid
        if box.nodes:
            box.count = len(hosts)
            box.label = f"{len(hosts)} host{'s' if len(hosts) != 1 else ''}"
            self.boxes[bid] = box

    def choose(self, expand: str | None) -> tuple[str, str | None]:
        """Detail when everything fits the budget; else groups, one of them expanded."""
        if self.detail_size() <= self.budget:
            for members in self.groups.values():
                for n in members:
                    self.add_switch(n)
            for n in self.switch_box:  # hosts below their leaf (or below a spine they are cabled to)
                self.add_units(n, n)
            self.add_units(None, None)
            return "detail", None
        gid, focus = self._expanded(expand)
        if self.switches_alone():
            return self.choose_switches(gid, focus)
        for g, members in self.groups.items():
            if g == gid:
                for n in members:
                    self.add_switch(n)
            else:
                self.add_group(g, members)
        for g, members in self.groups.items():
            cabled = [n for n in members if self.units.get(n)]
            if not cabled:
                continue
            if g != gid:
                self.add_aggregate(cabled, self.switch_box[members[0]], g)
                continue
            fits = sum(len(self.units[n]) for n in cabled) + len(members) <= self.budget
            for n in cabled:
                if fits or n == focus:
                    self.add_units(n, n)
                else:
                    self.add_aggregate([n], n, n)
        if len(self.units.get(None, {})) <= LABEL_LIMIT:
            self.add_units(None, None)
        else:
            self.add_aggregate([None], "none", "")
        return "grouped", gid

    def switches_alone(self) -> bool:
        """Every switch one by one (hosts by leaf) when there are few, or when grouping them would hardly
        draw fewer markers; never past the budget."""
        switches = len(self.tier)
        few = switches <= SWITCHES_ALONE or len(self.groups) > switches / 2
        return few and switches + sum(1 for n in self.tier if self.units.get(n)) <= self.budget

    def choose_switches(self, gid: str | None, focus: str | None) -> tuple[str, str | None]:
        """Every switch; the hosts of each leaf as one marker, but those of ``focus`` (a leaf) or of the
        leaves of group ``gid`` one by one (when they fit in the budget)."""
        for members in self.groups.values():
            for n in members:
                self.add_switch(n)
        opened = {focus} if focus else set(self.groups.get(gid) or ())
        if sum(len(self.units.get(n, {})) for n in opened) + len(self.boxes) > self.budget + len(opened):
            opened = {focus} if focus else set()
        for n in self.switch_box:
            if not self.units.get(n):
                continue
            if n in opened:
                self.add_units(n, n)
            else:
                self.add_aggregate([n], n, n)
        if len(self.units.get(None, {})) <= LABEL_LIMIT:
            self.add_units(None, None)
        else:
            self.add_aggregate([None], "none", "")
        return "switches", focus or (gid if opened else None)

    def _expanded(self, expand: str | None) -> tuple[str | None, str | None]:
        if not expand:
            return None, None
        if expand in self.groups:
            return expand, None
        if expand in self.group_of:
            return self.group_of[expand], expand
        self.notes.append(f"nothing to expand called {expand!r}: every group is drawn closed")
        return None, None

    # stage 2: the bundles between boxes
    def box_of(self, n: str, other: str) -> str | None:
        """The box a cable end at ``n`` (cabled to ``other``) is drawn at; None for what is not drawn."""
        box = self.switch_box.get(n)
        if box is not None or self.cls.get(n) != "hca":
            return box
        leaf = other if self.cls.get(other) == "switch" else None
        return self.unit_box.get((leaf, n)) or self.agg_of_leaf.get(leaf)

    def bundles(self) -> list[Bundle]:
        out: dict[tuple[str, str], Bundle] = {}
        order = {bid: (b.row, bid) for bid, b in self.boxes.items()}

        def add(bu: str, bv: str, cables: int, usable: int, gbs: float, classes: Iterable[tuple], pairs: int,
                sample: tuple | None) -> None:
            key = (bu, bv) if order[bu] >= order[bv] else (bv, bu)
            b = out.get(key)
            if b is None:
                b = out[key] = Bundle(*key, sample=sample if pairs == 1 else None)
            else:
                b.sample = None
            b.pairs += pairs
            b.cables += cables
            b.usable += usable
            b.gbs += gbs
            counts = b.classes
            for cls, n in classes:
                counts[cls] += n

        switch_box, unit_box = self.switch_box, self.unit_box
        for u, v, cables, usable, gbs, classes, d in self.s.switch_edges:
            bu, bv = switch_box[u], switch_box[v]
            if bu != bv:  # cables inside a group (leaf to leaf within it) are not drawn
                add(bu, bv, cables, usable, gbs, classes, 1, (u, v, d))
        for leaf, edges in self.s.ca_edges.items():
            agg = self.agg_of_leaf.get(leaf)
            if leaf is not None and agg is not None:
                cables, usable, gbs, classes, pairs = self.s.ca_sums[leaf]
                sample = (edges[0][1], edges[0][0], edges[0][6]) if pairs == 1 else None
                add(switch_box[leaf], agg, cables, usable, gbs, classes.items(), pairs, sample)
                continue
            for ca, other, cables, usable, gbs, classes, d in edges:
                bu, bv = self.box_of(ca, other), self.box_of(other, ca)
                if bu is not None and bv is not None and bu != bv:
                    add(bu, bv, cables, usable, gbs, classes, 1, (other, ca, d))
        for r in self.degraded:
            bu, bv = self.box_of(r["a"], r["b"]), self.box_of(r["b"], r["a"])
            if bu is not None and bv is not None and bu != bv:
                key = (bu, bv) if order[bu] >= order[bv] else (bv, bu)
                if key in out:
                    out[key].degraded += 1
        sharp: Counter = Counter()
        for sw, n in self.s.sharp.items():
            if sw in switch_box:
                sharp[switch_box[sw]] += n
        for bid, n in sharp.items():
            self.boxes[bid].hover.append(f"{n} SHARP aggregation node{'s' if n != 1 else ''} inside (not drawn)")
        return list(out.values())

    # stage 3: ports down
    def mark_down(self, leads: list[dict], idle: list[dict]) -> None:
        for rows, attr in ((leads, "down"), (idle, "idle")):
            for p in rows:
                n = p["node"]
                bid = self.switch_box.get(n)
                if bid is None and self.cls.get(n) == "hca":  # an adapter's port: the box of the host it is in
                    ends = [m for m in self.G.adj[n] if self.cls[m] == "switch"] or [None]
                    bid = next((x for x in (self.box_of(n, m) for m in ends) if x), None)
                if bid:
                    setattr(self.boxes[bid], attr, getattr(self.boxes[bid], attr) + 1)

    # stage 4: what leaves see above them (hover)
    def describe_uplinks(self) -> None:
        spines = {n for n, t in self.tier.items() if self.rows.get(t) == 2}
        if not spines:
            return
        adj = self.G.adj
        names = {m: short_name(self.G.nodes[m].get("name")) for m in spines}
        for box in self.boxes.values():
            if box.tier != "leaf" or box.kind not in ("switch", "group"):
                continue
            seen = set().union(*({m for m in adj[n] if m in spines} for n in box.nodes))
            missing = sorted((names[m] for m in spines - seen), key=natural_key)
            text = f"cabled to {len(seen)} of the {len(spines)} spines"
            if missing and len(seen) >= len(spines) / 2:
                text += ": not to " + ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6
                                                              else "")
            box.hover.insert(0, esc(text))

    # stage 5: where each box sits
    def place(self, bundles: list[Bundle]) -> None:
        """Hosts left to right under their leaf, each leaf over the middle of its hosts; higher rows
        ordered by where their links land below and spread over the same width."""
        hosts = defaultdict(list)
        for b in self.boxes.values():
            if b.row == 0:
                hosts[b.parent].append(b)
        cursor = 0.0
        parents = sorted((b for b in self.boxes.values() if b.row == 1 or (b.row > 1 and hosts.get(b.id))),
                         key=lambda b: (b.row != 1, self._order(b)))
        for p in parents:
            kids = sorted(hosts.get(p.id, []), key=lambda b: natural_key(b.label))
            for i, k in enumerate(kids):
                k.x = cursor + i
            p.x = cursor + (len(kids) - 1) / 2 if kids else cursor
            cursor += max(len(kids), 1) + 0.6
        loose = sorted(hosts.get(None, []) + hosts.get("none", []), key=lambda b: natural_key(b.label))
        for i, k in enumerate(loose):
            k.x = cursor + 0.4 + i
        placed = {b.id for b in parents} | {b.id for b in self.boxes.values() if b.row == 0}
        span = [self.boxes[i].x for i in placed] or [0.0]
        lo, hi = min(span), max(span)
        nbrs = defaultdict(list)
        for bd in bundles:
            nbrs[bd.a].append(bd.b)
            nbrs[bd.b].append(bd.a)
        for row in sorted({b.row for b in self.boxes.values() if b.row > 1}):
            todo = [b for b in self.boxes.values() if b.row == row and b.id not in placed]

            def bary(b: Box) -> tuple:
                xs = [self.boxes[m].x for m in nbrs[b.id] if m in placed and self.boxes[m].row < row]
                return (sum(xs) / len(xs) if xs else (lo + hi) / 2, self._order(b))

            todo.sort(key=bary)
            for i, b in enumerate(todo):
                b.x = (lo + hi) / 2 if len(todo) == 1 else lo + (hi - lo) * i / (len(todo) - 1)
                placed.add(b.id)

    def _order(self, b: Box) -> tuple:
        gid = b.id if b.kind == "group" else self.group_of.get(b.nodes[0], "-0") if b.nodes else "-0"
        return (int(gid.rpartition("-")[2] or 0), _switch_order(self.G, b.nodes[0]) if b.kind == "switch" else ())


def fabric_drawing(G: nx.Graph, *, host_of_ca: Mapping[str, str] | None = None,
                   host_urls: Mapping[str, str] | None = None, degraded: list[dict] | None = None,
                   down: list[dict] | None = None, expand: str | None = None, budget: int = BUDGET,
                   max_groups: int = MAX_GROUPS) -> FabricDrawing:
    """Decide what the fabric figure draws.

    Parameters
    ----------
    G : nx.Graph
        The fabric (``fabric.build_fabric``); read, never changed. What every drawing of it shares
        (groups, hosts per leaf, cables per leaf) is kept per graph object and ``host_of_ca`` object.
    host_of_ca : mapping, optional
        ``{CA node: host}`` from the GUID join (``attach_hosts``); CAs not in it are given to the
        host their node description names, else drawn as "HCA no host claims".
    host_urls : mapping, optional
        ``{host name: URL}`` of the hosts topoweb knows: a click on one opens it.
    degraded, down : list, optional
        ``fabric_health.degraded_links(G)`` / ``down_ports(G)`` when the caller has them already.
    expand : str, optional
        A group id (``leaf-3``), or a leaf's node id inside a group: drawn member by member.
    budget : int
        Markers drawn one by one at most; more and the switches are drawn by group.

    Returns
    -------
    FabricDrawing
    """
    b = _Builder(G, _shared_structure(G, host_of_ca or _NO_JOIN, max_groups), host_urls or {},
                 degraded_links(G) if degraded is None else degraded, down_ports(G) if down is None else down, budget)
    mode, expanded = b.choose(expand)
    bundles = b.bundles()
    b.mark_down(*problem_ports(G, b.down))
    b.describe_uplinks()
    b.place(bundles)
    names = {r: t for t, r in b.rows.items() if any(x.row == r for x in b.boxes.values())}
    names[0] = "hosts"
    top = b.rows["unattached"]
    if top in names:
        names[top] = "unattached" if any(x.tier == "unattached" for x in b.boxes.values()) else "LID only"
    return FabricDrawing(mode, expanded, dict(sorted(names.items())), b.boxes, bundles, b.notes, b.groups)


_NO_JOIN: dict[str, str] = {}  # one object: drawings without a host join share their structure


# -- the figure -----------------------------------------------------------------------------------


def _main_class(b: Bundle) -> tuple:
    """The class most of a bundle's Active cables have (the fastest among equals); ``("down", None)``: none Active."""
    if not b.classes:
        return ("down", None)
    return min(b.classes.items(), key=lambda kv: (-kv[1], _class_rank(kv[0])))[0]


def _line_width(cables: int, mode: str) -> float:
    if mode == "detail":
        return 1.6 + 0.8 * min(cables - 1, 3)
    return round(min(1.5 + 0.6 * math.log2(max(cables, 1)), 6.0), 1)


def _fmt_gbs(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:g}"


def _node_name(G: nx.Graph, n: str) -> str:
    d = G.nodes[n]
    return short_name(d.get("name")) if d["type"] != "ca" else (d.get("name") or n)


def _bundle_hover(drawing: FabricDrawing, G: nx.Graph, b: Bundle) -> str:
    a, c = drawing.boxes[b.a], drawing.boxes[b.b]
    if b.sample is not None:
        u, v, edge = b.sample
        if u not in a.nodes:  # the upper end first: the switch, then what hangs below it
            u, v = v, u
        lines = [f"<b>{esc(_node_name(G, u))} - {esc(_node_name(G, v))}</b>"]
        for lk in edge["links"]:
            state = lk["state"] or ("linked" if lk["usable"] else "?")
            could = " ".join(x for x in (lk["could_be_width"], lk["could_be_speed"]) if x)
            lines.append(f"port {esc(lk['ports'][u])} - port {esc(lk['ports'][v])}: {esc(lk['width'] or '?')} "
                         f"{esc(lk['speed'] or '?')}, {_fmt_gbs(lk['gbs'] or 0)} GB/s, {esc(state)}"
                         + (f" (could be {esc(could)})" if could else ""))
    else:
        lines = [f"<b>{esc(a.label)} - {esc(c.label)}</b>",
                 f"{b.cables:,} cable{'s' if b.cables != 1 else ''} between {b.pairs:,} pairs of nodes"]
        for cls, n in sorted(b.classes.items(), key=lambda kv: _class_rank(kv[0])):
            lines.append(f"{n:,} x {esc(link_class_label(*cls))}")
    lines.append(f"capacity {_fmt_gbs(round(b.gbs, 2))} GB/s per direction")
    if b.cables > b.usable:
        lines.append(f"<b>{b.cables - b.usable} cable{'s' if b.cables - b.usable != 1 else ''} not Active</b>")
    if b.degraded:
        lines.append(f"<b>{b.degraded} degraded (trained below capability)</b>")
    return "<br>".join(lines)


def _box_hover(G: nx.Graph, box: Box, group_of: Mapping[str, str]) -> str:
    if box.kind == "switch":
        n = box.nodes[0]
        d = G.nodes[n]
        ports = d.get("ports") or {}
        lines = [f"<b>{esc(d.get('name') or n)}</b>", f"{esc(box.tier)} switch, GUID {esc(d.get('guid'))}"
                 + (f", LID {esc(d.get('lid'))}" if d.get("lid") is not None else ""),
                 f"{len(ports)} ports listed, {sum(1 for p in ports.values() if p.get('peer'))} cabled"]
        if box.action == "expand":
            lines.append(f"click to draw its hosts (group {esc(group_of.get(n))})")
    elif box.kind == "group":
        names = [short_name(G.nodes[m].get("name")) for m in box.nodes]
        more = f" and {len(names) - 6} more" if len(names) > 6 else ""
        lines = [f"<b>{esc(box.label)}</b> (group {esc(box.id)})", esc(", ".join(names[:6])) + more,
                 "click to draw them one by one"]
    elif box.kind == "hosts":
        where = "this leaf" if box.parent in G else "no switch" if box.parent == "none" else "these leaves"
        lines = [f"<b>{esc(box.label)}</b> with {len(box.nodes):,} HCAs on {where}",
                 "click to draw them one by one" if box.target else ""]
    else:
        leaf = box.parent if box.parent in G else None
        title = f"<b>{esc(box.host)}</b>" if box.kind == "host" else f"<b>{esc(box.label)}</b>: HCA no host claims"
        lines = [title] + [line for ca in box.nodes for line in _ca_port_lines(G, ca, leaf)]
        if box.kind == "host":
            lines.append("click to open its host page" if box.target else "not known to topoweb")
    if box.down:
        lines.append(f"<b>{box.down} port{'s' if box.down != 1 else ''} down that lead{'s' if box.down == 1 else ''}"
                     " somewhere</b>")
    if box.idle:
        lines.append(f"{box.idle} port{'s' if box.idle != 1 else ''} down with nothing attached")
    return "<br>".join(x for x in lines + box.hover if x)


def _marker_style(box: Box) -> tuple[str, str, str]:
    """(legend name, symbol, colour)."""
    if box.kind == "switch":
        name = "node known by LID only" if box.tier == "unknown" else f"{box.tier} switch"
        return name, "square", TIER_COLOURS.get(box.tier, OTHER_TIER)
    if box.kind == "group":
        return (f"group of {PLURAL.get(box.tier, box.tier)} (count inside; click: expand)", "square",
                TIER_COLOURS.get(box.tier, OTHER_TIER))
    if box.kind == "hosts":
        return "hosts of a leaf or group (count inside; click: expand)", "circle", HOST_COLOUR
    if box.kind == "host":
        return ("host (click: its page)", "circle", HOST_COLOUR) if box.target else \
            ("host not known to topoweb", "circle-open", HOST_COLOUR)
    return "HCA no host claims", "diamond-open", UNCLAIMED_COLOUR


def _marker_size(box: Box, room_px: float) -> float:
    """The marker's size: by what it counts, at most 80 % of the room to its neighbours in the row."""
    if box.kind == "group":
        size = 16 + 4 * math.log2(box.count)
    elif box.kind == "hosts":
        size = 12 + 3 * math.log2(max(box.count, 1))
    else:
        size = 14 if box.kind == "switch" else 10
    return round(max(min(size, 34, room_px * 0.8), 5), 1)


def _room(boxes: Mapping[str, Box], px_per_unit: float) -> dict[str, float]:
    """Box id -> pixels to its nearest neighbour in its row (40 for a box alone in its row)."""
    rows: dict[int, list[Box]] = defaultdict(list)
    for b in boxes.values():
        rows[b.row].append(b)
    out = {}
    for row in rows.values():
        row.sort(key=lambda b: b.x)
        for i, b in enumerate(row):
            gaps = [abs(b.x - row[j].x) for j in (i - 1, i + 1) if 0 <= j < len(row)]
            out[b.id] = min(gaps) * px_per_unit if gaps else 40.0
    return out


def _fitted_labels(boxes: Mapping[str, Box], px_per_unit: float) -> dict[str, str]:
    """Box id -> its label, shortened to the room between it and its neighbours in the row (about 6 px
    a character at the labels' size); none where fewer than 5 characters fit (the hover names it)."""
    out: dict[str, str] = {}
    rows: dict[int, list[Box]] = defaultdict(list)
    for b in boxes.values():
        if b.kind not in ("group", "hosts"):
            rows[b.row].append(b)
    for row in rows.values():
        row.sort(key=lambda b: b.x)
        for i, b in enumerate(row):
            gaps = [abs(b.x - row[j].x) for j in (i - 1, i + 1) if 0 <= j < len(row)]
            room = int(min(gaps, default=12.0) * px_per_unit / 6.0) if gaps else 40
            label = b.label
            if len(label) > room:
                label = label[:room - 1] + "\u2026" if room >= 5 else ""
            if label:
                out[b.id] = esc(label)
    return out


def fabric_spec(drawing: FabricDrawing, G: nx.Graph, *, title: str | None = None, height: int = 560,
                width_px: int = 900) -> dict:
    """The figure of a :func:`fabric_drawing` as a plain ``{"data", "layout"}`` dict.

    Traces, in order: one line trace per link class and line width (legend: ``NDR 4X 50 GB/s``,
    ``meta`` = ``link``), the degraded overlay (``meta`` = ``degraded``), invisible link midpoints
    carrying the link hovers (``meta`` = ``link_hover``), one marker trace per marker style
    (``meta`` = ``switch``, ``group``, ``host``, ``hosts``, ``ca``) with ``customdata = [action,
    target]``, and the red crosses of ports down (``meta`` = ``down``). ``width_px`` is the width
    the markers are sized for (a row of many markers gets smaller ones).
    """
    boxes = drawing.boxes
    group_of = {n: g for g, members in drawing.groups.items() for n in members}
    data: list[dict] = []
    lines: dict[tuple, dict] = {}
    bad: dict[str, list] = {"x": [], "y": []}
    mids: dict[str, list] = {"x": [], "y": [], "text": []}
    for b in sorted(drawing.bundles, key=lambda b: (b.a, b.b)):
        a, c = boxes[b.a], boxes[b.b]
        tr = lines.setdefault((_main_class(b), _line_width(b.cables, drawing.mode)), {"x": [], "y": []})
        tr["x"] += [a.x, c.x, None]
        tr["y"] += [a.row, c.row, None]
        if b.degraded:
            bad["x"] += [a.x, c.x, None]
            bad["y"] += [a.row, c.row, None]
        mids["x"].append((a.x + c.x) / 2)
        mids["y"].append((a.row + c.row) / 2)
        mids["text"].append(_bundle_hover(drawing, G, b))
    seen: set = set()
    for (cls, width), tr in sorted(lines.items(), key=lambda kv: ((1,) if kv[0][0][0] == "down"
                                                                 else (0, *_class_rank(kv[0][0])), kv[0][1])):
        down = cls[0] == "down"
        label = "no Active cable" if down else link_class_label(*cls)
        colour = "#ced4da" if down else SPEED_COLOURS.get(cls[0], UNKNOWN_SPEED)
        data.append(dict(type="scatter", mode="lines", x=tr["x"], y=tr["y"], hoverinfo="skip", name=esc(label),
                         legendgroup=label, showlegend=label not in seen, meta="link",
                         line=dict(color=colour, width=width, dash="dot" if down or cls[0] is None else "solid")))
        seen.add(label)
    if bad["x"]:
        data.append(dict(type="scatter", mode="lines", x=bad["x"], y=bad["y"], hoverinfo="skip", opacity=0.45,
                         line=dict(color=DEGRADED, width=8), meta="degraded",
                         name="degraded link (trained below capability)"))
    if mids["x"]:
        data.append(dict(type="scatter", mode="markers", x=mids["x"], y=mids["y"], hovertext=mids["text"],
                         hoverinfo="text", marker=dict(size=9, color="rgba(0,0,0,0)"), showlegend=False,
                         name="links", meta="link_hover"))
    xs = [b.x for b in boxes.values()] or [0.0]
    pad = max(1.0, (max(xs) - min(xs)) * 0.04)
    x_lo, x_hi = min(xs) - pad, max(xs) + pad
    px_per_unit = width_px / max(x_hi - x_lo, 1e-9)
    labels = _fitted_labels(boxes, px_per_unit)
    size = {bid: _marker_size(boxes[bid], room) for bid, room in _room(boxes, px_per_unit).items()}
    styles: dict[tuple, list[Box]] = defaultdict(list)
    for box in boxes.values():
        styles[(_marker_style(box), box.kind)].append(box)
    annotations: list[dict] = []
    for ((name, symbol, colour), kind), items in sorted(styles.items(), key=lambda kv: (-kv[1][0].row, kv[0][0][0])):
        items.sort(key=lambda b: (b.row, b.x))
        counted = kind in ("group", "hosts")
        text = [(str(b.count) if size[b.id] >= 13 else "") if counted else (labels.get(b.id, "") if b.row == 0 else "")
                for b in items]
        for b in items:  # switch names above their marker, on white so the links under them do not cross them
            if not counted and b.row > 0 and labels.get(b.id):
                annotations.append(dict(x=b.x, y=b.row, yshift=14, showarrow=False, text=labels[b.id],
                                        font=dict(size=9.5, color="#1d2330"), bgcolor="rgba(255,255,255,0.85)",
                                        borderpad=1))
        hollow = symbol.endswith("-open")
        data.append(dict(type="scatter", mode="markers+text", x=[b.x for b in items], y=[b.row for b in items],
                         text=text, textposition="middle center" if counted else "bottom center",
                         textfont=dict(size=9 if counted else 9.5, color="#fff" if counted else "#1d2330"),
                         hovertext=[_box_hover(G, b, group_of) for b in items], hoverinfo="text",
                         customdata=[[b.action, b.target] for b in items], meta=kind, name=esc(name),
                         marker=dict(symbol=symbol, size=[size[b.id] for b in items], color=colour,
                                     opacity=1, line=dict(width=1.5 if hollow else 1,
                                                          color=colour if hollow else "#fff"))))
    down = [b for b in boxes.values() if b.down]
    if down:
        data.append(dict(type="scatter", mode="markers", x=[b.x for b in down], y=[b.row + 0.16 for b in down],
                         hovertext=[f"{esc(b.label)}: {b.down} port{'s' if b.down != 1 else ''} down that lead "
                                    "somewhere (see the table of ports down)" for b in down], hoverinfo="text",
                         marker=dict(symbol="x-thin", size=13, line=dict(width=3, color=DOWN), color=DOWN),
                         name="port down (leads somewhere)", meta="down"))
    rows = drawing.rows
    text = title or {
        "grouped": "Fabric by tier, drawn by group: leaves that share their spines, with their hosts (click a group "
                   "to expand it)",
        "switches": "Fabric by tier: every switch, the hosts of each leaf as one marker (click it to draw them)",
    }.get(drawing.mode, "Fabric by tier: switches, hosts below their leaf")
    layout = dict(title=dict(text=text, x=0.01, font=dict(size=14)), height=height, font=FONT, template="none",
                  paper_bgcolor="#ffffff", plot_bgcolor="#ffffff", hovermode="closest",
                  hoverlabel=dict(font=dict(size=12), align="left"), margin=dict(l=90, r=10, t=44, b=10),
                  xaxis=dict(visible=False, range=[x_lo, x_hi]),
                  yaxis=dict(tickvals=list(rows), ticktext=[esc(rows[r]) for r in rows], zeroline=False,
                             showgrid=True, gridcolor="#eef1f6", range=[-0.8, max(rows) + 0.6]),
                  legend=dict(orientation="h", y=-0.02, yanchor="top", x=0, font=dict(size=11)),
                  annotations=annotations)
    members = drawing.expanded_members()
    if members:
        inside = [b.x for b in members] + [b.x for b in boxes.values() if b.parent in {m.id for m in members}]
        top = max(b.row for b in members)
        low = 0 if members[0].tier == "leaf" else min(b.row for b in members)
        layout["shapes"] = [dict(type="rect", x0=min(inside) - 0.5, x1=max(inside) + 0.5, y0=low - 0.45,
                                 y1=top + 0.4, layer="below", line=dict(color="#a5d8ff", width=1),
                                 fillcolor="rgba(28,126,214,0.06)")]
        layout["annotations"].append(dict(x=min(inside) - 0.5, y=low - 0.45, xanchor="left", yanchor="top",
                                          showarrow=False, font=dict(size=11, color="#1864ab"),
                                          text=f"{esc(drawing.expanded_label())} drawn one by one"))
    if not boxes:
        layout["annotations"] = [dict(text="nothing to draw: the fabric lists no switch and no HCA", showarrow=False,
                                      xref="paper", yref="paper", x=0.5, y=0.5)]
    return {"data": data, "layout": layout}


def fabric_figure(G: nx.Graph, **kw: Any) -> go.Figure:
    """The fabric figure as a validated Figure (the tests read ``fig.data``); ``kw`` as :func:`fabric_drawing`."""
    spec = fabric_spec(fabric_drawing(G, **kw), G)
    return go.Figure(data=spec["data"], layout=spec["layout"])


def fabric_figure_json(drawing: FabricDrawing, G: nx.Graph, **kw: Any) -> str:
    """The page's JSON of a drawing (``kw`` as :func:`fabric_spec`)."""
    return to_json(fabric_spec(drawing, G, **kw))
