"""The fabric's islands and rule L07 (islands joined by fewer links than hosts need).

``islands(view)`` splits a fabric (``fabric_paths.FabricView``) into the parts its hosts hang from
once the top tier and same-tier links are set aside (or into its disconnected parts);
``rule_l07`` judges each part's links to the rest against what its hosts could send, and a job's
adapters on either side of a cut (``fabric_rules`` runs it with the other rules).
"""

from __future__ import annotations

from collections.abc import Mapping

import networkx as nx

from apps.domain.fabric import is_host_ca, is_switch
from apps.domain.fabric_jobs import job_nics
from apps.domain.fabric_paths import FabricView
from apps.domain.fabric_rule_base import L07, evidence_row, fabric_finding
from apps.domain.findings.base import fmt_gbs, join
from apps.domain.names import natural_key

__all__ = ["islands", "rule_l07"]

_TIER_ORDER = {"leaf": 0, "spine": 1, "core": 2}


def _tier_rank(t: str | None) -> int:
    if t in _TIER_ORDER:
        return _TIER_ORDER[t]
    if t and t.startswith("tier") and t[4:].isdigit():
        return int(t[4:]) - 1
    return -1


def islands(view: FabricView) -> list[dict]:
    """The fabric's islands: its parts with hosts once the top tier (three tiers or more) and the
    links between switches of one tier are set aside, or its disconnected parts.

    Returns ``[{"switches": set, "leaves": [names], "host_links", "host_gbs", "links", "gbs"}]``
    (``links``/``gbs``: usable cables from the island to the rest of the fabric), or ``[]`` when
    the fabric is one island.
    """
    return view.memo("fabric_islands.islands", lambda: _islands(view))


def _islands(view: FabricView) -> list[dict]:
    G = view.graph
    switches = [n for n in G if is_switch(G, n)]
    ranks = {n: _tier_rank(G.nodes[n].get("tier")) for n in switches}
    top = max(ranks.values(), default=-1)
    keep = {n for n in switches if ranks[n] >= 0 and (top < 2 or ranks[n] < top)}
    H = nx.Graph()
    H.add_nodes_from(keep)
    for u, v, e in G.edges(data=True):
        if u in keep and v in keep and e["usable_count"] and ranks[u] != ranks[v]:
            H.add_edge(u, v)
    parts = [c for c in nx.connected_components(H) if any(is_host_ca(G, m) for n in c for m in G[n])]
    if len(parts) < 2:
        full = nx.Graph()
        full.add_nodes_from(switches)
        full.add_edges_from((u, v) for u, v, e in G.edges(data=True)
                            if u in ranks and v in ranks and e["usable_count"])
        parts = [c for c in nx.connected_components(full) if any(is_host_ca(G, m) for n in c for m in G[n])]
        if len(parts) < 2:
            return []
    out = []
    for part in parts:
        host_links = host_gbs = links = 0
        gbs = 0.0
        for n in part:
            for m, e in G.adj[n].items():
                if is_host_ca(G, m):
                    host_links += e["usable_count"]
                    host_gbs += e["gbs"]
                elif m in ranks and m not in part:
                    links += e["usable_count"]
                    gbs += e["gbs"]
        leaves = sorted((G.nodes[n]["name"] or n for n in part if G.nodes[n].get("tier") == "leaf"), key=natural_key)
        out.append({"switches": part, "leaves": leaves, "host_links": host_links, "host_gbs": round(host_gbs, 4),
                    "links": links, "gbs": round(gbs, 4)})
    return sorted(out, key=lambda i: natural_key(i["leaves"][0] if i["leaves"] else ""))


def rule_l07(view: FabricView, docs: Mapping[str, Mapping], job_hosts: list[str] | None) -> list[dict]:
    """L07 Islands joined by fewer links than hosts need.

    Condition: the fabric falls into islands (:func:`islands`) and an island's links to the rest
    carry less than the host links of the smaller side (the island's, or all the others'): what
    its hosts could send to the rest at once. MED; HIGH when an island has no link to the rest (the
    fabric is split) or, for a job, when the job's adapters on the smaller side of an island's cut
    have more bandwidth than the cut. Source: max-flow min-cut; NCCL connect.cc L95-113.
    """
    parts = islands(view)
    if not parts:
        return []
    total = sum(i["host_gbs"] for i in parts)
    short: dict[tuple, list[dict]] = {}  # islands of one shape are one finding (a fat tree's pods)
    for i in parts:
        need = min(i["host_gbs"], total - i["host_gbs"])
        if i["links"] == 0 or i["gbs"] < need - 1e-6:
            shape = (len(i["leaves"]), i["links"], i["gbs"], i["host_links"], i["host_gbs"], need)
            short.setdefault(shape, []).append(i)
    out = []
    for (leaves, links, gbs, host_links, host_gbs, need), group in short.items():
        firsts = [i["leaves"][0] if i["leaves"] else "?" for i in group]
        if len(group) == 1:
            label = f"The island of {_leaves(leaves)} from {firsts[0]}"
        else:
            shown = ", ".join(firsts[:3]) + (f" and {len(group) - 3} more" if len(group) > 3 else "")
            label = f"{len(group)} islands of {_leaves(leaves)} (from {shown}): each"
        evidence = [evidence_row(first, None, None, None, **_island_ev(i)) for first, i in zip(firsts, group)]
        if links == 0:
            msg = (f"{label} has no usable link to the rest of the fabric: its {host_links} host links cannot "
                   "reach the other hosts at all.")
            out.append(fabric_finding(L07, [], firsts[:4], msg, evidence, severity="HIGH"))
            continue
        msg = (f"{label} reaches the rest of the fabric over {links} cables ({fmt_gbs(gbs)} per direction) while "
               f"its {host_links} host links carry {fmt_gbs(host_gbs)}: {round(need / gbs, 2)}:1 for traffic "
               "between it and the rest.")
        out.append(fabric_finding(L07, [], firsts[:4], msg, evidence))
    if job_hosts:
        out += _job_islands(view, docs, job_hosts, parts)
    return out


def _leaves(n: int) -> str:
    return f"{n} leaf" if n == 1 else f"{n} leaves"


def _island_ev(i: Mapping) -> dict:
    return {"leaves": len(i["leaves"]), "links": i["links"], "gbs": i["gbs"], "host_links": i["host_links"],
            "host_gbs": i["host_gbs"]}


def _job_islands(view: FabricView, docs: Mapping[str, Mapping], job_hosts: list[str], parts: list[dict]) -> list[dict]:
    side: dict[int, list[tuple[str, str, float]]] = {}
    for h in job_hosts:
        for nic, r in job_nics(view, docs, h):
            lk = view.cable(r) if r else None
            if not lk or not lk.get("usable"):
                continue
            k = next((k for k, i in enumerate(parts) if r["leaf"] in i["switches"]), None)
            if k is not None:
                side.setdefault(k, []).append((h, nic, lk["gbs"] or 0.0))
    if len(side) < 2:
        return []
    total = sum(g for rows in side.values() for _h, _n, g in rows)
    out = []
    for k, rows in sorted(side.items()):
        i = parts[k]
        mine = sum(g for _h, _n, g in rows)
        need = min(mine, total - mine)
        if i["gbs"] >= need - 1e-6:
            continue
        hosts = sorted({h for h, _n, _g in rows}, key=natural_key)
        first = i["leaves"][0] if i["leaves"] else "?"
        msg = (f"The job spans islands: {len(hosts)} of its hosts ({join(hosts[:6])}"
               + (f" and {len(hosts) - 6} more" if len(hosts) > 6 else "")
               + f") {'sits' if len(hosts) == 1 else 'sit'} in the island of {_leaves(len(i['leaves']))} from "
               f"{first}, whose {i['links']} cables to the rest carry {fmt_gbs(i['gbs'])} per direction, less than "
               f"the {fmt_gbs(need)} its adapters on the smaller side can send across; every ring of the job crosses "
               "that cut.")
        out.append(fabric_finding(L07, hosts, i["leaves"][:4], msg,
                                   [evidence_row(first, None, h, None, **_island_ev(i)) for h in hosts], severity="HIGH"))
    return out
