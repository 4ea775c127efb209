"""NCCL topology XML: the file NCCL writes with ``NCCL_TOPO_DUMP_FILE`` and reads with ``NCCL_TOPO_FILE``.

Commands / files::

    NCCL_TOPO_DUMP_FILE=/tmp/nccl_topo.xml NCCL_DEBUG=INFO ./all_reduce_perf -b 8 -e 1G -g <ngpus>
    cat /tmp/nccl_topo.xml
    # or a hand-curated NCCL_TOPO_FILE shipped by cloud images (Azure azhpc-images
    # topology/nd*-topo.xml, aws-ofi-nccl topology/*.xml, OCI samples, RCCL topo_expl models)

Schema read (NCCL ``src/graph/xml.cc``)::

    <system version="1">
      <cpu numaid="0" affinity="0000ffff,..." arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143"
           host_hash="0x...">
        <pci busid="0000:16:00.0" class="0x060400" vendor="0x1000" device="0xc030"
             subsystem_vendor="0x15d9" subsystem_device="0x1d25" link_speed="32.0 GT/s PCIe" link_width="16">
          <pci busid="0000:18:00.0" class="0x030200" ...>
            <gpu dev="0" sm="90" rank="0" gdr="1">
              <nvlink target="0000:07:00.0" count="5" tclass="0x068000"/>   (NVSwitch, or a GPU's BDF)
              <c2c bw="..." count="..."/>                                    (Grace Hopper)
            </gpu>
          </pci>
          <pci busid="0000:19:00.0" class="0x020000" ...>
            <nic><net name="mlx5_0" dev="0" speed="400000" port="1" latency="0.000000" guid="0x.."
                      maxconn="131072" gdr="1" coll="1"/></nic>
          </pci>
        </pci>
        <nic><net name="eth0" .../></nic>            (a NIC with no PCI device: directly under <cpu>)
      </cpu>
    </system>

Result (:class:`NcclTopology`):

* ``version`` -- ``<system version>`` (int; RCCL writes 2), null when absent.
* ``cpus`` -- one :class:`NcclCpu` per ``<cpu>``: ``numa_id`` (null for ``numaid="-1"``, which NCCL
  writes in VMs where the NUMA node is unknown; a warning says so), ``affinity`` (the CPU mask as
  printed), ``arch``, ``vendor``, ``family_id``, ``model_id`` (ints; NCCL picks its inter-socket
  bandwidth from them), ``host_hash``, ``children`` (BDFs of the PCI devices directly under it).
* ``pci_devices`` -- every ``<pci>`` flattened in document order (:class:`NcclPciDevice`): ``bdf``
  (canonical ``dddd:bb:dd.f``; NCCL's virtual switches ``ffff:ff:01.0`` of hand-written files
  canonicalise to themselves and have ``virtual`` true; null only if the busid is not a PCI
  address), ``busid_raw`` (as printed), ``parent_bdf`` (the enclosing ``<pci>``, null under the
  CPU), ``numa_id`` of the enclosing CPU, ``class_code`` (``"0x0604"``: base class + subclass),
  ``class_raw`` (as printed, ``"0x060400"``), ``vendor_id``/``device_id``/``subsystem_vendor_id``/
  ``subsystem_device_id`` (``"0x10de"``), ``link_speed`` (as printed), ``link_speed_gts`` (GT/s per
  lane, float, null when empty), ``link_width`` (int as printed; ``0`` means NCCL could not read
  it, typical in VMs: a warning lists them), ``kind`` (``gpu`` when it holds a ``<gpu>`` or its
  class is 0x0300/0x0302/0x0380; ``nic`` when it holds a ``<nic>`` or its class is 0x02xx/0x0c06;
  ``bridge`` for 0x0604; ``nvswitch`` for 0x0680 from NVIDIA; else ``other``), ``depth`` (number of
  ``<pci>`` ancestors: 0 = directly under the CPU).
* ``gpus`` -- every PCI device of kind ``gpu`` (:class:`NcclGpu`), with its ``<gpu>`` attributes
  when present (``declared`` false for the bare ``<pci class="0x030200"/>`` entries of hand-written
  files): ``dev``, ``sm``, ``rank``, ``gdr`` (bool), ``gcn`` (RCCL), ``nvlinks`` (``target``
  canonical, ``target_raw``, ``count``, ``tclass``, ``target_kind``: ``nvswitch`` for tclass
  0x0680, ``gpu``, ``cpu``...), ``xgmi_links`` (RCCL ``<xgmi>``, same fields), ``c2c``.
* ``nics`` -- every ``<nic>`` element, plus bare PCI devices of kind ``nic`` (hand-written files
  list NICs as ``<pci class="0x020700"/>`` without ``<nic>``): ``bdf`` (null for a ``<nic>``
  directly under ``<cpu>``), ``numa_id``, ``nets`` (:class:`NcclNet`: ``name``, ``dev``,
  ``speed_mbps``, ``port``, ``latency``, ``guid``, ``maxconn``, ``gdr``, ``coll``).
* ``warnings``.

Variants handled: NCCL dumps from 2.1x to 2.30 (``host_hash``, ``net``/``gin`` attributes are
accepted), RCCL files (``version="2"``, ``<xgmi>``, ``gcn``), hand-curated files with minimal
attributes and comments, truncated captures (recovered with a warning naming the line where the
document stops; see :mod:`apps.domain.parsers._xml`). An NCCL *graph* file (``<graphs>``,
``NCCL_GRAPH_FILE`` / ``NCCL_GRAPH_DUMP_FILE``) and hwloc XML are refused with a ParseError saying
what they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.domain.errors import ParseError
from apps.domain.parsers._xml import Node, XmlDoc, read_xml, truncation_warning
from apps.domain.pci import canonical_bdf

KIND = "nccl_topo_xml"

_SPEED_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*GT/s", re.IGNORECASE)
_HEX_RE = re.compile(r"^(?:0x)?([0-9a-fA-F]+)$")
_DETECT_SYSTEM_RE = re.compile(r"<system\b[^>]*\bversion\s*=")
_DETECT_INNER_RE = re.compile(r"<(?:cpu\s+[^>]*numaid|pci\s+busid|gpu\s+dev|nic\s*>|net\s+name)")


@dataclass(frozen=True)
class NcclCpu:
    numa_id: int | None
    affinity: str | None
    arch: str | None
    vendor: str | None
    family_id: int | None
    model_id: int | None
    host_hash: str | None
    children: tuple[str, ...]


@dataclass(frozen=True)
class NcclPciDevice:
    bdf: str | None
    busid_raw: str
    parent_bdf: str | None
    numa_id: int | None
    class_code: str | None
    class_raw: str | None
    vendor_id: str | None
    device_id: str | None
    subsystem_vendor_id: str | None
    subsystem_device_id: str | None
    link_speed: str | None
    link_speed_gts: float | None
    link_width: int | None
    kind: str
    depth: int
    virtual: bool


@dataclass(frozen=True)
class NcclLink:
    target: str | None
    target_raw: str
    count: int | None
    tclass: str | None
    target_kind: str | None


@dataclass(frozen=True)
class NcclC2c:
    count: int | None
    bw: float | None


@dataclass(frozen=True)
class NcclGpu:
    bdf: str | None
    declared: bool
    dev: int | None
    sm: int | None
    rank: int | None
    gdr: bool | None
    gcn: str | None
    nvlinks: tuple[NcclLink, ...]
    xgmi_links: tuple[NcclLink, ...]
    c2c: tuple[NcclC2c, ...]


@dataclass(frozen=True)
class NcclNet:
    name: str | None
    dev: int | None
    speed_mbps: int | None
    port: int | None
    latency: float | None
    guid: str | None
    maxconn: int | None
    gdr: bool | None
    coll: bool | None


@dataclass(frozen=True)
class NcclNic:
    bdf: str | None
    numa_id: int | None
    nets: tuple[NcclNet, ...]


@dataclass(frozen=True)
class NcclTopology:
    version: int | None
    cpus: tuple[NcclCpu, ...]
    pci_devices: tuple[NcclPciDevice, ...]
    gpus: tuple[NcclGpu, ...]
    nics: tuple[NcclNic, ...]
    warnings: tuple[str, ...]


def detect(text: str) -> int:
    """Score NCCL topology XML: a ``<system version=..>`` root with ``<cpu>``/``<pci>`` inside.

    An NCCL graph file (``<graphs>``) scores low but not zero, so that ``parse("auto")`` reaches
    this parser and the user is told what that file is instead of "unknown kind".
    """
    head = text[:8192]
    if "<" not in head:
        return 0
    if _DETECT_SYSTEM_RE.search(head):
        return 95 if _DETECT_INNER_RE.search(head) else 60
    if "<graphs" in head and "<graph " in head and "<channel" in head:
        return 40
    return 0


class _Reader:
    def __init__(self, doc: XmlDoc) -> None:
        self.doc = doc
        self.warnings: list[str] = []
        self.cpus: list[NcclCpu] = []
        self.pci: list[NcclPciDevice] = []
        self.gpus: list[NcclGpu] = []
        self.nics: list[NcclNic] = []
        self.zero_width: list[str] = []
        self.no_speed: list[str] = []
        self.no_class: list[str] = []
        self.seen_bdf: set[str] = set()

    # -- attribute helpers: a bad value is recorded as a warning and read as null ------------
    def _int(self, node: Node, name: str) -> int | None:
        raw = node.get(name)
        if raw is None or raw.strip() == "":
            return None
        try:
            return int(raw.strip(), 0) if raw.strip().lower().startswith("0x") else int(raw.strip())
        except ValueError:
            self.warnings.append(f"line {node.line}: <{node.tag} {name}={raw!r}> is not a number; read as unknown")
            return None

    def _float(self, node: Node, name: str) -> float | None:
        raw = node.get(name)
        if raw is None or raw.strip() == "":
            return None
        try:
            value = float(raw)
        except ValueError:
            value = None
        if value is None or value != value or value in (float("inf"), float("-inf")):
            self.warnings.append(f"line {node.line}: <{node.tag} {name}={raw!r}> is not a number; read as unknown")
            return None
        return value

    def _bool(self, node: Node, name: str) -> bool | None:
        value = self._int(node, name)
        return None if value is None else value != 0

    def _hexid(self, node: Node, name: str, digits: int = 4) -> str | None:
        raw = node.get(name)
        if raw is None or raw.strip() == "":
            return None
        m = _HEX_RE.match(raw.strip())
        if not m:
            self.warnings.append(f"line {node.line}: <{node.tag} {name}={raw!r}> is not a hex id; read as unknown")
            return None
        return "0x" + m.group(1).lower().rjust(digits, "0")

    def _bdf(self, node: Node, raw: str, what: str) -> str | None:
        try:
            return canonical_bdf(raw)
        except ValueError:
            self.warnings.append(f"line {node.line}: {what} {raw!r} is not a PCI address; kept as printed only")
            return None

    # -- tree walk --------------------------------------------------------------------------
    def read(self) -> None:
        root = self.doc.root
        for child in root.children:
            if child.tag == "cpu":
                self._cpu(child)
            else:
                self._unexpected(child, "system")
        if not self.cpus:
            self.warnings.append("the document has no <cpu> elements: no devices were read")

    def _unexpected(self, node: Node, parent: str) -> None:
        self.warnings.append(f"line {node.line}: <{node.tag}> inside <{parent}> is not part of NCCL's topology schema; ignored")

    def _cpu(self, node: Node) -> None:
        numa = self._int(node, "numaid")
        if numa is not None and numa < 0:
            self.warnings.append(
                f"line {node.line}: <cpu numaid=\"{node.get('numaid')}\">: NCCL did not know the NUMA node "
                "(typical inside a VM); NUMA locality of its devices is unknown"
            )
            numa = None
        children: list[str] = []
        for child in node.children:
            if child.tag == "pci":
                children.append(self._pci(child, None, numa, 0))
            elif child.tag == "nic":
                self._nic(child, None, numa)
            else:
                self._unexpected(child, "cpu")
        self.cpus.append(NcclCpu(
            numa_id=numa,
            affinity=node.get("affinity"),
            arch=node.get("arch"),
            vendor=node.get("vendor"),
            family_id=self._int(node, "familyid"),
            model_id=self._int(node, "modelid"),
            host_hash=node.get("host_hash"),
            children=tuple(children),
        ))

    def _pci(self, node: Node, parent_bdf: str | None, numa: int | None, depth: int) -> str:
        raw = (node.get("busid") or "").strip()
        if not raw:
            self.warnings.append(f"line {node.line}: <pci> without a busid; kept with no address")
            bdf = None
        else:
            bdf = self._bdf(node, raw, "busid")
        key = bdf or raw
        if key and key in self.seen_bdf:
            self.warnings.append(f"line {node.line}: PCI address {key} appears more than once")
        self.seen_bdf.add(key)

        class_raw = node.get("class")
        class_code = None
        if class_raw is not None and class_raw.strip():
            m = _HEX_RE.match(class_raw.strip())
            if m:
                class_code = "0x" + m.group(1).lower().rjust(6, "0")[:4]
            else:
                self.warnings.append(f"line {node.line}: <pci class={class_raw!r}> is not a PCI class; read as unknown")
        vendor = self._hexid(node, "vendor")
        speed_raw = node.get("link_speed")
        speed = None
        if speed_raw is not None and speed_raw.strip():
            m = _SPEED_RE.match(speed_raw)
            if m:
                speed = float(m.group(1))
            else:
                self.warnings.append(f"line {node.line}: link_speed={speed_raw!r} is not 'N GT/s'; read as unknown")
        width = self._int(node, "link_width")

        gpu_nodes = [c for c in node.children if c.tag == "gpu"]
        nic_nodes = [c for c in node.children if c.tag == "nic"]
        if gpu_nodes:
            kind = "gpu"
        elif nic_nodes:
            kind = "nic"
        else:
            kind = _kind_from_class(class_code, vendor)
        label = bdf or raw or f"line {node.line}"
        if class_raw is None and not gpu_nodes and not nic_nodes:
            self.no_class.append(label)
        if kind in ("gpu", "nic"):
            if width == 0:
                self.zero_width.append(label)
            if speed is None and speed_raw is not None:
                self.no_speed.append(label)

        self.pci.append(NcclPciDevice(
            bdf=bdf,
            busid_raw=raw,
            parent_bdf=parent_bdf,
            numa_id=numa,
            class_code=class_code,
            class_raw=class_raw,
            vendor_id=vendor,
            device_id=self._hexid(node, "device"),
            subsystem_vendor_id=self._hexid(node, "subsystem_vendor"),
            subsystem_device_id=self._hexid(node, "subsystem_device"),
            link_speed=speed_raw,
            link_speed_gts=speed,
            link_width=width,
            kind=kind,
            depth=depth,
            virtual=raw.lower().startswith("ffff:ff:"),
        ))

        for child in node.children:
            if child.tag == "pci":
                self._pci(child, bdf or raw, numa, depth + 1)
            elif child.tag in ("gpu", "nic"):
                pass  # read below, after the device itself
            else:
                self._unexpected(child, "pci")
        if len(gpu_nodes) > 1:
            self.warnings.append(f"line {gpu_nodes[1].line}: PCI device {label} has more than one <gpu>; the first is used")
        if gpu_nodes:
            self._gpu(gpu_nodes[0], bdf)
        elif kind == "gpu":
            self.gpus.append(NcclGpu(bdf, False, None, None, None, None, None, (), (), ()))
        for nic in nic_nodes:
            self._nic(nic, bdf, numa)
        if kind == "nic" and not nic_nodes:
            self.nics.append(NcclNic(bdf, numa, ()))
        return bdf or raw

    def _link(self, node: Node) -> NcclLink:
        raw = (node.get("target") or "").strip()
        target = self._bdf(node, raw, f"<{node.tag}> target") if raw else None
        if target is not None and len(raw.split(":")[0]) > 4:
            self.warnings.append(
                f"line {node.line}: <{node.tag} target=\"{raw}\"> is not a real PCI address: NCCL could not "
                "identify the NVLink peer (e.g. an NVSwitch not visible inside a VM); kept as printed in target_raw"
            )
        tclass_raw = node.get("tclass")
        tclass = None
        if tclass_raw and _HEX_RE.match(tclass_raw.strip()):
            tclass = "0x" + _HEX_RE.match(tclass_raw.strip()).group(1).lower().rjust(6, "0")[:4]
        target_kind = _kind_from_class(tclass, None, link=True) if tclass else None
        return NcclLink(target, raw, self._int(node, "count"), tclass_raw, target_kind)

    def _gpu(self, node: Node, bdf: str | None) -> None:
        nvlinks: list[NcclLink] = []
        xgmi: list[NcclLink] = []
        c2c: list[NcclC2c] = []
        for child in node.children:
            if child.tag == "nvlink":
                nvlinks.append(self._link(child))
            elif child.tag == "xgmi":
                xgmi.append(self._link(child))
            elif child.tag == "c2c":
                c2c.append(NcclC2c(self._int(child, "count"), self._float(child, "bw")))
            else:
                self._unexpected(child, "gpu")
        self.gpus.append(NcclGpu(
            bdf=bdf,
            declared=True,
            dev=self._int(node, "dev"),
            sm=self._int(node, "sm"),
            rank=self._int(node, "rank"),
            gdr=self._bool(node, "gdr"),
            gcn=node.get("gcn"),
            nvlinks=tuple(nvlinks),
            xgmi_links=tuple(xgmi),
            c2c=tuple(c2c),
        ))

    def _nic(self, node: Node, bdf: str | None, numa: int | None) -> None:
        nets: list[NcclNet] = []
        for child in node.children:
            if child.tag != "net":
                self._unexpected(child, "nic")
                continue
            nets.append(NcclNet(
                name=child.get("name"),
                dev=self._int(child, "dev"),
                speed_mbps=self._int(child, "speed"),
                port=self._int(child, "port"),
                latency=self._float(child, "latency"),
                guid=child.get("guid"),
                maxconn=self._int(child, "maxconn"),
                gdr=self._bool(child, "gdr"),
                coll=self._bool(child, "coll"),
            ))
        self.nics.append(NcclNic(bdf, numa, tuple(nets)))

    def summary_warnings(self) -> None:
        if self.no_class:
            self.warnings.append(
                f"{len(self.no_class)} PCI device(s) have no class attribute ({_short(self.no_class)}): "
                "the file does not say whether they are GPUs, NICs or switches (kind 'other')"
            )
        if self.zero_width:
            self.warnings.append(
                f"link_width is 0 on {len(self.zero_width)} GPU/NIC PCI device(s) ({_short(self.zero_width)}): "
                "NCCL could not read their PCIe link width (typical in VMs); their PCIe bandwidth is unknown"
            )
        if self.no_speed:
            self.warnings.append(
                f"link_speed is empty on {len(self.no_speed)} GPU/NIC PCI device(s) ({_short(self.no_speed)}): "
                "their PCIe generation is unknown"
            )


def _short(items: list[str], limit: int = 4) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f", ... (+{len(items) - limit})" if len(items) > limit else "")


def _kind_from_class(class_code: str | None, vendor: str | None, link: bool = False) -> str:
    if class_code is None:
        return "other"
    base = class_code[2:4]
    if class_code == "0x0604":
        return "bridge"
    if class_code in ("0x0300", "0x0302", "0x0380"):
        return "gpu"
    if base == "02" or class_code == "0x0c06":
        return "nic"
    if class_code == "0x0680" and vendor in (None, "0x10de"):
        return "nvswitch"
    if link and base == "06":
        return "cpu"  # NVLink to a host bridge class target: POWER9 CPU
    return "other"


def parse(text: str) -> NcclTopology:
    """Read an NCCL topology XML (see the module docstring for the result schema)."""
    doc = read_xml(KIND, text, frozenset())  # NCCL's topology has attributes only
    root = doc.root
    if root.tag == "graphs" or root.tag == "graph":
        raise ParseError(
            KIND, root.line, doc.lines[root.line - 1],
            "this is an NCCL graph file (<graphs> of rings/trees, NCCL_GRAPH_FILE or NCCL_GRAPH_DUMP_FILE), "
            "not a topology; upload the file written by NCCL_TOPO_DUMP_FILE instead",
        )
    if root.tag == "topology":
        raise ParseError(
            KIND, root.line, doc.lines[root.line - 1],
            "this is hwloc XML (lstopo --of xml), not an NCCL topology; upload it as hwloc_xml",
        )
    if root.tag != "system":
        raise ParseError(
            KIND, root.line, doc.lines[root.line - 1],
            f"expected the NCCL topology root element <system>, found <{root.tag}>",
        )
    reader = _Reader(doc)
    warning = truncation_warning(doc)
    if warning:
        reader.warnings.append(warning)
    reader.warnings.extend(doc.notes)
    version = reader._int(root, "version")
    try:
        reader.read()
    except RecursionError:
        raise ParseError(KIND, 0, "", "the <pci> elements are nested too deeply to be a real PCI tree") from None
    reader.summary_warnings()
    return NcclTopology(
        version=version,
        cpus=tuple(reader.cpus),
        pci_devices=tuple(reader.pci),
        gpus=tuple(reader.gpus),
        nics=tuple(reader.nics),
        warnings=tuple(reader.warnings),
    )
