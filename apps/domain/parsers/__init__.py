"""Parsers, one module per kind, and their registry.

Every module exposes ``parse(text) -> <frozen dataclass result>``; the result has a
``warnings`` tuple of strings naming anything recovered rather than read cleanly. Broken input
raises :class:`apps.domain.errors.ParseError` naming the line. ``detect(text) -> int`` scores
how sure the module is that ``text`` is its kind (0 = not mine, 100 = certain).

Each kind belongs to one family:

* ``host``: what a node says about itself, the sections of a node report. ``KINDS`` maps these
  registry names (also the report section names and the agent's file names ``<kind>.txt``) to
  their :class:`Kind`; a report may hold these and no others.
* ``run``: a measurement people make (nccl-tests, NCCL logs, perftest, P2P tests).
* ``fabric``: what the InfiniBand/Ethernet fabric says about itself (ibnetdiscover, iblinkinfo...).

``ALL_KINDS`` holds every family; ``parse`` and ``detect_kind`` read any of them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from apps.domain.errors import ParseError, UnknownKindError
from apps.domain.parsers.text import to_jsonable

__all__ = ["KINDS", "ALL_KINDS", "FAMILIES", "Kind", "kinds_of", "parse", "detect_kind", "to_jsonable", "ParseError",
           "UnknownKindError"]


@dataclass(frozen=True)
class Kind:
    name: str
    module: str  # module under apps.domain.parsers
    function: str  # parse function in that module
    command: str  # the command (or file) whose output this kind reads
    detector: str = "detect"  # scoring function in that module
    family: str = "host"  # "host" (report sections), "run" (measurements) or "fabric"

    def _mod(self):
        return importlib.import_module(f"apps.domain.parsers.{self.module}")

    def parse(self, text: str) -> Any:
        return getattr(self._mod(), self.function)(text)

    def detect(self, text: str) -> int:
        fn: Callable[[str], int] | None = getattr(self._mod(), self.detector, None)
        return int(fn(text)) if fn else 0


_ALL = [
    Kind("nvidia_smi_topo", "nvidia_smi_topo", "parse", "nvidia-smi topo -m"),
    Kind("nvidia_smi_topo_pci", "nvidia_smi_topo", "parse_pci", "nvidia-smi topo -mp", "detect_pci"),
    Kind("nvidia_smi_p2p", "nvidia_smi_topo", "parse_p2p", "nvidia-smi topo -p2p r|w|n|a|p", "detect_p2p"),
    Kind("nvidia_smi_gpus", "nvidia_smi_gpus", "parse",
         "nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,... --format=csv"),
    Kind("nvidia_smi_nvlink", "nvidia_smi_nvlink", "parse", "nvidia-smi nvlink -s"),
    Kind("lspci_tree", "lspci_tree", "parse", "lspci -D -tv"),
    Kind("lspci_verbose", "lspci_verbose", "parse", "lspci -D -vvv"),
    Kind("ibstat", "ibstat", "parse", "ibstat"),
    Kind("ibstatus", "ibstatus", "parse", "ibstatus"),
    Kind("ibv_devinfo", "ibv_devinfo", "parse", "ibv_devinfo -v"),
    Kind("sysfs_pci", "sysfs_pci", "parse", "topoweb agent: /sys/bus/pci/devices listing"),
    Kind("sysfs_ib", "sysfs_ib", "parse", "topoweb agent: /sys/class/infiniband listing"),
    Kind("nccl_topo_xml", "nccl_topo_xml", "parse", "NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE XML"),
    Kind("hwloc_xml", "hwloc_xml", "parse", "lstopo --of xml"),
    Kind("host_info", "host_info", "parse", "topoweb agent: host facts (CPU, driver, IOMMU, GDR modules, NCCL env)"),
    Kind("nvidia_smi_q", "nvidia_smi_q", "parse", "nvidia-smi -q"),
    Kind("nvidia_smi_nvlink_errors", "nvidia_smi_nvlink_errors", "parse", "nvidia-smi nvlink -e"),
    Kind("show_gids", "show_gids", "parse", "show_gids (mlnx-tools)"),
    Kind("ib_counters", "ib_counters", "parse",
         "topoweb agent: /sys/class/infiniband/*/ports/*/counters and hw_counters listing"),
    Kind("ethtool_stats", "ethtool_stats", "parse", "ethtool -S <netdev> (RoCE ports: pause and discard counters)"),
    Kind("ibnetdiscover", "ibnetdiscover", "parse", "ibnetdiscover [-p] [--node-name-map F]", family="fabric"),
    Kind("iblinkinfo", "iblinkinfo", "parse", "iblinkinfo [-l]", family="fabric"),
    Kind("ibswitches", "ibnodes", "parse_switches", "ibswitches", "detect_switches", family="fabric"),
    Kind("ibhosts", "ibnodes", "parse_hosts", "ibhosts", "detect_hosts", family="fabric"),
    Kind("ibnodes", "ibnodes", "parse", "ibnodes (or ibnetdiscover -l)", family="fabric"),
    Kind("lldpctl_json", "lldp", "parse_json", "lldpctl -f json|json0 (lldpcli -f json show neighbors)", "detect_json",
         family="fabric"),
    Kind("lldpcli_neighbors", "lldp", "parse_text", "lldpcli show neighbors (lldpctl)", "detect_text",
         family="fabric"),
    Kind("ibdev2netdev", "ibdev2netdev", "parse", "ibdev2netdev [-v]", family="fabric"),
    Kind("nccl_tests", "nccl_tests", "parse", "nccl-tests *_perf (all_reduce_perf, all_gather_perf, ...)", family="run"),
    Kind("nccl_log", "nccl_log", "parse", "NCCL_DEBUG=INFO output of any NCCL job", family="run"),
    Kind("perftest", "perftest", "parse", "ib_write_bw / ib_read_bw / ib_send_bw (perftest)", family="run"),
    Kind("p2p_bandwidth", "p2p_bandwidth", "parse", "p2pBandwidthLatencyTest / nvbandwidth", family="run"),
]
FAMILIES = ("host", "run", "fabric")
ALL_KINDS: dict[str, Kind] = {k.name: k for k in _ALL}
KINDS: dict[str, Kind] = {k.name: k for k in _ALL if k.family == "host"}
assert all(k.family in FAMILIES for k in _ALL)


def kinds_of(family: str) -> dict[str, Kind]:
    """The registry entries of one family (``"host"``, ``"run"`` or ``"fabric"``)."""
    return {k.name: k for k in _ALL if k.family == family}


def parse(kind: str, text: str) -> Any:
    """Parse ``text`` as ``kind`` (a registry name of any family, or ``"auto"`` to detect it first)."""
    if kind == "auto":
        kind = detect_kind(text)
    try:
        spec = ALL_KINDS[kind]
    except KeyError:
        raise UnknownKindError(f"unknown kind {kind!r}; known kinds: {', '.join(ALL_KINDS)}") from None
    return spec.parse(text)


def detect_kind(text: str, family: str | None = None) -> str:
    """Name the kind of a pasted text (of ``family``, or of any), or raise
    :class:`UnknownKindError` saying why not."""
    if not text.strip():
        raise UnknownKindError("the text is empty")
    candidates = ALL_KINDS if family is None else kinds_of(family)
    scores = []
    for spec in candidates.values():
        try:
            score = spec.detect(text)
        except Exception:  # a detector must never break detection of the others
            score = 0
        if score > 0:
            scores.append((score, spec.name))
    if not scores:
        raise UnknownKindError(
            "cannot tell which command produced this text; expected one of: "
            + ", ".join(f"{k.name} ({k.command})" for k in candidates.values())
        )
    scores.sort(reverse=True)
    return scores[0][1]
