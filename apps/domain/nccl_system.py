"""NCCL's view of one host: the system its search plans channels on, built from the host graph.

NCCL (v2.30.7-1) plans every collective on a topology *system* (``src/graph/topo.h``): GPUs,
NVSwitches, PCI switches, CPUs and NICs ("NET" nodes) joined by directed links that each carry a
bandwidth, and, for every GPU, a *path* to each other GPU and to each NET with a type (``NVL`` ...
``SYS``) and the bandwidth of its narrowest link (``paths.cc``). :func:`build_system` makes that
system from topoweb's own host graph and document, so the search (``nccl_search``) and the tuning
model (``nccl_tuning``) read one model of the host:

* **Links** are the graph's edges, both directions, each with the NCCL figure that
  :mod:`apps.domain.bandwidth` put on the edge (``nccl_gbs``: NVLink ``count x SM*_NVLINK_BW``,
  PCIe ``width x speed / 80``, CPU<->CPU NCCL's constant, xGMI RCCL's per-link figure). A GPU's
  NVSwitch edges become one link to the fabric node ``NVS`` (NCCL's ``NVS`` node, topo.cc).
  Root-complex-to-CPU edges carry no NCCL figure and never limit (NCCL has no such link).
* **GPU->GPU paths** are the document's ``gpu_pairs`` hops (NVLink, NVSwitch, NVB relays through a
  GPU, PCIe peer-to-peer, or host memory), walked in either direction; their type is the pair's
  ``nccl_path``. A pair whose mechanism is ``unknown`` makes the system unknown (``unknown``).
* **NETs** are the NIC ports NCCL uses (:func:`nets_of`): compute, usable, of one link layer,
  filtered by ``NCCL_IB_HCA``; ports of one adapter (same HCA, or one PCI device) are fused into one
  virtual NIC whose bandwidth is their sum (``NCCL_NET_MERGE_LEVEL`` default ``PORT``,
  ``ncclTopoGetFusionEnv`` topo.cc L1738-1747, ``ncclTopoAutoMerge`` L1375-1437); a NET's bandwidth
  is its port speed Mb/s / 8000 (topo.cc L418).
* **GPU<->NET paths** follow the PCIe tree (GPUDirect RDMA) or, without GPUDirect, go through the
  CPU local to the GPU (paths.cc L844-855); PXN (paths.cc L812-842) replaces a GPU's path to a NET
  by NVLink to the NET's local GPU and that GPU's PCIe path when the local GPU is at most ``P2C``
  from it with GPUDirect, and either has more bandwidth or the GPU's own path crosses the CPU.

Everything here is pure: a frozen :class:`System` of plain tuples and dicts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from apps.domain import bandwidth as bw
from apps.domain import hostgraph, paths
from apps.domain.paths import nccl_rank
from apps.domain.nccl_local import PathView, local_gpu
from apps.domain.names import natural_key

__all__ = ["Path", "Net", "System", "build_system", "document_graph", "nets_of", "NVS"]

NVS = "NVS"  # the NVSwitch fabric node of NCCL's system
_TYPES = paths.NCCL_TYPES  # LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS NET DIS (graph.h)
LinkKey = tuple[str, str]


def _worst(*types: str) -> str:
    return max(types, key=nccl_rank)


@dataclass(frozen=True)
class Path:
    """One NCCL path: ``type`` (``NVL`` ... ``SYS``, ``PXN``), the directed ``links`` it crosses in
    order, ``bw`` the NCCL GB/s of its narrowest link, ``intel_phb`` when NCCL charges its PCIe links
    6/5 of the bandwidth (a GPU path of type ``PHB`` through an Intel CPU, ``INTEL_P2P_OVERHEAD``,
    search.cc L81-93, topo.h L39), ``via`` the GPU a PXN path relays through."""

    type: str
    links: tuple[LinkKey, ...]
    bw: float
    intel_phb: bool = False
    via: str | None = None


@dataclass(frozen=True)
class Net:
    """One NET of NCCL's system: ``name`` (``mlx5_0``, ``mlx5_0+mlx5_1`` for a fused adapter), its
    ``ports``, ``gbs`` (NCCL's bandwidth, port Mb/s / 8000 summed over fused ports), the graph
    ``node`` it hangs off and ``id`` (the NET node of the links)."""

    name: str
    ports: tuple[str, ...]
    gbs: float
    node: str
    id: str


@dataclass(frozen=True)
class System:
    """NCCL's system for one host (see the module docstring).

    ``gpus`` in device order with ``dev`` indexes; ``sm`` the lowest compute capability x10 (None
    for AMD GPUs, which run RCCL); ``cap`` the directed link capacities; ``gpu_paths[(a, b)]``;
    ``nets``; ``to_net[(gpu, net)]`` (PXN applied) and ``from_net[(net, gpu)]``; ``local_gpu[net]``
    (``ncclTopoGetLocalGpu`` after PXN); ``nvswitch`` (an NVS node exists); CPU ``arch`` and
    ``vendor`` as NCCL names them; ``unknown`` says why NCCL's view cannot be built (a GPU pair
    whose mechanism the report cannot tell)."""

    gpus: tuple[str, ...]
    dev: Mapping[str, int]
    sm: int | None
    sm_max: int | None
    amd: bool
    cap: Mapping[LinkKey, float]
    gpu_paths: Mapping[tuple[str, str], Path]
    nets: tuple[Net, ...]
    to_net: Mapping[tuple[str, str], Path]
    from_net: Mapping[tuple[str, str], Path]
    local_gpu: Mapping[str, str | None]
    nvswitch: bool
    arch: str
    vendor: str
    gpu_pci: Mapping[str, float]
    nvlink_total: Mapping[str, float]
    unknown: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[tuple[str, float, float | None], ...] = ()

    def max_bw(self, inter: bool) -> float:
        """``system->maxBw``: the best path bandwidth from a GPU to a GPU (or, across nodes, to a
        NET), search.cc L20-29 and L39-54; ``LOC_BW`` 5000 for a lone GPU."""
        if not inter and len(self.gpus) == 1:
            return 5000.0
        if inter:
            vals = [p.bw for p in self.to_net.values()]
        else:
            vals = [p.bw for p in self.gpu_paths.values()]
        return max(vals, default=0.0)

    def total_bw(self) -> float:
        """``system->totalBw``: per GPU the larger of its PCIe link and the sum of its NVLinks,
        the largest over GPUs (``getTotalBw``, search.cc L30-38)."""
        if len(self.gpus) == 1 and not self.nets:
            return 5000.0
        return max((max(self.gpu_pci.get(g, 0.0), self.nvlink_total.get(g, 0.0)) for g in self.gpus), default=0.0)


# ---------------------------------------------------------------------------------------- graph


def document_graph(doc: Mapping[str, Any]) -> nx.Graph:
    """The HostGraph of a snapshot document, rebuilt from its ``graph`` nodes and edges (the
    inverse of ``analysis._graph_dict``): what the estimate reads when it is handed a stored
    document rather than a fresh analysis."""
    g = doc.get("graph") or {}
    summary = doc.get("summary") or {}
    G = nx.Graph(hostname=doc.get("hostname"), inferred=doc.get("inferred"), sources=list(doc.get("sources") or []),
                 mode=g.get("mode"), cpu_vendor=g.get("cpu_vendor"), cpu_model=g.get("cpu_model"),
                 gpu_model=summary.get("gpu_model"), warnings=list(doc.get("warnings") or []),
                 disagreements=list(g.get("disagreements") or []), assumptions=list(doc.get("assumptions") or []),
                 gpu_model_assumed=summary.get("gpu_model_assumed"), assumed_gpu_model=g.get("assumed_gpu_model"),
                 gdr_module=g.get("gdr_module"), iommu=g.get("iommu"))
    for n in g.get("nodes") or []:
        attrs = {k: n.get(k) for k in ("kind", "label", "bdf", "numa", "parent", "inferred")}
        G.add_node(n["id"], **attrs, **(n.get("attrs") or {}))
    for e in g.get("edges") or []:
        attrs = {("source" if k == "citation" else k): v for k, v in e.items() if k not in ("source", "target")}
        G.add_edge(e["source"], e["target"], **attrs)
    return G


def _num(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if v > 0 and math.isfinite(v) else None


def _edge_nccl_gbs(d: Mapping, model: str | None) -> float:
    """NCCL's GB/s of one graph edge (per direction): the edge's own NCCL figure from
    :mod:`apps.domain.bandwidth`, else the table's figure for what the edge says, else its spec."""
    got = _num(d.get("nccl_gbs"))
    if got:
        return got
    kind = d.get("kind")
    if kind == "pcie":
        link = bw.pcie_link(d.get("gen") or d.get("max_gen"), d.get("width") or d.get("max_width"))
        if link.nccl_gbs:
            return link.nccl_gbs
    if kind == "nvlink" and d.get("links") and d.get("fabric") != "xgmi":
        link = bw.nvlink(model, int(d["links"]))
        if link.nccl_gbs:
            return link.nccl_gbs
    if kind == "cpu_link":
        return math.inf  # the root complex is part of NCCL's CPU node
    return _num(d.get("spec_gbs")) or _num(d.get("expected_gbs")) or math.inf


def _capacities(G: nx.Graph, model: str | None) -> tuple[dict[LinkKey, float], dict[str, float], dict[str, float]]:
    """(directed link capacities, each GPU's PCIe link, each GPU's NVLink sum) from the graph."""
    cap: dict[LinkKey, float] = {}
    pci: dict[str, float] = {}
    nvl: dict[str, float] = {}
    for u, v, d in G.edges(data=True):
        c = _edge_nccl_gbs(d, model)
        ku, kv = G.nodes[u].get("kind"), G.nodes[v].get("kind")
        if d.get("kind") == "nvlink" and "nvswitch" in (ku, kv):
            g = u if kv == "nvswitch" else v
            cap[(g, NVS)] = cap.get((g, NVS), 0.0) + c
            cap[(NVS, g)] = cap.get((NVS, g), 0.0) + c
            nvl[g] = nvl.get(g, 0.0) + c
            continue
        cap[(u, v)] = cap[(v, u)] = c
        if d.get("kind") == "nvlink":
            for g in (u, v):
                if G.nodes[g].get("kind") == "gpu":
                    nvl[g] = nvl.get(g, 0.0) + c
        if d.get("kind") == "pcie":
            for g, other in ((u, v), (v, u)):
                if G.nodes[g].get("kind") == "gpu" and G.nodes[g].get("parent") == other:
                    pci[g] = c
    return cap, pci, nvl


# ---------------------------------------------------------------------------------------- GPU paths


def _hop_links(hops: list[Mapping], reverse: bool) -> tuple[LinkKey, ...]:
    out = []
    seq = list(reversed(hops)) if reverse else list(hops)
    for h in seq:
        if h.get("kind") == "host_memory_copy":
            continue
        u, v = str(h.get("from_id") or h.get("from")), str(h.get("to_id") or h.get("to"))
        if reverse:
            u, v = v, u
        if h.get("kind") == "nvswitch":
            u = NVS if u in ("nvswitch", "NVSwitch") or u.startswith("nvswitch") else u
            v = NVS if v in ("nvswitch", "NVSwitch") or v.startswith("nvswitch") else v
        out.append((u, v))
    return tuple(out)


def _pair_type(pair: Mapping) -> str:
    t = pair.get("nccl_path")
    if pair.get("mechanism") in ("nvlink", "nvswitch"):
        return "NVB" if pair.get("via") else "NVL"
    if t:
        return str(t)
    return paths.nccl_type(pair.get("path_class")) or "SYS"


def _path(ptype: str, links: tuple[LinkKey, ...], cap: Mapping[LinkKey, float], *, intel_phb: bool = False,
          via: str | None = None) -> Path:
    width = min((cap.get(k, math.inf) for k in links), default=math.inf)
    return Path(ptype, links, round(width, 3) if math.isfinite(width) else 5000.0, intel_phb, via)


def _gpu_paths(doc: Mapping, gpus: tuple[str, ...], cap: Mapping[LinkKey, float],
               intel: bool) -> tuple[dict[tuple[str, str], Path], str | None]:
    keep = set(gpus)
    out: dict[tuple[str, str], Path] = {}
    for p in doc.get("gpu_pairs") or []:
        a, b = p.get("a"), p.get("b")
        if a not in keep or b not in keep:
            continue
        if p.get("mechanism") == "unknown":
            return {}, f"{a}-{b}: {p.get('reason')}"
        hops = [h for h in p.get("hops") or [] if isinstance(h, Mapping)]
        t = _pair_type(p)
        phb = intel and t == "PHB"
        out[(a, b)] = _path(t, _hop_links(hops, False), cap, intel_phb=phb)
        out[(b, a)] = _path(t, _hop_links(hops, True), cap, intel_phb=phb)
    return out, None


# ---------------------------------------------------------------------------------------- NETs


def _usable(n: Mapping) -> bool:
    if n.get("active") is not None:
        return bool(n["active"])
    return not n.get("state") or str(n.get("state")).lower() == "active"


def _hca_selected(name: str, value: str) -> bool:
    """Whether ``NCCL_IB_HCA=value`` keeps HCA ``name``: prefix match unless ``=``, ``^`` excludes
    (``parseStringList``/``matchIfList``, src/misc/utils.cc; the env docs [S12])."""
    v = (value or "").strip()
    exclude = v.startswith("^")
    v = v[1:] if exclude else v
    exact = v.startswith("=")
    v = v[1:] if exact else v
    hit = False
    for tok in v.split(","):
        ent = tok.strip().split(":")[0]
        if ent and (name.split(":")[0] == ent if exact else name.split(":")[0].startswith(ent)):
            hit = True
            break
    return not hit if exclude else hit


def nets_of(doc: Mapping[str, Any], env: Mapping[str, str] | None = None) -> tuple[list[tuple[str, list[dict]]], str]:
    """The NETs NCCL builds from the document's NICs: ``([(name, [nic dicts]), ...], link layer)``.

    Compute ports (``nics[].compute``: those NCCL gives GPU traffic), usable (Active or state not
    reported), with a line rate; of the link layer carrying the most bandwidth (NCCL does not mix
    InfiniBand and RoCE in one net, rule F04); kept by ``NCCL_IB_HCA`` when the environment sets it.
    Ports of one adapter (one HCA's ports, or functions of one PCI device) are one virtual NIC
    unless ``NCCL_NET_MERGE_LEVEL=LOC`` (topo.cc L1738-1747)."""
    env = env or {}
    nics = [n for n in doc.get("nics") or [] if isinstance(n, Mapping) and n.get("compute", True) and _usable(n)
            and _num(n.get("rate_gbps"))]
    hca = env.get("NCCL_IB_HCA")
    if hca:
        nics = [n for n in nics if n.get("transport") == "ofi" or _hca_selected(str(n.get("name")), hca)]
    groups: dict[str, list[dict]] = {}
    for n in nics:
        groups.setdefault(str(n.get("link_layer") or ""), []).append(dict(n))
    if not groups:
        return [], ""
    layer = max(groups, key=lambda k: (sum(_num(n.get("rate_gbps")) or 0 for n in groups[k]), k == "InfiniBand"))
    fuse = str(env.get("NCCL_NET_MERGE_LEVEL", "PORT")).upper() not in ("LOC",)
    adapters: dict[str, list[dict]] = {}
    for n in sorted(groups[layer], key=lambda n: natural_key(str(n.get("name")))):
        key = str(n.get("name")).split(":")[0]
        bdf = str(n.get("bdf") or "")
        if bdf and len(bdf) > 2 and bdf[-2] == ".":
            key = "pci:" + bdf[:-2]
        if not fuse:
            key = str(n.get("name"))
        adapters.setdefault(key, []).append(n)
    return [("+".join(str(p.get("name")) for p in ports), ports) for ports in adapters.values()], layer


def _ancestry(G: nx.Graph, n: str) -> list[str]:
    return hostgraph.ancestors(G, n)


def _socket_route(G: nx.Graph, c1: str, c2: str) -> list[str] | None:
    if c1 == c2:
        return [c1]
    sub = nx.subgraph_view(G, filter_edge=lambda u, v: G.edges[u, v].get("kind") == "inter_socket")
    try:
        return nx.shortest_path(sub, c1, c2)
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        return None


def _cpu_route(G: nx.Graph, g: str, n: str, sockets: dict | None = None) -> list[str] | None:
    """GPU ``g`` up to its CPU, across to the NIC's CPU, down to ``n``: data staged in host memory
    local to the GPU (``addInterStep(CPU, localCpu, ...)``, paths.cc L844-855). ``sockets`` keeps
    the CPU-to-CPU routes found (one search per CPU pair for all the GPU x NET pairs)."""
    up_g, up_n = _ancestry(G, g), _ancestry(G, n)
    if G.nodes[up_g[-1]].get("kind") != "cpu" or G.nodes[up_n[-1]].get("kind") != "cpu":
        return None
    key = (up_g[-1], up_n[-1])
    if sockets is None or key not in sockets:
        mid = _socket_route(G, *key)
        if sockets is not None:
            sockets[key] = mid
    else:
        mid = sockets[key]
    if mid is None:
        return None
    return up_g + mid[1:-1] + list(reversed(up_n))


def _links(nodes: list[str]) -> tuple[LinkKey, ...]:
    return tuple(zip(nodes, nodes[1:]))


def _net_paths(G: nx.Graph, doc: Mapping, gpus: tuple[str, ...], nets: list[Net], cap: dict[LinkKey, float]
               ) -> tuple[dict[tuple[str, str], Path], dict[tuple[str, str], Path], dict[tuple[str, str], bool]]:
    """Direct GPU->NET and NET->GPU paths (before PXN) and GPUDirect per (GPU, NET)."""
    cells = {(c.get("gpu"), c.get("nic")): c for c in doc.get("gpu_nic_matrix") or [] if isinstance(c, Mapping)}
    to_net: dict[tuple[str, str], Path] = {}
    from_net: dict[tuple[str, str], Path] = {}
    gdr: dict[tuple[str, str], bool] = {}
    sockets: dict = {}
    for net in nets:
        cap[(net.node, net.id)] = cap[(net.id, net.node)] = net.gbs
        for g in gpus:
            cell = cells.get((g, net.ports[0])) or {}
            t = cell.get("nccl_path")
            if not t or g not in G or net.node not in G:
                continue
            ok = bool(cell.get("gdr"))
            nodes = paths.tree_route(G, g, net.node) if ok else _cpu_route(G, g, net.node, sockets)
            if not nodes:
                continue
            t = t if ok else _worst(t, "PHB")
            up = _links(nodes) + ((net.node, net.id),)
            down = ((net.id, net.node),) + _links(list(reversed(nodes)))
            to_net[(g, net.name)] = _path(t, up, cap)
            from_net[(net.name, g)] = _path(t, down, cap)
            gdr[(g, net.name)] = ok
    return to_net, from_net, gdr


def _pxn(gpus: tuple[str, ...], dev: Mapping[str, int], nets: list[Net], gpu_paths: Mapping[tuple[str, str], Path],
         to_net: dict[tuple[str, str], Path], from_net: Mapping[tuple[str, str], Path],
         gdr: Mapping[tuple[str, str], bool], cap: Mapping[LinkKey, float], env: Mapping[str, str]) -> None:
    """Replace GPU->NET paths by PXN relays where NCCL does (paths.cc L812-842; ``NCCL_PXN_C2C=1``
    makes the relay's limit ``P2C``, ``NCCL_PXN_DISABLE=1`` turns PXN off)."""
    if str(env.get("NCCL_PXN_DISABLE", "0")) == "1":
        return
    view = PathView(gpus, dev, [n.name for n in nets], dict(to_net), from_net)
    for net in nets:
        p = local_gpu(view, net.name)
        if p is None or (p, net.name) not in view.to_net:
            continue
        relay = view.to_net[(p, net.name)]
        if nccl_rank(relay.type) > nccl_rank("P2C") or not gdr.get((p, net.name)):
            continue
        for g in gpus:
            own = view.to_net.get((g, net.name))
            link = gpu_paths.get((g, p))
            if g == p or own is None or link is None or nccl_rank(link.type) > nccl_rank("NVL"):
                continue
            if relay.bw > own.bw or nccl_rank(own.type) > nccl_rank("PXN"):
                to_net[(g, net.name)] = _path("PXN", link.links + relay.links, cap, via=p)


# ---------------------------------------------------------------------------------------- system


def _cpu(doc: Mapping, G: nx.Graph) -> tuple[str, str]:
    """(NCCL CPU arch, vendor): x86/power/arm and intel/amd/zhaoxin; unknown CPUs are taken as
    Intel x86, the assumption policy's SKL class (assumptions.ASSUMED_INTER_SOCKET)."""
    vendor = str((doc.get("graph") or {}).get("cpu_vendor") or G.graph.get("cpu_vendor") or "").lower()
    if any(G.nodes[g].get("c2c") for g in G if G.nodes[g].get("kind") == "gpu"):
        return "arm", "arm"
    if "power" in vendor or "ibm" in vendor:
        return "power", "power"
    if "arm" in vendor or "aarch" in vendor or "nvidia" in vendor:
        return "arm", "arm"
    if "amd" in vendor:
        return "x86", "amd"
    if "zhaoxin" in vendor or "centaur" in vendor:
        return "x86", "zhaoxin"
    return "x86", "intel"


def build_system(doc: Mapping[str, Any], G: nx.Graph | None = None, env: Mapping[str, str] | None = None) -> System:
    """NCCL's system for the document's GPUs and NICs (``G``: its host graph, rebuilt from the
    document when not given); see the module docstring."""
    env = dict(env or {})
    G = G if G is not None else document_graph(doc)
    docs_gpus = [g for g in doc.get("gpus") or [] if isinstance(g, Mapping) and g.get("name") in G]
    docs_gpus.sort(key=lambda g: (g.get("index") if g.get("index") is not None else 1 << 30, natural_key(g["name"])))
    gpus = tuple(str(g["name"]) for g in docs_gpus)
    dev = {g["name"]: (int(g["index"]) if g.get("index") is not None else i) for i, g in enumerate(docs_gpus)}
    summary = doc.get("summary") or {}
    model = summary.get("gpu_model") or (doc.get("graph") or {}).get("assumed_gpu_model") or \
        next((g.get("model") for g in docs_gpus if g.get("model")), None)
    info = bw.gpu_generation(model)
    sms = [bw.gpu_generation(g.get("model") or model).sm for g in docs_gpus]
    sms = [s for s in sms if s]
    amd = bool(info.family and info.family.startswith("AMD"))
    cap, pci, nvl = _capacities(G, model)
    arch, vendor = _cpu(doc, G)
    gpu_paths, unknown = _gpu_paths(doc, gpus, cap, arch == "x86" and vendor == "intel")
    named, _layer = nets_of(doc, env)
    nets = []
    adapters = []
    for name, ports in named:
        node = str(ports[0].get("node") or ports[0].get("name"))
        link = _uplink_spec(G, node) if node in G else None
        adapters.append((name, round(sum(_num(p.get("rate_gbps")) or 0.0 for p in ports) / 8, 3), link))
    for name, ports in named:
        node = str(ports[0].get("node") or ports[0].get("name"))
        if node not in G:
            continue
        gbs = round(sum(_num(p.get("rate_gbps")) or 0.0 for p in ports) / 8, 3)
        nets.append(Net(name, tuple(str(p.get("name")) for p in ports), gbs, node, "net:" + name))
    to_net, from_net, gdr = _net_paths(G, doc, gpus, nets, cap)
    nets = [n for n in nets if any((g, n.name) in to_net for g in gpus)]
    _pxn(gpus, dev, nets, gpu_paths, to_net, from_net, gdr, cap, env)
    view = PathView(gpus, dev, [n.name for n in nets], to_net, from_net)
    local = {n.name: local_gpu(view, n.name) for n in nets}
    nvswitch = any(d.get("kind") == "nvswitch" for _, d in G.nodes(data=True)) and any(k[1] == NVS for k in cap)
    return System(gpus=gpus, dev=dev, sm=min(sms) if sms else None, sm_max=max(sms) if sms else None, amd=amd,
                  cap=cap, gpu_paths=gpu_paths, nets=tuple(nets), to_net=to_net, from_net=from_net,
                  local_gpu=local, nvswitch=nvswitch, arch=arch, vendor=vendor, gpu_pci=pci, nvlink_total=nvl,
                  unknown=unknown, labels={n: str(d.get("label") or n) for n, d in G.nodes(data=True)},
                  ports=tuple(adapters))


def _uplink_spec(G: nx.Graph, node: str) -> float | None:
    """Spec GB/s of the PCIe link from ``node`` to its parent (an adapter's link, shared by its ports)."""
    parent = G.nodes[node].get("parent")
    if parent is None or not G.has_edge(node, parent):
        return None
    return _num(G.edges[node, parent].get("spec_gbs"))
