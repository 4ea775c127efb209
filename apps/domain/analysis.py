"""Host analysis: the one entry point from a node report to everything topoweb shows.

``analyze_host(sections, hostname)`` takes a node report (section kind -> raw text, the kinds of
``apps.domain.parsers.KINDS``) and returns a ``HostAnalysis``. Its ``to_dict()`` is the
*snapshot document*: stored as JSON per snapshot, served by the API and drawn by the UI.
``HostAnalysis.from_dict(doc)`` restores it without re-parsing (the raw report stays the
source of truth; documents are rebuildable).

Snapshot document (schema 1). Every bandwidth is GB/s per direction (1e9 B/s); every key below
is always present (empty list / null when unknown):

{
  "schema": 1,
  "hostname": str,
  "sources": [section kinds that contributed],
  "inferred": bool,                     # True when the hierarchy was reconstructed from topo -m alone
  "summary": {"gpu_count": int, "gpu_model": str|null, "nic_count": int, "active_nic_count": int,
              "gpu_model_assumed": str|null,  # the GPU class assumed when the model is unknown
                                              # ("A100-class (NVLink3, 12 links per GPU)")
              "nic_state_count": int,         # NIC ports whose state was reported (0: topo -m only,
                                              # so active_nic_count 0 means "unknown", not "none")
              "nic_rates_gbps": [int, ...],   # line rate Gb/s of each compute NIC port, as ibstat says
              "nvlink": bool, "nvswitch": bool, "sockets": int, "fingerprint": str,
              # sockets: CPU nodes of the graph (NUMA nodes holding devices; despite the name)
              "numa_nodes": int,           # NUMA nodes the host has as far as reported: highest NUMA
                                           # id (affinity columns, PCI numa_node, XML) + 1, at least
                                           # the CPU nodes (DGX A100 NPS4: 8)
              "socket_count": int|null},   # sockets, only when a source says (host_info); NUMA
                                           # nodes are not sockets (NPS/SNC), so null = unknown
              # fingerprint: stable hash of the layout (GPU count/model, NIC count/rates/states,
              # link classes, link widths) so the cluster page can group identical hosts
  "graph": {"mode": "exact"|"nccl_xml"|"hwloc_xml"|"inferred"|"none", "cpu_vendor": str|null,
            "cpu_model": int|null, "disagreements": [{"subject", "message", "sources"}],
            "assumed_gpu_model": str|null,   # model name used for lookups when the class was inferred
            "gdr_module": bool|null,         # host_info: False = no nvidia_peermem / DMA-BUF
            "iommu": {"translated": [BDFs], "cmdline": str|null}|null,   # host_info
            "nvlink_reported": bool|null,    # False: no source shows NVLink and the GPUs may have it
            "cpu_name": str|null,            # the CPU in words and where it was read (root complex...)
            "nic_inventory": [kinds],        # sources that show the host's network functions
            "nic_unknown": str|null,         # why no source can show NICs (nic_inventory empty)
            "socket_nets": [names],          # NCCL XML nets of NCCL's Socket transport (eth0)
            "virtual_pci": bool,             # a VM's or a flattened hand-written PCI tree
            "unplaced": [names],             # GPUs/NICs no source places (node parent null)
            "nodes": [{"id": str, "kind": "cpu"|"root_complex"|"root_port"|"switch"|"gpu"|"nic"
                        |"nvswitch"|"nvme"|"other", "label": str, "bdf": str|null, "numa": int|null,
                        "parent": str|null, "inferred": bool, "attrs": {...}}],
                        # attrs of GPUs: gdr (NCCL XML), c2c (Grace NVLink-C2C), placement
                        # "unknown", nvlink_active/nvlink_total; of NICs: transport "verbs" | "ofi"
                        # (EFA, Slingshot), placement, width, speed (NDR...), firmware, port_guid, node_guid
            "edges": [{"source": id, "target": id, "kind": "pcie"|"nvlink"|"c2c"|"inter_socket"|"cpu_link",
                        "gen": int|null, "width": int|null, "max_gen": int|null, "max_width": int|null,
                        "links": int|null, "spec_gbs": float|null, "expected_gbs": float|null,
                        "degraded": bool, "inferred": bool, "note": str|null,
                        "assumed": bool,   # figures from the assumption policy (assumptions.assume)
                        "nccl_gbs": float|null, "citation": str|null}]},   # citation: bandwidth source
  "gpus": [{"name": "GPU0", "index": int, "node": graph node id, "bdf": str|null, "uuid": str|null,
            "model": str|null, "numa": int|null, "cpu_affinity": str|null, "nic": HCA name|null}],
  "nics": [{"name": "mlx5_0" or matrix label when unknown, "label": matrix label|null,
            "node": graph node id|null, "bdf": str|null, "port": int|null, "state": str|null,
            "phys_state": str|null, "rate_gbps": float|null, "link_layer": "InfiniBand"|"Ethernet"|null,
            "numa": int|null, "active": bool|null, "compute": bool,
            "rail": int|null,            # rail: position among the host's compute NICs (name order)
            "transport": "verbs"|"ofi"}],  # ofi: reached through a libfabric plugin (EFA, Slingshot)
  "gpu_pairs": [{"a": "GPU0", "b": "GPU1", "path_class": "NV12"|"XGMI4"|"PIX"|...|"SYS"|null,
                 "mechanism": "nvlink"|"nvswitch"|"pcie_p2p"|"shm"|"unknown", "p2p": bool|null,
                 "reason": str, "bottleneck_gbs": float, "hops": [hop, ...],
                 "nccl_path": "NVL"|"NVB"|"PIX"|"PXB"|"PHB"|"SYS"|null,    # NCCL's path type
                 "via": "GPU1"|null,                 # NVB: the GPU relaying over NVLink
                 "bottleneck": index into hops|null,                       # a < b only
                 "shm_cause": "level"|"p2p_status"|"driver"|null,  # why SHM: NCCL's P2P level,
                                                     # topo -p2p refusal, a GeForce driver (assumed)
                 "assumed": bool,                    # uses an assumed figure or verdict
                 "nvlink_reported": bool|null}],
                 # mechanism "unknown" (p2p null): the report cannot tell, because a GPU is not placed
                 # or no source shows NVLink (graph.nvlink_reported False: an NCCL XML without
                 # <nvlink> such as Azure's NCCL_TOPO_FILE, a PCI listing, hwloc 1.x); the reason
                 # gives the PCIe path, and no finding, setting or estimate is built on it.
                 # XGMI: AMD Infinity Fabric (RCCL's NVL links), mechanism "nvlink"
  "gpu_nic": [{"gpu": "GPU0", "nic": str, "path_class": str, "gdr": bool, "reason": str,
               "bandwidth_gbs": float, "pxn_via": "GPU3"|null, "hops": [hop, ...],   # chosen NIC per GPU
               "label": matrix label|null, "nccl_path": str, "bottleneck": index|null,
               "nic_share": int,                     # GPUs that picked the same NIC (channel 0)
               "nics": [str, ...],                   # every NIC the GPU's channels use in turn
               "pxn_hops": [hop, ...]|null, "pxn_gdr": bool|null, "pxn_bandwidth_gbs": float|null}],
               # nic: the GPU's NIC on channel 0 (ncclTopoGetLocalNet: device index modulo the GPUs
               # sharing its closest NICs, one NIC on per channel); hops: the GPU's own path
               # (host-memory bounce when gdr is false); pxn_hops: the relay NCCL uses for sending
               # when pxn_via is set
  "gpu_nic_matrix": [{"gpu", "nic", "path_class", "bandwidth_gbs", "nccl_path", "gdr"}],  # every cell
  "contention": [{"element": node id, "label": str, "kind": "root_complex"|"root_port"|"switch_uplink"
                  |"inter_socket", "scenario": "gpu_to_nic"|"all_pairs", "devices": [names],
                  "flows": int, "demand_gbs": float, "capacity_gbs": float, "ratio": float,
                  "also": [node ids of nested links carrying the same flows, merged into this row]}],
                  # devices: the GPUs/NICs below the element whose flows cross it (an inter-socket
                  # link: the devices at either end); a flow toward a NIC wants at most its share of
                  # what the NIC takes (port rate, capped by a reported PCIe link), and one toward a
                  # NIC of unreported rate adds nothing to demand_gbs; see apps.domain.contention
  "p2p_gaps": [{"a": "GPU0", "b": "GPU5", "reason": str}],
  "gpu_groups": [{"gpus": ["GPU0", ...], "link": "nvlink"|"pcie_switch"|"pcie_p2p"|"nvb",
                  "classes": [path classes inside the group], "bottleneck_gbs": float|null,
                  "sentence": str}],
                 # which GPUs to group together (tensor-parallel groups): maximal cliques with
                 # peer-to-peer between every two members, best first (NVLink, then one PCIe
                 # switch, then other PCIe P2P, then NVB relays; bigger, then faster); a group
                 # inside a better listed one is left out; at most 8. See gpu_groups.gpu_groups().
  "network": {"state": "ok"|"all_down"|"no_rdma_nic"|"unknown",   # can NCCL use an RDMA NIC?
              "usable": [NIC names NCCL may use (Active, or state unknown)],
              "message": str|null},   # all_down: every HCA port is down, NCCL falls back to
              # sockets and gpu_nic is empty (no choice is made among dead ports or non-RDMA
              # Ethernet functions, which are never NICs: see apps.domain.hostgraph);
              # no_rdma_nic: a source showing the host's network functions shows no RDMA one, or
              # NCCL's own topology lists only its Socket transport; unknown: port states not
              # reported, or no source can show NICs at all (the message says why and what to send)
  "findings": [{"rule": "P01", "severity": "CRIT"|"HIGH"|"MED"|"LOW"|"INFO", "title": str,
                "devices": [names], "message": str, "fix": str, "source": str}],
  "estimate": {"b_gpu_gbs": float|null,   # NCCL's ring bus bandwidth inside one node (channels x GB/s)
               "b_node_gbs": float|null,  # NIC sum: every compute port at its line rate, an adapter's
                                          # ports no more than its PCIe link
               "eta_intra": float, "eta_net": float,   # nccl-tests / NCCL's figure (docs/calibration.md)
               "points": [{"nodes": int,            # 1, 2, 4 ... 64; N > 1 only with NICs of known rate
                           "busbw_gbs": float,      # what nccl-tests reports at 16 GiB with NCCL's defaults
                           "algorithm": "NVLS"|"NVLS_TREE"|"RING"|"TREE"|"COLLNET_DIRECT"|"COLLNET_CHAIN",
                           "protocol": "SIMPLE"|"LL128"|"LL",   # NCCL's choice for large messages
                           "ring_busbw_gbs": float|null,        # what NCCL_ALGO=Ring gives
                           "limit": str,            # the element that sets the figure, in words
                           "channels": int, "per_channel_gbs": float,   # of the chosen algorithm
                           "nccl_busbw_gbs": float,  # NCCL's own bus bandwidth (before eta)
                           "algorithms": {ALGORITHM: busbw}}],   # every enabled algorithm's figure
               "limiting_link": str,       # the last point's limit (or why there is none)
               "ring": [GPU order of the first ring channel],
               "channels": {"intra"|"inter": {"RING"|"TREE"|"NVLS": {"pattern", "channels", "bw_intra_gbs",
                            "bw_inter_gbs", "type_intra", "type_inter"}}},   # NCCL's graphs
               "nccl_env": [NCCL_* names honoured], "notes": [str]},
               # NCCL's plan (apps/domain/estimate.py): the channel search on the host graph's links
               # and NCCL's tuning model, v2.30.7-1; curve(doc, nodes, sizes) gives every size
  "nccl_env": {"NCCL_ALGO": "Ring", ...},   # the host's NCCL settings as the report states them
                                            # (host_info --include-nccl-env, or an nccl_env result);
                                            # {} when none (and in documents stored before it existed)
  "nccl_settings": [{"name": "NCCL_IB_HCA", "value": str, "reason": str}],
                 # value never empty and never holding a device name outside shellsafe.SAFE_NAME
                 # (such names stay in gpus/nics as reported, with finding X02)
  "warnings": [str],
  "assumptions": [str]   # plain sentences: every value assumed because the report did not say it,
                         # and what to send to know (the GPU query, lspci -vvv, host_info); see
                         # apps.domain.assumptions.assume. Absent from documents stored before it
                         # existed (from_dict fills []).
}

Assumption policy (``assumptions.assume``): GPU model unknown -> inferred from the NV# cells (NV18 ->
H100-class, or B200-class GB200 with Grace's GPU NUMA ids; NV12 -> A100-class; NV6 on NVSwitch ->
V100 DGX-2; NV1/NV2 mesh -> V100; NV4 between two GPUs -> GA10x bridge), else none; PCIe links not
reported -> the GPU class's host link, Gen3 for the legacy topo -m legend, else Gen4 x16; CPU unknown
-> NCCL's SKL_QPI_BW class (10 GB/s); GeForce RTX pairs without a topo -p2p matrix -> SHM (their
driver refuses PCIe P2P). Edges and hops using an assumed figure carry ``assumed: true`` and a note
naming what to send. What the report cannot tell is not assumed but called unknown: a device no
source places, GPU pairs no source shows NVLink for, a network no source can list.

hop = {"from": name, "to": name, "kind": "nvlink"|"pcie"|"c2c"|"cpu_link"|"inter_socket"|"host_memory_copy"
       |"fabric"|"nvswitch", "spec_gbs": float|null, "expected_gbs": float|null, "flows": int, "note": str|null,
       "from_id": graph node id|null, "to_id": graph node id|null, "assumed": bool}
flows: gpu_pairs hops count the pairs sharing the link when every GPU pair transfers at once;
gpu_nic hops count the GPUs whose traffic crosses it when every GPU talks to its NIC at once.

``path_between(doc_a, gpu_a, doc_b, gpu_b)`` (same or different hosts) returns
{"src": "host/GPU0", "dst": "host/GPU5", "same_host": bool, "mechanism": str, "hops": [hop + "host"],
 "bottleneck": index into hops, "bottleneck_gbs": float, "gdr_src": bool|null, "gdr_dst": bool|null,
 "explanation": str} (+ "rail_src", "rail_dst" across hosts); see ``apps.domain.cluster``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import orjson

from apps.domain import contention as _contention
from apps.domain import nic_paths, paths
from apps.domain.assemble import assemble
from apps.domain.cluster import path_between
from apps.domain.errors import UnknownKindError
from apps.domain.estimate import estimate, suggest_nccl_settings
from apps.domain.findings import evaluate
from apps.domain.gpu_groups import gpu_groups
from apps.domain.hostgraph import build_host_graph
from apps.domain.hostgraph import frozen as hostgraph_frozen
from apps.domain.limits import check_host_size
from apps.domain.nccl_system import document_graph
from apps.domain.names import natural_sorted
from apps.domain.parsers import KINDS, to_jsonable

__all__ = ["SCHEMA", "HostAnalysis", "analyze_host", "apply_nic_roles", "build_document", "gpu_groups", "path_between",
           "HOSTNAME_SECTION", "nccl_env"]

SCHEMA = 1
NIC_ROLES = ("compute", "storage", "management")  # Snapshot.nic_roles values (apps.domain.verdict.ROLES)
HOSTNAME_SECTION = "hostname"  # a report section holding the host's name, not a parser kind
UNKNOWN_HOST = "unknown-host"
DOC_KEYS = ("schema", "hostname", "sources", "inferred", "summary", "graph", "gpus", "nics", "gpu_pairs",
            "gpu_nic", "gpu_nic_matrix", "contention", "p2p_gaps", "findings", "estimate", "nccl_settings",
            "warnings")
_NODE_KEYS = ("kind", "label", "bdf", "numa", "parent", "inferred")
_EDGE_KEYS = ("kind", "gen", "width", "max_gen", "max_width", "links", "spec_gbs", "expected_gbs", "degraded",
              "inferred", "assumed", "note")


@dataclass(frozen=True)
class HostAnalysis:
    """One host's snapshot document (``doc``), plus, when freshly analysed, the HostGraph and the
    parser results it came from (neither is part of the document)."""

    doc: dict
    graph: nx.Graph | None = field(default=None, compare=False, repr=False)
    results: dict = field(default_factory=dict, compare=False, repr=False)
    # ``doc`` as JSON text, when freshly analysed (``json.loads(doc_json) == doc``; NaN and
    # Infinity written as null): what a store can write without serialising ``doc`` again.
    doc_json: str | None = field(default=None, compare=False, repr=False)

    @property
    def hostname(self) -> str:
        return self.doc["hostname"]

    def to_dict(self) -> dict:
        """The snapshot document (a deep copy: JSON-ready, safe to mutate)."""
        return _copy_tree(self.doc)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> HostAnalysis:
        """Restore from a stored document; raises ValueError when it is not a schema-1 document."""
        missing = [k for k in DOC_KEYS if k not in doc]
        if missing or doc.get("schema") != SCHEMA:
            raise ValueError(f"not a schema-{SCHEMA} snapshot document (missing: {', '.join(missing) or '-'}; "
                             f"schema {doc.get('schema')!r})")
        doc = copy.deepcopy(dict(doc))
        doc.setdefault("assumptions", [])
        doc.setdefault("nccl_env", {})
        if "network" not in doc:
            doc["network"] = _network(doc)
        if "gpu_groups" not in doc:
            doc["gpu_groups"] = gpu_groups(doc["gpu_pairs"])
        return cls(doc)

    def host_graph(self) -> nx.Graph:
        """The HostGraph, rebuilt from the document's ``graph`` when not kept."""
        if self.graph is not None:
            return self.graph
        return document_graph(self.doc)

    def path_to(self, gpu: str, other: HostAnalysis, other_gpu: str) -> dict:
        return path_between(self.doc, gpu, other.doc, other_gpu)


def analyze_host(sections: Mapping[str, str], hostname: str | None = None, *,
                 nic_roles: Mapping[str, str] | None = None) -> HostAnalysis:
    """Parse a node report and analyse the host.

    Parameters
    ----------
    sections : mapping
        Section kind (a key of ``apps.domain.parsers.KINDS``, e.g. ``"nvidia_smi_topo"``) -> the raw
        text of that command's output; an optional ``"hostname"`` section holds the host's name.
    hostname : str, optional
        Wins over the ``hostname`` section; ``"unknown-host"`` when neither is given.
    nic_roles : mapping, optional
        A user's word on what NICs carry ({"mlx5_4": "compute"|"storage"|"management"}): it wins
        over the classification (``_compute_nics``), and NCCL is taken to be kept off the storage
        and management ones (the NCCL_IB_HCA the document suggests), so no GPU picks them.

    Raises
    ------
    ParseError
        Unchanged from the parser of the first section that cannot be read; or naming the cap
        (``apps.domain.limits``) a host with too many GPUs, NIC ports or PCI functions passes.
    UnknownKindError
        For a section whose kind is not in the registry.

    Examples
    --------
    >>> topo = "\\tGPU0\\tGPU1\\nGPU0\\t X \\tPIX\\nGPU1\\tPIX\\t X \\n"
    >>> a = analyze_host({"nvidia_smi_topo": topo}, "node1")
    >>> a.doc["gpu_pairs"][0]["mechanism"], a.doc["inferred"]
    ('pcie_p2p', True)
    """
    unknown = [k for k in sections if k not in KINDS and k != HOSTNAME_SECTION]
    if unknown:
        raise UnknownKindError(f"unknown section kind {unknown[0]!r}; known kinds: {', '.join(KINDS)}")
    name = (hostname or "").strip() or (sections.get(HOSTNAME_SECTION) or "").strip().splitlines()[:1]
    name = (name[0].strip() if isinstance(name, list) and name else name) or UNKNOWN_HOST
    results: dict[str, Any] = {}
    for kind, text in sections.items():
        if kind != HOSTNAME_SECTION:
            results[kind] = KINDS[kind].parse(text)
    facts = assemble(results, name)
    check_host_size(facts)  # the analysis grows with the cube of the devices: capped (limits.py)
    G = build_host_graph(facts)
    apply_nic_roles(G, nic_roles)
    plain = {k: to_jsonable(v) for k, v in results.items()}
    with hostgraph_frozen(G):
        doc, text = _build_document(G, p2p=facts.p2p, results=plain, plain=True)
    return HostAnalysis(doc, G, plain, text)


def build_document(G: nx.Graph, *, p2p: Mapping | None = None, results: Mapping | None = None,
                   _plain_results: bool = False) -> dict:
    """The snapshot document of a HostGraph (findings and estimate included).

    ``_plain_results``: ``results`` are already ``to_jsonable`` output (analyze_host), so the
    findings need not convert them again."""
    with hostgraph_frozen(G):  # nothing below changes G: PCIe chains are looked up once
        return _build_document(G, p2p=p2p, results=results, plain=_plain_results)[0]


def _build_document(G: nx.Graph, *, p2p: Mapping | None, results: Mapping | None, plain: bool) -> tuple[dict, str]:
    """(document, the document as JSON text)."""
    p2p = p2p if p2p is not None else G.graph.get("p2p")
    routes, pairs = paths.all_gpu_pairs(G, p2p=p2p)
    unreported = G.graph.get("nvlink_reported") is False
    for p in pairs:
        nv = p["mechanism"] in ("nvlink", "nvswitch")
        p["nvlink_reported"] = True if nv else (False if unreported else None)
    choice = nic_paths.nic_choice(G)
    gpu_nic = nic_paths.gpu_nic_choice(G, choice)
    compute = _with_roles(G, _compute_nics(G, choice))
    rails = {n: i for i, n in enumerate(natural_sorted(compute))}
    chosen = {e["gpu"]: e["nic"] for e in gpu_nic}
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "hostname": G.graph.get("hostname") or UNKNOWN_HOST,
        "sources": list(G.graph.get("sources") or []),
        "inferred": bool(G.graph.get("inferred")),
        "summary": {},
        "graph": _graph_dict(G),
        "gpus": [_gpu_dict(G, g, chosen.get(g)) for g in paths.gpu_names(G)],
        "nics": [_nic_dict(G, n, n in compute, rails.get(n)) for n in paths.nic_names(G)],
        "gpu_pairs": pairs,
        "gpu_nic": gpu_nic,
        "gpu_nic_matrix": nic_paths.gpu_nic_matrix(G),
        "contention": _contention.contention(G, choice=choice, pair_routes=routes),
        "p2p_gaps": [{"a": p["a"], "b": p["b"], "reason": p["reason"]} for p in pairs if not p["p2p"]],
        "findings": [],
        "estimate": {},
        "nccl_settings": [],
        "warnings": [str(w) for w in G.graph.get("warnings") or []],
        "assumptions": [str(a) for a in G.graph.get("assumptions") or []],
    }
    doc["network"] = _network(doc)
    doc["gpu_groups"] = gpu_groups(pairs)
    doc["summary"] = _summary(G, doc)
    doc["nccl_env"] = nccl_env(results or {})
    doc["estimate"] = estimate(doc, graph=G)
    doc["nccl_settings"] = suggest_nccl_settings(doc)
    doc["findings"] = evaluate({k: v for k, v in doc.items() if k != "findings"}, results or {}, plain=plain)
    # orjson: the document's JSON text in a tenth of json's time and read back in a third (an 8-GPU
    # host's document is 60-110 KB; json took a fifth of the analysis). NaN and Infinity, which JSON
    # has not, are written as null.
    text = orjson.dumps(doc, default=_jsonable, option=orjson.OPT_NON_STR_KEYS).decode()
    return orjson.loads(text), text


def nccl_env(results: Mapping[str, Any]) -> dict[str, str]:
    """The host's ``NCCL_*`` settings as the report states them (the document's ``nccl_env``):
    the agent's ``host_info`` section (``--include-nccl-env``: environment and /etc/nccl.conf),
    then a separate ``nccl_env`` result, which wins; {} when the report has none."""
    out: dict[str, str] = {}
    host = results.get("host_info")
    raw = host.get("nccl_env") if isinstance(host, Mapping) else getattr(host, "nccl_env", None)
    for source in (raw, results.get("nccl_env")):
        if isinstance(source, Mapping):
            inner = next((source[k] for k in ("vars", "env", "variables", "settings") if k in source), source)
            if isinstance(inner, Mapping):
                out.update({str(k): str(v) for k, v in inner.items() if str(k).startswith("NCCL_") and v is not None})
            elif isinstance(inner, (list, tuple)):
                out.update({str(i["name"]): str(i.get("value", "")) for i in inner
                            if isinstance(i, Mapping) and i.get("name")})
    return out


def _network(doc: dict) -> dict:
    """Whether NCCL has an RDMA NIC to use (the ``network`` key of the document).

    ``no_rdma_nic`` only when a source that shows the host's network functions shows none that is
    RDMA (or NCCL's own topology lists just its Socket transport); when no source can show NICs
    (a topo -m without NIC columns, a topology file without ``<net>``, hwloc without I/O, a bare
    ``lspci -t``) the state is ``unknown`` with the reason and what to send."""
    nics = doc["nics"]
    active = [n["name"] for n in nics if n["active"]]
    known = [n for n in nics if n["state"] is not None or n["active"] is not None]
    graph = doc.get("graph") or {}
    if not nics:
        sockets = graph.get("socket_nets") or []
        if sockets:
            return {"state": "no_rdma_nic", "usable": [], "message": (
                f"NCCL's topology lists only {', '.join(sockets)} on its Socket transport (no PCI device, GUID 0, "
                "no GPUDirect RDMA): NCCL found no IB/RoCE device and uses TCP sockets (NET/Socket) for "
                "inter-node traffic.")}
        if "nic_inventory" in graph and not graph.get("nic_inventory"):
            why = graph.get("nic_unknown") or "no section of the report lists NICs"
            return {"state": "unknown", "usable": [], "message": (
                f"The NICs are unknown: {why}. Whether NCCL has an RDMA device (InfiniBand/RoCE, or EFA/Slingshot "
                "through a libfabric plugin) cannot be told; send ibstat (or ibv_devinfo, or the agent's sysfs_ib "
                "listing) to know.")}
        shown = ", ".join(graph.get("nic_inventory") or []) or "the report"
        return {"state": "no_rdma_nic", "usable": [], "message": (
            f"No RDMA NIC (InfiniBand/RoCE HCA, EFA or Slingshot) in {shown}: NCCL has no IB/RoCE device and uses "
            "TCP sockets (NET/Socket) for inter-node traffic.")}
    if active:
        return {"state": "ok", "usable": active, "message": None}
    if known and len(known) == len(nics):
        downs = ", ".join(f"{n['name']} {n['state'] or 'not Active'}" for n in nics)
        return {"state": "all_down", "usable": [], "message": (
            f"No HCA port is Active ({downs}): NCCL finds no usable IB/RoCE device (\"NET/IB : No device "
            "found\") and falls back to TCP sockets over the host's IP interfaces (\"Using network Socket\"), "
            "so no GPU gets a NIC and inter-node traffic is far slower (F01, H04). Bring the ports up before "
            "measuring anything.")}
    unplaced = [n["name"] for n in nics if n.get("node") and n["name"] in set(graph.get("unplaced") or ())]
    message = None if not known else ("Some HCA port states were not reported; ports with unknown state are "
                                      "assumed usable.")
    if not known:
        message = ("No HCA port state was reported (send ibstat, or the agent's sysfs_ib listing, to know); ports "
                   "with unknown state are taken as usable.")
    return {"state": "unknown", "usable": [n["name"] for n in nics if n["active"] is not False],
            "message": message + (f" Placement of {', '.join(unplaced)} is unknown." if unplaced else "")}


_ATOMS = (str, int, float, bool, type(None))


def _copy_tree(value: Any) -> Any:
    """Deep copy of a JSON tree (dicts, lists, scalars): what ``copy.deepcopy`` returns for a
    document, several times faster. Anything else (a tuple, an object) goes to deepcopy."""
    t = type(value)
    if t is dict:
        return {k: v if type(v) in _ATOMS else _copy_tree(v) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _ATOMS else _copy_tree(v) for v in value]
    if t in _ATOMS:
        return value
    return copy.deepcopy(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return to_jsonable(value) if not isinstance(value, (str, int, float, bool)) else value


def _compute_nics(G: nx.Graph, choice: Mapping[str, dict] | None = None) -> set[str]:
    """NIC ports that carry GPU traffic: a NIC's own ``compute`` attr when the graph has one,
    else every port NCCL's channel search uses if every port were up (``nic_paths.nccl_nics``: a port
    within GPUDirect reach of some GPU, so both rails of a two-NIC-per-GPU host count, a Down
    compute port still counts, and a storage NIC that every GPU reaches only across the CPU does
    not). ``choice`` is accepted for callers that have it; the ports do not depend on it."""
    del choice
    explicit = {n for n in paths.nic_names(G) if G.nodes[n].get("compute") is True}
    if explicit:
        return explicit
    # a NIC no source places cannot be told from a storage NIC: it is not demoted either; nor is
    # any NIC while some GPU is not placed (it may be that GPU's NIC)
    if any(G.nodes[g].get("placement") == "unknown" for g in paths.gpu_names(G)):
        return set(paths.nic_names(G))
    unplaced = {n for n in paths.nic_names(G) if G.nodes[n].get("placement") == "unknown"}
    return set(nic_paths.nccl_nics(G, include_inactive=True)) | unplaced


def apply_nic_roles(G: nx.Graph, nic_roles: Mapping[str, str] | None) -> None:
    """Record a user's NIC roles on the graph (node attr ``role``) before the document is built;
    names the graph does not hold are ignored (the NIC is gone from this report)."""
    for name, role in (nic_roles or {}).items():
        if name in G and G.nodes[name].get("kind") == "nic" and role in NIC_ROLES:
            G.nodes[name]["role"] = role


def _with_roles(G: nx.Graph, compute: set[str]) -> set[str]:
    """The compute NICs with the user's roles (node attr ``role``) applied over them."""
    out = set(compute)
    for n in paths.nic_names(G):
        role = G.nodes[n].get("role")
        if role == "compute":
            out.add(n)
        elif role in NIC_ROLES:
            out.discard(n)
    return out


def _graph_dict(G: nx.Graph) -> dict:
    nodes = []
    for n, d in G.nodes(data=True):
        attrs = {k: v for k, v in d.items() if k not in _NODE_KEYS}
        nodes.append({"id": n, **{k: d.get(k) for k in _NODE_KEYS}, "attrs": attrs})
        nodes[-1]["label"] = nodes[-1]["label"] or n
        nodes[-1]["inferred"] = bool(nodes[-1]["inferred"])
    edges = []
    for u, v, d in G.edges(data=True):
        e = {"source": u, "target": v, **{k: d.get(k) for k in _EDGE_KEYS}}
        e["degraded"], e["inferred"], e["assumed"] = bool(e["degraded"]), bool(e["inferred"]), bool(e["assumed"])
        # nccl_gbs, ...; the bandwidth citation (edge attr "source") is kept as "citation"
        e.update({("citation" if k == "source" else k): val for k, val in d.items()
                  if k not in _EDGE_KEYS and k != "target"})
        edges.append(e)
    return {"mode": G.graph.get("mode"), "cpu_vendor": G.graph.get("cpu_vendor"),
            "cpu_model": G.graph.get("cpu_model"), "disagreements": list(G.graph.get("disagreements") or []),
            "assumed_gpu_model": G.graph.get("assumed_gpu_model"), "gdr_module": G.graph.get("gdr_module"),
            "iommu": G.graph.get("iommu"), "nvlink_reported": G.graph.get("nvlink_reported"),
            "cpu_name": G.graph.get("cpu_name"), "nic_inventory": list(G.graph.get("nic_inventory") or []),
            "nic_unknown": G.graph.get("nic_unknown"), "socket_nets": list(G.graph.get("socket_nets") or []),
            "virtual_pci": bool(G.graph.get("virtual_pci")), "unplaced": list(G.graph.get("unplaced") or []),
            "nodes": nodes, "edges": edges}


def _gpu_dict(G: nx.Graph, g: str, nic: str | None) -> dict:
    d = G.nodes[g]
    return {"name": g, "index": d.get("index"), "node": g, "bdf": d.get("bdf"), "uuid": d.get("uuid"),
            "model": d.get("model"), "numa": d.get("numa"), "cpu_affinity": d.get("cpu_affinity"), "nic": nic}


def _nic_dict(G: nx.Graph, n: str, compute: bool, rail: int | None) -> dict:
    d = G.nodes[n]
    return {"name": n, "label": d.get("nic_label") or d.get("label"), "node": n, "bdf": d.get("bdf"),
            "port": d.get("port"), "state": d.get("state"), "phys_state": d.get("phys_state"),
            "rate_gbps": d.get("rate_gbps"), "link_layer": d.get("link_layer"), "numa": d.get("numa"),
            "active": d.get("active"), "compute": compute, "rail": rail, "transport": d.get("transport") or "verbs"}


def _summary(G: nx.Graph, doc: dict) -> dict:
    nics = doc["nics"]
    gpus = doc["gpus"]
    models = [g["model"] for g in gpus if g["model"]]
    summary = {
        "gpu_count": len(gpus),
        "gpu_model": G.graph.get("gpu_model") or (models[0] if models else None),
        "nic_count": len(nics),
        "active_nic_count": sum(1 for n in nics if n["active"]),
        "nic_state_count": sum(1 for n in nics if n["state"] is not None or n["active"] is not None),
        "gpu_model_assumed": None if (G.graph.get("gpu_model") or models) else G.graph.get("gpu_model_assumed"),
        "nic_rates_gbps": [n["rate_gbps"] for n in nics if n["compute"] and n["rate_gbps"] is not None],
        "nvlink": any(d.get("kind") == "nvlink" for _, _, d in G.edges(data=True)),
        "nvswitch": any(d.get("kind") == "nvswitch" for _, d in G.nodes(data=True)),
        "sockets": sum(1 for _, d in G.nodes(data=True) if d.get("kind") == "cpu"),
        "numa_nodes": G.graph.get("numa_nodes") or sum(1 for _, d in G.nodes(data=True) if d.get("kind") == "cpu"),
        "socket_count": G.graph.get("socket_count"),
    }
    layout = {
        "gpus": [len(gpus), summary["gpu_model"]],
        "nics": sorted([n["rate_gbps"] or 0, n["state"] or "", n["link_layer"] or "", n["compute"]] for n in nics),
        "pairs": sorted(p["path_class"] or "?" for p in doc["gpu_pairs"]),
        "gpu_nic": sorted(e["path_class"] or "?" for e in doc["gpu_nic"]),
        "widths": sorted([e["kind"] or "", e["width"] or 0, e["gen"] or 0] for e in doc["graph"]["edges"]),
    }
    blob = json.dumps(layout, sort_keys=True, default=str).encode()
    summary["fingerprint"] = hashlib.sha256(blob).hexdigest()[:16]
    return summary
