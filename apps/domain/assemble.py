"""Join the parser results of one node report into :class:`~apps.domain.facts.HostFacts`.

``assemble(results, hostname)`` takes ``{kind: parser result}`` (kinds of
``apps.domain.parsers.KINDS``; a result may be the parser's frozen dataclass or its
``to_jsonable`` dict) and returns one frozen, normalised view of the host. This is the only
module that knows the parser result shapes; it reads each parser's fields by the one name its
module docstring gives them (``PCI_FIELDS`` maps each PCI source's fields to the common ones).

Joins (domain.md 4.2):

1. GPU index <-> BDF <-> UUID from ``nvidia_smi_gpus`` (``nvidia-smi --query-gpu=index,uuid,
   pci.bus_id,...``); ``GPU<i>`` of topo -m is index ``<i>``. Without it, GPU BDFs come from the
   NCCL XML ``<gpu dev=i>`` (CUDA device order, assumed equal to nvidia-smi order) or, as a last
   resort, from GPU functions in the PCI listing in bus order (nvidia-smi's order).
2. ``mlx5_N`` <-> BDF from ``sysfs_ib`` (``readlink -f /sys/class/infiniband/mlx5_N/device``),
   the NCCL XML ``<nic><net name=...>`` under a ``<pci busid=...>``, or an hwloc OpenFabrics OS
   device under its PCI function (an RDMA device, port state unknown).
3. topo -m NIC label (``NIC3`` or ``mlx5_3``) <-> HCA name from the matrix header / NIC Legend.
4. Port state and rate from ``ibstat`` > ``sysfs_ib`` > ``ibv_devinfo`` > ``ibstatus`` (first wins,
   later ones fill gaps; different values are recorded as disagreements).
5. PCI tree from ``sysfs_pci`` > ``lspci_verbose`` > ``lspci_tree`` > ``nccl_topo_xml`` >
   ``hwloc_xml`` (fields merged per BDF, the first source that knows a field wins).

Facts read here that the parsers state and later stages need (each one named stage below):
GPU models from device names and hwloc ``GPUModel`` (:func:`_gpu_models_from_pci`); the CPU
class from NCCL's ``<cpu>``, hwloc's packages or the PCI root complex
(:meth:`_Builder.cpu`); NVLink and xGMI links from topo -m, NCCL/RCCL XML and hwloc's
``NVLinkBandwidth``/``XGMIBandwidth`` matrices (:meth:`_Builder.gpu_links`); sockets and NUMA
nodes from hwloc packages (:meth:`_Builder.cpus`); NICs of libfabric networks and NCCL's Socket
nets (:meth:`_Builder.nics`); and whether any source can show the host's NICs at all
(:meth:`_Builder.nic_inventory`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Iterable

from apps.domain import devices
from apps.domain.facts import (
    CpuFact,
    Disagreement,
    GpuFact,
    HostFacts,
    NicFact,
    NvlinkPair,
    PciDeviceFact,
)
from apps.domain.parsers.host_info import iommu_words
from apps.domain.pci import canonical_bdf, is_bdf

__all__ = ["assemble", "normalize_token"]

NVIDIA = devices.NVIDIA
MELLANOX = devices.MELLANOX
PCI_SOURCES = ("sysfs_pci", "lspci_verbose", "lspci_tree", "nccl_topo_xml", "hwloc_xml")
IB_SOURCES = ("ibstat", "sysfs_ib", "ibv_devinfo", "ibstatus")
XML_SOURCES = ("nccl_topo_xml", "hwloc_xml")


# -- generic accessors -----------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Dataclasses -> dicts (recursively), tuples -> lists; dicts/scalars as they are."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and type(value).__module__ != "builtins" and hasattr(type(value), "__members__"):
        return value.value  # enums
    return value


def _get(d: Any, key: str, default: Any = None) -> Any:
    """Field ``key`` of a parser record (a dict or a dataclass); ``default`` when absent or empty."""
    if d is None:
        return default
    v = d.get(key) if isinstance(d, dict) else getattr(d, key, None)
    return default if v is None or v == "" else v


def _list(d: Any, key: str) -> list:
    return list(_get(d, key, default=()) or ())


def _int(value: Any, base: int = 10) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    text = str(value).strip()
    if not text or text.upper() in ("N/A", "NONE", "-"):
        return None
    try:
        if text.lower().startswith("0x"):
            return int(text, 16)
        return int(text, base)
    except ValueError:
        m = re.match(r"-?\d+", text)
        return int(m.group(0)) if m else None


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        m = re.match(r"\s*(\d+(?:\.\d+)?)", str(value))
        return float(m.group(1)) if m else None


def _bool(value: Any) -> bool | None:
    """A parser's boolean (``True``/``False``), or a JSON copy of one; None when unknown."""
    if value is None or isinstance(value, bool):
        return value
    n = _int(value)
    return None if n is None else n != 0


_CANON_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


@functools.lru_cache(maxsize=8192)
def _bdf_text(text: str) -> str | None:
    text = text.strip()
    if _CANON_RE.match(text):
        return text
    if is_bdf(text):
        return canonical_bdf(text)
    m = re.search(r"([0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\s*$", text)
    return canonical_bdf(m.group(0).strip()) if m else None


def _bdf(value: Any) -> str | None:
    if not value or not isinstance(value, str):
        return None
    return _bdf_text(value)


def _numa(value: Any) -> int | None:
    n = _int(value)
    return n if n is not None and n >= 0 else None


CLASS_BY_NAME = {  # lspci -vvv without -nn prints only the class name
    "PCI bridge": 0x0604, "Host bridge": 0x0600, "Bridge": 0x0680, "3D controller": 0x0302,
    "VGA compatible controller": 0x0300, "Display controller": 0x0380, "Ethernet controller": 0x0200,
    "Infiniband controller": 0x0207, "Network controller": 0x0280, "Non-Volatile memory controller": 0x0108,
    "RAID bus controller": 0x0104, "Serial Attached SCSI controller": 0x0107, "SATA controller": 0x0106,
    "Processing accelerators": 0x1200,
}
VENDOR_BY_NAME = (("NVIDIA", NVIDIA), ("Mellanox", MELLANOX), ("Broadcom / LSI", 0x1000), ("LSI Logic", 0x1000),
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
    from apps.domain.bandwidth import pcie_generation

    f = _float(speed_gts)
    return pcie_generation(f) if f else None


_KEEP_CLASSES = {0x01, 0x02, 0x03, 0x06, 0x12}  # storage, network, display, bridge, accelerators
_KEEP_CLASS_NAME_RE = re.compile(r"bridge|controller|accelerator|Display|Network|storage", re.IGNORECASE)
_SKIP_CLASS_NAMES = {"USB controller", "SMBus", "Memory controller", "Communication controller",
                     "Serial bus controller", "Audio device", "Multimedia audio controller"}
_NETWORK_NAME_RE = re.compile(r"Ethernet|Network|Infiniband|InfiniBand|ConnectX|BlueField|Elastic Fabric|Cassini",
                              re.IGNORECASE)


def _hex(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip().lower()
    if text.startswith("0x"):
        text = text[2:]
    return int(text, 16) if text and all(c in "0123456789abcdef" for c in text) else None


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
        sec = _get(d, "bus_secondary")
        if sec is None:
            continue
        bdf = _bdf(_get(d, "bdf"))
        if bdf:
            out.setdefault((bdf[:4], int(str(sec), 16)), bdf)
    return out


def _bus_parent(bridges: dict[tuple[str, int], str], bdf: str) -> str | None:
    p = bridges.get((bdf[:4], int(bdf[5:7], 16))) if bridges else None
    return p if p != bdf else None


def normalize_token(token: Any) -> str | None:
    """topo -m cell as printed -> canonical token (``SOC`` -> ``SYS``, ``NV12``, ``X``); None if empty."""
    if token is None:
        return None
    t = str(token).strip().upper()
    if not t:
        return None
    if t == "SOC":
        return "SYS"
    if t.startswith("NV") and t[2:].isdigit():
        return f"NV{int(t[2:])}"
    return t


# -- the assembler ---------------------------------------------------------------------------


class _Builder:
    def __init__(self, results: dict[str, Any], hostname: str) -> None:
        # parser dataclasses are read in place (converting 500-function lspci listings costs more
        # than building the graph); JSON dicts work the same through _get
        self.r = {k: v for k, v in results.items() if v is not None}
        self.hostname = hostname
        self.warnings: list[str] = []
        self.disagreements: list[Disagreement] = []

    def disagree(self, subject: str, message: str, *sources: str) -> None:
        self.disagreements.append(Disagreement(subject, message, tuple(sources)))

    # -- topo -m ---------------------------------------------------------------------------
    def topo(self) -> tuple[tuple[str, ...], dict, bool, dict[str, Any], dict[str, str | None]]:
        """Labels, normalised matrix, legacy flag, per-GPU affinity rows, NIC label -> HCA."""
        t = self.r.get("nvidia_smi_topo")
        if not t:
            return (), {}, False, {}, {}
        matrix = _get(t, "matrix", default={}) or {}
        norm = {
            row: {col: normalize_token(tok) for col, tok in cols.items()} for row, cols in matrix.items()
        }
        labels = tuple(_list(t, "columns")) or tuple(matrix.keys())
        tokens = {tok for cols in norm.values() for tok in cols.values() if tok}
        legend = str(_get(t, "legend", default="")).lower()
        # legacy legends (SOC era) have no NODE: a legacy PHB may mean today's PHB or NODE
        legacy = "NODE" not in tokens and (
            legend in ("nvlink_legacy", "oldest")
            or any(str(tok).strip().upper() == "SOC" for cols in matrix.values() for tok in cols.values())
        )
        gpu_rows = {}
        for g in _list(t, "gpus"):
            gpu_rows[_get(g, "name") or f"GPU{_get(g, 'index')}"] = g
        nic_map: dict[str, str | None] = {}
        for n in _list(t, "nics"):
            label = _get(n, "name")
            if label:
                nic_map[label] = _get(n, "device") or (label if not re.fullmatch(r"NIC\d+", label) else None)
        for w in _list(t, "warnings"):
            self.warnings.append(f"nvidia_smi_topo: {w}")
        return labels, norm, legacy, gpu_rows, nic_map

    def topo_aux(self, kind: str) -> dict:
        t = self.r.get(kind)
        if not t:
            return {}
        matrix = _get(t, "matrix", default={}) or {}
        return {row: {col: normalize_token(tok) for col, tok in cols.items()} for row, cols in matrix.items()}

    # -- PCI -------------------------------------------------------------------------------
    def pci(self) -> dict[str, dict]:
        """Merge PCI devices of every PCI source into {bdf: field dict} (first source wins)."""
        merged: dict[str, dict] = {}
        for kind in PCI_SOURCES:
            res = self.r.get(kind)
            if not res:
                continue
            for dev in self._pci_devices(kind, res):
                bdf = dev["bdf"]
                cur = merged.setdefault(bdf, {"bdf": bdf, "sources": []})
                cur["sources"].append(kind)
                for k, v in dev.items():
                    if v is None or v == () or v == []:
                        continue
                    if cur.get(k) in (None, (), []):
                        cur[k] = v
                    elif k in ("gen", "width") and cur[k] != v:
                        self.disagree(
                            bdf, f"{kind} says PCIe {k} {v} for {bdf}, {cur['sources'][0]} says {cur[k]}",
                            cur["sources"][0], kind,
                        )
        return merged

    def _pci_devices(self, kind: str, res: Any) -> Iterable[dict]:
        devs = _list(res, PCI_DEVICE_LIST[kind])
        fields = PCI_FIELDS[kind]
        bridges = _bridges_by_bus(devs) if kind == "lspci_verbose" else {}
        name_field = fields.get("class_name")
        for d in devs:
            is_dict = isinstance(d, dict)
            # the graph needs bridges, GPUs/accelerators, NICs and storage; a full lspci -vvv is
            # mostly uncore/system functions, skipped here (before reading their other fields)
            cname = (d.get(name_field) if is_dict else getattr(d, name_field, None)) if name_field else None
            if cname is not None and (cname in _SKIP_CLASS_NAMES or (
                    cname not in CLASS_BY_NAME and not _KEEP_CLASS_NAME_RE.search(cname))):
                continue
            if is_dict:
                v = {k: d.get(src) for k, src in fields.items()}
            else:
                v = {k: getattr(d, src, None) for k, src in fields.items()}
            class_code = _hex(v.get("class_code"))
            if class_code is not None and class_code > 0xFFFF:
                class_code >>= 8  # 0x060400 -> 0x0604
            if (class_code is not None and class_code >> 8 not in _KEEP_CLASSES and class_code != 0x0C06
                    and v.get("kind") not in ("gpu", "nic", "nvswitch")):
                # (0x0c06: InfiniBand as a serial bus controller, older HCAs; a source's own kind wins:
                # hwloc names an NVSwitch whose config space reads 0000 [0000:0000] by its subtype)
                continue
            if class_code is None and cname:
                class_code = CLASS_BY_NAME.get(cname.strip())
            bdf = _bdf(v.get("bdf"))
            if not bdf:
                continue
            ancestry = tuple(b for b in (_bdf(x) for x in (v.get("ancestry") or ())) if b)
            if ancestry and ancestry[-1] == bdf:
                ancestry = ancestry[:-1]
            parent = _bdf(v.get("parent_bdf")) or (ancestry[-1] if ancestry else None) or _bus_parent(bridges, bdf)
            acs = v.get("acs_ctl") or ()
            if dataclasses.is_dataclass(acs):
                acs = _plain(acs)
            if isinstance(acs, dict):
                acs = tuple(ACS_NAMES.get(k, k) for k, on in acs.items() if on)
            port_type = v.get("port_type")
            hint = v.get("kind")
            if kind == "nccl_topo_xml" and (hint == "bridge" or class_code == 0x0604):
                # NCCL keeps one <pci> per switch (the upstream port); children hang right below it
                port_type = port_type or "Upstream Port"
            secondary = _hex(v.get("bus_secondary"))
            rng = v.get("secondary_bus_range")
            if secondary is None and isinstance(rng, str):
                secondary = _hex(rng.split("-")[0])
            name = v.get("name")
            yield {
                "bdf": bdf,
                "parent_bdf": parent,
                "ancestry": ancestry,
                "root": _root_id(v.get("root")),
                "class_code": class_code,
                "vendor_id": _hex(v.get("vendor_id")) or _vendor_id(v.get("vendor_name") or name),
                "device_id": _hex(v.get("device_id")) or _name_device_id(name),
                "subsystem_vendor_id": _hex(v.get("subsystem_vendor_id")),
                "subsystem_device_id": _hex(v.get("subsystem_device_id")),
                "name": name,
                "port_type": port_type,
                "numa": _numa(v.get("numa")),
                "driver": v.get("driver"),
                "gen": _gen(v.get("speed")),
                "width": _int(v.get("width")),
                "max_gen": _gen(v.get("max_speed")),
                "max_width": _int(v.get("max_width")),
                "link_gbs": _float(v.get("link_gbs")),
                "secondary_bus": secondary,
                "subordinate_bus": _hex(v.get("bus_subordinate")),
                "acs_ctl": tuple(acs) if isinstance(acs, (list, tuple)) else (),
                "capabilities_denied": bool(v.get("capabilities_denied")),
                "local_cpulist": v.get("local_cpulist"),
                "kind_hint": hint,
                "gpu_model": v.get("gpu_model"),
                "virtual": bool(v.get("virtual")),
                "source": kind,
            }

    # -- GPUs ------------------------------------------------------------------------------
    def gpus(self, topo_rows: dict[str, Any], labels: tuple[str, ...], pci: dict[str, dict]) -> list[GpuFact]:
        by_name: dict[str, dict] = {}
        for label in labels:
            if re.fullmatch(r"GPU\d+", label):
                by_name.setdefault(label, {"index": int(label[3:])})
        for name, row in topo_rows.items():
            g = by_name.setdefault(name, {"index": int(name[3:]) if name[3:].isdigit() else len(by_name)})
            g["cpu_affinity"] = _get(row, "cpu_affinity")
            numa_text = str(_get(row, "numa_affinity", default="")).strip()
            g["numa"] = int(numa_text) if numa_text.isdigit() else None  # "0-3" (NPS4 ranges): unknown
            g["gpu_numa_id"] = _numa(_get(row, "gpu_numa_id"))
        q = self.r.get("nvidia_smi_gpus")
        for row in _list(q, "gpus"):
            idx = _int(_get(row, "index"))
            if idx is None:
                continue
            g = by_name.setdefault(f"GPU{idx}", {"index": idx})
            g.update({
                "bdf": _bdf(_get(row, "bdf")),
                "uuid": _get(row, "uuid"),
                "model": _get(row, "name"),
                "compute_cap": _get(row, "compute_cap"),
                "pstate": _get(row, "pstate"),
                "link_gen_current": _int(_get(row, "link_gen_current")),
                # pcie.link.gen.max is what GPU and system allow; the GPU's own maximum when absent
                "link_gen_max": _int(_get(row, "link_gen_max")) or _int(_get(row, "link_gen_gpu_max")),
                "link_gen_host_max": _int(_get(row, "link_gen_host_max")),
                "link_width_current": _int(_get(row, "link_width_current")),
                "link_width_max": _int(_get(row, "link_width_max")),
            })
        # NCCL XML GPUs (dev = CUDA index) give BDFs when the query is missing
        x = self.r.get("nccl_topo_xml")
        for xg in _list(x, "gpus"):
            idx = _int(_get(xg, "dev"))
            bdf = _bdf(_get(xg, "bdf"))
            if idx is None or not bdf:
                continue
            g = by_name.setdefault(f"GPU{idx}", {"index": idx})
            if not g.get("bdf"):
                g["bdf"] = bdf
            elif g["bdf"] != bdf:
                self.disagree(f"GPU{idx}", f"NCCL XML dev {idx} is {bdf}, nvidia-smi says {g['bdf']}",
                              "nccl_topo_xml", "nvidia_smi_gpus")
            if not g.get("compute_cap") and _get(xg, "sm"):
                sm = _int(_get(xg, "sm"))
                g["compute_cap"] = f"{sm // 10}.{sm % 10}" if sm else None
            g["gdr"] = _bool(_get(xg, "gdr"))
            if _list(xg, "c2c"):
                g["c2c"] = True  # NCCL's <c2c> element: the GPU reaches its CPU over NVLink-C2C
        # last resort: GPU functions in bus order = nvidia-smi index order
        gpu_bdfs = sorted(b for b, d in pci.items() if _is_gpu(d))
        if gpu_bdfs and not any(g.get("bdf") for g in by_name.values()):
            if not by_name or len(by_name) == len(gpu_bdfs):
                for i, bdf in enumerate(gpu_bdfs):
                    by_name.setdefault(f"GPU{i}", {"index": i})["bdf"] = bdf
                self.warnings.append(
                    "GPU index <-> PCI address taken from PCI bus order (no nvidia-smi --query-gpu): "
                    "nvidia-smi enumerates in bus order, so this holds unless devices are hidden"
                )
            else:
                self.warnings.append(
                    f"{len(gpu_bdfs)} NVIDIA GPUs in the PCI listing but {len(by_name)} in nvidia-smi: "
                    "cannot join GPU indexes to PCI addresses"
                )
        # nvlink -s
        nv = self.r.get("nvidia_smi_nvlink")
        for row in _list(nv, "gpus"):
            idx = _int(_get(row, "index"))
            if idx is None:
                continue
            g = by_name.setdefault(f"GPU{idx}", {"index": idx})
            links = _list(row, "links")
            active = [lk for lk in links if _get(lk, "active", default=False)]
            g["nvlink_total"] = len(links)
            g["nvlink_active"] = len(active)
            g["nvlink_link_gbps"] = tuple(v for v in (_float(_get(lk, "gbps")) for lk in active) if v is not None)
            if not g.get("uuid"):
                g["uuid"] = _get(row, "uuid")
            if not g.get("model"):
                g["model"] = _get(row, "name")
        out = []
        for name, g in sorted(by_name.items(), key=lambda kv: kv[1]["index"]):
            bdf = g.get("bdf")
            dev = pci.get(bdf) if bdf else None
            numa = g.get("numa")
            if dev and dev.get("numa") is not None:
                if numa is not None and numa != dev["numa"]:
                    self.disagree(name, f"topo -m NUMA affinity {numa} for {name}, PCI numa_node {dev['numa']}",
                                  "nvidia_smi_topo", dev["sources"][0])
                numa = dev["numa"]
            if dev and g.get("link_width_current") is None:
                g["link_width_current"], g["link_width_max"] = dev.get("width"), dev.get("max_width")
                g["link_gen_current"], g["link_gen_max"] = dev.get("gen"), dev.get("max_gen")
            out.append(GpuFact(
                index=g["index"], name=f"GPU{g['index']}", bdf=bdf, uuid=g.get("uuid"), model=g.get("model"),
                numa=numa, cpu_affinity=g.get("cpu_affinity") or (dev or {}).get("local_cpulist"),
                compute_cap=g.get("compute_cap"), pstate=g.get("pstate"),
                link_gen_current=g.get("link_gen_current"), link_gen_max=g.get("link_gen_max"),
                link_gen_host_max=g.get("link_gen_host_max"), link_width_current=g.get("link_width_current"),
                link_width_max=g.get("link_width_max"), nvlink_active=g.get("nvlink_active"),
                nvlink_total=g.get("nvlink_total"), nvlink_link_gbps=tuple(g.get("nvlink_link_gbps") or ()),
                gdr=g.get("gdr"), gpu_numa_id=g.get("gpu_numa_id"),
                # topo -m "GPU NUMA ID": GPU memory is a NUMA node of its own, which only coherent
                # NVLink-C2C platforms (Grace Hopper / Grace Blackwell) expose to x86-free hosts
                c2c=bool(g.get("c2c")) or g.get("gpu_numa_id") is not None,
            ))
        return out

    # -- NICs ------------------------------------------------------------------------------
    def nics(self, nic_map: dict[str, str | None], pci: dict[str, dict]) -> tuple[list[NicFact], list[str]]:
        """NIC ports of every source, and the NCCL XML nets of NCCL's Socket transport."""
        ports: dict[str, dict] = {}  # HCA name (or label) -> merged fields
        order: list[str] = []
        for kind in IB_SOURCES:
            res = self.r.get(kind)
            if not res:
                continue
            for ca in _list(res, "cas"):
                name = _get(ca, "name")
                if not name:
                    continue
                for p in _list(ca, "ports") or [{}]:
                    number = _int(_get(p, "number")) or 1
                    # one node per HCA port: name the port-1 (usual) entry by the CA name itself
                    key = name if number == 1 else f"{name}:{number}"
                    cur = ports.get(key)
                    if cur is None:
                        cur = ports[key] = {"device": name, "port": number, "sources": []}
                        order.append(key)
                    cur["sources"].append(kind)
                    fields = {
                        "bdf": _bdf(_get(ca, "bdf")),
                        "netdevs": tuple(_list(ca, "netdevs")),
                        "vendor_id": _hex(_get(ca, "vendor_id")),
                        "state": _get(p, "state"),
                        "phys_state": _get(p, "phys_state"),
                        "rate_gbps": _float(_get(p, "rate_gbps")),
                        "width": _get(p, "width"),
                        "link_layer": _get(p, "link_layer"),
                        "base_lid": _int(_get(p, "base_lid")),
                        "sm_lid": _int(_get(p, "sm_lid")),
                    }
                    for k, v in fields.items():
                        if v in (None, ()):
                            continue
                        if cur.get(k) in (None, ()):
                            cur[k] = v
                        elif k in ("state", "rate_gbps", "link_layer") and cur[k] != v:
                            self.disagree(key, f"{kind} says {k} {v!r} for {key}, {cur['sources'][0]} says {cur[k]!r}",
                                          cur["sources"][0], kind)
        # NCCL XML nets: name, speed, gdr, and the PCI address of the NIC
        sockets: list[str] = []
        x = self.r.get("nccl_topo_xml")
        for xn in _list(x, "nics"):
            bdf = _bdf(_get(xn, "bdf"))
            nets = _list(xn, "nets")
            names = [_get(net, "name") for net in nets]
            for net in nets:
                name = _get(net, "name")
                if not name:
                    continue
                port = _int(_get(net, "port"))
                if _socket_net(bdf, port, _get(net, "guid")):
                    sockets.append(name)
                    continue
                port = port or 1
                # ports of one device share its name (mlx5_0, mlx5_0:2); a net of its own name keeps it
                key = name if port == 1 or ":" in name or names.count(name) == 1 else f"{name}:{port}"
                cur = ports.get(key)
                if cur is None:
                    cur = ports[key] = {"device": name, "port": port, "sources": []}
                    order.append(key)
                cur["sources"].append("nccl_topo_xml")
                if bdf and not cur.get("bdf"):
                    cur["bdf"] = bdf
                speed = _int(_get(net, "speed_mbps"))
                cur.setdefault("speed_mbps", speed)
                if cur.get("rate_gbps") is None and speed:
                    cur["rate_gbps"] = speed / 1000
                cur.setdefault("gdr", _bool(_get(net, "gdr")))
                if cur.get("state") is None and (_hex(_get(net, "guid")) or 0):
                    # NCCL's IB transport lists only Active ports (net_ib/init.cc L363 at v2.30.7-1 [S8]):
                    # a <net> with a port GUID in NCCL's own dump was Active when NCCL ran
                    cur["state"] = "Active"
        # hwloc OS devices under their PCI function: OpenFabrics ones are RDMA devices (state
        # unknown); network ones of a libfabric network (Slingshot hsi0, EFA) are NICs too
        h = self.r.get("hwloc_xml")
        for dev in _list(h, "pci_devices"):
            plugin = devices.net_plugin(_hex(_get(dev, "vendor_id")), _hex(_get(dev, "device_id")))
            for od in _list(dev, "os_devices"):
                types = {str(t).lower() for t in _list(od, "types")} | {str(_get(od, "type", default="")).lower()}
                name = _get(od, "name")
                if not name or name in ports or not ("openfabrics" in types or (plugin and "network" in types)):
                    continue
                ports[name] = {"device": name, "port": 1, "sources": ["hwloc_xml"], "bdf": _bdf(_get(dev, "bdf"))}
                order.append(name)
        # labels from topo -m
        label_of: dict[str, str] = {}
        for label, hca in nic_map.items():
            if hca:
                label_of[hca] = label
                if hca not in ports:
                    ports[hca] = {"device": hca, "port": None, "sources": ["nvidia_smi_topo"]}
                    order.append(hca)
            else:
                ports[label] = {"device": None, "port": None, "sources": ["nvidia_smi_topo"]}
                order.append(label)
        if any(self.r.get(k) for k in IB_SOURCES):
            for label, hca in nic_map.items():
                if hca and "nvidia_smi_topo" == ports[hca]["sources"][0] and len(ports[hca]["sources"]) == 1:
                    self.disagree(hca, f"topo -m lists {hca} ({label}) but no HCA listing shows it",
                                  "nvidia_smi_topo", *[k for k in IB_SOURCES if self.r.get(k)])
        out = []
        for key in order:
            p = ports[key]
            bdf = p.get("bdf")
            dev = pci.get(bdf) if bdf else None
            label = label_of.get(key) or (key if p.get("device") is None else None)
            if p.get("device") and p.get("port", 1) not in (None, 1):
                # port 2+ of an HCA: topo -m has one column per HCA; the port shares its label
                label = label_of.get(p["device"])
            out.append(NicFact(
                name=key, label=label, device=p.get("device"), port=p.get("port"), bdf=bdf,
                state=p.get("state"), phys_state=p.get("phys_state"), rate_gbps=p.get("rate_gbps"),
                width=p.get("width"), link_layer=p.get("link_layer"),
                numa=(dev or {}).get("numa"), base_lid=p.get("base_lid"), sm_lid=p.get("sm_lid"),
                netdevs=tuple(p.get("netdevs") or ()), speed_mbps=p.get("speed_mbps"), gdr=p.get("gdr"),
                transport=_transport(key, p, dev),
            ))
        return out, sockets

    # -- NVLink and xGMI -------------------------------------------------------------------
    def gpu_links(self, topo: dict, gpus: list[GpuFact]) -> list[NvlinkPair]:
        """GPU-GPU and GPU-NVSwitch links from topo -m, NCCL/RCCL XML and hwloc distance matrices."""
        pairs: dict[tuple[str, str], NvlinkPair] = {}
        for a, cols in topo.items():
            if not a.startswith("GPU"):
                continue
            for b, tok in cols.items():
                if b.startswith("GPU") and a < b and tok and tok.startswith("NV"):
                    pairs[(a, b)] = NvlinkPair(a, b, int(tok[2:]), "nvidia_smi_topo")
        name_by_bdf = {g.bdf: g.name for g in gpus if g.bdf}
        self._xml_links(pairs, name_by_bdf)
        self._hwloc_links(pairs, name_by_bdf, gpus)
        return sorted(pairs.values(), key=lambda p: (_gpu_key(p.a), _gpu_key(p.b)))

    def _xml_links(self, pairs: dict, name_by_bdf: dict[str, str]) -> None:
        x = self.r.get("nccl_topo_xml")
        for xg in _list(x, "gpus"):
            a = name_by_bdf.get(_bdf(_get(xg, "bdf")))
            if not a:
                continue
            for fabric, field in (("nvlink", "nvlinks"), ("xgmi", "xgmi_links")):
                for lk in _list(xg, field):
                    tgt = _bdf(_get(lk, "target"))
                    count = _int(_get(lk, "count")) or 1
                    target = _get(lk, "target_kind")  # from the target class: nvswitch, gpu, cpu
                    if target == "cpu":
                        continue  # NVLink to a POWER9 CPU: not a GPU-GPU link
                    if target == "nvswitch" or (target is None and tgt not in name_by_bdf):
                        prev = pairs.get((a, "nvswitch"))
                        pairs[(a, "nvswitch")] = NvlinkPair(a, "nvswitch", count + (prev.links if prev else 0),
                                                            "nccl_topo_xml", fabric)
                        continue
                    b = name_by_bdf.get(tgt)
                    if not b or b == a:
                        continue
                    key = (min(a, b, key=_gpu_key), max(a, b, key=_gpu_key))
                    prev = pairs.get(key)
                    if prev and prev.source == "nvidia_smi_topo" and prev.links != count:
                        self.disagree(f"{key[0]}-{key[1]}",
                                      f"topo -m says NV{prev.links} for {key[0]}-{key[1]}, NCCL XML says {count} links",
                                      "nvidia_smi_topo", "nccl_topo_xml")
                    elif not prev:
                        pairs[key] = NvlinkPair(key[0], key[1], count, "nccl_topo_xml", fabric)

    def _hwloc_links(self, pairs: dict, name_by_bdf: dict[str, str], gpus: list[GpuFact]) -> None:
        """hwloc's ``NVLinkBandwidth`` (NVML) and ``XGMIBandwidth`` (RSMI) matrices, MB/s per pair.

        Rows and columns are GPU OS devices (``nvml0``, ``rsmi4``) and NVSwitch PCI functions. A
        GPU's NVLink count to a peer is its bandwidth over the GPU model's per-link rate (hwloc
        adds one per-link figure per link); xGMI pairs keep hwloc's bandwidth, which RSMI reports
        per pair rather than per link."""
        h = self.r.get("hwloc_xml")
        if not h:
            return
        from apps.domain.bandwidth import nvlink_per_link

        gpu_of: dict[str, str] = {}  # OS device name or BDF -> GPU name
        nvswitch: set[str] = set()
        for dev in _list(h, "pci_devices"):
            bdf = _bdf(_get(dev, "bdf"))
            if _get(dev, "kind") == "nvswitch":
                nvswitch.add(bdf)
            if bdf in name_by_bdf:
                gpu_of[bdf] = name_by_bdf[bdf]
                for od in _list(dev, "os_devices"):
                    if _get(od, "name"):
                        gpu_of[_get(od, "name")] = name_by_bdf[bdf]
        model = next((g.model for g in gpus if g.model), None)
        per_link = (nvlink_per_link(model).spec_gbs or 25.0) * 1000  # MB/s
        for dist in _list(h, "distances"):
            name = _get(dist, "name")
            if name not in ("NVLinkBandwidth", "XGMIBandwidth"):
                continue
            labels = _list(dist, "objects")
            rows = _list(dist, "values")
            fabric_links: dict[str, int] = {}
            for i, a_label in enumerate(labels):
                a = gpu_of.get(a_label)
                if a is None or i >= len(rows):
                    continue
                for j, b_label in enumerate(labels):
                    v = _float(rows[i][j]) if j < len(rows[i]) else None
                    if not v or i == j:
                        continue
                    if name == "NVLinkBandwidth" and b_label in nvswitch:
                        fabric_links[a] = fabric_links.get(a, 0) + max(1, round(v / per_link))
                        continue
                    b = gpu_of.get(b_label)
                    if b is None or b == a or _gpu_key(a) > _gpu_key(b) or (a, b) in pairs:
                        continue
                    if name == "XGMIBandwidth":
                        pairs[(a, b)] = NvlinkPair(a, b, 0, "hwloc_xml", "xgmi", gbs=round(v / 1000, 3))
                    else:
                        pairs[(a, b)] = NvlinkPair(a, b, max(1, round(v / per_link)), "hwloc_xml")
            for a, links in fabric_links.items():
                pairs.setdefault((a, "nvswitch"), NvlinkPair(a, "nvswitch", links, "hwloc_xml"))

    # -- CPUs ------------------------------------------------------------------------------
    def cpus(self) -> tuple[list[CpuFact], int | None, int | None]:
        """CPU (NUMA) nodes, sockets and NUMA nodes with CPUs, when a source lists them all."""
        out: list[CpuFact] = []
        x = self.r.get("nccl_topo_xml")
        for c in _list(x, "cpus"):
            out.append(CpuFact(numa=_numa(_get(c, "numa_id")), affinity=_get(c, "affinity"),
                               vendor=_vendor(_get(c, "vendor"), _get(c, "arch")),
                               family_id=_int(_get(c, "family_id")), model_id=_int(_get(c, "model_id")),
                               arch=_get(c, "arch")))
        h = self.r.get("hwloc_xml")
        sockets = numa_count = None
        if h:
            numas = _list(h, "numa_nodes")
            if not out:
                out = [CpuFact(numa=_numa(_get(n, "os_index")), affinity=_get(n, "cpuset"),
                               package=_int(_get(n, "package_os_index"))) for n in numas
                       if _has_cpus(_get(n, "cpuset"))]
            # hwloc lists every package and NUMA node (GPU memory NUMA nodes have no CPUs)
            sockets = len(_list(h, "packages")) or None
            numa_count = sum(1 for n in numas if _has_cpus(_get(n, "cpuset"))) or None
        return out, sockets, numa_count

    def cpu(self, cpus: list[CpuFact], pci: list[PciDeviceFact]) -> tuple[str | None, int | None, int | None, str | None]:
        """(NCCL CPU class, x86 model, family, words): host_info > NCCL XML > hwloc > PCI root complex."""
        hi = self.r.get("host_info")
        if hi and _vendor(_get(hi, "cpu_vendor"), None):
            # the live machine's /proc/cpuinfo wins over a (possibly static) topology file
            return (_vendor(_get(hi, "cpu_vendor"), None), _int(_get(hi, "cpu_model")), _int(_get(hi, "cpu_family")),
                    _get(hi, "cpu_model_name") or "host_info (/proc/cpuinfo)")
        xml = next((c for c in cpus if c.vendor), None)
        if xml is not None:
            return xml.vendor, xml.model_id, xml.family_id, "NCCL topology XML <cpu>"
        h = self.r.get("hwloc_xml")
        if h:
            for p in _list(h, "packages"):
                found = devices.cpu_from_name(_get(p, "cpu_model"))
                if found:
                    return found[0], found[1], None, f"{found[2].strip()} (hwloc package)"
            arch = _vendor(None, _get(h, "architecture"))
            if arch in ("arm", "power"):
                return arch, None, None, f"{_get(h, 'architecture')} (hwloc)"
        return _cpu_from_root_complex(pci)

    def nvlink_sources(self) -> tuple[str, ...]:
        """Sources that would show any NVLink the GPUs have: nvidia-smi topo -m and nvlink -s, an
        NCCL topology *dump* (its ``<gpu>`` elements are NCCL's own, and NCCL writes the NVLinks it
        found through NVML under them; hand-written NCCL_TOPO_FILE files list bare GPU ``<pci>``)
        and hwloc 2+ with GPUs found through NVML (its NVLinkBandwidth matrix)."""
        out = [k for k in ("nvidia_smi_topo", "nvidia_smi_nvlink") if self.r.get(k)]
        x = self.r.get("nccl_topo_xml")
        if x and any(_get(g, "declared") for g in _list(x, "gpus")):
            out.append("nccl_topo_xml")
        if _hwloc_nvml(self.r.get("hwloc_xml")):
            out.append("hwloc_xml")
        return tuple(out)

    # -- what the report can say about NICs ------------------------------------------------
    def nic_inventory(self, merged: dict[str, dict]) -> tuple[tuple[str, ...], str | None]:
        """(sources that list the host's network functions, why none can when that is empty).

        ``no RDMA NIC`` is a fact only when a source lists network functions and none is RDMA; a
        listing without any network function is trimmed or filtered, not a host without NICs."""
        sources: list[str] = [k for k in IB_SOURCES if _list(self.r.get(k), "cas")]
        network = {src for d in merged.values() if _is_network(d) for src in d["sources"]}
        sources += [k for k in PCI_SOURCES if k in network and k != "nccl_topo_xml"]
        x = self.r.get("nccl_topo_xml")
        if x and any(_list(n, "nets") for n in _list(x, "nics")):
            sources.append("nccl_topo_xml")  # NCCL's own list of the networks it found
        if sources:
            return tuple(dict.fromkeys(sources)), None
        why = []
        if self.r.get("nvidia_smi_topo"):
            why.append("nvidia-smi topo -m shows no NIC column (it lists only the RDMA devices the NVIDIA driver "
                       "sees: AWS EFA never appears, and pasted captures are often trimmed)")
        if x:
            why.append("the NCCL topology XML has no <net> (a NCCL_TOPO_FILE lists the PCI tree; NCCL adds the "
                       "NICs it finds at run time)")
        h = self.r.get("hwloc_xml")
        if h:
            why.append("the hwloc XML has no network device" + (" (lstopo ran without I/O discovery)"
                                                                 if not _list(h, "pci_devices") else ""))
        t = self.r.get("lspci_tree")
        if t and not any(_get(d, "name") for d in _list(t, "devices")):
            why.append("lspci -t without -v names no device")
        elif any(self.r.get(k) for k in ("lspci_tree", "lspci_verbose", "sysfs_pci")):
            why.append("the PCI listing shows no network function (trimmed or filtered)")
        return (), "; ".join(why) or "no section of the report lists NICs"

    # -- everything ------------------------------------------------------------------------
    def build(self) -> HostFacts:
        labels, topo, legacy, topo_rows, nic_map = self.topo()
        merged = self.pci()
        gpus = self.gpus(topo_rows, labels, merged)
        nics, socket_nets = self.nics(nic_map, merged)
        gpu_bdfs = {g.bdf for g in gpus if g.bdf}
        nic_bdfs = {n.bdf for n in nics if n.bdf}
        pci = [_pci_fact(d, gpu_bdfs, nic_bdfs) for d in merged.values()]
        gpus = self._gpu_models_from_pci(gpus, merged)
        nvpairs = self.gpu_links(topo, gpus)
        cpus, sockets, numa_count = self.cpus()
        vendor, model, family, cpu_name = self.cpu(cpus, pci)
        if any(g.c2c for g in gpus) and vendor is None:
            vendor, cpu_name = "arm", "NVIDIA Grace (ARM): GPU memory is a NUMA node (topo -m GPU NUMA ID)"
        inventory, nic_unknown = self.nic_inventory(merged)
        host = self.host_info()
        if host.get("sockets") is None:  # host_info (physical ids) first, else hwloc's packages
            host["sockets"] = sockets
        if host.get("numa_count") is None:
            host["numa_count"] = numa_count
        models = sorted({g.model for g in gpus if g.model})
        if len(models) > 1:
            self.warnings.append(f"mixed GPU models on one host: {', '.join(models)}")
        p2p = {}
        if self.r.get("nvidia_smi_p2p"):
            mode = _get(self.r["nvidia_smi_p2p"], "p2p_mode", default="r")
            p2p[mode] = self.topo_aux("nvidia_smi_p2p")
        t = self.r.get("lspci_tree")
        if t and _list(t, "devices") and not any(_get(d, "name") for d in _list(t, "devices")):
            self.warnings.append("lspci_tree: lspci -t without -v prints no device names, so GPUs and NICs cannot be "
                                 "told from other functions; send lspci -D -tv")
        for kind, res in self.r.items():
            if kind != "nvidia_smi_topo":
                for w in _list(res, "warnings"):
                    self.warnings.append(f"{kind}: {w}")
        self._cross_check_nics(nics, topo, nic_map)
        virtual = host.get("virtualized") is True or _virtual_pci(merged)
        return HostFacts(
            hostname=self.hostname,
            sources=tuple(k for k in self.r),
            gpus=tuple(gpus),
            nics=tuple(nics),
            pci=tuple(sorted(pci, key=lambda d: d.bdf)),
            nvlink_pairs=tuple(nvpairs),
            cpus=tuple(cpus),
            cpu_vendor=vendor,
            cpu_model=model,
            cpu_family=family,
            cpu_name=cpu_name,
            gpu_model=models[0] if models else None,
            topo_labels=labels,
            topo=topo,
            topo_pci=self.topo_aux("nvidia_smi_topo_pci"),
            p2p=p2p,
            topo_legacy=legacy,
            warnings=tuple(self.warnings),
            disagreements=tuple(self.disagreements),
            nic_inventory=inventory,
            nic_unknown=nic_unknown,
            socket_nets=tuple(socket_nets),
            virtual_pci=virtual,
            nvlink_sources=self.nvlink_sources(),
            **host,
        )

    def host_info(self) -> dict[str, Any]:
        """The agent's host facts (GPUDirect RDMA modules, IOMMU, sockets), as HostFacts fields."""
        hi = self.r.get("host_info")
        if not hi:
            return {}
        peer, dmabuf = _get(hi, "peermem"), _get(hi, "dmabuf")
        gdr = True if (peer and peer != "none") or dmabuf is True else (
            False if peer == "none" and dmabuf is False else None)
        groups = _get(hi, "iommu_groups", default={}) or {}
        words = iommu_words(_get(hi, "cmdline", default=""))
        return dict(
            sockets=_int(_get(hi, "sockets")), gdr_module=gdr,
            gdr_module_detail=f"peermem {peer or 'unknown'}, DMA-BUF "
                              f"{'unknown' if dmabuf is None else 'yes' if dmabuf else 'no'}",
            iommu_translated=tuple(sorted(b for b, t in groups.items() if str(t).lower() in ("dma", "dma-fq"))),
            iommu_cmdline=" ".join(words) or None, virtualized=_get(hi, "virtualized"), host_info=True,
            numa_count=_int(_get(hi, "numa_nodes")))

    def _gpu_models_from_pci(self, gpus: list[GpuFact], merged: dict[str, dict]) -> list[GpuFact]:
        """GPUs without an nvidia-smi model: hwloc's ``GPUModel`` (NVML/RSMI), the lspci name's
        bracketed model, or the PCI device id, in that order; a warning names where it came from."""
        out, said = [], {}
        for g in gpus:
            d = merged.get(g.bdf) if g.bdf else None
            if g.model or d is None:
                out.append(g)
                continue
            model, where = d.get("gpu_model"), "hwloc GPUModel"
            if not model:
                model, where = devices.gpu_model_from_name(d.get("name")), "the PCI device name"
                if model and d.get("name") and re.search(r"\bDevice [0-9a-fA-F]{4}\b", d["name"]):
                    where = "the PCI device id"
            if not model and d.get("vendor_id") in (NVIDIA, 0x1002):  # NVIDIA or AMD GPU ids
                model, where = devices.gpu_model_from_id(d.get("device_id")), "the PCI device id"
            if model:
                said.setdefault((model, where), None)
                g = dataclasses.replace(g, model=model)
            out.append(g)
        for model, where in said:
            self.warnings.append(f"GPU model {model!r} taken from {where} (no nvidia-smi)")
        return out

    def _cross_check_nics(self, nics: list[NicFact], topo: dict, nic_map: dict) -> None:
        if not topo or not nic_map:
            return  # a matrix without NIC columns shows no NIC at all (often trimmed): nothing to compare
        listings = [k for k in IB_SOURCES if self.r.get(k)]
        for n in nics:
            if n.device and n.port not in (None, 1):
                continue
            if n.device and n.label is None and n.port in (None, 1) and n.device not in nic_map.values():
                self.disagree(n.name, f"{n.name} is in the HCA listing but not in topo -m", "nvidia_smi_topo",
                              *listings)


def _gpu_key(name: str) -> tuple[int, str]:
    m = re.fullmatch(r"GPU(\d+)", name)
    return (int(m.group(1)), "") if m else (1 << 30, name)


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
    if not h or (_int(_get(h, "format_major")) or 0) < 2:
        return False
    return any(str(_get(od, "name", default="")).startswith("nvml")
               for d in _list(h, "pci_devices") for od in _list(d, "os_devices"))


def _virtual_pci(merged: dict[str, dict]) -> bool:
    """The PCI tree is a hypervisor's (emulated chipsets, virtual switches ``ffff:ff:xx.0``) or a
    hand-written flattened topology file (NCCL XML GPUs and NICs without vendor ids)."""
    return any(d.get("virtual") or devices.is_virtual_device(d.get("name"), d.get("vendor_id"))
               or (d["source"] == "nccl_topo_xml" and d.get("vendor_id") is None and d.get("kind_hint") in ("gpu", "nic"))
               for d in merged.values())


def _has_cpus(cpuset: Any) -> bool:
    """An hwloc cpuset with a set bit (GPU-memory NUMA nodes have ``0x0``)."""
    return bool(cpuset) and any(c not in "0x," for c in str(cpuset).lower())


def _socket_net(nic_bdf: str | None, port: int | None, guid: Any) -> bool:
    """An NCCL XML ``<net>`` of NCCL's Socket transport: no PCI device, port 0 and GUID 0 (NCCL's
    socket plugin reports neither; IB verbs ports are numbered from 1 and have a GUID)."""
    return nic_bdf is None and not port and (_hex(guid) or 0) == 0


def _transport(name: str, port: dict, dev: dict | None) -> str:
    """``ofi`` for NICs of a libfabric network (AWS EFA, HPE Slingshot: NCCL reaches them through
    the aws-ofi-nccl plugin), known from the PCI ids of their function, the verbs vendor id or the
    kernel's device name; ``verbs`` for the rest (NCCL's own IB/RoCE transport)."""
    if dev is not None and devices.net_plugin(dev.get("vendor_id"), dev.get("device_id"), dev.get("name")):
        return "ofi"
    if port.get("vendor_id") == devices.AMAZON or re.fullmatch(r"efa_\d+|rdmap\d+s\d+(f\d+)?|hsi\d+|hsn\d+|cxi\d+", name):
        return "ofi"
    return "verbs"


def _is_network(d: dict) -> bool:
    cc = d.get("class_code")
    if cc is not None:
        return cc >> 8 == 0x02 or cc == 0x0C06
    return d.get("kind_hint") == "nic" or bool(_NETWORK_NAME_RE.search(d.get("name") or ""))


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


_NAME_DEVICE_RE = re.compile(r"\bDevice ([0-9a-fA-F]{4})\b")


def _name_device_id(name: Any) -> int | None:
    m = _NAME_DEVICE_RE.search(name or "") if isinstance(name, str) else None
    return int(m.group(1), 16) if m else None


def _is_gpu(d: dict) -> bool:
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
    if bdf in gpu_bdfs or _is_gpu(d):
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


def _pci_fact(d: dict, gpu_bdfs: set[str], nic_bdfs: set[str]) -> PciDeviceFact:
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


def assemble(results: dict[str, Any], hostname: str) -> HostFacts:
    """Join ``{kind: parser result}`` of one node report into :class:`HostFacts`.

    Parameters
    ----------
    results : dict
        Section kind (``"nvidia_smi_topo"``, ``"ibstat"``, ...) -> what that kind's parser returned
        (dataclass or JSON dict). Unknown kinds are ignored; missing kinds just leave fields empty.
    hostname : str

    Returns
    -------
    HostFacts
        Never raises on inconsistent inputs: conflicts become ``disagreements``.

    Examples
    --------
    >>> f = assemble({"nvidia_smi_topo": {"matrix": {"GPU0": {"GPU0": " X ", "GPU1": "NV4"},
    ...                                              "GPU1": {"GPU0": "NV4", "GPU1": " X "}}}}, "h")
    >>> [g.name for g in f.gpus], f.nvlink_pairs[0].links
    (['GPU0', 'GPU1'], 4)
    """
    return _Builder(results, hostname).build()
