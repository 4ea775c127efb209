"""Join the parser results of one node report into :class:`~apps.domain.facts.HostFacts`.

``assemble(results, hostname)`` takes ``{kind: parser result}`` (kinds of
``apps.domain.parsers.KINDS``; a result may be the parser's frozen dataclass or its
``to_jsonable`` dict) and returns one frozen, normalised view of the host. This is the only
module that knows the parser result shapes; it reads them through small accessors that accept the
documented field names and their close variants.

Joins (domain.md 4.2):

1. GPU index <-> BDF <-> UUID from ``nvidia_smi_gpus`` (``nvidia-smi --query-gpu=index,uuid,
   pci.bus_id,...``); ``GPU<i>`` of topo -m is index ``<i>``. Without it, GPU BDFs come from the
   NCCL XML ``<gpu dev=i>`` (CUDA device order, assumed equal to nvidia-smi order) or, as a last
   resort, from NVIDIA 3D/VGA controllers in the PCI listing in bus order (nvidia-smi's order).
2. ``mlx5_N`` <-> BDF from ``sysfs_ib`` (``readlink -f /sys/class/infiniband/mlx5_N/device``),
   the NCCL XML ``<nic><net name=...>`` under a ``<pci busid=...>``, or an hwloc OpenFabrics OS
   device under its PCI function (an RDMA device, port state unknown).
3. topo -m NIC label (``NIC3`` or ``mlx5_3``) <-> HCA name from the matrix header / NIC Legend.
4. Port state and rate from ``ibstat`` > ``sysfs_ib`` > ``ibv_devinfo`` > ``ibstatus`` (first wins,
   later ones fill gaps; different values are recorded as disagreements).
5. PCI tree from ``sysfs_pci`` > ``lspci_verbose`` > ``lspci_tree`` > ``nccl_topo_xml`` >
   ``hwloc_xml`` (fields merged per BDF, the first source that knows a field wins).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Iterable

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

NVIDIA = 0x10DE
MELLANOX = 0x15B3
PCI_SOURCES = ("sysfs_pci", "lspci_verbose", "lspci_tree", "nccl_topo_xml", "hwloc_xml")
IB_SOURCES = ("ibstat", "sysfs_ib", "ibv_devinfo", "ibstatus")


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


def _get(d: Any, *keys: str, default: Any = None) -> Any:
    """First present, non-None value among ``keys`` of ``d`` (a dict or a parser dataclass)."""
    if d is None:
        return default
    if isinstance(d, dict):
        for k in keys:
            v = d.get(k)
            if v is not None and v != "":
                return v
        return default
    for k in keys:
        v = getattr(d, k, None)
        if v is not None and v != "":
            return v
    return default


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
}
VENDOR_BY_NAME = (("NVIDIA", NVIDIA), ("Mellanox", MELLANOX), ("Broadcom / LSI", 0x1000), ("LSI Logic", 0x1000),
                  ("PLX Technology", 0x10B5), ("Intel Corporation", 0x8086), ("Advanced Micro Devices", 0x1022),
                  ("Samsung", 0x144D), ("Microchip", 0x11F8), ("PMC-Sierra", 0x11F8))
ACS_NAMES = {"src_valid": "SrcValid", "trans_blk": "TransBlk", "req_redir": "ReqRedir", "cmplt_redir": "CmpltRedir",
             "upstream_fwd": "UpstreamFwd", "egress_ctrl": "EgressCtrl", "direct_trans": "DirectTrans"}


# Field names per PCI source (canonical name -> the parser's field); "-" = the source has none.
_PCI_CANON = ("bdf", "ancestry", "parent_bdf", "root", "class_name", "class_code", "vendor_id", "vendor_name",
              "device_id", "subsystem_vendor_id", "subsystem_device_id", "name", "port_type", "numa", "driver",
              "speed", "width", "max_speed", "max_width", "bus_secondary", "bus_subordinate",
              "secondary_bus_range", "acs_ctl", "capabilities_denied", "local_cpulist", "kind")


def _fields(**over: str) -> dict[str, str]:
    return {k: over.get(k, k) for k in _PCI_CANON}


PCI_FIELDS = {
    "lspci_verbose": _fields(numa="numa_node", speed="sta_speed_gts", width="sta_width", max_speed="cap_speed_gts",
                             max_width="cap_width", kind="-"),
    "sysfs_pci": _fields(root="root_complex", numa="numa_node", speed="current_link_speed_gts",
                         width="current_link_width", max_speed="max_link_speed_gts", max_width="max_link_width",
                         kind="-"),
    "lspci_tree": _fields(),
    "nccl_topo_xml": _fields(numa="numa_id", speed="link_speed_gts", width="link_width"),
    # hwloc gives the link in GB/s (no generation/width): not used for gen/width
    "hwloc_xml": _fields(root="host_bridge", numa="numa_os_index", name="device_name"),
}
PCI_FIELDS_GENERIC = _fields(numa="numa_node", speed="sta_speed_gts", width="sta_width", max_speed="cap_speed_gts",
                             max_width="cap_width")


@functools.lru_cache(maxsize=64)
def _gen(speed_gts: Any) -> int | None:
    from apps.domain.bandwidth import pcie_generation

    f = _float(speed_gts)
    return pcie_generation(f) if f else None


_KEEP_CLASSES = {0x01, 0x02, 0x03, 0x06, 0x12}  # storage, network, display, bridge, accelerators
_KEEP_CLASS_NAME_RE = re.compile(r"bridge|controller|accelerator|Display|Network|storage", re.IGNORECASE)
_SKIP_CLASS_NAMES = {"USB controller", "SMBus", "Memory controller", "Communication controller",
                     "Serial bus controller", "Audio device", "Multimedia audio controller"}


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


def _bridges_by_bus(devices: Iterable[Any]) -> dict[tuple[str, int], str]:
    """lspci -vvv has no tree: a device's parent is the bridge whose secondary bus is its bus.

    Returns {(domain, secondary bus): bridge BDF}.
    """
    out: dict[tuple[str, int], str] = {}
    for d in devices:
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
    def topo(self) -> tuple[tuple[str, ...], dict, bool, dict[str, dict], dict[str, str]]:
        """Labels, normalised matrix, legacy flag, per-GPU affinity rows, NIC label -> HCA."""
        t = self.r.get("nvidia_smi_topo")
        if not t:
            return (), {}, False, {}, {}
        matrix = _get(t, "matrix", default={}) or {}
        norm = {
            row: {col: normalize_token(tok) for col, tok in cols.items()} for row, cols in matrix.items()
        }
        labels = tuple(_get(t, "columns", default=()) or ()) or tuple(matrix.keys())
        tokens = {tok for cols in norm.values() for tok in cols.values() if tok}
        legend = str(_get(t, "legend", default="") or "").lower()
        # legacy legends (SOC era) have no NODE: a legacy PHB may mean today's PHB or NODE
        legacy = "NODE" not in tokens and (
            legend in ("nvlink_legacy", "oldest", "legacy")
            or any(str(tok).strip().upper() == "SOC" for cols in matrix.values() for tok in cols.values())
        )
        gpu_rows = {}
        for g in _get(t, "gpus", default=[]) or []:
            name = _get(g, "name") or f"GPU{_get(g, 'index')}"
            gpu_rows[name] = g
        nic_map = {}
        for n in _get(t, "nics", default=[]) or []:
            label = _get(n, "name", "label")
            if label:
                nic_map[label] = _get(n, "device", "hca") or (label if not re.fullmatch(r"NIC\d+", label) else None)
        # NIC columns the parser did not list as NICs (defensive): any non-GPU label
        for label in labels:
            if not re.fullmatch(r"GPU\d+", label) and label not in nic_map:
                nic_map[label] = None if re.fullmatch(r"NIC\d+", label) else label
        for w in _get(t, "warnings", default=[]) or []:
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
                bdf = dev.get("bdf")
                if not bdf:
                    continue
                cur = merged.setdefault(bdf, {"bdf": bdf, "sources": []})
                cur["sources"].append(kind)
                for k, v in dev.items():
                    if v is None or v == () or v == []:
                        continue
                    if cur.get(k) in (None, (), []):
                        cur[k] = v
                    elif k in ("gen", "width") and cur[k] != v and kind != "hwloc_xml":
                        self.disagree(
                            bdf, f"{kind} says PCIe {k} {v} for {bdf}, {cur['sources'][0]} says {cur[k]}",
                            cur["sources"][0], kind,
                        )
        return merged

    def _pci_devices(self, kind: str, res: Any) -> Iterable[dict]:
        devices = _get(res, "devices", "pci_devices", default=[]) or []
        fields = PCI_FIELDS.get(kind, PCI_FIELDS_GENERIC)
        bridges = _bridges_by_bus(devices) if kind == "lspci_verbose" else {}
        name_field = fields["class_name"]
        for d in devices:
            is_dict = isinstance(d, dict)
            # the graph needs bridges, GPUs/accelerators, NICs and storage; a full lspci -vvv is
            # mostly uncore/system functions, skipped here (before reading their other fields)
            cname = d.get(name_field) if is_dict else getattr(d, name_field, None)
            if cname is not None and (cname in _SKIP_CLASS_NAMES or (
                    cname not in CLASS_BY_NAME and not _KEEP_CLASS_NAME_RE.search(cname))):
                continue
            if is_dict:
                v = {k: d.get(src) for k, src in fields.items()}
            else:
                v = {k: getattr(d, src, None) for k, src in fields.items()}
            class_code = _hex(v["class_code"])
            if class_code is not None and class_code > 0xFFFF:
                class_code >>= 8  # 0x060400 -> 0x0604
            if class_code is not None and class_code >> 8 not in _KEEP_CLASSES:
                continue
            if class_code is None and cname:
                class_code = CLASS_BY_NAME.get(cname.strip())
            bdf = _bdf(v["bdf"])
            if not bdf:
                continue
            ancestry = tuple(b for b in (_bdf(x) for x in (v["ancestry"] or ())) if b)
            if ancestry and ancestry[-1] == bdf:
                ancestry = ancestry[:-1]
            parent = _bdf(v["parent_bdf"]) or (ancestry[-1] if ancestry else None) or _bus_parent(bridges, bdf)
            acs = v["acs_ctl"] or ()
            if dataclasses.is_dataclass(acs):
                acs = _plain(acs)
            if isinstance(acs, dict):
                acs = tuple(ACS_NAMES.get(k, k) for k, on in acs.items() if on)
            port_type = v["port_type"]
            hint = v["kind"]
            if kind == "nccl_topo_xml" and (hint == "bridge" or class_code == 0x0604):
                # NCCL keeps one <pci> per switch (the upstream port); children hang right below it
                port_type = port_type or "Upstream Port"
            secondary = _hex(v["bus_secondary"])
            rng = v["secondary_bus_range"]
            if secondary is None and isinstance(rng, str):
                secondary = _hex(rng.split("-")[0])
            yield {
                "bdf": bdf,
                "parent_bdf": parent,
                "ancestry": ancestry,
                "root": _root_id(v["root"]),
                "class_code": class_code,
                "vendor_id": _hex(v["vendor_id"]) or _vendor_id(v["vendor_name"] or v["name"]),
                "device_id": _hex(v["device_id"]),
                "subsystem_vendor_id": _hex(v["subsystem_vendor_id"]),
                "subsystem_device_id": _hex(v["subsystem_device_id"]),
                "name": v["name"],
                "port_type": port_type,
                "numa": _numa(v["numa"]),
                "driver": v["driver"],
                "gen": _gen(v["speed"]),
                "width": _int(v["width"]),
                "max_gen": _gen(v["max_speed"]),
                "max_width": _int(v["max_width"]),
                "secondary_bus": secondary,
                "subordinate_bus": _hex(v["bus_subordinate"]),
                "acs_ctl": tuple(acs) if isinstance(acs, (list, tuple)) else (),
                "capabilities_denied": bool(v["capabilities_denied"]),
                "local_cpulist": v["local_cpulist"],
                "kind_hint": hint,
                "source": kind,
            }

    # -- GPUs ------------------------------------------------------------------------------
    def gpus(self, topo_rows: dict[str, dict], labels: tuple[str, ...], pci: dict[str, dict]) -> list[GpuFact]:
        by_name: dict[str, dict] = {}
        for label in labels:
            if re.fullmatch(r"GPU\d+", label):
                by_name.setdefault(label, {"index": int(label[3:])})
        for name, row in topo_rows.items():
            g = by_name.setdefault(name, {"index": int(name[3:]) if name[3:].isdigit() else len(by_name)})
            g["cpu_affinity"] = _get(row, "cpu_affinity")
            numa_text = str(_get(row, "numa_affinity", "numa", default="")).strip()
            g["numa"] = int(numa_text) if numa_text.isdigit() else None  # "0-3" (NPS4 ranges): unknown
        q = self.r.get("nvidia_smi_gpus")
        for row in (_get(q, "gpus", default=[]) or []) if q else []:
            idx = _int(_get(row, "index"))
            if idx is None:
                continue
            g = by_name.setdefault(f"GPU{idx}", {"index": idx})
            g.update({
                "bdf": _bdf(_get(row, "bdf", "pci_bus_id", "bus_id")),
                "uuid": _get(row, "uuid"),
                "model": _get(row, "name", "model"),
                "compute_cap": _get(row, "compute_cap"),
                "pstate": _get(row, "pstate"),
                "link_gen_current": _int(_get(row, "link_gen_current", "link_gen_gpu_current")),
                "link_gen_max": _int(_get(row, "link_gen_max", "link_gen_gpu_max")),
                "link_gen_host_max": _int(_get(row, "link_gen_host_max")),
                "link_width_current": _int(_get(row, "link_width_current")),
                "link_width_max": _int(_get(row, "link_width_max")),
            })
        # NCCL XML GPUs (dev = CUDA index) give BDFs when the query is missing
        x = self.r.get("nccl_topo_xml")
        for xg in (_get(x, "gpus", default=[]) or []) if x else []:
            idx = _int(_get(xg, "dev", "index"))
            bdf = _bdf(_get(xg, "bdf", "busid"))
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
        # last resort: NVIDIA display controllers in bus order = nvidia-smi index order
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
        for row in (_get(nv, "gpus", default=[]) or []) if nv else []:
            idx = _int(_get(row, "index"))
            if idx is None:
                continue
            g = by_name.setdefault(f"GPU{idx}", {"index": idx})
            links = _get(row, "links", default=[]) or []
            active = [lk for lk in links if _get(lk, "active", default=False)]
            g["nvlink_total"] = len(links)
            g["nvlink_active"] = len(active)
            g["nvlink_link_gbps"] = tuple(v for v in (_float(_get(lk, "gbps")) for lk in active) if v is not None)
            if not g.get("uuid"):
                g["uuid"] = _get(row, "uuid")
            if not g.get("model"):
                g["model"] = _get(row, "name", "model")
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
            ))
        return out

    # -- NICs ------------------------------------------------------------------------------
    def nics(self, nic_map: dict[str, str | None], pci: dict[str, dict]) -> list[NicFact]:
        ports: dict[str, dict] = {}  # HCA name (or label) -> merged fields
        order: list[str] = []
        for kind in IB_SOURCES:
            res = self.r.get(kind)
            if not res:
                continue
            for ca in _get(res, "cas", default=[]) or []:
                name = _get(ca, "name")
                if not name:
                    continue
                for p in _get(ca, "ports", default=[]) or [{}]:
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
                        "netdevs": tuple(_get(ca, "netdevs", default=()) or ()),
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
        x = self.r.get("nccl_topo_xml")
        for xn in (_get(x, "nics", default=[]) or []) if x else []:
            bdf = _bdf(_get(xn, "bdf", "busid"))
            for net in _get(xn, "nets", default=[]) or []:
                name = _get(net, "name")
                if not name:
                    continue
                port = _int(_get(net, "port")) or 1
                key = name if port == 1 or ":" in name else f"{name}:{port}"
                cur = ports.get(key)
                if cur is None:
                    cur = ports[key] = {"device": name, "port": port, "sources": []}
                    order.append(key)
                cur["sources"].append("nccl_topo_xml")
                if bdf and not cur.get("bdf"):
                    cur["bdf"] = bdf
                speed = _int(_get(net, "speed_mbps", "speed"))
                cur.setdefault("speed_mbps", speed)
                if cur.get("rate_gbps") is None and speed:
                    cur["rate_gbps"] = speed / 1000
                g = _get(net, "gdr")
                cur.setdefault("gdr", None if g is None else bool(_int(g)))
        # hwloc OpenFabrics OS devices (mlx5_0 under its PCI function): RDMA devices, state unknown
        h = self.r.get("hwloc_xml")
        for dev in (_get(h, "pci_devices", "devices", default=[]) or []) if h else []:
            for od in _get(dev, "os_devices", default=[]) or []:
                types = {str(t).lower() for t in (_get(od, "types", default=()) or ())} | {
                    str(_get(od, "type", default="")).lower()}
                name = _get(od, "name")
                if "openfabrics" not in types or not name or name in ports:
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
        ib_seen = any(self.r.get(k) for k in IB_SOURCES)
        if ib_seen:
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
            ))
        return out

    # -- NVLink ----------------------------------------------------------------------------
    def nvlink_pairs(self, topo: dict, gpus: list[GpuFact]) -> list[NvlinkPair]:
        pairs: dict[tuple[str, str], NvlinkPair] = {}
        for a, cols in topo.items():
            if not a.startswith("GPU"):
                continue
            for b, tok in cols.items():
                if b.startswith("GPU") and a < b and tok and tok.startswith("NV"):
                    pairs[(a, b)] = NvlinkPair(a, b, int(tok[2:]), "nvidia_smi_topo")
        x = self.r.get("nccl_topo_xml")
        if x:
            name_by_bdf = {g.bdf: g.name for g in gpus if g.bdf}
            for xg in _get(x, "gpus", default=[]) or []:
                a = name_by_bdf.get(_bdf(_get(xg, "bdf", "busid")))
                if not a:
                    continue
                for lk in _get(xg, "nvlinks", default=[]) or []:
                    tgt = _bdf(_get(lk, "target"))
                    count = _int(_get(lk, "count")) or 1
                    tclass = str(_get(lk, "tclass", default="") or "").lower()
                    if tclass.startswith("0x0680") or (tgt not in name_by_bdf and tclass != "0x030200"):
                        b = "nvswitch"
                        key = (a, b)
                        prev = pairs.get(key)
                        pairs[key] = NvlinkPair(a, b, count + (prev.links if prev else 0), "nccl_topo_xml")
                        continue
                    b = name_by_bdf.get(tgt)
                    if not b:
                        continue
                    key = (min(a, b, key=_gpu_key), max(a, b, key=_gpu_key))
                    prev = pairs.get(key)
                    if prev and prev.source == "nvidia_smi_topo" and prev.links != count:
                        self.disagree(f"{key[0]}-{key[1]}",
                                      f"topo -m says NV{prev.links} for {key[0]}-{key[1]}, NCCL XML says {count} links",
                                      "nvidia_smi_topo", "nccl_topo_xml")
                    elif not prev:
                        pairs[key] = NvlinkPair(key[0], key[1], count, "nccl_topo_xml")
        return sorted(pairs.values(), key=lambda p: (_gpu_key(p.a), _gpu_key(p.b)))

    # -- CPUs ------------------------------------------------------------------------------
    def cpus(self) -> tuple[list[CpuFact], str | None, int | None, int | None]:
        out: list[CpuFact] = []
        vendor = model = family = None
        x = self.r.get("nccl_topo_xml")
        for c in (_get(x, "cpus", default=[]) or []) if x else []:
            v = _vendor(_get(c, "vendor"), _get(c, "arch"))
            cf = CpuFact(numa=_numa(_get(c, "numa_id", "numaid")), affinity=_get(c, "affinity"), vendor=v,
                         family_id=_int(_get(c, "family_id", "familyid")), model_id=_int(_get(c, "model_id", "modelid")),
                         arch=_get(c, "arch"))
            out.append(cf)
            vendor = vendor or v
            model = model if model is not None else cf.model_id
            family = family if family is not None else cf.family_id
        h = self.r.get("hwloc_xml")
        if h and not out:
            for n in _get(h, "numa_nodes", "numanodes", default=[]) or []:
                out.append(CpuFact(numa=_numa(_get(n, "os_index", "numa", "index")), affinity=_get(n, "cpuset")))
            for p in _get(h, "packages", default=[]) or []:
                vendor = vendor or _vendor(_get(p, "cpu_vendor", "vendor"), None)
                model = model if model is not None else _int(_get(p, "cpu_model_number", "model_id"))
                family = family if family is not None else _int(_get(p, "cpu_family_number", "family_id"))
        return out, vendor, model, family

    # -- everything ------------------------------------------------------------------------
    def build(self) -> HostFacts:
        labels, topo, legacy, topo_rows, nic_map = self.topo()
        merged = self.pci()
        gpus = self.gpus(topo_rows, labels, merged)
        nics = self.nics(nic_map, merged)
        gpu_bdfs = {g.bdf for g in gpus if g.bdf}
        nic_bdfs = {n.bdf for n in nics if n.bdf}
        pci = [_pci_fact(d, gpu_bdfs, nic_bdfs) for d in merged.values()]
        nvpairs = self.nvlink_pairs(topo, gpus)
        cpus, vendor, model, family = self.cpus()
        hi = self.r.get("host_info")
        host = {}
        if hi:
            # the live machine's /proc/cpuinfo wins over a (possibly static) topology file
            vendor = _vendor(_get(hi, "cpu_vendor"), None) or vendor
            model = _int(_get(hi, "cpu_model")) if _get(hi, "cpu_model") is not None else model
            family = _int(_get(hi, "cpu_family")) if _get(hi, "cpu_family") is not None else family
            peer, dmabuf = _get(hi, "peermem"), _get(hi, "dmabuf")
            gdr = True if (peer and peer != "none") or dmabuf is True else (
                False if peer == "none" and dmabuf is False else None)
            groups = _get(hi, "iommu_groups", default={}) or {}
            words = iommu_words(_get(hi, "cmdline", default="") or "")
            host = dict(
                sockets=_int(_get(hi, "sockets")), gdr_module=gdr,
                gdr_module_detail=f"peermem {peer or 'unknown'}, DMA-BUF "
                                  f"{'unknown' if dmabuf is None else 'yes' if dmabuf else 'no'}",
                iommu_translated=tuple(sorted(b for b, t in groups.items() if str(t).lower() in ("dma", "dma-fq"))),
                iommu_cmdline=" ".join(words) or None, virtualized=_get(hi, "virtualized"), host_info=True)
        if not any(g.model for g in gpus):
            by_bdf = {d.bdf: d for d in pci}
            guessed = {GPU_MODEL_BY_ID.get(_name_device_id({"device_id": by_bdf[g.bdf].device_id,
                                                            "name": by_bdf[g.bdf].name}) or -1)
                       for g in gpus if g.bdf in by_bdf}
            guessed.discard(None)
            if len(guessed) == 1:
                guess = guessed.pop()
                gpus = [dataclasses.replace(g, model=guess) for g in gpus]
                self.warnings.append(f"GPU model {guess!r} taken from the PCI device id (no nvidia-smi)")
        models = sorted({g.model for g in gpus if g.model})
        if len(models) > 1:
            self.warnings.append(f"mixed GPU models on one host: {', '.join(models)}")
        p2p = {}
        if self.r.get("nvidia_smi_p2p"):
            mode = _get(self.r["nvidia_smi_p2p"], "p2p_mode", default="r") or "r"
            p2p[mode] = self.topo_aux("nvidia_smi_p2p")
        for kind, res in self.r.items():
            if kind != "nvidia_smi_topo":
                for w in _get(res, "warnings", default=[]) or []:
                    self.warnings.append(f"{kind}: {w}")
        self._cross_check_nics(nics, topo, nic_map)
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
            gpu_model=models[0] if models else None,
            topo_labels=labels,
            topo=topo,
            topo_pci=self.topo_aux("nvidia_smi_topo_pci"),
            p2p=p2p,
            topo_legacy=legacy,
            warnings=tuple(self.warnings),
            disagreements=tuple(self.disagreements),
            **host,
        )

    def _cross_check_nics(self, nics: list[NicFact], topo: dict, nic_map: dict) -> None:
        if not topo:
            return
        for n in nics:
            if n.device and n.port not in (None, 1):
                continue
            if n.device and n.label is None and n.port in (None, 1) and n.device not in nic_map.values():
                self.disagree(n.name, f"{n.name} is in the HCA listing but not in topo -m", "nvidia_smi_topo")


def _gpu_key(name: str) -> tuple[int, str]:
    m = re.fullmatch(r"GPU(\d+)", name)
    return (int(m.group(1)), "") if m else (1 << 30, name)


def _vendor(vendor: Any, arch: Any) -> str | None:
    text = f"{vendor or ''} {arch or ''}".lower()
    if "intel" in text:
        return "intel"
    if "amd" in text:
        return "amd"
    if "power" in text or "ibm" in text:
        return "power"
    if "arm" in text or "aarch64" in text:
        return "arm"
    if "zhaoxin" in text or "centaur" in text:
        return "zhaoxin"
    return None


# NVIDIA datacenter GPU device ids (pci.ids) -> the model name nvidia-smi prints, for PCI-only reports
GPU_MODEL_BY_ID = {
    0x1DB1: "Tesla V100-SXM2-16GB", 0x1DB5: "Tesla V100-SXM2-32GB", 0x20B0: "A100-SXM4-40GB",
    0x20B2: "NVIDIA A100-SXM4-80GB", 0x20B5: "NVIDIA A100 80GB PCIe", 0x20F1: "NVIDIA A100-PCIE-40GB",
    0x2330: "NVIDIA H100 80GB HBM3", 0x2331: "NVIDIA H100 PCIe", 0x2335: "NVIDIA H200", 0x2901: "NVIDIA B200",
}
# NVSwitch PCI device ids (DGX-2 gen1, HGX A100 gen2, HGX H100 gen3), for listings without a class
NVSWITCH_IDS = {0x1AC0, 0x1AC1, 0x1AC2, 0x1AF1, 0x22A3}
_NAME_DEVICE_RE = re.compile(r"\bDevice ([0-9a-fA-F]{4})\b")


def _name_device_id(d: dict) -> int | None:
    if d.get("device_id") is not None:
        return d["device_id"]
    m = _NAME_DEVICE_RE.search(d.get("name") or "")
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
        return _name_device_id(d) not in NVSWITCH_IDS and not re.search(
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
    if d.get("vendor_id") == NVIDIA and (cc == 0x0680 or _name_device_id(d) in NVSWITCH_IDS) or hint == "nvswitch":
        return "nvswitch"
    if "root port" in pt:
        return "root_port"
    if "upstream" in pt:
        return "upstream_port"
    if "downstream" in pt:
        return "downstream_port"
    if cc == 0x0604 or hint in ("bridge", "switch") or d.get("secondary_bus") is not None:
        return "bridge"
    if bdf in nic_bdfs or (cc is not None and cc >> 8 == 0x02) or hint == "nic":
        return "nic"
    if cc is None and re.search(r"ConnectX|BlueField|Infiniband|Ethernet", name, re.IGNORECASE):
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
