"""The PCI listing stage: every PCI source's devices merged per canonical BDF (domain.md 4.2
join 5: ``sysfs_pci`` > ``lspci -vvv`` > ``lspci -tv`` > NCCL XML > hwloc XML, fields merged per
BDF, the first source that knows a field wins) and each device's kind (gpu, nvswitch, bridge
roles, nic, nvme, other)."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable
from typing import Any

from apps.domain import devices
from apps.domain.assemble.report import (
    Report,
    get_field,
    get_list,
    to_bdf,
    to_float,
    to_hex,
    to_int,
    to_numa,
    to_plain,
)
from apps.domain.facts import PciDeviceFact
from apps.domain.pci import pcie_generation

__all__ = ["PCI_SOURCES", "PCI_FIELDS", "PCI_DEVICE_LIST", "merge_pci", "pci_fact", "is_gpu", "is_network",
           "virtual_pci"]

NVIDIA = devices.NVIDIA
PCI_SOURCES = ("sysfs_pci", "lspci_verbose", "lspci_tree", "nccl_topo_xml", "hwloc_xml")

CLASS_BY_NAME = {  # lspci -vvv without -nn prints only the class name
    "PCI bridge": 0x0604, "Host bridge": 0x0600, "Bridge": 0x0680, "3D controller": 0x0302,
    "VGA compatible controller": 0x0300, "Display controller": 0x0380, "Ethernet controller": 0x0200,
    "Infiniband controller": 0x0207, "Network controller": 0x0280, "Non-Volatile memory controller": 0x0108,
    "RAID bus controller": 0x0104, "Serial Attached SCSI controller": 0x0107, "SATA controller": 0x0106,
    "Processing accelerators": 0x1200,
}
VENDOR_BY_NAME = (("NVIDIA", NVIDIA), ("Mellanox", devices.MELLANOX), ("Broadcom / LSI", 0x1000), ("LSI Logic", 0x1000),
                  ("PLX Technology", 0x10B5), ("Intel Corporation", 0x8086), ("Advanced Micro Devices", 0x1022),
                  ("Samsung", 0x144D), ("Microchip", 0x11F8), ("PMC-Sierra", 0x11F8), ("Ampere Computing", 0x1DEF),
                  ("IBM", 0x1014), ("Huawei", 0x19E5), ("Amazon.com", devices.AMAZON), ("Cray", devices.HPE_CRAY),
                  ("Hewlett Packard Enterprise", 0x1590), ("Red Hat", 0x1B36))
ACS_NAMES = {"src_valid": "SrcValid", "trans_blk": "TransBlk", "req_redir": "ReqRedir", "cmplt_redir": "CmpltRedir",
             "upstream_fwd": "UpstreamFwd", "egress_ctrl": "EgressCtrl", "direct_trans": "DirectTrans"}

# Each PCI source's fields, by the common name used here (domain.md 4.2 join 5). A common name a
# source does not have is absent from its map.
PCI_FIELDS: dict[str, dict[str, str]] = {
    "sysfs_pci": {"bdf": "bdf", "ancestry": "ancestry", "root": "root_complex", "class_code": "class_code",
                  "vendor_id": "vendor_id", "device_id": "device_id", "numa": "numa_node",
                  "speed": "current_link_speed_gts", "width": "current_link_width",
                  "max_speed": "max_link_speed_gts", "max_width": "max_link_width", "local_cpulist": "local_cpulist",
                  "driver": "driver"},
    "lspci_verbose": {"bdf": "bdf", "class_name": "class_name", "class_code": "class_code", "name": "name",
                      "vendor_name": "vendor_name", "vendor_id": "vendor_id", "device_id": "device_id",
                      "subsystem_vendor_id": "subsystem_vendor_id", "subsystem_device_id": "subsystem_device_id",
                      "port_type": "port_type", "numa": "numa_node", "driver": "driver", "speed": "sta_speed_gts",
                      "width": "sta_width", "max_speed": "cap_speed_gts", "max_width": "cap_width",
                      "bus_secondary": "bus_secondary", "bus_subordinate": "bus_subordinate", "acs_ctl": "acs_ctl",
                      "capabilities_denied": "capabilities_denied"},
    "lspci_tree": {"bdf": "bdf", "name": "name", "parent_bdf": "parent_bdf", "root": "root",
                   "secondary_bus_range": "secondary_bus_range"},
    "nccl_topo_xml": {"bdf": "bdf", "parent_bdf": "parent_bdf", "numa": "numa_id", "class_code": "class_code",
                      "vendor_id": "vendor_id", "device_id": "device_id", "subsystem_vendor_id": "subsystem_vendor_id",
                      "subsystem_device_id": "subsystem_device_id", "speed": "link_speed_gts", "width": "link_width",
                      "kind": "kind", "virtual": "virtual"},
    # hwloc gives the link in GB/s (pci_link_speed), not its generation and width
    "hwloc_xml": {"bdf": "bdf", "parent_bdf": "parent_bdf", "root": "host_bridge", "numa": "numa_os_index",
                  "class_code": "class_code", "vendor_id": "vendor_id", "device_id": "device_id",
                  "subsystem_vendor_id": "subsystem_vendor_id", "subsystem_device_id": "subsystem_device_id",
                  "vendor_name": "vendor_name", "name": "device_name", "link_gbs": "link_speed_gbs", "kind": "kind",
                  "gpu_model": "gpu_model"},
}
PCI_DEVICE_LIST = {"sysfs_pci": "devices", "lspci_verbose": "devices", "lspci_tree": "devices",
                   "nccl_topo_xml": "pci_devices", "hwloc_xml": "pci_devices"}


@functools.lru_cache(maxsize=64)


def _gen(speed_gts: Any) -> int | None:
    f = to_float(speed_gts)
    return pcie_generation(f) if f else None


_KEEP_CLASSES = {0x01, 0x02, 0x03, 0x06, 0x12}  # storage, network, display, bridge, accelerators
_KEEP_CLASS_NAME_RE = re.compile(r"bridge|controller|accelerator|Display|Network|storage", re.IGNORECASE)
_SKIP_CLASS_NAMES = {"USB controller", "SMBus", "Memory controller", "Communication controller",
                     "Serial bus controller", "Audio device", "Multimedia audio controller"}
_NETWORK_NAME_RE = re.compile(r"Ethernet|Network|Infiniband|InfiniBand|ConnectX|BlueField|Elastic Fabric|Cassini",
                              re.IGNORECASE)


@functools.lru_cache(maxsize=256)
def _kept_class_name(cname: str) -> bool:
    """Whether a function of this class (as lspci names it) can be a node of the host graph (a
    whole-machine capture repeats twenty class names over 500 functions: each is judged once)."""
    return cname not in _SKIP_CLASS_NAMES and (cname in CLASS_BY_NAME or bool(_KEEP_CLASS_NAME_RE.search(cname)))


def _vendor_id(name: Any) -> int | None:
    text = str(name or "")
    return next((vid for prefix, vid in VENDOR_BY_NAME if text.startswith(prefix)), None)


def _root_id(root: Any) -> str | None:
    """``pci0000:17`` (sysfs), ``0000:17`` (lspci -t), ``0000:[2b-3b]`` (hwloc) -> ``0000:17``."""
    if not isinstance(root, str):
        return None
    m = re.search(r"([0-9a-fA-F]{4}):\[?([0-9a-fA-F]{2})", root)
    return f"{m.group(1).lower()}:{m.group(2).lower()}" if m else None


def _bridges_by_bus(devices_: Iterable[Any]) -> dict[tuple[str, int], str]:
    """lspci -vvv has no tree: a device's parent is the bridge whose secondary bus is its bus.

    Returns {(domain, secondary bus): bridge BDF}.
    """
    out: dict[tuple[str, int], str] = {}
    for d in devices_:
        sec = get_field(d, "bus_secondary")
        if sec is None:
            continue
        bdf = to_bdf(get_field(d, "bdf"))
        if bdf:
            out.setdefault((bdf[:4], int(str(sec), 16)), bdf)
    return out


def _bus_parent(bridges: dict[tuple[str, int], str], bdf: str) -> str | None:
    p = bridges.get((bdf[:4], int(bdf[5:7], 16))) if bridges else None
    return p if p != bdf else None


def merge_pci(rep: Report) -> dict[str, dict]:
    """Merge PCI devices of every PCI source into {bdf: field dict} (first source wins; a PCIe
    generation or width two sources give differently is a disagreement)."""
    merged: dict[str, dict] = {}
    for kind in PCI_SOURCES:
        res = rep.results.get(kind)
        if not res:
            continue
        for dev in _pci_devices(kind, res):
            bdf = dev["bdf"]
            cur = merged.setdefault(bdf, {"bdf": bdf, "sources": []})
            cur["sources"].append(kind)
            for k, v in dev.items():
                if v is None or v == () or v == []:
                    continue
                if cur.get(k) in (None, (), []):
                    cur[k] = v
                elif k in ("gen", "width") and cur[k] != v:
                    rep.disagree(
                        bdf, f"{kind} says PCIe {k} {v} for {bdf}, {cur['sources'][0]} says {cur[k]}",
                        cur["sources"][0], kind,
                    )
    return merged


def _pci_devices(kind: str, res: Any) -> Iterable[dict]:
    """The device records of one PCI source, in the common field names (``PCI_FIELDS``)."""
    devs = get_list(res, PCI_DEVICE_LIST[kind])
    fields = PCI_FIELDS[kind]
    bridges = _bridges_by_bus(devs) if kind == "lspci_verbose" else {}
    name_field = fields.get("class_name")
    for d in devs:
        is_dict = isinstance(d, dict)
        # the graph needs bridges, GPUs/accelerators, NICs and storage; a full lspci -vvv is
        # mostly uncore/system functions, skipped here (before reading their other fields)
        cname = (d.get(name_field) if is_dict else getattr(d, name_field, None)) if name_field else None
        if cname is not None and not _kept_class_name(cname):
            continue
        if is_dict:
            v = {k: d.get(src) for k, src in fields.items()}
        else:
            v = {k: getattr(d, src, None) for k, src in fields.items()}
        record = _record(kind, v, cname, bridges)
        if record is not None:
            yield record


def _record(kind: str, v: dict, cname: str | None, bridges: dict[tuple[str, int], str]) -> dict | None:
    """One device in the common fields; None for a function the graph does not need."""
    class_code = to_hex(v.get("class_code"))
    if class_code is not None and class_code > 0xFFFF:
        class_code >>= 8  # 0x060400 -> 0x0604
    if (class_code is not None and class_code >> 8 not in _KEEP_CLASSES and class_code != 0x0C06
            and v.get("kind") not in ("gpu", "nic", "nvswitch")):
        # (0x0c06: InfiniBand as a serial bus controller, older HCAs; a source's own kind wins:
        # hwloc names an NVSwitch whose config space reads 0000 [0000:0000] by its subtype)
        return None
    if class_code is None and cname:
        class_code = CLASS_BY_NAME.get(cname.strip())
    bdf = to_bdf(v.get("bdf"))
    if not bdf:
        return None
    ancestry = tuple(b for b in (to_bdf(x) for x in (v.get("ancestry") or ())) if b)
    if ancestry and ancestry[-1] == bdf:
        ancestry = ancestry[:-1]
    parent = to_bdf(v.get("parent_bdf")) or (ancestry[-1] if ancestry else None) or _bus_parent(bridges, bdf)
    acs = v.get("acs_ctl") or ()
    if dataclasses.is_dataclass(acs):
        acs = to_plain(acs)
    if isinstance(acs, dict):
        acs = tuple(ACS_NAMES.get(k, k) for k, on in acs.items() if on)
    port_type = v.get("port_type")
    hint = v.get("kind")
    if kind == "nccl_topo_xml" and (hint == "bridge" or class_code == 0x0604):
        # NCCL keeps one <pci> per switch (the upstream port); children hang right below it
        port_type = port_type or "Upstream Port"
    secondary = to_hex(v.get("bus_secondary"))
    rng = v.get("secondary_bus_range")
    if secondary is None and isinstance(rng, str):
        secondary = to_hex(rng.split("-")[0])
    name = v.get("name")
    return {
        "bdf": bdf,
        "parent_bdf": parent,
        "ancestry": ancestry,
        "root": _root_id(v.get("root")),
        "class_code": class_code,
        "vendor_id": to_hex(v.get("vendor_id")) or _vendor_id(v.get("vendor_name") or name),
        "device_id": to_hex(v.get("device_id")) or _name_device_id(name),
        "subsystem_vendor_id": to_hex(v.get("subsystem_vendor_id")),
        "subsystem_device_id": to_hex(v.get("subsystem_device_id")),
        "name": name,
        "port_type": port_type,
        "numa": to_numa(v.get("numa")),
        "driver": v.get("driver"),
        "gen": _gen(v.get("speed")),
        "width": to_int(v.get("width")),
        "max_gen": _gen(v.get("max_speed")),
        "max_width": to_int(v.get("max_width")),
        "link_gbs": to_float(v.get("link_gbs")),
        "secondary_bus": secondary,
        "subordinate_bus": to_hex(v.get("bus_subordinate")),
        "acs_ctl": tuple(acs) if isinstance(acs, (list, tuple)) else (),
        "capabilities_denied": bool(v.get("capabilities_denied")),
        "local_cpulist": v.get("local_cpulist"),
        "kind_hint": hint,
        "gpu_model": v.get("gpu_model"),
        "virtual": bool(v.get("virtual")),
        "source": kind,
    }


def virtual_pci(merged: dict[str, dict]) -> bool:
    """The PCI tree is a hypervisor's (emulated chipsets, virtual switches ``ffff:ff:xx.0``) or a
    hand-written flattened topology file (NCCL XML GPUs and NICs without vendor ids)."""
    return any(d.get("virtual") or devices.is_virtual_device(d.get("name"), d.get("vendor_id"))
               or (d["source"] == "nccl_topo_xml" and d.get("vendor_id") is None and d.get("kind_hint") in ("gpu", "nic"))
               for d in merged.values())


def is_network(d: dict) -> bool:
    cc = d.get("class_code")
    if cc is not None:
        return cc >> 8 == 0x02 or cc == 0x0C06
    return d.get("kind_hint") == "nic" or bool(_NETWORK_NAME_RE.search(d.get("name") or ""))


_NAME_DEVICE_RE = re.compile(r"\bDevice ([0-9a-fA-F]{4})\b")


def _name_device_id(name: Any) -> int | None:
    m = _NAME_DEVICE_RE.search(name or "") if isinstance(name, str) else None
    return int(m.group(1), 16) if m else None


def is_gpu(d: dict) -> bool:
    cc = d.get("class_code")
    if d.get("kind_hint") == "gpu":
        return True
    if d.get("vendor_id") == NVIDIA and cc in (0x0300, 0x0302):
        return True
    if cc is None and d.get("vendor_id") == NVIDIA and d.get("secondary_bus") is None:
        # lspci -tv names only: an NVIDIA function that is no bridge, audio, USB or NVSwitch
        name = d.get("name") or ""
        return d.get("device_id") not in devices.NVSWITCH_IDS and not re.search(
            r"Audio|USB|UCSI|Serial|Bridge|NVSwitch|SMBus|Memory", name, re.IGNORECASE)
    return False


def _pci_kind(d: dict, gpu_bdfs: set[str], nic_bdfs: set[str]) -> str:
    bdf = d["bdf"]
    cc = d.get("class_code")
    hint = (d.get("kind_hint") or "").lower()
    pt = (d.get("port_type") or "").lower()
    name = d.get("name") or ""
    if bdf in gpu_bdfs or is_gpu(d):
        return "gpu"
    if d.get("vendor_id") == NVIDIA and (cc == 0x0680 or d.get("device_id") in devices.NVSWITCH_IDS) or hint == "nvswitch":
        return "nvswitch"
    if "root port" in pt:
        return "root_port"
    if "upstream" in pt:
        return "upstream_port"
    if "downstream" in pt:
        return "downstream_port"
    if cc == 0x0604 or hint in ("bridge", "switch") or d.get("secondary_bus") is not None:
        return "bridge"
    if bdf in nic_bdfs or (cc is not None and (cc >> 8 == 0x02 or cc == 0x0C06)) or hint == "nic":
        return "nic"
    if cc is None and re.search(r"ConnectX|BlueField|Infiniband|Ethernet|Elastic Fabric", name, re.IGNORECASE):
        return "nic"
    if cc == 0x0108 or hint == "nvme" or (cc is None and re.search(r"Non-Volatile|NVMe", name, re.IGNORECASE)):
        return "nvme"
    if "pci bridge" in name.lower() or "pci-to-pci" in name.lower():
        return "bridge"
    return "other"


def pci_fact(d: dict, gpu_bdfs: set[str], nic_bdfs: set[str]) -> PciDeviceFact:
    return PciDeviceFact(
        bdf=d["bdf"], kind=_pci_kind(d, gpu_bdfs, nic_bdfs), parent_bdf=d.get("parent_bdf"),
        ancestry=tuple(d.get("ancestry") or ()), root=d.get("root"), class_code=d.get("class_code"),
        vendor_id=d.get("vendor_id"), device_id=d.get("device_id"),
        subsystem_vendor_id=d.get("subsystem_vendor_id"), subsystem_device_id=d.get("subsystem_device_id"),
        name=d.get("name"), port_type=d.get("port_type"), numa=d.get("numa"), driver=d.get("driver"),
        gen=d.get("gen"), width=d.get("width"), max_gen=d.get("max_gen"), max_width=d.get("max_width"),
        link_gbs=d.get("link_gbs"),
        secondary_bus=d.get("secondary_bus"), subordinate_bus=d.get("subordinate_bus"),
        acs_ctl=tuple(d.get("acs_ctl") or ()), capabilities_denied=bool(d.get("capabilities_denied")),
        local_cpulist=d.get("local_cpulist"), source=",".join(d.get("sources") or ()),
    )
