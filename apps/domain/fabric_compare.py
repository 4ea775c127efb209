"""Compare two fabric graphs (``apps/domain/fabric.py``): what changed between two discoveries.

``compare_fabrics(G_old, G_new)`` answers "what happened to the fabric between these two
moments?": links that went down or came up, cables that moved (a CA or switch port now cabled to
another peer), links that trained at another width or speed, and switches or adapters that
appeared or disappeared. ``G_old`` is *before*, ``G_new`` *after*; neither is changed.

Returns a plain dict (JSON-ready)::

    {"changed": bool,
     "summary": [str, ...],       # one plain sentence per change, most important first (below)
     "links_down": [LINK], "links_up": [LINK],
     "moved": [{"end": END, "from": END, "to": END}],   # END "end" is now cabled to "to", was to "from"
     "rate_changes": [{**LINK, "old_width", "old_speed", "old_gbs"}],   # LINK holds the new figures
     "state_changes": [{**LINK, "old_state"}],          # iblinkinfo states (Active, Initializing...)
     "switches_added": [NODE], "switches_removed": [NODE],
     "cas_added": [NODE], "cas_removed": [NODE],
     "renamed": [{"node", "old_name", "new_name"}],
     "counts": {key: len(list) for each list above}}

    LINK = {"a": END, "b": END, "width", "speed", "gbs", "state"}   # a: the switch end (the lower
           # tier, then the name, for switch-to-switch links)
    END  = {"node", "name", "type", "port"}
    NODE = {"node", "name", "type", "kind", "tier", "host", "links"}   # links: cables it had/has

Nodes are matched by GUID: the node ids of both graphs (``ib:<guid>``), and where they differ (an
``iblinkinfo`` names a CA by its port GUID, ``ibnetdiscover`` by its node GUID) by any GUID the
node is known by: its own, its node GUID, its ports' GUIDs. Names are never used to match (a
node-name map renames nodes without changing them); a new name is reported as ``renamed``.

A physical link is the pair of its ends (node, port). A link of *before* missing *after* went
down, one of *after* missing *before* came up, unless a cable move explains it: an end whose
peer differs between the two (both present) is a move, reported once per cable (adapters'
ends first, then switches' from the leaves up; an end whose old and new links are both explained
by moves already reported is not reported again, so two adapters swapping leaf ports are two
moves, not four). ``ibnetdiscover`` lists linked ports only, so an adapter whose only link went
down disappears from it: its link is reported down, with the adapter gone.

Summary sentences, in this order: links down (one sentence per switch that disappeared, with its
link count), moves, width/speed changes, state changes, links up (one per new switch), adapters
and switches that appeared or disappeared without a link to say so, renames. Ports are named
``<node name> port <n>``; an adapter's port 1 is named by the adapter alone (``node17 mlx5_3``).

>>> from apps.domain.fabric import build_fabric
>>> old = {"switches": [{"guid": "0x1", "name": "leaf07"}], "cas": [{"guid": "0xa", "name": "node17 mlx5_3"}],
...        "links": [{"a": {"guid": "0x1", "port": 12}, "b": {"guid": "0xa", "port": 1}, "width": "4X",
...                   "speed": "NDR"}]}
>>> new = {"switches": [{"guid": "0x1", "name": "leaf07"}], "cas": [], "links": []}
>>> compare_fabrics(build_fabric(old), build_fabric(new))["summary"]
['leaf07 port 12 to node17 mlx5_3 went down (node17 mlx5_3 is gone from the discovery)']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import networkx as nx

from apps.domain.names import natural_key

__all__ = ["compare_fabrics", "fabric_links", "describe_end"]

_TIER_ORDER = {"leaf": 0, "spine": 1, "core": 2}

End = tuple[str, Any]  # (node id, port)


# --- reading a graph -------------------------------------------------------------------------------


def fabric_links(G: nx.Graph) -> dict[frozenset, dict]:
    """Every physical link of ``G`` keyed by its two ends ``frozenset({(node, port), (node, port)})``.

    Values are the link records of the edge bundles (``ports``, ``width``, ``speed``, ``state``,
    ``gbs``...), as ``build_fabric`` made them.
    """
    out: dict[frozenset, dict] = {}
    for u, v, d in G.edges(data=True):
        for lk in d["links"]:
            out[frozenset(((u, lk["ports"][u]), (v, lk["ports"][v])))] = lk
    return out


def _guids(G: nx.Graph, n: str) -> set[str]:
    d = G.nodes[n]
    out = {g for g in (d.get("guid"), d.get("node_guid")) if g}
    out.update(p["port_guid"] for p in d["ports"].values() if p.get("port_guid"))
    return out


def _identity(G_old: nx.Graph, G_new: nx.Graph) -> dict[str, str]:
    """``{new node id: old node id}`` for the nodes of ``G_new`` that ``G_old`` knows under another id."""
    by_guid: dict[str, str] = {}
    for n in G_old:
        for g in _guids(G_old, n):
            by_guid.setdefault(g, n)
    out: dict[str, str] = {}
    taken = set(G_new)
    for n in G_new:
        if n in G_old:
            continue
        match = next((by_guid[g] for g in sorted(_guids(G_new, n)) if g in by_guid), None)
        if match is not None and match not in taken:
            out[n] = match
            taken.add(match)
    return out


def _peers(links: Iterable[frozenset]) -> dict[End, End]:
    out: dict[End, End] = {}
    for key in links:
        a, b = tuple(key)
        out[a], out[b] = b, a
    return out


# --- naming ---------------------------------------------------------------------------------------


class _Names:
    """Names, types and tiers of nodes, read from the newer graph first (a node gone is read from the older)."""

    def __init__(self, G_new: nx.Graph, G_old: nx.Graph, old_of: dict[str, str]):
        self.G_new, self.G_old = G_new, G_old
        self.new_of = {old: new for new, old in old_of.items()}

    def data(self, n: str) -> dict:
        new = self.new_of.get(n, n)
        if new in self.G_new:
            return self.G_new.nodes[new]
        return self.G_old.nodes[n]

    def name(self, n: str) -> str:
        return self.data(n).get("name") or n

    def node_type(self, n: str) -> str:
        return self.data(n)["type"]

    def rank(self, n: str) -> tuple:
        """Sort key of an end's node: adapters, then switches from the leaves up, then by name."""
        d = self.data(n)
        if d["type"] != "switch":
            return (0, 0, natural_key(self.name(n)))
        return (1, _TIER_ORDER.get(d.get("tier") or "", 9), natural_key(self.name(n)))

    def end(self, e: End) -> dict:
        n, port = e
        return {"node": self.new_of.get(n, n), "name": self.name(n), "type": self.node_type(n), "port": port}

    def node(self, G: nx.Graph, n: str) -> dict:
        d = G.nodes[n]
        return {"node": n, "name": d.get("name") or n, "type": d["type"], "kind": d.get("kind"),
                "tier": d.get("tier"), "host": d.get("host"), "links": sum(e["count"] for e in G.adj[n].values())}


def describe_end(end: dict) -> str:
    """``leaf07 port 12``; an adapter's port 1 is the adapter alone (``node17 mlx5_3``)."""
    if end["type"] != "switch" and end["port"] == 1:
        return end["name"]
    return f"{end['name']} port {end['port']}"


def _link_dict(names: _Names, key: frozenset, lk: dict) -> dict:
    a, b = sorted(key, key=lambda e: (names.node_type(e[0]) != "switch", names.rank(e[0]), str(e[1])))
    return {"a": names.end(a), "b": names.end(b), "width": lk["width"], "speed": lk["speed"], "gbs": lk["gbs"],
            "state": lk["state"]}


def _link_text(link: dict) -> str:
    return f"{describe_end(link['a'])} to {describe_end(link['b'])}"


def _rate_text(width: str | None, speed: str | None, gbs: float | None) -> str:
    rate = " ".join(x for x in (width, speed) if x) or "unknown rate"
    return f"{rate} ({gbs:g} GB/s)" if gbs is not None else rate


# --- the comparison -------------------------------------------------------------------------------


def _moves(names: _Names, old_peer: dict[End, End], new_peer: dict[End, End]) -> tuple[list[dict], set[frozenset]]:
    """Cable moves (see the module docstring) and the link keys (in old ids) they explain."""
    candidates = [e for e in old_peer if e in new_peer and old_peer[e] != new_peer[e]]
    candidates.sort(key=lambda e: (names.rank(e[0]), str(e[1])))
    explained: set[frozenset] = set()
    moves = []
    for e in candidates:
        was, now = frozenset((e, old_peer[e])), frozenset((e, new_peer[e]))
        if was in explained and now in explained:
            continue
        explained.update((was, now))
        moves.append({"end": names.end(e), "from": names.end(old_peer[e]), "to": names.end(new_peer[e])})
    return moves, explained


def _node_changes(G_old: nx.Graph, G_new: nx.Graph, old_of: dict[str, str], names: _Names) -> dict[str, list]:
    new_as_old = {old_of.get(n, n): n for n in G_new}
    out: dict[str, list] = {"switches_added": [], "switches_removed": [], "cas_added": [], "cas_removed": [],
                            "renamed": []}
    for n in G_old:
        if n not in new_as_old:
            key = "switches_removed" if G_old.nodes[n]["type"] == "switch" else "cas_removed"
            out[key].append(names.node(G_old, n))
            continue
        old_name, new_name = G_old.nodes[n].get("name"), G_new.nodes[new_as_old[n]].get("name")
        if old_name and new_name and old_name != new_name:
            out["renamed"].append({"node": new_as_old[n], "old_name": old_name, "new_name": new_name})
    old_nodes = set(G_old)
    for n in G_new:
        if old_of.get(n, n) not in old_nodes:
            key = "switches_added" if G_new.nodes[n]["type"] == "switch" else "cas_added"
            out[key].append(names.node(G_new, n))
    for key in out:
        out[key].sort(key=lambda r: natural_key(r.get("name") or r.get("new_name") or r["node"]))
    return out


def compare_fabrics(G_old: nx.Graph, G_new: nx.Graph) -> dict:
    """What changed between two fabric graphs; see the module docstring for the result.

    Parameters
    ----------
    G_old, G_new : nx.Graph
        ``apps.domain.fabric.build_fabric`` graphs: before and after.

    Returns
    -------
    dict
        ``changed``, ``summary`` (sentences), ``links_down``, ``links_up``, ``moved``,
        ``rate_changes``, ``state_changes``, ``switches_added``/``_removed``,
        ``cas_added``/``_removed``, ``renamed``, ``counts``.
    """
    old_of = _identity(G_old, G_new)
    names = _Names(G_new, G_old, old_of)
    old_links = fabric_links(G_old)
    new_links = {frozenset((old_of.get(n, n), p) for n, p in key): lk for key, lk in fabric_links(G_new).items()}
    moved, explained = _moves(names, _peers(old_links), _peers(new_links))

    down = [_link_dict(names, k, lk) for k, lk in old_links.items() if k not in new_links and k not in explained]
    up = [_link_dict(names, k, lk) for k, lk in new_links.items() if k not in old_links and k not in explained]
    rate, state = [], []
    for key, lk in new_links.items():
        before = old_links.get(key)
        if before is None:
            continue
        if (before["width"], before["speed"]) != (lk["width"], lk["speed"]):
            rate.append({**_link_dict(names, key, lk), "old_width": before["width"], "old_speed": before["speed"],
                         "old_gbs": before["gbs"]})
        if before["state"] != lk["state"] and None not in (before["state"], lk["state"]):
            state.append({**_link_dict(names, key, lk), "old_state": before["state"]})
    for rows in (down, up, rate, state):
        rows.sort(key=lambda r: (natural_key(r["a"]["name"]), str(r["a"]["port"])))
    result = {"links_down": down, "links_up": up, "moved": moved, "rate_changes": rate, "state_changes": state,
              **_node_changes(G_old, G_new, old_of, names)}
    result["counts"] = {k: len(v) for k, v in result.items()}
    result["summary"] = _sentences(result)
    result["changed"] = bool(result["summary"])
    return result


# --- sentences ------------------------------------------------------------------------------------


def _gone_or_new(link: dict, nodes: set[str]) -> str | None:
    """The name of the end of ``link`` whose node is in ``nodes`` (an adapter that appeared or disappeared)."""
    for end in (link["b"], link["a"]):
        if end["node"] in nodes:
            return end["name"]
    return None


def _sentences(r: dict) -> list[str]:
    out: list[str] = []
    switches_gone = {n["node"] for n in r["switches_removed"]}
    switches_new = {n["node"] for n in r["switches_added"]}
    cas_gone = {n["node"] for n in r["cas_removed"]}
    cas_new = {n["node"] for n in r["cas_added"]}
    for sw in r["switches_removed"]:
        out.append(f"switch {sw['name']}{' (' + sw['tier'] + ')' if sw['tier'] else ''} is gone from the discovery: "
                   f"its {sw['links']} link{'s' if sw['links'] != 1 else ''} went down")
    said_gone, said_new = set(), set()
    for link in r["links_down"]:
        if link["a"]["node"] in switches_gone or link["b"]["node"] in switches_gone:
            continue
        gone = _gone_or_new(link, cas_gone)
        said_gone.update(e["node"] for e in (link["a"], link["b"]) if e["node"] in cas_gone)
        out.append(f"{_link_text(link)} went down" + (f" ({gone} is gone from the discovery)" if gone else ""))
    for m in r["moved"]:
        out.append(f"{describe_end(m['end'])} moved from {describe_end(m['from'])} to {describe_end(m['to'])}")
    for link in r["rate_changes"]:
        out.append(f"{_link_text(link)}: {_rate_text(link['old_width'], link['old_speed'], link['old_gbs'])} -> "
                   f"{_rate_text(link['width'], link['speed'], link['gbs'])}")
    for link in r["state_changes"]:
        out.append(f"{_link_text(link)}: {link['old_state']} -> {link['state']}")
    for sw in r["switches_added"]:
        out.append(f"new switch {sw['name']}{' (' + sw['tier'] + ')' if sw['tier'] else ''} with {sw['links']} "
                   f"link{'s' if sw['links'] != 1 else ''}")
    for link in r["links_up"]:
        if link["a"]["node"] in switches_new or link["b"]["node"] in switches_new:
            continue
        new = _gone_or_new(link, cas_new)
        said_new.update(e["node"] for e in (link["a"], link["b"]) if e["node"] in cas_new)
        out.append(f"{_link_text(link)} came up" + (f" ({new} is new in the discovery)" if new else ""))
    for ca in r["cas_removed"]:
        if ca["node"] not in said_gone:
            out.append(f"{ca['name']} is gone from the discovery")
    for ca in r["cas_added"]:
        if ca["node"] not in said_new:
            out.append(f"{ca['name']} is new in the discovery")
    for rn in r["renamed"]:
        out.append(f"{rn['old_name']} is now named {rn['new_name']}")
    return out

