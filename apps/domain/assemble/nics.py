"""The NIC join stage (domain.md 4.2 joins 2-4): one :class:`NicFact` per HCA port.

Port state and rate come from ``ibstat`` > ``sysfs_ib`` > ``ibv_devinfo`` > ``ibstatus`` (first
wins, later ones fill gaps; different values are disagreements). ``mlx5_N`` <-> BDF from
``sysfs_ib``, the NCCL XML ``<nic><net>`` under its ``<pci>``, or an hwloc OpenFabrics OS device
under its PCI function (state unknown). topo -m labels (``NIC3`` or ``mlx5_3``) join HCA names
through the matrix header or NIC Legend. NCCL XML nets of NCCL's Socket transport are no NICs:
they are listed apart. :func:`nic_inventory` says whether any source can show the host's NICs.
"""

from __future__ import annotations

import re
from typing import Any

from apps.domain import devices
from apps.domain.assemble.listing import PCI_SOURCES, is_network
from apps.domain.assemble.report import Report, get_field, get_list, to_bdf, to_bool, to_float, to_hex, to_int
from apps.domain.facts import NicFact

__all__ = ["IB_SOURCES", "join_nics", "cross_check_nics", "nic_inventory"]

IB_SOURCES = ("ibstat", "sysfs_ib", "ibv_devinfo", "ibstatus")


def join_nics(rep: Report, nic_map: dict[str, str | None], pci: dict[str, dict]) -> tuple[list[NicFact], list[str]]:
    """NIC ports of every source, and the NCCL XML nets of NCCL's Socket transport."""
    ports: dict[str, dict] = {}  # HCA name, HCA:port or topo -m label -> merged fields
    order: list[str] = []  # keys in the order sources name them
    _ib_ports(rep, ports, order)
    sockets = _nccl_nets(rep, ports, order)
    _hwloc_rdma(rep, ports, order)
    label_of = _topo_labels(rep, nic_map, ports, order)
    return [_nic_fact(key, ports[key], label_of, pci) for key in order], sockets


def _ib_ports(rep: Report, ports: dict[str, dict], order: list[str]) -> None:
    for kind in IB_SOURCES:
        res = rep.results.get(kind)
        if not res:
            continue
        for ca in get_list(res, "cas"):
            name = get_field(ca, "name")
            if not name:
                continue
            for p in get_list(ca, "ports") or [{}]:
                number = to_int(get_field(p, "number")) or 1
                # one node per HCA port: name the port-1 (usual) entry by the CA name itself
                key = name if number == 1 else f"{name}:{number}"
                cur = ports.get(key)
                if cur is None:
                    cur = ports[key] = {"device": name, "port": number, "sources": []}
                    order.append(key)
                cur["sources"].append(kind)
                fields = {
                    "bdf": to_bdf(get_field(ca, "bdf")),
                    "netdevs": tuple(get_list(ca, "netdevs")),
                    "vendor_id": to_hex(get_field(ca, "vendor_id")),
                    "state": get_field(p, "state"),
                    "phys_state": get_field(p, "phys_state"),
                    "rate_gbps": to_float(get_field(p, "rate_gbps")),
                    "width": get_field(p, "width"),
                    "link_layer": get_field(p, "link_layer"),
                    "base_lid": to_int(get_field(p, "base_lid")),
                    "sm_lid": to_int(get_field(p, "sm_lid")),
                    "speed": get_field(p, "speed_name"),
                    "firmware": get_field(ca, "firmware_version"),
                    "port_guid": _guid(get_field(p, "port_guid")),
                    "node_guid": _guid(get_field(ca, "node_guid")),
                }
                for k, v in fields.items():
                    if v in (None, ()):
                        continue
                    if cur.get(k) in (None, ()):
                        cur[k] = v
                    elif k in ("state", "rate_gbps", "link_layer") and cur[k] != v:
                        rep.disagree(key, f"{kind} says {k} {v!r} for {key}, {cur['sources'][0]} says {cur[k]!r}",
                                     cur["sources"][0], kind)


def _nccl_nets(rep: Report, ports: dict[str, dict], order: list[str]) -> list[str]:
    """NCCL XML nets: name, speed, gdr, and the PCI address of the NIC; returns the Socket nets."""
    sockets: list[str] = []
    for xn in get_list(rep.results.get("nccl_topo_xml"), "nics"):
        bdf = to_bdf(get_field(xn, "bdf"))
        nets = get_list(xn, "nets")
        names = [get_field(net, "name") for net in nets]
        for net in nets:
            name = get_field(net, "name")
            if not name:
                continue
            port = to_int(get_field(net, "port"))
            if _socket_net(bdf, port, get_field(net, "guid")):
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
            speed = to_int(get_field(net, "speed_mbps"))
            cur.setdefault("speed_mbps", speed)
            if cur.get("rate_gbps") is None and speed:
                cur["rate_gbps"] = speed / 1000
            cur.setdefault("gdr", to_bool(get_field(net, "gdr")))
            if cur.get("state") is None and (to_hex(get_field(net, "guid")) or 0):
                # NCCL's IB transport lists only Active ports (net_ib/init.cc L363 at v2.30.7-1 [S8]):
                # a <net> with a port GUID in NCCL's own dump was Active when NCCL ran
                cur["state"] = "Active"
    return sockets


def _hwloc_rdma(rep: Report, ports: dict[str, dict], order: list[str]) -> None:
    """hwloc OS devices under their PCI function: OpenFabrics ones are RDMA devices (state
    unknown); network ones of a libfabric network (Slingshot hsi0, EFA) are NICs too."""
    for dev in get_list(rep.results.get("hwloc_xml"), "pci_devices"):
        plugin = devices.net_plugin(to_hex(get_field(dev, "vendor_id")), to_hex(get_field(dev, "device_id")))
        for od in get_list(dev, "os_devices"):
            types = {str(t).lower() for t in get_list(od, "types")} | {str(get_field(od, "type", default="")).lower()}
            name = get_field(od, "name")
            if not name or name in ports or not ("openfabrics" in types or (plugin and "network" in types)):
                continue
            ports[name] = {"device": name, "port": 1, "sources": ["hwloc_xml"], "bdf": to_bdf(get_field(dev, "bdf"))}
            order.append(name)


def _topo_labels(rep: Report, nic_map: dict[str, str | None], ports: dict[str, dict], order: list[str]) -> dict[str, str]:
    """HCA name -> topo -m label; matrix NICs no listing shows become ports of their own (and a
    disagreement when an HCA listing exists)."""
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
    listings = [k for k in IB_SOURCES if rep.results.get(k)]
    if listings:
        for label, hca in nic_map.items():
            if hca and "nvidia_smi_topo" == ports[hca]["sources"][0] and len(ports[hca]["sources"]) == 1:
                rep.disagree(hca, f"topo -m lists {hca} ({label}) but no HCA listing shows it",
                             "nvidia_smi_topo", *listings)
    return label_of


def _nic_fact(key: str, p: dict, label_of: dict[str, str], pci: dict[str, dict]) -> NicFact:
    bdf = p.get("bdf")
    dev = pci.get(bdf) if bdf else None
    label = label_of.get(key) or (key if p.get("device") is None else None)
    if p.get("device") and p.get("port", 1) not in (None, 1):
        # port 2+ of an HCA: topo -m has one column per HCA; the port shares its label
        label = label_of.get(p["device"])
    return NicFact(
        name=key, label=label, device=p.get("device"), port=p.get("port"), bdf=bdf,
        state=p.get("state"), phys_state=p.get("phys_state"), rate_gbps=p.get("rate_gbps"),
        width=p.get("width"), link_layer=p.get("link_layer"),
        numa=(dev or {}).get("numa"), base_lid=p.get("base_lid"), sm_lid=p.get("sm_lid"),
        netdevs=tuple(p.get("netdevs") or ()), speed_mbps=p.get("speed_mbps"), gdr=p.get("gdr"),
        speed=p.get("speed"), firmware=p.get("firmware"), port_guid=p.get("port_guid"), node_guid=p.get("node_guid"),
        transport=_transport(key, p, dev),
    )


def _guid(value: Any) -> str | None:
    """A GUID as the sources print it (``0x58a2e103001b2576``); an all-zero one (a port that never
    came up) is no GUID."""
    text = str(value).strip().lower() if value not in (None, "") else ""
    return text if text and (to_hex(text) or 0) != 0 else None


def cross_check_nics(rep: Report, nics: list[NicFact], topo: dict, nic_map: dict) -> None:
    """An HCA port 1 the HCA listing shows but topo -m does not (when the matrix has NIC columns)."""
    if not topo or not nic_map:
        return  # a matrix without NIC columns shows no NIC at all (often trimmed): nothing to compare
    listings = [k for k in IB_SOURCES if rep.results.get(k)]
    for n in nics:
        if n.device and n.port not in (None, 1):
            continue
        if n.device and n.label is None and n.port in (None, 1) and n.device not in nic_map.values():
            rep.disagree(n.name, f"{n.name} is in the HCA listing but not in topo -m", "nvidia_smi_topo",
                         *listings)


def nic_inventory(rep: Report, merged: dict[str, dict]) -> tuple[tuple[str, ...], str | None]:
    """(sources that list the host's network functions, why none can when that is empty).

    ``no RDMA NIC`` is a fact only when a source lists network functions and none is RDMA; a
    listing without any network function is trimmed or filtered, not a host without NICs."""
    sources: list[str] = [k for k in IB_SOURCES if get_list(rep.results.get(k), "cas")]
    network = {src for d in merged.values() if is_network(d) for src in d["sources"]}
    sources += [k for k in PCI_SOURCES if k in network and k != "nccl_topo_xml"]
    x = rep.results.get("nccl_topo_xml")
    if x and any(get_list(n, "nets") for n in get_list(x, "nics")):
        sources.append("nccl_topo_xml")  # NCCL's own list of the networks it found
    if sources:
        return tuple(dict.fromkeys(sources)), None
    why = []
    if rep.results.get("nvidia_smi_topo"):
        why.append("nvidia-smi topo -m shows no NIC column (it lists only the RDMA devices the NVIDIA driver "
                   "sees: AWS EFA never appears, and pasted captures are often trimmed)")
    if x:
        why.append("the NCCL topology XML has no <net> (a NCCL_TOPO_FILE lists the PCI tree; NCCL adds the "
                   "NICs it finds at run time)")
    h = rep.results.get("hwloc_xml")
    if h:
        why.append("the hwloc XML has no network device" + (" (lstopo ran without I/O discovery)"
                                                             if not get_list(h, "pci_devices") else ""))
    t = rep.results.get("lspci_tree")
    if t and not any(get_field(d, "name") for d in get_list(t, "devices")):
        why.append("lspci -t without -v names no device")
    elif any(rep.results.get(k) for k in ("lspci_tree", "lspci_verbose", "sysfs_pci")):
        why.append("the PCI listing shows no network function (trimmed or filtered)")
    return (), "; ".join(why) or "no section of the report lists NICs"


def _socket_net(nic_bdf: str | None, port: int | None, guid: Any) -> bool:
    """An NCCL XML ``<net>`` of NCCL's Socket transport: no PCI device, port 0 and GUID 0 (NCCL's
    socket plugin reports neither; IB verbs ports are numbered from 1 and have a GUID)."""
    return nic_bdf is None and not port and (to_hex(guid) or 0) == 0


def _transport(name: str, port: dict, dev: dict | None) -> str:
    """``ofi`` for NICs of a libfabric network (AWS EFA, HPE Slingshot: NCCL reaches them through
    the aws-ofi-nccl plugin), known from the PCI ids of their function, the verbs vendor id or the
    kernel's device name; ``verbs`` for the rest (NCCL's own IB/RoCE transport)."""
    if dev is not None and devices.net_plugin(dev.get("vendor_id"), dev.get("device_id"), dev.get("name")):
        return "ofi"
    if port.get("vendor_id") == devices.AMAZON or re.fullmatch(r"efa_\d+|rdmap\d+s\d+(f\d+)?|hsi\d+|hsn\d+|cxi\d+", name):
        return "ofi"
    return "verbs"
