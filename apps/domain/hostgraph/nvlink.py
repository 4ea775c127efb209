"""The NVLink stage: GPU-GPU bonds, the NVSwitch fabric node and AMD xGMI links.

Links come from ``HostFacts.nvlink_pairs`` (topo -m ``NV#`` cells, NCCL/RCCL XML, hwloc's
distance matrices). A host whose GPUs reach an NVSwitch fabric (NVSwitch PCI functions, XML
links to class 0x0680 targets, more links to the peers than a GPU has, or an 8-GPU SXM board
nobody reported NVLink for) gets one ``nvswitch0`` node, each GPU's edge to it carrying its
links into the fabric; otherwise every bond is a GPU-GPU edge.
"""

from __future__ import annotations

import re
from collections import defaultdict

from apps.domain import bandwidth as bw
from apps.domain.assumptions import SEND_GPU_QUERY
from apps.domain.hostgraph.draft import Draft, add_edge, add_node
from apps.domain.names import pair_key

__all__ = ["add_nvlinks"]

# 25 GB/s per link, the NVLink2-4 spec (V100, A100, H100): the model looked up when none is known
_NVLINK_SPEC_SM = 80
_SXM = re.compile(r"SXM|HBM3|H200|B200|B300|GB200", re.I)


def add_nvlinks(d: Draft) -> None:
    """Add the NVLink and xGMI edges (and the NVSwitch fabric node) of the placed GPUs."""
    f, G = d.facts, d.G
    peers, fabric_links = _reported_links(d)
    _add_xgmi(d)
    nvswitch_bdfs = sorted(p.bdf for p in f.pci if p.kind == "nvswitch")
    norm = d.info.nvlink_links if d.info and d.info.nvlink_links else 18
    implied = any(sum(ps.values()) > norm for ps in peers.values())
    hidden = {} if fabric_links else _hidden_fabric(d, peers, nvswitch_bdfs)
    use_fabric = bool(fabric_links) or bool(nvswitch_bdfs) or implied or bool(hidden)
    link_model, assumed = _link_model(d, bool(peers or fabric_links or nvswitch_bdfs))
    if hidden:
        fabric_links = hidden
    if use_fabric and any(g.name in G for g in f.gpus):
        _add_fabric(d, peers, fabric_links, nvswitch_bdfs, norm, hidden, link_model, assumed)
    else:
        for a, b, n in _bonds(peers):
            add_edge(G, a, b, "nvlink", bw.nvlink(link_model, n), links=n, note=assumed, inferred=False,
                     assumed=assumed is not None)
    _check_active_counts(d)


def _reported_links(d: Draft) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """({GPU: {peer: links}} of the placed GPUs' NVLink bonds, {GPU: links into the NVSwitch fabric})."""
    G = d.G
    peers: dict[str, dict[str, int]] = defaultdict(dict)
    fabric_links: dict[str, int] = {}
    for p in d.facts.nvlink_pairs:
        if p.fabric == "xgmi":
            continue
        if p.b == "nvswitch":
            fabric_links[p.a] = p.links
        elif p.a in G and p.b in G:
            peers[p.a][p.b] = p.links
            peers[p.b][p.a] = p.links
    return peers, fabric_links


def _bonds(peers: dict[str, dict[str, int]]) -> list[tuple[str, str, int]]:
    """Each bond once: (a, b, links) with the pair in natural order."""
    return [(a, b, n) for a, ps in peers.items() for b, n in ps.items() if pair_key(a, b) == (a, b)]


def _add_xgmi(d: Draft) -> None:
    """AMD Infinity Fabric links: RCCL's NVL links (rccl topo.cc ncclTopoAddXGMI)."""
    f, G = d.facts, d.G
    for p in f.nvlink_pairs:
        if p.fabric != "xgmi" or p.a not in G or p.b not in G:
            continue
        add_edge(G, p.a, p.b, "nvlink", bw.xgmi(f.gpu_model, p.links, p.gbs), links=p.links or None, fabric="xgmi",
                 note=("xGMI (AMD Infinity Fabric) link" + (f", {p.links} links" if p.links else "")
                       + (f"; {p.gbs:g} GB/s as hwloc's XGMIBandwidth reports it" if p.gbs else
                          "; RCCL's planning figure (no bandwidth in the file)")))


def _link_model(d: Draft, any_links: bool) -> tuple[str | int, str | None]:
    """(the GPU model, or SM, whose per-link rate sizes the links; the note when it is assumed)."""
    f = d.facts
    link_model = f.gpu_model or d.policy.gpu_model
    assumed = None
    if not f.gpu_model:
        assumed = d.policy.nvlink_note
        if not link_model:
            link_model = _NVLINK_SPEC_SM
            assumed = ("GPU model unknown: 25 GB/s per link assumed (NVLink2-4; B200 would be 50); "
                       + SEND_GPU_QUERY)
    if not f.gpu_model and f.gpus:
        d.used.add("gpu")  # say the model is unknown (and what was assumed) either way
    if assumed is not None and any_links:
        d.used.add("gpu")
    return link_model, assumed


def _add_fabric(d: Draft, peers: dict, fabric_links: dict[str, int], nvswitch_bdfs: list[str], norm: int,
                hidden: dict[str, int], link_model: str | int, assumed: str | None) -> None:
    """The NVSwitch fabric node, each GPU's edge into it, and a disagreement for each pair whose
    NV# differs from what the fabric gives it."""
    f, G, info = d.facts, d.G, d.info
    inferred = not (fabric_links or nvswitch_bdfs) or bool(hidden)
    why = ("NVSwitch PCI functions in the PCI listing" if nvswitch_bdfs else
           f"inferred: {info.family} SXM board (NVSwitch baseboard, NV{info.nvswitch_norm}) "
           "with no NVLink reported" if hidden else
           "NCCL XML nvlink targets of class 0x0680" if fabric_links else
           f"implied: NV# to every peer exceeds the {norm} links a GPU has")
    add_node(G, "nvswitch0", "nvswitch", "NVSwitch fabric", inferred=inferred,
             switch_count=len(nvswitch_bdfs) or None, bdfs=nvswitch_bdfs, note=why)
    active = {g.name: g.nvlink_active for g in f.gpus if g.nvlink_active}
    for g in (g.name for g in f.gpus if g.name in G):
        links = fabric_links.get(g) or max(peers.get(g, {}).values(), default=0) or active.get(g)
        note, edge_inferred = assumed, inferred
        if not links and nvswitch_bdfs and not peers and not fabric_links:
            # NVSwitches seen in lspci, link counts not reported: the board norm, inferred
            norm_links = info.nvswitch_norm if info else None
            if not norm_links:
                continue
            links, edge_inferred = norm_links, True
            note = f"links not reported: the {info.family} NVSwitch board norm NV{norm_links} assumed"
        if not links:
            continue
        add_edge(G, g, "nvswitch0", "nvlink", bw.nvlink(link_model, links), links=links,
                 inferred=edge_inferred or bool(hidden), assumed=assumed is not None or bool(hidden),
                 note=note if not hidden else f"inferred NV{links}: the {info.family} NVSwitch board norm")
    # GPU pairs whose NV# is below what the fabric gives them: keep them visible
    for a, b, n in _bonds(peers):
        if G.has_edge(a, "nvswitch0") and G.has_edge(b, "nvswitch0"):
            fab = min(G.edges[a, "nvswitch0"]["links"], G.edges[b, "nvswitch0"]["links"])
            if fab != n:
                d.disagree(f"{a}-{b}", f"{a}-{b} shows NV{n} but the GPUs have {fab} links into the NVSwitch fabric",
                           ["nvidia_smi_topo"])


def _hidden_fabric(d: Draft, peers: dict, nvswitch_bdfs: list[str]) -> dict[str, int]:
    """GPU -> links for an NVSwitch board nobody reported NVLink for: 8 SXM GPUs of a model whose
    vendor board is NVSwitch-based (A100 SXM4 0x20b0/0x20b2, H100 SXM 0x2330, ...), known from
    PCI device ids or the GPU query, and no NVLink source at all (NCCL XML of cloud VMs often
    omits ``<nvlink>``). Empty when anything reported NVLink; the first answer that assumes the
    board writes its assumption sentence."""
    f, info = d.facts, d.info
    if peers or nvswitch_bdfs or not f.gpu_model or not info:
        return {}
    if f.nvlink_sources or any(g.nvlink_active for g in f.gpus):
        return {}
    norm = info.nvswitch_norm
    if not norm or len(f.gpus) < 8 or not _SXM.search(f.gpu_model):
        return {}
    if "nvswitch" not in d.used:
        d.used.add("nvswitch")
        d.assumptions.append(
            f"No NVLink reported for {len(f.gpus)} {f.gpu_model} GPUs: an NVSwitch board is assumed, "
            f"NV{norm} per GPU (the {info.family} HGX norm); send nvidia-smi topo -m or "
            "nvidia-smi nvlink -s to know.")
    return {g.name: norm for g in f.gpus if g.name in d.G}


def _check_active_counts(d: Draft) -> None:
    """``nvidia-smi nvlink -s`` active link counts against the links the graph has."""
    G = d.G
    for g in d.facts.gpus:
        if g.nvlink_active is None or g.name not in G:
            continue
        total = sum(e["links"] or 0 for _, _, e in G.edges(g.name, data=True) if e["kind"] == "nvlink")
        if total and g.nvlink_active != total:
            d.disagree(g.name, f"nvidia-smi nvlink -s shows {g.nvlink_active} active links on {g.name}, "
                               f"the NVLink graph has {total}", ["nvidia_smi_nvlink", "nvidia_smi_topo"])
