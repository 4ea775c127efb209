"""Topology-aware placement of a job: which hosts, which GPUs and NICs on each, and what to paste.

``place(docs, nodes=N, gpus_per_node=G)`` (or ``gpus=TOTAL``) takes a cluster's latest snapshot
documents (``apps.domain.analysis``) and, when the cluster's fabric is known, its
:class:`~apps.domain.fabric_paths.FabricView`, and chooses:

1. **Healthy hosts.** A host is skipped when it has a CRIT or HIGH finding that cuts bandwidth
   (every rule but X01 "sources disagree" and H05 "bootstrap interface", which cost no bandwidth),
   unless every host of its layout (two or more) has the same finding: that is the layout's design,
   not a fault of the host (the estimate includes it, and ``notes`` names it). Hosts with fewer than
   ``G`` GPUs, and host names a shell cannot take, are skipped too. Each skipped host is listed with
   its reason.
2. **One layout.** Hosts are grouped by ``summary.fingerprint`` (the cluster page's layout groups,
   ``apps.domain.platforms``); among the layouts with ``N`` healthy hosts, the one with the highest
   expected busbw is taken (ties: the one with more healthy hosts).
3. **Within each host, the GPUs.** All of them when ``G`` is the host's GPU count; else ``G`` GPUs
   of the best P2P group that holds ``G`` (the document's ``gpu_groups``, best first: NVLink, then a
   PCIe switch), preferring GPUs whose channel-0 NICs differ (``gpu_nic``: more rails for the job),
   else the best group topped up in index order. The NICs are every NIC those GPUs' channels use
   (``gpu_nic[].nics``); ``NCCL_IB_HCA`` lists them exactly (``=mlx5_0,mlx5_1``,
   ``findings.fabric.ib_hca_value``), since NCCL otherwise opens every HCA it finds.
4. **Fabric.** With a fabric, each host's key is the set of leaves its NICs are cabled to (one leaf
   in a plain fat tree, one per rail in a rail-optimised one). The smallest set of hosts sharing one
   key that holds the job is taken (best fit: a job inside its leaves sends nothing over uplinks,
   and larger blocks stay free); else the largest key group first, then the groups whose leaves are
   fewest switch hops from it (ties: larger, then less oversubscribed leaves). Hosts whose NICs the
   fabric lacks are taken last. Without a fabric, the layout's hosts in name order.

Ranks go host by host in that order (hosts of one leaf set side by side, so NCCL's ring, which
follows rank order between nodes, crosses leaves as few times as possible: ``src/init.cc``
L1291-1301 numbers nodes by first rank), and on each host in GPU index order:
``CUDA_VISIBLE_DEVICES`` is those indexes with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (the CUDA runtime
otherwise numbers devices fastest first, not as ``nvidia-smi`` does).

**Expected busbw** is the estimate's (``apps.domain.estimate.curve`` at ``PLATEAU_BYTES``, NCCL's
tuning model) for the document restricted to the chosen GPUs and ``NCCL_IB_HCA`` on ``N`` nodes; a
job runs at its slowest host's figure. With a fabric, :func:`apps.domain.fabric_jobs.job_contention`
counts the job's ring (or tree, when NCCL picks a tree) flows on every leaf's uplinks: when the
worst leaf's demand exceeds its uplink capacity (``demand_ratio`` > 1), the flows crossing it get
``1 / demand_ratio`` of their rate and the ring runs at its slowest link, so the figure is divided
by it. **Random placement**: ``N`` hosts drawn with ``random.Random(seed)`` from every host with at
least ``G`` GPUs (any layout and health: what a scheduler unaware of the topology would do), ``G``
of each host's GPUs drawn at random, launched the same way (their own NICs in ``NCCL_IB_HCA``),
through the same model.

Returns::

    {"job": {"nodes", "gpus_per_node", "gpus"}, "layout": {"fingerprint", "platform", "healthy_hosts"},
     "hosts": [{"host", "first_rank", "gpus": [names], "cuda_visible_devices": "0,1,...",
                "nics": [names], "nccl_ib_hca": str, "leaves": [leaf names], "group": str}],
     "nodelist": "h100-n[01-08]", "hostfile": "h100-n01 slots=8\\n...",
     "cuda_visible_devices": {host: str}, "nccl_ib_hca": {host: str},
     "torchrun": str, "launch": {host: str},   # the torchrun line with the host's environment
     "expected_busbw_gbs": float | None, "expected": {ESTIMATE},
     "random_busbw_gbs": float | None, "random": {"seed", "hosts", **ESTIMATE},
     "fabric": {"known": bool, "leaves": [names], "leaf_sets": int, "max_hops": int | None,
                "unattached": [hosts]},
     "skipped": [{"host", "reason"}], "notes": [str]}

    ESTIMATE = {"busbw_gbs", "host_busbw_gbs", "algorithm", "slowest_host", "demand_ratio",
                "worst_leaf", "fabric_limited": bool, "unknown_hosts": [hosts whose layout gives
                no figure: the placement's figure is then None; the random one leaves them out]}

Errors (:class:`PlacementError`, naming the field): a count that is not a positive integer, ``G``
larger than every host's GPU count, fewer healthy hosts of one layout than ``N`` (how many hosts
exist, how many are excluded and why, the largest layout's healthy count).
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.domain.estimate import PLATEAU_BYTES, curve
from apps.domain.exports._leaves import switch_names
from apps.domain.exports.slurm import hostlist
from apps.domain.fabric_jobs import job_contention, leaf_loads
from apps.domain.fabric_paths import FabricView
from apps.domain.findings.fabric import ib_hca_value
from apps.domain.names import natural_key
from apps.domain.shellsafe import is_safe_name

__all__ = ["PlacementError", "place", "choose_gpus", "host_problems", "job_shape", "render_text",
           "NO_BANDWIDTH_RULES", "PLACE_FIELDS", "RANDOM_SEED", "RDZV_PORT"]

#: the document fields placement reads (the estimate reads the whole document of one host per layout)
PLACE_FIELDS = ("hostname", "summary", "gpus", "nics", "findings", "gpu_groups", "gpu_nic", "nccl_env")

#: CRIT/HIGH rules that cost no bandwidth: sources disagreeing, the bootstrap interface
NO_BANDWIDTH_RULES = frozenset({"X01", "H05"})
BAD_SEVERITIES = ("CRIT", "HIGH")
RANDOM_SEED = 0
RDZV_PORT = 29500
MAX_NODES = 100_000


class PlacementError(ValueError):
    """A job that cannot be placed, or a request that names no job; the message names the field."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


# --- the job ---------------------------------------------------------------------------------------


def _count(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NODES:
        raise PlacementError(name, f"must be a whole number from 1 to {MAX_NODES}, not {str(value)[:20]!r}")
    return value


def job_shape(host_gpus: int, *, nodes: int | None = None, gpus_per_node: int | None = None,
              gpus: int | None = None) -> tuple[int, int]:
    """``(nodes, gpus per node)`` of a job on hosts of ``host_gpus`` GPUs.

    ``nodes`` and ``gpus_per_node``, or ``gpus`` (a total, with ``gpus_per_node`` optional): a total
    alone is spread over the fewest nodes with the same GPU count on each (the largest divisor of
    the total that a host holds), as ``torchrun --nproc-per-node`` needs.

    >>> job_shape(8, gpus=64), job_shape(8, gpus=12), job_shape(8, gpus=6), job_shape(8, nodes=2, gpus_per_node=4)
    ((8, 8), (2, 6), (1, 6), (2, 4))
    """
    nodes, gpus_per_node, gpus = _count("nodes", nodes), _count("gpus_per_node", gpus_per_node), _count("gpus", gpus)
    if gpus is not None:
        if nodes is not None and gpus_per_node is not None and nodes * gpus_per_node != gpus:
            raise PlacementError("gpus", f"{gpus} is not nodes x gpus_per_node ({nodes} x {gpus_per_node})")
        if gpus_per_node is None and nodes is not None:
            if gpus % nodes:
                raise PlacementError("gpus", f"{gpus} GPUs do not split evenly over {nodes} nodes")
            gpus_per_node = gpus // nodes
        if gpus_per_node is None:
            gpus_per_node = max(d for d in range(1, min(gpus, max(host_gpus, 1)) + 1) if gpus % d == 0)
        if gpus % gpus_per_node:
            raise PlacementError("gpus", f"{gpus} GPUs are not a multiple of gpus_per_node ({gpus_per_node})")
        return gpus // gpus_per_node, gpus_per_node
    if nodes is None:
        raise PlacementError("nodes", "give nodes (with gpus_per_node), or gpus (a total)")
    return nodes, gpus_per_node if gpus_per_node is not None else host_gpus


# --- hosts -----------------------------------------------------------------------------------------


def _bad_findings(doc: Mapping) -> list[Mapping]:
    return [f for f in doc.get("findings") or [] if f.get("severity") in BAD_SEVERITIES
            and f.get("rule") not in NO_BANDWIDTH_RULES]


def _finding_key(f: Mapping) -> tuple:
    return (f.get("rule"), f.get("severity"), tuple(f.get("devices") or ()))


def host_problems(doc: Mapping, layout_wide: Iterable[tuple] = ()) -> list[str]:
    """Why a host may not take part (empty: it may): its CRIT/HIGH bandwidth findings other than
    those in ``layout_wide`` (``(rule, severity, devices)`` every host of its layout has), or a host
    name a shell cannot take."""
    shared = set(layout_wide)
    out = []
    host = doc.get("hostname")
    if not is_safe_name(host):
        out.append("host name unsafe in a shell (X02): the hostfile and the launch lines could not carry it")
    for f in _bad_findings(doc):
        if _finding_key(f) in shared:
            continue
        devices = ", ".join(str(d) for d in f.get("devices") or [])
        out.append(f"{f.get('rule')} {f.get('severity')}: {f.get('title')}" + (f" ({devices})" if devices else ""))
    return list(dict.fromkeys(out))


def _layout_wide(docs: Sequence[Mapping]) -> set[tuple]:
    """The CRIT/HIGH findings every host of a layout of two or more hosts shares."""
    if len(docs) < 2:
        return set()
    common = {_finding_key(f) for f in _bad_findings(docs[0])}
    for d in docs[1:]:
        common &= {_finding_key(f) for f in _bad_findings(d)}
    return common


def _gpus(doc: Mapping) -> list[Mapping]:
    gpus = [g for g in doc.get("gpus") or [] if g.get("name")]
    return sorted(gpus, key=lambda g: (g.get("index") if g.get("index") is not None else 1 << 30,
                                       natural_key(g["name"])))


# --- GPUs and NICs on one host -------------------------------------------------------------------


def choose_gpus(doc: Mapping, count: int) -> tuple[list[str], str]:
    """``count`` GPUs of a host and the group they come from, in words (see the module docstring).

    The GPUs are in index order; ``count`` must not exceed the host's GPU count."""
    names = [g["name"] for g in _gpus(doc)]
    if count >= len(names):
        return names, "every GPU of the host"
    nic_of = {r.get("gpu"): r.get("nic") for r in doc.get("gpu_nic") or []}
    order = {n: i for i, n in enumerate(names)}
    for group in doc.get("gpu_groups") or []:
        members = [g for g in group.get("gpus") or [] if g in order]
        if len(members) >= count:
            picked = _spread(sorted(members, key=order.__getitem__), count, nic_of)
            return sorted(picked, key=order.__getitem__), str(group.get("sentence") or "")
    groups = doc.get("gpu_groups") or []
    first = [g for g in (groups[0].get("gpus") if groups else []) or [] if g in order]
    picked = first + [n for n in names if n not in first]
    return sorted(picked[:count], key=order.__getitem__), (
        "no P2P group holds " + str(count) + " GPUs: " + (str(groups[0].get("sentence")) + " topped up in index order"
                                                           if groups else "the first GPUs in index order"))


def _spread(members: list[str], count: int, nic_of: Mapping) -> list[str]:
    """``count`` of ``members`` (in order), GPUs with a NIC not yet taken first."""
    picked, nics = [], set()
    for g in members:
        if len(picked) < count and nic_of.get(g) not in nics:
            picked.append(g)
            nics.add(nic_of.get(g))
    for g in members:
        if len(picked) < count and g not in picked:
            picked.append(g)
    return picked


def _nics_of(doc: Mapping, gpus: Iterable[str]) -> list[dict]:
    wanted = set(gpus)
    names: dict[str, None] = {}
    for r in doc.get("gpu_nic") or []:
        if r.get("gpu") in wanted:
            for n in (r.get("nics") or ([r["nic"]] if r.get("nic") else [])):
                names.setdefault(str(n), None)
    nics = [n for n in doc.get("nics") or [] if n.get("name") in names]
    return sorted(nics, key=lambda n: natural_key(str(n.get("name"))))


def _sub_document(doc: Mapping, gpus: Sequence[str]) -> dict:
    """The document as NCCL sees it with only ``gpus`` visible: the other GPUs and their pairs gone."""
    keep = set(gpus)
    return {**doc, "gpus": [g for g in doc.get("gpus") or [] if g.get("name") in keep],
            "gpu_pairs": [p for p in doc.get("gpu_pairs") or [] if p.get("a") in keep and p.get("b") in keep],
            "gpu_nic_matrix": [c for c in doc.get("gpu_nic_matrix") or [] if c.get("gpu") in keep]}


@dataclass
class _Host:
    doc: Mapping
    gpus: list[str]
    group: str
    nics: list[dict]
    hca: str
    leaves: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return str(self.doc.get("hostname"))


def _env(doc: Mapping, hca: str | None) -> dict[str, str]:
    env = {str(k): str(v) for k, v in (doc.get("nccl_env") or {}).items()}
    if hca:
        env["NCCL_IB_HCA"] = hca
    return env


# --- estimate ------------------------------------------------------------------------------------


@dataclass
class _Estimates:
    """Busbw per (layout, GPU set, NICs, nodes), so a fleet's hosts of one layout estimate once;
    ``full`` gives a host's whole document when the documents placed hold only ``PLACE_FIELDS``."""

    full: Callable[[str], Mapping] | None = None
    kept: dict = field(default_factory=dict)

    def host(self, doc: Mapping, gpus: Sequence[str], hca: str | None, nodes: int) -> tuple[float | None, str | None]:
        key = ((doc.get("summary") or {}).get("fingerprint") or doc.get("hostname"), tuple(gpus), hca, nodes)
        if key not in self.kept:
            whole = self.full(str(doc.get("hostname"))) if self.full is not None else doc
            pts = curve(_sub_document(whole, gpus), nodes, [PLATEAU_BYTES], env=_env(whole, hca))
            self.kept[key] = (pts[0]["busbw_gbs"], pts[0]["algo"]) if pts else (None, None)
        return self.kept[key]


def _job_estimate(est: _Estimates, hosts: Sequence[_Host], view: FabricView | None, nics_given: bool,
                  partial: bool = False) -> dict:
    """The job's busbw: its slowest host's estimate on ``len(hosts)`` nodes, over the fabric's
    leaf uplinks when known. ``partial``: hosts whose layout gives no figure are left out (listed
    in ``unknown_hosts``) instead of making the figure unknown."""
    n = len(hosts)
    per = [(h.name, *est.host(h.doc, h.gpus, h.hca if nics_given else None, n)) for h in hosts]
    known = [(bw, name, algo) for name, bw, algo in per if bw is not None]
    unknown = [name for name, bw, _a in per if bw is None]
    out = {"busbw_gbs": None, "host_busbw_gbs": None, "algorithm": None, "slowest_host": None,
           "demand_ratio": None, "worst_leaf": None, "fabric_limited": False, "unknown_hosts": unknown}
    if not known or (unknown and not partial):
        out["slowest_host"] = unknown[0] if unknown else None
        return out
    bw, slowest, algo = min(known)
    out.update(host_busbw_gbs=bw, busbw_gbs=bw, algorithm=algo, slowest_host=slowest)
    if view is not None and n > 1:
        docs = {h.name: {"hostname": h.name, "nics": h.nics if nics_given else h.doc.get("nics") or []}
                for h in hosts}
        c = job_contention(view, docs, [h.name for h in hosts], "tree" if algo and "tree" in algo else "ring")
        out["demand_ratio"], out["worst_leaf"] = c["demand_ratio"], c["worst_leaf"]
        if c["demand_ratio"] and c["demand_ratio"] > 1:
            out["busbw_gbs"] = round(bw / c["demand_ratio"], 2)
            out["fabric_limited"] = True
    return out


# --- the fabric ----------------------------------------------------------------------------------


def _leaf_name(view: FabricView, leaf: str) -> str:
    """A leaf's name as ``export slurm_topology`` writes it (the system name of ``MF0;<name>:<model>/U1``)."""
    names = view.memo("placement.switch_names", lambda: switch_names(view.graph))
    return names.get(leaf) or view.name(leaf)


def _leaves_of(view: FabricView, host: str, nics: Iterable[Mapping]) -> tuple[str, ...]:
    out = set()
    for n in nics:
        row = view.attachment(host, str(n.get("name")), n.get("port"))
        if row and row.get("leaf"):
            out.add(row["leaf"])
    return tuple(sorted(out))


def _switch_hops(view: FabricView, source: str) -> dict[str, int]:
    """Breadth-first switch hops from ``source`` over switch-to-switch links."""
    G = view.graph
    dist = {source: 0}
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for v in G.adj[u]:
            if v not in dist and G.nodes[v].get("type") == "switch":
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


def _by_fabric(view: FabricView, hosts: list[_Host], nodes: int) -> tuple[list[_Host], int | None]:
    """The hosts the job takes, leaf set by leaf set (module docstring, step 4), and the most switch
    hops between the first leaf set and another it takes (None: one leaf set)."""
    groups: dict[tuple, list[_Host]] = {}
    for h in hosts:
        groups.setdefault(h.leaves, []).append(h)
    attached = {k: v for k, v in groups.items() if k}
    unattached = groups.get((), [])
    loads = leaf_loads(view)

    def oversub(key: tuple) -> float:
        return max((loads.get(leaf, {}).get("oversubscription") or 0.0) for leaf in key)

    fits = [k for k, v in attached.items() if len(v) >= nodes]
    if fits:
        best = min(fits, key=lambda k: (len(attached[k]), oversub(k), natural_key(attached[k][0].name)))
        return attached[best][:nodes], None
    order = sorted(attached, key=lambda k: (-len(attached[k]), oversub(k), natural_key(attached[k][0].name)))
    if not order:
        return unattached[:nodes], None
    seed = order[0]
    hops = _switch_hops(view, seed[0])
    far = 1 << 20

    def distance(key: tuple) -> int:
        return min((hops.get(leaf, far) for leaf in key), default=far)

    rest = sorted(order[1:], key=lambda k: (distance(k), -len(attached[k]), oversub(k),
                                            natural_key(attached[k][0].name)))
    picked: list[_Host] = []
    max_hops = 0
    for key in [seed] + rest:
        if len(picked) >= nodes:
            break
        picked += attached[key][:nodes - len(picked)]
        if key != seed:
            max_hops = max(max_hops, distance(key))
    picked += unattached[:nodes - len(picked)]
    return picked, (max_hops if max_hops < far else None)


# --- the placement -------------------------------------------------------------------------------


def _lines(hosts: Sequence[_Host], gpus_per_node: int) -> dict:
    first = hosts[0].name
    torchrun = (f"torchrun --nnodes={len(hosts)} --nproc-per-node={gpus_per_node} --rdzv-backend=c10d "
                f"--rdzv-endpoint={first}:{RDZV_PORT} --rdzv-id=topoweb-place TRAIN_SCRIPT")
    cvd, hca, launch = {}, {}, {}
    for h in hosts:
        index = {g["name"]: g.get("index") for g in _gpus(h.doc)}
        cvd[h.name] = ",".join(str(index[g]) for g in h.gpus)
        hca[h.name] = h.hca
        env = f"CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={cvd[h.name]}"
        launch[h.name] = env + (f" NCCL_IB_HCA={h.hca}" if h.hca else "") + " " + torchrun
    return {"nodelist": hostlist(h.name for h in hosts),
            "hostfile": "".join(f"{h.name} slots={gpus_per_node}\n" for h in hosts),
            "cuda_visible_devices": cvd, "nccl_ib_hca": hca, "torchrun": torchrun, "launch": launch}


def _candidate(doc: Mapping, count: int, view: FabricView | None) -> _Host:
    gpus, group = choose_gpus(doc, count)
    nics = _nics_of(doc, gpus)
    host = _Host(doc, gpus, group, nics, ib_hca_value(nics))
    if view is not None:
        host.leaves = _leaves_of(view, host.name, nics)
    return host


def _not_enough(nodes: int, gpus_per_node: int, total: int, skipped: list[dict], best: int) -> PlacementError:
    why = Counter(s["reason"].split(":")[0] for s in skipped)
    excluded = ", ".join(f"{n} {r}" for r, n in why.most_common()) or "none"
    return PlacementError("nodes", f"not enough healthy hosts: the job needs {nodes} hosts of one layout with at "
                                   f"least {gpus_per_node} GPUs; the cluster has {total} hosts, {len(skipped)} "
                                   f"excluded ({excluded}); the largest layout has {best} healthy hosts")


def place(docs: Iterable[Mapping], *, nodes: int | None = None, gpus_per_node: int | None = None,
          gpus: int | None = None, view: FabricView | None = None, seed: int = RANDOM_SEED,
          full: Callable[[str], Mapping] | None = None) -> dict:
    """Place a job on a cluster's hosts (module docstring: the choice, the shape returned, the errors).

    Parameters
    ----------
    docs : the hosts' latest snapshot documents.
    nodes, gpus_per_node, gpus : the job (``job_shape``).
    view : the cluster's fabric with its hosts attached, when a discovery is stored.
    seed : the random placement's seed (stated in the answer).
    full : a host's whole document by host name, when ``docs`` hold only ``PLACE_FIELDS``.
    """
    docs = sorted((d for d in docs if d.get("hostname")), key=lambda d: natural_key(str(d["hostname"])))
    if not docs:
        raise PlacementError("cluster", "no host has reported: nothing to place on")
    most = max(len(_gpus(d)) for d in docs)
    n_req, g_req = job_shape(most, nodes=nodes, gpus_per_node=gpus_per_node, gpus=gpus)
    if gpus_per_node is not None and gpus_per_node > most:
        raise PlacementError("gpus_per_node", f"{gpus_per_node} GPUs per node, but no host has more than {most} GPUs")
    layouts: dict[str, list[Mapping]] = {}
    for d in docs:
        layouts.setdefault(str((d.get("summary") or {}).get("fingerprint") or d["hostname"]), []).append(d)
    skipped, healthy, notes, design = [], {}, [], {}
    for fp, members in layouts.items():
        shared = _layout_wide(members)
        for d in members:
            problems = host_problems(d, shared)
            if problems:
                skipped.append({"host": d["hostname"], "reason": "; ".join(problems)})
            else:
                healthy.setdefault(fp, []).append(d)
        if shared:
            design[fp] = ", ".join(sorted({f"{k[0]} {k[1]}" for k in shared}))
    est = _Estimates(full)
    best: tuple | None = None
    largest = 0
    for fp, members in healthy.items():
        host_gpus = len(_gpus(members[0]))
        n, g = job_shape(host_gpus, nodes=nodes, gpus_per_node=gpus_per_node, gpus=gpus)
        if g > host_gpus:
            skipped += [{"host": d["hostname"], "reason": f"too few GPUs: {host_gpus}, the job needs {g} per node"}
                        for d in members]
            continue
        largest = max(largest, len(members))
        if len(members) < n:
            continue
        cands = [_candidate(d, g, view) for d in members]
        picked, hops = _by_fabric(view, cands, n) if view is not None else (cands[:n], None)
        job = _job_estimate(est, picked, view, True)
        score = (job["busbw_gbs"] or 0.0, len(members), -len({lf for h in picked for lf in h.leaves}))
        if best is None or score > best[0]:
            best = (score, fp, members, picked, hops, job, g)
    skipped.sort(key=lambda s: natural_key(str(s["host"])))
    if best is None:
        raise _not_enough(n_req, g_req, len(docs), skipped, largest)
    _score, fp, members, picked, hops, job, g = best
    if fp in design:
        notes.append(f"every host of this layout has {design[fp]}: the layout's design, not a host's fault; "
                     "its hosts are kept and the estimate includes it")
    picked = _rank_order(picked)
    return _answer(docs, fp, members, picked, hops, job, g, view, est, seed, skipped, notes)


def _rank_order(hosts: list[_Host]) -> list[_Host]:
    first_of: dict[tuple, int] = {}
    for i, h in enumerate(hosts):
        first_of.setdefault(h.leaves, i)
    return sorted(hosts, key=lambda h: (first_of[h.leaves], natural_key(h.name)))


def _random(docs: Sequence[Mapping], nodes: int, count: int, view: FabricView | None, est: _Estimates,
            seed: int) -> dict:
    rng = random.Random(seed)
    pool = [d for d in docs if len(_gpus(d)) >= count]
    chosen = rng.sample(pool, nodes)
    hosts = []
    for d in chosen:
        names = [g["name"] for g in _gpus(d)]
        order = {n: i for i, n in enumerate(names)}
        gpus = sorted(rng.sample(names, count), key=order.__getitem__)
        nics = _nics_of(d, gpus)
        hosts.append(_Host(d, gpus, "random", nics, ib_hca_value(nics)))
    return {"seed": seed, "hosts": [h.name for h in hosts], "gpus": {h.name: h.gpus for h in hosts},
            **_job_estimate(est, hosts, view, True, partial=True)}


def _answer(docs: Sequence[Mapping], fp: str, members: Sequence[Mapping], picked: list[_Host], hops: int | None,
            job: dict, g: int, view: FabricView | None, est: _Estimates, seed: int, skipped: list[dict],
            notes: list[str]) -> dict:
    n = len(picked)
    rows, rank = [], 0
    for h in picked:
        leaves = [_leaf_name(view, lf) for lf in h.leaves] if view is not None else []
        rows.append({"host": h.name, "first_rank": rank, "gpus": h.gpus, "nics": [x["name"] for x in h.nics],
                     "nccl_ib_hca": h.hca, "leaves": leaves, "group": h.group})
        rank += len(h.gpus)
    lines = _lines(picked, g)
    for r in rows:
        r["cuda_visible_devices"] = lines["cuda_visible_devices"][r["host"]]
    rand = _random(docs, n, g, view, est, seed)
    used = sorted({_leaf_name(view, lf) for h in picked for lf in h.leaves}, key=natural_key) if view else []
    fabric = {"known": view is not None, "leaves": used,
              "leaf_sets": len({h.leaves for h in picked if h.leaves}), "max_hops": hops,
              "unattached": [h.name for h in picked if view is not None and not h.leaves]}
    if view is None:
        notes.append("no fabric discovery: hosts taken in name order; the estimates leave the fabric out")
    elif fabric["unattached"]:
        notes.append(f"{len(fabric['unattached'])} of the hosts have no NIC in the fabric discovery: their leaves "
                     "are unknown and their traffic is left out of the uplink demand")
    if any(len(h.gpus) < len(_gpus(h.doc)) for h in picked):
        notes.append("NCCL_IB_HCA keeps the job on its GPUs' own NICs, leaving the others to jobs on the other "
                     "GPUs; without it NCCL may spread the job's channels over every NIC of the host")
    if job["busbw_gbs"] is None:
        notes.append(f"no busbw estimate for this layout ({job['slowest_host']}'s report gives none)")
    return {"job": {"nodes": n, "gpus_per_node": g, "gpus": n * g},
            "layout": {"fingerprint": fp, "platform": f"{len(_gpus(members[0]))}x {_model(members[0])}",
                       "healthy_hosts": len(members)},
            "hosts": rows, **lines,
            "expected_busbw_gbs": job["busbw_gbs"], "expected": job,
            "random_busbw_gbs": rand["busbw_gbs"], "random": rand,
            "fabric": fabric, "skipped": skipped, "notes": notes}


def _model(doc: Mapping) -> str:
    summary = doc.get("summary") or {}
    return str(summary.get("gpu_model") or next((g.get("model") for g in _gpus(doc) if g.get("model")), None)
               or "GPU (model not reported)")


def render_text(result: Mapping) -> str:
    """The placement as ``manage.py place --format text`` prints it: what to paste, then the figures."""
    job, lay = result["job"], result["layout"]
    out = [f"# {job['nodes']} nodes x {job['gpus_per_node']} GPUs ({job['gpus']} ranks) on layout {lay['fingerprint']} "
           f"({lay['platform']}, {lay['healthy_hosts']} healthy hosts)",
           f"# Slurm: --nodelist={result['nodelist']}", "# hostfile:"]
    out += result["hostfile"].rstrip("\n").splitlines()
    out.append("# per host (rank order):")
    for h in result["hosts"]:
        where = f"  leaves {', '.join(h['leaves'])}" if h["leaves"] else ""
        out.append(f"# {h['host']}: ranks {h['first_rank']}-{h['first_rank'] + len(h['gpus']) - 1}, "
                   f"{', '.join(h['gpus'])}{where}")
        out.append(result["launch"][h["host"]])
    e, r = result["expected"], result["random"]
    out.append(f"# expected busbw: {_gbs(result['expected_busbw_gbs'])}" + _limited(e))
    out.append(f"# random placement (seed {r['seed']}): {_gbs(result['random_busbw_gbs'])}" + _limited(r)
               + (f"; leaves out {', '.join(r['unknown_hosts'])} (no estimate)" if r.get("unknown_hosts") else ""))
    for s in result["skipped"]:
        out.append(f"# skipped {s['host']}: {s['reason']}")
    out += [f"# note: {x}" for x in result["notes"]]
    return "\n".join(out) + "\n"


def _gbs(v: float | None) -> str:
    return "unknown" if v is None else f"{v:g} GB/s"


def _limited(e: Mapping) -> str:
    if e.get("fabric_limited"):
        return (f" (hosts {_gbs(e['host_busbw_gbs'])}, leaf {e['worst_leaf']} uplinks asked "
                f"{e['demand_ratio']:g}x their capacity)")
    return f" (slowest host {e['slowest_host']})" if e.get("slowest_host") and e.get("busbw_gbs") else ""

