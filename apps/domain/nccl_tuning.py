"""NCCL's all-reduce cost model: per algorithm and protocol a bandwidth and a latency, and the choice.

``tune(...)`` follows ``ncclTopoTuneModel`` (src/graph/tuning.cc at v2.30.7-1) for all-reduce:
from the graphs of the channel search (``nccl_search``) it gives each (algorithm, protocol) NCCL's
bus bandwidth (channels x per-channel bandwidth with the model's refinements, L288-383), the
algorithm bandwidth it times with (busBw x nRanks / (2(nRanks-1)) for rings and NVLS, x 0.5 for
trees, L376-382) and a latency (base + hardware latencies per step, L384-435), with the
algorithms and protocols NCCL enables (L440-541: ``NCCL_ALGO``, ``NCCL_PROTO``, LL128 only on
NVLink-class paths, NVLS Tree only across nodes, CollNet only with ``NCCL_COLLNET_ENABLE=1``,
NVLS only where multicast is supported: NVSwitch, sm90+, ``NCCL_NVLS_ENABLE`` not 0 (nvls.cc
L248-279)). ``time(...)`` is ``ncclTopoGetAlgoTime`` (L630-655, tree correction factors and the
ring plateau effect included) and ``choose(...)`` the minimum over the table that
``topoGetAlgoInfo`` takes (src/enqueue.cc L2028-2047): the algorithm NCCL runs for a message size.

Every constant below is NCCL's, with its line at v2.30.7-1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from apps.domain.nccl_search import TREE, Graph
from apps.domain.nccl_system import System
from apps.domain.paths import nccl_rank

__all__ = ["Cost", "tune", "time_us", "choose", "enabled", "cc_index", "ALGORITHMS", "PROTOCOLS",
           "NVLS_EFFICIENCY", "nccl_tests_factor"]

# NCCL's order (src/include/device.h): the first of equal times wins (enqueue.cc L2035-2044)
ALGORITHMS = ("TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE")
PROTOCOLS = ("LL", "LL128", "SIMPLE")
_ENV_ALGO = {"tree": "TREE", "ring": "RING", "collnetdirect": "COLLNET_DIRECT", "collnetchain": "COLLNET_CHAIN",
             "nvls": "NVLS", "nvlstree": "NVLS_TREE", "pat": "PAT"}
_ENV_PROTO = {"ll": "LL", "ll128": "LL128", "simple": "SIMPLE"}

NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)  # Volta, Ampere, Hopper, Blackwell (L139-145)
BASE_LAT = {"TREE": (6.8, 14.0, 8.4), "RING": (6.6, 14.0, 8.4), "COLLNET_DIRECT": (0, 0, 0),
            "COLLNET_CHAIN": (0, 0, 0), "NVLS": (0, 0, 0), "NVLS_TREE": (0, 0, 0)}  # L149-155
HW_LAT = {  # L156-176: NVLINK, PCI, NET rows; (LL, LL128, Simple)
    "NVLINK": {"TREE": (0.6, 1.25, 4.0), "RING": (0.6, 1.9, 3.4), "COLLNET_DIRECT": (0, 0, 3.7),
               "COLLNET_CHAIN": (0, 0, 2.8), "NVLS": (0, 0, 25), "NVLS_TREE": (0, 0, 25)},
    "PCI": {"TREE": (1.0, 1.9, 4.0), "RING": (1.0, 2.5, 5.7), "COLLNET_DIRECT": (0, 0, 3.7),
            "COLLNET_CHAIN": (0, 0, 2.8), "NVLS": (0, 0, 0), "NVLS_TREE": (0, 0, 0)},
    "NET": {"TREE": (5.0, 8.5, 14), "RING": (2.7, 4.0, 14.0), "COLLNET_DIRECT": (0, 0, 31),
            "COLLNET_CHAIN": (0, 0, 30), "NVLS": (0, 0, 18), "NVLS_TREE": (0, 0, 20.9)},
}
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))  # L177-183
PER_CH_RING_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (40.0, 40.0, 40.0))  # L184-190
PER_CH_TREE_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))  # L191-197
PER_CH_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))  # L199-204
PER_CH_NVLS_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0))  # L205-211
TREE_CORRECTION = (  # L620-627, per protocol, powers of two from 64 B
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
)
NCCL_MAX_DIRECT_ARITY = 7  # src/include/device.h L199


@dataclass(frozen=True)
class Cost:
    """One (algorithm, protocol) of the model: ``bw`` the algorithm bandwidth NCCL times with (GB/s),
    ``bus_bw`` NCCL's bus bandwidth, ``latency_us``, ``n_channels``, ``per_channel`` (GB/s per channel
    after the model's caps) and ``bound``: what set the per-channel figure (``graph`` = the search's
    bandwidth, ``nvls_intra``/``nvls_inter``, ``per_channel_max``, ``ll_max``)."""

    algorithm: str
    protocol: str
    bw: float
    bus_bw: float
    latency_us: float
    n_channels: int
    per_channel: float
    bound: str


def cc_index(system: System) -> int:
    """NCCL's compute-capability row: Volta 0, Ampere 1, Hopper 2, Blackwell 3 (L263-266).
    AMD GPUs (RCCL) take the Volta row: RCCL's own tables are not modelled."""
    sm = 0 if system.amd else (system.sm or 0)
    return 3 if sm >= 100 else 2 if sm >= 90 else 1 if sm >= 80 else 0


def _log2i(n: int) -> int:
    return max(0, int(n).bit_length() - 1) if n > 0 else -1


def _parse(value: str | None, names: Mapping[str, str], default: set[str]) -> set[str]:
    """``parseList`` (L52-137) for all-reduce: ``"ring,tree"``, ``"^nvls"``, ``"allreduce:tree;..."``."""
    if not value:
        return set(default)
    chosen = set(default)
    for i, part in enumerate(str(value).split(";")):
        prefix, _, elems = part.rpartition(":")
        if prefix and prefix.strip().lower() != "allreduce":
            continue
        if not prefix and i > 0:
            continue
        elems = elems.strip()
        unset = elems.startswith("^")
        items = {names.get(e.strip().lower()) for e in elems.lstrip("^").split(",") if e.strip()}
        items.discard(None)
        chosen = (set(default) - items) if unset else items
    return chosen


def enabled(system: System, nodes: int, env: Mapping[str, str]) -> tuple[set[str], set[str], list[str]]:
    """(algorithms, protocols, reasons) NCCL enables for all-reduce on ``nodes`` nodes."""
    reasons: list[str] = []
    algos = _parse(env.get("NCCL_ALGO"), _ENV_ALGO, set(ALGORITHMS))
    protos = _parse(env.get("NCCL_PROTO"), _ENV_PROTO, set(PROTOCOLS))
    if env.get("NCCL_ALGO"):
        reasons.append(f"NCCL_ALGO={env['NCCL_ALGO']}")
    if env.get("NCCL_PROTO"):
        reasons.append(f"NCCL_PROTO={env['NCCL_PROTO']}")
    nvls_env = str(env.get("NCCL_NVLS_ENABLE", "2")).strip()
    if nvls_env == "0":
        algos -= {"NVLS", "NVLS_TREE"}
        reasons.append("NCCL_NVLS_ENABLE=0")
    collnet = str(env.get("NCCL_COLLNET_ENABLE", "0")).strip() == "1"
    if nodes == 1:
        algos.discard("NVLS_TREE")  # L501-502
    if not collnet or nodes < 2:
        algos -= {"COLLNET_DIRECT", "COLLNET_CHAIN"}
        if nodes > 1:
            algos.discard("NVLS")  # NVLS across nodes needs CollNet (L504-506, enqueue.cc L2008)
    if not system.nvswitch:
        algos.discard("COLLNET_DIRECT")  # L508-509
    if len(system.gpus) > NCCL_MAX_DIRECT_ARITY + 1:
        algos -= {"COLLNET_DIRECT", "COLLNET_CHAIN"}  # enqueue.cc L2000-2003
    return algos, protos, reasons


def _ll128(system: System, graph: Graph) -> bool:
    """Whether LL128 is on by default for a graph (L518-536)."""
    sm = 0 if system.amd else (system.sm or 0)
    sm_max = system.sm_max or sm
    if sm >= 90:
        ok = nccl_rank(graph.type_inter) <= nccl_rank("PXN")
    else:
        ok = nccl_rank(graph.type_inter) <= nccl_rank("PXB")
    ok = ok and nccl_rank(graph.type_intra) <= nccl_rank("NVB")
    ok = ok and (sm == sm_max or sm >= 90)
    return ok and sm >= 70


def tune(system: System, graphs: Mapping[str, Graph], nodes: int, env: Mapping[str, str] | None = None
         ) -> dict[tuple[str, str], Cost]:
    """The all-reduce table of ``ncclTopoTuneModel`` for ``nodes`` nodes of this host: {(algorithm,
    protocol): Cost}; pairs NCCL disables are absent. ``graphs`` maps ``RING``, ``TREE``,
    ``NVLS`` (also standing for ``NVLS_TREE``, one graph in NCCL) and, with CollNet, ``COLLNET``."""
    env = dict(env or {})
    ppn = len(system.gpus)
    n_ranks = ppn * nodes
    if n_ranks <= 1:
        return {}
    cc = cc_index(system)
    index2 = nodes - 1 if nodes <= 2 else 2
    amd_cpu = system.arch == "x86" and system.vendor == "amd"
    index1 = cc if nodes == 1 else (1 if amd_cpu else 0)
    ll_max = LL_MAX_BW[index1][index2]
    per_tree, per_ring_ll128 = PER_CH_TREE[cc][index2], PER_CH_RING_LL128[cc][index2]
    per_tree_ll128, per_nvls_tree = PER_CH_TREE_LL128[cc][index2], PER_CH_NVLS_TREE[cc][index2]
    nsteps = 2 * (n_ranks - 1)
    algos, protos, _ = enabled(system, nodes, env)
    tree_pattern = (graphs.get("TREE") or Graph(TREE)).pattern
    out: dict[tuple[str, str], Cost] = {}
    net_overhead = (2.0 if amd_cpu else 1.0) if nodes > 1 else 0.0
    for a in ALGORITHMS:
        g = graphs.get("NVLS" if a.startswith("NVLS") else ("COLLNET" if a.startswith("COLLNET") else a))
        if a not in algos or g is None or g.n_channels == 0:
            continue
        # intraHw: NVLINK only when the graph's intra-node path type is NVL (L283-285)
        intra_hw = "NVLINK" if nccl_rank(g.type_intra) == nccl_rank("NVL") else "PCI"
        for pi, p in enumerate(PROTOCOLS):
            if p not in protos or (a.startswith("NVLS") and p != "SIMPLE"):
                continue
            if p == "LL128" and "NCCL_PROTO" not in env and not _ll128(system, g):
                continue
            collnet = a.startswith("COLLNET")
            bw = g.bw_intra if (nodes <= 2 or collnet) else g.bw_inter
            bound = "graph"
            if a.startswith("NVLS"):
                if g.n_channels < 2:
                    continue
                eff = NVLS_EFFICIENCY[cc]
                intra = g.bw_intra * eff * (g.n_channels - 1) / g.n_channels * 2.0
                inter = g.bw_inter * (2 if (nodes <= 2 and a == "NVLS_TREE") else 1)
                cap = per_nvls_tree if a == "NVLS_TREE" else math.inf
                bw = min(intra, inter, cap)
                bound = "nvls_intra" if bw == intra else ("nvls_inter" if bw == inter else "per_channel_max")
            bus = g.n_channels * bw
            if a == "RING" and p == "LL":
                bus, bound = min(ll_max, bus * 0.5), ("ll_max" if ll_max < bus * 0.5 else bound)
            if a == "RING" and p == "LL128":
                cap = g.n_channels * per_ring_ll128
                bound = "per_channel_max" if cap < bus * 0.92 else bound
                bus = min(bus * 0.92, cap)
            if a == "TREE":
                cap = g.n_channels * per_tree
                bound = "per_channel_max" if cap < bus * 0.92 else bound
                bus = min(bus * 0.92, cap)
                if p == "LL":
                    bus = min(bus / 3.8, ll_max)
                if p == "LL128":
                    bus = min(bus * (7.0 / 9.0 if nodes == 1 else 120.0 / 128.0), g.n_channels * per_tree_ll128)
                if tree_pattern == TREE:
                    bus *= 0.85
            if collnet and p != "SIMPLE":
                continue
            if a == "COLLNET_DIRECT":
                factor = ppn / (1.0 * g.n_channels)
                factor -= (factor - 1) / 2
                bus /= factor
                if not system.amd and (system.sm or 0) >= 90:
                    bus *= 0.85
            ratio = n_ranks / nsteps if a in ("RING", "NVLS", "NVLS_TREE") else 0.5
            lat = BASE_LAT[a][pi]
            intra_lat = HW_LAT[intra_hw][a][pi]
            if a == "TREE" and pi == 2 and system.arch == "power" and intra_hw == "PCI":
                intra_lat = HW_LAT["PCI"]["RING"][2]  # L277-280
            inter_lat = HW_LAT["NET"]["TREE" if ppn == 1 else a][pi]
            if a == "RING":
                over = net_overhead * (3 if p == "SIMPLE" else 1)
                intra_lat = max(intra_lat, over)
                n_inter = 0 if nodes == 1 else 2 * (nodes - 1)
                lat += (nsteps - n_inter) * intra_lat + n_inter * inter_lat
            elif a == "TREE":
                lat += 2 * ((n_ranks // nodes - 1) * intra_lat + _log2i(nodes) * inter_lat)
            elif a == "COLLNET_DIRECT":
                lat += 2 * (min(1, ppn - 1) * intra_lat + (ppn - 1) * 0.4) + inter_lat
            elif a == "COLLNET_CHAIN":
                lat += 2 * (ppn - 1) * intra_lat + inter_lat
            elif a == "NVLS":
                lat = intra_lat + (inter_lat if nodes > 1 else 0)
            elif a == "NVLS_TREE":
                lat += intra_lat + 2 * _log2i(nodes) * inter_lat
            if bus <= 0:
                continue
            out[(a, p)] = Cost(a, p, bus * ratio, bus, lat, g.n_channels, bus / g.n_channels, bound)
    return out


def time_us(cost: Cost, nbytes: int, *, nodes: int, n_ranks: int, comm_channels: int, system: System,
            efficiency: float = 1.0) -> float:
    """``ncclTopoGetAlgoTime`` (L630-655) for one all-reduce of ``nbytes`` (one operation), the
    bandwidth scaled by ``efficiency`` (topoweb's calibration, 1.0 = NCCL's own figure)."""
    bw = cost.bw * efficiency
    lat = cost.latency_us
    if bw <= 0:
        return math.inf
    log_size = _log2i(nbytes >> 6)
    if cost.algorithm == "TREE" and 0 <= log_size < 23:
        bw *= TREE_CORRECTION[PROTOCOLS.index(cost.protocol)][log_size]
    if (cost.algorithm == "NVLS_TREE" and 0 <= log_size < 24 and (system.sm or 0) >= 100 and not system.amd
            and system.arch == "x86"):
        bw *= TREE_CORRECTION[PROTOCOLS.index(cost.protocol)][log_size]
    if (cost.algorithm == "RING" and cost.protocol == "SIMPLE" and nodes > 1
            and nbytes / max(1, comm_channels * n_ranks) >= 64):
        lat *= 1.9 if (system.amd or (system.sm or 0) < 80) else 1.4
    return lat + nbytes / (1000 * bw)


def choose(table: Mapping[tuple[str, str], Cost], nbytes: int, **kwargs) -> tuple[Cost, float] | None:
    """The (algorithm, protocol) with the least time for ``nbytes`` and that time, in NCCL's order
    (``topoGetAlgoInfo``: strictly less wins, so the first of equal times stays); None when none."""
    best = None
    for a in ALGORITHMS:
        for p in PROTOCOLS:
            c = table.get((a, p))
            if c is None:
                continue
            t = time_us(c, nbytes, **kwargs)
            if best is None or t < best[1]:
                best = (c, t)
    return best


def nccl_tests_factor(algorithm: str, n_ranks: int, env: Mapping[str, str] | None = None) -> float:
    """nccl-tests' busbw from NCCL's algorithm bandwidth: ``2(n-1)/n`` (all_reduce.cu
    ``AllReduceGetBw`` [S16]; domain.md 5.1), or ``(n-1)/(n+1)`` when ``NCCL_ALGO`` is literally
    ``NVLS`` or ``NVLSTree``."""
    value = str((env or {}).get("NCCL_ALGO") or "").strip()
    if value.upper() in ("NVLS", "NVLSTREE"):
        return (n_ranks - 1) / (n_ranks + 1)
    return 2 * (n_ranks - 1) / n_ranks
