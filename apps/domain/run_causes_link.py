"""Run causes of one link: perftest under 90 % of the line rate on RoCE (T1) or InfiniBand (R01),
``--use_cuda`` slower than host memory (R04) and the RoCE GID index or routing (T8). T1, R01 and
T8 also quote the hosts' own report sections (``apps.domain.run_node``: ethtool -S pause and
discard counters, the RDMA port counters, show_gids)."""

from __future__ import annotations

import re

from apps.domain.run_facts import RunFacts, finding, first_lines, per_host_values, size_text
from apps.domain.run_node import (
    LINK_GROUPS, ROCE_GROUPS, cite_readings, counter_evidence, counter_words, gid_evidence, layout_ties, run_cas,
    troubled,
)

__all__ = ["rule_t1_r01", "rule_r04", "rule_t8"]


_QP_RE = re.compile(r"ibv_modify_qp|\bGID\b|no route|address resolution|rdma_resolve", re.I)


def rule_t1_r01(facts: RunFacts) -> list[dict]:
    """perftest under 90 % of the line rate: RoCE packet loss (T1); IB cable, PCIe width, NUMA (R01)."""
    if facts.kind != "perftest" or facts.efficiency is None or facts.efficiency >= 0.9:
        return []
    e, m = facts.expected, facts.measured
    roce = (m.get("link_type") or "").lower() == "ethernet" or (e.get("link_layer") or "") == "Ethernet"
    rule = "T1" if roce else "R01"
    ev = [facts.cite(m.get("line"), f"{m['value']:.1f} Gb/s at {size_text(m.get('size_bytes'))}: "
                     f"{facts.efficiency:.0%} of the {e['value']:.0f} Gb/s the port and its path give", rule)]
    ev += [facts.cite(n, "RoCE: RDMA over Ethernet needs a lossless class (PFC/ECN) on every switch port" if roce
                      else "InfiniBand port", rule) for n in facts.find_lines(r"Link type\s*:", 1)]
    host = e.get("host")
    nic = e.get("nic") or facts.parsed.get("device")
    layout = facts.layout_findings(host, ("F01", "F02", "F03", "P06", "H02"), {nic or ""})
    # the port's own counters in the host's report (ethtool -S, ib_counters): what the loss looks like there
    readings = counter_evidence(facts, host, {nic} if nic else None, (ROCE_GROUPS | LINK_GROUPS) if roce else LINK_GROUPS)
    ev += cite_readings(facts, readings, rule)
    layout += [x for x in layout_ties(facts, host, readings) if x not in layout]
    counted = (f" {host}'s report shows it on {nic}: {counter_words(readings)}." if readings else "")
    if roce:
        return [finding("T1", "HIGH", "RoCE bandwidth well below line rate",
                        f"{m['value']:.1f} Gb/s is {facts.efficiency:.0%} of {e['value']:.0f} Gb/s on a RoCE port: "
                        "the usual cause is packet loss (PFC off or misconfigured on the switch), then the port's "
                        "rate or PCIe link. Pause/discard counters (ethtool -S: rx_pause, rx_discards_phy) show it."
                        + counted,
                        "Configure PFC/ECN (DCQCN) on the lossless class; check the switch QoS/ACL policy (sampling or "
                        "policing RoCE traffic breaks PFC); compare ethtool -S counters before and after a run.",
                        ev, hosts=[host], layout=layout)]
    return [finding("R01", "HIGH", "InfiniBand bandwidth below line rate",
                    f"{m['value']:.1f} Gb/s is {facts.efficiency:.0%} of {e['value']:.0f} Gb/s: a cable or port trained "
                    "lower, a NIC PCIe link below its width, or the test on the far NUMA node." + counted,
                    "Check ibstat Rate and the port error counters, lspci LnkSta of the HCA, and run perftest pinned "
                    "to the NIC's NUMA node (numactl -N).", ev, hosts=[host], layout=layout)]


def rule_r04(facts: RunFacts) -> list[dict]:
    """``--use_cuda`` below host memory: the GPU -> NIC path crosses the CPU (no GPUDirect RDMA)."""
    if facts.kind != "perftest" or not facts.parsed.get("cuda") or not facts.measured:
        return []
    path = (facts.expected or {}).get("gpu_path") or {}
    base = (facts.baseline or {}).get("measured") or {}
    ev: list[int] = []
    slower = base.get("value") and facts.measured["value"] < 0.9 * base["value"]
    if slower:
        ev.append(facts.cite(facts.measured.get("line"), f"{facts.measured['value']:.1f} Gb/s from GPU memory against "
                             f"{base['value']:.1f} Gb/s from host memory on the same NIC", "R04"))
    if path and path.get("gdr") is False:
        ev += [facts.cite(n, f"GPU memory: the layout gives {path.get('gpu')} -> the NIC {path.get('path_class')}, "
                          "no GPUDirect RDMA", "R04") for n in facts.find_lines(r"cuMemAlloc|initializing CUDA|"
                                                                                r"use_cuda", 1)] or [
            facts.cite(facts.measured.get("line"), "GPU memory over a path without GPUDirect RDMA", "R04")]
    if not ev:
        return []
    host = (facts.expected or {}).get("host")
    return [finding("R04", "HIGH" if slower else "MED", "--use_cuda slower than host memory",
                    "From GPU memory the NIC reads through the CPU: "
                    + (f"the layout's {path.get('gpu')} -> NIC path is {path.get('path_class')} (GPUDirect RDMA off, "
                        "G01)" if path.get("gdr") is False else "GPUDirect RDMA is not working (peer-memory module)")
                    + ".", "Use the NIC on the GPU's PCIe switch (the host page's GPU x NIC matrix), load "
                    "nvidia_peermem or use --use_cuda_dmabuf.", ev, hosts=[host],
                    layout=facts.layout_findings(host, ("G01", "G02", "H02")))]


def rule_t8(facts: RunFacts) -> list[dict]:
    """RoCE GID index and routing: link-local GIDs, QP connection failures, indexes that differ."""
    ev: list[int] = []
    why = []
    p = facts.parsed
    if facts.kind == "perftest" and (p.get("link_type") or "").lower() == "ethernet":
        if p.get("gid_index") in (0, 1):
            ev += [facts.cite(n, f"GID index {p['gid_index']}: a link-local GID (fe80::), RoCE v1 or v2 without IPv4",
                              "T8") for n in facts.find_lines(r"GID index\s*:", 1)]
            why.append(f"GID index {p['gid_index']} is link-local: it works inside one L2 segment only")
        if p.get("local") and p["local"].get("gid") and not p["local"].get("ip"):
            ev += [facts.cite(n, "the local GID is not an IPv4-mapped RoCE v2 address", "T8")
                   for n in facts.find_lines(r"^\s*GID:", 1)]
    log = facts.log
    if log:
        qp = [e for e in log.get("errors") or [] if _QP_RE.search(e.get("text") or "")]
        ev += [facts.cite(e["line_no"], "a queue pair could not be connected: wrong GID index or no route", "T8",
                          e.get("text", "")) for e in qp[:2]]
        if qp:
            why.append("NCCL could not connect its queue pairs")
        per_host = per_host_values(facts, r"NCCL_IB_GID_INDEX set by environment to (\d+)", "NCCL_IB_GID_INDEX")
        if len({v for v, _ in per_host.values()}) > 1:
            ev += [facts.cite(n, f"{h}: NCCL_IB_GID_INDEX={v}", "T8") for h, (v, n) in first_lines(per_host).items()]
            why.append("the hosts use different GID indexes")
    node_ev, node_why, hosts, layout = _gid_tables(facts)
    if not ev and not (node_ev and troubled(facts)):
        return []
    ev += node_ev
    why += node_why
    return [finding("T8", "HIGH" if node_ev and ev != node_ev else "MED", "RoCE GID index or routing",
                    _sentence("; ".join(why)) + " (RoCE works between some nodes only when GIDs or routes differ)."
                    if why else "RoCE addressing may not match across nodes.",
                    "Use the RoCE v2 IPv4 GID (often index 3, see show_gids) on every node, NCCL_IB_GID_INDEX the "
                    "same everywhere; static routes per NIC across subnets.", ev, hosts=hosts, layout=layout)]


def _sentence(text: str) -> str:
    """``text`` with its first letter capitalised and the rest as written (``NCCL`` stays ``NCCL``)."""
    return text[:1].upper() + text[1:]


def _gid_index_in_use(facts: RunFacts, host: str) -> int | None:
    """The GID index the run used on ``host``: its log's NCCL_IB_GID_INDEX (that host's line, else the
    setting), perftest's ``GID index``, else the host's NCCL environment; None: NCCL chooses."""
    values = per_host_values(facts, r"NCCL_IB_GID_INDEX set by environment to (\d+)", "NCCL_IB_GID_INDEX")
    candidates = [values.get(host, (None,))[0], ((facts.log or {}).get("settings") or {}).get("NCCL_IB_GID_INDEX")]
    if facts.kind == "perftest":
        candidates.append(facts.parsed.get("gid_index"))
    candidates.append((facts.doc(host).get("nccl_env") or {}).get("NCCL_IB_GID_INDEX"))
    for value in candidates:
        if value is not None and str(value).strip().isdigit():
            return int(str(value).strip())
    return None


def _gid_tables(facts: RunFacts) -> tuple[list[int], list[str], list[str], list[dict]]:
    """(evidence, reasons, hosts, layout findings) from the hosts' show_gids: each RoCE port the run
    used whose GID at the index in use is not RoCE v2 IPv4, or that has no such GID (F05)."""
    ev: list[int] = []
    why: list[str] = []
    hosts: list[str] = []
    layout: list[dict] = []
    for h in facts.known():
        host = h["host"]
        if host not in facts.node_evidence:
            continue
        index = _gid_index_in_use(facts, host)
        for ca in sorted(run_cas(facts, host) or []):
            problem, rows = gid_evidence(facts, host, ca, index)
            if not problem:
                continue
            means = (f"show_gids of {host}: {problem}" + (f" (GID index {index} in use)" if index is not None else
                                                           " (NCCL_IB_GID_INDEX unset: NCCL looks for RoCE v2 IPv4)"))
            ev += [facts.quote(file, no, text, means, "T8") for file, no, text in rows]
            why.append(f"{host}: {problem}")
            hosts.append(host)
            layout += [x for x in facts.layout_findings(host, ("F05",), {ca}) if x not in layout]
    return ev, why, hosts, layout
