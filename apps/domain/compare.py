"""Compare two snapshot documents (``apps/domain/analysis.py``) of a host, or two hosts.

``compare_docs(doc_a, doc_b)`` answers "what changed, and what did it do?" (journey 3: a NIC
moved under another switch, a link went from x8 to x16, a port came up) and "how does this host
differ from its peers?" (journey 5). ``doc_a`` is *before* (or the reference), ``doc_b`` *after*.

Returns a plain dict (JSON-ready)::

    {"changed": bool,
     "summary": [str, ...],   # one plain sentence per difference, most important first: port state,
                         # narrowed links, NIC/GPU count, NIC order, added/removed, other links,
                         # GPU->NIC picks, moved devices (grouped), NUMA (grouped), findings
     "devices": [{"name", "kind", "status": "added"|"removed"|"changed", "changes": [str]}],
     "links": [{"device", "kind", "before": str|null, "after": str|null, "before_gbs", "after_gbs",
                "status": "added"|"removed"|"changed"}],           # PCIe gen/width, NVLink counts
     "gpu_pairs": [{"a", "b", "before": {"path_class", "bottleneck_gbs", "p2p"}|null, "after": ...,
                    "text": "GPU0 <-> GPU1: PHB -> PIX, 12.0 -> 24.0 GB/s"}],
     "matrix": [{"gpu", "nic", "before": class|null, "after": class|null}],   # GPU x NIC cells
     "gpu_nic": [{"gpu", "before": {"nic", "path_class", "gdr", "bandwidth_gbs", "pxn_via"}|null,
                  "after": ..., "text": "GPU3 -> mlx5_2: PHB -> PXB, GDR now on, 12.0 -> 24.0 GB/s"}],
     "remote": [{"gpu", "before_gbs", "after_gbs", "text"}],   # GPU -> same GPU on an identical peer host
     "findings": {"fixed": [finding], "new": [finding], "kept": [finding]},
     "nic_order": bool,                           # same NICs, but GPUs pick them in another order
     "highlight_a": {node id: "removed"|"changed"}, "highlight_b": {node id: "added"|"changed"}}

Devices are matched by name (``GPU3``, ``mlx5_2``); PCIe switches and root complexes by PCI
address when they have one, else by graph id. All bandwidths are GB/s per direction.

>>> a = {"hostname": "h", "gpus": [], "nics": [], "graph": {"nodes": [], "edges": []}, "gpu_pairs": [],
...      "gpu_nic": [], "gpu_nic_matrix": [], "findings": [{"rule": "F01", "severity": "HIGH", "title": "x",
...      "devices": ["mlx5_0"], "message": "", "fix": "", "source": ""}]}
>>> r = compare_docs(a, {**a, "findings": []})
>>> r["changed"], [f["rule"] for f in r["findings"]["fixed"]]
(True, ['F01'])
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from apps.domain.cluster import path_between
from apps.domain.compare_attrs import PORT_ATTRS, attribute_changes, group_sentences, name_ranges, nvlink_changes
from apps.domain.compare_bandwidth import bandwidth_change, gpu_bandwidth_changes
from apps.domain.names import natural_key, pair_key

__all__ = ["compare_docs", "compare_summary", "short_summary", "doc_edges", "upstream_links", "describe_link"]

_DEVICE_KINDS = ("gpu", "nic", "nvswitch", "nvme", "switch", "root_complex", "root_port", "cpu", "other")


def _fmt(v: float | None) -> str:
    return "?" if v is None else f"{v:.1f}"


def doc_edges(doc: Mapping) -> list[dict]:
    """The document's graph edges with both endpoints as node ids.

    Some documents carry an edge whose ``source`` holds a citation instead of a node id (an edge
    attribute named ``source`` overwrote the endpoint). The tree edges (``pcie``, ``cpu_link``)
    are repaired from the node's ``parent``; other broken edges are dropped (NVLink bundles are
    also known from ``gpu_pairs``).
    """
    nodes = {n["id"]: n for n in (doc.get("graph") or {}).get("nodes", [])}
    out = []
    for e in (doc.get("graph") or {}).get("edges", []):
        s, t = e.get("source"), e.get("target")
        if s in nodes and t in nodes:
            out.append(dict(e))
            continue
        if t in nodes and e.get("kind") in ("pcie", "cpu_link") and nodes[t].get("parent") in nodes:
            out.append({**e, "source": nodes[t]["parent"], "citation": s})
    return out


def upstream_links(doc: Mapping) -> dict[str, dict]:
    """Node id -> the PCIe (or CPU) link to its parent, for every node that has a parent."""
    nodes = {n["id"]: n for n in (doc.get("graph") or {}).get("nodes", [])}
    out: dict[str, dict] = {}
    for e in doc_edges(doc):
        if e.get("kind") not in ("pcie", "cpu_link"):
            continue
        s, t = e["source"], e["target"]
        if nodes.get(t, {}).get("parent") == s:
            out[t] = e
        elif nodes.get(s, {}).get("parent") == t:
            out[s] = e
    return out


def describe_link(e: Mapping | None) -> str | None:
    """``"Gen4 x16"`` (``"Gen4 x8 (capable of x16)"`` when below capability); None without a link."""
    if not e:
        return None
    if e.get("kind") == "nvlink":
        return f"NVLink x{e.get('links') or '?'}"
    if e.get("kind") != "pcie":
        return e.get("kind")
    gen, width = e.get("gen"), e.get("width")
    text = f"Gen{gen or '?'} x{width or '?'}"
    extra = []
    if e.get("max_width") and width and width < e["max_width"]:
        extra.append(f"x{e['max_width']}")
    if e.get("max_gen") and gen and gen < e["max_gen"]:
        extra.append(f"Gen{e['max_gen']}")
    return text + (f" (capable of {' '.join(extra)})" if extra else "")


def _key(node: Mapping) -> str:
    """A device's identity across snapshots: its name for GPUs/NICs, else its PCI address."""
    if node.get("kind") in ("gpu", "nic", "cpu", "nvswitch"):
        return str(node["id"])
    return f"{node['kind']}@{node['bdf']}" if node.get("bdf") else str(node["id"])


def _nodes(doc: Mapping) -> dict[str, dict]:
    return {_key(n): n for n in (doc.get("graph") or {}).get("nodes", [])}


def _nic_facts(doc: Mapping) -> dict[str, dict]:
    return {n["name"]: n for n in doc.get("nics", [])}


def _nic_words(n: Mapping) -> str:
    state = n.get("state") or "state unknown"
    rate = f"{n['rate_gbps']:g} Gb/s" if isinstance(n.get("rate_gbps"), (int, float)) else "rate unknown"
    return f"{state}, {rate}"


def _device_children(nodes: Mapping[str, dict]) -> dict:
    """Parent id -> the GPUs and NICs directly under it."""
    out: dict = defaultdict(list)
    for n in nodes.values():
        if n["kind"] in ("gpu", "nic"):
            out[n.get("parent")].append(n["id"])
    return out


def _siblings(children: Mapping, node: Mapping) -> tuple:
    """The other GPUs and NICs directly under the same parent (what "where it sits" means to a user);
    ``children`` from ``_device_children``."""
    return tuple(sorted((i for i in children.get(node.get("parent"), ()) if i != node["id"]), key=natural_key))


def _where(parent: Mapping | None, siblings: tuple) -> str:
    if parent is None:
        return "no parent"
    label = {"switch": "a PCIe switch", "root_port": "a root port", "root_complex": "a root complex",
             "cpu": "the CPU"}.get(parent.get("kind"), parent.get("label") or "?")
    if parent.get("bdf"):
        label += f" {parent['bdf']}"
    return f"{label} with {', '.join(siblings)}" if siblings else f"{label} alone"


def _devices(doc_a: Mapping, doc_b: Mapping, attrs: list[dict]) -> tuple[list[dict], dict[str, str], dict[str, str]]:
    """Devices added, removed or changed; a changed one lists every attribute that differs
    (``attrs``: ``compare_attrs.attribute_changes``), a NIC's state and rate as one "port" change."""
    attr_texts: dict[str, list[str]] = defaultdict(list)
    for r in attrs:
        if not (r["kind"] == "nic" and r["attr"] in PORT_ATTRS):
            attr_texts[r["key"]].append(r["text"])
    na, nb = _nodes(doc_a), _nodes(doc_b)
    fa, fb = _nic_facts(doc_a), _nic_facts(doc_b)
    ids_a = {n["id"]: k for k, n in na.items()}
    ids_b = {n["id"]: k for k, n in nb.items()}
    parent_a = {k: ids_a.get(n.get("parent")) for k, n in na.items()}
    parent_b = {k: ids_b.get(n.get("parent")) for k, n in nb.items()}
    kids_a, kids_b = _device_children(na), _device_children(nb)
    out: list[dict] = []
    hl_a: dict[str, str] = {}
    hl_b: dict[str, str] = {}
    for k in sorted(set(na) | set(nb), key=natural_key):
        a, b = na.get(k), nb.get(k)
        node = b or a
        if node["kind"] not in _DEVICE_KINDS:
            continue
        name = node.get("label") if node["kind"] not in ("gpu", "nic") else node["id"]
        if a is None:
            out.append({"name": name, "kind": node["kind"], "status": "added", "changes": []})
            hl_b[b["id"]] = "added"
            continue
        if b is None:
            out.append({"name": name, "kind": node["kind"], "status": "removed", "changes": []})
            hl_a[a["id"]] = "removed"
            continue
        changes = []
        if node["kind"] in ("gpu", "nic"):
            sa, sb = _siblings(kids_a, a), _siblings(kids_b, b)
            pa, pb = na.get(parent_a.get(k) or ""), nb.get(parent_b.get(k) or "")
            kind_a, kind_b = (pa or {}).get("kind"), (pb or {}).get("kind")
            if sa != sb or kind_a != kind_b:
                changes.append(f"moved: now under {_where(pb, sb)} (was {_where(pa, sa)})")
        if node["kind"] == "nic" and k in fa and k in fb:
            x, y = fa[k], fb[k]
            if (x.get("state"), x.get("rate_gbps")) != (y.get("state"), y.get("rate_gbps")):
                changes.append(f"port {_nic_words(x)} -> {_nic_words(y)}")
        changes.extend(attr_texts.get(k, []))
        if changes:
            out.append({"name": name, "kind": node["kind"], "status": "changed", "changes": changes})
            hl_a[a["id"]] = hl_b[b["id"]] = "changed"
    return out, hl_a, hl_b


def _links(doc_a: Mapping, doc_b: Mapping, hl_a: dict, hl_b: dict) -> list[dict]:
    na, nb = _nodes(doc_a), _nodes(doc_b)
    ua, ub = upstream_links(doc_a), upstream_links(doc_b)
    out = []
    for k in sorted(set(na) & set(nb), key=natural_key):
        a, b = na[k], nb[k]
        la, lb = ua.get(a["id"]), ub.get(b["id"])
        if not la and not lb:
            continue
        da, db = describe_link(la), describe_link(lb)
        if da == db:
            continue
        name = a["id"] if a["kind"] in ("gpu", "nic") else a.get("label") or a["id"]
        status = "added" if la is None else "removed" if lb is None else "changed"
        out.append({"device": name, "kind": "pcie", "before": da, "after": db,
                    "before_gbs": (la or {}).get("expected_gbs"), "after_gbs": (lb or {}).get("expected_gbs"),
                    "status": status})
        hl_a.setdefault(a["id"], "changed")
        hl_b.setdefault(b["id"], "changed")
    return out


def _pair_state(p: Mapping | None) -> dict | None:
    if p is None:
        return None
    return {"path_class": p.get("path_class"), "bottleneck_gbs": p.get("bottleneck_gbs"), "p2p": p.get("p2p")}


def _gpu_pairs(doc_a: Mapping, doc_b: Mapping) -> list[dict]:
    pa = {pair_key(p["a"], p["b"]): p for p in doc_a.get("gpu_pairs", [])}
    pb = {pair_key(p["a"], p["b"]): p for p in doc_b.get("gpu_pairs", [])}
    out = []
    for key in sorted(set(pa) | set(pb), key=lambda k: (natural_key(k[0]), natural_key(k[1]))):
        x, y = _pair_state(pa.get(key)), _pair_state(pb.get(key))
        if x == y:
            continue
        text = f"{key[0]} <-> {key[1]}: "
        if x is None or y is None:
            text += "pair added" if x is None else "pair gone"
        else:
            bits = []
            if x["path_class"] != y["path_class"]:
                bits.append(f"{x['path_class']} -> {y['path_class']}")
            if x["p2p"] != y["p2p"]:
                bits.append("P2P now on" if y["p2p"] else "P2P now off")
            bits.append(f"{_fmt(x['bottleneck_gbs'])} -> {_fmt(y['bottleneck_gbs'])} GB/s")
            text += ", ".join(bits)
        out.append({"a": key[0], "b": key[1], "before": x, "after": y, "text": text})
    return out


def _nic_choice(e: Mapping | None) -> dict | None:
    if e is None:
        return None
    return {"nic": e.get("nic"), "path_class": e.get("path_class"), "gdr": e.get("gdr"),
            "bandwidth_gbs": e.get("bandwidth_gbs"), "pxn_via": e.get("pxn_via")}


def _gpu_nic(doc_a: Mapping, doc_b: Mapping) -> list[dict]:
    ca = {e["gpu"]: e for e in doc_a.get("gpu_nic", [])}
    cb = {e["gpu"]: e for e in doc_b.get("gpu_nic", [])}
    gpus = {g["name"] for g in doc_a.get("gpus", [])} | {g["name"] for g in doc_b.get("gpus", [])} | set(ca) | set(cb)
    out = []
    for g in sorted(gpus, key=natural_key):
        x, y = _nic_choice(ca.get(g)), _nic_choice(cb.get(g))
        if x == y:
            continue
        if x is None or y is None:
            text = (f"{g} -> {y['nic']}: now has a NIC ({y['path_class']}, "
                    f"{_fmt(y['bandwidth_gbs'])} GB/s)") if x is None else f"{g} -> {x['nic']}: no usable NIC any more"
        else:
            nic = y["nic"] if x["nic"] == y["nic"] else f"{y['nic']} (was {x['nic']})"
            bits = []
            if x["path_class"] != y["path_class"]:
                bits.append(f"{x['path_class']} -> {y['path_class']}")
            if x["gdr"] != y["gdr"]:
                bits.append("GDR now on" if y["gdr"] else "GDR now off")
            if x["pxn_via"] != y["pxn_via"]:
                bits.append(f"PXN relay via {y['pxn_via']}" if y["pxn_via"] else "no PXN relay any more")
            if x["bandwidth_gbs"] == y["bandwidth_gbs"]:
                bits.append(f"{_fmt(y['bandwidth_gbs'])} GB/s (unchanged)")
            else:
                bits.append(f"{_fmt(x['bandwidth_gbs'])} -> {_fmt(y['bandwidth_gbs'])} GB/s")
            text = f"{g} -> {nic}: " + ", ".join(bits)
        out.append({"gpu": g, "before": x, "after": y, "text": text})
    return out


def _matrix(doc_a: Mapping, doc_b: Mapping) -> list[dict]:
    ma = {(c["gpu"], c["nic"]): c.get("path_class") for c in doc_a.get("gpu_nic_matrix", [])}
    mb = {(c["gpu"], c["nic"]): c.get("path_class") for c in doc_b.get("gpu_nic_matrix", [])}
    return [{"gpu": g, "nic": n, "before": ma.get((g, n)), "after": mb.get((g, n))}
            for g, n in sorted(set(ma) | set(mb), key=lambda k: (natural_key(k[0]), natural_key(k[1])))
            if ma.get((g, n)) != mb.get((g, n))]


def _remote(doc: Mapping) -> dict[str, float | None]:
    """GPU -> bottleneck GB/s to the same GPU on an identical peer host (one rail, one switch)."""
    peer = {**doc, "hostname": f"{doc.get('hostname')}~peer"}
    out = {}
    for g in doc.get("gpus", []):
        try:
            out[g["name"]] = path_between(doc, g["name"], peer, g["name"]).get("bottleneck_gbs")
        except (KeyError, TypeError, ValueError):
            out[g["name"]] = None
    return out


def _remote_changes(doc_a: Mapping, doc_b: Mapping) -> list[dict]:
    ra, rb = _remote(doc_a), _remote(doc_b)
    out = []
    for g in sorted(set(ra) | set(rb), key=natural_key):
        x, y = ra.get(g), rb.get(g)
        if x != y:
            out.append({"gpu": g, "before_gbs": x, "after_gbs": y,
                        "text": f"{g} -> remote {g}: {_fmt(x)} -> {_fmt(y)} GB/s"})
    return out


def _finding_key(f: Mapping) -> tuple:
    return (f.get("rule"), tuple(sorted(f.get("devices") or [])))


def _findings(doc_a: Mapping, doc_b: Mapping) -> dict:
    """Same rule on the same devices: kept. Left over, a rule with the same title on both sides is
    kept too (its device list changed, e.g. one more NIC in a mixed-link-layer finding)."""
    ka = {_finding_key(f): f for f in doc_a.get("findings", [])}
    kb = {_finding_key(f): f for f in doc_b.get("findings", [])}
    kept = [f for k, f in kb.items() if k in ka]
    left_a = [f for k, f in ka.items() if k not in kb]
    left_b = [f for k, f in kb.items() if k not in ka]
    fixed = []
    for f in left_a:
        twin = next((g for g in left_b if (g.get("rule"), g.get("title")) == (f.get("rule"), f.get("title"))), None)
        if twin is None:
            fixed.append(f)
        else:
            left_b.remove(twin)
            kept.append({**twin, "devices_before": f.get("devices") or []})
    return {"fixed": fixed, "new": left_b, "kept": kept}


# Importance of each kind of difference (lower first): what stops or slows traffic comes first.
RANK_PORT_STATE, RANK_LINK_NARROWED, RANK_COUNT, RANK_NIC_ORDER, RANK_ADDED_REMOVED = 0, 1, 2, 3, 4
RANK_LINK_OTHER, RANK_GPU_NIC, RANK_MOVED, RANK_NUMA, RANK_FINDING, RANK_OTHER = 5, 6, 7, 8, 9, 10


def _ranked_summary(devices: list[dict], links: list[dict], gpu_nic: list[dict], findings: dict, nic_order: bool,
                    nic_counts: tuple[int, int], gpu_counts: tuple[int, int],
                    attrs: list[dict] = ()) -> list[tuple[int, str]]:
    """(rank, sentence) pairs: port state, narrowed links, counts, NIC order, then the rest.

    Many devices changing the same way (every GPU moved, eight ports from InfiniBand to Ethernet)
    read as one sentence naming every device, so a different machine model does not drown the
    list and nothing is dropped. ``attrs``: ``compare_attrs.attribute_changes``.
    """
    out: list[tuple[int, str]] = []
    moved: list[tuple[str, str]] = []
    ports: dict[str, list[str]] = defaultdict(list)
    unreported: list[str] = []
    added_removed: dict[str, list[str]] = {"added": [], "removed": []}
    for d in devices:
        if d["status"] != "changed":
            if d["kind"] in ("gpu", "nic"):
                added_removed[d["status"]].append(d["name"])
            continue
        for c in d["changes"]:
            if c.startswith("port ") and "state unknown" in c:
                unreported.append(d["name"])  # one side did not report the port: not a change of the port
            elif c.startswith("port "):
                ports[c].append(d["name"])
            elif c.startswith("moved"):
                moved.append((d["name"], c))
    for c, names in ports.items():
        out.append((RANK_PORT_STATE, f"{names[0]}: {c}" if len(names) == 1
                    else f"{len(names)} ports {c[5:]}: {name_ranges(names)}"))
    out.extend(group_sentences(attrs, skip=PORT_ATTRS))
    by_change: dict[tuple, list[dict]] = defaultdict(list)
    for lk in links:
        by_change[(lk["kind"], lk["before"], lk["after"])].append(lk)
    for (_kind, before, after), same in by_change.items():
        a, b = same[0].get("before_gbs"), same[0].get("after_gbs")
        narrowed = a is not None and b is not None and b < a
        what = (f"{same[0]['device']} link" if len(same) == 1
                else f"{len(same)} links ({name_ranges(lk['device'] for lk in same)})")
        out.append((RANK_LINK_NARROWED if narrowed else RANK_LINK_OTHER,
                    f"{what} {before or 'none'} -> {after or 'none'}"))
    if nic_counts[0] != nic_counts[1]:
        out.append((RANK_COUNT, f"NIC count {nic_counts[0]} -> {nic_counts[1]}"))
    if gpu_counts[0] != gpu_counts[1]:
        out.append((RANK_COUNT, f"GPU count {gpu_counts[0]} -> {gpu_counts[1]}"))
    if nic_order:
        out.append((RANK_NIC_ORDER, "NICs in another order: GPUs pick different NICs (" +
                    ", ".join(f"{e['gpu']}: {e['after']['nic']} instead of {e['before']['nic']}"
                              for e in gpu_nic if e["before"] and e["after"]
                              and e["before"]["nic"] != e["after"]["nic"])[:300] + ")"))
    elif len(gpu_nic) > 4:
        out.append((RANK_GPU_NIC, f"{len(gpu_nic)} GPUs reach their NIC differently ({name_ranges([e['gpu'] for e in gpu_nic])})"))
    else:
        out.extend((RANK_GPU_NIC, e["text"]) for e in gpu_nic)
    if len(moved) > 3:
        out.append((RANK_MOVED, f"{name_ranges([m[0] for m in moved])} sit elsewhere in the PCIe tree"))
    else:
        out.extend((RANK_MOVED, f"{name}: {c}") for name, c in moved)
    for status, names in added_removed.items():
        if len(names) > 3:
            out.append((RANK_ADDED_REMOVED, f"{name_ranges(names)} {status}"))
        else:
            out.extend((RANK_ADDED_REMOVED, f"{name} {status}") for name in names)
    if unreported:
        out.append((RANK_OTHER, f"port state and rate reported on one side only for {name_ranges(unreported)}"))
    for word in ("fixed", "new"):  # the same rule on several devices: one line with a count
        counts = Counter(f"{word}: {f['rule']} {f['title']}" for f in findings[word])
        out.extend((RANK_FINDING, text + (f" (x{n})" if n > 1 else "")) for text, n in counts.items())
    return out


def short_summary(diff: Mapping[str, Any], limit: int = 5) -> list[str]:
    """The first ``limit`` lines of ``diff["summary"]`` (already most important first), and
    "and N more" when there are more."""
    lines = list(diff.get("summary") or [])
    if len(lines) <= limit:
        return lines
    return lines[:limit] + [f"and {len(lines) - limit} more"]


def _summary_parts(doc_a: Mapping[str, Any], doc_b: Mapping[str, Any]) -> dict:
    """What the summary sentences are made of (devices, links, GPU -> NIC picks, findings)."""
    attrs = attribute_changes(doc_a, doc_b)
    devices, hl_a, hl_b = _devices(doc_a, doc_b, attrs)
    links = _links(doc_a, doc_b, hl_a, hl_b) + nvlink_changes(doc_a, doc_b)
    gpu_nic = _gpu_nic(doc_a, doc_b)
    findings = _findings(doc_a, doc_b)
    nics_a = sorted((n["name"] for n in doc_a.get("nics", [])), key=natural_key)
    nics_b = sorted((n["name"] for n in doc_b.get("nics", [])), key=natural_key)
    pick_a = [e["nic"] for e in sorted(doc_a.get("gpu_nic", []), key=lambda e: natural_key(e["gpu"]))]
    pick_b = [e["nic"] for e in sorted(doc_b.get("gpu_nic", []), key=lambda e: natural_key(e["gpu"]))]
    nic_order = nics_a == nics_b and sorted(pick_a) == sorted(pick_b) and pick_a != pick_b

    summary = [text for _, text in sorted(_ranked_summary(devices, links, gpu_nic, findings, nic_order,
                                                            (len(nics_a), len(nics_b)),
                                                            (len(doc_a.get("gpus", [])), len(doc_b.get("gpus", []))),
                                                            attrs),
                                          key=lambda rt: rt[0])]
    return {"devices": devices, "links": links, "gpu_nic": gpu_nic, "findings": findings, "nic_order": nic_order,
            "summary": summary, "highlight_a": hl_a, "highlight_b": hl_b, "attributes": attrs}


def _fallback_line(pairs: list, matrix: list) -> str:
    return f"{len(pairs)} GPU pair(s) and {len(matrix)} GPU x NIC cell(s) changed"


def compare_docs(doc_a: Mapping[str, Any], doc_b: Mapping[str, Any]) -> dict:
    """What differs from ``doc_a`` (before / reference) to ``doc_b`` (after / this host).

    Parameters
    ----------
    doc_a, doc_b : mapping
        Snapshot documents (schema 1); missing keys read as empty.

    Returns
    -------
    dict
        See the module docstring.
    """
    parts = _summary_parts(doc_a, doc_b)
    pairs = _gpu_pairs(doc_a, doc_b)
    matrix = _matrix(doc_a, doc_b)
    remote = _remote_changes(doc_a, doc_b)
    devices, links, gpu_nic, findings = parts["devices"], parts["links"], parts["gpu_nic"], parts["findings"]
    summary = parts["summary"]
    changed = bool(devices or links or pairs or gpu_nic or matrix or remote or findings["fixed"] or findings["new"])
    if changed and not summary:
        summary.append(_fallback_line(pairs, matrix))
    return {"changed": changed, "summary": summary, "devices": devices, "links": links, "gpu_pairs": pairs,
            "matrix": matrix, "gpu_nic": gpu_nic, "remote": remote, "findings": findings,
            "nic_order": parts["nic_order"], "highlight_a": parts["highlight_a"], "highlight_b": parts["highlight_b"],
            "attributes": parts["attributes"], "bandwidth": bandwidth_change(doc_a, doc_b),
            "gpu_gbs": gpu_bandwidth_changes(doc_a, doc_b)}


def compare_summary(doc_a: Mapping[str, Any], doc_b: Mapping[str, Any]) -> list[str]:
    """``compare_docs(doc_a, doc_b)["summary"]``, computing only what the sentences need: GPU pairs,
    matrix cells and remote paths (a path query per GPU on each side) are looked at only when
    nothing else differs. For lists of many hosts (the cluster page's odd ones out)."""
    parts = _summary_parts(doc_a, doc_b)
    if parts["summary"]:
        return parts["summary"]
    pairs = _gpu_pairs(doc_a, doc_b)
    matrix = _matrix(doc_a, doc_b)
    findings = parts["findings"]
    changed = bool(parts["devices"] or parts["links"] or pairs or parts["gpu_nic"] or matrix
                   or findings["fixed"] or findings["new"]) or bool(_remote_changes(doc_a, doc_b))
    return [_fallback_line(pairs, matrix)] if changed else []
