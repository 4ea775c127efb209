"""The demo fleet's InfiniBand fabric: a SYNTHETIC ``ibnetdiscover`` of the H100 pod (``load_demo`` stores it).

Plain Python, deterministic. ``fabric_text(hosts)`` writes the topology ``ibnetdiscover`` prints
(``apps/domain/parsers/ibnetdiscover.py``), in the layout of the real DGX H100 SuperPOD discovery of
``tests/fixtures/ibnetdiscover/`` (NVIDIA topograph test data: switch blocks, then CA blocks; tabs;
port GUIDs in parentheses without ``0x``), for the fleet's H100 hosts (``apps/ingest/demo/fleet.py``):

* a rail-optimised two-tier fabric: one leaf per rail (``DEMO-IBLEAF-R<k>``, 64-port Quantum-2
  MQM9700) carrying NIC ``mlx5_<k>`` of every H100 host on port ``<host number>``, and two spines
  (``DEMO-IBSPINE-1``, ``-2``) each taking 8 cables from every leaf (leaf ports 33-40 and 41-48:
  24 host links against 16 uplinks per leaf, 1.5:1);
* every adapter's node description ``"<hostname> mlx5_<k>"`` and its port GUID the one the host's
  generated ``ibstat`` reports, so the GUID join is exact; LIDs are the ibstat's ``Base lid``;
* one cable trained below capability: ``h100-n15``'s mlx5_2 at 4X HDR (200 Gb/s), as that host's
  ibstat says (``Rate: 200``); ``h100-n06``'s mlx5_4 has no link, so the discovery does not list it
  (``ibnetdiscover`` prints linked ports only).

The A100 hosts' HDR adapters are on a subnet of their own that this discovery does not reach (the
fabric page lists them as hosts no adapter of the discovery matches); the L40S hosts use RoCE.
The text starts with a comment saying it is synthetic.
"""

from __future__ import annotations

from collections.abc import Iterable

from apps.ingest.demo.fleet import FleetHost

COLLECTED_AT = "2025-03-03T10:30:00Z"
SOURCE_NAME = "demo/synthetic_ibnetdiscover_h100_pod.txt"
LEAF_PORTS = 64
UPLINKS_PER_SPINE = 8
SPINES = 2
_SWITCH_GUID = 0x2C5EAB0300D20000  # the Quantum-2 vendor prefix of the real discovery
_SWITCH_DEVID = "0xd2f0"
_CA_DEVID = "0x1021"


def _hex(guid: int) -> str:
    return f"{guid:016x}"


def _speed(rate: int) -> str:
    return {400: "4xNDR", 200: "4xHDR", 100: "4xEDR"}.get(rate, "4xNDR")


class _Switch:
    def __init__(self, guid: int, name: str, lid: int):
        self.guid, self.name, self.lid = guid, name, lid
        self.ports: dict[int, str] = {}  # port -> printed line after "[port]\t"


def fabric_text(hosts: Iterable[FleetHost]) -> str:
    """The ``ibnetdiscover`` topology of the fleet's H100 hosts (see the module docstring)."""
    pod = [h for h in hosts if h.platform == "h100"]
    rails = max(len(h.nics) for h in pod)
    leaves = [_Switch(_SWITCH_GUID + 0x40 * (r + 1), f"MF0;DEMO-IBLEAF-R{r}:MQM9700/U1", 1 + r) for r in range(rails)]
    spines = [_Switch(_SWITCH_GUID + 0x1000 + 0x40 * s, f"MF0;DEMO-IBSPINE-{s + 1}:MQM9700/U1", 1 + rails + s)
              for s in range(SPINES)]
    ca_blocks: list[str] = []
    for number, host in enumerate(pod, 1):
        for r, nic in enumerate(host.nics):
            if nic.port.state != "Active":
                continue  # no link: ibnetdiscover does not reach it
            leaf = leaves[r]
            speed = _speed(nic.port.rate)
            guid = _hex(nic.port_guid)
            desc = f"{host.hostname} {nic.name}"
            leaf.ports[number] = f'"H-{guid}"[1]({guid}) \t\t# "{desc}" lid {nic.port.lid} {speed}'
            ca_blocks.append("\n".join([
                "vendid=0x2c9", f"devid={_CA_DEVID}", f"sysimgguid=0x{guid}", f"caguid=0x{guid}",
                f'Ca\t1 "H-{guid}"\t\t# "{desc}"',
                f'[1]({guid}) \t"S-{_hex(leaf.guid)}"[{number}]\t\t# lid {nic.port.lid} lmc 0 "{leaf.name}" '
                f"lid {leaf.lid} {speed}"]))
    for li, leaf in enumerate(leaves):
        for si, spine in enumerate(spines):
            for k in range(UPLINKS_PER_SPINE):
                lp = 33 + si * UPLINKS_PER_SPINE + k
                sp = 1 + li * UPLINKS_PER_SPINE + k
                leaf.ports[lp] = f'"S-{_hex(spine.guid)}"[{sp}]\t\t# "{spine.name}" lid {spine.lid} 4xNDR'
                spine.ports[sp] = f'"S-{_hex(leaf.guid)}"[{lp}]\t\t# "{leaf.name}" lid {leaf.lid} 4xNDR'
    first = pod[0].nics[0].port_guid
    out = ["#", "# SYNTHETIC: topoweb demo fleet, the H100 pod's InfiniBand fabric (apps/ingest/demo/fleet_fabric.py);",
           "# not a capture. Layout of a real DGX H100 SuperPOD ibnetdiscover.", "#",
           f"# Initiated from node {_hex(first)} port {_hex(first)}", ""]
    for sw in leaves + spines:
        out += ["vendid=0x2c9", f"devid={_SWITCH_DEVID}", f"sysimgguid=0x{_hex(sw.guid)}",
                f"switchguid=0x{_hex(sw.guid)}({_hex(sw.guid)})",
                f'Switch\t{LEAF_PORTS + 1} "S-{_hex(sw.guid)}"\t\t# "{sw.name}" enhanced port 0 lid {sw.lid} lmc 0']
        out += [f"[{p}]\t{line}" for p, line in sorted(sw.ports.items())]
        out.append("")
    for block in ca_blocks:
        out += [block, ""]
    return "\n".join(out)
