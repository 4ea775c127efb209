"""The host-facts stage: what the finished tree says about the host as a whole.

Inter-socket links between the cpu nodes, the NUMA node and socket counts, whether the report
could show NVLink at all, the check of every topo -m cell against the graph, and the graph
attributes of the HostGraph contract (``G.graph``).
"""

from __future__ import annotations

from apps.domain import bandwidth as bw
from apps.domain.hostgraph.draft import Draft, add_edge
from apps.domain.hostgraph.query import frozen, lca, path_class
from apps.domain.names import cell, natural_key, natural_sorted

__all__ = ["start_graph", "add_sockets", "count_numa_nodes", "note_nvlink_reporting", "check_against_topo",
           "note_geforce", "note_unplaced", "finish_graph"]

TOPOLOGY_SOURCES = {"nvidia_smi_topo", "lspci_tree", "lspci_verbose", "sysfs_pci", "nccl_topo_xml", "hwloc_xml"}


def start_graph(d: Draft) -> str:
    """Set the report's host-level graph attributes and its cpu nodes; returns the build mode:
    "exact" (a PCI listing), "nccl_xml"/"hwloc_xml" (only a topology XML), "inferred" (only
    topo -m) or "none"."""
    f, G = d.facts, d.G
    if f.has_pci_tree:
        xml_only = all(s in ("nccl_topo_xml", "hwloc_xml") for s in
                       {src for p in f.pci for src in p.source.split(",") if src})
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
            d.cpu(c.numa)
            G.nodes[f"cpu{c.numa}"].update(affinity=c.affinity)
    return mode


def note_unplaced(d: Draft, mode: str) -> None:
    """Say which GPUs and NICs no source places, and what to send."""
    f = d.facts
    if mode == "none" and not TOPOLOGY_SOURCES & set(f.sources):
        d.warnings.append("no topology source (topo -m, lspci, sysfs or a topology XML): layout unknown")
    if d.unplaced and mode != "none":
        it = "it" if len(d.unplaced) == 1 else "them"
        d.warnings.append(
            f"placement unknown for {_names(d.unplaced)}: no source places {it} in the PCIe tree, so no GPU-NIC "
            f"choice, GPUDirect RDMA verdict or PCIe finding is made for {it}; send the complete nvidia-smi "
            "topo -m (or lspci -tv, or the agent's sysfs listing) to know")
    d.G.graph["unplaced"] = list(d.unplaced)


def note_geforce(d: Draft) -> None:
    """GeForce RTX pairs without a topo -p2p matrix: their driver refuses PCIe P2P (an assumption)."""
    f = d.facts
    geforce = [g.name for g in f.gpus if (g.model or f.gpu_model) and bw.gpu_generation(g.model or f.gpu_model).geforce]
    if len(geforce) >= 2 and not f.p2p:
        d.assumptions.append(
            "GeForce RTX GPUs: their driver reports PCIe peer-to-peer as not supported, so NCCL uses host memory "
            "(SHM) for GPU pairs without NVLink whatever NCCL_P2P_LEVEL says (NCCL checks the NVML P2P status, "
            "paths.cc L373-411 [S2]); send nvidia-smi topo -p2p r to know.")


def add_sockets(d: Draft) -> None:
    """An inter-socket edge between every two cpu nodes, at the CPU class's figure."""
    G, policy = d.G, d.policy
    cpus = sorted((n for n, a in G.nodes(data=True) if a["kind"] == "cpu"), key=natural_key)
    inferred = G.graph.get("inferred", False)
    package = {f"cpu{c.numa}": c.package for c in d.facts.cpus if c.numa is not None and c.package is not None}
    for i, a in enumerate(cpus):
        for b in cpus[i + 1:]:
            note = policy.inter_socket_note
            if a in package and package.get(a) == package.get(b):
                # NCCL has no notion of packages: every CPU<->CPU link gets its inter-CPU figure
                # (ncclTopoGetInterCpuBw, topo.cc L60-81 at v2.30.7-1 [S3])
                note = "; ".join(x for x in (note, f"NUMA nodes of one socket (package {package[a]}): the "
                                                   "CPU's internal fabric, which NCCL plans at its inter-CPU "
                                                   "figure all the same") if x)
            add_edge(G, a, b, "inter_socket", policy.inter_socket, inferred=inferred,
                     assumed=policy.inter_socket_assumed, note=note)
    if len(cpus) > 1 and policy.inter_socket_assumed:
        d.used.add("inter_socket")


def count_numa_nodes(d: Draft) -> None:
    """``G.graph["numa_nodes"]``: NUMA nodes the host has as far as reported (NUMA ids run from
    0, so the highest id reported by the affinity columns, the PCI listing or the XML + 1, and
    at least the cpu nodes); ``G.graph["socket_count"]``: sockets when a source says
    (host_info), else None: NUMA nodes are not sockets (AMD NPS2/NPS4, Intel SNC split one
    socket into several), so SYS means "across NUMA nodes", which may stay inside one socket."""
    G, f = d.G, d.facts
    cpus = [a for _, a in G.nodes(data=True) if a["kind"] == "cpu"]
    ids = {a["numa"] for a in cpus if a.get("numa") is not None}
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
        for _, _, e in G.edges(data=True):
            if e["kind"] == "inter_socket":
                e["note"] = "; ".join(x for x in (
                    e.get("note"), "between NUMA nodes: the inter-socket link, or the CPU's internal fabric when "
                                   "both NUMA nodes sit on one socket (NPS/SNC); the report does not say which") if x)


def note_nvlink_reporting(d: Draft, mode: str) -> None:
    """``G.graph["nvlink_reported"]``: False when no source of the report could show NVLink and
    the GPUs may have it, so the PCIe path of a GPU pair is not a verdict (its mechanism is
    unknown, see ``paths``). Sources that show NVLink are ``nvidia-smi topo -m`` / ``nvlink -s``
    (and their silence is a fact), an NCCL XML's ``<nvlink>`` and hwloc's NVML backend
    (``NVLinkBandwidth``). NCCL_TOPO_FILE files (Azure ND-series VMs) leave NVLink out because
    NCCL adds the NVLinks it finds through NVML at run time; a PCI listing never shows it. None
    when nothing is to say: NVLink present, one GPU, a source that would show NVLink, or a GPU
    model without NVLink (then PCIe is the fact); ``HostFacts.nvlink_sources`` names them."""
    G, f = d.G, d.facts
    G.graph["nvlink_reported"] = None
    if len(f.gpus) < 2 or mode in ("inferred", "none"):
        return
    if any(e["kind"] == "nvlink" for _, _, e in G.edges(data=True)):
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
    d.assumptions.append(
        f"NVLink not reported: {what}, and {has}. GPU pairs show their PCIe path only (\"NVLink not reported\"), "
        "not a verdict; send nvidia-smi topo -m to know.")


def check_against_topo(d: Draft, exact: bool) -> None:
    """Every GPU-GPU, GPU-NIC and NIC-NIC cell of topo -m against :func:`path_class` on the graph;
    each mismatch is a disagreement (NV counts are compared by the NVLink stage; NIC-NIC cells
    catch wrong HCA joins)."""
    f, G = d.facts, d.G
    if not f.topo:
        return
    nodes = {g.name: g.name for g in f.gpus if g.name in G}
    for n in f.nics:
        if n.label and n.name in G and n.label not in nodes:
            nodes[n.label] = n.name
    labels = [lb for lb in f.topo_labels if lb in nodes]
    what = "the PCI tree" if exact else "the inferred layout"
    sources = ["nvidia_smi_topo"] + [s for s in f.sources if s != "nvidia_smi_topo"][:3]
    with frozen(G):  # the graph is complete; the check only reads it
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                t = cell(f.topo, a, b)
                if not t or t == "X":
                    continue
                got = path_class(G, nodes[a], nodes[b])
                if t.startswith("NV") != got.startswith("NV"):
                    d.disagree(f"{a}-{b}", f"topo -m says {t} for {a}-{b} but {what} gives {got}", sources)
                elif not t.startswith("NV") and not _same_class(t, got, f.topo_legacy):
                    where = lca(G, nodes[a], nodes[b])
                    d.disagree(f"{a}-{b}", f"topo -m says {t} for {a}-{b} but {what} gives {got}"
                                           + (f" (lowest common ancestor {where})" if where else ""), sources)


def finish_graph(d: Draft) -> None:
    """Write what the build has to say into ``G.graph``: warnings, disagreements, assumptions."""
    G, p = d.G, d.policy
    G.graph["warnings"] = d.warnings
    G.graph["disagreements"] = d.disagreements
    G.graph["gpu_model_assumed"] = p.gpu_class if p.gpu_assumed else None
    G.graph["assumed_gpu_model"] = p.gpu_model if p.gpu_assumed else None
    G.graph["assumptions"] = ([p.sentences[k] for k in ("gpu", "pcie", "inter_socket")
                               if k in d.used and k in p.sentences] + d.assumptions)
    G.graph["assumed"] = sorted(d.used)


def _same_class(topo_token: str, graph_token: str, legacy: bool) -> bool:
    if topo_token == graph_token:
        return True
    return legacy and {topo_token, graph_token} == {"PHB", "NODE"}  # legacy legends have no NODE: PHB covered both


def _names(items: list[str]) -> str:
    """``GPU4, GPU5, ... and GPU15`` (at most eight named)."""
    items = natural_sorted(items)
    if len(items) > 8:
        return ", ".join(items[:6]) + f", ... and {items[-1]} ({len(items)} devices)"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
