"""Link bandwidths: the one table topoweb uses, every number with its source.

All values are GB/s (1e9 B/s) **per direction**, as nccl-tests reports them. Each lookup returns
a :class:`LinkBandwidth` with three figures and the source they come from:

* ``spec_gbs``: the physical per-direction rate from the standard / vendor (domain.md section 2);
* ``nccl_gbs``: what NCCL (v2.30.7-1) plans with for that link (``src/graph/topo.h`` constants,
  ``topo.cc`` PCIe ``width*speed/80`` and NIC ``mbps/8000``), to predict NCCL's own choices;
* ``expected_gbs``: what a healthy link achieves in practice, ``spec x efficiency`` from the
  measured anchors of domain.md 2.6 (PCIe Gen5 H2D 88 %, NVLink4 pairwise copy 88 %,
  IB/RoCE all-reduce at >= 4 GiB 93-95 %).

Source tags ``[S#]`` are the numbered references of ``/work/shared/docs/domain.md`` section 6.

>>> pcie_link(4, 16).spec_gbs
31.5
>>> nvlink("NVIDIA H100 80GB HBM3", 18).spec_gbs
450.0
>>> ib_port(400).spec_gbs
50.0
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "LinkBandwidth",
    "GpuInfo",
    "PCIE_EFFICIENCY",
    "NVLINK_EFFICIENCY",
    "NET_EFFICIENCY",
    "pcie_link",
    "pcie_link_from_gbs",
    "nvlink",
    "nvlink_per_link",
    "xgmi",
    "ib_port",
    "IB_SPEEDS",
    "IB_WIDTH_LANES",
    "ib_link_gbps",
    "ib_speed_from_lane",
    "ib_link",
    "inter_socket",
    "gpu_generation",
]

# Efficiency anchors, domain.md 2.6 [S31].
PCIE_EFFICIENCY = 0.88  # PCIe Gen5 x16 H2D 55.4 / 63 GB/s on 8x H200
NVLINK_EFFICIENCY = 0.88  # NVLink4 pairwise copy 396.4 / 450 GB/s on 8x H200
NET_EFFICIENCY = 0.93  # 4 nodes x 8 B200, 377-382 vs 400 GB/s node NIC sum (94-95 %); 0.90-0.95 band


@dataclass(frozen=True)
class LinkBandwidth:
    """Bandwidth of one link (or bonded set of links), GB/s per direction."""

    spec_gbs: float | None
    nccl_gbs: float | None
    expected_gbs: float | None
    source: str


# --- PCIe (domain.md 2.1; [S59] per-lane table, [S31] Gen4-6 x16 and the H200 anchor,
#     [S3] topo.cc L545-557 NCCL per-lane speeds in 100 Mb/s units) ------------------------------
# gen: (GT/s per lane, spec GB/s per lane per direction, NCCL speed per lane in 100 Mb/s)
PCIE_TABLE: dict[int, tuple[float, float, int]] = {
    1: (2.5, 0.25, 15),  # 8b/10b
    2: (5.0, 0.5, 30),  # 8b/10b
    3: (8.0, 15.75 / 16, 60),  # 128b/130b, x16 = 15.75 GB/s
    4: (16.0, 31.5 / 16, 120),  # 128b/130b, x16 = 31.5 GB/s
    5: (32.0, 63.0 / 16, 240),  # 128b/130b, x16 = 63 GB/s
    6: (64.0, 121.0 / 16, 480),  # PAM4 FLIT, x16 ~= 121 GB/s
}
_PCIE_SOURCE = (
    "domain.md 2.1 [S59][S31]: PCIe Gen{gen} x{width} spec; NCCL width*speed/80 "
    "(topo.cc L545-557, L657 [S3]); expected = spec x 0.88 (Gen5 H2D anchor, 2.6 [S31])"
)


def pcie_link(gen: int | None, width: int | None) -> LinkBandwidth:
    """Bandwidth of a PCIe link of generation ``gen`` (1-6) and ``width`` lanes.

    >>> b = pcie_link(3, 16); (b.spec_gbs, b.nccl_gbs, b.expected_gbs)
    (15.75, 12.0, 13.86)
    """
    if gen not in PCIE_TABLE or not width:
        return LinkBandwidth(None, None, None, f"PCIe Gen{gen} x{width}: unknown generation or width")
    _gts, lane, nccl_lane = PCIE_TABLE[gen]
    spec = round(lane * width, 4)
    return LinkBandwidth(
        spec_gbs=spec,
        nccl_gbs=round(width * nccl_lane / 80, 4),
        expected_gbs=round(spec * PCIE_EFFICIENCY, 4),
        source=_PCIE_SOURCE.format(gen=gen, width=width),
    )


def pcie_link_from_gbs(gbs: float) -> tuple[LinkBandwidth, str, bool]:
    """A PCIe link known only by its bandwidth, as hwloc reports it (``pci_link_speed``: lanes x
    GT/s x encoding / 8, GB/s per direction). Returns (bandwidth, note, ``slow_encoding``).

    The generation and width are not decoded: Gen3 x16, Gen4 x8 and Gen5 x4 all give 15.75 GB/s.
    NCCL's figure keeps NCCL's per-lane ratio (``width*speed/80``: 0.762 of the spec for the
    128b/130b generations 3-5, 0.75 for the 8b/10b Gen1/Gen2, whose figures are multiples of
    0.25 GB/s, ``slow_encoding`` True).

    >>> b, note, slow = pcie_link_from_gbs(15.753846); (b.spec_gbs, b.nccl_gbs, slow)
    (15.7538, 12.0, False)
    >>> note
    '15.8 GB/s as hwloc reports it (pci_link_speed): Gen3 x16, Gen4 x8 or Gen5 x4'
    """
    slow = abs(gbs / 0.25 - round(gbs / 0.25)) < 0.002 * gbs / 0.25 and gbs < 9
    ratio = 0.75 if slow else 0.75 / (128 / 130)  # NCCL 0.75 GB/s per 8 GT/s lane; hwloc 128b/130b
    fits = [f"Gen{gen} x{width}" for gen, (_gts, lane, _n) in PCIE_TABLE.items() for width in (1, 2, 4, 8, 16)
            if abs(lane * width - gbs) <= 0.01 * gbs]
    words = (", ".join(fits[:-1]) + " or " + fits[-1]) if len(fits) > 1 else (fits[0] if fits else "")
    spec = round(gbs, 4)
    note = f"{gbs:.1f} GB/s as hwloc reports it (pci_link_speed)" + (f": {words}" if words else "")
    link = LinkBandwidth(spec_gbs=spec, nccl_gbs=round(gbs * ratio, 4), expected_gbs=round(spec * PCIE_EFFICIENCY, 4),
                         source=f"hwloc pci_link_speed {gbs:g} GB/s (lanes x rate x encoding); NCCL width*speed/80 "
                                "(topo.cc L545-557, L657 [S3]); expected = spec x 0.88 (Gen5 H2D anchor, 2.6 [S31])")
    return link, note, slow


# --- NVLink (domain.md 2.2; [S31] stas00 NVLink table, [S31b] GA102, [S63], NCCL topo.h [S1]) ----
# sm: (NVLink generation, per-link per-direction spec GB/s, NCCL per-link constant)
NVLINK_TABLE: dict[int, tuple[int, float, float]] = {
    60: (1, 20.0, 18.0),  # P100, SM60_NVLINK_BW 18.0
    70: (2, 25.0, 20.0),  # V100, SM70_NVLINK_BW 20.0
    80: (3, 25.0, 20.0),  # A100, SM80_NVLINK_BW 20.0
    86: (3, 14.0625, 12.0),  # GA10x bridge (A40/RTX A6000/RTX 3090), SM86_NVLINK_BW 12.0
    90: (4, 25.0, 20.6),  # H100/H200/GH200/H20, SM90_NVLINK_BW 20.6
    100: (5, 50.0, 40.1),  # B200/B300/GB200, SM100_NVLINK_BW 40.1 (40.0 before 2.27.5)
}


def _sm_family(sm: int) -> int | None:
    """Map a compute capability x10 to the NVLink table row NCCL would use."""
    if sm in NVLINK_TABLE:
        return sm
    if sm >= 100:
        return 100  # sm103 (B300) and later Blackwell datacenter parts
    if 90 <= sm < 100:
        return 90
    if sm in (87, 89):
        return 86  # Orin/Ada have no NVLink bridge in practice; nearest Ampere-class row
    if 80 <= sm < 90:
        return 80
    if 70 <= sm < 80:
        return 70
    if 60 <= sm < 70:
        return 60
    return None


@lru_cache(maxsize=512, typed=True)  # pure, and asked once per GPU pair by the estimate
def nvlink_per_link(model_or_sm: str | int | None) -> LinkBandwidth:
    """Per-link per-direction NVLink bandwidth for a GPU model name, ``sm90``, ``"9.0"`` or ``90``."""
    sm = _to_sm(model_or_sm)
    fam = _sm_family(sm) if sm is not None else None
    if fam is None:
        return LinkBandwidth(None, None, None, f"NVLink: unknown GPU generation {model_or_sm!r}")
    gen, spec, nccl = NVLINK_TABLE[fam]
    return LinkBandwidth(
        spec_gbs=spec,
        nccl_gbs=nccl,
        expected_gbs=round(spec * NVLINK_EFFICIENCY, 4),
        source=(
            f"domain.md 2.2 [S31][S63]: NVLink{gen} (sm{fam}) {spec} GB/s per link per direction; "
            f"NCCL SM{fam}_NVLINK_BW {nccl} (topo.h [S1]); expected = spec x 0.88 (NVLink4 anchor, 2.6 [S31])"
        ),
    )


def nvlink(model_or_sm: str | int | None, links: int) -> LinkBandwidth:
    """Bandwidth of ``links`` bonded NVLinks (an ``NV#`` cell) for a GPU model or SM version.

    >>> nvlink(80, 12).spec_gbs, nvlink("Tesla V100-SXM2-32GB", 2).nccl_gbs
    (300.0, 40.0)
    """
    one = nvlink_per_link(model_or_sm)
    if one.spec_gbs is None:
        return one
    return LinkBandwidth(
        spec_gbs=round(one.spec_gbs * links, 4),
        nccl_gbs=round(one.nccl_gbs * links, 4),
        expected_gbs=round(one.spec_gbs * links * NVLINK_EFFICIENCY, 4),
        source=f"{links} links x " + one.source,
    )


# RCCL's per-link xGMI figures, GB/s (ROCm/rccl src/graph/topo.h L31-33 and ncclTopoXGMISpeed
# L257-265 at commit 0cbce2a7): gfx90a (MI200: MI210/MI250/MI250X) 36, gfx94x (MI300) 48, else
# (Vega/MI50/MI100, and any file whose gcn RCCL cannot match) 24.
XGMI_PER_LINK = {"MI200": 36.0, "MI300": 48.0, None: 24.0}


def xgmi(model: str | None, links: int | None, gbs: float | None = None) -> LinkBandwidth:
    """Bandwidth of an xGMI (AMD Infinity Fabric) GPU-GPU link, which RCCL treats as an NVL link
    of ``count x per-link`` GB/s (topo.cc ncclTopoAddXGMI L557-596 [rccl 0cbce2a7]).

    ``gbs``: the pair's bandwidth as a source states it (hwloc's XGMIBandwidth, from RSMI), the
    spec when given; without it only RCCL's planning figure is known.

    >>> xgmi("AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2", None, 100.0).spec_gbs, xgmi(None, 4).nccl_gbs
    (100.0, 96.0)
    """
    name = (model or "").upper()
    fam = "MI300" if re.search(r"MI3\d\d", name) else "MI200" if re.search(r"MI2\d\d", name) else None
    nccl = round(XGMI_PER_LINK[fam] * links, 4) if links else None
    src = (f"RCCL xGMI {XGMI_PER_LINK[fam]:g} GB/s per link ({fam or 'default'}; rccl topo.h L31-33 [0cbce2a7])"
           + (f"; {gbs:g} GB/s stated by the source" if gbs else ""))
    if gbs:
        return LinkBandwidth(round(gbs, 4), nccl, round(gbs * NVLINK_EFFICIENCY, 4), src)
    return LinkBandwidth(None, nccl, nccl, src + "; expected = RCCL's figure (no spec in the source)")


# --- InfiniBand / RoCE (domain.md 2.3; [S20] ibstat.c, [S8] init.cc, [S3] topo.cc L418) ----------


def ib_port(rate_gbps: float | None) -> LinkBandwidth:
    """Bandwidth of an IB/RoCE port whose ibstat ``Rate:`` is ``rate_gbps`` (Gb/s).

    >>> ib_port(200).expected_gbs
    23.25
    """
    if not rate_gbps:
        return LinkBandwidth(None, None, None, "IB port: rate unknown")
    spec = round(float(rate_gbps) / 8, 4)
    return LinkBandwidth(
        spec_gbs=spec,
        nccl_gbs=spec,  # NCCL: port speed Mb/s / 8000
        expected_gbs=round(spec * NET_EFFICIENCY, 4),
        source=(
            f"domain.md 2.3 [S20][S8]: {rate_gbps:g} Gb/s / 8; NCCL mbps/8000 (topo.cc L418 [S3]); "
            "expected = spec x 0.93 (eta_net, 2.6 [S31])"
        ),
    )


# Per-lane rates of each InfiniBand generation (domain.md 2.3 table [S21][S60]):
# name: (signalling Gb/s per lane as iblinkinfo prints it (libibmad mad_dump_linkspeed[ext]),
#        nominal Gb/s per lane the kernel multiplies by the width for the port rate (sysfs.c [S21])).
# The nominal rate x width is what ibstat prints as ``Rate:``, so ``ib_port`` takes it unchanged.
IB_SPEEDS: dict[str, tuple[float, float]] = {
    "SDR": (2.5, 2.5),
    "DDR": (5.0, 5.0),
    "QDR": (10.0, 10.0),
    "FDR10": (10.3125, 10.0),  # iblinkinfo prints "10.0 Gbps (FDR10)"
    "FDR": (14.0625, 14.0),
    "EDR": (25.78125, 25.0),
    "HDR": (53.125, 50.0),
    "NDR": (106.25, 100.0),
    "XDR": (212.5, 200.0),
}
# Link width as the fabric tools print it -> lanes (IB spec LinkWidthActive: 1X, 2X, 4X, 8X, 12X).
IB_WIDTH_LANES: dict[str, int] = {"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}


def ib_speed_from_lane(lane_gbps: float | None) -> str | None:
    """IB generation name for a per-lane rate as iblinkinfo prints it (``25.78125`` -> ``EDR``).

    ``10.0`` is QDR: iblinkinfo marks FDR10 with its own ``(FDR10)`` suffix.

    >>> ib_speed_from_lane(53.125), ib_speed_from_lane(10.0), ib_speed_from_lane(7.0)
    ('HDR', 'QDR', None)
    """
    if lane_gbps is None:
        return None
    for name, (signalling, _nominal) in IB_SPEEDS.items():
        if name != "FDR10" and abs(float(lane_gbps) - signalling) < 1e-6:
            return name
    return None


def ib_link_gbps(width: str | None, speed: str | None) -> float | None:
    """Line rate (Gb/s) of an InfiniBand link trained at ``width`` and ``speed``: lanes x nominal lane
    rate, as the kernel and ibstat report it; None for a width or speed not in the tables.

    >>> ib_link_gbps("4X", "NDR"), ib_link_gbps("2X", "hdr"), ib_link_gbps("4X", "?")
    (400.0, 100.0, None)
    """
    lanes = IB_WIDTH_LANES.get((width or "").upper())
    lane = IB_SPEEDS.get((speed or "").upper())
    return lanes * lane[1] if lanes is not None and lane is not None else None


def ib_link(width: str | None, speed: str | None) -> LinkBandwidth:
    """Bandwidth of one InfiniBand link trained at ``width`` (``4X``) and ``speed`` (``NDR``).

    The rate is :func:`ib_link_gbps`, then :func:`ib_port`.

    >>> ib_link("4X", "NDR").spec_gbs, ib_link("2X", "NDR").spec_gbs, ib_link("4X", "QDR").spec_gbs
    (50.0, 25.0, 5.0)
    """
    gbps = ib_link_gbps(width, speed)
    if gbps is None:
        return LinkBandwidth(None, None, None, f"IB link {width} {speed}: unknown width or speed")
    lane = IB_SPEEDS[speed.upper()]
    one = ib_port(gbps)
    return LinkBandwidth(one.spec_gbs, one.nccl_gbs, one.expected_gbs,
                         f"{width.upper()} x {lane[1]:g} Gb/s ({speed.upper()}, domain.md 2.3 [S21][S60]); "
                         + one.source)


# --- Inter-socket (domain.md 2.4 and 2.5; spec rows are secondary sources [S61][S62];
#     NCCL constants topo.h [S1], selection topo.cc L60-81, L745-757 [S3]) ----------------------
# name: (per-link per-direction spec GB/s or None, NCCL constant GB/s, description)
INTER_SOCKET_TABLE: dict[str, tuple[float | None, float, str]] = {
    "BDW": (19.2, 6.0, "Intel Broadwell and older, QPI 9.6 GT/s; BDW_QPI_BW 6.0"),
    "SKL": (20.8, 10.0, "Intel Skylake/Cascade Lake/Ice Lake-SP, UPI 10.4 GT/s; SKL_QPI_BW 10.0"),
    "SRP": (32.0, 22.0, "Intel Sapphire Rapids class, UPI 2.0 16 GT/s (x2 B derived); SRP_QPI_BW 22.0"),
    "ERP": (40.0, 40.0, "Intel Emerald Rapids, UPI 20 GT/s (x2 B derived); ERP_QPI_BW 40.0"),
    "AMD": (36.0, 16.0, "AMD EPYC xGMI x16 at 18 GT/s ~36 GB/s per link; AMD_BW 16.0"),
    "ZPI": (None, 6.0, "Zhaoxin; ZPI_BW 6.0"),
    "YONGFENG": (None, 9.0, "Zhaoxin Yongfeng; YONGFENG_ZPI_BW 9.0"),
    "P9": (None, 32.0, "IBM POWER9; P9_BW 32.0"),
    "ARM": (None, 6.0, "ARM; ARM_BW 6.0"),
}


def inter_socket_family(vendor: str | None, model: int | None = None, family: int | None = None) -> str | None:
    """NCCL's CPU class for the inter-socket constant (topo.cc L60-81, L745-757)."""
    v = (vendor or "").lower()
    if "intel" in v:
        if model is None:
            return "SKL"  # no model id: NCCL's most common modern default; noted by callers
        if model >= 0xCF:
            return "ERP"
        if model >= 0x8F:
            return "SRP"
        if model >= 0x55:
            return "SKL"
        return "BDW"
    if "amd" in v:
        return "AMD"
    if "zhaoxin" in v or "centaur" in v:
        return "YONGFENG" if (family == 7 and model == 0x5B) else "ZPI"
    if "power" in v or "ibm" in v:
        return "P9"
    if "arm" in v or "aarch64" in v:
        return "ARM"
    return None


def inter_socket(vendor: str | None, model: int | None = None, family: int | None = None) -> LinkBandwidth:
    """CPU<->CPU (UPI/xGMI) bandwidth per direction.

    ``expected_gbs`` is NCCL's constant: there is no measured anchor for GPU traffic across
    sockets, and domain.md says to treat SYS paths as slow (what NCCL plans).

    >>> inter_socket("GenuineIntel", 0x8F).nccl_gbs, inter_socket("AuthenticAMD").nccl_gbs
    (22.0, 16.0)
    """
    fam = inter_socket_family(vendor, model, family)
    if fam is None:
        return LinkBandwidth(None, None, None, f"inter-socket: unknown CPU vendor {vendor!r}")
    spec, nccl, desc = INTER_SOCKET_TABLE[fam]
    note = "" if not ("intel" in (vendor or "").lower() and model is None) else " (model unknown: assumed SKL)"
    return LinkBandwidth(
        spec_gbs=spec,
        nccl_gbs=nccl,
        expected_gbs=nccl,
        source=f"domain.md 2.4/2.5 [S61][S62][S1]: {desc}; expected = NCCL constant{note}",
    )


# --- GPU generations (domain.md 2.2, 1b N01: platform NV# norms) ------------------------------


@dataclass(frozen=True)
class GpuInfo:
    """What topoweb knows about a GPU model from its printed name.

    ``nvlink_links`` is the per-GPU link count (0 = no NVLink on this SKU), ``nvswitch_norm`` the
    ``NV#`` every pair shows on the vendor's NVSwitch board (None when there is none),
    ``pcie_gen``/``pcie_width`` the GPU's own host link.
    """

    family: str | None
    sm: int | None
    nvlink_gen: int | None
    nvlink_links: int
    nvswitch_norm: int | None
    pcie_gen: int | None
    pcie_width: int = 16
    source: str = ""
    geforce: bool = False  # a GeForce RTX card: its driver reports PCIe peer-to-peer as not supported


# Checked in order; first match wins. (regex, family, sm, nvlink links, NVSwitch norm, PCIe gen)
_GPU_PATTERNS: list[tuple[str, str, int, int, int | None, int]] = [
    (r"\bGB300|\bB300", "B300", 103, 18, 18, 6),  # PCIe Gen6 host interface: vendor datasheet, not in domain.md
    (r"\bGB200|\bB200|\bB100", "B200", 100, 18, 18, 5),
    (r"\bGH200|\bH200", "H200", 90, 18, 18, 5),
    (r"\bH800", "H800", 90, 8, 8, 5),
    (r"\bH20\b", "H20", 90, 18, 18, 5),
    (r"\bH100.*(PCIe|NVL)", "H100 PCIe", 90, 12, None, 5),
    (r"\bH100", "H100", 90, 18, 18, 5),
    (r"\bA800", "A800", 80, 8, 8, 4),
    (r"\bA100.*PCIE", "A100 PCIe", 80, 12, None, 4),
    (r"\bA100", "A100", 80, 12, 12, 4),
    (r"\bA30\b", "A30", 80, 4, None, 4),
    (r"\bA40\b|RTX A6000|RTX 3090|RTX A5000", "GA10x", 86, 4, None, 4),
    (r"\bA10G?\b|RTX A4000|RTX 30\d0|\bA16\b|\bA2\b", "GA10x (no NVLink)", 86, 0, None, 4),
    (r"L40S?\b|\bL4\b|RTX 6000 Ada|RTX 40\d0|\bL20\b", "Ada", 89, 0, None, 4),
    (r"RTX PRO 6000|RTX 50\d0", "Blackwell (client)", 120, 0, None, 5),
    (r"MI3\d\d", "AMD MI300", 0, 0, None, 5),  # xGMI, no NVLink (rccl topo.h: gfx94x)
    (r"MI2\d\d", "AMD MI200", 0, 0, None, 4),  # MI210/MI250/MI250X (gfx90a)
    (r"MI100|MI50\b", "AMD MI100", 0, 0, None, 4),
    (r"V100.*(SXM|DGXS)", "V100", 70, 6, 6, 3),
    (r"V100", "V100 PCIe", 70, 0, None, 3),
    (r"\bT4\b|RTX 20\d0|Quadro RTX", "Turing", 75, 0, None, 3),
    (r"P100.*SXM|P100-SXM", "P100", 60, 4, None, 3),
    (r"P100", "P100 PCIe", 60, 0, None, 3),
    (r"P40|P4\b|GTX 10\d0|TITAN X|Titan X", "Pascal", 61, 0, None, 3),
    (r"M60|M40|K80|K40|K20|K10|GTX 9\d0", "Maxwell/Kepler", 52, 0, None, 3),
    (r"\b[MC]20[5-9]0\b", "Fermi", 20, 0, None, 2),
]


# GeForce RTX cards (20xx to 50xx): NVIDIA's driver reports PCIe peer access as not supported on
# them (nvidia-smi topo -p2p prints CNS/NS; NCCL checks the same NVML status, paths.cc L373-411
# [S2]), so NCCL uses SHM whatever NCCL_P2P_LEVEL says; an NVLink bridge still carries P2P.
_GEFORCE_RE = re.compile(r"GeForce|\bRTX [2-5]0[5-9]0\b", re.IGNORECASE)


@lru_cache(maxsize=512, typed=True)  # pure: up to 22 regex searches per call, asked per GPU and pair
def gpu_generation(model_name: str | None) -> GpuInfo:
    """Describe a GPU model as nvidia-smi prints it.

    >>> gpu_generation("NVIDIA H100 80GB HBM3").nvswitch_norm
    18
    >>> gpu_generation("A100-SXM4-40GB").family, gpu_generation("Tesla V100-SXM2-32GB").nvlink_links
    ('A100', 6)
    """
    name = model_name or ""
    for pat, family, sm, links, norm, gen in _GPU_PATTERNS:
        if re.search(pat, name, re.IGNORECASE):
            fam = _sm_family(sm) if links else None
            return GpuInfo(
                family=family,
                sm=sm or None,
                nvlink_gen=NVLINK_TABLE[fam][0] if fam else None,
                nvlink_links=links,
                nvswitch_norm=norm,
                pcie_gen=gen,
                source="domain.md 2.2 (links/GPU) and 1b N01 (NV12 A100 HGX, NV18 H100/H200/B200/B300) [S31]",
                geforce=bool(_GEFORCE_RE.search(name)),
            )
    return GpuInfo(None, None, None, 0, None, None, source=f"unknown GPU model {model_name!r}")


def _to_sm(model_or_sm: str | int | None) -> int | None:
    if model_or_sm is None:
        return None
    if isinstance(model_or_sm, int):
        return model_or_sm
    text = str(model_or_sm).strip()
    m = re.fullmatch(r"(?:sm_?)?(\d{2,3})", text, re.IGNORECASE)
    if m:
        return int(m.group(1))
    m = re.fullmatch(r"(\d+)\.(\d)", text)  # compute capability "9.0"
    if m:
        return int(m.group(1)) * 10 + int(m.group(2))
    return gpu_generation(text).sm
