"""Shared links under load: how many flows cross each root complex, root port, switch uplink
and inter-socket link, and how far demand exceeds capacity (rules P09, P10, H02).

Two scenarios, both per direction (every flow also runs the other way, symmetrically):

* ``gpu_to_nic``: every GPU sends to the NIC NCCL gives it (``nic_paths.nic_choice``), over PXN
  where NCCL would, else directly (GPUDirect RDMA) or staged in host memory near the GPU. A flow
  wants ``min(its GPU's PCIe link, what its NIC takes / GPUs sharing that NIC)``: together the
  flows toward a NIC never want more than the NIC takes (:func:`nic_capacity`: its port rate,
  capped by its own PCIe link where a source reports that link, as NCCL caps it), so a NIC
  shared by many GPUs is the limit (rule G05), not the switch uplinks above them. A flow toward
  a NIC whose rate no source reports (``topo -m`` alone) wants an unknown amount: it is counted
  in ``flows`` but adds nothing to ``demand_gbs``, and an element none of whose flows has a
  known demand is not listed (the report cannot size that traffic).
* ``all_pairs``: every GPU sends to every other GPU at once; NVLink/NVSwitch pairs leave PCIe
  alone. A flow wants ``min(GPU a link, GPU b link) / (GPUs - 1)``: a GPU splits its own link
  over its peers.

An element is reported when at least two flows share it (the inter-socket link: when any flow
crosses it); in ``all_pairs``, a link with one GPU below it (that GPU's own link split over its
peers) is not a shared element. ``devices`` are the GPUs and NICs below the element whose flows
cross it (for an inter-socket link: every device at either end of a flow crossing it). Nested links carrying exactly the same flows (a root port and the
one switch below it, an inferred switch inside another, or two inferred sub-switches of one PXB
tree) are one row: the tightest link, the others
named in ``also``. ``demand_gbs`` sums the flows' wants; ``capacity_gbs`` is the element's link
(expected GB/s, else spec); ``ratio = demand / capacity`` (> 1: oversubscribed).

Capacity links: a switch's uplink (switch -> parent edge); a root port's link (root port ->
root complex edge when it carries a figure, else the link to its only child); a root complex's
link to its CPU (``cpu_link``, reported only when that link has a figure); each inter-socket
edge. Flows are counted on the same edge the capacity comes from, except for a root port whose
capacity comes from its child link, where flows through the root port are counted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

import networkx as nx

from apps.domain import nic_paths, paths
from apps.domain.bandwidth import ib_port
from apps.domain.hostgraph import ancestors
from apps.domain.names import natural_sorted

__all__ = ["contention", "flows_gpu_to_nic", "flows_all_pairs", "elements", "nic_capacity"]


def _gbs(d: Mapping) -> float | None:
    v = d.get("expected_gbs")
    return v if v is not None else d.get("spec_gbs")


def _own_link(G: nx.Graph, n: str) -> float | None:
    p = G.nodes[n].get("parent")
    if p in G and G.has_edge(n, p):
        return _gbs(G.edges[n, p])
    return None


def _min(*vals: float | None) -> float | None:
    v = [x for x in vals if x is not None]
    return min(v) if v else None


def nic_capacity(G: nx.Graph, n: str) -> float | None:
    """GB/s per direction NIC port ``n`` takes: its port rate (``bandwidth.ib_port``, expected)
    capped by its own PCIe link when a source reports that link (NCCL takes min(NIC speed, PCIe
    link), topo.cc L418, L657 [S3]); None when no source reports the rate."""
    port = ib_port(G.nodes[n].get("rate_gbps")).expected_gbs
    if port is None:
        return None
    p = G.nodes[n].get("parent")
    reported = p in G and G.has_edge(n, p) and not G.edges[n, p].get("assumed")
    return _min(port, _own_link(G, n) if reported else None)


def flows_gpu_to_nic(G: nx.Graph, choice: Mapping[str, dict] | None = None) -> list[tuple[paths.Route, float | None]]:
    """(route, demand GB/s) for every GPU sending to its NIC at once; the flows toward one NIC
    together want at most what the NIC takes (:func:`nic_capacity`)."""
    choice = nic_paths.nic_choice(G) if choice is None else choice
    share: dict[str, int] = defaultdict(int)
    for rec in choice.values():
        share[rec["nic"]] += 1
    out = []
    for g, rec in choice.items():
        route = rec["pxn_route"] or rec["route"]
        n = rec["nic"]
        cap = nic_capacity(G, n)
        out.append((route, _min(_own_link(G, g), cap / share[n]) if cap is not None else None))
    return out


def flows_all_pairs(G: nx.Graph, routes: Iterable[paths.Route] | None = None) -> list[tuple[paths.Route, float | None]]:
    """(route, demand GB/s) for every ordered GPU pair transferring at once (one route per
    unordered pair; the reverse direction is symmetric)."""
    if routes is None:
        routes, _ = paths.all_gpu_pairs(G)
    n = max(1, len(paths.gpu_names(G)) - 1)
    out = []
    for r in routes:
        want = _min(_own_link(G, r.src), _own_link(G, r.dst))
        out.append((r, want / n if want is not None else None))
    return out


def elements(G: nx.Graph) -> list[tuple[str, str, str, tuple, float | None]]:
    """(element id, label, kind, counting key, capacity GB/s) for every shared-capacity point."""
    out = []
    for n, d in G.nodes(data=True):
        kind = d.get("kind")
        parent = d.get("parent")
        label = d.get("label") or n
        if kind == "switch" and parent in G and G.has_edge(n, parent):
            name = label if "switch" in label.lower() else f"PCIe switch {label}"
            out.append((n, f"uplink of {name}" + (f" [{n}]" if label != n else ""), "switch_uplink", ("edge", tuple(sorted((n, parent)))),
                        _gbs(G.edges[n, parent])))
        elif kind == "root_port":
            up = _gbs(G.edges[n, parent]) if parent in G and G.has_edge(n, parent) else None
            kids = [c for c in G.neighbors(n) if G.nodes[c].get("parent") == n]
            label = label if label.lower().startswith("root port") else f"root port {label}"
            if up is not None:
                out.append((n, label, "root_port", ("edge", tuple(sorted((n, parent)))), up))
            elif len(kids) == 1:
                out.append((n, label, "root_port", ("node", n), _gbs(G.edges[n, kids[0]])))
        elif kind == "root_complex" and parent in G and G.has_edge(n, parent):
            cap = _gbs(G.edges[n, parent])
            if cap is not None:
                out.append((n, label if label.lower().startswith(("root complex", "host bridge")) else
                            f"root complex {label}", "root_complex", ("edge", tuple(sorted((n, parent)))), cap))
    for u, v, d in G.edges(data=True):
        if d.get("kind") == "inter_socket":
            a, b = sorted((u, v))
            out.append((f"{a}-{b}", f"inter-socket link {a}-{b}", "inter_socket", ("edge", (a, b)), _gbs(d)))
    return sorted(out, key=lambda e: (e[2], e[0]))


def _crossed(route: paths.Route) -> dict[str, set]:
    """What a route crosses, by counting key kind: {"edge": its links' keys, "node": the graph
    nodes on its steps (host-memory and NVSwitch pseudo-steps aside)}."""
    return {"edge": {paths.edge_key(s) for s in route.steps},
            "node": {n for s in route.steps if s[0] not in ("mem", "nvsw", "nvsw_in") for n in s}}


def _below(G: nx.Graph, device: str, elem: str) -> bool:
    return device in G and elem in ancestors(G, device)[1:]


def _tally(G: nx.Graph, scenario: str, flows: list[tuple[paths.Route, float | None]]) -> list[dict]:
    rows = []
    marked = [(r, w, _crossed(r)) for r, w in flows]
    for elem, label, kind, key, cap in elements(G):
        using = [(r, w) for r, w, crossed in marked if key[1] in crossed[key[0]]]
        if len(using) < (1 if kind == "inter_socket" else 2) or cap in (None, 0):
            continue
        devices = natural_sorted({x for r, _ in using for x in (r.src, r.dst)})
        if kind != "inter_socket" and elem in G:
            devices = [x for x in devices if _below(G, x, elem)]  # the far ends are not under it
            if scenario == "all_pairs" and len(devices) < 2:
                continue  # one GPU's own link split over its peers (ratio <= 1 by construction)
        known = [w for _, w in using if w is not None]
        if not known:
            continue  # no flow here has a known demand (NIC rates not reported)
        demand = round(sum(known), 4)
        rows.append(({id(r) for r, _ in using}, {
            "element": elem, "label": label, "kind": kind, "scenario": scenario, "devices": devices,
            "flows": len(using), "demand_gbs": demand, "capacity_gbs": cap, "ratio": round(demand / cap, 4),
            "also": [],
        }))
    return _merge_nested(G, rows)


def _merge_nested(G: nx.Graph, rows: list[tuple[set, dict]]) -> list[dict]:
    """One row per shared element: links in one chain (a root port and the switch below it, an
    inferred switch nested in another) that carry exactly the same flows are one bottleneck; keep
    the tightest (lowest capacity, the upper one on a tie) and list the others in ``also``."""
    keep: list[tuple[set, dict]] = []
    for flows, row in rows:
        twin = next((k for k in keep if k[0] == flows and row["kind"] != "inter_socket"
                     and k[1]["kind"] != "inter_socket" and (_nested(G, k[1]["element"], row["element"])
                                                              or _both_inferred(G, k[1]["element"], row["element"]))),
                    None)
        if twin is None:
            keep.append((flows, row))
            continue
        other = twin[1]
        upper_row = row if _below(G, other["element"], row["element"]) else other
        better = min((row, other), key=lambda r: (r["capacity_gbs"], r is not upper_row))
        worse = other if better is row else row
        better["also"] = sorted(set(better["also"] + worse["also"] + [worse["element"]]))
        keep[keep.index(twin)] = (flows, better)
    return [r for _, r in keep]


def _both_inferred(G: nx.Graph, a: str, b: str) -> bool:
    """Two inferred switches (topo -m alone): sibling sub-switches of one PXB tree are a guess, the
    flows they both carry are one shared element."""
    return a in G and b in G and bool(G.nodes[a].get("inferred")) and bool(G.nodes[b].get("inferred"))


def _nested(G: nx.Graph, a: str, b: str) -> bool:
    return a in G and b in G and (_below(G, a, b) or _below(G, b, a))


def contention(G: nx.Graph, *, choice: Mapping[str, dict] | None = None,
               pair_routes: Iterable[paths.Route] | None = None) -> list[dict]:
    """The snapshot document's ``contention`` list for both scenarios, worst ratio first.

    >>> G = nx.Graph()
    >>> contention(G)
    []
    """
    rows = _tally(G, "gpu_to_nic", flows_gpu_to_nic(G, choice))
    rows += _tally(G, "all_pairs", flows_all_pairs(G, pair_routes))
    return sorted(rows, key=lambda r: (-r["ratio"], r["scenario"], r["element"]))
