"""Run causes across hosts and sizes: above the estimate (T9 on 2 nodes, R07 otherwise), one host's
layout slower than the others' (T10), results that move within one run (T6) and mixed NCCL
versions (R05). The same shape measured on several host sets is ``apps.domain.run_fleet``."""

from __future__ import annotations

from apps.domain.compare import compare_docs
from apps.domain.run_facts import RunFacts, finding, first_lines, multi_node, per_host_values

__all__ = ["rule_t9_r07", "rule_t10", "rule_t6", "rule_r05"]


def rule_t9_r07(facts: RunFacts) -> list[dict]:
    """Above the estimate: a 2-node all-reduce above the NIC sum (T9), else NVLS/CollNet, or a run
    that was not made on the layout it was given (R07)."""
    e, m = facts.expected or {}, facts.measured or {}
    if facts.efficiency is None:
        return []
    nic_sum = e.get("b_node_gbs")
    if (facts.kind == "nccl_tests" and facts.nodes == 2 and facts.collective in ("all_reduce", None) and nic_sum
            and m.get("value", 0) > nic_sum):
        ev = [facts.cite(m.get("line"), f"{m['value']:.1f} GB/s on 2 nodes is above the {nic_sum:.0f} GB/s NIC sum "
                         "of a node", "T9")]
        return [finding("T9", "INFO", "2-node result above the NIC sum (tree / NVLS-tree)",
                        "On 2 nodes NCCL's tree and NVLS-tree algorithms move less data per node than a ring, so "
                        "busbw can exceed what a node's NICs carry (unless NCCL_ALGO=Ring was set, when the layout's "
                        "NIC figure is low); it drops from 4 nodes.",
                        "Compare with NCCL_ALGO=Ring, or with 4+ nodes, before sizing a job on this figure.", ev)]
    if facts.efficiency <= 1.1:
        return []
    ev = [facts.cite(m.get("line"), f"{m['value']:.1f} {m.get('unit')} is {facts.efficiency:.0%} of the layout's "
                     "figure", "R07")]
    if facts.kind == "nccl_tests":
        return [finding("R07", "LOW", "Above the estimate (NVLS, CollNet/SHARP, or the layout differs)",
                        "The run beats the model: NVLink SHARP (NVLS) or in-network reduction (CollNet/SHARP) "
                        "moves less data than a ring, or the layout reported is not the one the run used.",
                        "Record NCCL's algorithm (NCCL_DEBUG_SUBSYS=TUNING) with the result; compare with "
                        "NCCL_ALGO=Ring.", ev)]
    return [finding("R07", "MED", "Above what the layout allows: another host or device?",
                    f"The run measured more than the layout's {e.get('limit') or 'figure'} allows: it was most "
                    "likely made on another host, NIC or GPU than the one it is checked against.",
                    "Check which host the run was attached to and the device it names (perftest -d, --use_cuda=N).",
                    ev)]


def rule_t10(facts: RunFacts) -> list[dict]:
    """One host's layout slower than the others': a lower plateau, a lower NIC sum, link and port
    findings the others lack (P06, F01, F02, N02), or narrower links, with what differs
    (``compare_docs``)."""
    rated = {h: e for h, e in facts.per_host.items() if e.get("plateau") or e.get("b_node_gbs")}
    if len(rated) < 2:
        return []
    plateau = {h: e["plateau"] for h, e in rated.items() if e.get("plateau")}
    nic_sum = {h: e["b_node_gbs"] for h, e in rated.items() if e.get("b_node_gbs")} if multi_node(facts) else {}
    slow, severity, figure = None, "MED", ""
    if len(plateau) > 1 and min(plateau.values()) < 0.9 * max(plateau.values()):
        slow = min(plateau, key=plateau.get)
        severity = "HIGH"
        figure = f"its layout gives {plateau[slow]:.1f} GB/s where the others give up to {max(plateau.values()):.1f}"
    elif len(nic_sum) > 1 and min(nic_sum.values()) < 0.9 * max(nic_sum.values()):
        slow = min(nic_sum, key=nic_sum.get)
        figure = (f"its NICs carry {nic_sum[slow]:.1f} GB/s where the others' carry up to {max(nic_sum.values()):.1f} "
                  "(not the bound of this run's estimate, but every job that needs its NICs waits for them)")
    own = _findings_only_on(facts, slow) if slow else []
    if slow is None:
        for host in rated:
            own = [f for f in _findings_only_on(facts, host) if f.get("rule") in ("P06", "F01", "F02", "N02")]
            if own:
                slow, figure = host, "its layout has link or port findings the other hosts lack"
                break
    narrower = _narrower_links(facts, list(rated)) if slow is None else None
    if narrower is not None:
        slow, reference, differs = narrower
        figure = "its layout has narrower links than the others'"
    if slow is None:
        return []
    if narrower is None:
        reference = max((h for h in rated if h != slow), key=lambda h: plateau.get(h) or nic_sum.get(h) or 0)
        differs = compare_docs(facts.doc(reference), facts.doc(slow)).get("summary") or []
    lines = [r["line_no"] for r in facts.parsed.get("ranks") or [] if r.get("host") == slow][:1]
    lines += [c["line_no"] for c in (facts.log or {}).get("connections") or [] if c.get("host") == slow][:1]
    ev = [facts.cite(n, f"{slow} takes part in this run", "T10") for n in lines]
    what = "; ".join(differs[:3]) or "; ".join(f"{f['rule']} {f.get('title')}" for f in own[:3]) or "a different layout"
    return [finding("T10", severity, "One host slower than the others",
                    f"{slow}: {figure}. Compared with {reference}: {what}.",
                    f"Fix or drain {slow}; compare it with its layout's norm (cluster page) and run the same test with "
                    "and without it.", ev, hosts=[slow],
                    layout=[{"host": slow, "rule": f["rule"], "severity": f.get("severity"), "title": f.get("title")}
                             for f in own[:5]])]


def _narrower_links(facts: RunFacts, hosts: list[str]) -> tuple[str, str, list[str]] | None:
    """(host, reference host, what differs) for a host whose layout has a PCIe or NVLink link
    narrower than the same link of another host's layout (``compare_docs``), one comparison per
    distinct layout; None when every layout has the same links."""
    firsts: dict[str, str] = {}
    for h in hosts:
        firsts.setdefault(str((facts.doc(h).get("summary") or {}).get("fingerprint") or h), h)
    layouts = list(firsts.values())
    for ref in layouts:
        for other in layouts:
            if other == ref:
                continue
            diff = compare_docs(facts.doc(ref), facts.doc(other))
            slower = [x for x in diff.get("links") or [] if x.get("before_gbs") and x.get("after_gbs")
                      and x["after_gbs"] < 0.9 * x["before_gbs"]]
            if slower:
                return other, ref, diff.get("summary") or [f"{x['device']} link {x['before']} -> {x['after']}"
                                                           for x in slower]
    return None


def _findings_only_on(facts: RunFacts, host: str) -> list[dict]:
    """The findings of ``host``'s layout that no other known host of the run has (rule and devices)."""
    others = [h["host"] for h in facts.known() if h["host"] != host]
    theirs = {(f.get("rule"), tuple(f.get("devices") or ())) for h in others for f in facts.doc(h).get("findings") or []}
    return [f for f in facts.doc(host).get("findings") or []
            if (f.get("rule"), tuple(f.get("devices") or ())) not in theirs and f.get("severity") != "INFO"]


def rule_t6(facts: RunFacts) -> list[dict]:
    """Results that move: large-message busbw dropping between sizes, perftest peaks far above averages."""
    ev: list[int] = []
    if facts.kind == "nccl_tests":
        best: dict[tuple, float] = {}  # per data type and operation: --datatype all prints several
        for r in facts.parsed.get("rows") or []:
            v = ((r.get("out_of_place") or {}).get("busbw_gbs"))
            key = (r.get("type"), r.get("redop"))
            if v is None or r["size_bytes"] < (64 << 20):
                continue
            if best.get(key) and v < 0.75 * best[key] and len(ev) < 2:
                ev.append(facts.cite(r["line_no"], f"busbw fell to {v:.1f} GB/s after {best[key]:.1f} at a smaller "
                                     "size", "T6"))
            best[key] = max(best.get(key, 0.0), v)
    if facts.kind == "perftest":
        for r in facts.parsed.get("rows") or []:
            if (r["bytes"] >= 65536 and r.get("bw_peak_gbit") and r["bw_avg_gbit"]
                    and r["bw_peak_gbit"] > 1.3 * r["bw_avg_gbit"] and len(ev) < 2):
                ev.append(facts.cite(r["line_no"], f"peak {r['bw_peak_gbit']:.1f} Gb/s against an average of "
                                     f"{r['bw_avg_gbit']:.1f}", "T6"))
    if not ev:
        return []
    return [finding("T6", "MED", "Results that move (background traffic or congestion)",
                    "The figures fall and recover within one run: other traffic shares the fabric, or congestion "
                    "control is missing.", "Run again at a quiet hour and several times; RoCE congestion control "
                    "(DCQCN), separate traffic classes for storage/SSH/monitoring.", ev)]


def rule_r05(facts: RunFacts) -> list[dict]:
    """Mixed NCCL versions: nccl-tests built against other headers, or hosts on different versions."""
    ev: list[int] = []
    p = facts.parsed
    if facts.kind == "nccl_tests" and p.get("nccl_headers") and p.get("nccl_library") and \
            p["nccl_headers"] != p["nccl_library"]:
        ev += [facts.cite(n, f"built with NCCL headers {p['nccl_headers']}, running library {p['nccl_library']}",
                          "R05") for n in facts.find_lines(r"nccl-headers=", 1)]
    versions = per_host_values(facts, r"NCCL INFO NCCL version (\d+\.\d+\.\d+)", "NCCL version")
    if len({v for v, _ in versions.values()}) > 1:
        ev += [facts.cite(n, f"{h} runs NCCL {v}", "R05") for h, (v, n) in first_lines(versions).items()]
    if not ev:
        return []
    return [finding("R05", "MED", "Mixed NCCL versions",
                    "Not every process runs the same NCCL: protocols and tuning differ between versions, and "
                    "mismatches fail or slow down at init.", "Use one NCCL build on every node (the same container "
                    "image); rebuild nccl-tests against the NCCL it runs with.", ev)]
