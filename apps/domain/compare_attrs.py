"""Every attribute change between two snapshot documents, device by device, and the sentences
that group them (``compare.py`` builds on it).

``attribute_changes(doc_a, doc_b)`` reads each GPU, NIC port, bridge and CPU of both documents
(matched by name, bridges by PCI address, as ``compare.py`` matches them) and returns one record
per attribute that differs::

    {"key": "mlx5_0", "device": "mlx5_0", "kind": "nic", "attr": "link_layer", "label": "link layer",
     "before": "InfiniBand", "after": "Ethernet", "text": "link layer InfiniBand -> Ethernet",
     "one_side": False}          # True: only one side reports the attribute (newly known or no longer reported)

NICs: link layer, rate, state, physical state, width, lane speed, NUMA node, firmware, port and
node GUID, PCI address, network interfaces, transport, role (GPU traffic or not). GPUs: model,
NUMA node, active and listed NVLinks, CPU affinity, PCI address, UUID, GPU memory NUMA id.
Bridges and CPUs: NUMA node and label. The identities of the hardware (GUIDs, UUIDs) are compared
only between two snapshots of one host: another host's are always different and say nothing.

``nvlink_changes`` compares the NVLink bundles (GPU to NVSwitch or GPU to GPU: link count) and
``group_sentences`` turns records into one sentence per (kind, attribute, before, after), naming
every device ("8 ports link layer InfiniBand -> Ethernet: mlx5_0, mlx5_3..mlx5_6, mlx5_9..mlx5_11"),
none dropped.

>>> a = {"hostname": "h", "gpus": [], "graph": {"nodes": [], "edges": []},
...      "nics": [{"name": "mlx5_0", "link_layer": "InfiniBand"}, {"name": "mlx5_1", "link_layer": "InfiniBand"}]}
>>> b = {**a, "nics": [{"name": n, "link_layer": "Ethernet"} for n in ("mlx5_0", "mlx5_1")]}
>>> group_sentences(attribute_changes(a, b))
[(0, '2 ports link layer InfiniBand -> Ethernet: mlx5_0, mlx5_1')]
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from apps.domain.names import natural_key

__all__ = ["attribute_changes", "nvlink_changes", "group_sentences", "name_ranges", "NIC_ATTRS", "GPU_ATTRS"]

# (attribute, words, summary rank): lower ranks come first in the summary (compare.py's ranks)
NIC_ATTRS = (("link_layer", "link layer", 0), ("rate_gbps", "rate", 0), ("state", "state", 0),
             ("phys_state", "physical state", 0), ("width", "width", 1), ("speed", "lane speed", 1),
             ("compute", "role", 2), ("transport", "transport", 2), ("numa", "NUMA node", 8),
             ("bdf", "PCI address", 7), ("netdevs", "network interface", 9), ("firmware", "firmware", 9),
             ("port_guid", "port GUID", 10), ("node_guid", "node GUID", 10))
GPU_ATTRS = (("model", "model", 2), ("nvlink_active", "active NVLinks", 1), ("nvlink_total", "NVLinks listed", 1),
             ("numa", "NUMA node", 8), ("gpu_numa_id", "GPU memory NUMA node", 8), ("bdf", "PCI address", 7),
             ("cpu_affinity", "CPU affinity", 9), ("uuid", "UUID", 10))
BRIDGE_ATTRS = (("numa", "NUMA node", 8), ("label", "name", 10))
# what names the hardware itself: only meaningful between two snapshots of one host
IDENTITY = {"port_guid", "node_guid", "uuid"}
# NIC state and rate read as one "port" change in compare.py (the words users know from ibstat)
PORT_ATTRS = {"state", "rate_gbps"}

NOUNS = {"nic": ("port", "ports"), "gpu": ("GPU", "GPUs"), "switch": ("PCIe switch", "PCIe switches"),
         "root_port": ("root port", "root ports"), "root_complex": ("root complex", "root complexes"),
         "nvswitch": ("NVSwitch", "NVSwitches"), "cpu": ("CPU", "CPUs"), "nvme": ("NVMe drive", "NVMe drives"),
         "other": ("device", "devices"), "link": ("link", "links")}


def _words(attr: str, value: Any) -> str:
    if value is None or value == [] or value == "":
        return "not reported"
    if attr == "rate_gbps" and isinstance(value, (int, float)):
        return f"{value:g} Gb/s"
    if attr == "compute":
        return "GPU traffic" if value else "storage / management"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def _key(node: Mapping) -> str:
    if node.get("kind") in ("gpu", "nic", "cpu", "nvswitch"):
        return str(node["id"])
    return f"{node['kind']}@{node['bdf']}" if node.get("bdf") else str(node["id"])


def _merged(doc: Mapping) -> dict[str, dict]:
    """Device key -> {"kind", "name", attribute: value}: graph node, its attrs, and the document's
    gpus/nics entry (which wins: it is what the pages show)."""
    out: dict[str, dict] = {}
    for n in (doc.get("graph") or {}).get("nodes") or []:
        kind = n.get("kind")
        name = n["id"] if kind in ("gpu", "nic") else (n.get("label") or n["id"])
        out[_key(n)] = {**(n.get("attrs") or {}), "numa": n.get("numa"), "bdf": n.get("bdf"), "label": n.get("label"),
                        "kind": kind, "name": name}
    for kind, entries in (("gpu", doc.get("gpus")), ("nic", doc.get("nics"))):
        for e in entries or []:
            name = e.get("name")
            if not name:
                continue
            cur = out.setdefault(name, {"kind": kind, "name": name})
            cur.update({k: v for k, v in e.items() if k not in ("name", "node", "label")})
            cur["kind"], cur["name"] = kind, name
    return out


def attribute_changes(doc_a: Mapping[str, Any], doc_b: Mapping[str, Any]) -> list[dict]:
    """One record per attribute that differs, for the devices present in both documents (added
    and removed devices are ``compare.py``'s), devices in natural order.

    Parameters
    ----------
    doc_a, doc_b : mapping
        Snapshot documents, *before* and *after* (or the reference and this host).

    Returns
    -------
    list of dict
        See the module docstring.
    """
    ma, mb = _merged(doc_a), _merged(doc_b)
    same_host = (doc_a.get("hostname") or "") == (doc_b.get("hostname") or "")
    out = []
    for key in sorted(set(ma) & set(mb), key=natural_key):
        a, b = ma[key], mb[key]
        kind = b["kind"]
        table = NIC_ATTRS if kind == "nic" else GPU_ATTRS if kind == "gpu" else BRIDGE_ATTRS
        for attr, label, _rank in table:
            if attr in IDENTITY and not same_host:
                continue
            x, y = a.get(attr), b.get(attr)
            if isinstance(x, (list, tuple)) or isinstance(y, (list, tuple)):
                x, y = sorted(x or []), sorted(y or [])
            if x == y or (x in (None, "", []) and y in (None, "", [])):
                continue
            if attr == "label" and kind in ("switch", "root_port", "root_complex") and "inferred" in f"{x}{y}":
                continue  # an inferred bridge's label is ours, not the report's
            one_side = x in (None, "", []) or y in (None, "", [])
            out.append({"key": key, "device": b["name"], "kind": kind, "attr": attr, "label": label, "before": x, "after": y,
                        "one_side": one_side,
                        "text": f"{label} {_words(attr, x)} -> {_words(attr, y)}"})
    return out


def _nvlink_bundles(doc: Mapping) -> dict[tuple[str, str], dict]:
    nodes = {n["id"]: n for n in (doc.get("graph") or {}).get("nodes") or []}
    out = {}
    for e in (doc.get("graph") or {}).get("edges") or []:
        if e.get("kind") != "nvlink":
            continue
        s, t = e.get("source"), e.get("target")
        if s not in nodes or t not in nodes:
            continue
        names = sorted((nodes[s].get("label") if nodes[s]["kind"] == "nvswitch" else s,
                        nodes[t].get("label") if nodes[t]["kind"] == "nvswitch" else t), key=natural_key)
        out[(names[0], names[1])] = e
    return out


def _bundle_words(e: Mapping | None) -> str | None:
    if not e:
        return None
    return f"NVLink x{e.get('links') or '?'}"


def nvlink_changes(doc_a: Mapping[str, Any], doc_b: Mapping[str, Any]) -> list[dict]:
    """The NVLink bundles whose link count changed, appeared or went: ``compare.py``'s link
    records (``kind`` "nvlink"), with the bundle's GB/s per direction."""
    ba, bb = _nvlink_bundles(doc_a), _nvlink_bundles(doc_b)
    out = []
    for key in sorted(set(ba) | set(bb), key=lambda k: (natural_key(k[0]), natural_key(k[1]))):
        x, y = ba.get(key), bb.get(key)
        if _bundle_words(x) == _bundle_words(y):
            continue
        out.append({"device": f"{key[0]} - {key[1]}", "kind": "nvlink", "before": _bundle_words(x),
                    "after": _bundle_words(y), "before_gbs": (x or {}).get("expected_gbs"),
                    "after_gbs": (y or {}).get("expected_gbs"),
                    "status": "added" if x is None else "removed" if y is None else "changed"})
    return out


def name_ranges(names: Iterable[str]) -> str:
    """Every name, runs of one prefix with consecutive numbers as ranges:
    ``mlx5_0, mlx5_3..mlx5_6``.

    >>> name_ranges(["mlx5_3", "mlx5_0", "mlx5_4", "mlx5_5", "GPU1"])
    'GPU1, mlx5_0, mlx5_3..mlx5_5'
    """
    parts: list[str] = []
    run: list[tuple[str, int, str]] = []

    def flush() -> None:
        if len(run) >= 3:
            parts.append(f"{run[0][2]}..{run[-1][2]}")
        else:
            parts.extend(r[2] for r in run)
        run.clear()

    for name in sorted(set(names), key=natural_key):
        m = re.match(r"^(.*?)(\d+)$", name)
        if m is None:
            flush()
            parts.append(name)
            continue
        prefix, number = m.group(1), int(m.group(2))
        if run and (run[-1][0] != prefix or run[-1][1] + 1 != number):
            flush()
        run.append((prefix, number, name))
    flush()
    return ", ".join(parts)


def group_sentences(records: Iterable[Mapping], *, skip: set[str] = frozenset()) -> list[tuple[int, str]]:
    """(rank, sentence) per (kind, attribute, before, after), naming every device:
    "mlx5_0: link layer InfiniBand -> Ethernet" for one, "8 ports link layer InfiniBand -> Ethernet:
    mlx5_0..mlx5_7" for several. Attributes known on one side only read as one sentence per
    attribute ("firmware reported on one side only: ..."). ``skip``: attributes said elsewhere."""
    ranks = {(k, a): r for k, table in (("nic", NIC_ATTRS), ("gpu", GPU_ATTRS)) for a, _l, r in table}
    groups: dict[tuple, list[str]] = defaultdict(list)
    one_side: dict[tuple, list[str]] = defaultdict(list)
    for r in records:
        if r["attr"] in skip:
            continue
        if r["one_side"]:
            one_side[(r["kind"], r["attr"], r["label"])].append(r["device"])
            continue
        groups[(r["kind"], r["attr"], r["label"], _words(r["attr"], r["before"]), _words(r["attr"], r["after"]))].append(
            r["device"])
    out: list[tuple[int, str]] = []
    for (kind, attr, label, x, y), names in groups.items():
        rank = ranks.get((kind, attr), 8)
        if len(names) == 1:
            out.append((rank, f"{names[0]}: {label} {x} -> {y}"))
        else:
            noun = NOUNS.get(kind, NOUNS["other"])[1]
            out.append((rank, f"{len(names)} {noun} {label} {x} -> {y}: {name_ranges(names)}"))
    for (kind, attr, label), names in one_side.items():
        out.append((10, f"{label} reported on one side only for {name_ranges(names)}"))
    return out
