"""The exact-tree stage: the PCIe hierarchy a PCI listing states.

Sources: ``sysfs_pci``, ``lspci -vvv`` / ``-tv``, NCCL's or hwloc's topology XML (merged per BDF in
``HostFacts.pci``). Only functions that lead to a GPU, NIC or NVMe device are kept. A bridge is a
root port, a switch's upstream port or one of its downstream ports (the port type when the
listing says it, else alternating below a root port); a switch is ONE node named after its
upstream port. Root complexes come from the sysfs/lspci root bus, NCCL's ``<cpu numaid>`` or one
per top-level XML element, each under the cpu node of the NUMA node its functions report (else
the nearest root bus's, by bus order).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable

from apps.domain import devices
from apps.domain.facts import GpuFact, NicFact, PciDeviceFact
from apps.domain.hostgraph.draft import Draft, add_edge, add_node

__all__ = ["add_exact_tree", "join_nics_by_bus_order"]

# Broadcom PEX Gen4/Gen5 switches that NCCL flattens (getBcmGen, topo.cc L195-260 [S3]).
BCM_SWITCH_IDS = {(0x1000, 0xC010): 4, (0x1000, 0xC030): 5}
_XML_SOURCES = ("nccl_topo_xml", "hwloc_xml")


class PciTree:
    """The PCI listing as a tree: each function's parent, chain to the root, bridge role, graph
    node and root complex."""

    def __init__(self, devs: dict[str, PciDeviceFact]) -> None:
        self.devs = devs
        self._role: dict[str, str] = {}

    def parent(self, bdf: str) -> str | None:
        d = self.devs[bdf]
        p = d.parent_bdf or (d.ancestry[-1] if d.ancestry else None)
        return p if p in self.devs else None

    def chain(self, bdf: str) -> list[str]:
        """``bdf`` and the functions above it, up to the top of the listing."""
        chain = [bdf]
        while (p := self.parent(chain[-1])) is not None and p not in chain:
            chain.append(p)
        return chain

    def kept(self, wanted: Callable[[str], bool]) -> set[str]:
        """The ``wanted`` functions and every bridge above them."""
        keep: set[str] = set()
        for bdf in self.devs:
            if wanted(bdf):
                cur: str | None = bdf
                while cur is not None and cur not in keep:
                    keep.add(cur)
                    cur = self.parent(cur)
        return keep

    def role(self, bdf: str) -> str:
        """The function's kind, a bridge's role resolved: explicit port type, else alternating
        below a root port (NCCL's ``<pci>`` bridges are switches, virtual ffff:ff:xx.0 ones too)."""
        if bdf in self._role:
            return self._role[bdf]
        d = self.devs[bdf]
        p = self.parent(bdf)
        r = d.kind
        if r == "bridge":
            if p is None and d.source.startswith("nccl_topo_xml"):
                r = "upstream_port"
            elif p is None:
                r = "root_port"
            else:
                r = "downstream_port" if self.role(p) == "upstream_port" else "upstream_port"
        self._role[bdf] = r
        return r

    def node_id(self, bdf: str) -> str | None:
        """The graph node of a bridge: its own for root and upstream ports, the switch (its upstream
        port) for a downstream port; None for endpoints."""
        r = self.role(bdf)
        if r in ("root_port", "upstream_port"):
            return f"pci:{bdf}"
        if r == "downstream_port":
            p = self.parent(bdf)
            return f"pci:{p}" if p and self.role(p) == "upstream_port" else f"pci:{bdf}"
        return None

    def root_complex(self, bdf: str) -> str:
        top = self.devs[self.chain(bdf)[-1]]
        if top.root:
            return f"rc:{top.root}"
        if top.source.startswith("nccl_topo_xml") and top.numa is not None:
            return f"rc:numa{top.numa}"  # NCCL XML: one host bridge per <cpu numaid> (NCCL's CPU node)
        if top.source.startswith(_XML_SOURCES):
            return f"rc:{top.bdf}"  # XML: bus ids may be virtual (Azure ffff:ff:xx.0); one per element
        return f"rc:{top.bdf[:7]}"  # lspci: a device with no parent bridge sits on the root bus


def add_exact_tree(d: Draft) -> None:
    """Add the root complexes, root ports, switches and devices of the PCI listing; GPUs and NICs
    it does not show are left unplaced."""
    f, G = d.facts, d.G
    gpu_by_bdf = {g.bdf: g for g in f.gpus if g.bdf}
    nics_by_bdf = join_nics_by_bus_order(d)
    tree = PciTree(f.pci_by_bdf)
    keep = tree.kept(lambda bdf: tree.devs[bdf].kind in ("gpu", "nic", "nvme") or bdf in gpu_by_bdf
                     or bdf in nics_by_bdf)
    node_of = {bdf: nid for bdf in sorted(keep) if (nid := tree.node_id(bdf)) is not None}
    rc_of = _add_root_complexes(d, tree, keep)
    for bdf in sorted(keep, key=lambda b: (len(tree.chain(b)), b)):  # parents first
        dev = tree.devs[bdf]
        p = tree.parent(bdf)
        parent_node = node_of.get(p) if p else rc_of[bdf]
        numa = dev.numa if dev.numa is not None else G.nodes[rc_of[bdf]]["numa"]
        if tree.role(bdf) in ("root_port", "upstream_port", "downstream_port"):
            _add_bridge(d, tree, bdf, node_of[bdf], parent_node, numa)
        else:
            _add_endpoint(d, dev, tree.devs.get(p) if p else None, parent_node, numa, gpu_by_bdf, nics_by_bdf)
    d.place_leftovers()


def join_nics_by_bus_order(d: Draft) -> dict[str, list[NicFact]]:
    """NIC ports by PCI function: their own address, else, for ``mlx5_N`` without one, by bus
    order (mlx5_core probes in bus order, so mlx5_N follows BDF order), with a warning."""
    f = d.facts
    nics_by_bdf: dict[str, list[NicFact]] = defaultdict(list)
    for n in f.nics:
        if n.bdf:
            nics_by_bdf[n.bdf].append(n)
    named = [n for n in f.nics if not n.bdf and n.device and re.fullmatch(r"mlx5_\d+", n.device)
             and n.port in (None, 1)]
    if not named:
        return nics_by_bdf
    funcs = sorted(p.bdf for p in f.pci if p.kind == "nic" and p.vendor_id == devices.MELLANOX
                   and p.bdf not in nics_by_bdf and (p.class_code or 0x0200) >> 8 == 0x02)
    if len(funcs) != len(named):
        if funcs:
            d.warnings.append(f"{len(named)} HCAs without a PCI address and {len(funcs)} Mellanox PCI functions: "
                              "HCAs placed from topo -m only")
        return nics_by_bdf
    named.sort(key=lambda n: int(n.device.split("_")[1]))
    for n, bdf in zip(named, funcs):
        nics_by_bdf[bdf].append(_with_bdf(n, bdf))
    d.warnings.append("HCA names joined to PCI addresses by bus order (mlx5_N numbering follows probe order); "
                      "collect /sys/class/infiniband/*/device to make the join exact")
    return nics_by_bdf


def _add_root_complexes(d: Draft, tree: PciTree, keep: set[str]) -> dict[str, str]:
    """One root complex node per root bus (or XML element), under its NUMA node's cpu; returns
    {kept function: its root complex}."""
    G, devs = d.G, tree.devs
    rc_of: dict[str, str] = {}
    rc_numas: dict[str, Counter] = defaultdict(Counter)
    for bdf, dev in devs.items():  # NUMA per root complex from every function below it (kept or not)
        if bdf in keep or dev.numa is not None:
            rc = tree.root_complex(bdf)
            if bdf in keep:
                rc_of[bdf] = rc
            if dev.numa is not None:
                rc_numas[rc][dev.numa] += 1
    rcs = sorted(set(rc_of.values()))
    numa_of_rc = {rc: rc_numas[rc].most_common(1)[0][0] if rc_numas[rc] else None for rc in rcs}
    guessed = _numa_by_bus_order(numa_of_rc)
    for rc in rcs:
        numa = numa_of_rc[rc] if numa_of_rc[rc] is not None else guessed.get(rc)
        cpu = d.cpu(numa) if numa is not None else d.unknown_cpu()
        inferred_rc = all(devs[b].source.startswith(_XML_SOURCES) for b in keep if rc_of[b] == rc)
        notes = []
        if inferred_rc and rc.startswith("rc:numa"):
            notes.append("one per NCCL <cpu> element (XML has no host bridges)")
        elif inferred_rc:
            notes.append("one per top-level PCI element (XML has no host bridges)")
        if numa_of_rc[rc] is None and numa is not None:
            notes.append(f"NUMA {numa} assumed from bus order (sockets own contiguous bus ranges)")
        add_node(G, rc, "root_complex", f"host bridge of NUMA {numa}" if rc.startswith("rc:numa") else
                 f"host bridge {rc[3:]}", numa=numa, parent=cpu,
                 inferred=bool(inferred_rc), note="; ".join(notes) or None)
        add_edge(G, rc, cpu, "cpu_link", inferred=bool(inferred_rc) or numa_of_rc[rc] is None)
    return rc_of


def _numa_by_bus_order(numa_of_rc: dict[str, int | None]) -> dict[str, int]:
    """Root complexes without NUMA: take the NUMA of the nearest lower known root bus (same domain)."""
    known = sorted((rc, n) for rc, n in numa_of_rc.items() if n is not None)
    if not known:
        return {}
    out = {}
    for rc, n in numa_of_rc.items():
        if n is not None:
            continue
        same = [(k, kn) for k, kn in known if k[:7] == rc[:7]]
        lower = [kn for k, kn in same if k < rc]
        higher = [kn for k, kn in same if k > rc]
        if lower:
            out[rc] = lower[-1]
        elif higher:
            out[rc] = higher[0]
    return out


def _add_bridge(d: Draft, tree: PciTree, bdf: str, nid: str, parent_node: str | None, numa: int | None) -> None:
    G, dev = d.G, tree.devs[bdf]
    r = tree.role(bdf)
    if r == "downstream_port":
        if nid == f"pci:{bdf}":  # a downstream port whose upstream port is unknown
            add_node(G, nid, "switch", dev.name or f"switch {bdf}", bdf=bdf, numa=numa, parent=parent_node,
                     upstream_bdf=None, port_bdfs=[bdf])
            add_edge(G, nid, parent_node, "pcie", note="upstream port not in the listing")
        else:
            G.nodes[nid]["port_bdfs"].append(bdf)
    elif r == "root_port":
        add_node(G, nid, "root_port", f"root port {bdf}", bdf=bdf, numa=numa, parent=parent_node,
                 port_type=dev.port_type, acs_ctl=list(dev.acs_ctl))
        add_edge(G, nid, parent_node, "pcie", note="inside the root complex")
    else:  # upstream port: the switch
        p = tree.parent(bdf)
        add_node(G, nid, "switch", dev.name or f"PCIe switch {bdf}", bdf=bdf, numa=numa,
                 parent=parent_node, upstream_bdf=bdf, port_bdfs=[], vendor_id=dev.vendor_id,
                 device_id=dev.device_id, bcm_gen=BCM_SWITCH_IDS.get((dev.vendor_id, dev.device_id)))
        _link(d, nid, parent_node, dev, tree.devs.get(p) if p else None, is_gpu=False)


def _add_endpoint(d: Draft, dev: PciDeviceFact, pdev: PciDeviceFact | None, parent_node: str | None,
                  numa: int | None, gpu_by_bdf: dict[str, GpuFact], nics_by_bdf: dict[str, list[NicFact]]) -> None:
    G, bdf = d.G, dev.bdf
    if bdf in gpu_by_bdf or dev.kind == "gpu":
        g = gpu_by_bdf.get(bdf)
        if g is None:
            d.warnings.append(f"NVIDIA GPU {bdf} in the PCI listing is not in nvidia-smi")
            add_node(G, f"pci:{bdf}", "gpu", dev.name or bdf, bdf=bdf, numa=numa, parent=parent_node)
            _link(d, f"pci:{bdf}", parent_node, dev, pdev, is_gpu=True)
            return
        d.add_gpu(g, parent_node, numa, inferred=False)
        _link(d, g.name, parent_node, dev, pdev, is_gpu=True, gpu=g)
    elif bdf in nics_by_bdf:
        for n in nics_by_bdf[bdf]:
            d.add_nic(n, n.name, parent_node, numa, inferred=False)
            _link(d, n.name, parent_node, dev, pdev, is_gpu=False)
    elif dev.kind == "nic" and _rdma_unlisted(d, dev):
        # no RDMA listing at all (lspci/XML only): RDMA hardware is taken as an RDMA NIC whose
        # state is unknown
        nid = f"pci:{bdf}"
        plugin = devices.net_plugin(dev.vendor_id, dev.device_id, dev.name)
        add_node(G, nid, "nic", dev.name or bdf, bdf=bdf, numa=numa, parent=parent_node, port=None,
                 state=None, phys_state=None, rate_gbps=None, link_layer=None, active=None, device=None,
                 nic_label=None, netdevs=[], gdr=None, rdma="assumed", transport="ofi" if plugin else "verbs",
                 note=(f"{plugin} NIC, which NCCL reaches through its libfabric plugin (aws-ofi-nccl); "
                       "state unknown" if plugin else
                       "RDMA hardware (ConnectX/InfiniBand class) with no RDMA listing in the report: "
                       "taken as an RDMA NIC, state unknown; send ibstat to know"))
        _link(d, nid, parent_node, dev, pdev, is_gpu=False)
    elif dev.kind == "nic":
        # a network function no RDMA source names: NCCL's IB/RoCE transport cannot use it
        nid = f"pci:{bdf}"
        rdma_hw = _rdma_hardware(dev)
        add_node(G, nid, "other", "RDMA NIC not in the RDMA listing" if rdma_hw else "Ethernet (no RDMA)",
                 bdf=bdf, numa=numa, parent=parent_node, network=True, device_name=dev.name,
                 note=("RDMA-capable function that no RDMA listing (ibstat, sysfs, topo -m NIC columns) "
                       "names: its RDMA device is absent, NCCL cannot use it" if rdma_hw else
                       "network function without an RDMA device: NCCL's IB/RoCE transport never uses it "
                       "(only its socket fallback may)"))
        _link(d, nid, parent_node, dev, pdev, is_gpu=False)
    elif dev.kind in ("nvme", "other"):
        nid = f"pci:{bdf}"
        add_node(G, nid, dev.kind, dev.name or bdf, bdf=bdf, numa=numa, parent=parent_node)
        _link(d, nid, parent_node, dev, pdev, is_gpu=False)


def _link(d: Draft, child: str, parent: str | None, dev: PciDeviceFact, pdev: PciDeviceFact | None, *,
          is_gpu: bool, gpu: GpuFact | None = None) -> None:
    """The PCIe edge of a switch or device: its negotiated and maximum link, the GPU query filling
    what the listing leaves out, capped by the parent port's capability."""
    gen, width, max_gen, max_width = dev.gen, dev.width, dev.max_gen, dev.max_width
    if gpu is not None:
        gen = gen or gpu.link_gen_current
        width = width or gpu.link_width_current
        max_gen = max_gen or gpu.link_gen_max
        max_width = max_width or gpu.link_width_max
        if gpu.link_gen_host_max and max_gen:
            max_gen = min(max_gen, gpu.link_gen_host_max)
    note = None
    if pdev is not None and pdev.max_width and max_width and pdev.max_width < max_width:
        note = f"parent port is x{pdev.max_width}: the slot caps the device's x{max_width}"
        max_width = pdev.max_width
    if pdev is not None and pdev.max_gen and max_gen and pdev.max_gen < max_gen:
        note = (note + "; " if note else "") + f"parent port caps Gen{max_gen} at Gen{pdev.max_gen}"
        max_gen = pdev.max_gen
    if dev.capabilities_denied and not gen:
        note = (note + "; " if note else "") + "lspci: Capabilities <access denied> (not root)"
    d.pcie_edge(child, parent, gen=gen, width=width, max_gen=max_gen, max_width=max_width, is_gpu=is_gpu,
                note=note, reported_gbs=dev.link_gbs)


def _rdma_unlisted(d: Draft, dev: PciDeviceFact) -> bool:
    """True for RDMA hardware (InfiniBand class, Mellanox/NVIDIA ConnectX/BlueField) in a report
    with no RDMA listing at all (no ibstat/sysfs_ib/ibv_devinfo/ibstatus, topo -m NIC column,
    NCCL ``<net>`` or hwloc OpenFabrics device); with a listing, only the functions it names are
    NICs."""
    if dev.source.startswith("nccl_topo_xml"):
        return True  # NCCL's own topology: its network <pci> elements are the NICs it uses
    return not d.facts.nics and _rdma_hardware(dev)


def _rdma_hardware(dev: PciDeviceFact) -> bool:
    """RDMA hardware by PCI ids and name (:func:`apps.domain.devices.rdma_hardware`)."""
    return devices.rdma_hardware(dev.class_code, dev.vendor_id, dev.device_id, dev.name)


def _with_bdf(n: NicFact, bdf: str) -> NicFact:
    from dataclasses import replace

    return replace(n, bdf=bdf)
