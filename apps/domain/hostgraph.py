"""HostGraph: one networkx graph of a host's CPUs, PCIe tree, GPUs, NICs and NVLinks.

``build_host_graph(facts)`` turns :class:`~apps.domain.facts.HostFacts` into an undirected
:class:`networkx.Graph` following the HostGraph contract (engine contract, shared with paths,
contention and findings):

* ``G.graph``: ``hostname``, ``inferred``, ``mode`` ("exact" | "nccl_xml" | "hwloc_xml" |
  "inferred" | "none"), ``sources``, ``cpu_vendor``, ``cpu_model``, ``cpu_name``, ``gpu_model``,
  ``nic_inventory``/``nic_unknown``/``socket_nets`` (what the report can say about NICs),
  ``virtual_pci``, ``unplaced``, ``nvlink_reported``, ``warnings``,
  ``disagreements`` (list of {"subject", "message", "sources"}: sources that describe the host
  differently, e.g. topo -m vs the PCI tree).
* nodes: ``cpu<numa>``, ``rc:<domain>:<bus>`` (host bridge), ``pci:<bdf>`` (root port; a PCIe
  switch is ONE node named after its upstream port, attrs ``upstream_bdf``/``port_bdfs``),
  ``GPU<i>``, HCA name (``mlx5_0``; ``mlx5_0:2`` for a second port) or the topo -m label for NICs,
  ``nvswitch0`` (the NVSwitch fabric), ``pci:<bdf>`` for NVMe / unnamed NICs. Every node has
  ``kind``, ``label``, ``bdf``, ``numa``, ``parent`` (PCIe/CPU parent node id) and ``inferred``.
  Only RDMA devices are NICs (NCCL's IB/RoCE transport uses nothing else): a PCI network function
  is a ``nic`` node only when an RDMA source names it (ibstat/ibstatus/ibv_devinfo/sysfs_ib CA,
  topo -m NIC column or NIC Legend, NCCL XML ``<net>``, hwloc OpenFabrics device), or, in a report
  with no RDMA listing at all, when it is RDMA hardware (InfiniBand class, ConnectX/BlueField, AWS
  EFA; attr ``rdma="assumed"``); NCCL's topology XML lists only the NICs NCCL uses, so its network
  ``<pci>`` elements are NICs. Other network functions (an Intel X710, a BCM5720 management port)
  are kind ``other`` labelled "Ethernet (no RDMA)" with ``network=True``: drawn, never chosen.
  Inferred nodes use ``rc:inferred:<k>`` / ``switch:inferred:<k>``.
* edges: ``kind`` "pcie" (child to its PCIe parent, carrying the child's upstream link),
  "nvlink" (GPU-GPU or GPU-nvswitch; attr ``fabric`` "xgmi" for AMD Infinity Fabric links, which
  RCCL plans as NVL links), "c2c" (a Grace GPU to its CPU side over NVLink-C2C), "inter_socket"
  (cpu-cpu), "cpu_link" (root complex to its cpu); attrs ``gen``, ``width``, ``max_gen``, ``max_width``, ``links``, ``spec_gbs``,
  ``expected_gbs``, ``nccl_gbs``, ``source`` (citation, from :mod:`apps.domain.bandwidth`),
  ``degraded``, ``inferred``, ``note``.

The NVSwitch fabric is one node per NVLink domain: each GPU's edge to it carries the GPU's links
into the fabric (``NV12`` on HGX A100, ``NV18`` on H100/B200), so a GPU->GPU path through it has
the right bottleneck. The physical NVSwitch PCI functions (class 0x0680, vendor 10de) are listed
in the node's ``bdfs`` attribute and are not PCIe nodes: their PCIe link is management only and
must never become a data path.

Three ways to build (``G.graph["mode"]``):

* exact: a PCI hierarchy from ``sysfs_pci`` / ``lspci -vvv`` / ``lspci -tv`` (or NCCL's / hwloc's
  topology XML, whose root complexes are not named: one inferred host bridge per top-level PCI
  element);
* inferred: only ``nvidia-smi topo -m``: PIX groups share an inferred switch, PXB groups get an
  inferred parent switch, PHB groups one inferred root complex, NODE splits root complexes in one
  NUMA node, SYS splits NUMA nodes (affinity columns place them). Everything is ``inferred=True``.
* none: no topology source; GPUs and NICs are unplaced.

A GPU or NIC that no source places (a row cut from a partial topo -m with only ``NV#`` cells, an
HCA that no matrix column or PCI listing shows) is a node without a parent, attr ``placement``
"unknown", listed in ``G.graph["unplaced"]``: it gets no path class, so nothing is built on a place
nobody reported; a warning says what to send. Devices that stand in the same place as far as the
matrix says (NICs with identical cells and no cell between them) share one CPU node rather than
one each.

When topo -m is present with an exact source, every GPU-GPU and GPU-NIC cell is compared with
:func:`path_class` on the graph (lowest common ancestor rule, domain.md 4.2 item 5) and each
mismatch becomes a disagreement; nothing here raises on inconsistent input.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

import networkx as nx

from apps.domain import bandwidth as bw
from apps.domain import devices
from apps.domain.facts import GpuFact, HostFacts, NicFact

__all__ = ["build_host_graph", "path_class", "pcie_path", "ancestors", "frozen", "link_token", "PATH_ORDER"]

PATH_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
# Broadcom PEX Gen4/Gen5 switches that NCCL flattens (getBcmGen, topo.cc L195-260 [S3]).
BCM_SWITCH_IDS = {(0x1000, 0xC010): 4, (0x1000, 0xC030): 5}


# -- small helpers ---------------------------------------------------------------------------


def _node(G: nx.Graph, nid: str, kind: str, label: str | None = None, *, bdf: str | None = None,
          numa: int | None = None, parent: str | None = None, inferred: bool = False, **attrs: Any) -> None:
    G.add_node(nid, kind=kind, label=label or nid, bdf=bdf, numa=numa, parent=parent, inferred=inferred, **attrs)


def _edge(G: nx.Graph, a: str, b: str, kind: str, link: bw.LinkBandwidth | None = None, **attrs: Any) -> None:
    data = {"kind": kind, "gen": None, "width": None, "max_gen": None, "max_width": None, "links": None,
            "spec_gbs": None, "expected_gbs": None, "nccl_gbs": None, "source": None,
            "degraded": False, "inferred": False, "assumed": False, "note": None}
    if link is not None:
        data.update(spec_gbs=link.spec_gbs, expected_gbs=link.expected_gbs, nccl_gbs=link.nccl_gbs,
                    source=link.source)
    data.update(attrs)
    G.add_edge(a, b, **data)


def _pcie_edge(G: nx.Graph, child: str, parent: str, *, gen: int | None, width: int | None,
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
            _edge(G, child, parent, "pcie", link, gen=gen, width=width, max_gen=max_gen, max_width=max_width,
                  degraded=degraded, inferred=inferred, assumed=False, note="; ".join(notes + [said]))
            return False
        notes.append(f"{said}: a GPU idles at Gen1; its link under load is not reported")
    if assume is not None and not (use_gen and use_width):
        use_gen, use_width = use_gen or assume[0], use_width or assume[1]
        assumed = True
        if assume[2] and assume[2] not in notes:
            notes.append(assume[2])
    link = bw.pcie_link(use_gen, use_width) if use_gen and use_width else None
    _edge(G, child, parent, "pcie", link, gen=gen, width=width, max_gen=max_gen, max_width=max_width,
          degraded=degraded, inferred=inferred, assumed=assumed, note="; ".join(notes) or None)
    return assumed


# (graph, memo) of the graph that ``frozen`` declares unchanging; lookups on it are memoized.
_FROZEN: ContextVar[tuple[nx.Graph, dict] | None] = ContextVar("hostgraph_frozen", default=None)


@contextmanager
def frozen(G: nx.Graph) -> Iterator[nx.Graph]:
    """Declare that ``G`` is not changed inside the block: :func:`ancestors` and
    :func:`pcie_class` answers on it are then computed once per node / pair and reused (a
    snapshot document asks for the same chains thousands of times). Outside the block, or for
    another graph, every call computes afresh; lists returned inside the block are shared and
    must not be mutated."""
    token = _FROZEN.set((G, {}))
    try:
        yield G
    finally:
        _FROZEN.reset(token)


def _memo(G: nx.Graph) -> dict | None:
    f = _FROZEN.get()
    return f[1] if f is not None and f[0] is G else None


def ancestors(G: nx.Graph, node: str) -> list[str]:
    """``node`` followed by its PCIe/CPU parents up to (and including) its cpu node."""
    memo = _memo(G)
    if memo is None:
        return _ancestors(G, node)
    key = ("anc", node)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _ancestors(G, node)
    return found


def _ancestors(G: nx.Graph, node: str) -> list[str]:
    chain = [node]
    seen = {node}
    cur = G.nodes[node].get("parent")
    while cur is not None and cur not in seen and cur in G:
        chain.append(cur)
        seen.add(cur)
        cur = G.nodes[cur].get("parent")
    return chain


def link_token(d: dict) -> str:
    """The matrix token of a GPU-link edge: ``NV12`` (NVLink bond), ``XGMI`` / ``XGMI4`` (AMD xGMI,
    as ``rocm-smi --showtopo`` names it; hwloc gives no link count)."""
    if d.get("fabric") == "xgmi":
        return f"XGMI{d.get('links') or ''}"
    return f"NV{d['links']}"


def _nvlink_class(G: nx.Graph, a: str, b: str) -> str | None:
    if G.has_edge(a, b) and G.edges[a, b]["kind"] == "nvlink":
        return link_token(G.edges[a, b])
    best = None
    for n in G[a]:
        if G.nodes[n]["kind"] == "nvswitch" and G.has_edge(n, b):
            links = min(G.edges[a, n]["links"] or 0, G.edges[n, b]["links"] or 0)
            best = max(best or 0, links)
    return f"NV{best}" if best else None


def pcie_class(G: nx.Graph, a: str, b: str) -> str:
    """The PCIe/CPU path class between two nodes, ignoring NVLink (what ``topo -mp`` prints)."""
    memo = _memo(G)
    if memo is None:
        return _pcie_class(G, a, b)
    key = ("cls", a, b)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _pcie_class(G, a, b)
    return found


def _pcie_class(G: nx.Graph, a: str, b: str) -> str:
    ca, cb = ancestors(G, a), ancestors(G, b)
    sb = set(cb)
    lca = next((n for n in ca if n in sb), None)
    if lca is None:
        return "SYS"
    if lca in (a, b):
        return "PIX"
    kind = G.nodes[lca]["kind"]
    if kind == "cpu":
        return "NODE"
    if kind == "root_complex":
        return "PHB"
    # a switch or root port: one bridge level when both sit directly below it
    if G.nodes[a].get("parent") == lca and G.nodes[b].get("parent") == lca:
        return "PIX"
    return "PXB"


def path_class(G: nx.Graph, a: str, b: str) -> str:
    """topo -m token for the pair (``NV#``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``).

    NVLink first (a direct GPU-GPU bond, or the fabric through an NVSwitch node: the smaller of
    the two GPUs' link counts), then the lowest common PCIe/CPU ancestor (domain.md 4.2 item 5):
    both directly under one switch (or root port) = PIX, a common switch deeper = PXB, the host
    bridge = PHB, two host bridges of one NUMA node = NODE, different NUMA nodes = SYS.

    Examples
    --------
    >>> G = nx.Graph()
    >>> for n, k, p in [("cpu0", "cpu", None), ("rc", "root_complex", "cpu0"), ("sw", "switch", "rc"),
    ...                 ("GPU0", "gpu", "sw"), ("mlx5_0", "nic", "sw"), ("GPU1", "gpu", "rc")]:
    ...     G.add_node(n, kind=k, parent=p)
    >>> path_class(G, "GPU0", "mlx5_0"), path_class(G, "GPU0", "GPU1")
    ('PIX', 'PHB')
    """
    nv = _nvlink_class(G, a, b)
    return nv if nv else pcie_class(G, a, b)


def pcie_path(G: nx.Graph, a: str, b: str) -> list[str]:
    """Node ids of the PCIe/CPU route from ``a`` to ``b`` (both ends included; NVLink ignored).

    Up from ``a`` to the lowest common ancestor and down to ``b``; across sockets the route goes
    ``cpu_a -> cpu_b`` over the inter-socket link.
    """
    ca, cb = ancestors(G, a), ancestors(G, b)
    sb = {n: i for i, n in enumerate(cb)}
    for i, n in enumerate(ca):
        if n in sb:
            return ca[: i + 1] + list(reversed(cb[: sb[n]]))
    return ca + list(reversed(cb))


# -- the builder -----------------------------------------------------------------------------


class _Build:
    def __init__(self, facts: HostFacts) -> None:
        self.f = facts
        self.G = nx.Graph()
        self.warnings: list[str] = list(facts.warnings)
        self.disagreements: list[dict] = [
            {"subject": d.subject, "message": d.message, "sources": list(d.sources)} for d in facts.disagreements
        ]
        nv_counts = [p.links for p in facts.nvlink_pairs if p.b != "nvswitch" and p.fabric == "nvlink"]
        fabric = any(p.b == "nvswitch" for p in facts.nvlink_pairs) or any(d.kind == "nvswitch" for d in facts.pci)
        self.policy = bw.assume(facts.gpu_model, nv_counts=nv_counts, gpu_count=len(facts.gpus), fabric=fabric,
                                legacy_topo=facts.topo_legacy, cpu_vendor=facts.cpu_vendor,
                                cpu_model=facts.cpu_model, cpu_family=facts.cpu_family,
                                grace=any(g.c2c for g in facts.gpus))
        self.used: set[str] = set()  # assumption sentences actually used ("gpu", "pcie", "inter_socket")
        self.extra_assumptions: list[str] = []
        self.info = bw.gpu_generation(self.policy.gpu_model) if self.policy.gpu_model else None
        self.gpu_node: dict[str, str] = {g.name: g.name for g in facts.gpus}
        self.nic_node: dict[str, str] = {}  # NicFact.name -> node id
        self.unplaced: list[str] = []  # GPUs/NICs no source places (label names)

    # shared ---------------------------------------------------------------------------------
    def cpu(self, numa: int | None, inferred: bool = False) -> str:
        nid = f"cpu{numa}" if numa is not None else self._free_cpu_id()
        if nid not in self.G:
            _node(self.G, nid, "cpu", f"CPU NUMA {numa}" if numa is not None else "CPU (NUMA unknown)",
                  numa=numa, inferred=inferred)
        return nid

    def _free_cpu_id(self) -> str:
        # unknown NUMA nodes are numbered after every known one, so cpu<k> never poses as NUMA k
        used = {int(n[3:]) for n in self.G if n.startswith("cpu") and n[3:].isdigit()}
        known = [g.numa for g in self.f.gpus if g.numa is not None] + [c.numa for c in self.f.cpus if c.numa is not None]
        k = max(known) + 1 if known else 0
        while k in used:
            k += 1
        return f"cpu{k}"

    def gpu_attrs(self, g: GpuFact) -> dict:
        return dict(index=g.index, model=g.model, uuid=g.uuid, cpu_affinity=g.cpu_affinity,
                    pstate=g.pstate, nvlink_active=g.nvlink_active, gdr=g.gdr, c2c=g.c2c, gpu_numa_id=g.gpu_numa_id)

    def nic_attrs(self, n: NicFact) -> dict:
        return dict(port=n.port, state=n.state, phys_state=n.phys_state, rate_gbps=n.rate_gbps,
                    link_layer=n.link_layer, active=n.active, device=n.device, nic_label=n.label,
                    netdevs=list(n.netdevs), gdr=n.gdr, transport=n.transport)

    def add_gpu(self, g: GpuFact, parent: str | None, numa: int | None, inferred: bool) -> None:
        _node(self.G, g.name, "gpu", g.name, bdf=g.bdf, numa=numa if numa is not None else g.numa,
              parent=parent, inferred=inferred, **self.gpu_attrs(g))

    def add_nic(self, n: NicFact, nid: str, parent: str | None, numa: int | None, inferred: bool) -> None:
        _node(self.G, nid, "nic", n.label or n.name, bdf=n.bdf, numa=numa if numa is not None else n.numa,
              parent=parent, inferred=inferred, **self.nic_attrs(n))
        self.nic_node[n.name] = nid

    def typical_gen(self) -> tuple[int, str]:
        """The PCIe link assumed where nobody reported one (``bandwidth.assume``)."""
        return self.policy.pcie_gen, self.policy.pcie_note

    def assumed_link(self) -> tuple[int, int, str]:
        p = self.policy
        return p.pcie_gen, p.pcie_width, p.pcie_note

    # NVLink ---------------------------------------------------------------------------------
    def nvlinks(self) -> None:
        f, G = self.f, self.G
        gpus = [g.name for g in f.gpus if g.name in G]
        peers: dict[str, dict[str, int]] = defaultdict(dict)
        fabric_links: dict[str, int] = {}
        xgmi = [p for p in f.nvlink_pairs if p.fabric == "xgmi" and p.a in G and p.b in G]
        for p in f.nvlink_pairs:
            if p.fabric == "xgmi":
                continue
            if p.b == "nvswitch":
                fabric_links[p.a] = p.links
            elif p.a in G and p.b in G:
                peers[p.a][p.b] = p.links
                peers[p.b][p.a] = p.links
        for p in xgmi:  # AMD Infinity Fabric: RCCL's NVL links (rccl topo.cc ncclTopoAddXGMI)
            link = bw.xgmi(f.gpu_model, p.links, p.gbs)
            _edge(G, p.a, p.b, "nvlink", link, links=p.links or None, fabric="xgmi",
                  note=("xGMI (AMD Infinity Fabric) link" + (f", {p.links} links" if p.links else "")
                        + (f"; {p.gbs:g} GB/s as hwloc's XGMIBandwidth reports it" if p.gbs else
                           "; RCCL's planning figure (no bandwidth in the file)")))
        nvswitch_bdfs = sorted(d.bdf for d in f.pci if d.kind == "nvswitch")
        norm = self.info.nvlink_links if self.info and self.info.nvlink_links else 18
        implied = any(sum(ps.values()) > norm for ps in peers.values())
        use_fabric = bool(fabric_links) or bool(nvswitch_bdfs) or implied or bool(self._hidden_fabric(peers, {}, nvswitch_bdfs))
        link_model = f.gpu_model or self.policy.gpu_model
        assumed = None
        if not f.gpu_model:
            assumed = self.policy.nvlink_note
            if not link_model:
                link_model = 80  # 25 GB/s per link, the NVLink2-4 spec (V100, A100, H100)
                assumed = ("GPU model unknown: 25 GB/s per link assumed (NVLink2-4; B200 would be 50); "
                           + bw.SEND_GPU_QUERY)
        nv_assumed = assumed is not None
        if not f.gpu_model and f.gpus:
            self.used.add("gpu")  # say the model is unknown (and what was assumed) either way
        if nv_assumed and (peers or fabric_links or nvswitch_bdfs):
            self.used.add("gpu")
        hidden = self._hidden_fabric(peers, fabric_links, nvswitch_bdfs)
        if hidden:
            fabric_links = hidden
        if use_fabric and gpus:
            ids = nvswitch_bdfs
            inferred = not (fabric_links or nvswitch_bdfs) or bool(hidden)
            why = ("NVSwitch PCI functions in the PCI listing" if nvswitch_bdfs else
                   f"inferred: {self.info.family} SXM board (NVSwitch baseboard, NV{self.info.nvswitch_norm}) "
                   "with no NVLink reported" if hidden else
                   "NCCL XML nvlink targets of class 0x0680" if fabric_links else
                   f"implied: NV# to every peer exceeds the {norm} links a GPU has")
            _node(G, "nvswitch0", "nvswitch", "NVSwitch fabric", inferred=inferred,
                  switch_count=len(ids) or None, bdfs=ids, note=why)
            active = {g.name: g.nvlink_active for g in f.gpus if g.nvlink_active}
            for g in gpus:
                links = fabric_links.get(g) or max(peers.get(g, {}).values(), default=0) or active.get(g)
                note, edge_inferred = assumed, inferred
                if not links and nvswitch_bdfs and not peers and not fabric_links:
                    # NVSwitches seen in lspci, link counts not reported: the board norm, inferred
                    norm_links = self.info.nvswitch_norm if self.info else None
                    if not norm_links:
                        continue
                    links, edge_inferred = norm_links, True
                    note = f"links not reported: the {self.info.family} NVSwitch board norm NV{norm_links} assumed"
                if not links:
                    continue
                _edge(G, g, "nvswitch0", "nvlink", bw.nvlink(link_model, links), links=links,
                      inferred=edge_inferred or bool(hidden), assumed=nv_assumed or bool(hidden),
                      note=note if not hidden else f"inferred NV{links}: the {self.info.family} NVSwitch board norm")
            # GPU pairs whose NV# is below what the fabric gives them: keep them visible
            for a, ps in peers.items():
                for b, n in ps.items():
                    if _gkey(a) < _gkey(b) and G.has_edge(a, "nvswitch0") and G.has_edge(b, "nvswitch0"):
                        fab = min(G.edges[a, "nvswitch0"]["links"], G.edges[b, "nvswitch0"]["links"])
                        if fab != n:
                            self.disagreements.append({
                                "subject": f"{a}-{b}",
                                "message": f"{a}-{b} shows NV{n} but the GPUs have {fab} links into the NVSwitch fabric",
                                "sources": ["nvidia_smi_topo"],
                            })
        else:
            for a, ps in peers.items():
                for b, n in ps.items():
                    if _gkey(a) < _gkey(b):
                        _edge(G, a, b, "nvlink", bw.nvlink(link_model, n), links=n, note=assumed,
                              inferred=False, assumed=nv_assumed)
        # nvlink -s active counts vs the fabric/pair counts
        for g in f.gpus:
            if g.nvlink_active is None or g.name not in G:
                continue
            total = sum(d["links"] or 0 for _, _, d in G.edges(g.name, data=True) if d["kind"] == "nvlink")
            if total and g.nvlink_active != total:
                self.disagreements.append({
                    "subject": g.name,
                    "message": f"nvidia-smi nvlink -s shows {g.nvlink_active} active links on {g.name}, "
                               f"the NVLink graph has {total}",
                    "sources": ["nvidia_smi_nvlink", "nvidia_smi_topo"],
                })

    def _hidden_fabric(self, peers: dict, fabric_links: dict, nvswitch_bdfs: list) -> dict[str, int]:
        """GPU -> links for an NVSwitch board nobody reported NVLink for: 8 SXM GPUs of a model whose
        vendor board is NVSwitch-based (A100 SXM4 0x20b0/0x20b2, H100 SXM 0x2330, ...), known from
        PCI device ids or the GPU query, and no NVLink source at all (NCCL XML of cloud VMs often
        omits ``<nvlink>``). Empty when anything reported NVLink."""
        f = self.f
        if peers or fabric_links or nvswitch_bdfs or not f.gpu_model or not self.info:
            return {}
        if f.nvlink_sources or any(g.nvlink_active for g in f.gpus):
            return {}
        norm = self.info.nvswitch_norm
        if not norm or len(f.gpus) < 8 or not re.search(r"SXM|HBM3|H200|B200|B300|GB200", f.gpu_model, re.I):
            return {}
        if "nvswitch" not in self.used:
            self.used.add("nvswitch")
            self.extra_assumptions.append(
                f"No NVLink reported for {len(f.gpus)} {f.gpu_model} GPUs: an NVSwitch board is assumed, "
                f"NV{norm} per GPU (the {self.info.family} HGX norm); send nvidia-smi topo -m or "
                "nvidia-smi nvlink -s to know.")
        return {g.name: norm for g in f.gpus if g.name in self.G}

    def sockets(self) -> None:
        G = self.G
        cpus = sorted((n for n, d in G.nodes(data=True) if d["kind"] == "cpu"), key=_gkey)
        link = self.policy.inter_socket
        inferred = self.G.graph.get("inferred", False)
        assumed = self.policy.inter_socket_assumed
        package = {f"cpu{c.numa}": c.package for c in self.f.cpus if c.numa is not None and c.package is not None}
        for i, a in enumerate(cpus):
            for b in cpus[i + 1:]:
                note = self.policy.inter_socket_note
                if a in package and package.get(a) == package.get(b):
                    # NCCL has no notion of packages: every CPU<->CPU link gets its inter-CPU
                    # figure (ncclTopoGetInterCpuBw, topo.cc L60-81 at v2.30.7-1 [S3])
                    note = "; ".join(x for x in (note, f"NUMA nodes of one socket (package {package[a]}): the "
                                                       "CPU's internal fabric, which NCCL plans at its inter-CPU "
                                                       "figure all the same") if x)
                _edge(G, a, b, "inter_socket", link, inferred=inferred, assumed=assumed, note=note)
        if len(cpus) > 1 and assumed:
            self.used.add("inter_socket")

    def nvlink_reporting(self, mode: str) -> None:
        """``G.graph["nvlink_reported"]``: False when no source of the report could show NVLink and
        the GPUs may have it, so the PCIe path of a GPU pair is not a verdict (its mechanism is
        unknown, see ``paths``). Sources that show NVLink are ``nvidia-smi topo -m`` / ``nvlink -s``
        (and their silence is a fact), an NCCL XML's ``<nvlink>`` and hwloc's NVML backend
        (``NVLinkBandwidth``). NCCL_TOPO_FILE files (Azure ND-series VMs) leave NVLink out because
        NCCL adds the NVLinks it finds through NVML at run time; a PCI listing never shows it. None
        when nothing is to say: NVLink present, one GPU, a source that would show NVLink, or a GPU
        model without NVLink (then PCIe is the fact); ``HostFacts.nvlink_sources`` names them."""
        G, f = self.G, self.f
        G.graph["nvlink_reported"] = None
        if len(f.gpus) < 2 or mode in ("inferred", "none"):
            return
        if any(d["kind"] == "nvlink" for _, _, d in G.edges(data=True)):
            return
        if f.nvlink_sources:
            return  # a source that shows NVLink shows none: PCIe is the fact
        infos = [bw.gpu_generation(g.model or f.gpu_model) if (g.model or f.gpu_model) else None for g in f.gpus]
        capable = [i for i in infos if i is None or i.family is None or i.nvlink_links]
        if len(capable) < 2:
            return  # at most one GPU whose model has NVLink: the PCIe path is the fact
        info = next((i for i in capable if i is not None and i.family), None)
        G.graph["nvlink_reported"] = False
        has = f"the {info.family} has NVLink" if info is not None and info.family else "the GPU model is unknown"
        if mode == "nccl_xml":
            what = ("this NCCL topology file has no <nvlink> between two GPUs. Files given to NCCL through "
                    "NCCL_TOPO_FILE (Azure ND-series VMs) leave NVLink out because NCCL adds the NVLinks it finds "
                    "through NVML at run time")
        elif mode == "hwloc_xml":
            what = ("this hwloc XML has no NVLink information (hwloc reports NVLink only through its NVML backend, "
                    "hwloc 2 and later)")
        else:
            what = "a PCI listing cannot show NVLink"
        self.extra_assumptions.append(
            f"NVLink not reported: {what}, and {has}. GPU pairs show their PCIe path only (\"NVLink not reported\"), "
            "not a verdict; send nvidia-smi topo -m to know.")

    def numa_accounting(self) -> None:
        """``G.graph["numa_nodes"]``: NUMA nodes the host has as far as reported (NUMA ids run from
        0, so the highest id reported by the affinity columns, the PCI listing or the XML + 1, and
        at least the cpu nodes); ``G.graph["socket_count"]``: sockets when a source says
        (host_info), else None: NUMA nodes are not sockets (AMD NPS2/NPS4, Intel SNC split one
        socket into several), so SYS means "across NUMA nodes", which may stay inside one socket."""
        G, f = self.G, self.f
        cpus = [d for _, d in G.nodes(data=True) if d["kind"] == "cpu"]
        ids = {d["numa"] for d in cpus if d.get("numa") is not None}
        ids |= {g.numa for g in f.gpus if g.numa is not None} | {c.numa for c in f.cpus if c.numa is not None}
        if f.numa_count:  # a source listing every NUMA node with CPUs (hwloc, host_info)
            count = f.numa_count
        elif ids and 2 * len(ids) >= max(ids) + 1:
            count = max(ids) + 1  # ids run from 0 (NPS4 GPUs on 1, 3, 5, 7: eight nodes)
        else:
            count = len(ids)  # sparse ids are not a count (POWER9 numbers its chips' nodes 0 and 8)
        G.graph["numa_nodes"] = max(len(cpus), count)
        G.graph["socket_count"] = f.sockets
        within = f.sockets is None or G.graph["numa_nodes"] > f.sockets
        if len(cpus) > 2 and within:
            for u, v, d in G.edges(data=True):
                if d["kind"] == "inter_socket":
                    d["note"] = "; ".join(x for x in (
                        d.get("note"), "between NUMA nodes: the inter-socket link, or the CPU's internal fabric when "
                                       "both NUMA nodes sit on one socket (NPS/SNC); the report does not say which") if x)

    # exact ----------------------------------------------------------------------------------
    def exact(self) -> None:
        f, G = self.f, self.G
        devs = f.pci_by_bdf
        gpu_by_bdf = {g.bdf: g for g in f.gpus if g.bdf}
        nics_by_bdf: dict[str, list[NicFact]] = defaultdict(list)
        for n in f.nics:
            if n.bdf:
                nics_by_bdf[n.bdf].append(n)
        self._join_nics_by_order(nics_by_bdf)

        def parent_of(bdf: str) -> str | None:
            d = devs[bdf]
            p = d.parent_bdf or (d.ancestry[-1] if d.ancestry else None)
            return p if p in devs else None

        def interesting(bdf: str) -> bool:
            d = devs[bdf]
            return d.kind in ("gpu", "nic", "nvme") or bdf in gpu_by_bdf or bdf in nics_by_bdf

        keep: set[str] = set()
        for bdf in devs:
            if interesting(bdf):
                cur: str | None = bdf
                while cur is not None and cur not in keep:
                    keep.add(cur)
                    cur = parent_of(cur)
        # bridge roles: explicit port type, else alternate below a root port
        role: dict[str, str] = {}

        def role_of(bdf: str) -> str:
            if bdf in role:
                return role[bdf]
            d = devs[bdf]
            p = parent_of(bdf)
            r = d.kind
            if r == "bridge":
                if p is None and d.source.startswith("nccl_topo_xml"):
                    r = "upstream_port"  # NCCL's <pci> bridges are switches (virtual ffff:ff:xx.0 ones too)
                elif p is None:
                    r = "root_port"
                else:
                    pr = role_of(p)
                    r = "downstream_port" if pr == "upstream_port" else "upstream_port"
            role[bdf] = r
            return r

        node_of: dict[str, str] = {}
        for bdf in sorted(keep):
            r = role_of(bdf)
            if r == "root_port":
                node_of[bdf] = f"pci:{bdf}"
            elif r == "upstream_port":
                node_of[bdf] = f"pci:{bdf}"
            elif r == "downstream_port":
                p = parent_of(bdf)
                node_of[bdf] = f"pci:{p}" if p and role_of(p) == "upstream_port" else f"pci:{bdf}"
        # numa per root complex from every function below it (kept or not)
        rc_of: dict[str, str] = {}
        rc_numas: dict[str, Counter] = defaultdict(Counter)
        top_of: dict[str, str] = {}

        def rc_id(bdf: str) -> str:
            chain = self._chain(bdf, parent_of)
            top = devs[chain[-1]]
            if top.root:
                return f"rc:{top.root}"
            if top.source.startswith("nccl_topo_xml") and top.numa is not None:
                return f"rc:numa{top.numa}"  # NCCL XML: one host bridge per <cpu numaid> (NCCL's CPU node)
            if top.source.startswith(("nccl_topo_xml", "hwloc_xml")):
                return f"rc:{top.bdf}"  # XML: bus ids may be virtual (Azure ffff:ff:xx.0); one per element
            return f"rc:{top.bdf[:7]}"  # lspci: a device with no parent bridge sits on the root bus

        for bdf, d in devs.items():
            if bdf in keep or d.numa is not None:
                rc = rc_id(bdf)
                if bdf in keep:
                    rc_of[bdf] = rc
                if d.numa is not None:
                    rc_numas[rc][d.numa] += 1
        rcs = sorted(set(rc_of.values()))
        numa_of_rc: dict[str, int | None] = {
            rc: rc_numas[rc].most_common(1)[0][0] if rc_numas[rc] else None for rc in rcs
        }
        guessed = self._numa_by_bus_order(numa_of_rc)
        for rc in rcs:
            numa = numa_of_rc[rc] if numa_of_rc[rc] is not None else guessed.get(rc)
            cpu = self.cpu(numa) if numa is not None else self.unknown_cpu()
            inferred_rc = all(devs[b].source.startswith(("nccl_topo_xml", "hwloc_xml"))
                              for b in keep if rc_of[b] == rc)
            notes = []
            if inferred_rc and rc.startswith("rc:numa"):
                notes.append("one per NCCL <cpu> element (XML has no host bridges)")
            elif inferred_rc:
                notes.append("one per top-level PCI element (XML has no host bridges)")
            if numa_of_rc[rc] is None and numa is not None:
                notes.append(f"NUMA {numa} assumed from bus order (sockets own contiguous bus ranges)")
            _node(G, rc, "root_complex", f"host bridge of NUMA {numa}" if rc.startswith("rc:numa") else
                  f"host bridge {rc[3:]}", numa=numa, parent=cpu,
                  inferred=bool(inferred_rc), note="; ".join(notes) or None)
            _edge(G, rc, cpu, "cpu_link", inferred=bool(inferred_rc) or numa_of_rc[rc] is None)
        # nodes, parents first
        for bdf in sorted(keep, key=lambda b: (len(self._chain(b, parent_of)), b)):
            d = devs[bdf]
            r = role_of(bdf)
            p = parent_of(bdf)
            parent_node = node_of.get(p) if p else rc_of[bdf]
            numa = d.numa if d.numa is not None else G.nodes[rc_of[bdf]]["numa"]
            if r == "downstream_port":
                nid = node_of[bdf]
                if nid == f"pci:{bdf}":  # a downstream port whose upstream port is unknown
                    _node(G, nid, "switch", d.name or f"switch {bdf}", bdf=bdf, numa=numa, parent=parent_node,
                          upstream_bdf=None, port_bdfs=[bdf])
                    _edge(G, nid, parent_node, "pcie", note="upstream port not in the listing")
                else:
                    G.nodes[nid]["port_bdfs"].append(bdf)
                continue
            if r == "root_port":
                _node(G, node_of[bdf], "root_port", f"root port {bdf}", bdf=bdf, numa=numa, parent=parent_node,
                      port_type=d.port_type, acs_ctl=list(d.acs_ctl))
                _edge(G, node_of[bdf], parent_node, "pcie", note="inside the root complex")
                continue
            if r == "upstream_port":
                bcm = BCM_SWITCH_IDS.get((d.vendor_id, d.device_id))
                _node(G, node_of[bdf], "switch", d.name or f"PCIe switch {bdf}", bdf=bdf, numa=numa,
                      parent=parent_node, upstream_bdf=bdf, port_bdfs=[], vendor_id=d.vendor_id,
                      device_id=d.device_id, bcm_gen=bcm)
                self._link(node_of[bdf], parent_node, d, devs.get(p) if p else None, is_gpu=False)
                continue
            # endpoints
            pdev = devs.get(p) if p else None
            if bdf in gpu_by_bdf or d.kind == "gpu":
                g = gpu_by_bdf.get(bdf)
                if g is None:
                    self.warnings.append(f"NVIDIA GPU {bdf} in the PCI listing is not in nvidia-smi")
                    _node(G, f"pci:{bdf}", "gpu", d.name or bdf, bdf=bdf, numa=numa, parent=parent_node)
                    self._link(f"pci:{bdf}", parent_node, d, pdev, is_gpu=True)
                    continue
                self.add_gpu(g, parent_node, numa, inferred=False)
                self._link(g.name, parent_node, d, pdev, is_gpu=True, gpu=g)
            elif bdf in nics_by_bdf:
                for n in nics_by_bdf[bdf]:
                    self.add_nic(n, n.name, parent_node, numa, inferred=False)
                    self._link(n.name, parent_node, d, pdev, is_gpu=False)
            elif d.kind == "nic" and self._rdma_unlisted(d):
                # no RDMA listing at all (lspci/XML only): RDMA hardware is taken as an RDMA NIC
                # whose state is unknown
                nid = f"pci:{bdf}"
                plugin = devices.net_plugin(d.vendor_id, d.device_id, d.name)
                _node(G, nid, "nic", d.name or bdf, bdf=bdf, numa=numa, parent=parent_node, port=None,
                      state=None, phys_state=None, rate_gbps=None, link_layer=None, active=None, device=None,
                      nic_label=None, netdevs=[], gdr=None, rdma="assumed", transport="ofi" if plugin else "verbs",
                      note=(f"{plugin} NIC, which NCCL reaches through its libfabric plugin (aws-ofi-nccl); "
                            "state unknown" if plugin else
                            "RDMA hardware (ConnectX/InfiniBand class) with no RDMA listing in the report: "
                            "taken as an RDMA NIC, state unknown; send ibstat to know"))
                self._link(nid, parent_node, d, pdev, is_gpu=False)
            elif d.kind == "nic":
                # a network function no RDMA source names: NCCL's IB/RoCE transport cannot use it
                nid = f"pci:{bdf}"
                rdma_hw = _rdma_hardware(d)
                _node(G, nid, "other", "RDMA NIC not in the RDMA listing" if rdma_hw else "Ethernet (no RDMA)",
                      bdf=bdf, numa=numa, parent=parent_node, network=True, device_name=d.name,
                      note=("RDMA-capable function that no RDMA listing (ibstat, sysfs, topo -m NIC columns) "
                            "names: its RDMA device is absent, NCCL cannot use it" if rdma_hw else
                            "network function without an RDMA device: NCCL's IB/RoCE transport never uses it "
                            "(only its socket fallback may)"))
                self._link(nid, parent_node, d, pdev, is_gpu=False)
            elif d.kind in ("nvme", "other"):
                nid = f"pci:{bdf}"
                _node(G, nid, d.kind, d.name or bdf, bdf=bdf, numa=numa, parent=parent_node)
                self._link(nid, parent_node, d, pdev, is_gpu=False)
        self._place_leftovers()

    def _rdma_unlisted(self, d) -> bool:
        """True for RDMA hardware (InfiniBand class, Mellanox/NVIDIA ConnectX/BlueField) in a
        report with no RDMA listing at all (no ibstat/sysfs_ib/ibv_devinfo/ibstatus, topo -m NIC
        column, NCCL ``<net>`` or hwloc OpenFabrics device); with a listing, only the functions
        it names are NICs."""
        if d.source.startswith("nccl_topo_xml"):
            return True  # NCCL's own topology: its network <pci> elements are the NICs it uses
        return not self.f.nics and _rdma_hardware(d)

    def unknown_cpu(self) -> str:
        """The one cpu node for devices whose NUMA node nobody reported."""
        if getattr(self, "_unknown_cpu", None) is None:
            self._unknown_cpu = self.cpu(None, inferred=True)
        return self._unknown_cpu

    @staticmethod
    def _numa_by_bus_order(numa_of_rc: dict[str, int | None]) -> dict[str, int]:
        """Root complexes without NUMA: take the NUMA of the nearest lower known root bus (same domain)."""
        known = sorted((rc, n) for rc, n in numa_of_rc.items() if n is not None)
        if not known or len({n for _, n in known}) < 1:
            return {}
        out = {}
        for rc, n in numa_of_rc.items():
            if n is not None:
                continue
            same = [(k, kn) for k, kn in known if k[:7] == rc[:7]]
            lower = [kn for k, kn in same if k < rc]
            higher = [kn for k, kn in same if k > rc]
            if lower:
                out[rc] = lower[-1]
            elif higher:
                out[rc] = higher[0]
        return out

    @staticmethod
    def _chain(bdf: str, parent_of) -> list[str]:
        chain = [bdf]
        while (p := parent_of(chain[-1])) is not None and p not in chain:
            chain.append(p)
        return chain

    def _link(self, child: str, parent: str, d, pdev, *, is_gpu: bool, gpu: GpuFact | None = None) -> None:
        gen, width, max_gen, max_width = d.gen, d.width, d.max_gen, d.max_width
        if gpu is not None:
            gen = gen or gpu.link_gen_current
            width = width or gpu.link_width_current
            max_gen = max_gen or gpu.link_gen_max
            max_width = max_width or gpu.link_width_max
            if gpu.link_gen_host_max and max_gen:
                max_gen = min(max_gen, gpu.link_gen_host_max)
        note = None
        if pdev is not None and pdev.max_width and max_width and pdev.max_width < max_width:
            note = f"parent port is x{pdev.max_width}: the slot caps the device's x{max_width}"
            max_width = pdev.max_width
        if pdev is not None and pdev.max_gen and max_gen and pdev.max_gen < max_gen:
            note = (note + "; " if note else "") + f"parent port caps Gen{max_gen} at Gen{pdev.max_gen}"
            max_gen = pdev.max_gen
        if d.capabilities_denied and not gen:
            note = (note + "; " if note else "") + "lspci: Capabilities <access denied> (not root)"
        if _pcie_edge(self.G, child, parent, gen=gen, width=width, max_gen=max_gen, max_width=max_width,
                      is_gpu=is_gpu, note=note, assume=self.assumed_link(), reported_gbs=d.link_gbs):
            self.used.add("pcie")

    def _join_nics_by_order(self, nics_by_bdf: dict[str, list[NicFact]]) -> None:
        """mlx5_N without a PCI address: mlx5_core probes in bus order, so mlx5_N follows BDF order."""
        f = self.f
        named = [n for n in f.nics if not n.bdf and n.device and re.fullmatch(r"mlx5_\d+", n.device)
                 and n.port in (None, 1)]
        if not named:
            return
        funcs = sorted(d.bdf for d in f.pci if d.kind == "nic" and d.vendor_id == 0x15B3
                       and d.bdf not in nics_by_bdf and (d.class_code or 0x0200) >> 8 == 0x02)
        if len(funcs) != len(named):
            if funcs:
                self.warnings.append(
                    f"{len(named)} HCAs without a PCI address and {len(funcs)} Mellanox PCI functions: "
                    "HCAs placed from topo -m only"
                )
            return
        named.sort(key=lambda n: int(n.device.split("_")[1]))
        for n, bdf in zip(named, funcs):
            nics_by_bdf[bdf].append(_with_bdf(n, bdf))
        self.warnings.append(
            "HCA names joined to PCI addresses by bus order (mlx5_N numbering follows probe order); "
            "collect /sys/class/infiniband/*/device to make the join exact"
        )

    def _place_leftovers(self, why: str = "not in the PCI listing") -> None:
        """GPUs/NICs known to nvidia-smi/ibstat whose place no source states: nodes without a
        parent (``placement`` "unknown"), so no path class, NIC choice or finding is built on a
        place nobody reported; the document says what to send."""
        G = self.G
        unplaced = []
        for g in self.f.gpus:
            if g.name not in G:
                _node(G, g.name, "gpu", g.name, bdf=g.bdf, numa=g.numa, parent=None, inferred=True,
                      placement="unknown", **self.gpu_attrs(g), note=f"placement unknown: {why}")
                unplaced.append(g.name)
        for n in self.f.nics:
            if n.name not in self.nic_node and n.name not in G:
                self.add_nic(n, n.name, None, n.numa, inferred=True)
                G.nodes[n.name].update(placement="unknown", note=f"placement unknown: {why}")
                unplaced.append(n.name)
        if unplaced:
            self.unplaced.extend(unplaced)

    # inferred -------------------------------------------------------------------------------
    def inferred(self) -> None:
        f, G = self.f, self.G
        topo = f.topo
        labels = list(f.topo_labels) or list(topo)
        node_of: dict[str, str] = {}
        for g in f.gpus:
            node_of[g.name] = g.name
        nic_by_label = {}
        for n in f.nics:
            if n.label and n.label not in nic_by_label:  # port 1 (listed first) holds the label's cell
                nic_by_label[n.label] = n
                node_of[n.label] = n.name
        labels = [lb for lb in labels if lb in node_of]

        def tok(a: str, b: str) -> str | None:
            t = (topo.get(a) or {}).get(b) or (topo.get(b) or {}).get(a)
            if t and t.startswith("NV"):
                t = (f.topo_pci.get(a) or {}).get(b)  # -mp shows the PCIe relation hidden by NV#
            return t if t in PATH_ORDER else None

        # a device with no PCIe cell to any other and no affinity (its row cut from a partial
        # capture, all its cells NV#) has no known place: it is left unplaced, not given a CPU
        located = {g.name for g in f.gpus if g.numa is not None or g.cpu_affinity}
        labels = [lb for lb in labels if lb in located or any(tok(lb, o) for o in labels if o != lb)]

        rank = {t: i for i, t in enumerate(PATH_ORDER)}

        def groups(members: list[str], closer_than: str, key_extra=None) -> list[list[str]]:
            parent = {m: m for m in members}

            def find(x: str) -> str:
                while parent[x] != x:
                    parent[x] = parent[parent[x]]
                    x = parent[x]
                return x

            for i, a in enumerate(members):
                for b in members[i + 1:]:
                    t = tok(a, b)
                    if t is not None and rank[t] < rank[closer_than]:
                        parent[find(a)] = find(b)
            if closer_than == "SYS":
                # devices with no cell between them (NIC rows cut from a capture) and the same cells
                # to every other device stand in the same place as far as the matrix says: one NUMA
                # node, not one invented per device (equal rows imply no cell between the two)
                same: dict[tuple, str] = {}
                for m in members:
                    row = tuple(tok(m, o) for o in labels)
                    if any(row):
                        if row in same:
                            parent[find(m)] = find(same[row])
                        else:
                            same[row] = m
            if key_extra:
                # same NUMA affinity joins two groups unless topo -m puts SYS between them
                # (the matrix wins: VMs often expose one NUMA node while nvidia-smi says SYS)
                by_key: dict[Any, str] = {}
                reported: set[frozenset] = set()
                for m in members:
                    k = key_extra(m)
                    if k is None:
                        continue
                    if k not in by_key:
                        by_key[k] = m
                        continue
                    ra, rb = find(m), find(by_key[k])
                    if ra == rb:
                        continue
                    ga = [x for x in members if find(x) == ra]
                    gb = [x for x in members if find(x) == rb]
                    sys_pair = next(((x, y) for x in ga for y in gb if tok(x, y) == "SYS"), None)
                    if sys_pair and labels.index(sys_pair[0]) > labels.index(sys_pair[1]):
                        sys_pair = (sys_pair[1], sys_pair[0])
                    if sys_pair is None:
                        parent[ra] = rb
                    elif frozenset((ra, rb)) not in reported:
                        reported.add(frozenset((ra, rb)))
                        self.disagreements.append({
                            "subject": f"{sys_pair[0]}-{sys_pair[1]}",
                            "message": f"topo -m says SYS for {sys_pair[0]}-{sys_pair[1]} although "
                                       f"{m} and {by_key[k]} report the same "
                                       f"{k[0] == 'numa' and 'NUMA' or 'CPU'} affinity {k[1]}; "
                                       "the layout follows the matrix",
                            "sources": ["nvidia_smi_topo"],
                        })
            out: dict[str, list[str]] = defaultdict(list)
            for m in members:
                out[find(m)].append(m)
            return sorted(out.values(), key=lambda ms: labels.index(ms[0]))

        gpu_numa = {g.name: g.numa for g in f.gpus}
        gpu_aff = {g.name: g.cpu_affinity for g in f.gpus}
        numa_key = (lambda m: ("numa", gpu_numa[m]) if gpu_numa.get(m) is not None else
                    (("aff", gpu_aff[m]) if gpu_aff.get(m) else None))
        gen, gen_note = self.typical_gen()
        known_numa = sorted({n for n in gpu_numa.values() if n is not None})
        numa_groups = groups(labels, "SYS", numa_key)
        # NUMA ids: from the affinity columns, else by order of first CPU in the affinity list
        aff_order = sorted({a for a in gpu_aff.values() if a}, key=_first_cpu)
        rc_k = sw_k = 0
        for grp in numa_groups:
            numas = [gpu_numa[m] for m in grp if gpu_numa.get(m) is not None]
            numa = Counter(numas).most_common(1)[0][0] if numas else None
            note = None
            if numa is None:
                affs = [gpu_aff[m] for m in grp if gpu_aff.get(m)]
                if affs and f.topo_labels:
                    numa = aff_order.index(Counter(affs).most_common(1)[0][0])
                    note = "NUMA id assumed from the order of the CPU affinity lists"
            if numa is not None and f"cpu{numa}" in G:
                numa = None  # two groups claim one NUMA node: keep them apart, ids unknown
            cpu = self.cpu(numa, inferred=True)
            if numa is None and not any(m in gpu_numa for m in grp):
                # NIC rows of topo -m carry no affinity: a NIC group SYS to every GPU sits on a NUMA
                # node no GPU reports, which one the matrix does not say
                free = sorted(set(range(max(known_numa) + 1)) - set(known_numa)) if known_numa else []
                G.nodes[cpu]["label"] = "CPU NUMA ?"
                note = ("NUMA node not reported (topo -m gives NIC rows no affinity)"
                        + (f": one of NUMA {', '.join(map(str, free))}, the ids no GPU reports" if free else ""))
                G.nodes[cpu]["numa_candidates"] = free
            if note:
                G.nodes[cpu]["note"] = note
            for rc_grp in groups(grp, "NODE"):
                rc = f"rc:inferred:{rc_k}"
                rc_k += 1
                _node(G, rc, "root_complex", "host bridge (inferred)", numa=G.nodes[cpu]["numa"], parent=cpu,
                      inferred=True)
                _edge(G, rc, cpu, "cpu_link", inferred=True)
                for pxb_grp in groups(rc_grp, "PHB"):
                    pix_grps = groups(pxb_grp, "PXB")
                    top = rc
                    if len(pix_grps) > 1:
                        top = f"switch:inferred:{sw_k}"
                        sw_k += 1
                        _node(G, top, "switch", "PCIe switch (inferred)", numa=G.nodes[cpu]["numa"], parent=rc,
                              inferred=True, upstream_bdf=None, port_bdfs=[])
                        self._inferred_link(top, rc, gen, gen_note)
                    for pix in pix_grps:
                        holder = top
                        if len(pix) > 1 or len(pix_grps) > 1:
                            holder = f"switch:inferred:{sw_k}"
                            sw_k += 1
                            _node(G, holder, "switch", "PCIe switch (inferred)", numa=G.nodes[cpu]["numa"],
                                  parent=top, inferred=True, upstream_bdf=None, port_bdfs=[])
                            self._inferred_link(holder, top, gen, gen_note)
                        for m in pix:
                            self._inferred_device(m, holder, G.nodes[cpu]["numa"], gen, gen_note, nic_by_label)
        # GPUs / NICs the matrix does not place (no row, no PCIe cell, no affinity)
        self._place_leftovers("topo -m gives no PCIe relation for it (its row is missing)")

    def _inferred_link(self, child: str, parent: str, gen: int | None, note: str) -> None:
        if _pcie_edge(self.G, child, parent, gen=None, width=None, max_gen=None, max_width=None, is_gpu=False,
                      inferred=True, assume=self.assumed_link()):
            self.used.add("pcie")

    def _inferred_device(self, label: str, parent: str, numa: int | None, gen: int | None, note: str,
                         nic_by_label: dict[str, NicFact]) -> None:
        g = self.f.gpu(label)
        if g is not None:
            self.add_gpu(g, parent, numa, inferred=True)
            known = g.link_gen_max or g.link_width_max
            if g.c2c and not known:
                # Grace: the GPU reaches its CPU over NVLink-C2C, not a PCIe link (NCCL's LINK_C2C,
                # topo.cc L929-943 at v2.30.7-1 [S3]); its bandwidth is not in topo -m
                _edge(self.G, g.name, parent, "c2c", inferred=True,
                      note="NVLink-C2C to its Grace CPU (GPU NUMA ID in topo -m); bandwidth not reported")
            elif known:
                if _pcie_edge(self.G, g.name, parent, gen=g.link_gen_current, width=g.link_width_current,
                              max_gen=g.link_gen_max, max_width=g.link_width_max, is_gpu=True, inferred=True,
                              note="link from nvidia-smi --query-gpu; position inferred from topo -m",
                              assume=self.assumed_link()):
                    self.used.add("pcie")
            else:
                self._inferred_link(g.name, parent, gen, note)
            return
        n = nic_by_label[label]
        self.add_nic(n, n.name, parent, numa, inferred=True)
        self._inferred_link(n.name, parent, gen, note)
        for m in self.f.nics:  # further ports of the same HCA (mlx5_0:2): same place, own node
            if m is not n and m.label == label and m.name not in self.G:
                self.add_nic(m, m.name, parent, numa, inferred=True)
                self._inferred_link(m.name, parent, gen, note)

    # checks ---------------------------------------------------------------------------------
    def check_against_topo(self, exact: bool) -> None:
        f, G = self.f, self.G
        if not f.topo:
            return
        nodes = {}
        for g in f.gpus:
            if g.name in G:
                nodes[g.name] = g.name
        for n in f.nics:
            if n.label and n.name in G and n.label not in nodes:
                nodes[n.label] = n.name
        labels = [lb for lb in f.topo_labels if lb in nodes]
        what = "the PCI tree" if exact else "the inferred layout"
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                t = (f.topo.get(a) or {}).get(b) or (f.topo.get(b) or {}).get(a)
                if not t or t == "X":
                    continue
                got = path_class(G, nodes[a], nodes[b])
                if t.startswith("NV") != got.startswith("NV"):
                    self._dis(a, b, t, got, what)
                elif not t.startswith("NV") and not _same_class(t, got, f.topo_legacy):
                    # NV counts are compared in nvlinks(); NIC-NIC cells catch wrong HCA joins
                    self._dis(a, b, t, got, what, _lca(G, nodes[a], nodes[b]))

    def _dis(self, a: str, b: str, t: str, got: str, what: str, lca: str | None = None) -> None:
        where = f" (lowest common ancestor {lca})" if lca else ""
        self.disagreements.append({
            "subject": f"{a}-{b}",
            "message": f"topo -m says {t} for {a}-{b} but {what} gives {got}{where}",
            "sources": ["nvidia_smi_topo"] + [s for s in self.f.sources if s != "nvidia_smi_topo"][:3],
        })

    # entry ----------------------------------------------------------------------------------
    def build(self) -> nx.Graph:
        f, G = self.f, self.G
        if f.has_pci_tree:
            xml_only = all(s in ("nccl_topo_xml", "hwloc_xml") for s in
                           {src for d in f.pci for src in d.source.split(",") if src})
            mode = ("nccl_xml" if "nccl_topo_xml" in f.sources else "hwloc_xml") if xml_only else "exact"
            inferred = False
        elif f.topo:
            mode, inferred = "inferred", True
        else:
            mode, inferred = "none", True
        G.graph.update(hostname=f.hostname, inferred=inferred, mode=mode, sources=list(f.sources),
                       cpu_vendor=f.cpu_vendor, cpu_model=f.cpu_model, cpu_name=f.cpu_name, gpu_model=f.gpu_model,
                       gdr_module=f.gdr_module, gdr_module_detail=f.gdr_module_detail,
                       iommu=({"translated": list(f.iommu_translated), "cmdline": f.iommu_cmdline,
                               "virtualized": f.virtualized} if f.host_info else None),
                       nic_inventory=list(f.nic_inventory), nic_unknown=f.nic_unknown,
                       socket_nets=list(f.socket_nets), virtual_pci=f.virtual_pci)
        for c in f.cpus:
            if c.numa is not None:
                self.cpu(c.numa)
                G.nodes[f"cpu{c.numa}"].update(affinity=c.affinity)
        if mode in ("exact", "nccl_xml", "hwloc_xml"):
            self.exact()
        elif mode == "inferred":
            self.inferred()
        else:
            self._place_leftovers("no topology source (topo -m, lspci, sysfs or a topology XML) places it")
            if not {"nvidia_smi_topo", "lspci_tree", "lspci_verbose", "sysfs_pci", "nccl_topo_xml",
                    "hwloc_xml"} & set(f.sources):
                self.warnings.append("no topology source (topo -m, lspci, sysfs or a topology XML): layout unknown")
        if self.unplaced and mode != "none":
            self.warnings.append(
                f"placement unknown for {_names(self.unplaced)}: no source places "
                f"{'it' if len(self.unplaced) == 1 else 'them'} in the PCIe tree, so no GPU-NIC choice, GPUDirect "
                "RDMA verdict or PCIe finding is made for "
                f"{'it' if len(self.unplaced) == 1 else 'them'}; send the complete nvidia-smi topo -m (or lspci -tv, "
                "or the agent's sysfs listing) to know")
        G.graph["unplaced"] = list(self.unplaced)
        geforce = [g.name for g in f.gpus if (g.model or f.gpu_model) and bw.gpu_generation(g.model or f.gpu_model).geforce]
        if len(geforce) >= 2 and not f.p2p:
            self.extra_assumptions.append(
                "GeForce RTX GPUs: their driver reports PCIe peer-to-peer as not supported, so NCCL uses host memory "
                "(SHM) for GPU pairs without NVLink whatever NCCL_P2P_LEVEL says (NCCL checks the NVML P2P status, "
                "paths.cc L373-411 [S2]); send nvidia-smi topo -p2p r to know.")
        self.nvlinks()
        self.sockets()
        self.numa_accounting()
        self.nvlink_reporting(mode)
        with frozen(G):  # the graph is complete; the check only reads it
            self.check_against_topo(exact=not inferred)
        G.graph["warnings"] = self.warnings
        G.graph["disagreements"] = self.disagreements
        p = self.policy
        G.graph["gpu_model_assumed"] = p.gpu_class if p.gpu_assumed else None
        G.graph["assumed_gpu_model"] = p.gpu_model if p.gpu_assumed else None
        G.graph["assumptions"] = ([p.sentences[k] for k in ("gpu", "pcie", "inter_socket")
                                   if k in self.used and k in p.sentences] + self.extra_assumptions)
        G.graph["assumed"] = sorted(self.used)
        return G


def _names(items: list[str]) -> str:
    """``GPU4, GPU5, ... and GPU15`` (at most eight named)."""
    items = sorted(items, key=_gkey)
    if len(items) > 8:
        return ", ".join(items[:6]) + f", ... and {items[-1]} ({len(items)} devices)"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _with_bdf(n: NicFact, bdf: str) -> NicFact:
    from dataclasses import replace

    return replace(n, bdf=bdf)


def _rdma_hardware(d) -> bool:
    """RDMA hardware by PCI ids and name (:func:`apps.domain.devices.rdma_hardware`)."""
    return devices.rdma_hardware(d.class_code, d.vendor_id, d.device_id, d.name)


def _lca(G: nx.Graph, a: str, b: str) -> str | None:
    sb = set(ancestors(G, b))
    return next((n for n in ancestors(G, a) if n in sb), None)


def _same_class(topo_token: str, graph_token: str, legacy: bool) -> bool:
    if topo_token == graph_token:
        return True
    if legacy and {topo_token, graph_token} == {"PHB", "NODE"}:
        return True  # legacy legends have no NODE: PHB covered both
    return False


def _gkey(name: str) -> tuple[int, str]:
    m = re.search(r"(\d+)$", name)
    return (int(m.group(1)) if m else -1, name)


def _first_cpu(aff: str) -> int:
    m = re.match(r"\s*(\d+)", aff or "")
    return int(m.group(1)) if m else 1 << 30


def build_host_graph(facts: HostFacts) -> nx.Graph:
    """Build the HostGraph of one host (see the module docstring for the schema).

    Parameters
    ----------
    facts : HostFacts
        From :func:`apps.domain.assemble.assemble`.

    Returns
    -------
    networkx.Graph
        Never raises on inconsistent facts; conflicts are in ``G.graph["disagreements"]``.

    Examples
    --------
    >>> from apps.domain.assemble import assemble
    >>> topo = {"matrix": {"GPU0": {"GPU0": "X", "GPU1": "PIX"}, "GPU1": {"GPU0": "PIX", "GPU1": "X"}}}
    >>> G = build_host_graph(assemble({"nvidia_smi_topo": topo}, "h"))
    >>> G.graph["inferred"], path_class(G, "GPU0", "GPU1")
    (True, 'PIX')
    """
    return _Build(facts).build()
