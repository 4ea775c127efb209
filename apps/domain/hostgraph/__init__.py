"""HostGraph: one networkx graph of a host's CPUs, PCIe tree, GPUs, NICs and NVLinks.

``build_host_graph(facts)`` turns :class:`~apps.domain.facts.HostFacts` into an undirected
:class:`networkx.Graph` following the HostGraph contract (engine contract, shared with paths,
contention and findings):

* ``G.graph``: ``hostname``, ``inferred``, ``mode`` ("exact" | "nccl_xml" | "hwloc_xml" |
  "inferred" | "none"), ``sources``, ``cpu_vendor``, ``cpu_model``, ``cpu_name``, ``gpu_model``,
  ``nic_inventory``/``nic_unknown``/``socket_nets`` (what the report can say about NICs),
  ``virtual_pci``, ``unplaced``, ``nvlink_reported``, ``warnings``,
  ``disagreements`` (list of {"subject", "message", "sources"}: sources that describe the host
  differently, e.g. topo -m vs the PCI tree).
* nodes: ``cpu<numa>``, ``rc:<domain>:<bus>`` (host bridge), ``pci:<bdf>`` (root port; a PCIe
  switch is ONE node named after its upstream port, attrs ``upstream_bdf``/``port_bdfs``),
  ``GPU<i>``, HCA name (``mlx5_0``; ``mlx5_0:2`` for a second port) or the topo -m label for NICs,
  ``nvswitch0`` (the NVSwitch fabric), ``pci:<bdf>`` for NVMe / unnamed NICs. Every node has
  ``kind``, ``label``, ``bdf``, ``numa``, ``parent`` (PCIe/CPU parent node id) and ``inferred``.
  Only RDMA devices are NICs (NCCL's IB/RoCE transport uses nothing else): a PCI network function
  is a ``nic`` node only when an RDMA source names it (ibstat/ibstatus/ibv_devinfo/sysfs_ib CA,
  topo -m NIC column or NIC Legend, NCCL XML ``<net>``, hwloc OpenFabrics device), or, in a report
  with no RDMA listing at all, when it is RDMA hardware (InfiniBand class, ConnectX/BlueField, AWS
  EFA; attr ``rdma="assumed"``); NCCL's topology XML lists only the NICs NCCL uses, so its network
  ``<pci>`` elements are NICs. Other network functions (an Intel X710, a BCM5720 management port)
  are kind ``other`` labelled "Ethernet (no RDMA)" with ``network=True``: drawn, never chosen.
  Inferred nodes use ``rc:inferred:<k>`` / ``switch:inferred:<k>``.
* edges: ``kind`` "pcie" (child to its PCIe parent, carrying the child's upstream link),
  "nvlink" (GPU-GPU or GPU-nvswitch; attr ``fabric`` "xgmi" for AMD Infinity Fabric links, which
  RCCL plans as NVL links), "c2c" (a Grace GPU to its CPU side over NVLink-C2C), "inter_socket"
  (cpu-cpu), "cpu_link" (root complex to its cpu); attrs ``gen``, ``width``, ``max_gen``, ``max_width``, ``links``, ``spec_gbs``,
  ``expected_gbs``, ``nccl_gbs``, ``source`` (citation, from :mod:`apps.domain.bandwidth`),
  ``degraded``, ``inferred``, ``note``.

The NVSwitch fabric is one node per NVLink domain: each GPU's edge to it carries the GPU's links
into the fabric (``NV12`` on HGX A100, ``NV18`` on H100/B200), so a GPU->GPU path through it has
the right bottleneck. The physical NVSwitch PCI functions (class 0x0680, vendor 10de) are listed
in the node's ``bdfs`` attribute and are not PCIe nodes: their PCIe link is management only and
must never become a data path.

Three ways to build (``G.graph["mode"]``):

* exact: a PCI hierarchy from ``sysfs_pci`` / ``lspci -vvv`` / ``lspci -tv`` (or NCCL's / hwloc's
  topology XML, whose root complexes are not named: one inferred host bridge per top-level PCI
  element);
* inferred: only ``nvidia-smi topo -m``: PIX groups share an inferred switch, PXB groups get an
  inferred parent switch, PHB groups one inferred root complex, NODE splits root complexes in one
  NUMA node, SYS splits NUMA nodes (affinity columns place them). Everything is ``inferred=True``.
* none: no topology source; GPUs and NICs are unplaced.

A GPU or NIC that no source places (a row cut from a partial topo -m with only ``NV#`` cells, an
HCA that no matrix column or PCI listing shows) is a node without a parent, attr ``placement``
"unknown", listed in ``G.graph["unplaced"]``: it gets no path class, so nothing is built on a place
nobody reported; a warning says what to send. Devices that stand in the same place as far as the
matrix says (NICs with identical cells and no cell between them) share one CPU node rather than
one each.

When topo -m is present with an exact source, every GPU-GPU and GPU-NIC cell is compared with
:func:`path_class` on the graph (lowest common ancestor rule, domain.md 4.2 item 5) and each
mismatch becomes a disagreement; nothing here raises on inconsistent input.

The build runs in named stages over one :class:`~apps.domain.hostgraph.draft.Draft`, each in a
module of its own: the exact tree (:mod:`~apps.domain.hostgraph.exact`, with the join of HCA
names to PCI functions), the inferred tree (:mod:`~apps.domain.hostgraph.inferred`), NVLink
(:mod:`~apps.domain.hostgraph.nvlink`) and the host facts (:mod:`~apps.domain.hostgraph.host`);
:func:`build_host_graph` lists them in order. Questions asked of a finished graph (ancestors,
path classes, PCIe routes) are in :mod:`~apps.domain.hostgraph.query`.
"""

from __future__ import annotations

import networkx as nx

from apps.domain.facts import HostFacts
from apps.domain.hostgraph import host
from apps.domain.hostgraph.draft import Draft
from apps.domain.hostgraph.exact import add_exact_tree
from apps.domain.hostgraph.inferred import add_inferred_tree
from apps.domain.hostgraph.nvlink import add_nvlinks
from apps.domain.hostgraph.query import (
    ancestors,
    frozen,
    lca,
    link_token,
    memoized,
    path_class,
    pcie_class,
    pcie_path,
)

__all__ = ["build_host_graph", "path_class", "pcie_class", "pcie_path", "ancestors", "lca", "frozen", "memoized",
           "link_token"]


def build_host_graph(facts: HostFacts) -> nx.Graph:
    """Build the HostGraph of one host (see the module docstring for the schema).

    Parameters
    ----------
    facts : HostFacts
        From :func:`apps.domain.assemble.assemble`.

    Returns
    -------
    networkx.Graph
        Never raises on inconsistent facts; conflicts are in ``G.graph["disagreements"]``.

    Examples
    --------
    >>> from apps.domain.assemble import assemble
    >>> topo = {"matrix": {"GPU0": {"GPU0": "X", "GPU1": "PIX"}, "GPU1": {"GPU0": "PIX", "GPU1": "X"}}}
    >>> G = build_host_graph(assemble({"nvidia_smi_topo": topo}, "h"))
    >>> G.graph["inferred"], path_class(G, "GPU0", "GPU1")
    (True, 'PIX')
    """
    d = Draft.start(facts)
    mode = host.start_graph(d)
    if mode == "inferred":
        add_inferred_tree(d)
    elif mode == "none":
        d.place_leftovers("no topology source (topo -m, lspci, sysfs or a topology XML) places it")
    else:
        add_exact_tree(d)
    host.note_unplaced(d, mode)
    host.note_geforce(d)
    add_nvlinks(d)
    host.add_sockets(d)
    host.count_numa_nodes(d)
    host.note_nvlink_reporting(d, mode)
    host.check_against_topo(d, exact=mode not in ("inferred", "none"))
    host.finish_graph(d)
    return d.G
