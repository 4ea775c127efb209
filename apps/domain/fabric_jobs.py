"""Fabric contention of a job: which leaf uplinks its all-reduce flows share, how oversubscribed
the leaves are, and whether every rail of every host lands on its rail's leaf.

Input: a :class:`apps.domain.fabric_paths.FabricView`, the hosts' snapshot documents (optional:
they give each host's compute NICs in rail order) and the job's hosts **in rank order**.

Flow model (NCCL v2.30.7-1):

* **Nodes** are numbered in rank order: a node is added when a rank of a new node is met
  (``src/init.cc`` L1291-1301), so ``hosts[k]`` is node ``k``.
* **Rails.** A channel leaves a node through one NIC and enters the next node through the NIC of
  the same index (``NCCL_CROSS_NIC=0``/``2`` pairs the same rail, ``src/graph/search.cc``
  L601-615; "NET n -> GPU a -> ... -> NET n" L827-833). Rail ``i`` is each host's ``i``-th
  compute NIC (the document's rail order, else the host's NICs in the fabric by name); a host with
  fewer NICs uses NIC ``i mod count`` (its NICs carry more channels).
* **Ring**: each rail's ring goes node ``k`` -> node ``k + 1`` and back to node 0
  (``connectRings``, ``src/graph/connect.cc`` L95-113): one flow per step, at full weight.
* **Tree**: NCCL's double binary tree over the nodes (``ncclGetBtree`` / ``ncclGetDtree``,
  ``src/graph/trees.cc`` L32-67 and L90-112: the second tree mirrors the first for an even node
  count, shifts it by one for an odd one; wired per channel in ``connectTrees``, connect.cc
  L138-175). Every tree edge carries data both ways (reduce up, broadcast down, pipelined) and each
  tree half the data, so each direction of an edge is a flow of weight 0.5 per tree.
* A flow between NICs on one leaf turns there; otherwise it leaves its leaf through the uplinks
  and enters the other leaf through its uplinks (``flows_out``/``flows_in``). Routes spread over
  the uplinks (``fabric_paths``), so ``flows_per_uplink`` is the flows over the uplink cables and
  ``demand_gbs`` the flows' weight times their NIC link rate (GB/s per direction, expected).

Oversubscription of a leaf = host-facing capacity / uplink capacity (usable links, GB/s per
direction, ``fabric.uplink_sharing``): ``oversubscription`` for all the leaf's hosts (its build),
``job_oversubscription`` for the job's; the **design** ratio is the most common host-facing
capacity over the most common uplink capacity among the leaves (what most leaves were built with).

Rails and leaves (:func:`rail_leaves`): a leaf belongs to rail ``r`` (a NIC name) when most of the
host adapters cabled to it carry that name (at least two, more than half), counting only hosts
with more than half the usual adapter count (management and storage nodes on spare leaf ports
are not on rails). The fabric is **rail-optimized** when at least two rails have leaves and 80 %
of those adapters sit on a leaf of their own rail. For a job, a rail's leaf is the leaf most of the
job's hosts' NIC of that name lands on (``rail_leaf``); ``on_rail_leaf`` says whether each NIC is
on a leaf of its own rail (a job spanning scalable units has one leaf per rail per unit).

``job_contention(view, docs, hosts, algorithm="ring")`` returns::

    {"algorithm": "ring" | "tree", "hosts": [...], "nodes": int,
     "missing": [hosts with no adapter in the fabric], "unattached": ["host/NIC" not in the fabric],
     "rails": [{"rail": i, "nics": {host: NIC}, "leaves": {leaf name: NICs}, "crossings": flows between
                leaves, "local": flows turning on one leaf}],
     "leaves": [{"leaf", "name", "hosts", "host_links", "down_gbs", "uplinks", "up_gbs",
                 "oversubscription", "job_oversubscription", "flows_out", "flows_in", "flows",
                 "flows_per_uplink", "demand_gbs", "demand_ratio"}],   # worst demand first
     "oversubscription": max job_oversubscription | None, "design_oversubscription": float | None,
     "demand_ratio": max demand_ratio | None, "worst_leaf": name | None,
     "rail_optimized": bool, "rail_aligned": bool | None,   # None: the fabric is not rail-optimized
     "rail_leaf": {NIC name: {"leaf", "name", "hosts", "of"}},
     "off_rail": [{"host", "nic", "leaf", "leaf_name", "leaf_port", "rail_of_leaf", "rail_leaf_name"}]}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from apps.domain.cluster import rails
from apps.domain.fabric import uplink_sharing
from apps.domain.fabric_paths import FabricView
from apps.domain.names import natural_key

__all__ = ["ALGORITHMS", "job_contention", "rail_leaves", "leaf_loads", "design_oversubscription", "tree_parents",
           "ring_flows", "tree_flows", "job_nics"]

ALGORITHMS = ("ring", "tree")
RAIL_SHARE = 0.5   # a leaf belongs to a rail when more than this share of its adapters carry the name
RAIL_FABRIC = 0.8  # a fabric is rail-optimized when this share of the adapters sits on its own rail's leaf


# --- NCCL's node graphs -----------------------------------------------------------------------------


def _btree_parent(n: int, rank: int) -> int:
    """``ncclGetBtree``'s parent of ``rank`` among ``n`` nodes (trees.cc L32-58); -1 for the root."""
    if rank == 0:
        return -1
    bit = 1
    while bit < n and not bit & rank:
        bit <<= 1
    up = (rank ^ bit) | (bit << 1)
    return rank ^ bit if up >= n else up


def tree_parents(n: int) -> tuple[list[int], list[int]]:
    """The parents of every node in NCCL's two trees (``ncclGetDtree``, trees.cc L90-112): the
    first is the binary tree, the second its mirror (even ``n``) or its shift by one (odd ``n``).

    >>> tree_parents(4)
    ([-1, 2, 0, 2], [1, 3, 1, -1])
    """
    first = [_btree_parent(n, r) for r in range(n)]
    second = []
    for r in range(n):
        if n % 2:
            u = _btree_parent(n, (r - 1 + n) % n)
            second.append(-1 if u == -1 else (u + 1) % n)
        else:
            u = _btree_parent(n, n - 1 - r)
            second.append(-1 if u == -1 else n - 1 - u)
    return first, second


def ring_flows(n: int) -> list[tuple[int, int, float]]:
    """``(from node, to node, weight)`` of one rail's ring (connect.cc L95-113).

    >>> ring_flows(3)
    [(0, 1, 1.0), (1, 2, 1.0), (2, 0, 1.0)]
    """
    return [(k, (k + 1) % n, 1.0) for k in range(n)] if n > 1 else []


def tree_flows(n: int) -> list[tuple[int, int, float]]:
    """``(from node, to node, weight)`` of one rail's double binary tree: each edge both ways, each
    tree half the data."""
    out = []
    for parents in tree_parents(n):
        for child, parent in enumerate(parents):
            if parent >= 0:
                out += [(child, parent, 0.5), (parent, child, 0.5)]
    return out


# --- what the fabric is built like -------------------------------------------------------------------


def leaf_loads(view: FabricView) -> dict[str, dict]:
    """Per leaf with hosts: ``fabric.uplink_sharing`` over every attached host (kept on the view)."""
    return view.memo("fabric_jobs.leaf_loads", lambda: uplink_sharing(view.graph, None, view.attachments))


def design_oversubscription(view: FabricView) -> float | None:
    """The most common host-facing capacity over the most common uplink capacity of the leaves
    (ties: the larger uplink, the smaller host side); None without uplinks."""
    def compute() -> float | None:
        loads = [v for v in leaf_loads(view).values() if v["up_gbs"]]
        if not loads:
            return None
        down = Counter(v["down_gbs"] for v in loads)
        up = Counter(v["up_gbs"] for v in loads)
        d = max(down, key=lambda g: (down[g], -g))
        u = max(up, key=lambda g: (up[g], g))
        return round(d / u, 3)
    return view.memo("fabric_jobs.design", compute)


def rail_leaves(view: FabricView) -> dict:
    """Which rail (NIC name) each leaf carries, and whether the fabric is rail-optimized.

    Returns ``{"leaves": {leaf: {"rail", "adapters", "share"}}, "rail_optimized": bool,
    "on_own": int, "total": int, "usual_adapters": int | None, "skipped": [hosts not compared]}``.
    """
    return view.memo("fabric_jobs.rail_leaves", lambda: _rail_leaves(view))


def _rail_leaves(view: FabricView) -> dict:
    per_host = {h: {nic: r for nic, r in view.host_nics(h).items() if nic and r.get("leaf")} for h in view.hosts()}
    sizes = Counter(len(v) for v in per_host.values() if v)
    usual = max(sizes, key=lambda n: (sizes[n], n)) if sizes else None
    counted = {h: v for h, v in per_host.items() if usual and len(v) > usual / 2}
    skipped = sorted((h for h, v in per_host.items() if v and h not in counted), key=natural_key)
    names: dict[str, Counter] = {}
    for rows in counted.values():
        for nic, r in rows.items():
            names.setdefault(r["leaf"], Counter())[nic] += 1
    leaves = {}
    for leaf, c in names.items():
        nic, n = max(c.items(), key=lambda kv: (kv[1], kv[0]))
        total = sum(c.values())
        if n >= 2 and n > RAIL_SHARE * total:
            leaves[leaf] = {"rail": nic, "adapters": total, "share": round(n / total, 3)}
    total = sum(len(v) for v in counted.values())
    on_own = sum(1 for v in counted.values() for nic, r in v.items() if leaves.get(r["leaf"], {}).get("rail") == nic)
    optimized = len({v["rail"] for v in leaves.values()}) >= 2 and total > 0 and on_own >= RAIL_FABRIC * total
    return {"leaves": leaves, "rail_optimized": optimized, "on_own": on_own, "total": total, "usual_adapters": usual,
            "skipped": skipped}


# --- a job ----------------------------------------------------------------------------------------------


def job_nics(view: FabricView, docs: Mapping[str, Mapping], host: str) -> list[tuple[str, dict | None]]:
    """A host's compute NICs in rail order, each with its attachment row (None: not in the fabric):
    the document's compute NICs (``cluster.rails``) when it has one and the fabric knows any of
    them by name, else the host's NICs in the fabric (by name)."""
    fabric = [(nic, r) for nic, r in view.host_nics(host).items() if nic and r.get("leaf")]
    doc = docs.get(host) or docs.get(view.host(host) or "")
    if doc:
        nics = {n["name"]: n for n in doc.get("nics", [])}
        order = sorted(rails(doc).items(), key=lambda kv: (kv[1], natural_key(kv[0])))
        out = [(nic, view.attachment(host, nic, nics.get(nic, {}).get("port"))) for nic, _rail in order]
        if any(r for _nic, r in out) or not fabric:
            return out
    return fabric


def _rate(view: FabricView, row: Mapping | None) -> float | None:
    lk = view.cable(row) if row else None
    return lk.get("expected_gbs") if lk and lk.get("usable") else None


def job_contention(view: FabricView, docs: Iterable[Mapping] | Mapping[str, Mapping] | None, hosts: Iterable[str],
                   algorithm: str = "ring") -> dict:
    """The job's all-reduce flows over the leaves' uplinks, the leaves' oversubscription and the
    rail alignment (schema in the module docstring)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, not {algorithm!r}")
    by_host = _docs_by_host(docs)
    hosts = list(dict.fromkeys(hosts))
    nics = {h: job_nics(view, by_host, h) for h in hosts}
    missing = [h for h in hosts if view.host(h) is None]
    unattached = [f"{h}/{nic}" for h in hosts if h not in missing for nic, r in nics[h]
                  if r is None or not r.get("leaf")]
    width = max((len(v) for v in nics.values()), default=0)
    flows = ring_flows(len(hosts)) if algorithm == "ring" else tree_flows(len(hosts))
    out_w: Counter = Counter()
    in_w: Counter = Counter()
    out_g: Counter = Counter()
    in_g: Counter = Counter()
    rail_rows = []
    for i in range(width):
        chosen = {h: nics[h][i % len(nics[h])] for h in hosts if nics[h]}
        crossings = local = 0
        for a, b, w in flows:
            (_na, ra), (_nb, rb) = chosen.get(hosts[a], (None, None)), chosen.get(hosts[b], (None, None))
            la, lb = (ra or {}).get("leaf"), (rb or {}).get("leaf")
            if not la or not lb:
                continue
            if la == lb:
                local += 1
                continue
            crossings += 1
            rate = min((x for x in (_rate(view, ra), _rate(view, rb)) if x is not None), default=0.0)
            out_w[la] += w
            in_w[lb] += w
            out_g[la] += w * rate
            in_g[lb] += w * rate
        rail_rows.append({"rail": i, "nics": {h: nic for h, (nic, _r) in chosen.items()},
                          "leaves": dict(Counter(view.name(r["leaf"]) for _nic, r in chosen.values()
                                                 if r and r.get("leaf"))),
                          "crossings": crossings, "local": local})
    leaves = _leaf_rows(view, nics, out_w, in_w, out_g, in_g)
    ratios = [r["job_oversubscription"] for r in leaves if r["job_oversubscription"] is not None]
    demand = [r for r in leaves if r["demand_ratio"] is not None]
    worst = max(demand, key=lambda r: r["demand_ratio"], default=None)
    return {"algorithm": algorithm, "hosts": hosts, "nodes": len(hosts), "missing": missing, "unattached": unattached,
            "rails": rail_rows, "leaves": leaves, "oversubscription": max(ratios, default=None),
            "design_oversubscription": design_oversubscription(view),
            "demand_ratio": worst["demand_ratio"] if worst else None, "worst_leaf": worst["name"] if worst else None,
            **_alignment(view, nics)}


def _docs_by_host(docs: Iterable[Mapping] | Mapping[str, Mapping] | None) -> dict[str, Mapping]:
    if not docs:
        return {}
    if isinstance(docs, Mapping):
        return dict(docs)
    return {d["hostname"]: d for d in docs if d.get("hostname")}


def _leaf_rows(view: FabricView, nics: Mapping[str, list], out_w: Counter, in_w: Counter, out_g: Counter,
               in_g: Counter) -> list[dict]:
    loads = leaf_loads(view)
    mine: dict[str, dict] = {}
    for h, rows in nics.items():
        seen = set()
        for _nic, r in rows:
            if not r or not r.get("leaf") or r["ca"] in seen:
                continue
            seen.add(r["ca"])
            m = mine.setdefault(r["leaf"], {"hosts": set(), "links": 0, "gbs": 0.0})
            lk = view.cable(r) or {}
            m["hosts"].add(h)
            m["links"] += 1
            m["gbs"] += (lk.get("gbs") or 0.0) if lk.get("usable") else 0.0
    out = []
    for leaf in set(mine) | set(out_w) | set(in_w):
        load = loads.get(leaf, {})
        up = load.get("up_gbs") or 0.0
        m = mine.get(leaf, {"hosts": set(), "links": 0, "gbs": 0.0})
        flows = max(out_w[leaf], in_w[leaf])
        demand = max(out_g[leaf], in_g[leaf])
        uplinks = load.get("uplinks") or 0
        out.append({"leaf": leaf, "name": view.name(leaf), "hosts": sorted(m["hosts"], key=natural_key),
                    "host_links": m["links"], "down_gbs": round(m["gbs"], 4), "uplinks": uplinks,
                    "up_gbs": up, "oversubscription": load.get("oversubscription"),
                    "job_oversubscription": round(m["gbs"] / up, 3) if up else None,
                    "flows_out": out_w[leaf], "flows_in": in_w[leaf], "flows": flows,
                    "flows_per_uplink": round(flows / uplinks, 3) if uplinks else None,
                    "demand_gbs": round(demand, 4), "demand_ratio": round(demand / up, 3) if up else None})
    return sorted(out, key=lambda r: (-(r["demand_ratio"] or 0.0), -(r["job_oversubscription"] or 0.0),
                                      natural_key(r["name"])))


def _alignment(view: FabricView, nics: Mapping[str, list]) -> dict[str, Any]:
    owned = rail_leaves(view)
    by_name: dict[str, Counter] = {}
    for rows in nics.values():
        for nic, r in rows:
            if r and r.get("leaf"):
                by_name.setdefault(nic, Counter())[r["leaf"]] += 1
    rail_leaf = {}
    for nic, c in sorted(by_name.items(), key=lambda kv: natural_key(kv[0])):
        leaf, n = max(c.items(), key=lambda kv: (kv[1], kv[0]))
        rail_leaf[nic] = {"leaf": leaf, "name": view.name(leaf), "hosts": n, "of": sum(c.values())}
    off = []
    if owned["rail_optimized"]:
        for h, rows in nics.items():
            for nic, r in rows:
                if not r or not r.get("leaf"):
                    continue
                rail = owned["leaves"].get(r["leaf"], {}).get("rail")
                if rail is not None and rail != nic:
                    off.append({"host": h, "nic": nic, "leaf": r["leaf"], "leaf_name": view.name(r["leaf"]),
                                "leaf_port": r.get("leaf_port"), "rail_of_leaf": rail,
                                "rail_leaf_name": rail_leaf.get(nic, {}).get("name")})
    return {"rail_optimized": owned["rail_optimized"], "rail_aligned": (not off) if owned["rail_optimized"] else None,
            "rail_leaf": rail_leaf, "off_rail": off}
