"""The inferred-tree stage: a PCIe hierarchy read from ``nvidia-smi topo -m`` alone.

The matrix gives each pair of devices the farthest element between them, so nested groups
rebuild a tree: devices closer than ``SYS`` share a NUMA node (the affinity columns name it),
closer than ``NODE`` one root complex, closer than ``PHB`` one switch tree (an inferred parent
switch when it holds several ``PIX`` groups) and ``PIX`` groups one switch each. Everything made
here is ``inferred=True`` and its links are assumed (``assumptions.assume``). A pair whose cell
is ``NV#`` takes its PCIe relation from ``topo -mp`` when the report has it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from apps.domain.facts import HostFacts, NicFact
from apps.domain.hostgraph.draft import Draft, add_edge, add_node
from apps.domain.names import PCIE_CLASSES, cell

__all__ = ["add_inferred_tree", "Matrix"]

_RANK = {t: i for i, t in enumerate(PCIE_CLASSES)}


class Matrix:
    """The devices topo -m places (GPUs and NIC labels, matrix order) and the PCIe token of each pair."""

    def __init__(self, f: HostFacts) -> None:
        self.f = f
        self._tokens: dict[tuple[str, str], str | None] = {}
        known = {g.name for g in f.gpus}
        self.nic_by_label: dict[str, NicFact] = {}
        for n in f.nics:
            if n.label and n.label not in self.nic_by_label:  # port 1 (listed first) holds the label's cell
                self.nic_by_label[n.label] = n
                known.add(n.label)
        labels = [lb for lb in (list(f.topo_labels) or list(f.topo)) if lb in known]
        # a device with no PCIe cell to any other and no affinity (its row cut from a partial
        # capture, all its cells NV#) has no known place: it is left unplaced, not given a CPU
        located = {g.name for g in f.gpus if g.numa is not None or g.cpu_affinity}
        self.labels = [lb for lb in labels if lb in located or any(self.token(lb, o) for o in labels if o != lb)]

    def token(self, a: str, b: str) -> str | None:
        """The PCIe class between two devices (``PIX`` ... ``SYS``); None when the matrix has none."""
        found = self._tokens.get((a, b), "")
        if found == "":
            t = cell(self.f.topo, a, b)
            if t and t.startswith("NV"):
                t = cell(self.f.topo_pci, a, b)  # -mp shows the PCIe relation hidden by NV#
            found = self._tokens[a, b] = t if t in _RANK else None
        return found

    def order(self, label: str) -> int:
        return self.labels.index(label)


def groups(d: Draft, m: Matrix, members: list[str], closer_than: str,
           key: Callable[[str], Any] | None = None) -> list[list[str]]:
    """``members`` split into the groups whose cells are closer than ``closer_than`` (transitively),
    in matrix order. Two groups are never joined while a cell between them says ``closer_than``
    or farther: a device PIX to two others that are PXB apart stays under one switch with one of
    them, not with both (the check against topo -m then names the cell the layout cannot hold);
    a NIC NODE to GPUs of two sockets joins one socket, not both.

    At the ``SYS`` level two more rules join groups: devices with no cell between them and the
    same cells to every other device (NIC rows cut from a capture) stand in one place unless
    ``key`` (the NUMA affinity) says they are on different NUMA nodes, and ``key`` joins groups
    unless the matrix puts ``SYS`` between them (the matrix wins, with a disagreement: VMs often
    expose one NUMA node while nvidia-smi says SYS)."""
    parent = {x: x for x in members}
    held = {x: [x] for x in members}  # root -> its group
    limit = _RANK[closer_than]
    refused: set[tuple] = set()

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def join(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra == rb:
            return
        seen = (ra, rb, len(held[ra]), len(held[rb]))
        if seen in refused:
            return
        if any((t := m.token(x, y)) is not None and _RANK[t] >= limit for x in held[ra] for y in held[rb]):
            refused.add(seen)
            return
        parent[ra] = rb
        held[rb] += held.pop(ra)

    for i, a in enumerate(members):
        for b in members[i + 1:]:
            t = m.token(a, b)
            if t is not None and _RANK[t] < limit:
                join(a, b)
    if closer_than == "SYS":
        same: dict[tuple, str] = {}  # equal rows imply no cell between the two
        for x in members:
            row = tuple(m.token(x, o) for o in m.labels)
            if any(row):
                if row not in same:
                    same[row] = x
                elif key is None or None in (key(x), key(same[row])) or key(x) == key(same[row]):
                    join(x, same[row])
    if key is not None:
        _join_by_key(d, m, members, key, parent, find)
    out: dict[str, list[str]] = defaultdict(list)
    for x in members:
        out[find(x)].append(x)
    return sorted(out.values(), key=lambda xs: m.order(xs[0]))


def _join_by_key(d: Draft, m: Matrix, members: list[str], key: Callable[[str], Any], parent: dict[str, str],
                 find: Callable[[str], str]) -> None:
    by_key: dict[Any, str] = {}
    reported: set[frozenset] = set()
    for x in members:
        k = key(x)
        if k is None:
            continue
        if k not in by_key:
            by_key[k] = x
            continue
        ra, rb = find(x), find(by_key[k])
        if ra == rb:
            continue
        ga = [y for y in members if find(y) == ra]
        gb = [y for y in members if find(y) == rb]
        sys_pair = next(((y, z) for y in ga for z in gb if m.token(y, z) == "SYS"), None)
        if sys_pair and m.order(sys_pair[0]) > m.order(sys_pair[1]):
            sys_pair = (sys_pair[1], sys_pair[0])
        if sys_pair is None:
            parent[ra] = rb
        elif frozenset((ra, rb)) not in reported:
            reported.add(frozenset((ra, rb)))
            d.disagree(f"{sys_pair[0]}-{sys_pair[1]}",
                       f"topo -m says SYS for {sys_pair[0]}-{sys_pair[1]} although {x} and {by_key[k]} report the "
                       f"same {k[0] == 'numa' and 'NUMA' or 'CPU'} affinity {k[1]}; the layout follows the matrix",
                       ["nvidia_smi_topo"])


def add_inferred_tree(d: Draft) -> None:
    """Add the NUMA nodes, root complexes, switches and devices the matrix implies; devices it
    does not place (no row, no PCIe cell, no affinity) are left unplaced."""
    f = d.facts
    m = Matrix(f)
    gpu_numa = {g.name: g.numa for g in f.gpus}
    gpu_aff = {g.name: g.cpu_affinity for g in f.gpus}

    def numa_key(x: str) -> tuple | None:
        if gpu_numa.get(x) is not None:
            return ("numa", gpu_numa[x])
        return ("aff", gpu_aff[x]) if gpu_aff.get(x) else None

    counter = Counter()  # ids handed out: rc:inferred:<k>, switch:inferred:<k>
    for grp in groups(d, m, m.labels, "SYS", numa_key):
        cpu = _numa_node(d, grp, gpu_numa, gpu_aff)
        numa = d.G.nodes[cpu]["numa"]
        for rc_grp in groups(d, m, grp, "NODE"):
            rc = f"rc:inferred:{counter['rc']}"
            counter["rc"] += 1
            add_node(d.G, rc, "root_complex", "host bridge (inferred)", numa=numa, parent=cpu, inferred=True)
            add_edge(d.G, rc, cpu, "cpu_link", inferred=True)
            for pxb_grp in groups(d, m, rc_grp, "PHB"):
                _add_switches(d, m, groups(d, m, pxb_grp, "PXB"), rc, numa, counter)
    d.place_leftovers("topo -m gives no PCIe relation for it (its row is missing)")


def _numa_node(d: Draft, grp: list[str], gpu_numa: dict[str, int | None], gpu_aff: dict[str, str | None]) -> str:
    """The cpu node of one NUMA group: the NUMA id its GPUs report, else the order of their CPU
    affinity lists; a NIC-only group gets a NUMA node the matrix cannot name."""
    f, G = d.facts, d.G
    numas = [gpu_numa[x] for x in grp if gpu_numa.get(x) is not None]
    numa = Counter(numas).most_common(1)[0][0] if numas else None
    note = None
    if numa is None:
        affs = [gpu_aff[x] for x in grp if gpu_aff.get(x)]
        if affs and f.topo_labels:
            aff_order = sorted({a for a in gpu_aff.values() if a}, key=_first_cpu)
            numa = aff_order.index(Counter(affs).most_common(1)[0][0])
            note = "NUMA id assumed from the order of the CPU affinity lists"
    if numa is not None and f"cpu{numa}" in G:
        numa = None  # two groups claim one NUMA node: keep them apart, ids unknown
    cpu = d.cpu(numa, inferred=True)
    if numa is None and not any(x in gpu_numa for x in grp):
        # NIC rows of topo -m carry no affinity: a NIC group SYS to every GPU sits on a NUMA node
        # no GPU reports, which one the matrix does not say
        known = sorted({n for n in gpu_numa.values() if n is not None})
        free = sorted(set(range(max(known) + 1)) - set(known)) if known else []
        G.nodes[cpu]["label"] = "CPU NUMA ?"
        note = ("NUMA node not reported (topo -m gives NIC rows no affinity)"
                + (f": one of NUMA {', '.join(map(str, free))}, the ids no GPU reports" if free else ""))
        G.nodes[cpu]["numa_candidates"] = free
    if note:
        G.nodes[cpu]["note"] = note
    return cpu


def _add_switches(d: Draft, m: Matrix, pix_groups: list[list[str]], rc: str, numa: int | None,
                  counter: Counter) -> None:
    """One PXB tree below root complex ``rc``: a parent switch when it holds several PIX groups,
    one switch per PIX group of two or more devices (or per group when there is a parent)."""
    top = rc
    if len(pix_groups) > 1:
        top = _switch(d, rc, numa, counter)
    for pix in pix_groups:
        holder = _switch(d, top, numa, counter) if len(pix) > 1 or len(pix_groups) > 1 else top
        for label in pix:
            _add_device(d, m, label, holder, numa)


def _switch(d: Draft, parent: str, numa: int | None, counter: Counter) -> str:
    sw = f"switch:inferred:{counter['switch']}"
    counter["switch"] += 1
    add_node(d.G, sw, "switch", "PCIe switch (inferred)", numa=numa, parent=parent, inferred=True,
             upstream_bdf=None, port_bdfs=[])
    _assumed_link(d, sw, parent)
    return sw


def _assumed_link(d: Draft, child: str, parent: str) -> None:
    d.pcie_edge(child, parent, gen=None, width=None, max_gen=None, max_width=None, is_gpu=False, inferred=True)


def _add_device(d: Draft, m: Matrix, label: str, parent: str, numa: int | None) -> None:
    f, G = d.facts, d.G
    g = f.gpu(label)
    if g is not None:
        d.add_gpu(g, parent, numa, inferred=True)
        known = g.link_gen_max or g.link_width_max
        if g.c2c and not known:
            # Grace: the GPU reaches its CPU over NVLink-C2C, not a PCIe link (NCCL's LINK_C2C,
            # topo.cc L929-943 at v2.30.7-1 [S3]); its bandwidth is not in topo -m
            add_edge(G, g.name, parent, "c2c", inferred=True,
                     note="NVLink-C2C to its Grace CPU (GPU NUMA ID in topo -m); bandwidth not reported")
        elif known:
            d.pcie_edge(g.name, parent, gen=g.link_gen_current, width=g.link_width_current,
                        max_gen=g.link_gen_max, max_width=g.link_width_max, is_gpu=True, inferred=True,
                        note="link from nvidia-smi --query-gpu; position inferred from topo -m")
        else:
            _assumed_link(d, g.name, parent)
        return
    n = m.nic_by_label[label]
    d.add_nic(n, n.name, parent, numa, inferred=True)
    _assumed_link(d, n.name, parent)
    for other in f.nics:  # further ports of the same HCA (mlx5_0:2): same place, own node
        if other is not n and other.label == label and other.name not in G:
            d.add_nic(other, other.name, parent, numa, inferred=True)
            _assumed_link(d, other.name, parent)


def _first_cpu(aff: str) -> int:
    m = re.match(r"\s*(\d+)", aff or "")
    return int(m.group(1)) if m else 1 << 30
