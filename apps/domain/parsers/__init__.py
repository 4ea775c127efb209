"""Parsers for every section a node reports, one module per kind, and their registry.

Every module exposes ``parse(text) -> <frozen dataclass result>``; the result has a
``warnings`` tuple of strings naming anything recovered rather than read cleanly. Broken input
raises :class:`apps.domain.errors.ParseError` naming the line. ``detect(text) -> int`` scores
how sure the module is that ``text`` is its kind (0 = not mine, 100 = certain).

``KINDS`` maps the registry name (also the report section name and the agent's file name
``<kind>.txt``) to a :class:`Kind`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from apps.domain.errors import ParseError, UnknownKindError
from apps.domain.parsers._text import to_jsonable

__all__ = ["KINDS", "Kind", "parse", "detect_kind", "to_jsonable", "ParseError", "UnknownKindError"]


@dataclass(frozen=True)
class Kind:
    name: str
    module: str  # module under apps.domain.parsers
    function: str  # parse function in that module
    command: str  # the command (or file) whose output this kind reads
    detector: str = "detect"  # scoring function in that module

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
]
KINDS: dict[str, Kind] = {k.name: k for k in _ALL}


def parse(kind: str, text: str) -> Any:
    """Parse ``text`` as ``kind`` (a registry name, or ``"auto"`` to detect it first)."""
    if kind == "auto":
        kind = detect_kind(text)
    try:
        spec = KINDS[kind]
    except KeyError:
        raise UnknownKindError(f"unknown section kind {kind!r}; known kinds: {', '.join(KINDS)}") from None
    return spec.parse(text)


def detect_kind(text: str) -> str:
    """Name the kind of a pasted text, or raise :class:`UnknownKindError` saying why not."""
    if not text.strip():
        raise UnknownKindError("the text is empty")
    scores = []
    for spec in KINDS.values():
        try:
            score = spec.detect(text)
        except Exception:  # a detector must never break detection of the others
            score = 0
        if score > 0:
            scores.append((score, spec.name))
    if not scores:
        raise UnknownKindError(
            "cannot tell which command produced this text; expected one of: "
            + ", ".join(f"{k.name} ({k.command})" for k in KINDS.values())
        )
    scores.sort(reverse=True)
    return scores[0][1]
