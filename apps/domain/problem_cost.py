"""What a host's problems cost: the fraction of a bandwidth each finding takes away, times the GPUs
that lose it. The fleet home page ranks problems by this cost, summed over the hosts that have them.

Findings carry no cost of their own (``findings/base.py``: rule, severity, devices, message, fix,
source), so the cost is derived here, once, from the snapshot document (contract in
``apps/domain/analysis.py``): ``findings``, ``nics`` (``compute``, ``active``, ``rate_gbps``),
``summary.gpu_count`` and, for the two link rules, the host graph's ``edges``.

``cost = fraction x gpus`` in *GPU-equivalents*: one GPU losing all of the bandwidth named, or eight
GPUs losing an eighth of it, cost 1. Only findings of severity MED and above are problems; LOW and
INFO ones are notes, not losses. The models, each following what NCCL does (domain.md section 1):

``F01`` a compute port not Active: NCCL skips ports that are not ``IBV_PORT_ACTIVE`` and the node's
        inter-node bandwidth is the sum of its compute NICs (domain.md section 5), so one of N down
        takes 1/N of it, from every GPU of the node (CRIT when it was the only one: all of it). A port
        of a NIC that carries no GPU traffic (storage, management; the user's word first) costs none.
``F02`` a compute port trained below the others: ring throughput is set by the slowest rail, so the
        node runs every rail at that rate: 1 - rate / fastest, of inter-node bandwidth, every GPU.
``P06`` a GPU's PCIe link at a narrower width than it can train: 1 - width / max width of that
        GPU's PCIe bandwidth (its host and GPUDirect traffic), that GPU alone.
``N01`` a GPU with fewer NVLinks than its peers: 1 - links / the host's most, of NVLink
        bandwidth; every ring of the node goes through that GPU, so every GPU of the node.
``G01`` a NIC too far for GPUDirect RDMA: the host page's per-GPU figure (``verdict.gpu_rows``:
        the GPU's share of its NIC port, or less when the path staged in host memory is narrower,
        NCCL's path model) against its share of the port: 1 - figure / share, averaged over the
        GPUs named, of their network bandwidth. Where the port, not the staging path, is the limit
        the model loses nothing (the problem costs 0: latency and CPU copies, not bandwidth).
``G05`` GPUs sharing one NIC: the same per-GPU figure against a port of the GPU's own: 1 - figure
        / port, averaged over the GPUs named (8 GPUs on one port: 7/8 each).
        G01 and G05 read ``gpu_nic``; a document without it (or without the port's rate) falls back
        to the severity below.
other   rules with no bandwidth model (a fallback to sockets, an SM missing, mixed link layers, GDR
        kernel support missing, pairs through the CPU...): a fraction by severity (CRIT 1, HIGH 1/2, MED 1/4) of the
        bandwidth of the GPUs the finding names (every GPU of the host when it names none),
        marked ``estimated`` so the page says the figure comes from the severity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from apps.domain import verdict

PROBLEM_SEVERITIES = ("CRIT", "HIGH", "MED")
SEVERITY_FRACTION = {"CRIT": 1.0, "HIGH": 0.5, "MED": 0.25}
SEVERITY_RANK = {s: i for i, s in enumerate(PROBLEM_SEVERITIES)}
INTER_NODE, PCIE, NVLINK, BANDWIDTH = "inter-node bandwidth", "PCIe bandwidth", "NVLink bandwidth", "bandwidth"
NETWORK = "network bandwidth"  # a GPU's bandwidth through its NIC port (G01, G05)
LINK_RULES = frozenset({"P06", "N01"})  # the rules whose model reads the host graph's edges
NIC_RULES = frozenset({"G01", "G05"})  # the rules whose model reads the document's gpu_nic and nics
NON_COMPUTE_ROLES = frozenset({"storage", "management"})
NO_COST: dict = {}  # a finding that takes no GPU bandwidth (a storage port down): not a problem here


def needs_edges(findings: Iterable[Mapping]) -> bool:
    """Whether ``host_problems`` needs the graph's edges for these findings (read them only then)."""
    return any(f.get("rule") in LINK_RULES and f.get("severity") in PROBLEM_SEVERITIES for f in findings)


def needs_gpu_nic(findings: Iterable[Mapping]) -> bool:
    """Whether ``host_problems`` needs the document's ``gpu_nic`` for these findings."""
    return any(f.get("rule") in NIC_RULES and f.get("severity") in PROBLEM_SEVERITIES for f in findings)


def host_problems(doc: Mapping[str, Any], nic_roles: Mapping[str, Mapping] | None = None) -> list[dict]:
    """The problems of one snapshot, costliest first.

    ``doc``: the parts of a snapshot document this reads (``findings``, ``nics``, ``summary``, and
    ``graph.edges`` when ``needs_edges``, ``gpu_nic`` when ``needs_gpu_nic``); ``nic_roles``: ``Snapshot.nic_roles`` (a user's word on
    what a NIC carries wins over the engine's ``compute`` flag). Each problem is ``{"rule",
    "severity", "title", "devices", "what", "fraction", "of", "gpus", "cost", "estimated"}``:
    ``what`` names the problem without device names, so equal problems of several hosts group."""
    gpu_count = _gpu_count(doc)
    nics = [n for n in doc.get("nics") or [] if isinstance(n, Mapping)]
    compute = [n for n in nics if _is_compute(n, nic_roles or {})]
    edges = ((doc.get("graph") or {}).get("edges") or []) if isinstance(doc.get("graph"), Mapping) else []
    findings = [f for f in doc.get("findings") or []
                if isinstance(f, Mapping) and f.get("severity") in PROBLEM_SEVERITIES]
    ports_down = [f for f in findings if f.get("rule") == "F01"]
    if len(ports_down) > 1:  # one problem for all of a node's ports down: 2 of 8 down is 1/4
        worst = min(ports_down, key=lambda f: SEVERITY_RANK[f["severity"]])
        merged = {**worst, "devices": [d for f in ports_down for d in f.get("devices") or []]}
        findings = [f for f in findings if f.get("rule") != "F01"] + [merged]
    rows = verdict.gpu_rows(doc) if doc.get("gpu_nic") and needs_gpu_nic(findings) else []
    out: dict[tuple, dict] = {}
    for f in findings:
        p = _modelled(f, compute, edges, gpu_count)
        if p is None:
            p = _nic_modelled(f, rows)
        if p is None:
            p = _by_severity(f, doc, gpu_count)
        if p is NO_COST:
            continue
        key = (p["rule"], p["what"], p["fraction"], p["of"])
        if key in out:  # the same problem on several devices of the host (G01 per GPU): one, on their GPUs
            p = _merge(out[key], p, gpu_count)
        out[key] = p
    return sorted(out.values(), key=lambda p: (-p["cost"], SEVERITY_RANK[p["severity"]], p["rule"]))


def _merge(a: dict, b: dict, gpu_count: int) -> dict:
    devices = list(dict.fromkeys(a["devices"] + b["devices"]))
    gpus = a["gpus"]
    if a["gpus"] < gpu_count or b["gpus"] < gpu_count:
        named = {d for d in devices if d.startswith("GPU")}
        gpus = min(gpu_count, max(len(named), a["gpus"], b["gpus"])) if named else min(gpu_count, a["gpus"] + b["gpus"])
    sev = a["severity"] if SEVERITY_RANK[a["severity"]] <= SEVERITY_RANK[b["severity"]] else b["severity"]
    return {**a, "severity": sev, "devices": devices, "gpus": gpus, "cost": round(a["fraction"] * gpus, 4)}


def _problem(f: Mapping, what: str, fraction: float, of: str, gpus: int, estimated: bool = False) -> dict:
    fraction = max(0.0, min(1.0, float(fraction)))
    return {"rule": f.get("rule"), "severity": f.get("severity"), "title": f.get("title") or f.get("rule"),
            "devices": [str(d) for d in f.get("devices") or []], "what": what, "fraction": round(fraction, 4),
            "of": of, "gpus": int(gpus), "cost": round(fraction * gpus, 4), "estimated": estimated}


def _modelled(f: Mapping, compute: list[Mapping], edges: Sequence, gpu_count: int) -> dict | None:
    rule, devices = f.get("rule"), [str(d) for d in f.get("devices") or []]
    names = {str(n.get("name")) for n in compute}
    if rule == "F01":
        if not any(d in names for d in devices):
            return NO_COST if compute else _problem(f, "a port Down", 1.0, INTER_NODE, gpu_count)
        down = sum(1 for n in compute if str(n.get("name")) in devices)
        return _problem(f, "a compute port Down" if down == 1 else f"{down} compute ports Down",
                        down / len(compute), INTER_NODE, gpu_count)
    if rule == "F02":
        rates = [float(n["rate_gbps"]) for n in compute if n.get("active") and _num(n.get("rate_gbps"))]
        slow = [float(n["rate_gbps"]) for n in compute if str(n.get("name")) in devices and _num(n.get("rate_gbps"))]
        if rates and slow and max(rates) > 0:
            return _problem(f, f"a compute port at {_fmt(min(slow))} of {_fmt(max(rates))} Gb/s",
                            1 - min(slow) / max(rates), INTER_NODE, gpu_count)
    if rule == "P06":
        e = _gpu_edge(edges, devices, "pcie", lambda e: e.get("width") and e.get("max_width")
                      and e["width"] < e["max_width"])
        if e is not None:
            return _problem(f, f"a GPU link at x{e['width']} of x{e['max_width']}", 1 - e["width"] / e["max_width"],
                            PCIE, 1)
    if rule == "N01":
        links = [e.get("links") for e in edges if isinstance(e, Mapping) and e.get("kind") == "nvlink"
                 and _num(e.get("links"))]
        e = _gpu_edge(edges, devices, "nvlink", lambda e: _num(e.get("links")))
        if e is not None and links and max(links) > e["links"]:
            return _problem(f, f"a GPU with {e['links']} of {max(links)} NVLinks", 1 - e["links"] / max(links),
                            NVLINK, gpu_count)
    return None


def _nic_modelled(f: Mapping, rows: list[dict]) -> dict | None:
    """G01 and G05 by the host page's per-GPU figures (module docstring); None without them."""
    if f.get("rule") not in NIC_RULES:
        return None
    devices = {str(d) for d in f.get("devices") or []}
    mine = [r for r in rows if r["gpu"] in devices and r["effective_gbs"] is not None and r["port_gbs"]]
    if not mine:
        return None
    low = min(mine, key=lambda r: r["effective_gbs"])
    if f["rule"] == "G05":
        lost = [1 - r["effective_gbs"] / r["port_gbs"] for r in mine]
        return _problem(f, f"GPUs sharing a NIC: {_fmt(low['effective_gbs'])} GB/s each of the port's "
                           f"{_fmt(low['port_gbs'])} GB/s", sum(lost) / len(lost), NETWORK, len(mine))
    lost = [1 - r["path_gbs"] / r["share_gbs"] if r["limited_by"] == "path" else 0.0 for r in mine]
    if max(lost) == 0.0:
        return _problem(f, "GDR off, staged in host memory: no bandwidth lost, the NIC port is the limit", 0.0,
                        NETWORK, len(mine))
    return _problem(f, f"GDR off, staged in host memory at {_fmt(low['effective_gbs'])} of "
                       f"{_fmt(round(low['share_gbs'], 2))} GB/s", sum(lost) / len(lost), NETWORK, len(mine))


def _by_severity(f: Mapping, doc: Mapping, gpu_count: int) -> dict:
    gpu_names = {str(g.get("name")) for g in doc.get("gpus") or [] if isinstance(g, Mapping)}
    named = [d for d in f.get("devices") or [] if str(d) in gpu_names or str(d).startswith("GPU")]
    gpus = len(set(named)) or gpu_count
    return _problem(f, str(f.get("title") or f.get("rule")), SEVERITY_FRACTION[f["severity"]], BANDWIDTH, gpus,
                    estimated=True)


def _gpu_edge(edges: Sequence, devices: list[str], kind: str, pick) -> Mapping | None:
    """The edge of ``kind`` touching one of the GPUs in ``devices`` that ``pick`` accepts (the
    narrowest first)."""
    found = [e for e in edges if isinstance(e, Mapping) and e.get("kind") == kind
             and ({str(e.get("source")), str(e.get("target"))} & set(devices)) and pick(e)]
    key = (lambda e: e.get("width") or 0) if kind == "pcie" else (lambda e: e.get("links") or 0)
    return min(found, key=key) if found else None


def _is_compute(nic: Mapping, roles: Mapping[str, Mapping]) -> bool:
    said = (roles.get(str(nic.get("name"))) or {}).get("role")
    if said:
        return said not in NON_COMPUTE_ROLES
    return bool(nic.get("compute"))


def _gpu_count(doc: Mapping) -> int:
    n = (doc.get("summary") or {}).get("gpu_count") if isinstance(doc.get("summary"), Mapping) else None
    if _num(n):
        return int(n)
    return len(doc.get("gpus") or [])


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _fmt(v: float) -> str:
    return f"{v:g}"


def fraction_text(fraction: float) -> str:
    """``0.125`` -> ``"1/8"``, ``0.5`` -> ``"1/2"``, ``1`` -> ``"all"``, ``0.37`` -> ``"37%"``: a
    simple fraction when one with a denominator up to 16 is within half a percent, else percent."""
    if fraction >= 0.9995:
        return "all"
    near = Fraction(fraction).limit_denominator(16)
    if near.numerator and abs(float(near) - fraction) < 0.005:
        return f"{near.numerator}/{near.denominator}"
    return f"{fraction * 100:.0f}%"


def problem_sentence(p: Mapping, hosts: int = 1) -> str:
    """``"a compute port Down -> 1/8 of inter-node bandwidth"`` (``"each"`` added for several hosts);
    the GPUs affected follow when fewer than the host's."""
    gpus = f" of {p['gpus']} GPU{'s' if p['gpus'] != 1 else ''}" if p.get("of") != INTER_NODE else ""
    tail = " (estimated from its severity)" if p.get("estimated") else ""
    each = " each" if hosts > 1 else ""
    return f"{p['what']} -> {fraction_text(p['fraction'])} of {p['of']}{gpus}{each}{tail}"


def rank_fleet(hosts: Iterable[tuple[Any, list[dict]]], limit: int | None = None) -> list[dict]:
    """Group equal problems across hosts and rank the groups by total cost (GPU-equivalents).

    ``hosts``: (host key, its ``host_problems``) pairs; problems are equal when rule, ``what``,
    fraction, bandwidth and GPU count are. Each group: ``{"rule", "severity", "title", "what",
    "fraction", "of", "gpus", "estimated", "hosts": [(host key, devices)], "cost", "sentence"}``,
    costliest first, then by severity and by the number of hosts."""
    groups: dict[tuple, dict] = {}
    for key, problems in hosts:
        for p in problems:
            gk = (p["rule"], p["what"], p["fraction"], p["of"], p["gpus"])
            g = groups.get(gk)
            if g is None:
                g = groups[gk] = {k: p[k] for k in ("rule", "severity", "title", "what", "fraction", "of", "gpus",
                                                    "estimated")} | {"hosts": [], "cost": 0.0}
            elif SEVERITY_RANK[p["severity"]] < SEVERITY_RANK[g["severity"]]:
                g["severity"] = p["severity"]
            g["hosts"].append((key, p["devices"]))
            g["cost"] += p["cost"]
    ranked = sorted(groups.values(), key=lambda g: (-g["cost"], SEVERITY_RANK[g["severity"]], -len(g["hosts"]),
                                                    g["rule"], g["what"]))
    for g in ranked:
        g["cost"] = round(g["cost"], 4)
        g["sentence"] = problem_sentence(g, len(g["hosts"]))
    return ranked[:limit] if limit is not None else ranked
