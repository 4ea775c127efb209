"""The hosts' own evidence for a run's causes: the report sections ``show_gids``, ``ib_counters`` and
``ethtool_stats`` of the hosts a run touched, quoted line by line with the report they come from.

A run's own text says what NCCL or perftest saw; the node's report says what its ports counted.
domain.md section 7 reads both: T1 (RoCE packet loss) in "``ethtool -S`` pause/discard counters
(``rx_pause``, ``rx_discards_phy``) rising; IB port error counters", T8 (GID index) in "``show_gids``;
``NCCL_IB_GID_INDEX``", T10 (a degraded link on one node) in per-host evidence. The layout's own
findings about the same ports are F05 (GIDs), F06 (RoCE not lossless) and F09 (link error
counters); every cause quoting these lines lists them.

Input (``check_run(..., host_sections=...)``)::

    {run host name: [{"source": "node-a report 2025-03-01 00:00 (snapshot #3)",
                      "sections": {"show_gids": text, "ib_counters": text, "ethtool_stats": text}},
                     {"source": ..., "sections": {...}}]}   # optional: the host's next report

The first sample is the report in force when the run was measured; a second one, when given, is
the host's next report: a counter higher there than in the first *rose* across the run (the
strong evidence domain.md asks for). With one sample a count is only "since the counters were
last cleared", and only counters that are never normal above zero are quoted (discards, pause
storms, RoCE retransmissions, link errors; not pause frames, which PFC sends by design, nor the
boot-time link-down event). Sections are parsed when a cause first asks for them; one that cannot
be read is left out with a note.

``read_node_evidence(host_sections) -> {host: NodeEvidence}``; ``counter_evidence(facts, host,
cas, groups)`` and ``gid_evidence(facts, host, ca, index)`` give the readings the rules quote;
``rule_node_counters(facts)`` is the T1/T10 cause of a collective whose hosts' ports counted loss.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from apps.domain.errors import ParseError
from apps.domain.findings.fabric import LINK_ERROR_COUNTERS, LINK_ERROR_HW_COUNTERS, ROCE_LOSS_COUNTERS
from apps.domain.parsers import KINDS, to_jsonable
from apps.domain.run_facts import RunFacts, finding, multi_node
from apps.domain.run_verdict import HEALTHY_AT, PERFTEST_HEALTHY_AT

__all__ = ["NODE_KINDS", "NodeEvidence", "Reading", "read_node_evidence", "counter_evidence", "gid_evidence",
           "run_cas", "troubled", "cite_readings", "rule_node_counters", "LAYOUT_RULES"]


NODE_KINDS = ("show_gids", "ib_counters", "ethtool_stats")

# RDMA hw_counters of lost or reordered RoCE packets (F06's list) and IB port counters of a bad link
# (F09's), from apps/domain/findings/fabric.py
ROCE_LOSS = ROCE_LOSS_COUNTERS
LINK_ERRORS = LINK_ERROR_COUNTERS
LINK_ERRORS_HW = LINK_ERROR_HW_COUNTERS
# counters that are normal above zero: quoted only when they rose between two reports
NORMAL_ONCE = ("link_down_events_phy",)
PCIE = ("rx_pci_signal_integrity", "tx_pci_signal_integrity")

# group -> what a count means, and the layout findings about the same port
WHAT = {
    "roce_loss": "RoCE packets lost or delivered out of order, and the retransmissions after them: the fabric is "
                 "not lossless for this traffic",
    "discards": "packets dropped for lack of buffers: RoCE traffic lost (PFC off, or on another priority than "
                "RoCE's)",
    "pause_storm": "the port paused its peer so long that pause-storm protection fired (pauses stopped, drops "
                   "followed)",
    "pause": "pause (PFC) frames: the fabric is congested and holds the port back",
    "link_errors": "physical-layer errors on the link (cable, transceiver or switch port)",
    "pcie": "PCIe link recoveries of the adapter (signal integrity of its slot or riser)",
}
LAYOUT_RULES = {"roce_loss": ("F06",), "discards": ("F06",), "pause_storm": ("F06",), "pause": ("F06",),
                "link_errors": ("F09",), "pcie": ("P06",), "gid": ("F05",)}
ROCE_GROUPS = frozenset(("roce_loss", "discards", "pause_storm", "pause"))
LINK_GROUPS = frozenset(("link_errors", "pcie"))


@dataclass
class Sample:
    """One report of a host: its evidence sections (read when first asked for: a healthy run asks for
    none of them) and where it comes from."""

    source: str
    texts: dict[str, str] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    _parsed: dict[str, dict | None] = field(default_factory=dict)
    _lines: dict[str, list[str]] = field(default_factory=dict)
    values: dict | None = None  # _values(), once

    def file(self, kind: str) -> str:
        return f"{self.source}: {kind}"

    def parsed(self, kind: str) -> dict | None:
        """The parser's result of section ``kind`` (``to_jsonable``), or None (absent or unreadable)."""
        if kind not in self._parsed:
            self._parsed[kind] = None
            text = self.texts.get(kind)
            if text is not None:
                try:
                    self._parsed[kind] = to_jsonable(KINDS[kind].parse(text))
                except ParseError as exc:
                    self.unreadable[kind] = f"line {exc.line_no}: {exc.reason}"
        return self._parsed[kind]

    def lines(self, kind: str) -> list[str] | None:
        """The lines of section ``kind`` as sent (None when absent or unreadable)."""
        if self.parsed(kind) is None:
            return None
        if kind not in self._lines:
            self._lines[kind] = self.texts[kind].replace("\r\n", "\n").replace("\r", "\n").split("\n")
        return self._lines[kind]


@dataclass
class NodeEvidence:
    """A run host's samples: ``samples[0]`` in force at the run, ``samples[1]`` (optional) the next."""

    host: str
    samples: list[Sample]

    @property
    def last(self) -> Sample:
        return self.samples[-1]

    @property
    def earlier(self) -> Sample | None:
        return self.samples[0] if len(self.samples) > 1 else None


@dataclass(frozen=True)
class Reading:
    """One counter of one port, as the last sample holds it (``earlier``: the first sample's value)."""

    host: str
    ca: str | None
    netdev: str | None
    counter: str
    value: int
    earlier: int | None
    group: str
    file: str
    line: int
    text: str

    @property
    def rose(self) -> bool:
        return self.earlier is not None and self.value > self.earlier

    @property
    def port_words(self) -> str:
        return ", ".join(x for x in (self.netdev, self.ca) if x) or "a port"

    def means(self, earlier_source: str | None) -> str:
        if self.rose:
            head = (f"{self.counter} rose by {self.value - self.earlier} ({self.earlier} -> {self.value}) since "
                    f"{earlier_source or 'the earlier report'}")
        else:
            head = f"{self.counter} {self.value} since the counters were last cleared (one report)"
        return f"{head} on {self.port_words}: {WHAT[self.group]}"


# --------------------------------------------------------------------------------------------- reading


def read_node_evidence(host_sections: Mapping[str, Sequence[Mapping]] | None) -> dict[str, NodeEvidence]:
    """``{host: NodeEvidence}`` of the evidence sections given per run host (see the module docstring)."""
    out: dict[str, NodeEvidence] = {}
    for host, samples in (host_sections or {}).items():
        read = [_sample(s) for s in samples or [] if isinstance(s, Mapping)]
        read = [s for s in read if s.texts]
        if read:
            out[host] = NodeEvidence(host, read[:2])
    return out


def _sample(raw: Mapping) -> Sample:
    texts = {k: v for k, v in (raw.get("sections") or {}).items() if k in NODE_KINDS and isinstance(v, str) and v.strip()}
    return Sample(source=str(raw.get("source") or "the host's report"), texts=texts)


_IB_CA_RE = re.compile(r"^ca (\S+)\s*$")
_IB_COUNTER_RE = re.compile(r"^port (\d+) (counter|hw_counter) (\S+) (\d+)\s*$")


def _ib_counter_values(sample: Sample) -> dict[tuple[str, str], tuple[int, int, str | None]]:
    """``{(CA, counter): (value, line, link layer)}`` of the ``ib_counters`` section (port 1 first:
    the ports of one CA are listed in order and a counter is kept from the first)."""
    lines = sample.lines("ib_counters")
    if not lines:
        return {}
    layers = {(p["ca"], p["port"]): p.get("link_layer") for p in sample.parsed("ib_counters").get("ports") or []}
    out: dict[tuple[str, str], tuple[int, int, str | None]] = {}
    ca = None
    for no, line in enumerate(lines, 1):
        text = line.strip()
        m = _IB_CA_RE.match(text)
        if m:
            ca = m.group(1)
            continue
        m = _IB_COUNTER_RE.match(text)
        if m and ca is not None:
            out.setdefault((ca, m.group(3)), (int(m.group(4)), no, layers.get((ca, int(m.group(1))))))
    return out


_STORM_RE = re.compile(r"pause_storm_(?:warning|error)_events$")
_PFC_RE = re.compile(r"(?:_prio\d_pause|_pfc_ena_frames_pri\d|_priority_\d_xoff(?:_rx|_tx)?(?:\.nic)?)$")


def _ethtool_values(sample: Sample) -> dict[tuple[str | None, str | None, str], tuple[int, int, str]]:
    """``{(CA, netdev, counter): (value, line, group)}`` of the ``ethtool_stats`` counters topoweb reads."""
    res = sample.parsed("ethtool_stats")
    if not res:
        return {}
    out = {}
    owners = None  # a pasted ethtool -S names no RDMA device: the report's show_gids says whose netdev it is
    for i in res.get("interfaces") or []:
        ca = i.get("ca")
        if ca is None and i.get("name"):
            if owners is None:
                owners = {g.get("netdev"): g.get("ca") for g in (sample.parsed("show_gids") or {}).get("gids") or []
                          if g.get("netdev")}
            ca = owners.get(i["name"])
        groups = {name: "discards" for name in i.get("discards") or {}}
        groups.update({name: ("pcie" if name in PCIE else "link_errors") for name in i.get("errors") or {}})
        pause = i.get("pause") or {}
        for key in ("rx_counter", "tx_counter"):
            if pause.get(key):
                groups[pause[key]] = "pause"
        for name in i.get("counters") or {}:
            if not ("pause" in name or "pfc" in name or "xoff" in name):  # a cheap test: mlx5 prints ~1000 counters
                continue
            if _STORM_RE.search(name):
                groups[name] = "pause_storm"
            elif _PFC_RE.search(name):
                groups[name] = "pause"
        for name, group in groups.items():
            if name in i["counters"]:
                out[(ca, i.get("name"), name)] = (i["counters"][name], i["counter_lines"][name], group)
    return out


def _ib_group(counter: str) -> str | None:
    if counter in ROCE_LOSS:
        return "roce_loss"
    if counter in LINK_ERRORS or counter in LINK_ERRORS_HW:
        return "link_errors"
    return None


def _values(sample: Sample) -> dict[tuple, tuple]:
    """Every counter topoweb reads in one sample: ``{(kind, CA, netdev, counter): (value, line, group)}``."""
    if sample.values is not None:
        return sample.values
    out = {}
    for (ca, counter), (value, line, layer) in _ib_counter_values(sample).items():
        group = _ib_group(counter)
        if group == "roce_loss" and (layer or "").lower() == "infiniband":
            continue  # RoCE transport counters of an InfiniBand port are not RoCE loss
        if group:
            out[("ib_counters", ca, None, counter)] = (value, line, group)
    for (ca, netdev, counter), (value, line, group) in _ethtool_values(sample).items():
        out[("ethtool_stats", ca, netdev, counter)] = (value, line, group)
    sample.values = out
    return out


def counter_evidence(facts: RunFacts, host: str, cas: set[str] | None, groups: frozenset | set) -> list[Reading]:
    """The counters of ``host``'s ports (of RDMA devices ``cas``; None: every port) in ``groups``
    worth quoting: those that rose between its two reports, or, with one report, those above zero
    that are never normal (see the module docstring). The worst first (largest rise or count)."""
    node = facts.node_evidence.get(host)
    if node is None:
        return []
    last = _values(node.last)
    before = _values(node.earlier) if node.earlier else None
    out = []
    for key, (value, line, group) in last.items():
        kind, ca, netdev, counter = key
        if group not in groups or (cas is not None and ca not in cas) or not value:
            continue
        earlier = before.get(key, (None,))[0] if before is not None else None
        if before is not None and (earlier is None or value <= earlier):
            continue
        if before is None and (group == "pause" or counter in NORMAL_ONCE):
            continue
        text = node.last.lines(kind)[line - 1].strip()
        out.append(Reading(host, ca, netdev, counter, value, earlier, group, node.last.file(kind), line, text))
    out.sort(key=lambda r: (-(r.value - (r.earlier or 0)), r.file, r.line))
    return out


def cite_readings(facts: RunFacts, readings: list[Reading], cause: str, limit: int = 4) -> list[int]:
    """Quote the first ``limit`` readings as evidence of ``cause``; their indexes."""
    out = []
    for r in readings[:limit]:
        node = facts.node_evidence.get(r.host)
        earlier = node.earlier.source if node is not None and node.earlier else None
        out.append(facts.quote(r.file, r.line, r.text, r.means(earlier), cause))
    return out


def counter_words(readings: list[Reading]) -> str:
    """``rx_discards_phy rose by 1822 (ens110np0, mlx5_2)``, the first three readings."""
    parts = []
    for r in readings[:3]:
        what = f"rose by {r.value - r.earlier}" if r.rose else f"{r.value}"
        parts.append(f"{r.counter} {what} ({r.port_words})")
    return "; ".join(parts)


def layout_ties(facts: RunFacts, host: str, readings: list[Reading], extra: tuple[str, ...] = ()) -> list[dict]:
    """The layout findings of ``host`` about the readings' ports (F05/F06/F09...)."""
    rules = tuple(dict.fromkeys([*extra, *(x for r in readings for x in LAYOUT_RULES[r.group])]))
    devices = {r.ca for r in readings if r.ca} or None
    return facts.layout_findings(host, rules, devices) if rules else []


# --------------------------------------------------------------------------------------------- GIDs


_GID_ROW_RE = re.compile(r"^(\S+)\s+(\d+)\s+(\d+)\s+[0-9a-fA-F]{4}:")


def gid_evidence(facts: RunFacts, host: str, ca: str, index: int | None) -> tuple[str | None, list[tuple]]:
    """(problem in words or None, ``[(file, line, text)]``) of ``ca``'s GID table in ``host``'s
    ``show_gids``: with ``index`` (the GID index in use), the row there when it is missing,
    link-local, RoCE v1 or not IPv4; without, the port's rows when it has no RoCE v2 IPv4 GID at
    all (what NCCL picks by default: ``ncclIbGetGidIndex`` takes ``NCCL_IB_GID_INDEX`` when set, else the
    first GID of the wanted family and RoCE version that is configured and not link-local, else index
    0; src/transport/net_ib/connect.cc L213-335 of v2.30.7-1; F05). InfiniBand ports are left out (the
    layout's link layer, else: only RoCE GIDs carry a network interface, as F05 reads them)."""
    node = facts.node_evidence.get(host)
    sample = node.last if node else None
    lines = sample.lines("show_gids") if sample else None
    if not lines:
        return None, []
    rows = [g for g in sample.parsed("show_gids").get("gids") or [] if g.get("ca") == ca]
    layer = next((n.get("link_layer") for n in facts.doc(host).get("nics") or [] if n.get("name") == ca), None)
    if not rows or layer == "InfiniBand" or (layer is None and not any(g.get("netdev") for g in rows)):
        return None, []  # an InfiniBand port (only RoCE GIDs carry a network interface)
    where = {}
    for no, line in enumerate(lines, 1):
        m = _GID_ROW_RE.match(line.strip())
        if m and m.group(1) == ca:
            where.setdefault(int(m.group(3)), no)
    file = sample.file("show_gids")

    def quoted(entries: list[dict]) -> list[tuple]:
        return [(file, where[g["index"]], lines[where[g["index"]] - 1].strip()) for g in entries if g["index"] in where]

    routable = [g for g in rows if g.get("version") == "v2" and g.get("family") == "ipv4"]
    if index is not None:
        at = [g for g in rows if g.get("index") == index]
        if not at:
            return (f"{ca} has no GID at index {index} (show_gids lists {', '.join(str(g['index']) for g in rows)})",
                    quoted(rows[:4]))
        g = at[0]
        if g.get("version") == "v2" and g.get("family") == "ipv4":
            return None, []
        what = ("link-local (never routed)" if g.get("family") == "link_local" else
                "RoCE v1" if g.get("version") == "v1" else "not an IPv4 address")
        hint = f"; its RoCE v2 IPv4 GID is index {routable[0]['index']}" if routable else "; it has no RoCE v2 IPv4 GID"
        return f"{ca}'s GID at index {index} is {what}{hint}", quoted(at)
    if routable:
        return None, []
    listed = ", ".join(f"{g['index']} {g['version']}" for g in rows)
    return (f"{ca} has no RoCE v2 IPv4 GID (only {listed}): NCCL falls back to a link-local one",
            quoted(rows[:4]))


# --------------------------------------------------------------------------------------------- which ports


def run_cas(facts: RunFacts, host: str) -> set[str] | None:
    """The RDMA devices the run used on ``host``: those it names (NCCL's NICs, perftest's device);
    else, for a run across nodes, the layout's compute NICs; None when it cannot be told."""
    for h in facts.hosts:
        if h["host"] == host and h.get("nics"):
            return {str(n).split(":")[0] for n in h["nics"]}
    if multi_node(facts):
        names = {n.get("name") for n in facts.doc(host).get("nics") or [] if n.get("compute")}
        return {n for n in names if n} or None
    return None


def troubled(facts: RunFacts) -> bool:
    """Whether the run shows a problem the hosts' counters may explain: below its bar (85 % of
    expected; perftest 90 % of the line rate), or a log reporting errors."""
    if facts.efficiency is not None:
        return facts.efficiency < (PERFTEST_HEALTHY_AT if facts.kind == "perftest" else HEALTHY_AT)
    return bool((facts.log or {}).get("errors"))


def rule_node_counters(facts: RunFacts) -> list[dict]:
    """A collective across nodes below its layout (or a log with errors) whose hosts' ports counted
    RoCE loss (T1: discards, pause storms, RoCE retransmissions) or link errors (T10: a degraded
    link on that node), quoting the report lines."""
    if facts.kind not in ("nccl_tests", "nccl_log") or not multi_node(facts) or not troubled(facts):
        return []
    out = []
    for h in facts.known():
        host = h["host"]
        cas = run_cas(facts, host)
        roce = counter_evidence(facts, host, cas, ROCE_GROUPS)
        if roce:
            rose = any(r.rose for r in roce)
            ev = cite_readings(facts, roce, "T1")
            out.append(finding(
                "T1", "HIGH" if rose else "MED", f"RoCE packet loss on {host}",
                f"{host}'s RoCE ports counted {counter_words(roce)}"
                + (" across the run" if rose else " (one report: since the counters were last cleared)") +
                ": packets are lost or paused on the fabric, and RDMA falls far below the line rate (PFC/ECN off or "
                "misconfigured for RoCE's traffic class).",
                "Configure PFC/ECN (DCQCN) on the lossless class end to end (switches and hosts, NCCL_IB_TC matching "
                "it); check the switch QoS/ACL policy; compare ethtool -S before and after a run.", ev,
                hosts=[host], layout=layout_ties(facts, host, roce)))
        link = counter_evidence(facts, host, cas, LINK_GROUPS)
        if link:
            rose = any(r.rose for r in link)
            ev = cite_readings(facts, link, "T10")
            out.append(finding(
                "T10", "HIGH" if rose else "MED", f"Link errors on {host}",
                f"{host}'s ports counted {counter_words(link)}"
                + (" across the run" if rose else " (one report: since the counters were last cleared)") +
                ": a degraded link on one node retransmits and every job that uses it waits.",
                f"Replace the cable or transceiver of that port (and check the switch port); drain {host} and run the "
                "same test without it to confirm.", ev, hosts=[host], layout=layout_ties(facts, host, link)))
    return out
