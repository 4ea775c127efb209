"""The same measurement on several host sets: one host in every slow run, or results that spread.

One run's check (``apps.domain.runs.check_run``) can tell a host slower than the others only from
their layouts (T10) or from sizes that move within that run (T6). Across runs more shows: the same
collective and shape (kind, collective or perftest test, nodes, ranks per node; perftest also
bidirectional and ``--use_cuda``) measured on several host sets, with one host in every slow run and
in none of the fast ones, is domain.md section 7 row T10's evidence ("the same run with and without
the node"); slow and fast runs of one shape with no host in common are row T6's ("several runs with
different results": background traffic or congestion).

A run is *slow* when it is under ``SLOW_AT`` (the verdict's healthy bar, 85 %) of the best run of
its shape: by efficiency (measured / expected) when every run of the group has one, so nodes of
different layouts compare fairly; else by the figures themselves (same kind, unit and shape), so
hosts topoweb does not know still count. Plain Python over stored results:

``run_summary(run_id, result, hosts, *, name=None) -> dict|None``
    ``{"run", "kind", "shape", "value", "unit", "efficiency", "hosts": [names], "line", "text", "name",
    "plateau", "size_bytes"}``
    of one checked run (``hosts``: the topoweb host names, or the run's names for unknown hosts);
    None when the run measured nothing.
``fleet_findings(current, others) -> (evidence, findings)``
    the cross-run causes of ``current`` (a summary) among ``others`` (summaries of any shape; those
    of another shape are ignored): evidence items quote the measured line of each run cited, with
    ``"run"`` its id.
T10 is HIGH when one host is in two or more slow runs and in no fast one; MED with a single slow
run (each of its hosts not seen in a fast run is a suspect) or several hosts always together.

``add_fleet_findings(result, current, others) -> result``
    the same, appended to a ``check_run`` result (indexes shifted, findings kept most severe first,
    and the reason names the host when the run's own output said nothing of why).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from apps.domain.run_facts import SEVERITY_ORDER
from apps.domain.run_verdict import HEALTHY_AT

__all__ = ["SLOW_AT", "run_summary", "same_shape", "fleet_findings", "add_fleet_findings"]

SLOW_AT = HEALTHY_AT  # of the best run of the same shape
CITED = 3  # slow runs and fast runs quoted, each


def run_summary(run_id: int | None, result: Mapping, hosts: Iterable[str], *, name: str | None = None) -> dict | None:
    """What ``fleet_findings`` compares of one checked run; None when it measured nothing."""
    m = result.get("measured") or {}
    if m.get("value") is None or not result.get("shape"):
        return None
    return {"run": run_id, "kind": result.get("kind"), "shape": dict(result["shape"]), "value": float(m["value"]),
            "unit": m.get("unit"), "efficiency": result.get("efficiency"), "hosts": sorted({h for h in hosts if h}), "line": m.get("line"),
            "text": m.get("text") or m.get("what") or "", "name": name or result.get("name"),
            "plateau": m.get("plateau"), "size_bytes": m.get("size_bytes")}


def same_shape(a: Mapping, b: Mapping) -> bool:
    """Whether two summaries measure the same thing: kind, unit and shape, and for nccl-tests both
    at large messages (>= 1 GiB) or at the same size."""
    if a["kind"] != b["kind"] or a["unit"] != b["unit"] or a["shape"] != b["shape"]:
        return False
    if a["kind"] == "nccl_tests" and not (a.get("plateau") and b.get("plateau")):
        return a.get("size_bytes") == b.get("size_bytes")
    return True


def _score(r: Mapping, metric: str) -> float:
    return float(r[metric])


def _cite(evidence: list[dict], r: Mapping, best: float, metric: str, means: str, cause: str) -> int:
    where = ", ".join(r["hosts"]) or "hosts not named"
    ratio = f"{_score(r, metric) / best:.0%}" if best else "-"
    what = (f"{r['value']:.1f} {r['unit']} ({r['efficiency']:.0%} of its layout), {ratio} of the best run of this "
            "shape" if metric == "efficiency" else f"{r['value']:.1f} {r['unit']}, {ratio} of the best run of this shape")
    evidence.append({"line": r.get("line"), "text": r.get("text") or f"{r['value']:.1f} {r['unit']}",
                     "means": f"run #{r['run']} on {where}: {what}; {means}",
                     "cause": cause, "file": r.get("name") or f"run #{r['run']}", "run": r.get("run")})
    return len(evidence) - 1


def _shape_words(s: Mapping) -> str:
    shape = s["shape"]
    what = shape.get("collective") or s["kind"]
    if shape.get("ranks_per_node"):
        return f"{what} on {shape.get('nodes')} node(s) x {shape['ranks_per_node']} GPUs"
    return f"{what} on {shape.get('nodes')} node(s)" if shape.get("nodes") else what


def fleet_findings(current: Mapping, others: Iterable[Mapping]) -> tuple[list[dict], list[dict]]:
    """(evidence, findings) of ``current`` against the other runs of its shape; see the module docstring.

    >>> def s(i, v, hosts):
    ...     return {"run": i, "kind": "nccl_tests", "shape": {"collective": "all_reduce", "nodes": 2,
    ...             "ranks_per_node": 8}, "value": v, "unit": "GB/s", "hosts": hosts, "line": 40,
    ...             "text": "", "name": None, "plateau": True}
    >>> ev, f = fleet_findings(s(3, 60.0, ["a", "c"]), [s(1, 180.0, ["a", "b"]), s(2, 58.0, ["c", "d"])])
    >>> f[0]["rule"], f[0]["hosts"], [e["run"] for e in ev]
    ('T10', ['c'], [3, 2, 1])
    """
    group = [current] + [o for o in others if o.get("run") != current.get("run") and same_shape(current, o)]
    if len({tuple(g["hosts"]) for g in group}) < 2:
        return [], []
    metric = "efficiency" if all(g.get("efficiency") for g in group) else "value"
    best = max(_score(g, metric) for g in group)
    slow = [g for g in group if _score(g, metric) < SLOW_AT * best]
    fast = [g for g in group if _score(g, metric) >= SLOW_AT * best]
    top = max(g["value"] for g in group)
    if current not in slow or not fast:
        return [], []
    common = set(current["hosts"])
    for g in slow:
        common &= set(g["hosts"])
    common -= {h for g in fast for h in g["hosts"]}
    evidence: list[dict] = []
    others_slow = [g for g in slow if g is not current][:CITED]
    shape = _shape_words(current)
    if common:
        names = sorted(common)
        who = names[0] if len(names) == 1 else f"one of {', '.join(names)}"
        ev = [_cite(evidence, current, best, metric, f"slow, with {who}", "T10")]
        ev += [_cite(evidence, g, best, metric, f"slow, with {who}", "T10") for g in others_slow]
        ev += [_cite(evidence, g, best, metric, f"fast, without {who}", "T10") for g in fast[:CITED]]
        title = "One host in every slow run" if len(names) == 1 else "The same hosts in every slow run"
        message = (f"{len(slow)} run(s) of {shape} are under {SLOW_AT:.0%} of the best ({top:.1f} {current['unit']}"
                   + (", by their efficiency against their layouts" if metric == "efficiency" else "") + "), "
                   f"and {who} is in every one of them and in none of the {len(fast)} fast run(s): the same test "
                   "with and without the node.")
        fix = (f"Drain {who}; read its host page (x8 links, ports at lower rates, NVLink down, error counters) and "
               "compare it with its layout's norm; run the test on it alone against a good node.")
        sure = len(names) == 1 and len(slow) >= 2  # one slow run leaves every host of it not in a fast one
        return evidence, [{"rule": "T10", "severity": "HIGH" if sure else "MED", "title": title,
                           "message": message, "fix": fix, "hosts": names, "layout": [], "evidence": ev}]
    ev = [_cite(evidence, current, best, metric, "slow", "T6")]
    ev += [_cite(evidence, g, best, metric, "slow", "T6") for g in others_slow]
    ev += [_cite(evidence, g, best, metric, "fast", "T6") for g in fast[:CITED]]
    message = (f"Runs of {shape} range from {min(g['value'] for g in group):.1f} to {top:.1f} {current['unit']}, "
               "and no host is in every slow run and in no fast one: background traffic or congestion on the fabric "
               "(or a switch path some host pairs share) moves the results.")
    return evidence, [{"rule": "T6", "severity": "MED", "title": "The same test gives different results across runs",
                       "message": message, "fix": "Run again at a quiet hour and several times; RoCE congestion "
                       "control (DCQCN), separate traffic classes for storage/SSH/monitoring; compare the switch "
                       "paths of the slow host pairs.", "hosts": [], "layout": [], "evidence": ev}]


_NO_CAUSE_RE = re.compile(r"nothing in the output says why \([^)]*\)")


def add_fleet_findings(result: dict, current: Mapping | None, others: Iterable[Mapping]) -> dict:
    """``result`` (a ``check_run`` result) with the cross-run evidence and findings appended."""
    for key in ("evidence", "findings"):  # a re-check starts from the run's own causes
        result[key] = [x for x in result.get(key) or [] if not x.get("fleet")]
    if current is None:
        return result
    evidence, findings = fleet_findings(current, others)
    if not findings:
        return result
    shift = len(result["evidence"])
    result["evidence"] += [{**e, "fleet": True} for e in evidence]
    for f in findings:
        result["findings"].append({**f, "evidence": [i + shift for i in f["evidence"]], "fleet": True})
    result["findings"].sort(key=lambda f: SEVERITY_ORDER.get(f["severity"], 9))
    top = findings[0]
    if top["rule"] == "T10" and result.get("reason") and _NO_CAUSE_RE.search(result["reason"]):
        result["reason"] = _NO_CAUSE_RE.sub(f"most likely {', '.join(top['hosts'])}, in every slow run of this "
                                            "test (T10)", result["reason"])
    return result
