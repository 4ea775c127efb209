"""What a device's PCI ids and printed name say about it: GPU model, NVSwitch, NIC transport, CPU.

The one table of each identification topoweb makes from ids and names, shared by
:mod:`apps.domain.assemble` (which turns them into facts) and :mod:`apps.domain.hostgraph`
(which turns facts into node kinds):

* :func:`gpu_model_from_id` / :func:`gpu_model_from_name`: the GPU model of a PCI function whose
  nvidia-smi query is missing (``GH100 [H100 SXM5 80GB]``, ``Device 2330``, hwloc's ``GPUModel``);
* :data:`NVSWITCH_IDS`: NVSwitch functions listed without a class;
* :func:`rdma_hardware` and :func:`net_plugin`: whether a network function is RDMA hardware, and
  whether NCCL reaches it through a libfabric net plugin (AWS EFA, HPE Slingshot: aws-ofi-nccl)
  rather than its own IB verbs transport;
* :func:`cpu_from_pci_vendor` and :func:`cpu_from_name`: NCCL's CPU class (``intel``, ``amd``,
  ``arm``, ``power``) and Intel model id from a root complex's vendor or a CPU/root-port name,
  since NCCL picks its inter-socket bandwidth and P2P rules from them (topo.cc L60-81, L739-757
  and paths.cc L356-362 at v2.30.7-1 [S3][S2]).
"""

from __future__ import annotations

import functools
import re

__all__ = [
    "NVIDIA", "MELLANOX", "AMAZON", "HPE_CRAY", "GPU_MODEL_BY_ID", "NVSWITCH_IDS",
    "gpu_model_from_id", "gpu_model_from_name", "rdma_hardware", "net_plugin",
    "cpu_from_pci_vendor", "cpu_from_name", "is_virtual_device",
]

NVIDIA = 0x10DE
MELLANOX = 0x15B3
AMAZON = 0x1D0F
HPE_CRAY = 0x17DB

# NVIDIA datacenter GPU device ids (pci.ids) -> the model name nvidia-smi prints, for PCI-only reports
GPU_MODEL_BY_ID = {
    0x1DB1: "Tesla V100-SXM2-16GB", 0x1DB5: "Tesla V100-SXM2-32GB", 0x20B0: "A100-SXM4-40GB",
    0x20B2: "NVIDIA A100-SXM4-80GB", 0x20B5: "NVIDIA A100 80GB PCIe", 0x20F1: "NVIDIA A100-PCIE-40GB",
    0x2330: "NVIDIA H100 80GB HBM3", 0x2331: "NVIDIA H100 PCIe", 0x2335: "NVIDIA H200", 0x2901: "NVIDIA B200",
    # AMD Instinct (vendor 0x1002): Aldebaran and Aqua Vanjaram
    0x7408: "AMD Instinct MI250X", 0x740C: "AMD Instinct MI250X/MI250", 0x740F: "AMD Instinct MI210",
    0x74A1: "AMD Instinct MI300X",
}
# NVSwitch PCI device ids (DGX-2 gen1, HGX A100 gen2, HGX H100 gen3), for listings without a class
NVSWITCH_IDS = {0x1AC0, 0x1AC1, 0x1AC2, 0x1AF1, 0x22A3}

_DEVICE_ID_RE = re.compile(r"\bDevice ([0-9a-fA-F]{4})\b")
_BRACKET_RE = re.compile(r"\[([^\[\]]+)\]")
_GPU_WORDS_RE = re.compile(r"Tesla|Quadro|GeForce|TITAN|RTX|\b[ABHLTVP]\d{1,3}\b|Instinct|MI\d{3}|GB\d{2,3}\b"
                           r"|\bH\d{3}\b|\bB\d{3}\b|A\d{2,3}|L\d{1,2}S?\b", re.IGNORECASE)
_NOT_GPU_RE = re.compile(r"Audio|USB|UCSI|Serial|Bridge|NVSwitch|SMBus|Memory|Ethernet|Network", re.IGNORECASE)


def gpu_model_from_id(device_id: int | None) -> str | None:
    """The model of an NVIDIA GPU function from its PCI device id (``0x2330`` -> H100 SXM)."""
    return GPU_MODEL_BY_ID.get(device_id) if device_id is not None else None


def gpu_model_from_name(name: str | None) -> str | None:
    """The GPU model a PCI name states: lspci's bracketed marketing name (``NVIDIA Corporation AD102GL
    [RTX 6000 Ada Generation]`` -> ``RTX 6000 Ada Generation``), lspci's fallback ``Device 2330``
    through :data:`GPU_MODEL_BY_ID`, or an hwloc ``GPUModel`` text as it is (``Tesla T4``).

    >>> gpu_model_from_name("NVIDIA Corporation GH100 [H100 SXM5 80GB]")
    'H100 SXM5 80GB'
    >>> gpu_model_from_name("NVIDIA Corporation Device 2335"), gpu_model_from_name("NVIDIA Corporation GA102 High Definition Audio Controller")
    ('NVIDIA H200', None)
    """
    text = (name or "").strip()
    if not text or _NOT_GPU_RE.search(text):
        return None
    m = _DEVICE_ID_RE.search(text)
    if m:
        return gpu_model_from_id(int(m.group(1), 16))
    brackets = [b for b in _BRACKET_RE.findall(text) if b not in ("AMD", "AMD/ATI") and _GPU_WORDS_RE.search(b)]
    if brackets:
        return brackets[-1].strip()
    if "Corporation" in text or "Inc." in text:
        return None  # a vendor + chip name (GA102GL) without the model in brackets
    return text if _GPU_WORDS_RE.search(text) else None


def net_plugin(vendor_id: int | None, device_id: int | None, name: str | None = None) -> str | None:
    """The network NCCL reaches through a libfabric net plugin (aws-ofi-nccl), not its IB verbs
    transport: AWS Elastic Fabric Adapter (vendor 0x1d0f, devices 0xefa0-0xefaf; lspci names it
    "Elastic Fabric Adapter (EFA)") and HPE Slingshot (Cray Cassini, vendor 0x17db). None for
    anything else (an AWS ENA is plain Ethernet).

    >>> net_plugin(0x1D0F, 0xEFA1), net_plugin(None, None, "Amazon.com, Inc. Elastic Fabric Adapter (EFA)")
    ('AWS EFA', 'AWS EFA')
    """
    if (vendor_id == AMAZON and device_id is not None and device_id >> 4 == 0xEFA) or \
            re.search(r"Elastic Fabric Adapter", name or ""):
        return "AWS EFA"
    if vendor_id == HPE_CRAY or re.search(r"Cassini|Slingshot", name or ""):
        return "HPE Slingshot"
    return None


_RDMA_NAME_RE = re.compile(r"ConnectX|BlueField|Infiniband|InfiniBand", re.IGNORECASE)


def rdma_hardware(class_code: int | None, vendor_id: int | None, device_id: int | None, name: str | None) -> bool:
    """An InfiniBand-class function (0x0207), a Mellanox/NVIDIA networking function, or a NIC of
    a libfabric network (:func:`net_plugin`)."""
    return (class_code == 0x0207 or vendor_id == MELLANOX or net_plugin(vendor_id, device_id, name) is not None
            or bool(_RDMA_NAME_RE.search(name or "")))


# PCI vendor of a root complex / root port -> (NCCL CPU class, CPU in words). NVIDIA root ports
# are Grace's (NVIDIA sells no x86 host bridge); NCCL files Grace under its ARM architecture.
_CPU_BY_PCI_VENDOR = {
    0x8086: ("intel", "Intel"),
    0x1022: ("amd", "AMD"),
    0x1DEF: ("arm", "Ampere (ARM)"),
    0x10DE: ("arm", "NVIDIA Grace (ARM)"),
    0x19E5: ("arm", "Huawei Kunpeng (ARM)"),
    0x1014: ("power", "IBM POWER"),
}


def cpu_from_pci_vendor(vendor_id: int | None) -> tuple[str, str] | None:
    """(NCCL CPU class, words) for the PCI vendor of a host bridge or root port; None if not a CPU's."""
    return _CPU_BY_PCI_VENDOR.get(vendor_id) if vendor_id is not None else None


# Intel codenames as pci.ids names root ports / uncore devices, and Xeon Scalable generations by the
# second digit of the model number (8174: 1st gen), -> the x86 model id NCCL compares (topo.cc
# L745-752: >= 0xCF ERP, >= 0x8F SRP, >= 0x55 SKL, else BDW).
_INTEL_CODENAMES = (("Emerald Rapids", 0xCF), ("Sapphire Rapids", 0x8F), ("Granite Rapids", 0xAD),
                    ("Ice Lake", 0x6A), ("Cascade Lake", 0x55), ("Sky Lake", 0x55), ("Skylake", 0x55),
                    ("Broadwell", 0x4F), ("Haswell", 0x3F), ("Ivy Bridge", 0x3E), ("Sandy Bridge", 0x2D))
_XEON_SCALABLE_GEN = {"1": 0x55, "2": 0x55, "3": 0x6A, "4": 0x8F, "5": 0xCF}
_XEON_SCALABLE_RE = re.compile(r"Xeon.*?\b(?:Platinum|Gold|Silver|Bronze)\s+\d(\d)\d{2}", re.IGNORECASE)
_XEON_E5_RE = re.compile(r"Xeon.*?\bE[57]-\d{4}[A-Z]?\s*(?:(v[2-4])|0|\b)", re.IGNORECASE)
_XEON_E5_GEN = {None: 0x2D, "v2": 0x3E, "v3": 0x3F, "v4": 0x4F}


def cpu_from_name(text: str | None) -> tuple[str, int | None, str] | None:
    """(NCCL CPU class, Intel model id or None, words) from a CPU model name (hwloc ``CPUModel``,
    ``lscpu``) or a root complex's lspci name; None when the text names no CPU.

    >>> cpu_from_name("Intel(R) Xeon(R) Platinum 8174 CPU @ 3.10GHz")[:2]
    ('intel', 85)
    >>> cpu_from_name("AMD EPYC 7A53 64-Core Processor")[:2], cpu_from_name("POWER9 (raw), altivec supported")[:2]
    (('amd', None), ('power', None))
    """
    t = (text or "").strip()
    if not t:
        return None
    if re.search(r"\bPOWER\d|\bIBM POWER", t):
        return "power", None, t
    if re.search(r"Grace|Neoverse|Ampere|Altra|Kunpeng|aarch64|ARM", t):
        return "arm", None, t
    if re.search(r"\bAMD\b|EPYC|Ryzen|Threadripper|Advanced Micro Devices", t):
        return "amd", None, t
    if re.search(r"Intel|Xeon", t):
        for word, model in _INTEL_CODENAMES:
            if word.lower() in t.lower():
                return "intel", model, t
        m = _XEON_SCALABLE_RE.search(t)
        if m and m.group(1) in _XEON_SCALABLE_GEN:
            return "intel", _XEON_SCALABLE_GEN[m.group(1)], t
        m = _XEON_E5_RE.search(t)
        if m:
            return "intel", _XEON_E5_GEN.get(m.group(1)), t
        return "intel", None, t
    return None


# emulated chipsets (QEMU's i440FX and q35 host bridges, PIIX) and paravirtual devices
_VIRTUAL_RE = re.compile(r"QEMU|Red Hat, Inc|Virtio|VMware|Hyper-V|Microsoft Corporation|\bXen\b|440FX|82G33|PIIX",
                         re.IGNORECASE)


@functools.lru_cache(maxsize=1024)  # a host lists a few dozen names, the checks read each twice
def is_virtual_device(name: str | None, vendor_id: int | None = None) -> bool:
    """A hypervisor's emulated PCI function (QEMU/virtio, VMware, Hyper-V, Xen): its vendor says
    nothing about the host CPU (QEMU's q35 host bridge is an emulated Intel chipset on any host)."""
    return vendor_id in (0x1AF4, 0x1B36, 0x15AD, 0x1414, 0x5853) or bool(_VIRTUAL_RE.search(name or ""))
