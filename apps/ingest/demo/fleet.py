"""The demo fleet: synthetic hosts built on the layouts of real captures (``manage.py load_demo`` loads them).

Plain Python (no Django), deterministic: no clock, no randomness; every GUID, UUID and LID is derived
from the host's place in the fleet, so the same reports come out on every run and loading the demo
again stores nothing new.

Platforms (``PLATFORMS``), each following real captures of ``/work/shared/realdata`` (``MANIFEST.tsv``
says where each came from; the topo captures are also in ``captures/``, byte for byte, ``SOURCES.tsv``):

=========  =====  =========================================================================================
platform   hosts  built from
=========  =====  =========================================================================================
``h100``   24     ``topo/sglang_30401_8xh100_hbm3_8nic.txt`` (8x H100 80GB HBM3 SXM NV18, 8 mlx5 NICs, one PIX
                  to each GPU; sglang issue #30401) used verbatim; GPU bus ids 19/3b/4c/5d/9b/bb/cb/db of
                  ``lspci_vvv/gpud_dell_xe9680_hgx_h100_8gpu_full_lspci_vvv.txt`` (an HGX H100); 8x
                  ConnectX-7 (MT4129, firmware 28.41.1000) 400G InfiniBand as in
                  ``ibstat/gpud_h100_8x_cx7_ndr_ib_plus_bluefield3_eth.txt``; 18 NVLinks at 26.562 GB/s per GPU
                  as in ``nvlink/h100_gpu0_nvlink_status_i0_chinese_notes.txt``.
``a100``   20     ``topo/dgx_a100_ash6_mlx5_0-11_headers_nps4.txt`` (DGX A100: 8x A100 SXM4 NV12, two GPUs and
                  two NIC slots per PCIe switch, EPYC 7742 NPS4) with one HDR NIC per PCIe switch: the
                  columns of the capture's first compute NIC of each switch (mlx5_0, mlx5_2, mlx5_6, mlx5_8,
                  renamed mlx5_0..3) kept, the other eight removed; GPU bus ids 07/0f/47/4e/87/90/b7/bd and
                  the model A100-SXM4-40GB of ``nccl_tests/dgx_a100_40gb_1node_allreduce_1m_1g_test_fixture_capture.txt``;
                  ConnectX-6 (MT4123) HDR 200G InfiniBand; 12 NVLinks at 25 GB/s per GPU as in
                  ``nvlink/azurehpc_nd_a100_v4_gpu7_nvlink_status_good.txt``. Two GPUs share each NIC.
``l40s``   12     ``topo/stelline_asus_esc8000a_e12_4x_rtx6000ada.txt`` (ASUS ESC8000A-E12: 4x RTX 6000 Ada,
                  the L40S's AD102 chip on a PCIe x16 board like it, 2x dual-port ConnectX-7, 2x EPYC Genoa)
                  used verbatim: no real capture shows an L40S server with NICs (the real 4x L40S capture,
                  ``topo/aws_g6e_12xlarge_4x_l40s_node.txt``, has none). GPU bus ids 01/41/c1/e1 of that
                  machine's ``lspci_tree/stelline_asus_esc8000a_e12.txt``, GPU names ``NVIDIA L40S``; the four
                  ports 200G RoCE (Ethernet link layer) as in
                  ``ibstat/gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt``.
=========  =====  =========================================================================================

Every host has the sections a real agent sends: ``nvidia_smi_topo``, ``nvidia_smi_gpus`` (the GPU
query CSV of ``apps.domain.parsers.nvidia_smi_gpus``, bus ids in the topo's GPU order), ``ibstat`` (one
CA per NIC column of the topo), ``host_info`` (``apps.domain.parsers.host_info``: CPU, driver, NUMA,
GPUDirect RDMA module) and, on NVLink platforms, ``nvidia_smi_nvlink``. CPU models, driver versions and
kernels are chosen to match the captures (core counts of the topo's CPU affinity, the driver the
sglang report names), not read from those machines.

Odd ones out (``ODD_ONES``; one host each, every one visible as a finding of the analysis):

* ``h100-n03``: GPU5's PCIe link trained at x8 of x16 (GPU query ``pcie.link.width.current`` 8): P06;
* ``h100-n06``: mlx5_4's port Down / Polling (cable out): F01, and H08 across the fleet;
* ``h100-n09``: two of GPU2's NVLinks inactive (``nvlink -s`` shows them ``<inactive>``, ``topo -m``
  NV16 for GPU2's pairs): N01;
* ``h100-n15``: mlx5_2 trained at 200 Gb/s (4X HDR) on the 400G fabric (``ibstat`` Rate 200; the
  fabric's cable is 4xHDR too): F02 on the host, a degraded link on the fabric page;
* ``a100-n05``: the NIC of the GPU2/GPU3 switch (mlx5_1) installed in a slot of the other socket
  (SYS to its GPUs, NODE to GPU4/GPU5): G04 (PXN relays GPU2 via GPU0 and GPU3 via GPU4: NCCL sends
  over NVLink to a GPU that is PXB to a NIC when its own path crosses the CPU, ``src/graph/paths.cc``
  L812-842 at v2.30.7-1) and G05 (three GPUs on one NIC), H08 across the fleet.

The NIC move (``NIC_MOVE_HOST`` = ``h100-n12``): two snapshots a week apart. Before
(2025-02-24 08:12), mlx5_3 sits on socket 1's root complex (SYS to GPU0-3, NODE to GPU4-7 and the socket 1
NICs); after (2025-03-03 08:12), it is back on GPU3's PCIe switch and the topo is the real capture verbatim.

Public API: ``fleet_hosts() -> list[FleetHost]`` (load order): each host's ``snapshots``
(``collected_at``, ``sections``: report section kind -> text) are what ``load_demo`` wraps in node
reports; ``apps/ingest/demo/fleet_fabric.py`` writes the H100 pod's fabric from their NICs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path

from apps.domain.parsers import nvidia_smi_topo

DEMO_DIR = Path(__file__).resolve().parent

# Dates of the snapshots: the real hosts of demo.json are dated 2025-03-03 09:00-09:30; the NIC move's
# first snapshot is a week before its second.
FLEET_DAY = "2025-03-03"
NIC_MOVE_WEEKS = 1


@dataclass(frozen=True)
class Platform:
    """One kind of node: the real captures it follows and the values its generated sections take."""

    key: str
    count: int
    topo: str  # demo-relative path of the real topo -m capture
    follows: str  # the real captures, in words, for the host description
    gpu_name: str
    compute_cap: str
    pcie_gen: int
    bus_ids: tuple[str, ...]  # GPU0..n bus numbers, from a real capture
    nvlinks: int  # NVLinks per GPU (0: none)
    nvlink_gbs: str  # per-link rate as nvidia-smi nvlink -s prints it
    ca_type: str
    firmware: str
    rate: int  # Gb/s per port
    link_layer: str  # InfiniBand | Ethernet
    guid_base: int  # node GUID of the fleet's first NIC of this platform (a real vendor prefix)
    cpu: tuple[tuple[str, str], ...]  # host_info lines for the CPU and NUMA
    driver: str
    kernel: str
    netdev: str  # interface name pattern of a NIC's netdev ({n}: NIC index)
    nic_names: tuple[str, ...] = ()  # topo NIC labels renamed (derived layouts)
    keep_nics: tuple[str, ...] = ()  # topo NIC labels kept (empty: all)


PLATFORMS: tuple[Platform, ...] = (
    Platform(
        key="h100", count=24, topo="captures/topo/sglang_30401_8xh100_hbm3_8nic.txt",
        follows=("nvidia-smi topo -m of an 8x H100 80GB HBM3 node with 8 mlx5 NICs (sglang issue #30401), GPU bus "
                 "ids of a Dell XE9680 HGX H100 lspci -vvv, ibstat and nvlink -s in the format of real H100 NDR "
                 "captures (leptonai/gpud test data, Chinese H100 notes)"),
        gpu_name="NVIDIA H100 80GB HBM3", compute_cap="9.0", pcie_gen=5,
        bus_ids=("19", "3b", "4c", "5d", "9b", "bb", "cb", "db"), nvlinks=18, nvlink_gbs="26.562",
        ca_type="MT4129", firmware="28.41.1000", rate=400, link_layer="InfiniBand", guid_base=0xE09D730300D10000,
        cpu=(("cpu_vendor", "GenuineIntel"), ("cpu_family", "6"), ("cpu_model", "143"),
             ("cpu_model_name", "Intel(R) Xeon(R) Platinum 8468"), ("sockets", "2"), ("numa_nodes", "2")),
        driver="570.133.20", kernel="5.15.0-131-generic", netdev="ibp{n}s0"),
    Platform(
        key="a100", count=20, topo="captures/topo/dgx_a100_ash6_mlx5_0-11_headers_nps4.txt",
        follows=("nvidia-smi topo -m of DGX A100 ash6-hpccdgx-node0009 with one HDR NIC per PCIe switch kept "
                 "(mlx5_0, mlx5_2, mlx5_6, mlx5_8 of the capture, renamed mlx5_0-3), GPU bus ids of a real DGX "
                 "A100 nccl-tests capture, ibstat and nvlink -s in the format of real A100 HDR captures"),
        gpu_name="NVIDIA A100-SXM4-40GB", compute_cap="8.0", pcie_gen=4,
        bus_ids=("07", "0f", "47", "4e", "87", "90", "b7", "bd"), nvlinks=12, nvlink_gbs="25",
        ca_type="MT4123", firmware="20.39.1002", rate=200, link_layer="InfiniBand", guid_base=0x1C34DA0300A10000,
        cpu=(("cpu_vendor", "AuthenticAMD"), ("cpu_family", "23"), ("cpu_model", "49"),
             ("cpu_model_name", "AMD EPYC 7742 64-Core Processor"), ("sockets", "2"), ("numa_nodes", "8")),
        driver="535.183.01", kernel="5.15.0-1042-nvidia", netdev="ibp{n}s0",
        keep_nics=("mlx5_0", "mlx5_2", "mlx5_6", "mlx5_8"), nic_names=("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")),
    Platform(
        key="l40s", count=12, topo="captures/topo/stelline_asus_esc8000a_e12_4x_rtx6000ada.txt",
        follows=("nvidia-smi topo -m of the ASUS ESC8000A-E12 (4x RTX 6000 Ada: the L40S's AD102 chip, 2x "
                 "dual-port ConnectX-7, 2x EPYC Genoa; stelline docs) with GPU bus ids of that machine's lspci "
                 "-tv; no real L40S capture shows NICs (the real 4x L40S AWS g6e.12xlarge topo has none)"),
        gpu_name="NVIDIA L40S", compute_cap="8.9", pcie_gen=4,
        bus_ids=("01", "41", "c1", "e1"), nvlinks=0, nvlink_gbs="",
        ca_type="MT4129", firmware="28.41.1000", rate=200, link_layer="Ethernet", guid_base=0x9C63C00300E40000,
        cpu=(("cpu_vendor", "AuthenticAMD"), ("cpu_family", "25"), ("cpu_model", "17"),
             ("cpu_model_name", "AMD EPYC 9124 16-Core Processor"), ("sockets", "2"), ("numa_nodes", "2")),
        driver="550.54.15", kernel="5.15.0-105-generic", netdev="ens{n}f0np0"),
)

NIC_MOVE_HOST = "h100-n12"
# hostname -> (defect key, what it shows) for the odd ones out; defects are the _defect_* functions below
ODD_ONES: dict[str, tuple[str, str]] = {
    "h100-n03": ("gpu_link_x8", "GPU5's PCIe link trained at x8 of x16 (P06)"),
    "h100-n06": ("port_down", "mlx5_4's port Down, physical state Polling: no cable (F01)"),
    "h100-n09": ("nvlink_inactive", "two of GPU2's 18 NVLinks inactive; topo -m shows NV16 for GPU2's pairs (N01)"),
    "h100-n15": ("port_hdr", "mlx5_2 trained at 200 Gb/s on the 400G fabric (F02; a degraded cable on the fabric)"),
    "a100-n05": ("nic_other_socket", "the NIC of the GPU2/GPU3 switch (mlx5_1) installed on the other socket: SYS "
                                     "to GPU2 and GPU3, which PXN relays to the NICs of GPU0 and GPU4 (G04, G05)"),
}


# ------------------------------------------------------------------------------------------- drafts


@dataclass
class Port:
    state: str = "Active"
    phys_state: str = "LinkUp"
    rate: int = 400
    lid: int = 0
    sm_lid: int = 0
    link_layer: str = "InfiniBand"


@dataclass
class Nic:
    name: str
    ca_type: str
    firmware: str
    node_guid: int
    port: Port
    netdev: str

    @property
    def port_guid(self) -> int:
        """An InfiniBand port's GUID is the node GUID (single-port HCA); a RoCE port's is the EUI-64 of its
        MAC (node GUID ``a088c20300e3142a`` -> port GUID ``a288c2fffee3142a``, as the real RoCE ibstat shows)."""
        if self.port.link_layer == "InfiniBand":
            return self.node_guid
        g = self.node_guid.to_bytes(8, "big")
        return int.from_bytes(bytes([g[0] ^ 0x02, g[1], g[2], 0xFF, 0xFE, g[5], g[6], g[7]]), "big")


@dataclass
class Gpu:
    index: int
    uuid: str
    bus: str
    name: str
    compute_cap: str
    gen: int
    width: int = 16
    max_width: int = 16
    nvlinks: list[str | None] = field(default_factory=list)  # per-link rate text, None = inactive


@dataclass
class Draft:
    """One host at one moment, before it is written out as report sections."""

    hostname: str
    platform: Platform
    topo: nvidia_smi_topo.TopoMatrix
    gpus: list[Gpu]
    nics: list[Nic]
    host_info: list[tuple[str, str]]


@dataclass(frozen=True)
class FleetSnapshot:
    collected_at: str
    sections: dict[str, str]


@dataclass(frozen=True)
class FleetHost:
    """A generated host: its description (starting ``SYNTHETIC``) and snapshots, oldest first."""

    hostname: str
    platform: str
    description: str
    snapshots: tuple[FleetSnapshot, ...]
    defect: str | None = None
    nics: tuple[Nic, ...] = ()  # the NICs of the newest snapshot (the fabric's GUIDs)


# ------------------------------------------------------------------------------------------- building


def _uuid(hostname: str, index: int) -> str:
    h = hashlib.sha256(f"topoweb-demo/{hostname}/GPU{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


@lru_cache(maxsize=None)
def _capture(rel: str) -> str:
    return (DEMO_DIR / rel).read_bytes().decode("utf-8")


@lru_cache(maxsize=None)
def _real_topo(rel: str) -> nvidia_smi_topo.TopoMatrix:
    """A real topo -m capture, parsed once (shared: its matrix is copied before any change)."""
    return nvidia_smi_topo.parse(_capture(rel))


def _read_topo(platform: Platform) -> nvidia_smi_topo.TopoMatrix:
    """The platform's real topo -m, with only the NIC columns it keeps (renamed when it says so)."""
    topo = _real_topo(platform.topo)
    if not platform.keep_nics:
        return topo
    keep = [g.name for g in topo.gpus] + list(platform.keep_nics)
    rename = dict(zip(platform.keep_nics, platform.nic_names or platform.keep_nics))
    label = {c: rename.get(c, c) for c in keep}
    matrix = {label[r]: {label[c]: topo.matrix[r][c] for c in keep} for r in keep}
    nics = tuple(replace(n, name=label[n.name], device=label[n.name]) for n in topo.nics if n.name in rename)
    return replace(topo, columns=tuple(label[c] for c in keep), nics=nics, matrix=matrix, warnings=())


def _nic_labels(topo: nvidia_smi_topo.TopoMatrix) -> list[tuple[str, str]]:
    """(matrix label, HCA name) of every NIC column, in column order."""
    return [(n.name, n.device or n.name) for n in topo.nics]


def _draft(platform: Platform, hostname: str, number: int) -> Draft:
    topo = _read_topo(platform)
    gpus = [Gpu(index=i, uuid=_uuid(hostname, i), bus=bus, name=platform.gpu_name,
                compute_cap=platform.compute_cap, gen=platform.pcie_gen,
                nvlinks=[platform.nvlink_gbs] * platform.nvlinks)
            for i, bus in enumerate(platform.bus_ids)]
    assert len(gpus) == len(topo.gpus), f"{platform.key}: {len(gpus)} bus ids for {len(topo.gpus)} GPUs"
    ib = platform.link_layer == "InfiniBand"
    nics = []
    for k, (_label, device) in enumerate(_nic_labels(topo)):
        lid = 100 + number * 16 + k if ib else 0
        nics.append(Nic(name=device, ca_type=platform.ca_type, firmware=platform.firmware,
                        node_guid=platform.guid_base + number * 16 + k,
                        port=Port(rate=platform.rate, lid=lid, sm_lid=1 if ib else 0, link_layer=platform.link_layer),
                        netdev=platform.netdev.format(n=k)))
    info = list(platform.cpu) + [
        ("kernel", platform.kernel), ("driver_version", platform.driver), ("driver_flavor", "open"),
        ("cmdline", "iommu=pt"), ("virtualized", "no"), ("peermem", "nvidia_peermem"), ("dmabuf", "yes"),
        ("netdev_scope", "rdma")]
    return Draft(hostname=hostname, platform=platform, topo=topo, gpus=gpus, nics=nics, host_info=info)


def _set_cells(topo: nvidia_smi_topo.TopoMatrix, label: str, cells: dict[str, str]) -> nvidia_smi_topo.TopoMatrix:
    """``topo`` with row ``label`` and its mirror column set to ``cells`` (the matrix stays symmetric)."""
    matrix = {r: dict(row) for r, row in topo.matrix.items()}
    for other, tok in cells.items():
        matrix[label][other] = tok
        matrix[other][label] = tok
    return replace(topo, matrix=matrix, warnings=())


def _defect_gpu_link_x8(d: Draft) -> None:
    d.gpus[5].width = 8


def _defect_port_down(d: Draft) -> None:
    nic = next(n for n in d.nics if n.name == "mlx5_4")
    nic.port = replace(nic.port, state="Down", phys_state="Polling", rate=10, lid=65535, sm_lid=0)


def _defect_nvlink_inactive(d: Draft) -> None:
    gpu = d.gpus[2]
    gpu.nvlinks[4] = gpu.nvlinks[5] = None
    links = sum(1 for r in gpu.nvlinks if r)
    d.topo = _set_cells(d.topo, "GPU2", {g.name: f"NV{links}" for g in d.topo.gpus if g.name != "GPU2"})


def _defect_port_hdr(d: Draft) -> None:
    nic = next(n for n in d.nics if n.name == "mlx5_2")
    nic.port = replace(nic.port, rate=200)


def _socket_of(topo: nvidia_smi_topo.TopoMatrix, label: str) -> set[str]:
    """The devices ``label`` reaches without crossing the CPU sockets' link (cells other than SYS)."""
    return {c for c, tok in topo.matrix[label].items() if tok not in ("SYS", "SOC")}


def _move_nic_to_other_socket(topo: nvidia_smi_topo.TopoMatrix, nic: str, beside: str) -> nvidia_smi_topo.TopoMatrix:
    """``nic`` moved to a root port of the CPU that ``beside`` (a NIC of the other socket) hangs off: NODE to
    ``beside`` and to the devices ``beside`` reaches inside its NUMA node, SYS to every other device (in an
    NPS4 capture the NUMA nodes of one socket are SYS apart too)."""
    near = _socket_of(topo, beside) | {beside}
    cells = {}
    for c in topo.columns:
        if c == nic:
            continue
        cells[c] = "NODE" if c in near and topo.matrix[beside][c] != "SYS" else "SYS"
    return _set_cells(topo, nic, cells)


def _defect_nic_other_socket(d: Draft) -> None:
    # mlx5_1 is the NIC of the GPU2/GPU3 switch (NUMA 1, socket 0); put it in a slot of NUMA 7 (socket 1),
    # where the capture's GPU4/GPU5 switch hangs (NPS4: every cell between NUMA nodes reads SYS)
    d.topo = _move_nic_to_other_socket(d.topo, "mlx5_1", "mlx5_2")


def _defect_nic_move_before(d: Draft) -> None:
    # mlx5_3, GPU3's NIC, sits on socket 1's root complex, next to mlx5_4 (GPU4's NIC) but on no GPU's switch
    d.topo = _move_nic_to_other_socket(d.topo, "NIC3", "NIC4")


_DEFECTS = {
    "gpu_link_x8": _defect_gpu_link_x8,
    "port_down": _defect_port_down,
    "nvlink_inactive": _defect_nvlink_inactive,
    "port_hdr": _defect_port_hdr,
    "nic_other_socket": _defect_nic_other_socket,
    "nic_move_before": _defect_nic_move_before,
}


# ------------------------------------------------------------------------------------------- writing


def render_gpus(gpus: list[Gpu]) -> str:
    """``nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,compute_cap,pstate,pcie.link.gen.gpucurrent,
    pcie.link.gen.max,pcie.link.gen.gpumax,pcie.link.gen.hostmax,pcie.link.width.current,pcie.link.width.max
    --format=csv`` as the driver prints it (header, ``00000000:BB:00.0`` bus ids)."""
    lines = ["index, uuid, pci.bus_id, name, compute_cap, pstate, pcie.link.gen.gpucurrent, pcie.link.gen.max, "
             "pcie.link.gen.gpumax, pcie.link.gen.hostmax, pcie.link.width.current, pcie.link.width.max"]
    for g in gpus:
        lines.append(f"{g.index}, {g.uuid}, 00000000:{g.bus.upper()}:00.0, {g.name}, {g.compute_cap}, P0, "
                     f"{g.gen}, {g.gen}, {g.gen}, {g.gen}, {g.width}, {g.max_width}")
    return "\n".join(lines) + "\n"


def render_nvlink(gpus: list[Gpu]) -> str:
    """``nvidia-smi nvlink -s`` (TAB + space before each link, as the R5xx drivers print it)."""
    lines = []
    for g in gpus:
        lines.append(f"GPU {g.index}: {g.name} (UUID: {g.uuid})")
        lines += [f"\t Link {k}: {rate} GB/s" if rate else f"\t Link {k}: <inactive>" for k, rate in enumerate(g.nvlinks)]
    return "\n".join(lines) + "\n"


def render_ibstat(nics: list[Nic]) -> str:
    """``ibstat`` (infiniband-diags; one TAB per level), CAs in the lexical order it prints them."""
    lines = []
    for n in sorted(nics, key=lambda n: n.name):
        p = n.port
        cap = "0xa751e848" if p.link_layer == "InfiniBand" else "0x00010000"
        lines += [f"CA '{n.name}'", f"\tCA type: {n.ca_type}", "\tNumber of ports: 1",
                  f"\tFirmware version: {n.firmware}", "\tHardware version: 0", f"\tNode GUID: 0x{n.node_guid:016x}",
                  f"\tSystem image GUID: 0x{n.node_guid:016x}", "\tPort 1:", f"\t\tState: {p.state}",
                  f"\t\tPhysical state: {p.phys_state}", f"\t\tRate: {p.rate}", f"\t\tBase lid: {p.lid}",
                  "\t\tLMC: 0", f"\t\tSM lid: {p.sm_lid}", f"\t\tCapability mask: {cap}",
                  f"\t\tPort GUID: 0x{n.port_guid:016x}", f"\t\tLink layer: {p.link_layer}"]
    return "\n".join(lines) + "\n"


def render_host_info(d: Draft) -> str:
    """The agent's ``host_info`` section (``key<TAB>value``), led by a comment saying it is synthetic."""
    lines = [f"# SYNTHETIC: topoweb demo fleet, {d.platform.key} platform; values chosen to match the captures "
             "its layout follows"]
    lines += [f"{k}\t{v}" for k, v in d.host_info]
    lines += [f"netdev\t{n.netdev} {'up' if n.port.state == 'Active' else 'down'}" for n in d.nics]
    return "\n".join(lines) + "\n"


def sections(d: Draft) -> dict[str, str]:
    """The report sections of a draft, as the agent names them."""
    out = {"nvidia_smi_topo": _topo_text(d), "nvidia_smi_gpus": render_gpus(d.gpus),
           "ibstat": render_ibstat(d.nics), "host_info": render_host_info(d)}
    if d.platform.nvlinks:
        out["nvidia_smi_nvlink"] = render_nvlink(d.gpus)
    return out


def _topo_text(d: Draft) -> str:
    """The real capture's bytes when the draft still has its layout, else the rendered matrix."""
    real = _real_topo(d.platform.topo)
    if real.matrix == d.topo.matrix and real.columns == d.topo.columns:
        return _capture(d.platform.topo)
    return nvidia_smi_topo.render(d.topo)


def _snapshot(d: Draft, collected_at: str) -> FleetSnapshot:
    return FleetSnapshot(collected_at=collected_at, sections=sections(d))


def _description(platform: Platform, hostname: str, defect: str | None) -> str:
    what = {"h100": "8x H100 80GB HBM3 SXM (NVSwitch), 8x ConnectX-7 400G InfiniBand, one per GPU (rails)",
            "a100": "8x A100-SXM4-40GB (NVSwitch), 4x ConnectX-6 HDR 200G InfiniBand, one per PCIe switch "
                    "(two GPUs per NIC), 2x EPYC 7742 NPS4",
            "l40s": "4x L40S (PCIe, no NVLink), 2x dual-port ConnectX-7 200G RoCE, 2x EPYC Genoa"}[platform.key]
    text = f"SYNTHETIC host of the demo fleet: {what}. Follows {platform.follows}."
    if hostname == NIC_MOVE_HOST:
        text += (" NIC move: on 2025-02-24 mlx5_3 (GPU3's NIC) sat on socket 1's root complex (SYS to GPU3); on "
                 "2025-03-03 it is back on GPU3's PCIe switch (PIX), the real capture's layout.")
    elif defect:
        text += f" Odd one out: {ODD_ONES[hostname][1]}."
    return text


def _time(platform_index: int, number: int) -> str:
    minutes = platform_index * 30 + number
    return f"{FLEET_DAY}T{8 + minutes // 60:02d}:{minutes % 60:02d}:00Z"


def _weeks_before(moment: str, weeks: int) -> str:
    then = datetime.strptime(moment, "%Y-%m-%dT%H:%M:%SZ") - timedelta(weeks=weeks)
    return then.strftime("%Y-%m-%dT%H:%M:%SZ")


def fleet_hosts() -> list[FleetHost]:
    """Every generated host, platform by platform, in hostname order."""
    out = []
    for p_index, platform in enumerate(PLATFORMS):
        for number in range(1, platform.count + 1):
            hostname = f"{platform.key}-n{number:02d}"
            defect = ODD_ONES.get(hostname, (None, ""))[0]
            draft = _draft(platform, hostname, number)
            snaps = []
            when = _time(p_index, number)
            if hostname == NIC_MOVE_HOST:
                before = _draft(platform, hostname, number)
                _DEFECTS["nic_move_before"](before)
                snaps.append(_snapshot(before, _weeks_before(when, NIC_MOVE_WEEKS)))
            if defect:
                _DEFECTS[defect](draft)
            snaps.append(_snapshot(draft, when))
            out.append(FleetHost(hostname=hostname, platform=platform.key,
                                 description=_description(platform, hostname, defect), snapshots=tuple(snaps),
                                 defect=defect or ("nic_move" if hostname == NIC_MOVE_HOST else None),
                                 nics=tuple(draft.nics)))
    return out
