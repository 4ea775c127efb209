"""What the fabric rules (``fabric_rules``, ``fabric_islands``) share: the rules L01-L08 as
``findings.base.Rule`` records, the adapters' CA types, and the small helpers that make a finding
with its ``hosts`` and ``evidence`` (module docstring of ``fabric_rules``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from apps.domain.bandwidth import IB_SPEEDS
from apps.domain.fabric_paths import FabricView
from apps.domain.findings.base import Rule, finding
from apps.domain.names import natural_key

L01 = Rule("L01", "Link trained below its capability", "HIGH",
           "Reseat or replace the cable or transceiver; compare both ends' supported and enabled widths and speeds "
           "(ibportstate <lid> <port>, mlxlink), then retrain the port (ibportstate <lid> <port> reset). A link "
           "that stays low with a known-good cable points at the port.",
           "IBA Vol 1 14.2.5.6 PortInfo (LinkWidthSupported/Enabled/Active, LinkSpeedSupported/Active); "
           "iblinkinfo(8) ('Could be'); ibdiagnet --lw/--ls (fabric links validation)")
L02 = Rule("L02", "Switch port to a host not Active", "HIGH",
           "Down/Polling or Disabled: check the cable, the transceiver and the host's port (ibstat), enable a "
           "disabled port (ibportstate <lid> <port> enable). Initialize or Armed (the link is up): the subnet "
           "manager has not brought the port up; check that opensm/UFM runs and sees it (sminfo, the SM log).",
           "IBA Vol 1 14.2.5.6 PortInfo PortState (Down, Initialize, Armed, Active) and PortPhysicalState; "
           "iblinkinfo(8); ibstat(8)")
L03 = Rule("L03", "NIC on the wrong rail's leaf", "MED",
           "Swap the cables so that each NIC reaches the leaf of its rail (the other hosts show which); until then "
           "the traffic of these rails crosses the spines.",
           "NCCL search.cc L601-615 (NCCL_CROSS_NIC=0 keeps a channel on one rail), L827-833 (a channel leaves and "
           "enters nodes through NET n); env NCCL_CROSS_NIC")
L04 = Rule("L04", "Leaf uplinks oversubscribed beyond the design for a job", "MED",
           "Restore the leaf's missing uplinks (cables or ports down: see L02 and the capture of that leaf), or "
           "place the job on leaves with their full uplinks (Slurm topology.conf, --switches).",
           "NCCL init.cc L1291-1301 (nodes in rank order), connect.cc L95-113 (rings node to node), L138-175 and "
           "trees.cc L32-112 (double binary tree); uplink capacity from the capture (fabric.uplink_sharing)")
L05 = Rule("L05", "HCA seen by the host but absent from the fabric", "HIGH",
           "Check the port on the host (ibstat: State, Physical state), the cable and the switch port; a port "
           "that is not linked is not discovered. An Active port that is absent is on another subnet or "
           "partition than the node that ran the discovery: run ibnetdiscover from a node of that fabric.",
           "ibnetdiscover(8) (discovers the linked, reachable ports of one subnet); ibstat(8) (port GUIDs)")
L06 = Rule("L06", "Duplicate node descriptions", "LOW",
           "Give every node a unique description: rdma-ndd sets '<hostname> <device>' on hosts (or write "
           "/sys/class/infiniband/<device>/node_desc); name switches with ibnetdiscover --node-name-map.",
           "IBA Vol 1 14.2.5.2 NodeDescription; rdma-ndd(8); ibnetdiscover(8) --node-name-map")
L07 = Rule("L07", "Islands joined by fewer links than hosts need", "MED",
           "Add links between the islands (the ones counted here), or keep jobs inside one island (Slurm "
           "topology.conf / block scheduling) until the cut carries what the hosts can send.",
           "max-flow min-cut over the capture's links (fabric.route, fabric_paths); NCCL connect.cc L95-113 "
           "(a ring visits every node: a job spanning islands crosses the cut)")
L08 = Rule("L08", "Mixed link speeds in one job", "MED",
           "Run the job on hosts whose links train alike, or fix the slow links (L01): NCCL gives every channel "
           "the bandwidth of the slowest node.",
           "NCCL init.cc L1436-1443 (bwIntra/bwInter: the minimum over all ranks)")

FABRIC_RULES = (L01, L02, L03, L04, L05, L06, L07, L08)
FABRIC_RULE_IDS = tuple(r.id for r in FABRIC_RULES)

#: The fastest InfiniBand speed of an adapter, by its CA type (ibstat ``CA type:``, the PCI device
#: id): NVIDIA/Mellanox ConnectX product briefs; pci.ids vendor 15b3. Ethernet-only adapters
#: (ConnectX-4 Lx, -6 Dx, -6 Lx) are not listed.
CA_TYPE_SPEED = {"MT25418": "DDR", "MT26428": "QDR", "MT4099": "FDR", "MT4103": "FDR", "MT4113": "FDR",
                 "MT4115": "EDR", "MT4119": "EDR", "MT4121": "EDR", "MT4123": "HDR", "MT4124": "HDR",
                 "MT4129": "NDR", "MT4131": "XDR"}
CA_TYPE_NAME = {"MT25418": "ConnectX", "MT26428": "ConnectX-2", "MT4099": "ConnectX-3", "MT4103": "ConnectX-3 Pro",
                 "MT4113": "Connect-IB", "MT4115": "ConnectX-4", "MT4119": "ConnectX-5", "MT4121": "ConnectX-5 Ex",
                 "MT4123": "ConnectX-6", "MT4124": "ConnectX-6 VF", "MT4129": "ConnectX-7", "MT4131": "ConnectX-8"}
IB_SECTIONS = ("sysfs_ib", "ibv_devinfo", "ibstatus", "ibstat")
# CA types shared by full-speed and split (HDR100, NDR200) adapters, at the 4X rate a split one tops out at
SPLIT_SKUS = {("MT4123", "4X", "EDR"), ("MT4124", "4X", "EDR"), ("MT4129", "4X", "HDR")}


def lane_rate(speed: str | None) -> float | None:
    """Gb/s of one lane at InfiniBand ``speed`` (``bandwidth.IB_SPEEDS``)."""
    lane = IB_SPEEDS.get(speed or "")
    return lane[1] if lane else None


def fabric_finding(rule: Rule, hosts: Iterable[str | None], devices: Iterable[str], message: str,
                   evidence: list[dict], **kw: Any) -> dict:
    """``findings.base.finding`` with the hosts it names (sorted) and its evidence rows."""
    out = finding(rule, devices, message, **kw)
    out["hosts"] = sorted({h for h in hosts if h}, key=natural_key)
    out["evidence"] = evidence
    return out


def evidence_row(switch: str | None = None, switch_port: Any = None, host: str | None = None,
                 nic: str | None = None, **extra: Any) -> dict:
    """One place a finding names: the switch and its port, the host and its NIC (None where none)."""
    return {"switch": switch, "switch_port": switch_port, "host": host, "nic": nic, **extra}


def owner_of(view: FabricView, ca: str) -> tuple[str | None, str | None]:
    """``(host, NIC)`` of a host adapter: the joined host, else the one its description names."""
    owner = view.owner(ca)
    if owner:
        return owner
    d = view.graph.nodes[ca]
    return d.get("host"), None


def docs_by_host(docs: Iterable[Mapping] | Mapping[str, Mapping] | None) -> dict[str, Mapping]:
    """Snapshot documents by host name, from a mapping or a list of documents."""
    if not docs:
        return {}
    if isinstance(docs, Mapping):
        return dict(docs)
    return {d["hostname"]: d for d in docs if d.get("hostname")}


def is_ib(nic: Mapping) -> bool:
    """Whether a document's NIC is an InfiniBand port."""
    return str(nic.get("link_layer") or "").lower() == "infiniband"


def nic_label(host: str | None, nic: str | None, fallback: str) -> str:
    """``host/nic``, else the host, else ``fallback``."""
    return f"{host}/{nic}" if host and nic else host or fallback
