"""How large one host may be: caps that keep any report from pinning a worker or a request.

The analysis grows with the cube of the devices on a host (every GPU pair, every GPU x NIC
route, the contention of every element): 8 GPUs and 8 NICs take ~30 ms, 32 GPUs and 64 NICs
~0.6 s, 64 x 64 ~3 s and 128 x 128 a minute (``docs/ingestion.md``, "Limits"). The caps sit far
above any real machine (the largest single hosts have 16 GPUs, 36 NIC ports, ~600 PCI functions),
and past them the report fails to parse with a reason that names the section and the cap.

``check_host_size(facts)`` raises ``ParseError``; ``check_labels(kind, line_no, line, labels)``
is the early check of a matrix header (``nvidia-smi topo -m``), before its rows are read.
"""

from __future__ import annotations

from collections.abc import Sequence

from apps.domain.errors import ParseError
from apps.domain.facts import HostFacts

MAX_GPUS = 32
MAX_NICS = 64  # NIC ports (an HCA with two ports counts twice)
MAX_PCI_FUNCTIONS = 4096

__all__ = ["MAX_GPUS", "MAX_NICS", "MAX_PCI_FUNCTIONS", "check_host_size", "check_labels"]

# The section named when a cap is passed: the first of these the report has.
_GPU_SOURCES = ("nvidia_smi_topo", "nvidia_smi_gpus", "nccl_topo_xml", "hwloc_xml", "lspci_verbose", "sysfs_pci",
                "lspci_tree")
_NIC_SOURCES = ("ibstat", "ibv_devinfo", "ibstatus", "sysfs_ib", "nvidia_smi_topo", "nccl_topo_xml", "hwloc_xml",
                "lspci_verbose", "sysfs_pci")
_PCI_SOURCES = ("lspci_verbose", "sysfs_pci", "lspci_tree", "hwloc_xml", "nccl_topo_xml")


def _too_many(what: str, count: int, cap: int, kind: str) -> ParseError:
    return ParseError(kind, 0, "", f"{count} {what} on one host; topoweb reads at most {cap} (a report of "
                                   "several machines, or a generated one? send one host per report)")


def _named(sources: Sequence[str], preferred: Sequence[str]) -> str:
    return next((k for k in preferred if k in sources), sources[0] if sources else "report")


def check_host_size(facts: HostFacts) -> None:
    """Raise ``ParseError`` when the host has more GPUs, NIC ports or PCI functions than the caps."""
    for what, count, cap, preferred in (("GPUs", len(facts.gpus), MAX_GPUS, _GPU_SOURCES),
                                        ("NIC ports", len(facts.nics), MAX_NICS, _NIC_SOURCES),
                                        ("PCI functions", len(facts.pci), MAX_PCI_FUNCTIONS, _PCI_SOURCES)):
        if count > cap:
            raise _too_many(what, count, cap, _named(facts.sources, preferred))


def check_labels(kind: str, line_no: int, line: str, labels: Sequence[str]) -> None:
    """Raise ``ParseError`` at a matrix header with more GPU or NIC columns than the caps."""
    gpus = sum(1 for label in labels if label.upper().startswith("GPU"))
    nics = len(labels) - gpus
    for what, count, cap in (("GPUs", gpus, MAX_GPUS), ("NICs", nics, MAX_NICS)):
        if count > cap:
            raise ParseError(kind, line_no, line[:200], f"the matrix has {count} {what} columns; topoweb reads at "
                                                        f"most {cap} on one host")
