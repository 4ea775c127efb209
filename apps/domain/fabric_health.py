"""What the fabric's own account shows wrong with its links and ports: links trained below what
their kind usually runs at (``degraded_links``) and ports that are not Active (``down_ports``), for
the fabric page, the exports and the fabric rules (L01, L02). The graph is ``fabric.build_fabric``'s.
"""

from __future__ import annotations

from collections import Counter

import networkx as nx

from apps.domain.bandwidth import ib_link_gbps
from apps.domain.fabric import USABLE_STATES, is_host_ca, is_switch

__all__ = ["degraded_links", "down_ports"]


def _link_class(G: nx.Graph, n: str) -> str | None:
    d = G.nodes[n]
    if d["type"] == "switch":
        return "switch links"
    return "host links" if is_host_ca(G, n) else None


def _edge_class(G: nx.Graph, u: str, v: str) -> str | None:
    """``switch links`` (switch to switch), ``host links`` (to a host adapter), else None (SHARP nodes...)."""
    if is_switch(G, u) and is_switch(G, v):
        return "switch links"
    return "host links" if is_host_ca(G, u) or is_host_ca(G, v) else None


def _norms(G: nx.Graph) -> tuple[dict, dict]:
    """The usual (width, speed) per link class, fabric-wide and per switch (a unique most common one)."""
    fabric: dict[str, Counter] = {}
    per_switch: dict[tuple[str, str], Counter] = {}
    for u, v, d in G.edges(data=True):
        for lk in d["links"]:
            if ib_link_gbps(lk["width"], lk["speed"]) is None:
                continue
            for s, other in ((u, v), (v, u)):
                cls = _link_class(G, other)
                if is_switch(G, s) and cls:
                    per_switch.setdefault((s, cls), Counter())[(lk["width"], lk["speed"])] += 1
            cls = _edge_class(G, u, v)
            if cls:
                fabric.setdefault(cls, Counter())[(lk["width"], lk["speed"])] += 1

    def usual(counter: Counter):
        top = counter.most_common(2)
        if not top or top[0][1] < 2 or (len(top) > 1 and top[1][1] == top[0][1]):
            return None
        return top[0][0]

    return ({k: usual(c) for k, c in fabric.items()}, {k: usual(c) for k, c in per_switch.items()})


def degraded_links(G: nx.Graph) -> list[dict]:
    """Links trained below what they can do.

    A link is degraded when iblinkinfo says so (``Could be 4X`` / ``Could be 53.125 Gbps``: both
    ends support more), or when its rate (width x lane rate) is below the usual one of its class
    (host links, switch-to-switch links), fabric-wide or among the same switch's links of that
    class (the most common width/speed, when one is most common). Split ports designed as such
    (every host link 2X) are the norm, so they are not flagged.

    Returns
    -------
    list of dict
        ``{"a", "a_name", "a_port", "b", "b_name", "b_port", "width", "speed", "gbs", "usual_width",
        "usual_speed", "reasons"}``, one per physical link.
    """
    fabric_norm, switch_norm = _norms(G)
    out = []
    for u, v, d in G.edges(data=True):
        cls = _edge_class(G, u, v)
        for lk in d["links"]:
            reasons, usual = [], None
            if lk["could_be_width"] or lk["could_be_speed"]:
                could = " ".join(x for x in (lk["could_be_width"], lk["could_be_speed"]) if x)
                reasons.append(f"iblinkinfo: could be {could}")
                usual = (lk["could_be_width"] or lk["width"], lk["could_be_speed"] or lk["speed"])
            rate = ib_link_gbps(lk["width"], lk["speed"])
            for label, norm in ((f"the fabric's {cls}", fabric_norm.get(cls)),
                                *[(f"the {cls} of {G.nodes[s]['name']}", switch_norm.get((s, cls)))
                                  for s in (u, v) if is_switch(G, s)]):
                if norm and rate is not None and rate < (ib_link_gbps(*norm) or 0):
                    reasons.append(f"below {label} (most are {norm[0]} {norm[1]})")
                    usual = usual or norm
            if reasons:
                out.append({"a": u, "a_name": G.nodes[u]["name"], "a_port": lk["ports"][u], "b": v,
                            "b_name": G.nodes[v]["name"], "b_port": lk["ports"][v], "width": lk["width"],
                            "speed": lk["speed"], "gbs": lk["gbs"], "usual_width": usual[0] if usual else None,
                            "usual_speed": usual[1] if usual else None, "reasons": reasons})
    return out


def down_ports(G: nx.Graph) -> list[dict]:
    """Ports the tools print as not carrying traffic: ``Down`` (no link, or disabled) or up but not
    ``Active`` (``Initializing``/``Armed``: no subnet manager brought it up).

    ibnetdiscover prints linked ports only, so a fabric built from it shows none here.

    Returns
    -------
    list of dict
        ``{"node", "name", "type", "port", "state", "phys_state", "peer"}`` sorted by node and port.
    """
    out = []
    for n, d in G.nodes(data=True):
        for port, p in d["ports"].items():
            if p["state"] not in USABLE_STATES:
                out.append({"node": n, "name": d["name"], "type": d["type"], "port": port, "state": p["state"],
                            "phys_state": p["phys_state"], "peer": p["peer"]})
    return sorted(out, key=lambda r: (r["node"], r["port"]))
