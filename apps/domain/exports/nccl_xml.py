"""NCCL topology XML of a snapshot: the file NCCL reads with ``NCCL_TOPO_FILE``.

For virtual machines and containers that hide the PCIe tree, ``nccl_xml(doc)`` writes the host
of a snapshot document in the structure of NCCL's own dumps (``NCCL_TOPO_DUMP_FILE``; NCCL
v2.30.7-1 ``src/graph/xml.cc`` and ``topo.cc``)::

    <system version="1">
      <cpu numaid="0" affinity="..." arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
        <pci busid="0000:16:00.0" class="0x060400" vendor="0x1000" device="0xc030" link_speed=... link_width=...>
          <pci busid="0000:18:00.0" class="0x030200" vendor="0x10de" device="0x2335" link_speed=... link_width=...>
            <gpu dev="0" sm="90" rank="0" gdr="1">
              <nvlink target="fffffff:ffff:ff" count="18" tclass="0x068000"/>
            </gpu>
          </pci>
          <pci busid="0000:19:00.0" class="0x020700" vendor="0x15b3" ...>
            <nic>
              <net name="mlx5_0" dev="0" speed="400000" port="1" gdr="1"/>
            </nic>
          </pci>
        </pci>
      </cpu>
    </system>

Contract
--------
* One ``<cpu>`` per CPU node of the graph (``numaid`` its NUMA node, ``-1`` when unknown, as
  NCCL writes in VMs). Under it, as NCCL's dump walks sysfs (xml.cc L748-792: it climbs two
  levels at a time, so root ports and switch downstream ports never appear), one ``<pci>`` per
  PCIe switch (its upstream port), and the GPUs and NICs; children ordered by bus id (xml.cc
  L855-877). Root ports, host bridges, NVMe drives, Ethernet functions without RDMA and switches
  with no GPU or NIC below are left out, as NCCL trims them (xml.cc ``ncclTopoTrimXml``).
* ``link_speed``/``link_width`` are the most the link and its port support, as NCCL's dump
  writes them (xml.cc L679-719: ``max_link_speed``/``max_link_width``), in NCCL's spelling
  (``16.0 GT/s PCIe``, topo.cc L545-556), the current ones when no maximum is known; a link
  that trained below its maximum is named in the header comment with its current speed.
* GPUs: ``<gpu dev= sm= rank= gdr=>`` (``dev`` the GPU index, ``rank`` the same index: NCCL
  overwrites it for each process, topo.cc L1806) with ``<nvlink target= count= tclass=>``
  (tclass ``0x068000`` NVSwitch, target its bus id or NCCL's own ``fffffff:ffff:ff`` for one not
  seen, xml.cc L976-987; ``0x03..`` a peer GPU), ``<xgmi>`` for AMD Infinity Fabric and ``<c2c
  bw= count=>`` for NVLink-C2C. When no source of the report shows NVLink
  (``graph.nvlink_reported`` false) the GPUs are written as bare ``<pci>``, as hand-written
  NCCL_TOPO_FILEs do: NCCL then reads ``<gpu>`` and its NVLinks from the machine (xml.cc
  L894-1000), and nothing here claims the GPUs have no NVLink.
* NICs: ``<nic><net name= dev= speed= port= gdr=>`` per HCA port, one ``<pci>`` per PCI
  function; a NIC the report names no HCA for is a bare ``<pci class="0x02..">`` that NCCL fills
  at run time (``ncclTopoFillNet``). Ports known not Active are left out (NCCL lists only Active
  ports) and a function whose ports are all down with them. NCCL's Socket nets (``eth0``) sit
  directly under the first ``<cpu>`` with ``port="0" guid="0x0"``.
* Values the report states are written. Values topoweb only assumed (a PCIe link not reported,
  the CPU class) are written as NCCL reads them and listed in the header comment (NCCL skips
  comments, xml.cc L121-159), with values derived from others (``sm`` from the GPU model: the
  snapshot keeps no compute capability, so a GPU of unknown model has none; PCI ids from names).
  What the snapshot does not keep and NCCL measures itself is left out, so that NCCL reads the
  machine (xml.cc/topo.cc fill only attributes that are absent: ``guid``, ``maxconn``,
  ``latency``, ``host_hash``, and ``gdr`` when the report does not say).
* GPUs and NICs without a PCI address or a place in the tree, and NIC names with characters no
  device name has (``shellsafe.SAFE_NAME``; NCCL's reader has no escapes), are left out and
  listed. Switches without a PCI address get NCCL's virtual bus ids ``ffff:ff:NN.F``.

Read back with :mod:`apps.domain.parsers.nccl_topo_xml`, the export gives the same NIC per GPU,
GPUDirect RDMA decision and GPU-pair P2P verdicts (mechanism and NCCL path type) as the
document. What the format cannot carry: nvidia-smi's NODE/PHB distinction (NCCL's XML has no
host bridges: both read back as PHB, NCCL's own PHB), port GUIDs (so read back, port states are
unknown rather than Active), PCI ids the document does not keep (GPU models outside
``devices.GPU_MODEL_BY_ID`` are lost), and GPU index order of bare GPUs (NCCL and topoweb take
PCI bus order).

Raises ExportError for a document with no GPU that has a PCI address (a bare ``topo -m``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from apps.domain import devices
from apps.domain.bandwidth import PCIE_TABLE, XGMI_PER_LINK, gpu_generation
from apps.domain.exports._common import ExportError, checked_doc, comment_text, natural_key
from apps.domain.shellsafe import is_safe_name

__all__ = ["nccl_xml", "NVSWITCH_TARGET", "PCIE_SPEEDS"]

# xml.cc L976-987: NCCL's own NVLink target for a remote device NVML cannot name (an NVSwitch in a VM)
NVSWITCH_TARGET = "fffffff:ffff:ff"
NVSWITCH_CLASS = "0x068000"  # xml.h L19 PCI_NVSWITCH_CLASS
BRIDGE_CLASS = "0x060400"  # topo.cc L536 PCI_BRIDGE_DEVICE_CLASS
# xml.cc L668-670 (written from NVML) = topo.cc L550-555 kvDictPciGen (read)
PCIE_SPEEDS = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe",
               5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe"}
# x86 CPU classes (topo.cc L704-757): arch, vendor string, and whether NCCL reads family/model
_CPU_STRINGS = {"intel": ("x86_64", "GenuineIntel"), "amd": ("x86_64", "AuthenticAMD"),
                "zhaoxin": ("x86_64", "CentaurHauls"), "arm": ("arm64", None), "power": ("ppc64", None)}
_SKL_MODEL = 0x55  # topo.cc L750: Skylake, NCCL's SKL_QPI_BW class (assumptions.ASSUMED_INTER_SOCKET)
_AFFINITY_RE = re.compile(r"^[0-9a-fA-F]+(,[0-9a-fA-F]+)*$")  # NCCL's cpumask text (ncclStrToCpuset)
_MODEL_ID = {name: pid for pid, name in devices.GPU_MODEL_BY_ID.items()}
_AMD_RE = re.compile(r"\bAMD\b|Instinct|\bMI\d{2,3}", re.IGNORECASE)
_VGA_RE = re.compile(r"GeForce|TITAN|\bRTX\b|Quadro", re.IGNORECASE)


class _Element:
    """One XML element: tag, ordered attributes, children."""

    __slots__ = ("tag", "attrs", "children")

    def __init__(self, tag: str, attrs: list[tuple[str, Any]] | None = None) -> None:
        self.tag = tag
        self.attrs = [(k, v) for k, v in (attrs or []) if v is not None]
        self.children: list[_Element] = []

    def busid(self) -> str:
        return next((str(v) for k, v in self.attrs if k == "busid"), "")


def nccl_xml(doc: Mapping[str, Any]) -> str:
    """The NCCL topology XML of one host's snapshot document (see the module docstring).

    Parameters
    ----------
    doc : mapping
        A schema-1 snapshot document (``HostAnalysis.to_dict()``).

    Returns
    -------
    str
        The XML text: a header comment, then ``<system version="1">`` (``"2"`` for RCCL hosts
        with xGMI links, as RCCL's files have it).

    Raises
    ------
    ExportError
        ``doc`` is not a snapshot document, or no GPU of it has a PCI address.

    Examples
    --------
    >>> from apps.domain.analysis import analyze_host
    >>> xml = nccl_xml(analyze_host({"nccl_topo_xml": '<system version="1"><cpu numaid="0" arch="x86_64" '
    ...     'vendor="AuthenticAMD"><pci busid="0000:01:00.0" class="0x030200" vendor="0x10de" device="0x20b2" '
    ...     'link_speed="16.0 GT/s PCIe" link_width="16"><gpu dev="0" sm="80" rank="0" gdr="1"/></pci></cpu>'
    ...     '</system>'}, "n1").doc)
    >>> print(xml.split("-->", 1)[1].strip().replace(' link_speed="16.0 GT/s PCIe" link_width="16"', " ..."))
    <system version="1">
      <cpu numaid="0" arch="x86_64" vendor="AuthenticAMD">
        <pci busid="0000:01:00.0" class="0x030200" vendor="0x10de" device="0x20b2" ...>
          <gpu dev="0" sm="80" rank="0" gdr="1"/>
        </pci>
      </cpu>
    </system>
    """
    return _Writer(checked_doc(doc)).write()


class _Writer:
    """Builds the element tree of one document and the notes of its header comment."""

    def __init__(self, doc: dict) -> None:
        self.doc = doc
        self.graph = doc["graph"]
        self.nodes = {n["id"]: n for n in self.graph["nodes"]}
        self.up: dict[str, dict] = {}  # node -> the edge to its parent (its upstream link)
        self.nvlinks: dict[str, list[tuple[str, dict]]] = {}
        for e in self.graph["edges"]:
            a, b = e["source"], e["target"]
            if e["kind"] == "nvlink":
                self.nvlinks.setdefault(a, []).append((b, e))
                self.nvlinks.setdefault(b, []).append((a, e))
            elif self._parent(a) == b:
                self.up[a] = e
            elif self._parent(b) == a:
                self.up[b] = e
        self.assumed: list[str] = []
        self.derived: list[str] = []
        self.below_max: list[str] = []
        self.left_out: list[str] = []
        self.virtual: dict[str, str] = {}
        self.link_notes: dict[tuple[bool, str], list[str]] = {}  # (assumed, note) -> GPUs with such NVLinks
        self.net_dev = 0  # NCCL's net device index, in name order (NCCL renumbers at run time, topo.cc L1643)

    # -- the tree -------------------------------------------------------------------------
    def _parent(self, n: str) -> str | None:
        node = self.nodes.get(n)
        return node.get("parent") if node else None

    def _chain(self, n: str) -> list[str]:
        chain, seen = [n], {n}
        cur = self._parent(n)
        while cur is not None and cur in self.nodes and cur not in seen:
            chain.append(cur)
            seen.add(cur)
            cur = self._parent(cur)
        return chain

    def _cpu_of(self, n: str) -> str | None:
        top = self._chain(n)[-1]
        return top if self.nodes[top]["kind"] == "cpu" else None

    def _xml_parent(self, n: str) -> str:
        """The nearest switch above ``n``, else its CPU (root ports and host bridges are not NCCL's)."""
        for m in self._chain(n)[1:]:
            if self.nodes[m]["kind"] == "switch":
                return m
        return self._cpu_of(n)

    def _placed(self, node: dict, what: str) -> bool:
        named = bool((node.get("attrs") or {}).get("device"))  # NCCL finds a net by name (xml.cc L1100)
        if not node.get("bdf") and not (what == "NIC" and named):
            self.left_out.append(f"{what} {node['id']}: no PCI address in the report")
            return False
        if self._cpu_of(node["id"]) is None:
            self.left_out.append(f"{what} {node['id']}: no source places it in the PCIe tree")
            return False
        return True

    # -- writing --------------------------------------------------------------------------
    def write(self) -> str:
        gpus = [n for n in self.graph["nodes"] if n["kind"] == "gpu"]
        if not gpus:
            raise ExportError(f"{self.doc['hostname']}: the snapshot has no GPU, so there is no NCCL topology to write")
        devices_ = [(n["id"], self._gpu(n)) for n in gpus if self._placed(n, "GPU")]
        if not devices_:
            raise ExportError(
                f"{self.doc['hostname']}: no GPU has a PCI address (nvidia-smi topo -m alone does not give them), "
                "and NCCL finds its GPUs in the file by bus id; send nvidia-smi --query-gpu=index,pci.bus_id,name "
                "(or lspci -vvv, or the agent's sysfs listing) to export this host")
        devices_ += self._nics()
        children: dict[str, list[_Element]] = {}
        for node_id, element in devices_:
            self._attach(node_id, element, children)
        system = _Element("system", [("version", 2 if self._xgmi() else 1)])
        cpus = [n for n in self.graph["nodes"] if n["kind"] == "cpu"]
        for i, cpu in enumerate(cpus):
            element = self._cpu(cpu)
            element.children = sorted(children.get(cpu["id"], []), key=_bus_order)
            if i == 0:
                element.children += self._socket_nets()
            system.children.append(element)
        return self._header() + "".join(_render(system, 0))

    def _attach(self, node_id: str, element: _Element, children: dict[str, list[_Element]]) -> None:
        """Hang ``element`` under its switch (creating the switch elements up the chain) or CPU."""
        parent = self._xml_parent(node_id)
        while parent is not None and self.nodes[parent]["kind"] == "switch":
            first = parent not in children
            children.setdefault(parent, []).append(element)
            if not first:
                return
            element = self._switch(self.nodes[parent], children[parent])
            parent = self._xml_parent(parent)
        children.setdefault(parent, []).append(element)

    def _switch(self, node: dict, kids: list[_Element]) -> _Element:
        attrs = node.get("attrs") or {}
        busid = attrs.get("upstream_bdf") or node.get("bdf") or self._virtual_busid(node["id"])
        element = _Element("pci", [("busid", busid), ("class", BRIDGE_CLASS), ("vendor", _hex4(attrs.get("vendor_id"))),
                                   ("device", _hex4(attrs.get("device_id")))] + self._link(node["id"]))
        element.children = kids  # the list keeps growing as more devices are attached; sorted on render
        return element

    def _virtual_busid(self, node_id: str, what: str = "switch") -> str:
        """NCCL_TOPO_FILE's virtual bus ids (``ffff:ff:01.0``) for a switch, or a named NIC (NCCL
        finds its nets by name, xml.cc L1100), that the report gives no PCI address."""
        i = len(self.virtual)
        busid = f"ffff:ff:{i // 8:02x}.{i % 8}"
        self.virtual[node_id] = busid
        self.derived.append(f"{what} {node_id}: no PCI address in the report, written as virtual {busid}")
        return busid

    def _cpu(self, node: dict) -> _Element:
        numa = node.get("numa")
        affinity = (node.get("attrs") or {}).get("affinity")
        vendor, model = self.graph.get("cpu_vendor"), self.graph.get("cpu_model")
        if not (affinity and _AFFINITY_RE.match(str(affinity))):
            affinity = None  # not NCCL's cpumask text: NCCL reads the NUMA node's cpumap itself
        attrs: list[tuple[str, Any]] = [("numaid", -1 if numa is None else numa), ("affinity", affinity)]
        if vendor is None:
            vendor, model = "intel", _SKL_MODEL
            self._note_once(self.assumed, "<cpu> arch/vendor/familyid/modelid: the CPU is not reported; topoweb "
                                          "assumed NCCL's Skylake class (SKL_QPI_BW, 10 GB/s between sockets): "
                                          "x86_64 GenuineIntel family 6 model 85")
        elif vendor == "intel" and model is None:
            model = _SKL_MODEL
            self._note_once(self.assumed, "<cpu> modelid: the Intel model is not reported; topoweb assumed NCCL's "
                                          "Skylake class (model 85, SKL_QPI_BW)")
        arch, vendor_string = _CPU_STRINGS.get(vendor, (None, None))
        attrs += [("arch", arch), ("vendor", vendor_string)]
        if vendor == "intel":  # NCCL reads family/model for Intel (and Zhaoxin) only, topo.cc L744-757
            attrs += [("familyid", 6), ("modelid", model)]
        return _Element("cpu", attrs)

    # -- links ----------------------------------------------------------------------------
    def _link(self, node_id: str) -> list[tuple[str, Any]]:
        """``link_speed``/``link_width`` of the link above ``node_id`` (empty when nothing says)."""
        e = self.up.get(node_id)
        if e is None or e["kind"] != "pcie":
            return []
        gen, width = e.get("max_gen") or e.get("gen"), e.get("max_width") or e.get("width")
        if (e.get("gen"), e.get("width")) != (gen, width) and e.get("gen") and e.get("width"):
            self.below_max.append(f"{node_id}: Gen{e['gen']} x{e['width']} (written: its maximum, Gen{gen} x{width})")
        if gen is None and width is None and e.get("spec_gbs"):
            gen, width = _decode_gbs(float(e["spec_gbs"]), self._preferred_gen(node_id))
            if gen is not None:
                words = (f"{node_id}: Gen{gen} x{width} ({e['spec_gbs']:g} GB/s)")
                if e.get("assumed"):
                    self.assumed.append(f"link_speed/link_width of {words}: the link is not reported")
                else:
                    self.derived.append(f"link_speed/link_width of {words}: the report gives only the bandwidth "
                                        "(hwloc); any generation and width of that bandwidth read the same to NCCL")
        return [("link_speed", PCIE_SPEEDS.get(gen) if gen else None), ("link_width", width)]

    def _preferred_gen(self, node_id: str) -> int | None:
        node = self.nodes[node_id]
        model = (node.get("attrs") or {}).get("model") if node["kind"] == "gpu" else None
        return gpu_generation(model).pcie_gen if model else None

    # -- GPUs -----------------------------------------------------------------------------
    def _gpu(self, node: dict) -> _Element:
        attrs = node.get("attrs") or {}
        model = attrs.get("model") or self.doc["summary"].get("gpu_model")
        amd = bool(model and _AMD_RE.search(model))
        cls = "0x038000" if amd else ("0x030000" if model and _VGA_RE.search(model) else "0x030200")
        vendor = (0x1002 if amd else devices.NVIDIA) if model else None
        device = _MODEL_ID.get(model)
        if model and (vendor is not None or device is not None):
            self._note_once(self.derived, f"GPU class/vendor{'/device' if device else ''} ids: from the model "
                                          f"({model})")
        element = _Element("pci", [("busid", node["bdf"]), ("class", cls), ("vendor", _hex4(vendor)),
                                   ("device", _hex4(device))] + self._link(node["id"]))
        if self.graph.get("nvlink_reported") is False:
            self._note_once(self.derived, "GPUs are bare <pci> elements: no source of the report shows NVLink, so "
                                          "NCCL reads <gpu> and its NVLinks from the machine")
            return element
        index = attrs.get("index")
        gpu = _Element("gpu", [("dev", index), ("sm", self._sm(model, amd)), ("rank", index),
                               ("gdr", self._gdr(attrs))])
        gpu.children = self._gpu_links(node) + self._c2c(node)
        element.children.append(gpu)
        return element

    def _sm(self, model: str | None, amd: bool) -> int | None:
        if amd:
            return None  # RCCL's sm/gcn/arch come from the device at run time
        if model:
            sm = gpu_generation(model).sm
            if sm:
                self._note_once(self.derived, f"<gpu sm>: from the GPU model ({model} -> {sm})")
            return sm
        assumed = self.graph.get("assumed_gpu_model") or self.doc["summary"].get("gpu_model_assumed")
        sm = gpu_generation(assumed).sm if assumed else None
        if sm:
            self._note_once(self.assumed, f"<gpu sm>: the GPU model is not reported; topoweb assumed {assumed} "
                                          f"(sm {sm})")
        return sm

    def _gdr(self, attrs: Mapping[str, Any]) -> int | None:
        """``gdr`` of a GPU or net: as reported, 0 without GDR kernel support, else left to NCCL."""
        if attrs.get("gdr") is not None:
            return 1 if attrs["gdr"] else 0
        if self.graph.get("gdr_module") is False:
            return 0  # no nvidia_peermem / DMA-BUF: NCCL's own check gives gdr 0 (topo.cc L1807)
        return None

    def _gpu_links(self, node: dict) -> list[_Element]:
        out = []
        for peer, e in sorted(self.nvlinks.get(node["id"], ()), key=lambda pe: natural_key(pe[0])):
            other = self.nodes.get(peer) or {}
            xgmi = e.get("fabric") == "xgmi"
            count = e.get("links") or (self._xgmi_count(e) if xgmi else None) or 1
            if other.get("kind") == "nvswitch":
                bdfs = (other.get("attrs") or {}).get("bdfs") or []
                target, tclass = (bdfs[0] if bdfs else NVSWITCH_TARGET), NVSWITCH_CLASS
                if not bdfs:
                    self._note_once(self.derived, f"<nvlink target=\"{NVSWITCH_TARGET}\">: the snapshot keeps no "
                                                  "NVSwitch bus id; NCCL's own target for an NVSwitch it cannot name "
                                                  "(tclass 0x068000 is what NCCL reads)")
            elif other.get("kind") == "gpu" and other.get("bdf"):
                amd = xgmi or bool(_AMD_RE.search(str((other.get("attrs") or {}).get("model") or "")))
                target, tclass = other["bdf"], ("0x038000" if amd else "0x030200")
            else:
                continue
            out.append(_Element("xgmi" if xgmi else "nvlink",
                                [("target", target), ("count", count), ("tclass", tclass)]))
            if e.get("assumed") or e.get("inferred"):
                self.link_notes.setdefault((bool(e.get("assumed")), e.get("note") or "not reported"), []).append(
                    node["id"])
        return out

    def _xgmi_count(self, e: Mapping[str, Any]) -> int | None:
        """xGMI links from a pair's bandwidth (hwloc's XGMIBandwidth gives GB/s, not links)."""
        gbs = e.get("spec_gbs")
        if not gbs:
            return None
        per_link = next((v for k, v in XGMI_PER_LINK.items() if k and k in str(self.doc["summary"].get("gpu_model"))),
                        XGMI_PER_LINK[None])
        count = max(1, round(float(gbs) / per_link))
        self.derived.append(f"<xgmi count={count}> of {e['source']}-{e['target']}: from {gbs:g} GB/s")
        return count

    def _c2c(self, node: dict) -> list[_Element]:
        if not (node.get("attrs") or {}).get("c2c"):
            return []
        e = self.up.get(node["id"])
        links = (e or {}).get("links")
        gbs = (e or {}).get("spec_gbs")
        if not (e and e["kind"] == "c2c" and links and gbs):
            self.left_out.append(f"<c2c> of {node['id']}: its NVLink-C2C bandwidth is not reported (NCCL reads it "
                                 "from NVML)")
            return []
        return [_Element("c2c", [("bw", round(float(gbs) * 1000 / links)), ("count", links)])]  # MB/s per link

    def _xgmi(self) -> bool:
        return any(e.get("fabric") == "xgmi" for e in self.graph["edges"] if e["kind"] == "nvlink")

    # -- NICs -----------------------------------------------------------------------------
    def _nics(self) -> list[tuple[str, _Element]]:
        """One element per NIC PCI function, its usable ports as ``<net>`` elements."""
        by_function: dict[str, list[dict]] = {}
        for n in self.graph["nodes"]:
            if n["kind"] == "nic" and self._placed(n, "NIC"):
                by_function.setdefault(n["bdf"] or "device:" + n["attrs"]["device"], []).append(n)
        out = []
        for key, ports in sorted(by_function.items(), key=lambda kv: natural_key(kv[1][0]["id"])):
            ports.sort(key=lambda p: ((p.get("attrs") or {}).get("port") or 1, natural_key(p["id"])))
            nets = []
            for p in ports:
                net = self._net(p, self.net_dev)
                if net is not None:
                    nets.append(net)
                    self.net_dev += 1
            named = [p for p in ports if (p.get("attrs") or {}).get("device")]
            if named and not nets:
                continue  # every port down (or unnamable): NCCL has no net on it
            bdf = ports[0]["bdf"] or self._virtual_busid(ports[0]["id"], "NIC")
            element = _Element("pci", [("busid", bdf), ("class", _nic_class(ports[0])),
                                       ("vendor", _hex4(self._nic_vendor(ports[0])))] + self._link(ports[0]["id"]))
            if nets:
                nic = _Element("nic")
                nic.children = nets
                element.children.append(nic)
            out.append((ports[0]["id"], element))
        return out

    def _net(self, port: dict, dev: int) -> _Element | None:
        a = port.get("attrs") or {}
        name = a.get("device")
        if not name:
            return None
        if not is_safe_name(name):
            self.left_out.append(f"NIC {comment_text(repr(name))}: its name has characters no device name has")
            return None
        if a.get("active") is False:
            state = a.get("state") or "not Active"
            self.left_out.append(f"NIC {port['id']}: port {state} (NCCL lists Active ports only)")
            return None
        rate = a.get("rate_gbps")
        speed = int(round(float(rate) * 1000)) if rate and math.isfinite(float(rate)) else None  # Mb/s, topo.cc L416
        gdr = self._gdr(a)
        return _Element("net", [("name", name), ("dev", dev), ("speed", speed), ("port", a.get("port")), ("gdr", gdr)])

    def _nic_vendor(self, port: dict) -> int | None:
        a = port.get("attrs") or {}
        name = str(a.get("device") or "")
        if re.match(r"mlx[45]_", name):
            vendor = devices.MELLANOX
        elif a.get("transport") == "ofi":
            vendor = devices.HPE_CRAY if re.match(r"(hsn|hsi|cxi)\d", name) else devices.AMAZON
        else:
            return None
        self._note_once(self.derived, "NIC vendor ids: from the HCA name (mlx5_*) or transport (EFA, Slingshot)")
        return vendor

    def _socket_nets(self) -> list[_Element]:
        names = [n for n in self.graph.get("socket_nets") or [] if is_safe_name(n)]
        if not names:
            return []
        nic = _Element("nic")
        nic.children = [_Element("net", [("name", n), ("dev", self.net_dev + i), ("port", 0), ("guid", "0x0")])
                        for i, n in enumerate(names)]
        return [nic]

    # -- the header -----------------------------------------------------------------------
    def _note_once(self, notes: list[str], text: str) -> None:
        if text not in notes:
            notes.append(text)

    def _header(self) -> str:
        for (assumed, note), gpus in self.link_notes.items():
            (self.assumed if assumed else self.derived).append(
                f"<nvlink count> of {', '.join(sorted(set(gpus), key=natural_key))}: {note}")
        lines = [f"NCCL topology of {self.doc['hostname']}, written by topoweb from its snapshot "
                 f"(sources: {', '.join(self.doc['sources']) or 'none'}). Use it with NCCL_TOPO_FILE=<this file>.",
                 "NCCL uses an attribute given here instead of reading the machine: delete one to let NCCL read it."]
        sections = (("Assumed by topoweb (the report does not say):", self.assumed),
                    ("Derived from what the report says:", self.derived),
                    ("Links running below their maximum when the report was taken:", self.below_max),
                    ("Not exported:", self.left_out))
        lines = [comment_text(line) for line in lines]
        for title, notes in sections:
            if notes:
                lines.append(title)
                lines += ["  " + comment_text(n) for n in notes]
        lines.append("Left for NCCL to read at run time: net guid, maxconn and latency, cpu host_hash, and gdr where "
                     "the report does not say; NCCL sets rank for each process.")
        return "<!-- " + "\n     ".join(lines) + "\n-->\n"


# -- small pure helpers ------------------------------------------------------------------------

def _render(e: _Element, indent: int) -> list[str]:
    """NCCL's dump layout (xml.cc L275-293): two spaces per level, ``<tag k="v"/>`` when empty."""
    pad = " " * indent
    attrs = "".join(f' {k}="{v}"' for k, v in e.attrs)
    if not e.children:
        return [f"{pad}<{e.tag}{attrs}/>\n"]
    kids = sorted(e.children, key=_bus_order) if e.tag == "pci" else e.children
    out = [f"{pad}<{e.tag}{attrs}>\n"]
    for child in kids:
        out += _render(child, indent + 2)
    return out + [f"{pad}</{e.tag}>\n"]


def _bus_order(e: _Element) -> tuple:
    """Children in bus id order (xml.cc L855-877); ``<gpu>``/``<nic>`` first, as NCCL keeps them."""
    return (1, e.busid()) if e.tag == "pci" else (0, "")


def _hex4(value: Any) -> str | None:
    return f"0x{int(value):04x}" if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _nic_class(port: dict) -> str:
    """``0x020700`` (InfiniBand) unless the port's link layer is Ethernet (``0x020000``); NCCL reads
    any ``0x02`` class as a NIC (topo.cc L538-544)."""
    return "0x020000" if (port.get("attrs") or {}).get("link_layer") == "Ethernet" else "0x020700"


def _decode_gbs(gbs: float, preferred_gen: int | None) -> tuple[int | None, int | None]:
    """A PCIe generation and width with bandwidth ``gbs`` (lane rate x width): the preferred
    generation when one fits, else the widest link that fits.

    >>> _decode_gbs(31.5, None), _decode_gbs(15.753846, 4), _decode_gbs(7.0, None)
    ((4, 16), (4, 8), (None, None))
    """
    fits = [(gen, width) for gen, (_gts, lane, _nccl) in PCIE_TABLE.items() for width in (16, 8, 4, 2, 1)
            if abs(lane * width - gbs) <= 0.01 * gbs]
    if not fits:
        return None, None
    preferred = [f for f in fits if f[0] == preferred_gen]
    return (preferred or sorted(fits, key=lambda f: (-f[1], f[0])))[0]
