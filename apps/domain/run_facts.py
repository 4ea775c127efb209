"""What one run's check knows and how its causes quote it: :class:`RunFacts` (the parser's result,
the hosts and their layouts, the measured and expected figures, the evidence cited so far) and
the small helpers every cause module of ``apps.domain.run_causes`` shares.

``RunFacts.cite(line, means, cause)`` quotes a line of the run's own text; ``RunFacts.quote(file,
line, text, means, cause)`` a line of a host's report section (``apps.domain.run_node``). Evidence
items are ``{"line", "text", "means", "cause", "file"}``; ``finding(...)`` builds a cause with the
indexes of its evidence.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apps.domain.errors import ParseError
from apps.domain.parsers import ALL_KINDS, to_jsonable

__all__ = ["RunFacts", "SEVERITY_ORDER", "size_text", "finding", "setting_lines", "multi_node", "per_host_values",
           "first_lines"]


_TWICE_RE = re.compile(r"^line (\d+): rank 0 listed twice")
SEVERITY_ORDER = {"CRIT": 0, "HIGH": 1, "MED": 2, "LOW": 3, "INFO": 4}


def size_text(size: int | None) -> str:
    """``8589934592`` -> ``"8 GiB"``, ``1500000`` -> ``"1.4 MiB"``, ``512`` -> ``"512 B"``."""
    if size is None:
        return "?"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            v = size / scale
            return f"{v:.0f} {unit}" if abs(v - round(v)) < 0.05 else f"{v:.1f} {unit}"
    return f"{size} B"


@dataclass
class RunFacts:
    """What ``check_run`` knows of one run: the parser's result, the hosts and their layouts, the
    measured and expected figures. The rules read it; ``cite`` adds the evidence they quote."""

    kind: str
    parsed: Mapping
    docs: dict
    raw_lines: list[str] | None = None
    name: str | None = None
    hosts: list[dict] = field(default_factory=list)
    baseline: Mapping | None = None
    measured: dict | None = None
    expected: dict | None = None
    efficiency: float | None = None
    nodes: int | None = None
    ranks_per_node: int | None = None
    collective: str | None = None
    notes: list[str] = field(default_factory=list)
    per_host: dict = field(default_factory=dict)
    pairs: list[dict] = field(default_factory=list)
    evidence: list[dict] = field(default_factory=list)
    node_evidence: dict = field(default_factory=dict)  # run host -> run_node.NodeEvidence (its report sections)
    _log: Any = None
    _net: list[dict] | None = None
    _cited: dict = field(default_factory=dict)

    # -- evidence -------------------------------------------------------------------------------
    def line(self, no: int | None) -> str:
        if no and self.raw_lines is not None and 0 < no <= len(self.raw_lines):
            return self.raw_lines[no - 1].strip()
        return ""

    def cite(self, no: int | None, means: str, cause: str, text: str = "") -> int:
        """Add one evidence item (the line verbatim when the text is at hand) and return its index;
        a line already cited for the same cause is not added twice."""
        key = (no, cause)
        if no is not None and key in self._cited:
            return self._cited[key]
        self.evidence.append({"line": no, "text": self.line(no) or text, "means": means, "cause": cause,
                              "file": self.name})
        self._cited[key] = len(self.evidence) - 1
        return len(self.evidence) - 1

    def quote(self, file: str, no: int | None, text: str, means: str, cause: str) -> int:
        """Add one evidence item quoting a line of another text than the run's (a host's report
        section: ``file`` names it and its source) and return its index; once per file, line and cause."""
        key = (file, no, cause)
        if key in self._cited:
            return self._cited[key]
        self.evidence.append({"line": no, "text": text, "means": means, "cause": cause, "file": file})
        self._cited[key] = len(self.evidence) - 1
        return len(self.evidence) - 1

    def find_lines(self, pattern: str, limit: int = 3, needle: str = "") -> list[int]:
        """Line numbers of the raw text matching ``pattern`` (a regex), the first ``limit``;
        ``needle``: a plain substring every match holds (a cheap test before the regex)."""
        if self.raw_lines is None:
            return []
        rx = re.compile(pattern)
        hits = (i + 1 for i, ln in enumerate(self.raw_lines) if (not needle or needle in ln) and rx.search(ln))
        return list(itertools.islice(hits, limit))

    def net_connections(self) -> list[dict]:
        """The log's NET connections (computed once: a long log holds many)."""
        if self._net is None:
            self._net = [c for c in (self.log or {}).get("connections") or [] if c.get("transport") == "NET"]
        return self._net

    # -- the NCCL log (the log itself, or the NCCL lines inside an nccl-tests output) -------------
    @property
    def log(self) -> Mapping | None:
        if self.kind == "nccl_log":
            return self.parsed
        if self._log is None:
            self._log = False
            if self.kind == "nccl_tests" and self.raw_lines is not None:
                text = "\n".join(self.raw_lines)
                spec = ALL_KINDS["nccl_log"]
                try:
                    if spec.detect(text) > 0:
                        self._log = to_jsonable(spec.parse(text))
                except ParseError:
                    self._log = False
        return self._log or None

    # -- hosts and layouts ---------------------------------------------------------------------
    def known(self) -> list[dict]:
        return [h for h in self.hosts if h["known"]]

    def doc(self, host: str | None) -> Mapping:
        return self.docs.get(host) or {} if host else {}

    def gpu_of(self, host: str | None, device: Any) -> str | None:
        for h in self.hosts:
            if h["host"] == host:
                for g in h["gpus"]:
                    if g["device"] == device and g["gpu"]:
                        return g["gpu"]
        names = [g.get("name") for g in self.doc(host).get("gpus") or [] if g.get("index") == device]
        return names[0] if names else None

    def layout_findings(self, host: str | None, rules: tuple[str, ...], devices: set[str] | None = None) -> list[dict]:
        out = []
        for f in self.doc(host).get("findings") or []:
            if f.get("rule") in rules and (devices is None or not f.get("devices") or set(f["devices"]) & devices):
                out.append({"host": host, "rule": f["rule"], "severity": f.get("severity"), "title": f.get("title")})
        return out

    def rank_zero_lines(self) -> list[int]:
        """Lines where a further process printed itself as Rank 0 (the parser's warnings)."""
        return [int(m.group(1)) for w in self.parsed.get("warnings") or [] if (m := _TWICE_RE.match(w))]

    def slow_pair(self) -> dict | None:
        """Two GPUs whose path the run's figure rests on, for the path view: across hosts, the
        bounding host's GPU with the slowest NIC path to the same GPU of another host; in one host,
        its slowest GPU pair."""
        known = self.known()
        if not known or self.kind not in ("nccl_tests", "nccl_log", "p2p_bandwidth"):
            return None
        bound = (self.expected or {}).get("host") or known[0]["host"]
        h = next(x for x in known if x["host"] == bound) if any(x["host"] == bound for x in known) else known[0]
        doc = self.doc(h["host"])
        used = [g["gpu"] for g in h["gpus"] if g["gpu"]] or [g.get("name") for g in doc.get("gpus") or []]
        if self.kind == "p2p_bandwidth" and self.measured and self.measured.get("pair"):
            a, b = self.measured["pair"]
            return {"src": f"{h['host']}/{a}", "dst": f"{h['host']}/{b}", "why": "the pair furthest below its figure"}
        others = [x["host"] for x in self.hosts if x["host"] and x["host"] != h["host"]]
        if others:
            rows = [e for e in doc.get("gpu_nic") or [] if e.get("gpu") in used and e.get("bandwidth_gbs")]
            if not rows:
                return None
            worst = min(rows, key=lambda e: e["bandwidth_gbs"])
            return {"src": f"{h['host']}/{worst['gpu']}", "dst": f"{others[0]}/{worst['gpu']}",
                    "why": f"{worst['gpu']} -> {worst.get('nic')}: {worst.get('reason') or worst.get('path_class')}"}
        pairs = [p for p in doc.get("gpu_pairs") or [] if p.get("a") in used and p.get("b") in used
                 and p.get("bottleneck_gbs")]
        if not pairs:
            return None
        worst = min(pairs, key=lambda p: p["bottleneck_gbs"])
        return {"src": f"{h['host']}/{worst['a']}", "dst": f"{h['host']}/{worst['b']}",
                "why": f"{worst['a']}-{worst['b']}: {worst.get('path_class')}, {worst.get('reason') or ''}".rstrip(", ")}


def finding(rule: str, severity: str, title: str, message: str, fix: str, evidence: list[int], *,
            hosts: list[str] | None = None, layout: list[dict] | None = None, breaks: bool = False) -> dict:
    """One cause of the result's ``findings`` (``breaks``: it makes the run broken whatever its figure)."""
    return {"rule": rule, "severity": severity, "title": title, "message": message, "fix": fix,
            "hosts": [h for h in (hosts or []) if h], "layout": layout or [],
            "evidence": sorted(set(evidence)), "breaks": breaks}


def setting_lines(facts: RunFacts, name: str) -> list[int]:
    """The first two lines of the run's text naming the setting ``name`` (``NCCL_IB_HCA``...)."""
    return facts.find_lines(rf"\b{name}\b", limit=2, needle=name)


def multi_node(facts: RunFacts) -> bool:
    """Whether the run crosses nodes (its node count, or NET connections in its log)."""
    return bool((facts.nodes or 0) > 1 or facts.net_connections())


def per_host_values(facts: RunFacts, pattern: str, needle: str) -> dict[str, tuple[str, int]]:
    """``{host: (value, line)}`` of the first line per host (``host:pid:tid [dev] NCCL``) matching
    ``pattern``; ``needle`` is a substring every match holds (tested first: logs are long)."""
    out: dict[str, tuple[str, int]] = {}
    if facts.raw_lines is None:
        return out
    rx = re.compile(pattern)
    for i, ln in enumerate(facts.raw_lines):
        m = rx.search(ln) if needle in ln else None
        if m:
            host = re.match(r"^(?:.*?\s)?([^\s:]+):\d+:\d+\s", ln)
            if host and host.group(1) not in out:
                out[host.group(1)] = (m.group(1), i + 1)
    return out


def first_lines(values: dict[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
    """The first three hosts of ``per_host_values``."""
    return dict(list(values.items())[:3])
