"""Fabric benchmarks: cross-host GPU path queries through a discovered fabric, 1,024 hosts.

* ``fabric view``: ``FabricView.build`` of the synthetic fat tree of ``bench.fabric_synth`` (2,000
  switches, 16,000 HCAs; SYNTHETIC) with 1,024 hosts attached by port GUID (``fabric.attach_hosts``):
  the index a path query reads (NIC -> leaf, switch adjacency).
* ``path query through the fabric``: ``ClusterIndex(docs, fabric=view).path("host/GPUi", "host/GPUj")``
  for random GPU pairs on two different hosts among 1,024 synthetic hosts of ``bench.synth`` (real
  layouts under synthetic names, each distinct layout + fault analysed once). Host ``i`` is the fabric's
  ``node<i>``: its compute NICs, in rail order, are that node's HCAs ``mlx5_0``.. (joined by the HCAs'
  port GUIDs, as the server joins ibstat's), so with 16 HCAs per leaf and 8 per host nearly every pair
  of hosts is a leaf pair not asked before (route summaries are computed on first use, then kept):
  the figure is the cold cost of a route through 2 to 6 switches. p50/p95 per query, target p95 < 5 ms.
* ``path query, rail model``: the same queries without the fabric (the assumed rail switches), to
  show what the switches add.
* ``placement, 64 nodes in 1,024 hosts with a fabric``: ``placement.place(docs, nodes=64,
  gpus_per_node=8, view=view)`` over the same 1,024 hosts and fabric (the view built once, as the
  server keeps it): health, layout groups, leaf sets, the estimate of the placement and of a seeded
  random one with their leaf-uplink contention. Cold: the estimate's models cleared before each run
  (a layout's first placement searches NCCL's channels with the job's ``NCCL_IB_HCA``); warm: kept.
  Target < 1 s.
"""

from __future__ import annotations

import random

from apps.domain.cluster import ClusterIndex, rails
from apps.domain.fabric import attach_hosts, build_fabric, host_cas
from apps.domain.fabric_paths import FabricView
from apps.domain import estimate, placement
from apps.domain.parsers import ALL_KINDS
from bench.engine import cluster_documents
from bench.fabric_synth import synthetic_ibnetdiscover
from bench.timing import Measure, measure, summarize, timed

PATH_P95_TARGET_MS = 5.0
PLACEMENT_TARGET_MS = 1000.0
HOSTS = 1024
QUERIES = 3000


def host_ports(G, docs: list[dict]) -> dict[str, list[dict]]:
    """Host ``i``'s compute NICs (rail order) -> the port GUIDs of fabric node ``i``'s HCAs, the rows
    ``attach_hosts`` joins exactly."""
    by_host: dict[str, list[str]] = {}
    for ca in host_cas(G):
        d = G.nodes[ca]
        by_host.setdefault(d["host"], []).append(ca)
    out = {}
    for i, doc in enumerate(docs):
        cas = sorted(by_host.get(f"node{i:05d}", []), key=lambda n: G.nodes[n]["name"])
        nics = {n["name"]: n for n in doc["nics"]}
        order = sorted(rails(doc).items(), key=lambda kv: kv[1])
        out[doc["hostname"]] = [{"nic": nic, "port": nics.get(nic, {}).get("port") or 1,
                                 "port_guid": next(iter(G.nodes[ca]["ports"].values()))["port_guid"],
                                 "node_guid": None} for (nic, _r), ca in zip(order, cas)]
    return out


def cross_host_queries(index: ClusterIndex, docs: list[dict], count: int = QUERIES,
                       seed: int = 3) -> tuple[list[float], dict]:
    """Latency (ms) of ``count`` random GPU pairs on two different hosts; and what they answered."""
    rng = random.Random(seed)
    gpus = [(d["hostname"], g["name"]) for d in docs for g in d["gpus"]]
    samples, answers = [], {}
    for _ in range(count):
        (ha, ga), (hb, gb) = rng.sample(gpus, 2)
        while hb == ha:
            hb, gb = rng.choice(gpus)
        ms, out = timed(lambda: index.path(f"{ha}/{ga}", f"{hb}/{gb}"))
        samples.append(ms)
        key = f"{out['mechanism']}/{out.get('fabric')}"
        answers[key] = answers.get(key, 0) + 1
    return samples, answers


def run() -> list[Measure]:
    G = build_fabric(ALL_KINDS["ibnetdiscover"].parse(synthetic_ibnetdiscover()))
    docs = cluster_documents(HOSTS)
    ports = host_ports(G, docs)
    attachments = attach_hosts(G, ports)
    joined = sum(1 for h in attachments["hosts"] if not h.startswith("node"))
    rows = [measure("fabric view, 2,000 switches / 16,000 HCAs (synthetic), 1,024 hosts",
                    lambda: FabricView.build(G, attachments), runs=5, warmup=1,
                    note=f"{joined} hosts joined by port GUID; the rest by node description")]
    view = FabricView.build(G, attachments)
    samples, answers = cross_host_queries(ClusterIndex(docs, fabric=view), docs)
    row = summarize(f"path query through the fabric, random cross-host GPU pairs, {len(docs)} hosts", samples,
                    target_ms=PATH_P95_TARGET_MS,
                    note="answers: " + ", ".join(f"{k} {v}" for k, v in sorted(answers.items()))
                         + f"; {view.cached_routes} leaf-pair routes computed")
    row.target_on = "p95"
    rows.append(row)
    base, base_answers = cross_host_queries(ClusterIndex(docs), docs)
    rows.append(summarize(f"path query, rail model (no fabric), the same pairs, {len(docs)} hosts", base,
                          note="answers: " + ", ".join(f"{k} {v}" for k, v in sorted(base_answers.items()))))
    rows += placement_rows(docs, view)
    return rows


def placement_rows(docs: list[dict], view: FabricView) -> list[Measure]:
    """Placement of 64 x 8 GPUs among ``docs`` on ``view``: cold (estimate models cleared) and warm."""
    def cold() -> dict:
        estimate.clear_caches()
        return placement.place(docs, nodes=64, gpus_per_node=8, view=view)

    got = placement.place(docs, nodes=64, gpus_per_node=8, view=view)
    note = (f"{len(got['skipped'])} hosts skipped, {got['fabric']['leaf_sets']} leaf sets, "
            f"expected {got['expected_busbw_gbs']} GB/s vs random {got['random_busbw_gbs']} GB/s")
    return [measure(f"placement, 64 nodes in {len(docs):,} hosts with a fabric (cold estimate)", cold, runs=5,
                    warmup=1, target_ms=PLACEMENT_TARGET_MS, note=note),
            measure(f"placement, 64 nodes in {len(docs):,} hosts with a fabric (layouts' models kept)",
                    lambda: placement.place(docs, nodes=64, gpus_per_node=8, view=view), runs=5, warmup=1,
                    target_ms=PLACEMENT_TARGET_MS)]
