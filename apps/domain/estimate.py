"""Expected all-reduce bus bandwidth of a host layout, and the NCCL settings it suggests.

``estimate(doc)`` follows domain.md section 5.2 on a snapshot document (``apps/domain/analysis.py``):

* ``B_gpu``: per-GPU intra-node bandwidth usable by ring flows (GB/s per direction, spec). On
  NVSwitch boards ``NV# x per-link spec`` (H100 18 x 25 = 450); on switchless meshes and PCIe
  boxes the bottleneck hop of the best ring over the GPUs, where a hop is ``NV# x per-link`` for
  NVLink pairs, the PCIe path (``/ 1.2`` through an Intel root complex) for P2P pairs, and
  ``min(GPU PCIe, CPU<->CPU constant if SYS)`` for SHM pairs (NCCL's constant, not the UPI/xGMI
  spec). Ring flows are counted per directed link, links named by the node ids of the pair hops
  (``gpu_pairs[].hops[].from_id/to_id``; labels such as "PCIe switch (inferred)" repeat): a link
  that k ring flows traverse in one direction gives each ``spec / k`` (P09). The ring is the best
  of the GPU order, the PCIe tree order (``graph`` parents: a switch's GPUs stay adjacent, so each
  tree link is crossed once per direction), the best pair-threshold ring and, when shared links
  keep those below the pair bound, a bounded exact search (<= 10 GPUs).
  A GPU pair whose mechanism the report cannot tell (``gpu_pairs[].mechanism`` "unknown": NVLink
  not reported, a GPU not placed) makes ``B_gpu`` unknown: never read from PCIe. GPU links the
  class does not count (xGMI) take the figure of their hops.
* ``B_node``: sum over the Active compute NICs of one link layer of
  ``min(Rate/8, NIC PCIe link, GPU->NIC path)``; functions of one adapter share its PCIe link.
* ``busbw(N=1) = eta_intra x B_gpu``; ``busbw(N>1) = min(eta_intra x B_gpu, eta_net x B_node)``
  (the ring ceiling; each point also carries ``hier_busbw_gbs``, the ceiling of NCCL's
  hierarchical tree algorithms, where inter-node bytes per node shrink to ``2(N-1)/N x S``, which
  is why 2-node runs can exceed the NIC sum).

Efficiencies (section 5.2 ranges, pinned by the measurements of section 2.6 and
``realdata/published_busbw.tsv``): ``ETA_NVLINK = 0.82`` (H100 ring all-reduce 369-370 of 450 GB/s;
A100 ~80 %), ``ETA_PCIE = 0.86`` (0.85-0.88), ``ETA_NET = 0.92`` (0.90-0.95; reproduces the worked
examples of 5.5: 7 x 50 -> 322, 1 x 50 -> 46).

``curve(doc, nodes, sizes)`` adds the latency term of section 5.3 (Simple protocol, ring and tree).
``suggest_nccl_settings(doc)`` lists the NCCL variables the layout calls for, each with its reason.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apps.domain.findings._base import (
    GDR_CLASSES, Ctx, as_float, as_int, as_list, fmt_gbs, fmt_num, gpu_sort_key, join, normalize_token, nv_count,
)
from apps.domain.shellsafe import is_safe_name

__all__ = ["estimate", "curve", "suggest_nccl_settings", "ETA_NVLINK", "ETA_PCIE", "ETA_NET", "NODE_COUNTS"]

ETA_NVLINK = 0.82
ETA_PCIE = 0.86
ETA_NET = 0.92
NODE_COUNTS = (1, 2, 4, 8, 16, 32, 64)
_DEFAULT_INTER_SOCKET = 10.0  # NCCL SKL_QPI_BW when the CPU is unknown (topo.h [S1])

try:  # the engine's bandwidth table (domain.md section 2)
    from apps.domain import bandwidth as _bw
except ImportError:  # pragma: no cover
    _bw = None

_LANE = {1: 0.25, 2: 0.5, 3: 15.75 / 16, 4: 31.5 / 16, 5: 63.0 / 16, 6: 121.0 / 16}


def _pcie(gen: Any, width: Any) -> float | None:
    g, w = as_int(gen), as_int(width)
    return round(_LANE[g] * w, 2) if g in _LANE and w else None


def _edge_gbs(e: Mapping | None, capability: bool = False) -> float | None:
    """Spec GB/s of a PCIe edge; ``capability`` uses max gen/width (a GPU idles at Gen1)."""
    if not e:
        return None
    if e.get("inferred") or e.get("assumed"):
        # inferred/assumed links carry the engine's assumption policy figures (bandwidth.assume)
        return as_float(e.get("spec_gbs"))
    if capability:
        bw = _pcie(e.get("max_gen") or e.get("gen"), e.get("max_width") or e.get("width"))
        if bw:
            w, mw = as_int(e.get("width")), as_int(e.get("max_width"))
            if w and mw and w < mw:  # a narrowed width is real (P06): keep it
                bw = _pcie(e.get("max_gen") or e.get("gen"), w)
            return bw
    return as_float(e.get("spec_gbs")) or _pcie(e.get("gen"), e.get("width"))


@dataclass(frozen=True)
class _Step:
    """One ring step a->b: ``bw`` GB/s per direction (spec), ``kind`` nvlink | pcie | shm_sys | shm,
    ``links`` the directed links it loads as (from id, to id, GB/s, hop kind), ``narrow`` the link
    that sets ``bw`` as (from id, to id, touches a GPU, hop kind), or None."""

    bw: float
    kind: str
    links: tuple[tuple[str, str, float, str], ...]
    narrow: tuple[str, str, bool, str] | None


def _end(hop: Mapping, side: str) -> str:
    return str(hop.get(f"{side}_id") or hop.get(side))


class _Host:
    def __init__(self, doc: Mapping[str, Any]):
        self.ctx = Ctx(doc, {})
        self.doc = doc
        self.names = self.ctx.gpu_names
        # the real model, else the representative of the class the engine assumed (bandwidth.assume)
        self.model = self.ctx.gpu_model() or (doc.get("graph") or {}).get("assumed_gpu_model")
        self._steps: dict[tuple[str, str], _Step] = {}
        self._ring: list[str] | None = None
        self._labels: dict[str, int] = defaultdict(int)
        for nid in self.ctx.nodes:
            self._labels[self.ctx.node_name(nid)] += 1

    # --- per-link numbers -------------------------------------------------------------------
    def nv_per_link(self) -> float:
        if _bw is not None:
            spec = _bw.nvlink_per_link(self.model).spec_gbs
            if spec:
                return spec
        for e in self.ctx.edges:
            if e.get("kind") == "nvlink" and as_float(e.get("spec_gbs")) and as_int(e.get("links")):
                return as_float(e["spec_gbs"]) / as_int(e["links"])
        return 25.0

    def gpu_pcie(self, gpu: str) -> float:
        node = (self.ctx.gpu(gpu) or {}).get("node") or gpu
        bw = _edge_gbs(self.ctx.uplink(node), capability=True)
        if bw:
            return bw
        gen = _bw.gpu_generation(self.model).pcie_gen if _bw is not None else None
        return _pcie(gen or (_bw.ASSUMED_PCIE_GEN if _bw is not None else 4), 16)

    def inter_socket(self) -> float:
        for e in self.ctx.edges:  # the graph's own figure (known CPU, or the assumption policy's)
            if e.get("kind") == "inter_socket" and as_float(e.get("nccl_gbs")):
                return as_float(e["nccl_gbs"])
        vendor = (self.doc.get("graph") or {}).get("cpu_vendor")
        model = (self.doc.get("graph") or {}).get("cpu_model")
        if not vendor:
            for n in self.ctx.nodes.values():
                if n.get("kind") == "cpu":
                    vendor = (n.get("attrs") or {}).get("vendor") or vendor
        if _bw is not None and vendor:
            got = _bw.inter_socket(vendor, model).nccl_gbs
            if got:
                return got
        return _DEFAULT_INTER_SOCKET

    # --- GPU pairs ------------------------------------------------------------------------
    def node_id(self, gpu: str) -> str:
        return str((self.ctx.gpu(gpu) or {}).get("node") or gpu)

    def intel_cpu(self) -> bool:
        vendor = str((self.doc.get("graph") or {}).get("cpu_vendor") or "")
        return "intel" in vendor.lower()

    def step(self, a: str, b: str) -> "_Step":
        """The ring step a->b: its figure (GB/s per direction, spec), kind and the directed links it loads.

        Links are keyed by node id (``from_id``/``to_id`` of the pair's hops; ``from``/``to`` when a
        document has no ids): labels such as "PCIe switch (inferred)" name several switches.
        """
        key = (a, b)
        if key not in self._steps:
            self._steps[key] = self._make_step(a, b)
        return self._steps[key]

    def _make_step(self, a: str, b: str) -> "_Step":
        cls = self.ctx.pair_class(a, b)
        c = nv_count(cls)
        if c:  # point-to-point NVLink: no PCIe link is loaded
            return _Step(c * self.nv_per_link(), "nvlink", (), None)
        pair = self.ctx.pair(a, b)
        mech = str(pair.get("mechanism") or "")
        if mech in ("nvlink", "nvswitch") and not pair.get("via"):
            # a GPU link the class does not count (xGMI): the figure its hops carry
            figures = [as_float(h.get("spec_gbs")) or as_float(h.get("expected_gbs"))
                       for h in as_list(pair.get("hops")) if isinstance(h, Mapping)]
            figures = [f for f in figures if f]
            if figures:
                return _Step(min(figures), "nvlink", (), None)
        shm = mech == "shm" or (not mech and cls not in GDR_CLASSES)
        kind = ("shm_sys" if cls == "SYS" else "shm") if shm else "pcie"
        own = {self.node_id(a), self.node_id(b)}
        links: list[tuple[str, str, float, str]] = []
        best, narrow, socket = math.inf, None, False
        for h in self._directed_hops(a, b):
            hk = h.get("kind")
            if hk == "inter_socket":  # NCCL plans CPU<->CPU with its constant, not the UPI/xGMI spec (2.4)
                cap, socket = self.inter_socket(), True
            elif hk == "pcie":
                cap = as_float(h.get("spec_gbs"))
            else:
                continue
            if not cap:
                continue
            frm, to = _end(h, "from"), _end(h, "to")
            links.append((frm, to, cap, hk))
            touches = frm in own or to in own
            if cap < best - 1e-9 or (abs(cap - best) <= 1e-9 and touches and not (narrow and narrow[2])):
                best, narrow = cap, (frm, to, touches, hk)
        if links:
            bw = best
            if kind == "shm_sys" and not socket:  # a path without its socket hop: 5.2's SHM rule
                bw = min(bw, self.inter_socket())
                if bw < best:
                    narrow = None
        else:
            bw = min(self.gpu_pcie(a), self.gpu_pcie(b))
            if kind == "shm_sys":
                bw = min(bw, self.inter_socket())
        if kind == "pcie" and cls in ("PHB", "NODE", "SYS") and self.intel_cpu():
            bw /= 1.2  # P2P through an Intel root complex (INTEL_P2P_OVERHEAD, 5.2)
            narrow = None
        return _Step(bw, kind, tuple(links), narrow)

    def hop(self, a: str, b: str) -> tuple[float, str]:
        """(GB/s spec, kind) of the ring step a->b: kind nvlink | pcie | shm_sys | shm."""
        st = self.step(a, b)
        return st.bw, st.kind

    def ring(self) -> list[str]:
        """The GPU order of the best ring (cached)."""
        if self._ring is None:
            self._ring = self._best_ring()
        return list(self._ring)

    def _best_ring(self) -> list[str]:
        """The ring NCCL would build: highest bottleneck first (pair figures and links that ring
        flows share in one direction), then the fewest link crossings, then the earliest candidate.

        Candidates: the GPU order; the PCIe tree order (GPUs under one switch / socket adjacent, so
        every tree link is crossed once per direction); the ring of the best pair threshold. When
        none reaches the pair bound (shared links bite), a bounded exact search (<= 10 GPUs)."""
        names = list(self.names)
        n = len(names)
        if n <= 3:
            return names
        w = {(a, b): self.step(a, b).bw for a in names for b in names if a != b}
        cands = [names]
        tree = self._tree_order()
        if tree != names:
            cands.append(tree)
        bound = math.inf
        if n <= 10:
            for t in sorted(set(w.values()), reverse=True):
                ok = [r for r in cands if all(w[(a, b)] >= t for a, b in zip(r, r[1:] + r[:1]))]
                ring = ok[0] if ok else _hamiltonian(names, lambda a, b: w[(a, b)] >= t)
                if ring:
                    bound = t
                    if ring not in cands:
                        cands.append(ring)
                    break
        else:  # greedy nearest-best neighbour for large boxes (uniform NVSwitch boards are exact anyway)
            ring, left = [names[0]], set(names[1:])
            while left:
                cur = ring[-1]
                nxt = max(sorted(left, key=gpu_sort_key), key=lambda x: w[(cur, x)])
                ring.append(nxt)
                left.remove(nxt)
            cands.append(ring)
        scored = [(self._score(r), i, r) for i, r in enumerate(cands)]
        (best_bw, _l, _k, uses), _i, best = min(scored, key=lambda s: (-round(s[0][0], 6), s[0][3], s[1]))
        if n <= 10 and best_bw < min(bound, self._forced_bound(names)) - 1e-9:
            found = self._search(names, best_bw)
            if found is not None:
                best = found
        return best

    def _tree_order(self) -> list[str]:
        """GPUs in depth-first order of the PCIe tree (``graph`` parents), subtrees by smallest GPU."""
        names = list(self.names)
        index = {g: i for i, g in enumerate(names)}
        chains: dict[str, list[str]] = {}
        for g in names:
            chain, seen = [], set()
            cur = (self.ctx.nodes.get(self.node_id(g)) or {}).get("parent")
            while cur is not None and cur not in seen:
                seen.add(cur)
                chain.append(cur)
                cur = (self.ctx.nodes.get(cur) or {}).get("parent")
            chains[g] = chain[::-1]
        if not any(chains.values()):
            return names
        first: dict[str, int] = {}
        for g, chain in chains.items():
            for x in chain:
                first[x] = min(first.get(x, index[g]), index[g])
        return sorted(names, key=lambda g: [first[x] for x in chains[g]] + [index[g]])

    def _score(self, ring: list[str]) -> tuple[float, str, str, int]:
        """(bottleneck GB/s, limit text, kind, link crossings) of ``ring``."""
        steps = list(zip(ring, ring[1:] + ring[:1]))
        flows: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
        best, limit, kind = math.inf, "", "none"
        for a, b in steps:
            st = self.step(a, b)
            if st.bw < best:
                best, kind, limit = st.bw, st.kind, self._hop_text(a, b, st)
            for frm, to, cap, hk in st.links:
                flows[(frm, to)].append((cap, hk))
        for (frm, to), uses in flows.items():  # ring order: the first link met names the limit
            k, cap = len(uses), min(c for c, _ in uses)
            if k > 1 and cap / k < best - 1e-9:
                best, kind = cap / k, "shared"
                what = "CPU socket link" if uses[0][1] == "inter_socket" else "PCIe uplink"
                limit = (f"shared {what} {self._name(frm)} -> {self._name(to)} ({k} ring flows in the same "
                         f"direction, {fmt_gbs(cap)} shared)")
        return best, limit, kind, sum(len(u) for u in flows.values())

    def _forced_bound(self, names: list[str]) -> float:
        """An upper bound for any ring from links every ring must share: a ring leaves (and enters)
        each GPU exactly once, so a directed link on every step out of k GPUs (or into k GPUs)
        carries at least k flows (e.g. a switch uplink when its GPUs have no P2P: SHM)."""
        out: dict[tuple[str, str], int] = defaultdict(int)
        into: dict[tuple[str, str], int] = defaultdict(int)
        caps: dict[tuple[str, str], float] = {}
        for g in names:
            others = [x for x in names if x != g]
            for side, table in ((lambda x: self.step(g, x), out), (lambda x: self.step(x, g), into)):
                common = None
                for x in others:
                    keys = {(frm, to) for frm, to, _c, _k in side(x).links}
                    common = keys if common is None else common & keys
                for x in others:
                    for frm, to, cap, _k in side(x).links:
                        caps[(frm, to)] = min(caps.get((frm, to), cap), cap)
                for key in common or ():
                    table[key] += 1
        bound = math.inf
        for table in (out, into):
            for key, k in table.items():
                if k > 1:
                    bound = min(bound, caps[key] / k)
        return bound

    def _search(self, names: list[str], floor: float, budget: int = 10_000) -> list[str] | None:
        """Branch and bound for a ring strictly better than ``floor``; at most ``budget`` partial
        rings are expanded (a ring's value only falls as steps are added, which prunes)."""
        best: list = [floor, None]
        left_budget = [budget]
        counts: dict[tuple[str, str], int] = defaultdict(int)
        caps: dict[tuple[str, str], float] = {}
        order = {a: sorted((b for b in names if b != a), key=lambda b: (-self.step(a, b).bw, gpu_sort_key(b)))
                 for a in names}

        def push(st: _Step, value: float) -> float:
            value = min(value, st.bw)
            for frm, to, cap, _hk in st.links:
                key = (frm, to)
                counts[key] += 1
                caps[key] = min(caps.get(key, cap), cap)
                if counts[key] > 1:
                    value = min(value, caps[key] / counts[key])
            return value

        def pop(st: _Step) -> None:
            for frm, to, _cap, _hk in st.links:
                counts[(frm, to)] -= 1

        def walk(path: list[str], left: set[str], value: float) -> None:
            left_budget[0] -= 1
            if left_budget[0] < 0:
                return
            last = path[-1]
            if not left:
                st = self.step(last, path[0])
                v = push(st, value)
                pop(st)
                if v > best[0] + 1e-9:
                    best[0], best[1] = v, list(path)
                return
            for nxt in order[last]:
                if nxt not in left:
                    continue
                st = self.step(last, nxt)
                v = push(st, value)
                if v > best[0] + 1e-9:
                    path.append(nxt)
                    left.discard(nxt)
                    walk(path, left, v)
                    left.add(nxt)
                    path.pop()
                pop(st)

        if len(names) > 1:
            walk([names[0]], set(names[1:]), math.inf)
        return best[1]

    def unknown_pair(self) -> dict | None:
        """A GPU pair whose mechanism the report cannot tell (NVLink not reported, a GPU not placed):
        the intra-node term is then unknown, never read from PCIe."""
        for p in as_list(self.doc.get("gpu_pairs")):
            if isinstance(p, Mapping) and p.get("mechanism") == "unknown":
                return p
        return None

    def b_gpu(self) -> tuple[float | None, str, str]:
        """(B_gpu, limit text, hop kind) for the best ring."""
        names = self.names
        if len(names) < 2:
            return None, "a single GPU: no intra-node all-reduce traffic", "none"
        unknown = self.unknown_pair()
        if unknown is not None:
            return None, (f"unknown inside the node: {unknown.get('a')}-{unknown.get('b')}: "
                          f"{unknown.get('reason')}"), "unknown"
        ring = self.ring()
        best, limit, kind, _uses = self._score(ring)
        return round(best, 2), limit, kind

    def _directed_hops(self, a: str, b: str) -> list[dict]:
        pair = self.ctx.pair(a, b)
        hops = [dict(h) for h in as_list(pair.get("hops")) if isinstance(h, Mapping)]
        if pair.get("a") == b:  # stored b->a: walk it backwards
            hops = [dict(h, **{"from": h.get("to"), "to": h.get("from"),
                               "from_id": h.get("to_id"), "to_id": h.get("from_id")}) for h in reversed(hops)]
        return hops

    def _name(self, node_id: str) -> str:
        """A node's label, with its id when several nodes share that label."""
        label = self.ctx.node_name(node_id) if node_id in self.ctx.nodes else node_id
        if label != node_id and self._labels.get(label, 0) > 1:
            return f"{label} [{node_id}]"
        return label

    def _hop_text(self, a: str, b: str, st: "_Step") -> str:
        bw = st.bw
        if st.kind == "nvlink":
            return "NVLink inside the node"
        if st.kind == "shm_sys":
            return f"host memory (SHM) across the CPU socket link between {a} and {b} ({fmt_gbs(bw)})"
        if st.kind == "shm":
            return f"host memory (SHM) through the CPU between {a} and {b} ({fmt_gbs(bw)})"
        if st.narrow is not None:
            frm, to, _touches, _hk = st.narrow
            if frm == self.node_id(a) or to == self.node_id(b):
                g = a if frm == self.node_id(a) else b
                return f"PCIe inside the node: {g}'s own PCIe link ({fmt_gbs(bw)}; ring step {a} -> {b})"
            return (f"PCIe inside the node: link {self._name(frm)} -> {self._name(to)} ({fmt_gbs(bw)}; "
                    f"ring step {a} -> {b})")
        return f"PCIe inside the node ({a} -> {b}, {fmt_gbs(bw)})"

    # --- NICs -----------------------------------------------------------------------------
    def b_node(self) -> tuple[float | None, list[float], str]:
        from apps.domain.findings.fabric import preferred_layer
        layer, nics = preferred_layer(self.ctx)
        if not nics:
            return None, [], ""
        per_nic: list[float] = []
        adapters: dict[str, list[tuple[float, float | None]]] = defaultdict(list)
        for nic in sorted(nics, key=lambda n: gpu_sort_key(str(n.get("name")))):
            rate = as_float(nic.get("rate_gbps"))
            if not rate:
                continue
            bw = rate / 8
            link = _edge_gbs(self.ctx.uplink(nic.get("node") or "")) if nic.get("node") else None
            path = self._gpu_nic_path(nic, link)
            value = min(x for x in (bw, link, path) if x)
            key = str(nic.get("bdf") or nic.get("name"))
            key = key[:-2] if nic.get("bdf") and key[-2] == "." else key
            adapters[key].append((value, link))
        for funcs in adapters.values():
            total = sum(v for v, _ in funcs)
            link = next((ln for _, ln in funcs if ln), None)
            if link and total > link:  # the ports of one adapter share its PCIe link
                scale = link / total
                per_nic += [round(v * scale, 2) for v, _ in funcs]
            else:
                per_nic += [round(v, 2) for v, _ in funcs]
        if not per_nic:
            return None, [], layer
        return round(sum(per_nic), 2), per_nic, layer

    def _gpu_nic_path(self, nic: Mapping, link: float | None) -> float | None:
        name = nic.get("name")
        cells = [r for r in as_list(self.doc.get("gpu_nic_matrix")) if isinstance(r, Mapping) and r.get("nic") == name]
        vals = [as_float(r.get("bandwidth_gbs")) for r in cells if as_float(r.get("bandwidth_gbs"))]
        if vals:
            return max(vals)
        classes = [normalize_token(r.get("path_class")) for r in cells]
        if not classes or any(c in GDR_CLASSES for c in classes):
            return None  # GPUDirect: the NIC link is the limit
        gpus = [r.get("gpu") for r in cells]
        best = max(self.gpu_pcie(g) for g in gpus)
        if all(c == "SYS" for c in classes):
            best = min(best, self.inter_socket())
        return min(best, link) if link else best


def _hamiltonian(names: list[str], ok) -> list[str] | None:
    """A Hamiltonian cycle over ``names`` using only edges with ok(a, b) (bitmask DP, n <= 10)."""
    n = len(names)
    full = (1 << n) - 1
    reach = [[False] * n for _ in range(1 << n)]
    prev: dict[tuple[int, int], int] = {}
    reach[1][0] = True
    for mask in range(1 << n):
        if not mask & 1:
            continue
        for last in range(n):
            if not reach[mask][last]:
                continue
            for nxt in range(n):
                if mask & (1 << nxt) or not ok(names[last], names[nxt]):
                    continue
                m2 = mask | (1 << nxt)
                if not reach[m2][nxt]:
                    reach[m2][nxt] = True
                    prev[(m2, nxt)] = last
    for last in range(1, n):
        if reach[full][last] and ok(names[last], names[0]):
            order, mask, cur = [], full, last
            while cur != 0:
                order.append(names[cur])
                p = prev[(mask, cur)]
                mask &= ~(1 << cur)
                cur = p
            return [names[0]] + order[::-1]
    return None


def _nic_sum_text(per_nic: list[float]) -> str:
    if len(set(per_nic)) == 1:
        return f"NIC sum across nodes ({len(per_nic)} x {fmt_gbs(per_nic[0])})"
    return "NIC sum across nodes (" + " + ".join(fmt_num(round(v, 1)) for v in per_nic) + " GB/s)"


def estimate(doc: Mapping[str, Any]) -> dict:
    """Expected all-reduce busbw plateau for 1..64 nodes of this layout (domain.md 5.2).

    Returns {"b_gpu_gbs", "b_node_gbs", "eta_intra", "eta_net", "points": [{"nodes", "busbw_gbs",
    "limit", "hier_busbw_gbs"}], "limiting_link", "ring": [GPU order], "notes": [str]}. Points for
    N > 1 are given only when the node's NICs are known (``b_node_gbs`` not null).
    """
    h = _Host(doc)
    g = len(h.names)
    b_gpu, intra_limit, kind = h.b_gpu()
    eta_intra = ETA_NVLINK if kind == "nvlink" else ETA_PCIE
    notes = []
    if g == 0:
        intra_limit = "no GPUs reported"
        notes.append("no GPUs reported: the intra-node term is unknown")
    if b_gpu is None and g == 1:
        b_gpu = h.gpu_pcie(h.names[0])
        intra_limit = f"the GPU's own PCIe link ({fmt_gbs(b_gpu)})"
        eta_intra = ETA_PCIE
        notes.append("one GPU per node: the intra-node term is the GPU's PCIe link")
    b_node, per_nic, _layer = h.b_node()
    points = []
    intra = round(eta_intra * b_gpu, 1) if b_gpu else None
    if kind == "unknown":
        notes.append("the intra-node term is unknown (see limiting_link): no single-node figure, and multi-node "
                     "figures are the NIC ceiling only")
    for nodes in NODE_COUNTS:
        if nodes == 1:
            if g < 2 or intra is None:
                continue
            points.append({"nodes": 1, "busbw_gbs": intra, "limit": intra_limit, "hier_busbw_gbs": intra})
            continue
        if b_node is None:
            continue
        if g == 0:
            continue
        net = round(ETA_NET * b_node, 1)
        n = nodes * max(g, 1)
        hier = round(min(intra or math.inf, net * (n - 1) * nodes / (n * (nodes - 1))), 1)
        if intra is not None and intra <= net:
            points.append({"nodes": nodes, "busbw_gbs": intra, "limit": intra_limit, "hier_busbw_gbs": hier})
        else:
            limit = _nic_sum_text(per_nic) + (" (intra-node term unknown)" if kind == "unknown" else "")
            points.append({"nodes": nodes, "busbw_gbs": net, "limit": limit, "hier_busbw_gbs": hier})
    if b_node is None:
        notes.append("no Active compute NIC reported: multi-node points are not estimated")
    limiting = points[-1]["limit"] if points else intra_limit
    return {"b_gpu_gbs": b_gpu, "b_node_gbs": b_node, "eta_intra": eta_intra, "eta_net": ETA_NET,
            "points": points, "limiting_link": limiting,
            "ring": h.ring() if g > 1 and kind != "unknown" else list(h.names),
            "notes": notes}


# --- latency term (domain.md 5.3) ------------------------------------------------------------


def curve(doc: Mapping[str, Any], nodes: int, sizes: Iterable[int]) -> list[dict]:
    """Expected busbw at each message size (bytes) on ``nodes`` nodes: the better of ring and tree,
    Simple protocol, with NCCL's latency constants (tuning.cc L148-176, L384-423)."""
    est = estimate(doc)
    point = next((p for p in est["points"] if p["nodes"] == nodes), None)
    if point is None or not point["busbw_gbs"]:
        return []
    h = _Host(doc)
    g = max(len(h.names), 1)
    n = nodes * g
    if n < 2:
        return []
    nvlink = h.ctx.nv_pairs() != {}
    h_intra = 3.4 if nvlink else 5.7
    if nodes > 1:
        h_intra = max(h_intra, 3 * 1.0)  # netOverhead 1 (Intel) / 2 (AMD): 3x sets the floor
    ring_alpha = 8.4 + (2 * (n - 1) - 2 * (nodes - 1)) * h_intra + 2 * (nodes - 1) * 14.0
    tree_alpha = 8.4 + 2 * ((g - 1) * 4.0 + math.log2(nodes) * 14.0) if nodes > 1 else ring_alpha
    out = []
    for size in sizes:
        best = None
        for algo, alpha, peak in (("ring", ring_alpha, point["busbw_gbs"]), ("tree", tree_alpha,
                                                                           point["hier_busbw_gbs"])):
            algbw_peak = peak * n / (2 * (n - 1))
            t = alpha * 1e-6 + size / (algbw_peak * 1e9)
            busbw = size / t / 1e9 * 2 * (n - 1) / n
            if best is None or busbw > best["busbw_gbs"]:
                best = {"size": int(size), "busbw_gbs": round(busbw, 2), "algo": algo, "latency_us": round(alpha, 1)}
        out.append(best)
    return out


# --- NCCL settings --------------------------------------------------------------------------


def suggest_nccl_settings(doc: Mapping[str, Any]) -> list[dict]:
    """NCCL variables this layout calls for: [{"name", "value", "reason"}].

    Every value is non-empty. Device names outside ``shellsafe.SAFE_NAME`` (rule X02) never go
    into a value: such HCAs and netdevs are left out, the reason says how many, and a variable
    with no name left is not suggested. Reasons name only safe devices."""
    from apps.domain.findings.fabric import ib_hca_value, preferred_layer, unsafe_hcas
    from apps.domain.findings.pcie import nvb_reachable

    ctx = Ctx(doc, {})
    out: list[dict] = []
    layer, keep = preferred_layer(ctx)
    if keep:
        others = [n for n in ctx.nics if n not in keep]
        why = []
        if any(n.get("link_layer") and n.get("link_layer") != layer and ctx.nic_active(n) for n in others):
            why.append(f"it keeps only the {layer} ports (NCCL refuses to mix link layers, F04)")
        down = [n.get("name") for n in others if not ctx.nic_usable(n) and is_safe_name(n.get("name"))]
        if down:
            why.append(f"it leaves out ports that are not Active ({join(sorted(set(down), key=gpu_sort_key))})")
        if any(not ctx.is_compute(n) for n in others):
            why.append("it leaves out storage/management NICs")
        unsafe = unsafe_hcas(ctx.nics)
        if unsafe:
            why.append(f"it leaves out {_unsafe_count(len(unsafe), 'HCA')} (X02)")
        why.append("the leading '=' makes NCCL match names exactly, so mlx5_1 does not also select mlx5_10 (F07)")
        value = ib_hca_value(keep)
        if value:
            kept = sum(1 for n in keep if is_safe_name(n.get("name")))
            state = "Active" if all(ctx.nic_active(n) for n in keep) else "Active (or not reported)"
            out.append({"name": "NCCL_IB_HCA", "value": value,
                        "reason": f"Exact list of the {kept} {state} compute {layer or 'RDMA'} port(s): " +
                                  "; ".join(why) + "."})
        netdevs = []
        for n in keep:
            node = ctx.nodes.get(n.get("node") or "") or {}
            netdevs += [str(d) for d in as_list((node.get("attrs") or {}).get("netdevs"))]
            netdevs += [str(d) for d in as_list(n.get("netdevs"))]
        netdevs = sorted(set(netdevs), key=gpu_sort_key)
        safe = [d for d in netdevs if is_safe_name(d)]
        if safe:
            left_out = len(netdevs) - len(safe)
            unsafe_note = f"; it leaves out {_unsafe_count(left_out, 'interface')} (X02)" if left_out else ""
            out.append({"name": "NCCL_SOCKET_IFNAME", "value": "=" + ",".join(safe),
                        "reason": "Bootstrap over the IP interfaces of the compute HCAs (exact names); use your "
                                  "routable management interface instead if these carry no IP address on every "
                                  f"node{unsafe_note}."})
        if len(keep) > 1:
            rail = ctx.rail_design()
            out.append({"name": "NCCL_CROSS_NIC", "value": "2",
                        "reason": ("One NIC per GPU (rail design): keep the default 2; set 0 only if every rail is "
                                   "its own switch on all nodes, 1 if the fabric is not rail-optimized (F08)."
                                   if rail else
                                   "Several NICs shared by the GPUs: keep the default 2; set 1 if the fabric is not "
                                   "rail-optimized (F08).")})
    names = ctx.gpu_names
    # pairs NCCL sends through host memory because of its P2P level (not a driver that refuses
    # P2P, where NCCL_P2P_LEVEL cannot help, nor pairs whose mechanism is unknown)
    shm = [(a, b, ctx.pair_class(a, b)) for i, a in enumerate(names) for b in names[i + 1:]
           if ctx.pair_class(a, b) in ("PHB", "NODE", "SYS") and not nvb_reachable(ctx, a, b)
           and ctx.pair(a, b).get("shm_cause", "level") == "level"
           and ctx.pair(a, b).get("mechanism") != "unknown"]
    if shm:
        level = "SYS" if any(c == "SYS" for *_, c in shm) else "PHB"
        out.append({"name": "NCCL_P2P_LEVEL", "value": level,
                    "reason": f"{len(shm)} GPU pair(s) use host memory by default (P01/P02). Only set this after "
                              "p2pBandwidthLatencyTest shows healthy P2P on this platform (ACS off, P04); otherwise "
                              "leave it unset."})
    far = [r for r in as_list(doc.get("gpu_nic")) if isinstance(r, Mapping) and not r.get("gdr")
           and normalize_token(r.get("path_class")) in ("PHB", "NODE", "SYS") and not r.get("pxn_via")]
    if far:
        out.append({"name": "NCCL_NET_GDR_LEVEL", "value": "PHB",
                    "reason": f"{len(far)} GPU(s) have no NIC on their PCIe switch, so GPUDirect RDMA is off for them "
                              "(G01). Experiment with this only if a GDR perftest (ib_write_bw --use_cuda) is good; "
                              "remove it otherwise."})
    return out


def _unsafe_count(count: int, what: str) -> str:
    """``"1 HCA whose name has characters unsafe in a shell"`` (the X02 clause of a reason)."""
    return (f"{count} {what}{'' if count == 1 else 's'} whose name{' has' if count == 1 else 's have'} "
            "characters unsafe in a shell")
