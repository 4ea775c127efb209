"""The assumption policy: what topoweb assumes when a report does not say.

One place, used by the host graph, paths, contention and the estimate alike. Every value it
supplies is flagged ``assumed`` where it is used (edge attr / hop key) and explained by one plain
sentence naming what to send to know; the snapshot document lists those sentences
(``assumptions``). The figures it assumes are the link table's (:mod:`apps.domain.bandwidth`).
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.domain.bandwidth import (INTER_SOCKET_TABLE, LinkBandwidth, gpu_generation, inter_socket,
                                   inter_socket_family, pcie_link)

__all__ = ["Assumptions", "assume", "infer_gpu_class", "ASSUMED_PCIE_GEN", "ASSUMED_PCIE_WIDTH",
           "ASSUMED_INTER_SOCKET", "SEND_GPU_QUERY", "SEND_LSPCI", "SEND_HOST_INFO"]

#: PCIe link assumed for a GPU/NIC/switch whose generation nobody reported. Gen4 x16: the host
#: interface of the datacenter GPUs deployed since 2020 that a bare ``topo -m`` most often comes
#: from (A100, A30, A40, L4, L40S; also the ConnectX-6 NICs next to them); Gen3 boards (V100, P40,
#: T4) are recognised from NVLink counts or the legacy legend, Gen5 ones (H100/H200/B200) from NV18.
ASSUMED_PCIE_GEN = 4
ASSUMED_PCIE_WIDTH = 16
#: Inter-socket class assumed when the CPU is unknown: NCCL's SKL_QPI_BW (10 GB/s), the Skylake-SP
#: to Ice Lake generation of most dual-socket GPU servers, and the middle of NCCL's own constants.
ASSUMED_INTER_SOCKET = "SKL"

SEND_GPU_QUERY = ("send nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,pcie.link.gen.max,"
                  "pcie.link.width.max --format=csv to know")
SEND_LSPCI = "send lspci -vvv (or the agent's sysfs listing) to know"
SEND_HOST_INFO = "send the agent's host_info section (or lscpu) to know"


@dataclass(frozen=True)
class Assumptions:
    """The values topoweb uses for one host where the report is silent, and why.

    ``gpu_model``: the model used for bandwidth lookups (the real one, or a representative of the
    inferred class, e.g. ``"A100"``); ``gpu_assumed`` True when it was inferred. ``pcie_gen`` /
    ``pcie_width``: the link assumed for devices whose link is unknown. ``inter_socket``: the
    CPU<->CPU link; ``inter_socket_assumed`` True when the CPU class was not reported.
    ``sentences``: {"gpu"|"pcie"|"inter_socket": plain sentence} for the document.
    """

    gpu_model: str | None
    gpu_class: str | None
    gpu_assumed: bool
    pcie_gen: int
    pcie_width: int
    pcie_note: str
    inter_socket: LinkBandwidth
    inter_socket_assumed: bool
    inter_socket_note: str | None
    nvlink_note: str | None
    sentences: dict


def infer_gpu_class(nv_counts: list[int], gpu_count: int, fabric: bool = False,
                    grace: bool = False) -> tuple[str | None, str | None]:
    """(representative model name for :func:`gpu_generation`, GPU class words) from the NV# cells
    of a topo -m matrix (``nv_counts``: one entry per GPU pair with NVLink; ``fabric``: an NVSwitch
    is known or implied). (None, None) when the matrix does not tell.

    >>> infer_gpu_class([18] * 28, 8)[1]
    'H100-class (NVLink4, 18 links per GPU)'
    >>> infer_gpu_class([1, 2, 2, 1], 8)[0]
    'Tesla V100-SXM2'
    >>> infer_gpu_class([4], 2)[0], infer_gpu_class([], 8)
    ('NVIDIA A40', (None, None))
    """
    if not nv_counts:
        return None, None
    top = max(nv_counts)
    pairs = len(nv_counts)
    if top >= 18 and grace and gpu_count >= 4:
        # four C2C-attached GPUs at NV18 to each other: a Grace Blackwell compute tray (GB200:
        # 2 Grace + 4 B200, NVLink5 into the rack's NVSwitch trays)
        return "NVIDIA GB200", "B200-class Grace Blackwell tray (NVLink5, 18 links per GPU, C2C to Grace)"
    if top >= 18 and grace:
        return "NVIDIA GH200 480GB", "GH200-class Grace Hopper (NVLink4, 18 links per GPU, C2C to Grace)"
    if top >= 18:
        return "NVIDIA H100 80GB HBM3", "H100-class (NVLink4, 18 links per GPU)"
    if top >= 12:
        return "NVIDIA A100-SXM4-80GB", "A100-class (NVLink3, 12 links per GPU)"
    if top == 8 and (fabric or pairs >= gpu_count):
        return "NVIDIA A800-SXM4-80GB", "A800/H800-class (8 NVLinks per GPU; NVLink3 rate assumed)"
    if top == 6 and gpu_count > 2 and (fabric or pairs > gpu_count):
        # a V100 has 6 links: NV6 to several peers needs NVSwitch (DGX-2 / HGX-2)
        return "Tesla V100-SXM3-32GB", "V100-class on NVSwitch (NVLink2, 6 links per GPU; DGX-2 / HGX-2)"
    if top <= 2 and gpu_count >= 4:
        return "Tesla V100-SXM2", "V100-class (NVLink2 hybrid cube mesh)"
    if top == 4 and gpu_count == 4 and pairs >= 6:
        return "NVIDIA A100-SXM4-80GB", "A100-class 4-GPU board (NVLink3, NV4 to each peer)"
    if top == 4 and pairs * 2 <= gpu_count:
        return "NVIDIA A40", "GA10x-class NVLink bridge (A40 / RTX A6000, NV4 between two GPUs)"
    return None, None


def assume(gpu_model: str | None = None, *, nv_counts: list[int] | None = None, gpu_count: int = 0,
           fabric: bool = False, legacy_topo: bool = False, cpu_vendor: str | None = None,
           cpu_model: int | None = None, cpu_family: int | None = None, grace: bool = False) -> Assumptions:
    """The assumption policy for one host (see the module docstring).

    >>> a = assume(None, nv_counts=[12] * 28, gpu_count=8)
    >>> a.gpu_assumed, a.pcie_gen, a.inter_socket.nccl_gbs, a.inter_socket_assumed
    (True, 4, 10.0, True)
    >>> sorted(assume("NVIDIA H100 80GB HBM3", cpu_vendor="intel", cpu_model=0x8F).sentences)
    ['pcie']
    """
    sentences: dict[str, str] = {}
    info = gpu_generation(gpu_model) if gpu_model else None
    model, klass, assumed = gpu_model, (info.family if info else None), False
    nvlink_note = None
    if not gpu_model or (info and info.family is None):
        guess, words = infer_gpu_class(list(nv_counts or []), gpu_count, fabric, grace)
        if guess:
            model, klass, assumed = guess, words, True
            extra = ("; B200/B300 also show NV18 at twice the per-link rate" if "H100" in words else "")
            why = "the NVLink counts of topo -m" + (" and the GPU NUMA ids of Grace" if grace else "")
            sentences["gpu"] = f"GPU model unknown: assumed {words} from {why}{extra}; {SEND_GPU_QUERY}."
            nvlink_note = f"assumed {words.split(' (')[0]} per-link rate; {SEND_GPU_QUERY}"
        else:
            model, klass = None, None
            tell = ("the NVLink counts of topo -m do not tell it" if nv_counts else "no NVLink count tells it")
            sentences["gpu"] = f"GPU model unknown and {tell}; {SEND_GPU_QUERY}."
    info = gpu_generation(model) if model else None
    if info and info.pcie_gen and not assumed:
        gen = info.pcie_gen
        pcie_note = f"assumed: the {info.family}'s Gen{gen} x16 host link ({SEND_LSPCI})"
        why = f"the {info.family}'s own host interface"
    elif info and info.pcie_gen:
        gen = info.pcie_gen
        pcie_note = f"assumed: Gen{gen} x16, the host link of {klass.split(' (')[0]} GPUs ({SEND_LSPCI})"
        why = f"the host interface of {klass.split(' (')[0]} GPUs"
    elif legacy_topo:
        gen = 3
        pcie_note = f"assumed: Gen3 x16 (legacy topo -m legend: pre-2017 driver, Pascal era or older; {SEND_LSPCI})"
        why = "the legacy topo -m legend (SOC, no NODE) comes from pre-2017 drivers of the Gen3 era"
    else:
        gen = ASSUMED_PCIE_GEN
        pcie_note = f"assumed: Gen{gen} x16, typical of current datacenter GPUs ({SEND_LSPCI})"
        why = "typical of the datacenter GPUs and NICs deployed since 2020 (A100, A30, L40S, ConnectX-6)"
    width = ASSUMED_PCIE_WIDTH
    sentences["pcie"] = (f"PCIe links not reported are assumed Gen{gen} x{width} "
                         f"({pcie_link(gen, width).spec_gbs:g} GB/s per direction): {why}; {SEND_LSPCI}.")
    fam = inter_socket_family(cpu_vendor, cpu_model, cpu_family)
    if fam is None:
        v, m = "intel", None
        link = inter_socket(v, m)
        spec, nccl, desc = INTER_SOCKET_TABLE[ASSUMED_INTER_SOCKET]
        link = LinkBandwidth(spec, nccl, nccl, f"assumed {desc}; " + link.source.split(": ", 1)[0])
        is_assumed = True
        is_note = (f"assumed: CPU unknown, NCCL's {ASSUMED_INTER_SOCKET}_QPI_BW class ({nccl:g} GB/s); "
                   f"{SEND_HOST_INFO}")
        sentences["inter_socket"] = (f"CPU unknown: the inter-socket link is assumed NCCL's "
                                     f"{ASSUMED_INTER_SOCKET}_QPI_BW class, {nccl:g} GB/s per direction "
                                     f"(Intel Skylake-SP to Ice Lake, the most common dual-socket GPU servers); "
                                     f"{SEND_HOST_INFO}.")
    else:
        link = inter_socket(cpu_vendor, cpu_model, cpu_family)
        is_assumed = "intel" in (cpu_vendor or "").lower() and cpu_model is None
        is_note = (f"assumed: Intel CPU model unknown, SKL class; {SEND_HOST_INFO}" if is_assumed else None)
        if is_assumed:
            sentences["inter_socket"] = (f"Intel CPU model unknown: the inter-socket link is assumed NCCL's "
                                         f"SKL_QPI_BW class, {link.nccl_gbs:g} GB/s per direction; {SEND_HOST_INFO}.")
    return Assumptions(gpu_model=model, gpu_class=klass, gpu_assumed=assumed, pcie_gen=gen, pcie_width=width,
                       pcie_note=pcie_note, inter_socket=link, inter_socket_assumed=is_assumed,
                       inter_socket_note=is_note, nvlink_note=nvlink_note, sentences=sentences)
