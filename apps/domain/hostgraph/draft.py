"""The HostGraph under construction: what every build stage reads and adds to.

A :class:`Draft` holds the facts, the graph built so far and what the build has to say about it
(warnings, disagreements, the assumptions it used); :func:`add_node`, :func:`add_edge` and
:func:`add_pcie_edge` write nodes and edges in the shape of the HostGraph contract
(:mod:`apps.domain.hostgraph`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from apps.domain import bandwidth as bw
from apps.domain.assumptions import Assumptions, assume
from apps.domain.facts import GpuFact, HostFacts, NicFact

__all__ = ["Draft", "add_node", "add_edge", "add_pcie_edge"]


def add_node(G: nx.Graph, nid: str, kind: str, label: str | None = None, *, bdf: str | None = None,
             numa: int | None = None, parent: str | None = None, inferred: bool = False, **attrs: Any) -> None:
    """A node with the attributes every node has (``kind``, ``label``, ``bdf``, ``numa``, ``parent``,
    ``inferred``) and ``attrs``."""
    G.add_node(nid, kind=kind, label=label or nid, bdf=bdf, numa=numa, parent=parent, inferred=inferred, **attrs)


def add_edge(G: nx.Graph, a: str, b: str, kind: str, link: bw.LinkBandwidth | None = None, **attrs: Any) -> None:
    """An edge with every contract attribute, its figures from ``link`` (``bandwidth``) when given."""
    data = {"kind": kind, "gen": None, "width": None, "max_gen": None, "max_width": None, "links": None,
            "spec_gbs": None, "expected_gbs": None, "nccl_gbs": None, "source": None,
            "degraded": False, "inferred": False, "assumed": False, "note": None}
    if link is not None:
        data.update(spec_gbs=link.spec_gbs, expected_gbs=link.expected_gbs, nccl_gbs=link.nccl_gbs,
                    source=link.source)
    data.update(attrs)
    G.add_edge(a, b, **data)


def add_pcie_edge(G: nx.Graph, child: str, parent: str, *, gen: int | None, width: int | None,
                  max_gen: int | None, max_width: int | None, is_gpu: bool, inferred: bool = False,
                  note: str | None = None, assume: tuple[int, int, str] | None = None,
                  reported_gbs: float | None = None) -> bool:
    """Add the PCIe edge; ``reported_gbs`` is a bandwidth the source states without generation and
    width (hwloc's ``pci_link_speed``), used when those are unknown; ``assume`` = (gen, width,
    note) fills what is still unknown (the edge is then ``assumed``). Returns True when an
    assumption was used."""
    notes = [note] if note else []
    degraded = False
    if width and max_width and width < max_width:
        degraded = True
        notes.append(f"link width x{width} below capability x{max_width}")
    if gen and max_gen and gen < max_gen:
        if is_gpu:
            notes.append(f"GPU at Gen{gen} below Gen{max_gen}: idle GPUs downclock PCIe; sample under load")
        else:
            degraded = True
            notes.append(f"link speed Gen{gen} below capability Gen{max_gen}")
    # the usable bandwidth of a link is its negotiated one (LnkSta); for an idle GPU the max is
    # what it runs at under load, so size GPU links at their capability
    use_gen = max_gen if (is_gpu and max_gen and gen and gen < max_gen) else (gen or max_gen)
    use_width = width or max_width
    assumed = False
    if not (use_gen and use_width) and reported_gbs:
        link, said, slow = bw.pcie_link_from_gbs(reported_gbs)
        if not (is_gpu and slow):  # a GPU at a Gen1/Gen2 figure is an idle downclock, not its link
            add_edge(G, child, parent, "pcie", link, gen=gen, width=width, max_gen=max_gen, max_width=max_width,
                     degraded=degraded, inferred=inferred, assumed=False, note="; ".join(notes + [said]))
            return False
        notes.append(f"{said}: a GPU idles at Gen1; its link under load is not reported")
    if assume is not None and not (use_gen and use_width):
        use_gen, use_width = use_gen or assume[0], use_width or assume[1]
        assumed = True
        if assume[2] and assume[2] not in notes:
            notes.append(assume[2])
    link = bw.pcie_link(use_gen, use_width) if use_gen and use_width else None
    add_edge(G, child, parent, "pcie", link, gen=gen, width=width, max_gen=max_gen, max_width=max_width,
             degraded=degraded, inferred=inferred, assumed=assumed, note="; ".join(notes) or None)
    return assumed


@dataclass


class Draft:
    """One host's graph while the stages build it.

    ``used`` names the assumption sentences of ``policy`` a stage relied on ("gpu", "pcie",
    "inter_socket", "nvswitch"); ``assumptions`` are further sentences a stage wrote itself.
    ``nic_node`` maps each placed ``NicFact.name`` to its node; ``unplaced`` lists the GPUs and
    NICs no source places.
    """

    facts: HostFacts
    G: nx.Graph = field(default_factory=nx.Graph)
    warnings: list[str] = field(default_factory=list)
    disagreements: list[dict] = field(default_factory=list)
    policy: Assumptions | None = None
    info: bw.GpuInfo | None = None
    used: set[str] = field(default_factory=set)
    assumptions: list[str] = field(default_factory=list)
    nic_node: dict[str, str] = field(default_factory=dict)
    unplaced: list[str] = field(default_factory=list)
    _unknown_cpu: str | None = None

    @classmethod
    def start(cls, facts: HostFacts) -> Draft:
        """An empty graph for ``facts``, with the assumption policy for what they leave out."""
        nv_counts = [p.links for p in facts.nvlink_pairs if p.b != "nvswitch" and p.fabric == "nvlink"]
        fabric = any(p.b == "nvswitch" for p in facts.nvlink_pairs) or any(d.kind == "nvswitch" for d in facts.pci)
        policy = assume(facts.gpu_model, nv_counts=nv_counts, gpu_count=len(facts.gpus), fabric=fabric,
                           legacy_topo=facts.topo_legacy, cpu_vendor=facts.cpu_vendor,
                           cpu_model=facts.cpu_model, cpu_family=facts.cpu_family,
                           grace=any(g.c2c for g in facts.gpus))
        return cls(facts=facts, warnings=list(facts.warnings),
                   disagreements=[{"subject": d.subject, "message": d.message, "sources": list(d.sources)}
                                  for d in facts.disagreements],
                   policy=policy, info=bw.gpu_generation(policy.gpu_model) if policy.gpu_model else None)

    def disagree(self, subject: str, message: str, sources: list[str]) -> None:
        self.disagreements.append({"subject": subject, "message": message, "sources": sources})

    # -- CPUs ------------------------------------------------------------------------------
    def cpu(self, numa: int | None, inferred: bool = False) -> str:
        """The cpu node of NUMA node ``numa`` (made when missing); a fresh one when ``numa`` is None."""
        nid = f"cpu{numa}" if numa is not None else self._free_cpu_id()
        if nid not in self.G:
            add_node(self.G, nid, "cpu", f"CPU NUMA {numa}" if numa is not None else "CPU (NUMA unknown)",
                     numa=numa, inferred=inferred)
        return nid

    def unknown_cpu(self) -> str:
        """The one cpu node for devices whose NUMA node nobody reported."""
        if self._unknown_cpu is None:
            self._unknown_cpu = self.cpu(None, inferred=True)
        return self._unknown_cpu

    def _free_cpu_id(self) -> str:
        # unknown NUMA nodes are numbered after every known one, so cpu<k> never poses as NUMA k
        f = self.facts
        used = {int(n[3:]) for n in self.G if n.startswith("cpu") and n[3:].isdigit()}
        known = [g.numa for g in f.gpus if g.numa is not None] + [c.numa for c in f.cpus if c.numa is not None]
        k = max(known) + 1 if known else 0
        while k in used:
            k += 1
        return f"cpu{k}"

    # -- devices ---------------------------------------------------------------------------
    def add_gpu(self, g: GpuFact, parent: str | None, numa: int | None, inferred: bool, **attrs: Any) -> None:
        add_node(self.G, g.name, "gpu", g.name, bdf=g.bdf, numa=numa if numa is not None else g.numa,
                 parent=parent, inferred=inferred, **gpu_attrs(g), **attrs)

    def add_nic(self, n: NicFact, nid: str, parent: str | None, numa: int | None, inferred: bool) -> None:
        add_node(self.G, nid, "nic", n.label or n.name, bdf=n.bdf, numa=numa if numa is not None else n.numa,
                 parent=parent, inferred=inferred, **nic_attrs(n))
        self.nic_node[n.name] = nid

    def place_leftovers(self, why: str = "not in the PCI listing") -> None:
        """GPUs/NICs known to nvidia-smi/ibstat whose place no source states: nodes without a
        parent (``placement`` "unknown"), so no path class, NIC choice or finding is built on a
        place nobody reported; the document says what to send."""
        G = self.G
        for g in self.facts.gpus:
            if g.name not in G:
                add_node(G, g.name, "gpu", g.name, bdf=g.bdf, numa=g.numa, parent=None, inferred=True,
                         placement="unknown", **gpu_attrs(g), note=f"placement unknown: {why}")
                self.unplaced.append(g.name)
        for n in self.facts.nics:
            if n.name not in self.nic_node and n.name not in G:
                self.add_nic(n, n.name, None, n.numa, inferred=True)
                G.nodes[n.name].update(placement="unknown", note=f"placement unknown: {why}")
                self.unplaced.append(n.name)

    # -- PCIe links ------------------------------------------------------------------------
    def assumed_link(self) -> tuple[int, int, str]:
        """(gen, width, note) of the PCIe link assumed where nobody reported one (``assumptions.assume``)."""
        p = self.policy
        return p.pcie_gen, p.pcie_width, p.pcie_note

    def pcie_edge(self, child: str, parent: str, **link: Any) -> None:
        """:func:`add_pcie_edge` with the assumed link filling what the source leaves out."""
        if add_pcie_edge(self.G, child, parent, assume=self.assumed_link(), **link):
            self.used.add("pcie")


def gpu_attrs(g: GpuFact) -> dict:
    return dict(index=g.index, model=g.model, uuid=g.uuid, cpu_affinity=g.cpu_affinity,
                pstate=g.pstate, nvlink_active=g.nvlink_active, nvlink_total=g.nvlink_total, gdr=g.gdr, c2c=g.c2c,
                gpu_numa_id=g.gpu_numa_id)


def nic_attrs(n: NicFact) -> dict:
    return dict(port=n.port, state=n.state, phys_state=n.phys_state, rate_gbps=n.rate_gbps,
                link_layer=n.link_layer, active=n.active, device=n.device, nic_label=n.label,
                netdevs=list(n.netdevs), gdr=n.gdr, transport=n.transport, width=n.width, speed=n.speed,
                firmware=n.firmware, port_guid=n.port_guid, node_guid=n.node_guid)
