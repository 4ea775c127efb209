"""Why a run is below its layout: the symptom -> cause -> evidence -> fix rows of domain.md section 7
(T1-T10) and the run rules topoweb adds (R01-R07), each quoting the lines of the run that show it and
tying them to the layouts' own findings.

``diagnose(facts) -> (evidence, findings)`` is called by ``apps.domain.runs.check_run`` with the
run's ``RunFacts`` (measured, expected, hosts and layouts). ``evidence`` items are
``{"line", "text", "means", "cause", "file"}`` (``line`` 1-based in the text as sent, ``text`` that
line verbatim when the text is at hand); each finding lists the indexes of its evidence.

=====  ==========================================================================================
T1     perftest on a RoCE port under 90 % of its line rate: packet loss (PFC/ECN), the switch's QoS
T2     TCP sockets instead of RDMA (``NET/Socket``, ``NET/IB : No device found``, ``NCCL_IB_DISABLE=1``)
T3     transport errors and timeouts (``NCCL_IB_TIMEOUT``, completion errors, watchdog timeouts)
T4     GPUDirect RDMA not used: NET connections without ``GDRDMA`` (peer-memory module, NIC too far)
T5     P2P only between some GPU pairs (a P2P test's slow pairs, SHM next to P2P in one host)
T6     results that move between sizes or runs (background traffic, congestion)
T7     ``NCCL_IB_HCA`` leaving out NICs, or every connection on one NIC
T8     RoCE GID index / routing (``GID index`` 0 or 1, ``ibv_modify_qp`` failures, indexes differing)
T9     a 2-node all-reduce above the NIC sum: tree / NVLS-tree algorithms move less data per node
T10    one host's layout slower than the others' (its findings: x8 links, ports at lower rates...)
R01    perftest on InfiniBand under 90 % of the line rate (cable, PCIe width, NUMA)
R02    fewer channels than the layout's NICs need (``NCCL_MAX_NCHANNELS``, channels seen)
R03    GeForce GPUs: the driver disables P2P, NCCL copies through host memory (SHM)
R04    ``--use_cuda`` slower than host memory: the GPU -> NIC path crosses the CPU
R05    mixed NCCL versions (nccl-tests built against other headers, hosts on different versions)
R06    wrong values or a failed test: the results are invalid (breaks the run)
R07    above the model on other node counts: NVLS / CollNet (SHARP), or the layout is not as reported
=====  ==========================================================================================
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from apps.domain.compare import compare_docs
from apps.domain.errors import ParseError
from apps.domain.findings.base import hca_selected, parse_ib_hca
from apps.domain.parsers import ALL_KINDS, to_jsonable

__all__ = ["RunFacts", "diagnose", "size_text", "RULES"]

_TWICE_RE = re.compile(r"^line (\d+): rank 0 listed twice")
_FAILURE_RE = re.compile(r"^line (\d+): .*\b(?:Test (?:NCCL |CUDA )?failure|NCCL failure)\b", re.I)
_VERSION_RE = re.compile(r"^(?:.*?\s)?(\S+?):\d+:\d+\s+\[\d+\]\s+NCCL INFO NCCL version (\d+\.\d+\.\d+)")
_TIMEOUT_RE = re.compile(r"timeout|timed out|ibv_poll_cq|completion .*error|error 12\b|watchdog|retry", re.I)
_QP_RE = re.compile(r"ibv_modify_qp|\bGID\b|no route|address resolution|rdma_resolve", re.I)
_NO_IB_RE = re.compile(r"NET/IB\s*:\s*No device found", re.I)
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


def _finding(rule: str, severity: str, title: str, message: str, fix: str, evidence: list[int], *,
             hosts: list[str] | None = None, layout: list[dict] | None = None, breaks: bool = False) -> dict:
    return {"rule": rule, "severity": severity, "title": title, "message": message, "fix": fix,
            "hosts": [h for h in (hosts or []) if h], "layout": layout or [],
            "evidence": sorted(set(evidence)), "breaks": breaks}


def _setting_lines(facts: RunFacts, name: str) -> list[int]:
    return facts.find_lines(rf"\b{name}\b", limit=2, needle=name)


def _multi_node(facts: RunFacts) -> bool:
    return bool((facts.nodes or 0) > 1 or facts.net_connections())


# ---------------------------------------------------------------------------------------- R06, T3


def rule_r06(facts: RunFacts) -> list[dict]:
    """Wrong values (``#wrong`` > 0, out-of-bounds values) or a failed test: the run is broken."""
    if facts.kind != "nccl_tests":
        return []
    p = facts.parsed
    bad = [r for r in p.get("rows") or [] if any((s or {}).get("wrong") for s in (r.get("out_of_place"),
                                                                                  r.get("in_place")))]
    ev = [facts.cite(r["line_no"], "#wrong > 0: the collective returned wrong data at this size", "R06")
          for r in bad[:3]]
    oob = facts.find_lines(r"Out of bounds values\s*:\s*[1-9]", limit=1) if p.get("out_of_bounds") else []
    ev += [facts.cite(n, f"nccl-tests found {p.get('out_of_bounds')} out-of-bounds values", "R06") for n in oob]
    fails = [int(m.group(1)) for w in p.get("warnings") or [] if (m := _FAILURE_RE.match(w))]
    ev += [facts.cite(n, "the test itself failed", "R06") for n in fails[:2]]
    if not ev:
        return []
    what = (f"{len(bad)} row(s) report wrong values (#wrong > 0, first at line {bad[0]['line_no']})" if bad else
            "the test reported a failure or out-of-bounds values")
    return [_finding("R06", "CRIT", "Wrong values: the results are invalid",
                     f"Broken: {what}; a collective that returns wrong data is broken whatever its bandwidth.",
                     "Rerun with -c 1 (validation) on each node alone to find the GPU or host that corrupts data; "
                     "check dmesg for Xid errors and the NCCL log for WARN lines.", ev, breaks=True)]


def rule_t3(facts: RunFacts) -> list[dict]:
    """Transport errors and timeouts (``NCCL_IB_TIMEOUT``, completion errors, watchdog timeouts)."""
    log = facts.log
    if not log:
        return []
    errors = [e for e in log.get("errors") or [] if _TIMEOUT_RE.search(e.get("text") or "")]
    if not errors:
        return []
    ev = [facts.cite(e["line_no"], "the transport failed or timed out here", "T3", e.get("text", ""))
          for e in errors[:4]]
    timeout = (log.get("settings") or {}).get("NCCL_IB_TIMEOUT")
    if timeout is not None:
        ev += [facts.cite(n, f"NCCL_IB_TIMEOUT={timeout}: the IB retransmit timeout (4.096 us x 2^{timeout})", "T3")
               for n in _setting_lines(facts, "NCCL_IB_TIMEOUT")]
    hosts = sorted({e.get("host") for e in errors if e.get("host")})
    return [_finding("T3", "CRIT", "Transport errors and timeouts",
                     f"{len(errors)} line(s) report transport errors or timeouts"
                     + (f" (NCCL_IB_TIMEOUT={timeout})" if timeout is not None else "") +
                     ": a lossy link retransmits until NCCL gives up, and the job hangs or fails.",
                     "Fix the lossy link first (ibstat/port counters, RoCE PFC); then set NCCL_IB_TIMEOUT sensibly "
                     "(22 is a common value) and NCCL_IB_RETRY_CNT=7.", ev, hosts=hosts,
                     breaks=facts.kind == "nccl_log")]


# ---------------------------------------------------------------------------------------- T2, T4, T7, R02


def rule_t2(facts: RunFacts) -> list[dict]:
    """TCP sockets (or nothing) where RDMA was expected."""
    log = facts.log
    ev: list[int] = []
    hosts: set[str] = set()
    if log:
        sock = [c for c in facts.net_connections() if (c.get("plugin") or "").lower() == "socket"]
        ev += [facts.cite(c["line_no"], "this channel crosses nodes over TCP sockets, not RDMA", "T2") for c in sock[:2]]
        hosts |= {c.get("host") for c in sock}
        for n in [n for n in log.get("nics") or [] if n.get("plugin") == "Socket"][:1]:
            ev.append(facts.cite(n["line_no"], f"NCCL's network is NET/Socket on {n.get('name')}", "T2"))
        for e in [e for e in log.get("errors") or [] if _NO_IB_RE.search(e.get("text") or "")][:1]:
            ev.append(facts.cite(e["line_no"], "NCCL found no usable RDMA device on this host", "T2", e["text"]))
            hosts.add(e.get("host"))
        if (log.get("settings") or {}).get("NCCL_IB_DISABLE") == "1":
            ev += [facts.cite(n, "NCCL_IB_DISABLE=1: RDMA turned off by the environment", "T2")
                   for n in _setting_lines(facts, "NCCL_IB_DISABLE")]
        if not ev and log.get("plugin") == "Socket" and _multi_node(facts):
            ev += [facts.cite(n, "NCCL uses its socket transport", "T2") for n in facts.find_lines(r"NET/Socket", 1)]
    suspected = False
    if (not ev and facts.kind == "nccl_tests" and (facts.nodes or 0) > 1 and facts.efficiency is not None
            and facts.efficiency < 0.15 and not log):
        suspected = True
        ev.append(facts.cite(facts.measured.get("line"), f"{facts.measured['value']:.1f} GB/s across nodes is the "
                             "speed of TCP sockets (a few GB/s), not of RDMA", "T2"))
    if not ev:
        return []
    layout = []
    usable: list[str] = []
    for h in facts.known():
        doc = facts.doc(h["host"])
        net = doc.get("network") or {}
        if net.get("state") == "all_down":
            layout += facts.layout_findings(h["host"], ("F01", "H04"))
        prefix = f"{h['host']}:" if len(facts.known()) > 1 else ""
        usable += [f"{prefix}{n}" for n in net.get("usable") or []]
    where = (f" The layouts have {len(usable)} usable RDMA port(s) ({', '.join(usable[:4])}"
             f"{', ...' if len(usable) > 4 else ''}) that NCCL did not use." if usable else
             " The layouts report no usable RDMA port: bring the ports up (H04)." if layout else "")
    title = "TCP sockets suspected instead of RDMA" if suspected else "TCP sockets instead of RDMA"
    message = ("The figure is what TCP sockets give across nodes; send the NCCL_DEBUG=INFO log to confirm."
               if suspected else "NCCL moves inter-node data over TCP sockets: more GPUs train slower than one.")
    return [_finding("T2", "CRIT" if _multi_node(facts) else "MED", title, message + where,
                     "Enable RDMA (NCCL_IB_DISABLE=0, the RDMA plugin and libibverbs in the container), bring the "
                     "ports up, give NCCL_IB_HCA the exact HCA list; check NCCL_DEBUG=INFO says NET/IB afterwards.",
                     ev, hosts=sorted(h for h in hosts if h), layout=layout)]


def rule_t4(facts: RunFacts) -> list[dict]:
    """NET connections without GPUDirect RDMA, tied to why: the peer-memory module, or the NIC's place."""
    log = facts.log
    conns = [c for c in facts.net_connections() if c.get("gdr") is False and (c.get("plugin") or "").lower() != "socket"]
    if not conns:
        return []
    out = []
    by_host: dict[str | None, list[dict]] = defaultdict(list)
    for c in conns:
        by_host[c.get("host")].append(c)
    for host, rows in by_host.items():
        doc = facts.doc(host)
        gpus = {facts.gpu_of(host, c.get("device")) for c in rows} - {None}
        cells = {e.get("gpu"): e for e in doc.get("gpu_nic") or []}
        possible = sorted(g for g in gpus if (cells.get(g) or {}).get("gdr"))
        far = sorted(g for g in gpus if g in cells and not cells[g].get("gdr"))
        ev = [facts.cite(c["line_no"], "a NET connection without GDRDMA: data is staged in host memory", "T4")
              for c in rows[:2]]
        off = [r for r in log.get("ring_connects") or [] if r.get("host") == host and r.get("gdr") == 0][:1]
        ev += [facts.cite(r["line_no"], "NCCL reports GPUDirect RDMA off for its rings (GDR 0)", "T4") for r in off]
        module = (doc.get("graph") or {}).get("gdr_module")
        if possible:
            cause = ("the peer-memory module is missing (nvidia_peermem / DMA-BUF, G02)" if module is False else
                     "the layout allows it, so the peer-memory module (nvidia_peermem or DMA-BUF) is the likely "
                     "cause, or NCCL_NET_GDR_LEVEL / NCCL_NET_GDR_READ turn it off")
            out.append(_finding("T4", "HIGH", "GPUDirect RDMA possible but not used",
                                f"{host or 'A host'}: {', '.join(possible)} could use GPUDirect RDMA to their NIC, but "
                                f"NCCL's connections run without it: {cause}.",
                                "Load nvidia_peermem (modprobe nvidia-peermem, and at boot) or use DMA-BUF (open GPU "
                                "kernel modules, kernel >= 5.12); check the log says GDRDMA afterwards.", ev,
                                hosts=[host], layout=facts.layout_findings(host, ("G02", "H01"))))
        elif far or not doc:
            out.append(_finding("T4", "MED", "GPUDirect RDMA off: data staged in host memory",
                                f"{host or 'A host'}: NCCL's network traffic goes through host memory"
                                + (f"; the layout puts the NIC too far from {', '.join(far)} for GPUDirect RDMA "
                                   "(G01), so this is what the layout gives" if far else "") + ".",
                                "Put the NIC on the GPU's PCIe switch; with NVLink rely on PXN; high CPU and idle "
                                "GPUs come from this staging (T4).", ev, hosts=[host],
                                layout=facts.layout_findings(host, ("G01", "H02"))))
    return out


def _usable_nics(doc: Mapping) -> list[dict]:
    usable = set((doc.get("network") or {}).get("usable") or [])
    return [n for n in doc.get("nics") or [] if n.get("compute") and (n.get("name") in usable or not usable)
            and n.get("active") is not False]


def rule_t7(facts: RunFacts) -> list[dict]:
    """``NCCL_IB_HCA`` leaving out NICs the layout has, or every connection of a host on one NIC."""
    log = facts.log
    out = []
    value = ((log or {}).get("settings") or {}).get("NCCL_IB_HCA")
    if value:
        mode, entries = parse_ib_hca(value)
        for h in facts.known():
            nics = _usable_nics(facts.doc(h["host"]))
            left = [n["name"] for n in nics if not hca_selected(n["name"], n.get("port"), mode, entries)]
            if left and nics:
                ev = [facts.cite(n, f"NCCL_IB_HCA={value} selects {len(nics) - len(left)} of the {len(nics)} usable "
                                 "HCAs", "T7") for n in _setting_lines(facts, "NCCL_IB_HCA")]
                out.append(_finding("T7", "HIGH", "NCCL_IB_HCA leaves out NICs",
                                    f"{h['host']}: NCCL_IB_HCA={value} leaves out {', '.join(left)}; the node's "
                                    "inter-node bandwidth shrinks to the NICs it names.",
                                    "Give the exact list with a leading '=' (the host page's NCCL settings), or leave "
                                    "NCCL_IB_HCA unset and let NCCL choose (F07).", ev, hosts=[h["host"]],
                                    layout=facts.layout_findings(h["host"], ("F07",))))
    by_host: dict[str | None, set] = defaultdict(set)
    senders: dict[str | None, set] = defaultdict(set)
    lines: dict[str | None, list[int]] = defaultdict(list)
    for c in facts.net_connections():
        if c.get("net_dev") is not None and (c.get("plugin") or "").lower() != "socket":
            by_host[c.get("host")].add(c["net_dev"])
            senders[c.get("host")].add(c.get("device"))
            lines[c.get("host")].append(c["line_no"])
    for host, devs in by_host.items():
        nics = _usable_nics(facts.doc(host))
        # one GPU's connections on one NIC is NCCL's normal choice; several GPUs' are not
        if len(devs) == 1 and len(nics) >= 2 and len(senders[host] - {None}) >= 2 and not out:
            pcie_only = facts.layout_findings(host, ("P11",))
            ev = [facts.cite(n, f"NET device {next(iter(devs))} again: every NET connection of {host} uses one NIC",
                             "T7") for n in lines[host][:2]]
            out.append(_finding("T7", "LOW" if pcie_only else "HIGH", "One NIC carries every connection",
                                f"{host}: all {len(lines[host])} NET connections use NET device {next(iter(devs))} while "
                                f"the layout has {len(nics)} usable NICs ({', '.join(n['name'] for n in nics[:4])})" +
                                ("; on this PCIe-only node NCCL aggregates NICs only through NVLink (P11), so one "
                                 "NIC per ring is what the layout gives" if pcie_only else
                                 "; the others stay idle (half the expected inter-node bandwidth)") + ".",
                                "Check NCCL_IB_HCA and NCCL_CROSS_NIC; with one GPU per NIC, run one rank per GPU so "
                                "each GPU uses its own NIC (F07/F08).", ev, hosts=[host], layout=pcie_only))
    return out


def rule_r02(facts: RunFacts) -> list[dict]:
    """Fewer channels than the layout's NICs need: ``NCCL_MAX_NCHANNELS`` set low, or channels seen."""
    log = facts.log
    if not log:
        return []
    settings = log.get("settings") or {}
    ev: list[int] = []
    limit = None
    for name in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_NRINGS", "NCCL_NCHANNELS_PER_NET_PEER"):
        if str(settings.get(name, "")).isdigit():
            limit = min(limit or 10 ** 6, int(settings[name]))
            ev += [facts.cite(n, f"{name}={settings[name]} caps the channels NCCL opens", "R02")
                   for n in _setting_lines(facts, name)]
    nics = max((len(_usable_nics(facts.doc(h["host"]))) for h in facts.known()), default=0)
    nvlink = any((facts.doc(h["host"]).get("summary") or {}).get("nvlink") for h in facts.known())
    need = max(2 * nics, 8 if nvlink else 2)
    if limit is not None and limit < need:
        return [_finding("R02", "HIGH", "Fewer channels than the layout allows",
                         f"NCCL is held to {limit} channel(s); this layout needs at least {need} (two per NIC"
                         + (", and NVLink boards use many more" if nvlink else "") + ").",
                         "Remove NCCL_MAX_NCHANNELS / NCCL_MIN_NCHANNELS (tuning leftovers) and measure again.", ev)]
    net = facts.net_connections()
    channels = {c.get("channel") for c in net}
    senders = {(c.get("host"), c.get("device")) for c in net}
    if net and nics and len(channels) < nics and len(senders) >= 2 and _multi_node(facts):
        ev = [facts.cite(c["line_no"], f"only channels {', '.join(str(x) for x in sorted(channels))} cross the "
                         "network", "R02") for c in net[:1]]
        return [_finding("R02", "MED", "Fewer channels than the layout's NICs",
                         f"{len(channels)} network channel(s) for {nics} usable NICs per node: some NICs carry no "
                         "channel.", "Check NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS and NCCL_IB_HCA; NCCL opens two "
                         "channels per NIC by default.", ev)]
    return []


# ---------------------------------------------------------------------------------------- T5, R03


def _models(facts: RunFacts) -> set[str]:
    models = {str(r.get("model") or "") for r in facts.parsed.get("ranks") or []}
    models |= {str(d.get("name") or "") for d in facts.parsed.get("devices") or []}
    for h in facts.known():
        models.add(str((facts.doc(h["host"]).get("summary") or {}).get("gpu_model") or ""))
    return {m for m in models if m}


def rule_r03(facts: RunFacts) -> list[dict]:
    """GeForce GPUs: NVIDIA's driver disables PCIe P2P on them, so NCCL copies through host memory."""
    geforce = sorted(m for m in _models(facts) if re.search(r"GeForce|\bRTX [2-5]0[5-9]0\b", m, re.I))
    if not geforce:
        return []
    ev = [facts.cite(r["line_no"], f"{r.get('model')}: a GeForce card", "R03")
          for r in (facts.parsed.get("ranks") or [])[:1]]
    shm = [c for c in (facts.log or {}).get("connections") or [] if c.get("transport") == "SHM"]
    ev += [facts.cite(c["line_no"], "GPU to GPU through host memory (SHM), not P2P", "R03") for c in shm[:2]]
    layout = [f for h in facts.known() for f in facts.layout_findings(h["host"], ("H03", "P01", "P02", "P03"))]
    return [_finding("R03", "MED", "GeForce: P2P disabled, copies through host memory",
                     f"{', '.join(geforce)}: NVIDIA's driver disables PCIe peer-to-peer on GeForce cards, so NCCL "
                     "moves GPU-to-GPU data through host memory (SHM) whatever NCCL_P2P_LEVEL says.",
                     "Expect SHM figures on these cards; an NVLink bridge restores P2P between its two GPUs; data-"
                     "centre GPUs have P2P.", ev, layout=layout)]


def rule_t5(facts: RunFacts) -> list[dict]:
    """P2P only between some GPU pairs: a P2P test's pairs far below the layout, or SHM beside P2P."""
    if facts.kind == "p2p_bandwidth":
        slow = [p for p in facts.pairs if p["efficiency"] is not None and p["efficiency"] < 0.5]
        if not slow:
            return []
        ev = [facts.cite(p["line"], f"{p['a']} -> {p['b']}: {p['measured_gbs']:.1f} GB/s, "
                         f"{p['efficiency']:.0%} of the layout's {p['expected_gbs']:.1f} GB/s", "T5")
              for p in slow[:3]]
        layout = [f for h in facts.known() for f in facts.layout_findings(h["host"], ("P01", "P02", "P03", "P04"))]
        return [_finding("T5", "HIGH", "P2P slow for some GPU pairs",
                         f"{len(slow)} GPU pair(s) copy at under half the layout's figure: P2P is off or detoured for "
                         "them (ACS redirect, SYS/PHB pairs, a disabled peer mapping).",
                         "Place ranks so heavy pairs share NVLink/PXB; check ACSCtl on the switch ports (P04) and "
                         "nvidia-smi topo -p2p r.", ev, layout=layout)]
    by_host: dict[str | None, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for c in (facts.log or {}).get("connections") or []:
        if c.get("transport") in ("P2P", "SHM"):
            by_host[c.get("host")][c["transport"]].append(c)
    out = []
    for host, kinds in by_host.items():
        if not (kinds.get("P2P") and kinds.get("SHM")):
            continue
        shm = kinds["SHM"]
        pairs = [(facts.gpu_of(host, c.get("src_dev")), facts.gpu_of(host, c.get("dst_dev"))) for c in shm]
        layout_p2p = [a + "-" + b for a, b in pairs if a and b and _pair_p2p(facts.doc(host), a, b)]
        ev = [facts.cite(c["line_no"], "this pair meets through host memory (SHM) while others use P2P", "T5")
              for c in shm[:2]]
        if layout_p2p:
            out.append(_finding("T5", "HIGH", "SHM where the layout has P2P",
                                f"{host}: {', '.join(sorted(set(layout_p2p))[:3])} copy through host memory (SHM) "
                                "although the layout gives them peer-to-peer: NCCL_P2P_DISABLE or NCCL_P2P_LEVEL, or a "
                                "container that hides the other GPUs from each process.",
                                "Unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL; give every process all the node's GPUs "
                                "(CUDA_VISIBLE_DEVICES, the container's device list) and pick one with LOCAL_RANK.",
                                ev, hosts=[host]))
            continue
        out.append(_finding("T5", "MED", "P2P only between some GPU pairs",
                            f"{host}: {len(shm)} connection(s) via SHM next to {len(kinds['P2P'])} via P2P: the "
                            "topology is asymmetric (some pairs only meet at PHB/SYS).",
                            "Group ranks so heavy pairs share NVLink or a PCIe switch (the host page's GPU groups).",
                            ev, hosts=[host], layout=facts.layout_findings(host, ("P01", "P02", "P03"))))
    return out


def _pair_p2p(doc: Mapping, a: str, b: str) -> bool:
    """Whether the layout gives GPUs ``a`` and ``b`` peer-to-peer (NVLink or PCIe P2P)."""
    return any({p.get("a"), p.get("b")} == {a, b} and p.get("p2p") for p in doc.get("gpu_pairs") or [])


# ---------------------------------------------------------------------------------------- T1, R01, R04, T8


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
    layout = facts.layout_findings(host, ("F01", "F02", "F03", "P06", "H02"), {e.get("nic") or ""})
    if roce:
        return [_finding("T1", "HIGH", "RoCE bandwidth well below line rate",
                         f"{m['value']:.1f} Gb/s is {facts.efficiency:.0%} of {e['value']:.0f} Gb/s on a RoCE port: "
                         "the usual cause is packet loss (PFC off or misconfigured on the switch), then the port's "
                         "rate or PCIe link. Pause/discard counters (ethtool -S: rx_pause, rx_discards_phy) show it.",
                         "Configure PFC/ECN (DCQCN) on the lossless class; check the switch QoS/ACL policy (sampling or "
                         "policing RoCE traffic breaks PFC); compare ethtool -S counters before and after a run.",
                         ev, hosts=[host], layout=layout)]
    return [_finding("R01", "HIGH", "InfiniBand bandwidth below line rate",
                     f"{m['value']:.1f} Gb/s is {facts.efficiency:.0%} of {e['value']:.0f} Gb/s: a cable or port trained "
                     "lower, a NIC PCIe link below its width, or the test on the far NUMA node.",
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
    return [_finding("R04", "HIGH" if slower else "MED", "--use_cuda slower than host memory",
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
        per_host = _per_host_values(facts, r"NCCL_IB_GID_INDEX set by environment to (\d+)", "NCCL_IB_GID_INDEX")
        if len({v for v, _ in per_host.values()}) > 1:
            ev += [facts.cite(n, f"{h}: NCCL_IB_GID_INDEX={v}", "T8") for h, (v, n) in _first_lines(per_host).items()]
            why.append("the hosts use different GID indexes")
    if not ev:
        return []
    return [_finding("T8", "MED", "RoCE GID index or routing", "; ".join(why).capitalize() + " (RoCE works between "
                     "some nodes only when GIDs or routes differ)." if why else
                     "RoCE addressing may not match across nodes.",
                     "Use the RoCE v2 IPv4 GID (often index 3, see show_gids) on every node, NCCL_IB_GID_INDEX the "
                     "same everywhere; static routes per NIC across subnets.", ev)]


def _per_host_values(facts: RunFacts, pattern: str, needle: str) -> dict[str, tuple[str, int]]:
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


def _first_lines(values: dict[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
    return dict(list(values.items())[:3])


# ---------------------------------------------------------------------------------------- T9, R07, T10, T6, R05


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
        return [_finding("T9", "INFO", "2-node result above the NIC sum (tree / NVLS-tree)",
                         "On 2 nodes NCCL's tree and NVLS-tree algorithms move less data per node than a ring, so "
                         "busbw can exceed what a node's NICs carry (unless NCCL_ALGO=Ring was set, when the layout's "
                         "NIC figure is low); it drops from 4 nodes.",
                         "Compare with NCCL_ALGO=Ring, or with 4+ nodes, before sizing a job on this figure.", ev)]
    if facts.efficiency <= 1.1:
        return []
    ev = [facts.cite(m.get("line"), f"{m['value']:.1f} {m.get('unit')} is {facts.efficiency:.0%} of the layout's "
                     "figure", "R07")]
    if facts.kind == "nccl_tests":
        return [_finding("R07", "LOW", "Above the estimate (NVLS, CollNet/SHARP, or the layout differs)",
                         "The run beats the model: NVLink SHARP (NVLS) or in-network reduction (CollNet/SHARP) "
                         "moves less data than a ring, or the layout reported is not the one the run used.",
                         "Record NCCL's algorithm (NCCL_DEBUG_SUBSYS=TUNING) with the result; compare with "
                         "NCCL_ALGO=Ring.", ev)]
    return [_finding("R07", "MED", "Above what the layout allows: another host or device?",
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
    nic_sum = {h: e["b_node_gbs"] for h, e in rated.items() if e.get("b_node_gbs")} if _multi_node(facts) else {}
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
    return [_finding("T10", severity, "One host slower than the others",
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
    return [_finding("T6", "MED", "Results that move (background traffic or congestion)",
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
    versions = _per_host_values(facts, r"NCCL INFO NCCL version (\d+\.\d+\.\d+)", "NCCL version")
    if len({v for v, _ in versions.values()}) > 1:
        ev += [facts.cite(n, f"{h} runs NCCL {v}", "R05") for h, (v, n) in _first_lines(versions).items()]
    if not ev:
        return []
    return [_finding("R05", "MED", "Mixed NCCL versions",
                     "Not every process runs the same NCCL: protocols and tuning differ between versions, and "
                     "mismatches fail or slow down at init.", "Use one NCCL build on every node (the same container "
                     "image); rebuild nccl-tests against the NCCL it runs with.", ev)]


RULES: tuple[Callable[[RunFacts], list[dict]], ...] = (
    rule_r06, rule_t3, rule_t2, rule_t4, rule_t7, rule_r02, rule_t10, rule_t1_r01, rule_r04, rule_t8, rule_t5,
    rule_r03, rule_t6, rule_r05, rule_t9_r07,
)


def confirm_transport(facts: RunFacts) -> None:
    """Evidence that a log's connections use what they should (cause ``ok``): the network NCCL
    chose and a NET connection with GPUDirect RDMA; quoted when no rule found anything wrong."""
    log = facts.log
    if not log:
        return
    for n in [n for n in log.get("nics") or [] if n.get("plugin") == "IB"][:1]:
        facts.cite(n["line_no"], f"NCCL uses RDMA (NET/IB) on {n.get('name')}", "ok")
    for c in [c for c in facts.net_connections() if c.get("gdr")][:1]:
        facts.cite(c["line_no"], "a NET connection with GPUDirect RDMA (GDRDMA): GPU memory straight to the NIC", "ok")
    for c in [c for c in log.get("connections") or [] if c.get("transport") in ("P2P", "NVLS")][:1]:
        facts.cite(c["line_no"], f"GPUs of one host connect peer-to-peer ({c.get('via')})", "ok")


def diagnose(facts: RunFacts) -> tuple[list[dict], list[dict]]:
    """(evidence, findings) of one run: every rule of ``RULES``, findings most severe first; a log
    in which nothing is wrong gets the lines that show it (``confirm_transport``)."""
    findings: list[dict] = []
    for rule in RULES:
        findings.extend(rule(facts))
    findings.sort(key=lambda f: (not f["breaks"], SEVERITY_ORDER[f["severity"]]))
    if not any(f["severity"] in ("CRIT", "HIGH") for f in findings):
        confirm_transport(facts)
    return facts.evidence, findings
