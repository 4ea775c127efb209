"""Which leaf switches each host is cabled to, and switch names other tools accept: what the
Slurm and Kubernetes exports share about a fabric graph (:func:`apps.domain.fabric.build_fabric`)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import networkx as nx

from apps.domain.exports._common import ExportError, natural_key
from apps.domain.fabric import attach_hosts, host_cas

__all__ = ["Attachments", "attachments", "switch_names", "TIER_DEPTH", "tier_depth"]

NAME_CHARS_RE = re.compile(r"[^A-Za-z0-9._-]+")
HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")  # a host name Slurm and Kubernetes can take
# NVIDIA/Mellanox switches describe themselves "MF0;<system name>:<model>/U1" once named
_MELLANOX_DESC_RE = re.compile(r"^MF0;(?P<name>[^:;]+):")
_MAX_NAME = 64  # Slurm's limit for block names; switch names are kept as short
TIER_DEPTH = {"leaf": 0, "spine": 1, "core": 2}


@dataclass
class Attachments:
    """The hosts of a fabric and their leaves.

    ``leaves``: {host: [leaf switch nodes, in the order of the host's adapters, each once]};
    ``unnamed``: [(CA node, leaf node or None)] for host adapters whose node description names no
    host; ``unusable``: [(host, reason)] for names Slurm and Kubernetes cannot take; ``unlinked``:
    hosts none of whose adapters is cabled to a switch."""

    leaves: dict[str, list[str]] = field(default_factory=dict)
    unnamed: list[tuple[str, str | None]] = field(default_factory=list)
    unusable: list[tuple[str, str]] = field(default_factory=list)
    unlinked: list[str] = field(default_factory=list)

    def primary(self, host: str) -> str | None:
        """The leaf most of ``host``'s adapters reach; on a tie the first adapter's (``mlx5_0``,
        ``HCA-1``): one rail of a rail-optimised fabric."""
        leaves = self.leaves.get(host) or []
        if not leaves:
            return None
        counts = Counter(leaves)
        top = max(counts.values())
        return next(leaf for leaf in leaves if counts[leaf] == top)


def attachments(G: nx.Graph) -> Attachments:
    """The hosts of fabric ``G`` (named by their adapters' node descriptions) and their leaves."""
    if not all("type" in d for _n, d in G.nodes(data=True)):
        raise ExportError("not a fabric graph (apps.domain.fabric.build_fabric builds one)")
    out = Attachments()
    rows_by_host = attach_hosts(G)["hosts"]
    for host in sorted(rows_by_host, key=natural_key):
        if host.lower().split(".")[0] == "localhost":
            # a node description never set ("localhost mlx5_0"): it names no host, however many say it
            out.unnamed += list({r["ca"]: r.get("leaf") for r in rows_by_host[host]}.items())
            continue
        if not HOST_RE.match(host):
            out.unusable.append((host, "characters a host name cannot have"))
            continue
        rows = sorted(rows_by_host[host], key=lambda r: (natural_key(r.get("nic") or ""), r.get("port") or 0))
        leaves = list(dict.fromkeys(r["leaf"] for r in rows if r.get("leaf")))
        if leaves:
            out.leaves[host] = leaves
        else:
            out.unlinked.append(host)
    localhost = {ca for ca, _leaf in out.unnamed}
    for ca in host_cas(G):
        if not G.nodes[ca].get("host") and ca not in localhost:
            peers = [p.get("peer") for _port, p in sorted(G.nodes[ca]["ports"].items())]
            leaf = next((p for p in peers if p in G and G.nodes[p]["type"] == "switch"), None)
            out.unnamed.append((ca, leaf))
    return out


def switch_names(G: nx.Graph) -> dict[str, str]:
    """{switch node: a name of ``[A-Za-z0-9._-]``, unique in the fabric}: the system name of an
    ``MF0;<name>:<model>/U1`` description, else the description with other characters as ``_``;
    a name several switches share (unnamed switches all say "MT43132 Mellanox Technologies") gets
    the last six digits of the GUID, and a switch without any usable name ``sw_<GUID>``.

    >>> G = nx.Graph()
    >>> G.add_node("ib:0x1", type="switch", name="MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", guid="0x1")
    >>> G.add_node("ib:0x2", type="switch", name=None, guid="0x0002c9020046c588")
    >>> switch_names(G)
    {'ib:0x1': 'A09-P1-IBLEAF-04-04', 'ib:0x2': 'sw_0002c9020046c588'}
    """
    base = {}
    for n, d in G.nodes(data=True):
        if d.get("type") == "switch":
            base[n] = _clean(d.get("name")) or f"sw_{_guid_hex(d.get('guid'), n)}"
    counts = Counter(base.values())
    out = {}
    for n, name in base.items():
        if counts[name] > 1:
            suffix = _guid_hex(G.nodes[n].get("guid"), n)[-6:]
            name = f"{name[:_MAX_NAME - 7]}_{suffix}"
        out[n] = name
    return out


def tier_depth(tier: str | None) -> int | None:
    """0 for a leaf, 1 spine, 2 core, ``N - 1`` for ``tierN``; None for ``unattached``."""
    if tier in TIER_DEPTH:
        return TIER_DEPTH[tier]
    m = re.fullmatch(r"tier(\d+)", tier or "")
    return int(m.group(1)) - 1 if m else None


def _clean(description: str | None) -> str:
    text = (description or "").strip()
    m = _MELLANOX_DESC_RE.match(text)
    if m:
        text = m.group("name")
    return NAME_CHARS_RE.sub("_", text).strip("_.-")[:_MAX_NAME].strip("_.-")


def _guid_hex(guid: str | None, node: str) -> str:
    text = (guid or node).lower()
    text = text[3:] if text.startswith("ib:") else text
    text = text[2:] if text.startswith("0x") else text
    return NAME_CHARS_RE.sub("_", text)
