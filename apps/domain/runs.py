"""Measured against expected: a run (nccl-tests, an NCCL log, perftest, a P2P test) checked against the
layouts of the hosts it touched, with a verdict and the evidence that explains the gap.

A **run** is what people measure when they validate a cluster (domain.md section 7): ``ib_write_bw``
between two nodes, ``all_reduce_perf`` across nodes, the ``NCCL_DEBUG=INFO`` log of a slow job.
Its parsers are the ``run`` family of ``apps.domain.parsers``. This module reads the parser's
result (``to_jsonable`` form, as stored), works out what the hardware should give from the
snapshot documents (``apps/domain/analysis.py``) of the hosts it ran on, and says how far apart
they are and why.

``read_run(text, kind=None) -> (kind, parsed)``
    detect (family ``run``) and parse; raises ``ParseError`` (``FILE:LINE: reason``) or
    ``UnknownKindError``.
``run_hosts(kind, parsed) -> [{"host", "gpus", "nics"}]``
    the hosts the run names, with the GPUs (rank, CUDA device, bus id) and NICs it used there;
    ``host`` is None when the output names none (perftest, P2P tests, table-only nccl-tests):
    the caller then says which host it ran on.
``check_run(kind, parsed, docs_by_host, *, raw_lines=None, name=None, baseline=None, host_sections=None) -> dict``
    ``docs_by_host`` maps the run's host names (or the hosts the caller gave) to snapshot
    documents; hosts it leaves out, or maps to None, are unknown to topoweb. ``raw_lines`` (the text as sent, split
    in lines) lets evidence quote each line verbatim and lets an nccl-tests output's interleaved
    NCCL log lines be read too. ``baseline``: the result of a host-memory perftest on the same
    NIC, for a ``--use_cuda`` run (R04). ``host_sections``: the hosts' own report sections
    ``show_gids``, ``ib_counters`` and ``ethtool_stats`` (one report, or the one in force and the
    next), quoted by the causes (``apps.domain.run_node``).

The stages, each a module: reading (``run_read``), the hosts in their layouts (``run_layouts``),
measured and expected per kind (``run_expect``), the causes (``run_causes``, over ``run_facts``
and ``run_node``), the verdict (``run_verdict``); the same shape across runs is ``run_fleet``.

Result (the ``manage.py check_run --format json`` document; bandwidths GB/s per direction, perftest
line rates Gb/s, as the tools print them)::

    {"schema": 1, "kind": str, "name": str|null,
     "measured": {"value": float, "unit": "GB/s"|"Gb/s", "metric": "busbw"|"bw_average"|"p2p_copy",
                  "size_bytes": int|null, "line": int|null, "text": that line verbatim ("" when the text is
                  not at hand), "what": str, ...kind-specific keys}|null,
     "expected": {"value": float|null, "unit", "size_bytes", "plateau": float|null, "limit": str,
                  "host": the run's host whose layout bounds the run|null, "layout_host": that layout's
                  hostname|null, "assumed": bool,
                  "notes": [str], ...}|null,             # null: nothing to compare with
     "efficiency": measured / expected at the same message size|null,
     "verdict": "healthy"|"below_expected"|"broken"|"not_comparable",
     "reason": one sentence (the run page's headline),
     "evidence": [{"line": int|null, "text": str, "means": str, "cause": rule id,
                   "file": str|null,                     # the run's name, or "<host's report>: <section>"
                   "run": id of another run|absent}],    # cross-run evidence (apps.domain.run_fleet)
     "findings": [{"rule", "severity", "title", "message", "fix", "hosts": [..],
                   "layout": [{"host", "rule", "severity", "title"}],   # the layouts' findings it ties to
                   "evidence": [indexes into evidence],
                   "fleet": true|absent}],               # a cross-run cause (apps.domain.run_fleet)
     "points": [{"size_bytes", "measured_busbw_gbs", "expected_busbw_gbs", "measured_in_place_busbw_gbs",
                 "line"}],                               # nccl-tests and perftest (GB/s); p2p: []
     "pairs": [{"a", "b", "measured_gbs", "expected_gbs", "efficiency", "line"}],   # P2P tests
     "hosts": [{"host", "known": bool, "layout_host": str|null, "gpus": [{"rank", "device", "bdf",
                "gpu"}], "nics": [str], "expected_gbs": float|null, "limit": str|null}],
     "slow_pair": {"src": "host/GPU3", "dst": "host2/GPU3", "why": str}|null,
     "shape": {"collective": str|null, "nodes": int|null, "ranks_per_node": int|null},
              # what apps.domain.run_fleet compares; perftest: "collective" is the test (ib_write_bw),
              # nodes 2, and "bidirectional", "cuda" and the port's "line_rate_gbit" are added
     "warnings": [str]}                                  # the parser's, then the check's

Verdicts (``apps.domain.run_verdict``): ``healthy`` at or above 85 % of expected at large messages
(perftest: 90 % of the line rate), ``below_expected``, ``broken`` (errors, wrong values, under 50 %)
or ``not_comparable`` with the reason. The diagnoses are ``apps.domain.run_causes``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apps.domain.parsers import to_jsonable
from apps.domain.run_causes import RunFacts, diagnose, size_text
from apps.domain.run_expect import (
    GIB, PLATEAU_SIZE, check_pairs, expect_host, expect_nccl_tests, expect_perftest, measure_nccl_tests,
    measure_perftest, shape_nccl_tests,
)
from apps.domain.run_layouts import layout_for_gpus, match_gpu, matched_hosts
from apps.domain.run_node import read_node_evidence
from apps.domain.run_read import RUN_KINDS, read_run, run_hosts
from apps.domain.run_verdict import (
    BROKEN_BELOW, HEALTHY_AT, LATENCY_BOUND, PERFTEST_HEALTHY_AT, VERDICTS, efficiency, verdict,
)

__all__ = ["RUN_KINDS", "read_run", "run_hosts", "check_run", "layout_for_gpus", "match_gpu", "expect_host",
           "measure_nccl_tests", "HEALTHY_AT", "BROKEN_BELOW", "PERFTEST_HEALTHY_AT", "LATENCY_BOUND", "VERDICTS",
           "GIB", "PLATEAU_SIZE", "SCHEMA", "size_text"]


SCHEMA = 1


def _lines(raw_lines: list[str] | None) -> list[str] | None:
    return None if raw_lines is None else [ln.rstrip("\r\n") for ln in raw_lines]


def _expected_points(points: list[dict], expected: dict | None, kind: str) -> None:
    """Fill each point's expected figure: the curve (nccl-tests) or the line rate (perftest, GB/s)."""
    for p in points:
        if kind == "nccl_tests":
            p["expected_busbw_gbs"] = ((expected or {}).get("curve") or {}).get(p["size_bytes"])
        elif kind == "perftest":
            value = (expected or {}).get("value")
            p["expected_gbit"] = value
            p["expected_busbw_gbs"] = round(value / 8, 3) if value else None


def check_run(kind: str, parsed: Any, docs_by_host: Mapping[str, Mapping], *, raw_lines: list[str] | None = None,
              name: str | None = None, baseline: Mapping | None = None,
              host_sections: Mapping[str, Sequence[Mapping]] | None = None) -> dict:
    """Measured against expected for one run; see the module docstring for the result.

    >>> check_run("perftest", {"rows": []}, {})["verdict"]
    'not_comparable'
    """
    if kind not in RUN_KINDS:
        raise ValueError(f"{kind!r} is not a run kind; run kinds: {', '.join(RUN_KINDS)}")
    parsed = parsed if isinstance(parsed, Mapping) else to_jsonable(parsed)
    hosts = run_hosts(kind, parsed)
    if not any(h["host"] for h in hosts):  # the output names no host: the caller's hosts are its hosts
        template = hosts[0]
        hosts = [{**template, "host": k} for k in docs_by_host] or hosts
    docs = {k: v for k, v in docs_by_host.items() if v}
    facts = RunFacts(kind=kind, parsed=parsed, docs=docs, raw_lines=_lines(raw_lines), name=name,
                     hosts=matched_hosts(hosts, docs), baseline=baseline,
                     node_evidence=read_node_evidence(host_sections))
    points, pairs = _measure_and_expect(facts, hosts, docs_by_host)
    if facts.measured and facts.measured.get("line"):
        facts.measured["text"] = facts.line(facts.measured["line"])  # quoted by other runs' cross-run causes
    facts.efficiency = efficiency(facts)
    _expected_points(points, facts.expected, kind)
    evidence, findings = diagnose(facts)
    word, reason = verdict(facts, findings)
    for f in findings:
        f.pop("breaks", None)
    expected = {k: v for k, v in (facts.expected or {}).items() if k != "curve"} if facts.expected else None
    unreadable = [f"{s.source}: {kind_} could not be read ({why}); its lines are not quoted"
                  for node in facts.node_evidence.values() for s in node.samples for kind_, why in s.unreadable.items()]
    return {"schema": SCHEMA, "kind": kind, "name": name, "measured": facts.measured, "expected": expected,
            "efficiency": facts.efficiency, "verdict": word, "reason": reason, "evidence": evidence,
            "findings": findings, "points": points, "pairs": pairs, "hosts": facts.hosts,
            "slow_pair": facts.slow_pair(), "shape": _shape(facts),
            "warnings": list(parsed.get("warnings") or []) + _dedupe(facts.notes + unreadable)}


def _measure_and_expect(facts: RunFacts, hosts: list[dict], docs_by_host: Mapping) -> tuple[list[dict], list[dict]]:
    """Fill ``facts.measured`` and ``facts.expected`` (and the shape) for the run's kind; (points, pairs)."""
    kind, parsed = facts.kind, facts.parsed
    points: list[dict] = []
    pairs: list[dict] = []
    if kind == "nccl_tests":
        facts.measured, points = measure_nccl_tests(parsed)
        facts.nodes, facts.ranks_per_node, facts.notes = shape_nccl_tests(parsed, hosts, docs_by_host)
        facts.collective = parsed.get("collective")
        facts.expected = expect_nccl_tests(facts, [p["size_bytes"] for p in points])
    elif kind == "perftest":
        facts.measured, points = measure_perftest(parsed)
        facts.expected = expect_perftest(facts)
    elif kind == "p2p_bandwidth":
        facts.measured, facts.expected, pairs = check_pairs(facts)
        facts.pairs = pairs
    else:  # an NCCL log: no figure of its own; what its job could reach is still worth saying
        facts.nodes = parsed.get("nnodes") or len([h for h in hosts if h["host"]]) or None
        if (facts.nodes or 1) < 2 and any(c.get("transport") == "NET" for c in parsed.get("connections") or []):
            facts.nodes = 2  # the log shows one host, but its NET connections cross to another node
            facts.notes.append("the log shows one host; its NET connections show the job spans at least 2 nodes")
        counts = [len(h["gpus"]) for h in hosts if h["host"]]
        facts.ranks_per_node = max(counts) if counts and max(counts) else None
        facts.expected = expect_nccl_tests(facts, []) if facts.nodes else None
    return points, pairs


def _shape(facts: RunFacts) -> dict:
    """What makes two runs comparable figure for figure (``apps.domain.run_fleet``)."""
    if facts.kind == "perftest":
        p = facts.parsed
        return {"collective": p.get("test"), "nodes": 2, "ranks_per_node": None,
                "bidirectional": bool(p.get("bidirectional")), "cuda": bool(p.get("cuda")),
                "line_rate_gbit": (facts.expected or {}).get("line_rate_gbit")}
    return {"collective": facts.collective, "nodes": facts.nodes, "ranks_per_node": facts.ranks_per_node}


def _dedupe(items: list[str]) -> list[str]:
    out: list[str] = []
    for x in items:
        if x not in out:
            out.append(x)
    return out
