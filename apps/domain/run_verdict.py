"""The verdict of a checked run and its one-sentence reason.

``broken`` for wrong values, failed tests and errors (a finding that ``breaks``), or below 50 % of
expected; ``not_comparable`` (the reason says which) for one rank, processes that each ran alone
(every "Using devices" line ``Rank 0`` with ``nGpus 1``: nccl-tests built without MPI), hosts
topoweb does not know, a layout that cannot give a figure, or sizes that never leave the latency
regime; else ``healthy`` at or above 85 % of expected at large messages (perftest: 90 % of the
line rate, the field guide's bar) and ``below_expected`` between."""

from __future__ import annotations

from apps.domain.run_facts import RunFacts, size_text

__all__ = ["VERDICTS", "HEALTHY_AT", "PERFTEST_HEALTHY_AT", "BROKEN_BELOW", "LATENCY_BOUND", "efficiency", "verdict"]


VERDICTS = ("healthy", "below_expected", "broken", "not_comparable")
HEALTHY_AT = 0.85  # of expected at large messages (the bar; ETA already in the estimate)
PERFTEST_HEALTHY_AT = 0.90  # of the line rate: RDMA write reaches ~95 % (domain.md 7, T1 below 90 %)
BROKEN_BELOW = 0.50
LATENCY_BOUND = 0.70  # the largest size's expected busbw under 70 % of the plateau: still latency-bound


def _nccl_tests_not_comparable(facts: RunFacts) -> str | None:
    """Why an nccl-tests result cannot be compared with a layout, or None."""
    parsed = facts.parsed
    alone = facts.rank_zero_lines()
    if alone and (parsed.get("ngpus_per_process") in (None, 1)):
        return (f"every process printed itself as Rank 0 with nGpus 1 ({len(alone) + 1} processes): nccl-tests was "
                "built without MPI (make MPI=1), so each process ran alone on one GPU and the figures are not a "
                f"{len(alone) + 1}-rank collective")
    if parsed.get("nranks") == 1 or (facts.nodes == 1 and facts.ranks_per_node == 1):
        return ("one rank: a single GPU moves no data between GPUs, so busbw (and a single-GPU reduce's in-place "
                "figure) means nothing; run one rank per GPU (-g N, or mpirun -np N)")
    if facts.measured is None:
        return "no result rows: the output was cut before the table (see the warnings)"
    if not any(h["known"] for h in facts.hosts):
        names = [h["host"] for h in facts.hosts if h["host"]]
        return ((f"hosts unknown to topoweb ({', '.join(names)})" if names else "the output names no host") +
                ": send their reports (the agent, or paste nvidia-smi topo -m and ibstat) so their layout is known")
    return None


def _latency_bound(facts: RunFacts) -> str | None:
    e = facts.expected or {}
    largest = (facts.measured or {}).get("largest_size_bytes")
    at = (e.get("curve") or {}).get(largest)
    if at is not None and e.get("plateau") and at < LATENCY_BOUND * e["plateau"]:
        return (f"sizes too small: the largest message ({size_text(largest)}) is still latency-bound (expected "
                f"{at:.1f} GB/s there, {at / e['plateau']:.0%} of the {e['plateau']:.1f} GB/s plateau); run up to "
                "at least 1 GiB (-e 8G)")
    return None


def efficiency(facts: RunFacts) -> float | None:
    m, e = facts.measured, facts.expected
    if not m or not e:
        return None
    at = (e.get("curve") or {}).get(m.get("size_bytes"))
    value = at if at is not None else e.get("plateau")
    if not value:
        return None
    e["value"], e["size_bytes"] = value, m.get("size_bytes")
    return round(m["value"] / value, 3)


def verdict(facts: RunFacts, findings: list[dict]) -> tuple[str, str]:
    """(verdict, reason sentence)."""
    broken = [f for f in findings if f.get("breaks")]
    if broken:
        return "broken", broken[0]["message"]
    if facts.kind == "nccl_tests":
        why = _nccl_tests_not_comparable(facts)
        if why:
            return "not_comparable", why[0].upper() + why[1:] + "."
    if facts.kind == "nccl_log":
        return _log_verdict(facts, findings)
    if facts.measured is None:
        return "not_comparable", "Nothing was measured: the output holds no result rows (see the warnings)."
    if facts.expected is None or facts.efficiency is None:
        names = [h["host"] for h in facts.hosts if h["host"]]
        if not any(h["known"] for h in facts.hosts):
            what = f"the hosts ({', '.join(names)}) are unknown to topoweb" if names else \
                "the host it ran on was not given (say which host, or attach it with the agent)"
            return "not_comparable", f"Not comparable: {what}, so there is no layout to compare with."
        notes = (facts.expected or {}).get("notes") or facts.notes
        return "not_comparable", ("Not comparable: the layout gives no expected figure" +
                                  (f" ({notes[-1]})" if notes else "") + ".")
    too_small = _latency_bound(facts) if facts.kind == "nccl_tests" else None
    if too_small:
        return "not_comparable", too_small[0].upper() + too_small[1:] + "."
    bar = PERFTEST_HEALTHY_AT if facts.kind == "perftest" else HEALTHY_AT
    eff = facts.efficiency
    verdict = "healthy" if eff >= bar else "broken" if eff < BROKEN_BELOW else "below_expected"
    return verdict, _numbers_sentence(facts, verdict, findings)


def _log_verdict(facts: RunFacts, findings: list[dict]) -> tuple[str, str]:
    capping = [f for f in findings if f["severity"] in ("CRIT", "HIGH")]
    if capping:
        return "below_expected", (f"The log shows what keeps the job below its layout: {capping[0]['title']} "
                                  f"({capping[0]['rule']}).")
    if not any(h["known"] for h in facts.hosts):
        return "not_comparable", ("Not comparable: the hosts in this log are unknown to topoweb; the evidence below "
                                  "reads the log alone.")
    e = facts.expected or {}
    allows = (f"; the layout allows {e['plateau']:.1f} GB/s busbw for {facts.nodes} node(s) (limit: {e.get('limit')})"
              if e.get("plateau") else "")
    return "healthy", ("NCCL's connections use what the layout offers (transports, GPUDirect RDMA and NICs)" + allows +
                       "; an NCCL log holds no bandwidth figure, so attach the nccl-tests output to compare numbers.")


def _numbers_sentence(facts: RunFacts, verdict: str, findings: list[dict]) -> str:
    m, e = facts.measured, facts.expected
    unit = m["unit"]
    shape = ""
    if facts.kind == "nccl_tests":
        shape = f" for {facts.nodes} node{'s' if facts.nodes != 1 else ''} x {facts.ranks_per_node} GPUs"
    bound = ""
    if e.get("host"):
        who = e.get("layout_host") or e["host"]
        bound = f" of {who}" + (f" ({e['host']} in the run)" if who != e["host"] else "")
    text = (f"{m['value']:.1f} {unit} ({m['what']}) is {facts.efficiency:.0%} of the {e['value']:.1f} {unit} "
            f"expected{shape} from the layout{bound} (limit: {e.get('limit') or 'unknown'})")
    words = {"healthy": "healthy", "below_expected": "below expected", "broken": "broken"}[verdict]
    causes = [f for f in findings if f["severity"] in ("CRIT", "HIGH", "MED")]
    if verdict == "healthy":
        note = next((f for f in findings if f["rule"] in ("T9", "R07")), None)
        return f"{text}: {words}" + (f"; {note['title']} ({note['rule']})." if note else ".")
    if causes:
        title = causes[0]["title"]
        if title[1:2].islower():  # "TCP sockets" and "RoCE ..." keep their capitals
            title = title[0].lower() + title[1:]
        return f"{text}: {words}; most likely {title} ({causes[0]['rule']})."
    hint = ("send the NCCL_DEBUG=INFO log of the same run" if facts.kind == "nccl_tests" else
            "check the switch port and the NIC's counters")
    return f"{text}: {words}; nothing in the output says why ({hint})."
