"""HostFacts: one normalised, frozen view of a host, joined by canonical PCI address.

``apps.domain.assemble.assemble(results, hostname)`` builds it from the parser results of a node
report (``nvidia-smi topo -m``, ``nvidia-smi --query-gpu=...``, ``nvidia-smi nvlink -s``,
``lspci -D -tv``/``-vvv``, the sysfs PCI and InfiniBand listings, ``ibstat``/``ibstatus``/
``ibv_devinfo``, NCCL's topology dump, ``lstopo --of xml``). Every device is keyed by its
canonical BDF ``dddd:bb:dd.f`` (domain.md 4.1/4.2); GPUs are also named ``GPU<i>`` (nvidia-smi
index, as in topo -m) and NIC ports by their HCA name (``mlx5_0``) or, when no HCA name is known,
by their topo -m label (``NIC3``).

Nothing here parses text or builds graphs: ``hostgraph.build_host_graph(facts)`` does that.
Sources that disagree are kept as :class:`Disagreement` records for the findings rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_XML_SOURCES = frozenset({"nccl_topo_xml", "hwloc_xml"})

__all__ = ["GpuFact", "NicFact", "PciDeviceFact", "NvlinkPair", "CpuFact", "Disagreement", "HostFacts"]


@dataclass(frozen=True)
class GpuFact:
    """One GPU. ``name`` is ``GPU<index>``; link fields come from ``nvidia-smi --query-gpu``."""

    index: int
    name: str
    bdf: str | None = None
    uuid: str | None = None
    model: str | None = None
    numa: int | None = None
    cpu_affinity: str | None = None
    compute_cap: str | None = None
    pstate: str | None = None
    link_gen_current: int | None = None
    link_gen_max: int | None = None
    link_gen_host_max: int | None = None
    link_width_current: int | None = None
    link_width_max: int | None = None
    nvlink_active: int | None = None  # nvidia-smi nvlink -s: active links
    nvlink_total: int | None = None  # links listed (active + inactive)
    nvlink_link_gbps: tuple[float, ...] = ()  # raw per-link rates of the active links
    gdr: bool | None = None  # NCCL XML <gpu gdr=...>: the GPU supports GPUDirect RDMA
    gpu_numa_id: int | None = None  # topo -m "GPU NUMA ID": GPU memory is a NUMA node (Grace C2C)
    c2c: bool = False  # attached to its CPU through NVLink-C2C (Grace), not PCIe


@dataclass(frozen=True)
class NicFact:
    """One HCA port (a dual-port card is two PCI functions, each its own ``mlx5_N``)."""

    name: str  # HCA name, or the topo -m label when the HCA is unknown
    label: str | None = None  # topo -m column label (NIC3 or mlx5_3)
    device: str | None = None  # HCA name (mlx5_3)
    port: int | None = None
    bdf: str | None = None
    state: str | None = None
    phys_state: str | None = None
    rate_gbps: float | None = None
    width: str | None = None
    link_layer: str | None = None
    numa: int | None = None
    base_lid: int | None = None
    sm_lid: int | None = None
    netdevs: tuple[str, ...] = ()
    speed_mbps: int | None = None  # NCCL XML net speed
    gdr: bool | None = None  # NCCL XML gdr flag
    speed: str | None = None  # lane speed name (NDR, HDR, EDR) where a source says it
    firmware: str | None = None  # the HCA's firmware version
    port_guid: str | None = None
    node_guid: str | None = None
    # how NCCL reaches it: "verbs" (NCCL's IB/RoCE transport), "ofi" (a libfabric net plugin:
    # AWS EFA, HPE Slingshot); see assemble.NET_PLUGIN_NICS
    transport: str = "verbs"

    @property
    def active(self) -> bool | None:
        return None if self.state is None else self.state.lower() == "active"


@dataclass(frozen=True)
class PciDeviceFact:
    """One PCI function with its place in the tree and its link.

    ``kind``: "root_port", "upstream_port", "downstream_port", "bridge", "gpu", "nic", "nvswitch",
    "nvme", "other". ``ancestry`` lists the bridge BDFs from the root port down to the parent.
    ``root`` names the host bridge (root complex) as ``dddd:bb`` (sysfs ``pci0000:17`` -> ``0000:17``).
    Link fields: ``gen``/``width`` = LnkSta or sysfs current, ``max_gen``/``max_width`` = LnkCap or
    sysfs max.
    """

    bdf: str
    kind: str = "other"
    parent_bdf: str | None = None
    ancestry: tuple[str, ...] = ()
    root: str | None = None
    class_code: int | None = None
    vendor_id: int | None = None
    device_id: int | None = None
    subsystem_vendor_id: int | None = None
    subsystem_device_id: int | None = None
    name: str | None = None
    port_type: str | None = None
    numa: int | None = None
    driver: str | None = None
    gen: int | None = None
    width: int | None = None
    max_gen: int | None = None
    max_width: int | None = None
    link_gbs: float | None = None  # link bandwidth as reported in GB/s per direction (hwloc pci_link_speed)
    secondary_bus: int | None = None
    subordinate_bus: int | None = None
    acs_ctl: tuple[str, ...] = ()  # flags enabled in ACSCtl (e.g. "ReqRedir", "CmpltRedir")
    capabilities_denied: bool = False
    local_cpulist: str | None = None
    source: str = ""


@dataclass(frozen=True)
class NvlinkPair:
    """``links`` NVLinks between ``a`` and ``b`` (GPU names, or ``nvswitch`` for the fabric)."""

    a: str
    b: str
    links: int
    source: str
    fabric: str = "nvlink"  # "nvlink", or "xgmi" (AMD Infinity Fabric links, NCCL's LINK_NVL in RCCL)
    gbs: float | None = None  # the link bandwidth the source states (hwloc XGMIBandwidth), GB/s


@dataclass(frozen=True)
class CpuFact:
    """One CPU NUMA node (NCCL ``<cpu>``, hwloc NUMANode, or a topo -m NUMA affinity)."""

    numa: int | None
    affinity: str | None = None
    vendor: str | None = None  # "intel", "amd", "arm", "power"
    family_id: int | None = None
    model_id: int | None = None
    arch: str | None = None
    package: int | None = None  # the socket (hwloc package) this NUMA node belongs to


@dataclass(frozen=True)
class Disagreement:
    """Two sources describing the same thing differently (never fatal; findings may report it)."""

    subject: str  # e.g. "GPU0-mlx5_0"
    message: str
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostFacts:
    """Everything known about one host, joined; see the module docstring."""

    hostname: str
    sources: tuple[str, ...] = ()
    gpus: tuple[GpuFact, ...] = ()
    nics: tuple[NicFact, ...] = ()
    pci: tuple[PciDeviceFact, ...] = ()
    nvlink_pairs: tuple[NvlinkPair, ...] = ()
    cpus: tuple[CpuFact, ...] = ()
    cpu_vendor: str | None = None  # "intel", "amd", "arm", "power", "zhaoxin" (NCCL's CPU classes)
    cpu_model: int | None = None
    cpu_family: int | None = None
    cpu_name: str | None = None  # what the CPU is in words ("NVIDIA Grace", "AMD EPYC") and where it was read
    gpu_model: str | None = None
    # topo -m as printed: labels in order, {row: {col: token}} with tokens normalised (SOC -> SYS)
    topo_labels: tuple[str, ...] = ()
    topo: dict = field(default_factory=dict)
    topo_pci: dict = field(default_factory=dict)  # nvidia-smi topo -mp
    p2p: dict = field(default_factory=dict)  # nvidia-smi topo -p2p: {mode: {row: {col: token}}}
    topo_legacy: bool = False  # legacy legend (no NODE: PHB may mean NODE)
    warnings: tuple[str, ...] = ()
    disagreements: tuple[Disagreement, ...] = ()
    # host_info (the agent's host facts); None/empty when the section is absent
    sockets: int | None = None
    gdr_module: bool | None = None  # False: neither nvidia_peermem/nv_mem nor DMA-BUF
    gdr_module_detail: str | None = None  # e.g. "peermem none, DMA-BUF no"
    iommu_translated: tuple[str, ...] = ()  # GPU/NIC BDFs in a translating IOMMU domain (DMA, DMA-FQ)
    iommu_cmdline: str | None = None  # IOMMU words of /proc/cmdline
    virtualized: bool | None = None
    host_info: bool = False  # the section was reported
    numa_count: int | None = None  # NUMA nodes with CPUs, when a source lists them all (hwloc, host_info)
    # sources whose listing shows every network function of the host (so "no RDMA NIC" is a fact);
    # empty: no source can tell, the network is unknown
    nic_inventory: tuple[str, ...] = ()
    nic_unknown: str | None = None  # why no source can show the NICs (when nic_inventory is empty)
    socket_nets: tuple[str, ...] = ()  # NCCL XML nets of NCCL's Socket transport (eth0, guid 0x0)
    virtual_pci: bool = False  # the PCI tree is a hypervisor's or a hand-written flattened one
    # sources that list every NVLink when there is any (topo -m, nvlink -s, NCCL's own topology
    # dump, hwloc's NVML backend): NVLink absent from all of them is a fact
    nvlink_sources: tuple[str, ...] = ()

    # -- lookups ---------------------------------------------------------------------------
    def gpu(self, name: str) -> GpuFact | None:
        return next((g for g in self.gpus if g.name == name), None)

    def nic(self, name: str) -> NicFact | None:
        return next((n for n in self.nics if n.name == name or n.label == name), None)

    def pci_device(self, bdf: str) -> PciDeviceFact | None:
        return self.pci_by_bdf.get(bdf)

    @property
    def pci_by_bdf(self) -> dict[str, PciDeviceFact]:
        cache = self.__dict__.get("_pci_by_bdf")
        if cache is None:
            cache = {d.bdf: d for d in self.pci}
            object.__setattr__(self, "_pci_by_bdf", cache)
        return cache

    @property
    def has_pci_tree(self) -> bool:
        """True when an exact PCI hierarchy is known (lspci, sysfs, NCCL or hwloc XML). A topology
        XML places every device, those directly under a ``<cpu>`` / host bridge included."""
        return any(d.parent_bdf or d.ancestry or d.root or _XML_SOURCES & set(d.source.split(",")) for d in self.pci)

    def label_of(self, name: str) -> str:
        """The topo -m label for a GPU or NIC name (NICs may be labelled NIC3 for mlx5_3)."""
        n = self.nic(name)
        return (n.label or n.name) if n else name
