"""Join the parser results of one node report into :class:`~apps.domain.facts.HostFacts`.

``assemble(results, hostname)`` takes ``{kind: parser result}`` (kinds of
``apps.domain.parsers.KINDS``; a result may be the parser's frozen dataclass or its
``to_jsonable`` dict) and returns one frozen, normalised view of the host. This package is the
only code that knows the parser result shapes; it reads each parser's fields by the one name its
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

The stages, in the order :func:`assemble` runs them, each a module of this package: the topo -m
matrix (:mod:`.topo`), the PCI listing (:mod:`.listing`), the GPU join (:mod:`.gpus`, with GPU
models read from device names and hwloc ``GPUModel``), the NIC join (:mod:`.nics`: NICs of
libfabric networks, NCCL's Socket nets, and whether any source can show the host's NICs at
all), NVLink and xGMI links from topo -m, NCCL/RCCL XML and hwloc's ``NVLinkBandwidth``/
``XGMIBandwidth`` matrices (:mod:`.links`), and the host facts (:mod:`.host`: CPU nodes,
sockets, the CPU class from host_info, NCCL's ``<cpu>``, hwloc's packages or the PCI root
complex). They share one :class:`~.report.Report` (the results, warnings and disagreements).
"""

from __future__ import annotations

from typing import Any

from apps.domain.assemble import host, links
from apps.domain.assemble.gpus import join_gpus, models_from_pci
from apps.domain.assemble.listing import PCI_DEVICE_LIST, PCI_FIELDS, PCI_SOURCES, merge_pci, pci_fact, virtual_pci
from apps.domain.assemble.nics import IB_SOURCES, cross_check_nics, join_nics, nic_inventory
from apps.domain.assemble.report import Report, get_field, get_list
from apps.domain.assemble.topo import read_matrix, read_topo
from apps.domain.facts import HostFacts

__all__ = ["assemble", "PCI_FIELDS", "PCI_DEVICE_LIST", "PCI_SOURCES", "IB_SOURCES"]


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
    rep = Report.of(results, hostname)
    topo = read_topo(rep)
    merged = merge_pci(rep)
    gpus = join_gpus(rep, topo, merged)
    nics, socket_nets = join_nics(rep, topo.nic_map, merged)
    gpu_bdfs = {g.bdf for g in gpus if g.bdf}
    nic_bdfs = {n.bdf for n in nics if n.bdf}
    pci = [pci_fact(d, gpu_bdfs, nic_bdfs) for d in merged.values()]
    gpus = models_from_pci(rep, gpus, merged)
    nvpairs = links.gpu_links(rep, topo.matrix, gpus)
    cpus, sockets, numa_count = host.cpus(rep)
    vendor, model, family, cpu_name = host.cpu_class(rep, cpus, pci)
    if any(g.c2c for g in gpus) and vendor is None:
        vendor, cpu_name = "arm", "NVIDIA Grace (ARM): GPU memory is a NUMA node (topo -m GPU NUMA ID)"
    inventory, nic_unknown = nic_inventory(rep, merged)
    facts = host.host_info(rep)
    if facts.get("sockets") is None:  # host_info (physical ids) first, else hwloc's packages
        facts["sockets"] = sockets
    if facts.get("numa_count") is None:
        facts["numa_count"] = numa_count
    models = sorted({g.model for g in gpus if g.model})
    if len(models) > 1:
        rep.warnings.append(f"mixed GPU models on one host: {', '.join(models)}")
    p2p = {}
    if rep.results.get("nvidia_smi_p2p"):
        p2p[get_field(rep.results["nvidia_smi_p2p"], "p2p_mode", default="r")] = read_matrix(rep, "nvidia_smi_p2p")
    _section_warnings(rep)
    cross_check_nics(rep, nics, topo.matrix, topo.nic_map)
    return HostFacts(
        hostname=rep.hostname,
        sources=tuple(rep.results),
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
        topo_labels=topo.labels,
        topo=topo.matrix,
        topo_pci=read_matrix(rep, "nvidia_smi_topo_pci"),
        p2p=p2p,
        topo_legacy=topo.legacy,
        warnings=tuple(rep.warnings),
        disagreements=tuple(rep.disagreements),
        nic_inventory=inventory,
        nic_unknown=nic_unknown,
        socket_nets=tuple(socket_nets),
        virtual_pci=facts.get("virtualized") is True or virtual_pci(merged),
        nvlink_sources=host.nvlink_sources(rep),
        **facts,
    )


def _section_warnings(rep: Report) -> None:
    """The parsers' own warnings, named by section (topo -m's are read with the matrix)."""
    t = rep.results.get("lspci_tree")
    if t and get_list(t, "devices") and not any(get_field(d, "name") for d in get_list(t, "devices")):
        rep.warnings.append("lspci_tree: lspci -t without -v prints no device names, so GPUs and NICs cannot be "
                            "told from other functions; send lspci -D -tv")
    for kind, res in rep.results.items():
        if kind != "nvidia_smi_topo":
            for w in get_list(res, "warnings"):
                rep.warnings.append(f"{kind}: {w}")
