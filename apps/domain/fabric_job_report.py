"""A job's hosts on the fabric, as the fabric page's form and ``GET /api/v1/clusters/{c}/fabric/job`` answer it.

Plain Python over a :class:`apps.domain.fabric_paths.FabricView`:

``job_hosts(spec, known) -> (hosts, unmatched)``
    The job's hosts in rank order from what a person types: names separated by commas or
    whitespace, each a host name (exact, else the one host of that short name, case-insensitively)
    or a shell glob (``h100-n0*``, ``node[1-4]``; ``fnmatch`` rules) expanded over ``known`` in
    natural order. A name given twice counts once (its first place); ``unmatched`` lists the
    entries that name no known host.
``job_report(view, docs, hosts, algorithm="ring") -> dict``
    ``fabric_jobs.job_contention`` of the hosts (``"contention"``), the job's rules L04 and L08
    (``fabric_rules.rule_l04``/``rule_l08``: ``"findings"``), the rail each leaf carries
    (``"leaf_rails"``: ``{leaf name: NIC name}``, ``fabric_jobs.rail_leaves``) and ``"verdict"``
    (:func:`job_verdict`).
``job_verdict(contention) -> str``
    One sentence: how many hosts, how many leaves the algorithm's traffic crosses, the most flows
    per uplink, the job's worst oversubscription, then what limits it (uplinks over capacity, NICs
    off their rail's leaf, hosts not in the fabric) or "no fabric bottleneck".

The flow model (rings and trees in rank order, one per rail) is ``fabric_jobs``'s, which cites
NCCL v2.30.7-1 (``src/graph/connect.cc`` L95-113 rings, L138-175 and ``src/graph/trees.cc``
L32-112 trees).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping

from apps.domain.fabric_jobs import ALGORITHMS, job_contention, rail_leaves
from apps.domain.fabric_paths import FabricView
from apps.domain.fabric_rules import rule_l04, rule_l08
from apps.domain.names import natural_key

__all__ = ["job_hosts", "job_report", "job_verdict", "MAX_JOB_HOSTS"]

MAX_JOB_HOSTS = 4096  # hosts one query may name (a glob may expand to more: the query is refused)
_SPLIT = re.compile(r"[\s,;]+")
_GLOB = re.compile(r"[*?\[]")


def job_hosts(spec: str, known: Iterable[str]) -> tuple[list[str], list[str]]:
    """The hosts ``spec`` names among ``known``, in the order given (see the module docstring).

    >>> job_hosts("h100-n0*, b1 a2", ["h100-n10", "h100-n02", "h100-n01", "a2", "b1.cluster"])
    (['h100-n01', 'h100-n02', 'b1.cluster', 'a2'], [])
    >>> job_hosts("x9 a*", ["a1"])
    (['a1'], ['x9'])
    """
    names = sorted(set(known), key=natural_key)
    exact = set(names)
    by_short: dict[str, list[str]] = {}
    for n in names:
        by_short.setdefault(n.split(".")[0].lower(), []).append(n)
    out: dict[str, None] = {}
    unmatched = []
    for token in (t for t in _SPLIT.split(spec or "") if t):
        if _GLOB.search(token):
            hits = [n for n in names if fnmatch.fnmatchcase(n, token) or fnmatch.fnmatchcase(n.split(".")[0], token)]
        elif token in exact:
            hits = [token]
        else:
            same = by_short.get(token.split(".")[0].lower(), [])
            hits = same if len(same) == 1 else []
        if not hits:
            unmatched.append(token)
        for h in hits:
            out.setdefault(h, None)
    return list(out), unmatched


def _ratio(x: float | None) -> str:
    return "?" if x is None else f"{x:g}:1"


def job_verdict(c: Mapping) -> str:
    """The one-sentence verdict of a ``job_contention`` answer.

    >>> job_verdict({"nodes": 16, "algorithm": "ring", "leaves": [
    ...     {"name": f"leaf{i}", "flows": 2, "flows_per_uplink": 0.25, "demand_ratio": 0.5} for i in range(4)],
    ...     "oversubscription": 1.0, "design_oversubscription": 1.0, "demand_ratio": 0.5, "off_rail": [],
    ...     "missing": [], "worst_leaf": "leaf0"})
    '16 hosts: ring traffic crosses 4 leaves, at most 0.25 flows per uplink, 1:1 - no fabric bottleneck.'
    """
    n, alg = c.get("nodes") or 0, c.get("algorithm")
    crossing = [r for r in c.get("leaves") or [] if (r.get("flows") or 0) > 0]
    head = f"{n} host{'' if n == 1 else 's'}: "
    if n < 2:
        head += "one host has no inter-node traffic"
    elif not crossing:
        k = len(c.get("leaves") or [])
        head += (f"{alg} traffic stays on {k} lea{'f' if k == 1 else 'ves'} (no flow crosses an uplink), "
                 f"{_ratio(c.get('oversubscription'))}")
    else:
        per = max((r.get("flows_per_uplink") or 0.0 for r in crossing), default=0.0)
        head += (f"{alg} traffic crosses {len(crossing)} lea{'f' if len(crossing) == 1 else 'ves'}, at most "
                 f"{per:g} flow{'' if per == 1 else 's'} per uplink, {_ratio(c.get('oversubscription'))}")
    limits = []
    if (c.get("demand_ratio") or 0.0) > 1.0:
        limits.append(f"the uplinks of {c.get('worst_leaf')} are the bottleneck ({c['demand_ratio']:g}x what they "
                      "carry)")
    design, over = c.get("design_oversubscription"), c.get("oversubscription")
    if over is not None and over > 1.0 and (design is None or over > design + 1e-6) and not limits:
        limits.append(f"oversubscribed beyond the {_ratio(design)} design" if design is not None else "oversubscribed")
    off = c.get("off_rail") or []
    if off:
        limits.append(f"{len(off)} NIC{'' if len(off) == 1 else 's'} on another rail's leaf "
                      f"({', '.join(sorted({o['host'] for o in off}, key=natural_key))}): their traffic crosses the spines")
    missing = c.get("missing") or []
    if missing:
        limits.append(f"{len(missing)} host{'' if len(missing) == 1 else 's'} not in the fabric")
    return head + " - " + ("; ".join(limits) if limits else "no fabric bottleneck") + "."


def job_report(view: FabricView, docs: Mapping[str, Mapping] | None, hosts: list[str], algorithm: str = "ring") -> dict:
    """Contention, the job's L04/L08 findings, the leaves' rails and the verdict (module docstring)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, not {algorithm!r}")
    docs = dict(docs or {})
    hosts = list(dict.fromkeys(hosts))
    contention = job_contention(view, docs, hosts, algorithm)
    findings = (rule_l04(view, docs, hosts) + rule_l08(view, docs, hosts)) if len(hosts) > 1 else []
    owned = rail_leaves(view)["leaves"]
    return {"contention": contention, "findings": findings,
            "leaf_rails": {view.name(leaf): v["rail"] for leaf, v in owned.items()},
            "verdict": job_verdict(contention)}
