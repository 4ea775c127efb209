"""Slurm ``topology.conf`` from an InfiniBand fabric graph (:func:`apps.domain.fabric.build_fabric`).

Two forms (``slurm_topology(G, form=...)``):

**tree** (``TopologyPlugin=topology/tree``): one line per leaf switch with hosts, then one per
switch above with the switches below it::

    SwitchName=A09-P1-IBLEAF-04-04 Nodes=a08-p1-dgx-04-c[01-17]
    SwitchName=A09-P1-IBSPINE-01 Switches=A09-P1-IBLEAF-0[1-4]-04

A leaf's ``Nodes`` are the hosts cabled to it, each once; a spine's (tier ``spine``, one hop above
the nearest leaf) ``Switches`` are the listed leaves it is cabled to, a core's the listed spines,
and so on up. A host cabled to several leaves (one per rail in a rail-optimised fabric) is under
each of them: that is the fabric, and Slurm accepts it (it logs "Multiple leaf switches contain
nodes"); the header comment names such hosts.

**block** (``TopologyPlugin=topology/block``, Slurm 23.11+): disjoint blocks of hosts, then the
block sizes Slurm plans with::

    BlockName=A09-P1-IBLEAF-04-04 Nodes=a08-p1-dgx-04-c[01-17]
    BlockName=block02 Nodes=b08-p1-dgx-01-c[01-18]
    BlockSizes=17,34

A block is the hosts reached through the same leaf switches: the hosts of one leaf, or in a
rail-optimised fabric the hosts of one scalable unit (all cabled to the same set of rail
leaves); hosts whose leaves overlap are one block, so every host is in exactly one. A block of
one leaf is named after it, others ``blockNN`` (their leaves in a comment). ``BlockSizes`` is
the smallest block's node count (the base block size), then its doublings while that many
blocks exist: what Slurm takes when the line is absent, written out to be edited.

Both forms: host names are the fabric's node descriptions (``a08-p1-dgx-04-c17 mlx5_5``), in
Slurm's bracket form (:func:`hostlist`); switch names are the switches' system names made safe
for Slurm (``apps.domain.exports._leaves.switch_names``). Host adapters whose node description
names no host are listed in a comment by GUID and leaf, never given an invented name; so are
host names Slurm cannot take and hosts not cabled to a switch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
import networkx as nx

from apps.domain.exports._common import ExportError, comment_text, natural_key
from apps.domain.exports._leaves import Attachments, attachments, switch_names, tier_depth

__all__ = ["slurm_topology", "hostlist", "FORMS"]

FORMS = ("tree", "block")
_TRAILING_DIGITS_RE = re.compile(r"^(?P<prefix>.*?)(?P<digits>\d+)$")
_HOSTLIST_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")


def hostlist(names: Iterable[str]) -> str:
    """Slurm's bracket form of a set of host names: ``host[01-04,07],gpu[1-2,10]``.

    Names are grouped by the text before their trailing number; numbers become ranges, zero
    padding kept (a range ``lo-hi`` is printed with ``lo``'s width, as Slurm reads it back:
    ``[09-10]`` is ``09,10``, ``[9-10]`` is ``9,10``, so ``n9`` and ``n09`` never share one).
    Names without a trailing number are listed as they are. Groups in natural order.

    Raises ValueError for a name with characters outside ``[A-Za-z0-9._-]`` (``,``, brackets
    and spaces would change what Slurm reads).

    >>> hostlist(["host01", "host02", "host03", "host04", "host07"])
    'host[01-04,07]'
    >>> hostlist(["n9", "n10", "n09", "login", "gpu2", "gpu1"])
    'gpu[1-2],login,n[9,09-10]'
    """
    groups: dict[str, set[str]] = {}
    plain: set[str] = set()
    for name in names:
        if not isinstance(name, str) or not _HOSTLIST_NAME_RE.match(name):
            raise ValueError(f"{name!r} cannot be written in a Slurm host list")
        m = _TRAILING_DIGITS_RE.match(name)
        if m and m.group("prefix"):
            groups.setdefault(m.group("prefix"), set()).add(m.group("digits"))
        else:
            plain.add(name)
    items: list[tuple[tuple, str]] = [(natural_key(p), p) for p in plain]
    for prefix, numbers in groups.items():
        ranges = _ranges(numbers)
        if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            text = prefix + ranges[0][0]
        else:
            text = prefix + "[" + ",".join(lo if lo == hi else f"{lo}-{hi}" for lo, hi in ranges) + "]"
        items.append((natural_key(prefix + min(numbers, key=lambda d: (int(d), len(d)))), text))
    return ",".join(text for _key, text in sorted(items))


def _ranges(numbers: set[str]) -> list[tuple[str, str]]:
    """Consecutive numbers of one printed width as (lo, hi) texts; ``hi`` printed with lo's width."""
    out: list[tuple[str, str]] = []
    width = 0
    last = -2
    for digits in sorted(numbers, key=lambda d: (int(d), len(d))):
        value = int(digits)
        if out and value == last + 1 and f"{value:0{width}d}" == digits:
            out[-1] = (out[-1][0], digits)
        else:
            out.append((digits, digits))
            width = len(digits)
        last = value
    return out


def slurm_topology(G: nx.Graph, *, form: str = "tree") -> str:
    """Slurm ``topology.conf`` text for fabric ``G`` (see the module docstring for both forms).

    Parameters
    ----------
    G : nx.Graph
        A fabric graph from :func:`apps.domain.fabric.build_fabric` (switch tiers set).
    form : {"tree", "block"}
        ``topology/tree`` switch lines or ``topology/block`` block lines.

    Raises
    ------
    ExportError
        ``G`` is not a fabric graph, ``form`` is unknown, or no named host is cabled to a switch.

    Examples
    --------
    >>> from apps.domain.fabric import build_fabric
    >>> G = build_fabric({"switches": [{"guid": "0x1", "name": "leaf1"}], "links": [
    ...     {"a": {"guid": "0x1", "port": 1}, "b": {"guid": "0xa", "port": 1}, "width": "4X", "speed": "NDR"},
    ...     {"a": {"guid": "0x1", "port": 2}, "b": {"guid": "0xb", "port": 1}, "width": "4X", "speed": "NDR"}],
    ...     "cas": [{"guid": "0xa", "name": "n01 mlx5_0", "host": "n01"},
    ...             {"guid": "0xb", "name": "n02 mlx5_0", "host": "n02"}]})
    >>> [line for line in slurm_topology(G).splitlines() if not line.startswith("#")]
    ['SwitchName=leaf1 Nodes=n[01-02]']
    """
    if form not in FORMS:
        raise ExportError(f"unknown topology.conf form {form!r}; one of: {', '.join(FORMS)}")
    att = attachments(G)
    if not att.leaves:
        raise ExportError("no host of the fabric is both named (node description) and cabled to a switch: "
                          "nothing to write (set the hosts' node descriptions, e.g. with rdma-ndd)")
    names = switch_names(G)
    header = _header(G, att, names, form)
    body = _tree(G, att, names) if form == "tree" else _blocks(att, names)
    return "\n".join(header + body) + "\n"


# -- tree ------------------------------------------------------------------------------------------

def _tree(G: nx.Graph, att: Attachments, names: dict[str, str]) -> list[str]:
    hosts_of: dict[str, set[str]] = {}
    for host, leaves in att.leaves.items():
        for leaf in leaves:
            hosts_of.setdefault(leaf, set()).add(host)
    lines = [f"SwitchName={names[leaf]} Nodes={hostlist(hosts)}"
             for leaf, hosts in sorted(hosts_of.items(), key=lambda kv: natural_key(names[kv[0]]))]
    listed = set(hosts_of)
    depth = 1
    while True:
        level = [n for n, d in G.nodes(data=True) if d["type"] == "switch" and tier_depth(d.get("tier")) == depth]
        rows = []
        for sw in level:
            below = sorted((m for m in G[sw] if m in listed and tier_depth(G.nodes[m].get("tier")) == depth - 1),
                           key=lambda m: natural_key(names[m]))
            if below:
                rows.append((names[sw], f"SwitchName={names[sw]} Switches={hostlist(names[m] for m in below)}", sw))
        if not rows:
            return lines
        rows.sort(key=lambda r: natural_key(r[0]))
        lines += [text for _name, text, _sw in rows]
        listed |= {sw for _name, _text, sw in rows}
        depth += 1


# -- block -----------------------------------------------------------------------------------------

def _blocks(att: Attachments, names: dict[str, str]) -> list[str]:
    """Disjoint blocks (connected groups of the host-leaf graph) in host name order, then BlockSizes."""
    B = nx.Graph()
    for host, leaves in att.leaves.items():
        B.add_edges_from((("host", host), ("leaf", leaf)) for leaf in leaves)
    groups = []
    for component in nx.connected_components(B):
        hosts = sorted((n for kind, n in component if kind == "host"), key=natural_key)
        leaves = sorted((n for kind, n in component if kind == "leaf"), key=lambda m: natural_key(names[m]))
        groups.append((hosts, leaves))
    groups.sort(key=lambda g: natural_key(g[0][0]))
    lines, sizes = [], []
    width = max(2, len(str(len(groups))))
    for i, (hosts, leaves) in enumerate(groups, 1):
        name = names[leaves[0]] if len(leaves) == 1 else f"block{i:0{width}d}"
        if len(leaves) > 1:
            lines.append(comment_text(f"# {name}: the hosts cabled to leaves {', '.join(names[m] for m in leaves)}"))
        lines.append(f"BlockName={name} Nodes={hostlist(hosts)}")
        sizes.append(len(hosts))
    base = min(sizes)
    planned = [base]
    while planned[-1] * 2 <= base * len(groups):
        planned.append(planned[-1] * 2)
    if len(set(sizes)) > 1:
        lines.append(f"# blocks hold {min(sizes)} to {max(sizes)} hosts: Slurm plans in base blocks of the smallest")
    lines.append("BlockSizes=" + ",".join(str(s) for s in planned))
    return lines


# -- the header ------------------------------------------------------------------------------------

def _header(G: nx.Graph, att: Attachments, names: dict[str, str], form: str) -> list[str]:
    tiers: dict[str, int] = {}
    for _n, d in G.nodes(data=True):
        if d["type"] == "switch":
            tiers[d.get("tier") or "unattached"] = tiers.get(d.get("tier") or "unattached", 0) + 1
    counts = ", ".join(f"{v} {k}" for k, v in sorted(tiers.items(), key=lambda kv: (tier_depth(kv[0]) is None,
                                                                                   tier_depth(kv[0]) or 0)))
    lines = [f"# Slurm topology.conf (TopologyPlugin=topology/{form}) of the InfiniBand fabric read from "
             f"{G.graph.get('source') or 'a fabric capture'}, written by topoweb.",
             f"# {len(att.leaves)} hosts; switches: {counts or 'none'}. Switch names are their system names "
             "made safe for Slurm."]
    multi = sorted((h for h, leaves in att.leaves.items() if len(leaves) > 1), key=natural_key)
    if multi and form == "tree":
        lines.append(f"# {len(multi)} hosts are cabled to several leaf switches (one per rail) and are listed under "
                     "each: Slurm logs \"Multiple leaf switches contain nodes\" for them.")
    lines += _unnamed_lines(G, att, names)
    for host, reason in att.unusable:
        lines.append(comment_text(f"# left out: host {host!r}: {reason}"))
    if att.unlinked:
        lines.append(comment_text(f"# left out, not cabled to a switch: {', '.join(att.unlinked)}"))
    return lines


def _unnamed_lines(G: nx.Graph, att: Attachments, names: dict[str, str]) -> list[str]:
    if not att.unnamed:
        return []
    by_leaf: dict[str, list[str]] = {}
    for ca, leaf in att.unnamed:
        by_leaf.setdefault(names[leaf] if leaf else "no switch", []).append(str(G.nodes[ca].get("guid") or ca))
    lines = [f"# {len(att.unnamed)} host adapters have no host name in their node description and are not listed "
             "(set it, e.g. with rdma-ndd, to include them):"]
    for leaf, guids in sorted(by_leaf.items(), key=lambda kv: natural_key(kv[0])):
        lines.append("#   " + comment_text(f"{leaf}: {', '.join(sorted(guids))}"))
    return lines
