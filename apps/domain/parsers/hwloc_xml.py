"""hwloc XML: the whole-host topology written by ``lstopo``.

Commands::

    lstopo --of xml > host.xml            # hwloc 2.x / 3.x (also: lstopo host.xml)
    lstopo-no-graphics --of xml > host.xml
    hwloc-gather-topology                 # its <name>.xml

Reads every XML format hwloc has written:

* hwloc 1.x: ``<topology>`` without ``version``; NUMA nodes *contain* packages (``type="Socket"``
  before 1.11, ``Package`` after), I/O hangs under the NUMA node, caches are ``type="Cache"``,
  distances are ``<distances nbobjs relative_depth latency_base><latency value/>``.
* hwloc 2.x: ``<topology version="2.0">``; NUMA nodes are memory children of a Package/Group,
  distances are ``<distances2>`` / ``<distances2hetero>`` with ``<indexes>``/``<u64values>``.
* hwloc 3.x: ``<topology version="3.0">``; OS device types became a bitmask.

Objects: ``<object type="Machine|Package|Group|NUMANode|L3Cache|Core|PU|Bridge|PCIDev|OSDev" ...>``
with ``pci_busid="0000:2b:00.0"``, ``pci_type="0604 [8086:2030] [8086:0000] 04 00"`` (class,
[vendor:device], [subvendor:subdevice], revision), ``pci_link_speed`` (GB/s, 0 = unknown),
``bridge_type``/``bridge_pci`` on bridges, ``osdev_type`` + ``name`` on OS devices and
``<info name="PCIVendor|PCIDevice|GPUModel|CPUModel|DMIProductName|..." value=.../>`` children.

Result (:class:`HwlocTopology`):

* ``version`` -- the ``<topology version>`` text (``"2.0"``, ``"3.0"``), ``"1.x"`` when absent;
  ``format_major`` (1, 2, 3).
* ``product`` (``DMIProductName``), ``architecture`` (``Architecture`` info), when present.
* ``packages`` -- :class:`HwlocPackage`: ``os_index``, ``cpu_model`` (``CPUModel`` info),
  ``cpuset`` (hwloc bitmap text), ``numa_nodes`` (the NUMA nodes of that package).
* ``numa_nodes`` -- every NUMA node (:class:`HwlocNumaNode`: ``os_index``, ``cpuset``,
  ``local_memory_bytes``, ``package_os_index``); GPU-memory NUMA nodes with no package keep a
  null package.
* ``pci_devices`` -- every PCI bridge and device with a bus id, flattened in document order
  (:class:`HwlocPciDevice`): ``bdf`` (canonical), ``parent_bdf`` (nearest PCI bridge above, null
  directly under a host bridge), ``host_bridge`` (the host bridge's ``bridge_pci`` range, e.g.
  ``"0000:[2b-3b]"``: devices under different host bridges of one NUMA node are ``NODE`` apart),
  ``package_os_index`` / ``numa_os_index`` (the package / NUMA node the device is local to: the
  nearest enclosing one, or the only one attached to the nearest enclosing object; null when that
  object spans several), ``class_code`` (``"0x0302"``), ``vendor_id``/``device_id``/
  ``subsystem_vendor_id``/``subsystem_device_id`` (``"0x10de"``), ``vendor_name``/``device_name``
  (``PCIVendor``/``PCIDevice`` infos), ``pci_type`` (as printed), ``link_speed_gbs`` (hwloc's
  ``pci_link_speed``, GB/s per direction as hwloc prints it; null when hwloc wrote 0 = unknown),
  ``kind`` (``gpu``/``nic``/``bridge``/``nvswitch``/``other``, see below), ``subtype``
  (e.g. ``NVSwitch``), ``depth`` (PCI bridges above it: 0 = directly under the host bridge),
  ``os_devices`` (:class:`HwlocOsDevice`: ``name``, ``type`` -- ``block``/``gpu``/``network``/
  ``openfabrics``/``dma``/``coproc`` as hwloc 2 names them, ``types`` -- every type of the hwloc 3
  bitmask, hwloc 1/2 values upgraded the way hwloc 3 does, ``subtype``, ``gpu_model``) and
  ``gpu_model`` (first ``GPUModel`` of its OS devices).
* ``host_os_devices`` -- OS devices that are not under a PCI device (e.g. disks under Machine).
* ``distances`` -- :class:`HwlocDistances`: ``name`` (``NUMALatency``, ``NVLinkBandwidth``,
  ``XGMIBandwidth``...), ``kind`` (hwloc's kind bits), ``meaning`` (``latency``/``bandwidth``),
  ``unit``, ``objects`` (labels: OS device names, PCI BDFs, ``NUMANode P#0``, ``Package P#1``),
  ``values`` (row-major matrix; hwloc 1.x latencies multiplied by ``latency_base``).
* ``warnings``.

Kinds: ``bridge`` for Bridge objects / class 0x0604; ``nvswitch`` for subtype ``NVSwitch`` or
class 0x0680 from NVIDIA; ``nic`` for class 0x02xx, 0x0c06 (InfiniBand) or an OpenFabrics OS
device; ``gpu`` for class 0x0302, for 0x0300/0x0380/0x1200 from NVIDIA (0x10de), for AMD
(0x1002) 0x0380/0x1200, and for any display/accelerator class with a compute OS device (NVML,
RSMI, CUDA, OpenCL, LevelZero: hwloc's ``coproc`` type). A plain VGA device without one (BMC
graphics: ASPEED, Matrox, ATI ES1000) is ``other``. The lstopo *text* output (``*.console``) is
not this kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.domain.errors import ParseError
from apps.domain.parsers._xml import Node, XmlDoc, read_xml, truncation_warning
from apps.domain.pci import canonical_bdf

KIND = "hwloc_xml"

_PCI_TYPE_RE = re.compile(
    r"^\s*([0-9a-fA-F]{4})\s+\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]\s+\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]"
)
_DETECT_ROOT_RE = re.compile(r"<topology(?:\s[^>]*)?>")
_DETECT_OBJECT_RE = re.compile(r"<object\s+type=\"(?:Machine|System|Package|Socket|NUMANode|Group)\"")

_IO_TYPES = frozenset({"Bridge", "PCIDev", "OSDev"})
_V2_OSDEV = {0: "block", 1: "gpu", 2: "network", 3: "openfabrics", 4: "dma", 5: "coproc"}
_V3_BITS = ((1, "block"), (2, "memory"), (4, "gpu"), (8, "coproc"), (16, "network"), (32, "openfabrics"), (64, "dma"))
_COMPUTE_SUBTYPES = frozenset({"CUDA", "OpenCL", "LevelZero"})
_UNITS = {
    "NVLinkBandwidth": "MB/s",
    "XGMIBandwidth": "MB/s",
    "XGMIHops": "hops",
    "NUMALatency": "relative latency (10 = local)",
}


@dataclass(frozen=True)
class HwlocOsDevice:
    name: str | None
    type: str
    types: tuple[str, ...]
    subtype: str | None
    gpu_model: str | None


@dataclass(frozen=True)
class HwlocNumaNode:
    os_index: int | None
    cpuset: str | None
    local_memory_bytes: int | None
    package_os_index: int | None


@dataclass(frozen=True)
class HwlocPackage:
    os_index: int | None
    cpu_model: str | None
    cpuset: str | None
    numa_nodes: tuple[HwlocNumaNode, ...]


@dataclass(frozen=True)
class HwlocPciDevice:
    bdf: str
    parent_bdf: str | None
    host_bridge: str | None
    package_os_index: int | None
    numa_os_index: int | None
    class_code: str | None
    vendor_id: str | None
    device_id: str | None
    subsystem_vendor_id: str | None
    subsystem_device_id: str | None
    vendor_name: str | None
    device_name: str | None
    pci_type: str | None
    link_speed_gbs: float | None
    kind: str
    subtype: str | None
    depth: int
    os_devices: tuple[HwlocOsDevice, ...]
    gpu_model: str | None


@dataclass(frozen=True)
class HwlocDistances:
    name: str | None
    kind: int | None
    meaning: str | None
    unit: str | None
    objects: tuple[str, ...]
    values: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class HwlocTopology:
    version: str
    format_major: int
    product: str | None
    architecture: str | None
    packages: tuple[HwlocPackage, ...]
    numa_nodes: tuple[HwlocNumaNode, ...]
    pci_devices: tuple[HwlocPciDevice, ...]
    host_os_devices: tuple[HwlocOsDevice, ...]
    distances: tuple[HwlocDistances, ...]
    warnings: tuple[str, ...]


def detect(text: str) -> int:
    """Score hwloc XML: a ``<topology>`` root holding ``<object type="Machine|...">``.

    lstopo's console/text output has no ``<object`` tags and scores 0.
    """
    head = text[:8192]
    if "<topology" not in head or "<object" not in head:
        return 0
    if _DETECT_ROOT_RE.search(head) and _DETECT_OBJECT_RE.search(head):
        return 95
    return 50


@dataclass
class _Ctx:
    package: int | None = None
    numa: int | None = None
    host_bridge: str | None = None
    parent_bdf: str | None = None
    depth: int = 0
    pci: dict | None = None  # the PCI device record OS devices attach to


# The elements whose text the reader reads (hwloc 2's distance matrices); read_xml passes over the rest.
_TEXT_TAGS = frozenset({"indexes", "u64values"})


class _Reader:
    def __init__(self, doc: XmlDoc, major: int) -> None:
        self.doc = doc
        self.major = major
        self.warnings: list[str] = []
        self.packages: list[dict] = []
        self.numas: list[dict] = []
        self.pci: list[dict] = []
        self.host_osdevs: list[HwlocOsDevice] = []
        self.gp_labels: dict[int, tuple[str, str]] = {}  # gp_index -> (type, label)
        self.distance_nodes: list[tuple[Node, Node | None]] = []  # (element, enclosing object)
        self.product: str | None = None
        self.architecture: str | None = None
        self.seen_bdf: set[str] = set()
        self.no_speed: list[str] = []

    # -- helpers -----------------------------------------------------------------------------
    def _int(self, node: Node, name: str) -> int | None:
        raw = node.get(name)
        if raw is None or not raw.strip():
            return None
        try:
            return int(raw.strip(), 0) if raw.strip().lower().startswith("0x") else int(raw.strip())
        except ValueError:
            self.warnings.append(f"line {node.line}: {name}={raw!r} is not a number; read as unknown")
            return None

    @staticmethod
    def _infos(node: Node) -> dict[str, str]:
        infos: dict[str, str] = {}
        for child in node.children:
            if child.tag == "info":
                name = child.get("name")
                if name is not None and name not in infos:
                    infos[name] = child.get("value", "")
        return infos

    # -- walk ----------------------------------------------------------------------------------
    def read(self) -> None:
        root = self.doc.root
        infos = self._infos(root)
        self.architecture = infos.get("Architecture")
        objects = [c for c in root.children if c.tag == "object"]
        if not objects:
            self.warnings.append("the topology has no <object> elements: nothing was read")
        for obj in objects:
            self._object(obj, _Ctx())
        for child in root.children:
            if child.tag in ("distances", "distances2", "distances2hetero"):
                self.distance_nodes.append((child, None))

    def _object(self, node: Node, ctx: _Ctx) -> None:
        otype = node.get("type")
        if otype == "Socket":
            otype = "Package"
        if otype is None:
            self.warnings.append(f"line {node.line}: <object> without a type; read as a plain container")
        if otype in _IO_TYPES:
            self._io(node, otype, ctx)
            return
        if not node.children and otype not in ("Package", "NUMANode"):
            return  # a leaf (a PU, a childless cache): no infos, no objects, nothing to record
        infos = self._infos(node)
        if otype in ("Machine", "System"):
            self.product = self.product or infos.get("DMIProductName")
            self.architecture = self.architecture or infos.get("Architecture")
        os_index = self._int(node, "os_index") if otype in ("Package", "NUMANode") else None
        gp = self._int(node, "gp_index") if otype in ("Package", "NUMANode") else None
        child_objects = [c for c in node.children if c.tag == "object"]
        here = _Ctx(ctx.package, ctx.numa, ctx.host_bridge, None, 0, None)
        if otype == "Package":
            here.package = os_index
            self.packages.append({"os_index": os_index, "cpu_model": infos.get("CPUModel"),
                                  "cpuset": node.get("cpuset")})
            if gp is not None:
                self.gp_labels[gp] = ("Package", f"Package P#{os_index}")
        if otype == "NUMANode":
            here.numa = os_index
            pkg_children = [c for c in child_objects if c.get("type") in ("Package", "Socket")]
            package = ctx.package
            if package is None and len(pkg_children) == 1:  # hwloc 1.x: NUMA node contains the package
                package = self._int(pkg_children[0], "os_index")
                here.package = package
            self.numas.append({"os_index": os_index, "cpuset": node.get("cpuset"),
                               "local_memory_bytes": self._int(node, "local_memory"),
                               "package_os_index": package})
            if gp is not None:
                self.gp_labels[gp] = ("NUMANode", f"NUMANode P#{os_index}")
        else:
            numa_children = self._numa_children(child_objects)
            if len(numa_children) == 1:
                here.numa = self._int(numa_children[0], "os_index")
            elif len(numa_children) > 1:
                here.numa = None
        for child in node.children:
            if child.tag == "object":
                self._object(child, here)
            elif child.tag in ("distances", "distances2", "distances2hetero"):
                self.distance_nodes.append((child, node))

    @staticmethod
    def _numa_children(children: list[Node]) -> list[Node]:
        found = []
        for child in children:
            ctype = child.get("type")
            if ctype == "NUMANode":
                found.append(child)
            elif ctype == "MemCache":  # hwloc 2.1+: a memory-side cache wraps its NUMA node
                found.extend(_Reader._numa_children([c for c in child.children if c.tag == "object"]))
        return found

    def _io(self, node: Node, otype: str, ctx: _Ctx) -> None:
        if otype == "OSDev":
            osdev = self._osdev(node)
            if ctx.pci is not None:
                ctx.pci["os_devices"].append(osdev)
            else:
                self.host_osdevs.append(osdev)
            return
        busid = node.get("pci_busid")
        if otype == "Bridge" and not busid:  # host bridge: the root of a PCI hierarchy
            here = _Ctx(ctx.package, ctx.numa, node.get("bridge_pci") or f"host bridge at line {node.line}",
                        None, 0, None)
            self._io_children(node, here)
            return
        if not busid:
            self.warnings.append(f"line {node.line}: PCIDev without pci_busid; skipped with its OS devices")
            return
        try:
            bdf = canonical_bdf(busid)
        except ValueError:
            self.warnings.append(f"line {node.line}: pci_busid={busid!r} is not a PCI address; device skipped")
            return
        if bdf in self.seen_bdf:
            self.warnings.append(f"line {node.line}: PCI address {bdf} appears more than once in the topology")
        self.seen_bdf.add(bdf)
        infos = self._infos(node)
        pci_type = node.get("pci_type")
        ids: tuple[str | None, ...] = (None, None, None, None, None)
        if pci_type is not None:
            m = _PCI_TYPE_RE.match(pci_type)
            if m:
                ids = tuple("0x" + g.lower() for g in m.groups())
            else:
                self.warnings.append(f"line {node.line}: pci_type={pci_type!r} is not 'CCCC [vvvv:dddd] [ssss:ssss]'; ids unknown")
        speed = None
        raw_speed = node.get("pci_link_speed")
        if raw_speed is not None and raw_speed.strip():
            try:
                speed = float(raw_speed)
            except ValueError:
                self.warnings.append(f"line {node.line}: pci_link_speed={raw_speed!r} is not a number; read as unknown")
            if speed is not None and (speed != speed or speed <= 0 or speed == float("inf")):
                speed = None
        record = {
            "bdf": bdf, "parent_bdf": ctx.parent_bdf, "host_bridge": ctx.host_bridge,
            "package_os_index": ctx.package, "numa_os_index": ctx.numa,
            "class_code": ids[0], "vendor_id": ids[1], "device_id": ids[2],
            "subsystem_vendor_id": ids[3], "subsystem_device_id": ids[4],
            "vendor_name": infos.get("PCIVendor"), "device_name": infos.get("PCIDevice"),
            "pci_type": pci_type, "link_speed_gbs": speed, "otype": otype,
            "subtype": node.get("subtype"), "depth": ctx.depth, "os_devices": [], "line": node.line,
        }
        self.pci.append(record)
        gp = self._int(node, "gp_index")
        if gp is not None:
            self.gp_labels[gp] = (otype, bdf)
        here = _Ctx(ctx.package, ctx.numa, ctx.host_bridge, bdf, ctx.depth + 1, record)
        self._io_children(node, here)

    def _io_children(self, node: Node, ctx: _Ctx) -> None:
        for child in node.children:
            if child.tag == "object":
                ctype = child.get("type")
                if ctype in _IO_TYPES:
                    self._io(child, ctype, ctx)
                elif ctype != "Misc":
                    self.warnings.append(f"line {child.line}: <object type={ctype!r}> under an I/O object ignored")

    def _osdev(self, node: Node) -> HwlocOsDevice:
        name = node.get("name")
        subtype = node.get("subtype")
        infos = self._infos(node)
        raw = self._int(node, "osdev_type")
        types: list[str] = []
        primary = "unknown"
        if raw is None:
            self.warnings.append(f"line {node.line}: OS device {name!r} has no osdev_type")
        elif self.major >= 3:
            types = [label for bit, label in _V3_BITS if raw & bit]
            if raw & ~127 or not types:
                self.warnings.append(f"line {node.line}: OS device {name!r} has unknown osdev_type {raw}")
            primary = _v3_primary(types, name, subtype)
        else:
            primary = _V2_OSDEV.get(raw, "unknown")
            if primary == "unknown":
                self.warnings.append(f"line {node.line}: OS device {name!r} has unknown osdev_type {raw}")
            types = _upgrade_v2(raw, name, subtype, infos)
        gp = self._int(node, "gp_index")
        if gp is not None and name:
            self.gp_labels[gp] = ("OSDev", name)
        return HwlocOsDevice(name, primary, tuple(types), subtype, infos.get("GPUModel"))

    # -- distances -------------------------------------------------------------------------------
    def distances(self) -> list[HwlocDistances]:
        out = []
        for node, container in self.distance_nodes:
            record = self._v1_distances(node, container) if node.tag == "distances" else self._v2_distances(node)
            if record is not None:
                out.append(record)
        return out

    def _matrix(self, node: Node, n: int, values: list, what: str) -> tuple[tuple, ...] | None:
        if n < 1 or len(values) != n * n:
            self.warnings.append(
                f"line {node.line}: {what} has {len(values)} values for {n} objects (expected {n * n}); ignored"
            )
            return None
        return tuple(tuple(values[i * n:(i + 1) * n]) for i in range(n))

    def _v2_distances(self, node: Node) -> HwlocDistances | None:
        name = node.get("name")
        what = f"<{node.tag} name={name!r}>"
        n = self._int(node, "nbobjs") or 0
        kind = self._int(node, "kind")
        unique_type = node.get("type")
        os_indexing = node.get("indexing") == "os"
        tokens: list[str] = []
        values: list[int] = []
        for child in node.children:
            if child.tag == "indexes":
                tokens.extend(child.text.split())
            elif child.tag == "u64values":
                for tok in child.text.split():
                    try:
                        values.append(int(tok, 0))
                    except ValueError:
                        self.warnings.append(f"line {child.line}: {what} value {tok!r} is not a number; matrix ignored")
                        return None
        if len(tokens) != n:
            self.warnings.append(f"line {node.line}: {what} lists {len(tokens)} objects but nbobjs={n}; ignored")
            return None
        labels = []
        for tok in tokens:
            otype, _, index = tok.rpartition(":") if node.tag == "distances2hetero" else (unique_type, "", tok)
            try:
                idx = int(index, 0)
            except ValueError:
                self.warnings.append(f"line {node.line}: {what} object {tok!r} is not an index; ignored")
                return None
            if os_indexing:
                labels.append(f"{otype} P#{idx}")
            else:
                found = self.gp_labels.get(idx)
                if found is None:
                    self.warnings.append(f"line {node.line}: {what} names object {tok!r} that is not in the topology")
                    labels.append(f"{otype} gp#{idx}")
                else:
                    labels.append(found[1])
        matrix = self._matrix(node, n, values, what)
        if matrix is None:
            return None
        return HwlocDistances(name, kind, _meaning(kind), _UNITS.get(name or ""), tuple(labels), matrix)

    def _v1_distances(self, node: Node, container: Node | None) -> HwlocDistances | None:
        what = "<distances>"
        n = self._int(node, "nbobjs") or 0
        try:
            base = float(node.get("latency_base", "1") or 1)
        except ValueError:
            base = 1.0
        values: list[float] = []
        for child in node.children:
            if child.tag == "latency":
                try:
                    values.append(float(child.get("value", "")) * (base if base > 0 else 1.0))
                except ValueError:
                    self.warnings.append(f"line {child.line}: {what} latency {child.get('value')!r} is not a number; ignored")
                    return None
        matrix = self._matrix(node, n, values, what)
        if matrix is None:
            return None
        labels: tuple[str, ...] = ()
        depth = self._int(node, "relative_depth")
        otype = _type_at_depth(container, depth) if container is not None and depth is not None else None
        if otype is not None:
            found = [c for c in _iter_objects(container) if c.get("type") == otype]
            if len(found) == n:
                labels = tuple(f"{otype} P#{c.get('os_index')}" for c in found)
        if not labels:
            self.warnings.append(f"line {node.line}: hwloc 1.x distances: could not tell which {n} objects they relate")
        return HwlocDistances("latency (hwloc 1.x)", None, "latency", "relative latency (10 = local)", labels, matrix)

    # -- result ----------------------------------------------------------------------------------
    def pci_devices(self) -> list[HwlocPciDevice]:
        out = []
        for rec in self.pci:
            osdevs = tuple(rec["os_devices"])
            kind = _kind(rec["otype"], rec["class_code"], rec["vendor_id"], rec["subtype"], osdevs)
            if kind in ("gpu", "nic") and rec["link_speed_gbs"] is None:
                self.no_speed.append(rec["bdf"])
            out.append(HwlocPciDevice(
                bdf=rec["bdf"], parent_bdf=rec["parent_bdf"], host_bridge=rec["host_bridge"],
                package_os_index=rec["package_os_index"], numa_os_index=rec["numa_os_index"],
                class_code=rec["class_code"], vendor_id=rec["vendor_id"], device_id=rec["device_id"],
                subsystem_vendor_id=rec["subsystem_vendor_id"], subsystem_device_id=rec["subsystem_device_id"],
                vendor_name=rec["vendor_name"], device_name=rec["device_name"], pci_type=rec["pci_type"],
                link_speed_gbs=rec["link_speed_gbs"], kind=kind, subtype=rec["subtype"], depth=rec["depth"],
                os_devices=osdevs, gpu_model=next((o.gpu_model for o in osdevs if o.gpu_model), None),
            ))
        if not out:
            self.warnings.append(
                "the topology has no PCI devices: lstopo ran without I/O discovery (--no-io, or no access "
                "to /sys in a container), so GPUs and NICs cannot be placed"
            )
        if self.no_speed:
            shown = ", ".join(self.no_speed[:4]) + (f", ... (+{len(self.no_speed) - 4})" if len(self.no_speed) > 4 else "")
            self.warnings.append(
                f"hwloc did not know the PCIe link speed (pci_link_speed 0) of {len(self.no_speed)} GPU/NIC "
                f"device(s) ({shown})"
            )
        return out

    def packages_and_numas(self) -> tuple[list[HwlocPackage], list[HwlocNumaNode]]:
        numas = [HwlocNumaNode(**n) for n in self.numas]
        packages = [
            HwlocPackage(p["os_index"], p["cpu_model"], p["cpuset"],
                         tuple(n for n in numas if n.package_os_index is not None
                               and n.package_os_index == p["os_index"]))
            for p in self.packages
        ]
        return packages, numas


def _iter_objects(node: Node):
    stack = [c for c in reversed(node.children) if c.tag == "object"]
    while stack:
        cur = stack.pop()
        yield cur
        stack.extend(c for c in reversed(cur.children) if c.tag == "object")


def _type_at_depth(container: Node, depth: int) -> str | None:
    """hwloc 1.x: the object type found ``depth`` levels below ``container`` (first normal branch)."""
    cur = container
    for _ in range(max(depth, 0)):
        nxt = next((c for c in cur.children if c.tag == "object" and c.get("type") not in _IO_TYPES), None)
        if nxt is None:
            return None
        cur = nxt
    return cur.get("type")


def _meaning(kind: int | None) -> str | None:
    if kind is None:
        return None
    if kind & 8:
        return "bandwidth"
    if kind & 4:
        return "latency"
    return None


def _upgrade_v2(raw: int, name: str | None, subtype: str | None, infos: dict[str, str]) -> list[str]:
    """hwloc 1.x/2.x osdev_type -> hwloc 3 type set, as hwloc 3 does when importing old XML."""
    name = name or ""
    if raw == 0:
        return ["memory"] if name.startswith("dax") else ["block"]
    if raw == 1:
        return ["gpu", "coproc"] if name.startswith(("rsmi", "nvml")) else ["gpu"]
    if raw == 2:
        return ["network"]
    if raw == 3:
        return ["network"] if subtype == "BXI" else ["network", "openfabrics"]
    if raw == 4:
        return ["dma"]
    if raw == 5:
        if subtype in ("CUDA", "LevelZero") or (subtype == "OpenCL" and infos.get("OpenCLDeviceType") == "GPU"):
            return ["gpu", "coproc"]
        return ["coproc"]
    return []


def _v3_primary(types: list[str], name: str | None, subtype: str | None) -> str:
    """Name a hwloc 3 type set the way hwloc 2 would have (so both versions read alike)."""
    if "coproc" in types and (subtype in _COMPUTE_SUBTYPES or (name or "").startswith(("cuda", "opencl", "ze"))):
        return "coproc"
    for label in ("openfabrics", "gpu", "coproc", "network", "dma", "block", "memory"):
        if label in types:
            return label
    return "unknown"


def _kind(otype: str, class_code: str | None, vendor: str | None, subtype: str | None,
          osdevs: tuple[HwlocOsDevice, ...]) -> str:
    if otype == "Bridge" or class_code == "0x0604":
        return "bridge"
    if subtype == "NVSwitch" or (class_code == "0x0680" and vendor == "0x10de"):
        return "nvswitch"
    compute = any("coproc" in o.types for o in osdevs)
    if class_code is not None:
        if class_code[2:4] == "02" or class_code == "0x0c06":
            return "nic"
        if class_code == "0x0302":
            return "gpu"
        if class_code in ("0x0300", "0x0380", "0x1200"):
            if compute or vendor == "0x10de" or (vendor == "0x1002" and class_code != "0x0300"):
                return "gpu"
            return "other"
    if any("openfabrics" in o.types for o in osdevs):
        return "nic"
    if compute:
        return "gpu"
    return "other"


def parse(text: str) -> HwlocTopology:
    """Read hwloc XML (see the module docstring for the result schema)."""
    doc = read_xml(KIND, text, _TEXT_TAGS)
    root = doc.root
    if root.tag == "system":
        raise ParseError(KIND, root.line, doc.lines[root.line - 1],
                         "this is an NCCL topology XML (<system>), not hwloc; upload it as nccl_topo_xml")
    if root.tag != "topology":
        raise ParseError(KIND, root.line, doc.lines[root.line - 1],
                         f"expected the hwloc root element <topology>, found <{root.tag}>")
    version_raw = root.get("version")
    if version_raw is None:
        version, major = "1.x", 1
    else:
        version = version_raw.strip()
        try:
            major = int(version.split(".")[0])
        except ValueError:
            raise ParseError(KIND, root.line, doc.lines[root.line - 1],
                             f"unknown hwloc XML version {version_raw!r}") from None
    reader = _Reader(doc, major)
    warning = truncation_warning(doc)
    if warning:
        reader.warnings.append(warning)
    reader.warnings.extend(doc.notes)
    try:
        reader.read()
    except RecursionError:
        raise ParseError(KIND, 0, "", "the <object> elements are nested too deeply to be a real topology") from None
    pci = reader.pci_devices()
    distances = reader.distances()
    packages, numas = reader.packages_and_numas()
    return HwlocTopology(
        version=version,
        format_major=major,
        product=reader.product,
        architecture=reader.architecture,
        packages=tuple(packages),
        numa_nodes=tuple(numas),
        pci_devices=tuple(pci),
        host_os_devices=tuple(reader.host_osdevs),
        distances=tuple(distances),
        warnings=tuple(reader.warnings),
    )
