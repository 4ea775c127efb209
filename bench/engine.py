"""Engine benchmarks: host graph build per real layout, the whole analysis, and path queries
between random GPU pairs of a 1,024-host synthetic cluster.

* ``host graph <layout>``: the parsed sections of a real bundle joined (``assemble``) and built
  into the HostGraph (``build_host_graph``); target 20 ms for the 8-GPU hosts with 8 NICs or more.
  Parsing has rows of its own (the ``parsers`` group), and ``parse + host graph <layout>`` times
  the two together, from the raw text.
* ``analyze_host <layout>``: the same plus paths, contention, findings and estimate, i.e. the
  whole snapshot document a worker computes per report, repeated on one layout as a fleet's hosts
  repeat it (the estimate's per-layout model kept); target 10 ms for the 8-GPU hosts (issue #10).
* ``path query``: ``ClusterIndex.path("host/GPUi", "host/GPUj")`` for random pairs over 1,024
  hosts made by ``bench.synth`` (each distinct layout+fault analysed once, its document reused
  under every hostname that shares it); latency of each query, p50 and p95 (target p95 < 5 ms).
* ``estimate <layout>``: the all-reduce estimate of the layout's document (``estimate.estimate``:
  NCCL's system, channel search and tuning model), cold (``clear_caches`` first: the hosts of a
  fleet that share a layout share one search); target 10 ms for the 8-GPU hosts.
* ``channel search, 16-GPU mesh``: ``estimate.channel_search`` (rings, trees and NVLS inside the
  node and across nodes) on the real RCCL topology of 16 MI250 GCDs joined by xGMI
  (``tests/fixtures/nccl_topo_xml/rccl_topo_expl_topo_16p1h_mi250_broadcom_sw.xml``), cold
  (``clear_caches`` first: the search's integer view of the system is built again); target 50 ms.
* ``what-if recompute, 8-GPU host <layout>``: ``whatif.whatif`` on an analysed host (its
  ``HostAnalysis``): the edits applied to a copy of the graph, the whole document built again and
  compared with the original, the estimate cold (``clear_caches`` first: an edited layout is a new
  one); target 50 ms (issue #14). The ``estimate kept`` row repeats the same edits (the edited
  layout's NCCL channel search kept): what the what-if costs beyond the search.
* ``fabric graph``: ``fabric.build_fabric`` of a parsed ibnetdiscover, the synthetic 2,000-switch /
  16,000-HCA fat tree of ``bench.fabric_synth`` and the real DGX H100 SuperPOD capture; ``fabric
  route``: ``fabric.route`` between random HCA pairs of each (p50, p95).
"""

from __future__ import annotations

import copy
import random
from pathlib import Path

from apps.domain import fabric
from apps.domain.analysis import analyze_host
from apps.domain.assemble import assemble
from apps.domain.cluster import ClusterIndex
from apps.domain.estimate import channel_search, clear_caches, estimate, link_figures
from apps.domain.hostgraph import build_host_graph
from apps.domain.parsers import ALL_KINDS, KINDS
from apps.domain.whatif import whatif
from bench.fabric_synth import synthetic_ibnetdiscover
from bench.synth import iter_reports, load_layouts
from bench.timing import Measure, measure, summarize, timed

HOST_GRAPH_TARGET_MS = 20.0
ESTIMATE_TARGET_MS = 10.0
ANALYSIS_TARGET_MS = 10.0
CHANNEL_SEARCH_TARGET_MS = 50.0
WHATIF_TARGET_MS = 50.0
MESH16 = (Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "nccl_topo_xml"
          / "rccl_topo_expl_topo_16p1h_mi250_broadcom_sw.xml")
PATH_P95_TARGET_MS = 5.0
CLUSTER_HOSTS = 1024
PATH_QUERIES = 3000
SUPERPOD = (Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "ibnetdiscover"
            / "nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.txt")


def parse_sections(sections: dict) -> dict:
    return {kind: KINDS[kind].parse(text) for kind, text in sections.items()}


def build_graph(sections: dict, hostname: str):
    return build_host_graph(assemble(parse_sections(sections), hostname))


def cluster_documents(n: int = CLUSTER_HOSTS, seed: int = 0) -> list[dict]:
    """Snapshot documents of ``n`` synthetic hosts (one analysis per distinct layout + fault)."""
    cache: dict[tuple, dict] = {}
    docs = []
    for r in iter_reports(n, seed=seed):
        key = (r["meta"]["layout"], r["meta"]["fault"])
        if key not in cache:
            cache[key] = analyze_host(r["sections"], r["hostname"]).to_dict()
        doc = copy.deepcopy(cache[key])
        doc["hostname"] = r["hostname"]
        docs.append(doc)
    return docs


def path_queries(docs: list[dict], count: int = PATH_QUERIES, seed: int = 1) -> tuple[list[float], dict]:
    """Latency (ms) of ``count`` random cross- and same-host GPU path queries; and what they answered."""
    index = ClusterIndex(docs)
    rng = random.Random(seed)
    gpus = [(d["hostname"], g["name"]) for d in docs for g in d["gpus"]]
    samples, mechanisms = [], {}
    for _ in range(count):
        (ha, ga), (hb, gb) = rng.choice(gpus), rng.choice(gpus)
        if rng.random() < 0.2:  # a fifth of the queries stay on one host
            same = [g for h, g in gpus if h == ha]
            hb, gb = ha, rng.choice(same)
        ms, out = timed(lambda: index.path(f"{ha}/{ga}", f"{hb}/{gb}"))
        samples.append(ms)
        mechanisms[out["mechanism"]] = mechanisms.get(out["mechanism"], 0) + 1
    return samples, mechanisms


def fabric_rows(route_queries: int = 200, seed: int = 2) -> list[Measure]:
    """Fabric graph build and route latency, on the synthetic fat tree and the real SuperPOD capture."""
    rows = []
    rng = random.Random(seed)
    for label, text in (("2,000 switches / 16,000 HCAs (synthetic)", synthetic_ibnetdiscover()),
                        ("DGX H100 SuperPOD (real, 40 switches)", SUPERPOD.read_text())):
        parsed = ALL_KINDS["ibnetdiscover"].parse(text)
        rows.append(measure(f"fabric graph {label}", lambda: fabric.build_fabric(parsed), runs=5, warmup=1,
                            note=f"{len(parsed.links):,} links; from the parsed text"))
        G = fabric.build_fabric(parsed)
        cas = fabric.host_cas(G)
        samples = [timed(lambda: fabric.route(G, *rng.sample(cas, 2)))[0] for _ in range(route_queries)]
        rows.append(summarize(f"fabric route {label}", samples, note="random HCA pairs: paths, ECMP count, min cut"))
    return rows


def estimate_rows() -> list[Measure]:
    """The channel search on the 16-GPU xGMI mesh (one node and across nodes)."""
    doc = analyze_host({"nccl_topo_xml": MESH16.read_text()}, "mi250-16").doc
    system = link_figures(doc)
    graphs = channel_search(system)
    ring = graphs.intra["RING"]
    return [measure("channel search, 16-GPU mesh", lambda: (clear_caches(), channel_search(system)), runs=5, warmup=1,
                    target_ms=CHANNEL_SEARCH_TARGET_MS,
                    note=f"16 MI250 GCDs over xGMI, {len(system.nets)} NETs; one node: {ring.n_channels} rings x "
                         f"{ring.bw_intra:g} GB/s")]


def whatif_edits(doc: dict) -> list[dict]:
    """A planner's edit list for one host: every compute NIC at 400 Gb/s, a NIC added beside the
    last GPU, NVLS off."""
    edits = [{"op": "set_nic", "name": n["name"], "rate_gbit": 400} for n in doc["nics"] if n["compute"]]
    return edits + [ADD_NIC(doc), {"op": "set_env", "name": "NCCL_NVLS_ENABLE", "value": "0"}]


def ADD_NIC(doc: dict) -> dict:  # noqa: N802  (the one edit of the "add a NIC" row)
    return {"op": "add_nic", "name": "planned_nic0", "near": doc["gpus"][-1]["name"], "rate_gbit": 200}


def whatif_rows(layouts) -> list[Measure]:
    rows = []
    for layout in layouts:
        base = analyze_host(layout.sections, layout.hostname)
        if base.doc["summary"]["gpu_count"] != 8 or not base.doc["nics"]:
            continue
        for what, edits in (("add a NIC", [ADD_NIC(base.doc)]), ("NICs to 400G + a NIC + NVLS off", whatif_edits(base.doc))):
            said = len(whatif(base, edits)["changes"]["summary"])
            rows.append(measure(f"what-if recompute, 8-GPU host {layout.name}: {what}",
                                lambda: (clear_caches(), whatif(base, edits)), runs=9, warmup=1,
                                target_ms=WHATIF_TARGET_MS, note=f"{len(edits)} edit(s), estimate cold; {said} changes said"))
        rows.append(measure(f"what-if recompute, 8-GPU host {layout.name}: the same again, estimate kept",
                            lambda: whatif(base, edits), runs=9, warmup=1,
                            note="the edited layout's channel search kept: what the what-if costs beyond it"))
    return rows


def run() -> list[Measure]:
    rows = []
    for layout in load_layouts():
        doc = analyze_host(layout.sections, layout.hostname).doc
        g, n = doc["summary"]["gpu_count"], doc["summary"]["nic_count"]
        shape = f"{g} GPU/{n} NIC, {'+'.join(sorted(layout.sections))}"
        target = HOST_GRAPH_TARGET_MS if g == 8 and n >= 8 else None  # the 8-GPU/8+-NIC hosts
        parsed = parse_sections(layout.sections)
        rows.append(measure(f"host graph {layout.name}", lambda: build_host_graph(assemble(parsed, layout.hostname)),
                            runs=15, warmup=2, target_ms=target, note=shape + "; from parsed sections"))
        rows.append(measure(f"parse + host graph {layout.name}", lambda: build_graph(layout.sections, layout.hostname),
                            runs=15, warmup=2, note="from the raw text"))
        rows.append(measure(f"analyze_host {layout.name}", lambda: analyze_host(layout.sections, layout.hostname),
                            runs=9, warmup=1, target_ms=ANALYSIS_TARGET_MS if g == 8 else None,
                            note="whole snapshot document"))
        rows.append(measure(f"estimate {layout.name}", lambda: (clear_caches(), estimate(dict(doc))), runs=9,
                            warmup=1, target_ms=ESTIMATE_TARGET_MS if g == 8 else None,
                            note="NCCL's system, channel search and tuning, cold (nothing kept)"))
    docs = cluster_documents()
    samples, mechanisms = path_queries(docs)
    gpus = sum(len(d["gpus"]) for d in docs)
    rows.append(summarize(f"path query, random GPU pairs, {len(docs)} hosts", samples, target_ms=PATH_P95_TARGET_MS,
                          note=f"{gpus} GPUs; answers: " +
                               ", ".join(f"{k} {v}" for k, v in sorted(mechanisms.items()))))
    rows[-1].target_on = "p95"
    rows += estimate_rows()
    rows += whatif_rows(load_layouts())
    rows += fabric_rows()
    return rows
