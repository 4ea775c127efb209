"""The host facts stage: CPU (NUMA) nodes, sockets, the CPU class NCCL plans with, the agent's
host_info (GPUDirect RDMA modules, IOMMU, sockets) and the sources that would show NVLink."""

from __future__ import annotations

from typing import Any

from apps.domain import devices
from apps.domain.assemble.report import Report, get_field, get_list, to_int, to_numa
from apps.domain.facts import CpuFact, PciDeviceFact
from apps.domain.parsers.host_info import iommu_words

__all__ = ["cpus", "cpu_class", "host_info", "nvlink_sources"]


def cpus(rep: Report) -> tuple[list[CpuFact], int | None, int | None]:
    """CPU (NUMA) nodes, sockets and NUMA nodes with CPUs, when a source lists them all."""
    out: list[CpuFact] = []
    x = rep.results.get("nccl_topo_xml")
    for c in get_list(x, "cpus"):
        out.append(CpuFact(numa=to_numa(get_field(c, "numa_id")), affinity=get_field(c, "affinity"),
                           vendor=_vendor(get_field(c, "vendor"), get_field(c, "arch")),
                           family_id=to_int(get_field(c, "family_id")), model_id=to_int(get_field(c, "model_id")),
                           arch=get_field(c, "arch")))
    h = rep.results.get("hwloc_xml")
    sockets = numa_count = None
    if h:
        numas = get_list(h, "numa_nodes")
        if not out:
            out = [CpuFact(numa=to_numa(get_field(n, "os_index")), affinity=get_field(n, "cpuset"),
                           package=to_int(get_field(n, "package_os_index"))) for n in numas
                   if _has_cpus(get_field(n, "cpuset"))]
        # hwloc lists every package and NUMA node (GPU memory NUMA nodes have no CPUs)
        sockets = len(get_list(h, "packages")) or None
        numa_count = sum(1 for n in numas if _has_cpus(get_field(n, "cpuset"))) or None
    return out, sockets, numa_count


def cpu_class(rep: Report, cpus: list[CpuFact], pci: list[PciDeviceFact]) -> tuple[str | None, int | None, int | None, str | None]:
    """(NCCL CPU class, x86 model, family, words): host_info > NCCL XML > hwloc > PCI root complex."""
    hi = rep.results.get("host_info")
    if hi and _vendor(get_field(hi, "cpu_vendor"), None):
        # the live machine's /proc/cpuinfo wins over a (possibly static) topology file
        return (_vendor(get_field(hi, "cpu_vendor"), None), to_int(get_field(hi, "cpu_model")), to_int(get_field(hi, "cpu_family")),
                get_field(hi, "cpu_model_name") or "host_info (/proc/cpuinfo)")
    xml = next((c for c in cpus if c.vendor), None)
    if xml is not None:
        return xml.vendor, xml.model_id, xml.family_id, "NCCL topology XML <cpu>"
    h = rep.results.get("hwloc_xml")
    if h:
        for p in get_list(h, "packages"):
            found = devices.cpu_from_name(get_field(p, "cpu_model"))
            if found:
                return found[0], found[1], None, f"{found[2].strip()} (hwloc package)"
        arch = _vendor(None, get_field(h, "architecture"))
        if arch in ("arm", "power"):
            return arch, None, None, f"{get_field(h, 'architecture')} (hwloc)"
    return _cpu_from_root_complex(pci)


def nvlink_sources(rep: Report) -> tuple[str, ...]:
    """Sources that would show any NVLink the GPUs have: nvidia-smi topo -m and nvlink -s, an
    NCCL topology *dump* (its ``<gpu>`` elements are NCCL's own, and NCCL writes the NVLinks it
    found through NVML under them; hand-written NCCL_TOPO_FILE files list bare GPU ``<pci>``)
    and hwloc 2+ with GPUs found through NVML (its NVLinkBandwidth matrix)."""
    out = [k for k in ("nvidia_smi_topo", "nvidia_smi_nvlink") if rep.results.get(k)]
    x = rep.results.get("nccl_topo_xml")
    if x and any(get_field(g, "declared") for g in get_list(x, "gpus")):
        out.append("nccl_topo_xml")
    if _hwloc_nvml(rep.results.get("hwloc_xml")):
        out.append("hwloc_xml")
    return tuple(out)


def host_info(rep: Report) -> dict[str, Any]:
    """The agent's host facts (GPUDirect RDMA modules, IOMMU, sockets), as HostFacts fields."""
    hi = rep.results.get("host_info")
    if not hi:
        return {}
    peer, dmabuf = get_field(hi, "peermem"), get_field(hi, "dmabuf")
    gdr = True if (peer and peer != "none") or dmabuf is True else (
        False if peer == "none" and dmabuf is False else None)
    groups = get_field(hi, "iommu_groups", default={}) or {}
    words = iommu_words(get_field(hi, "cmdline", default=""))
    return dict(
        sockets=to_int(get_field(hi, "sockets")), gdr_module=gdr,
        gdr_module_detail=f"peermem {peer or 'unknown'}, DMA-BUF "
                          f"{'unknown' if dmabuf is None else 'yes' if dmabuf else 'no'}",
        iommu_translated=tuple(sorted(b for b, t in groups.items() if str(t).lower() in ("dma", "dma-fq"))),
        iommu_cmdline=" ".join(words) or None, virtualized=get_field(hi, "virtualized"), host_info=True,
        numa_count=to_int(get_field(hi, "numa_nodes")))


def _vendor(vendor: Any, arch: Any) -> str | None:
    """NCCL's CPU class from a vendor string (``GenuineIntel``, ``AuthenticAMD``) or an
    architecture (``arm64``, ``aarch64``, ``ppc64``), as NCCL's kvDictCpuArch/Vendor (topo.cc L704-711)."""
    text = f"{vendor or ''} {arch or ''}".lower()
    if "intel" in text:
        return "intel"
    if "amd" in text:
        return "amd"
    if "power" in text or "ibm" in text or "ppc" in text:
        return "power"
    if "arm" in text or "aarch64" in text:
        return "arm"
    if "zhaoxin" in text or "centaur" in text or "shanghai" in text:
        return "zhaoxin"
    return None


def _hwloc_nvml(h: Any) -> bool:
    """hwloc 2+ found GPUs through its NVML backend (``nvml*`` OS devices), so its NVLinkBandwidth
    matrix would list every NVLink."""
    if not h or (to_int(get_field(h, "format_major")) or 0) < 2:
        return False
    return any(str(get_field(od, "name", default="")).startswith("nvml")
               for d in get_list(h, "pci_devices") for od in get_list(d, "os_devices"))


def _has_cpus(cpuset: Any) -> bool:
    """An hwloc cpuset with a set bit (GPU-memory NUMA nodes have ``0x0``)."""
    return bool(cpuset) and any(c not in "0x," for c in str(cpuset).lower())


def _cpu_from_root_complex(pci: list[PciDeviceFact]) -> tuple[str | None, int | None, None, str | None]:
    """The CPU class from the host bridges and root ports of a PCI listing (a CPU's root complex
    carries its vendor: Intel, AMD, Ampere, NVIDIA for Grace, IBM for POWER). Hypervisors'
    emulated chipsets say nothing about the host and are skipped."""
    found: dict[str, tuple[str, int | None, str]] = {}
    for d in pci:
        if devices.is_virtual_device(d.name, d.vendor_id):
            return None, None, None, None
        root_function = (d.class_code == 0x0600 or "root port" in (d.port_type or "").lower()
                         or (d.root is not None and d.parent_bdf is None and d.kind in ("bridge", "root_port", "other")
                             and d.name and d.class_code in (None, 0x0600, 0x0604)))
        if not root_function:
            continue
        by_name = devices.cpu_from_name(d.name)
        by_vendor = devices.cpu_from_pci_vendor(d.vendor_id)
        if by_vendor and (not by_name or by_name[0] == by_vendor[0]):
            cls = by_vendor[0]
            model = by_name[1] if by_name else None
            found.setdefault(cls, (cls, model, by_vendor[1]))
            if model is not None and found[cls][1] is None:
                found[cls] = (cls, model, by_vendor[1])
    if len(found) != 1:
        return None, None, None, None
    cls, model, words = next(iter(found.values()))
    return cls, model, None, f"{words} (the PCI root complex)"
