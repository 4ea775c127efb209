"""Plotly figures built from snapshot documents (``apps/domain/analysis.py``): pure functions.

Every builder ``*_spec`` takes documents (plain dicts) and returns the figure as a plain dict
``{"data": [trace, ...], "layout": {...}}``; ``*_figure`` wraps it in a
``plotly.graph_objects.Figure`` (validated: what the tests assert on, ``fig.data`` and
``fig.layout``) and ``*_figure_json`` serialises it straight into the page (no plotly.py object
tree: building and validating one cost the host page more than everything else).
``static/js/plots.js`` renders the JSON with the vendored Plotly.js. Nothing here touches the
database.

Strings that came from a node (hostnames, device names, notes) are HTML-escaped before they go
into figure text: Plotly renders a few tags (``<b>``, ``<br>``) in labels and hovers and decodes
entities, so an escaped name shows literally and never becomes markup.

Bandwidths are GB/s per direction everywhere, as in the documents.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from typing import Any, Iterable, Mapping

import plotly.graph_objects as go

from apps.domain.compare import describe_link, doc_edges, upstream_links
from apps.domain.names import natural_key
from apps.domain.nvlink_figures import nvlink_bundles
from apps.explorer.figure_labels import NAME_SHIFTS, PLOT_WIDTH_PX, Labels, link_label_points, scale, text_width
from apps.explorer.figure_matrices import gpu_matrix_spec, nic_matrix_spec
from apps.explorer.figures_base import FONT, base_layout as _base_layout, esc, fmt_gbs as _fmt

__all__ = ["host_figure", "gpu_matrix_figure", "nic_matrix_figure", "path_figure", "capacity_figure",
           "host_figure_json", "gpu_matrix_figure_json", "nic_matrix_figure_json", "path_figure_json",
           "capacity_figure_json", "to_json", "BANDS", "band_of", "node_positions"]

KIND_STYLE = {  # symbol, size, colour, legend name
    "cpu": ("square", 26, "#344054", "CPU socket / NUMA node"),
    "root_complex": ("circle", 13, "#868e96", "PCIe root complex (host bridge)"),
    "root_port": ("circle", 9, "#adb5bd", "PCIe root port"),
    "switch": ("hexagon", 17, "#1c7ed6", "PCIe switch"),
    "gpu": ("square", 24, "#2f9e44", "GPU"),
    "nic": ("diamond", 22, "#7048e8", "NIC (HCA port)"),
    "nvswitch": ("star-square", 22, "#0b7285", "NVSwitch"),
    "nvme": ("circle", 11, "#adb5bd", "NVMe drive"),
    "other": ("circle", 9, "#ced4da", "other PCIe device"),
}
NAME_FONTS = {"nic": dict(size=12.5, color="#5f3dc4"), "gpu": dict(size=12, color="#212529")}  # names under markers
# (upper bound GB/s per direction, colour, legend label)
BANDS = (
    (8.0, "#c92a2a", "< 8 GB/s"),
    (20.0, "#f08c00", "8-20 GB/s"),
    (40.0, "#1971c2", "20-40 GB/s"),
    (100.0, "#2b8a3e", "40-100 GB/s"),
    (math.inf, "#5f3dc4", "100+ GB/s"),
)
UNKNOWN_BAND = (None, "#adb5bd", "bandwidth unknown")
HIGHLIGHT = {"added": "#2b8a3e", "removed": "#c92a2a", "changed": "#f08c00"}
LEAF_KINDS = ("gpu", "nic", "nvme", "other")


def band_of(gbs: float | None) -> tuple:
    """The colour band of a bandwidth (GB/s per direction)."""
    if gbs is None:
        return UNKNOWN_BAND
    for band in BANDS:
        if gbs < band[0]:
            return band
    return BANDS[-1]


def _gbs(e: Mapping | None) -> float | None:
    if not e:
        return None
    v = e.get("expected_gbs")
    return v if v is not None else e.get("spec_gbs")


# -- host drawing -----------------------------------------------------------------------------


def node_positions(doc: Mapping) -> dict[str, tuple[float, float]]:
    """Node id -> (x, y): sockets on top, bridges and switches by depth, devices on the bottom row.

    Leaves are placed left to right in tree order (socket by socket, children in natural name
    order), a parent sits above the middle of its children, and the NVSwitch lies below the GPUs.
    """
    nodes = {n["id"]: n for n in (doc.get("graph") or {}).get("nodes", [])}
    children: dict[str | None, list[str]] = defaultdict(list)
    for nid, n in nodes.items():
        parent = n.get("parent") if n.get("parent") in nodes else None
        if n["kind"] == "nvswitch":
            continue
        children[parent].append(nid)
    for k in children:
        children[k].sort(key=lambda i: (nodes[i]["kind"] in LEAF_KINDS, natural_key(nodes[i].get("label") or i)
                                        if nodes[i]["kind"] not in LEAF_KINDS else natural_key(i)))
    roots = sorted(children.get(None, []), key=lambda i: (nodes[i]["kind"] != "cpu", natural_key(i)))
    depth: dict[str, int] = {}
    pos_x: dict[str, float] = {}
    cursor = [0.0]

    def walk(nid: str, d: int) -> None:
        depth[nid] = d
        kids = children.get(nid, [])
        if nodes[nid]["kind"] in LEAF_KINDS or not kids:
            pos_x[nid] = cursor[0]
            cursor[0] += 1.0
            return
        for k in kids:
            walk(k, d + 1)
        xs = [pos_x[k] for k in kids]
        pos_x[nid] = (min(xs) + max(xs)) / 2

    for r in roots:
        walk(r, 0)
        cursor[0] += 0.6  # a gap between sockets
    inner = [depth[i] for i in depth if nodes[i]["kind"] not in LEAF_KINDS] or [0]
    bottom = max(inner) + 1
    pos = {}
    for nid, x in pos_x.items():
        kind = nodes[nid]["kind"]
        d = float(bottom if kind in LEAF_KINDS else depth[nid])
        if kind == "gpu":
            d += 0.5  # GPUs half a row below NICs and drives, so neighbouring labels never collide
        pos[nid] = (x, -d)
    gpus = [pos[i][0] for i in pos if nodes[i]["kind"] == "gpu"]
    for nid, n in nodes.items():
        if n["kind"] == "nvswitch":
            mid = (min(gpus) + max(gpus)) / 2 if gpus else 0.0
            pos[nid] = (mid, -float(bottom) - 1.6)
    return pos


def _node_hover(n: Mapping, doc: Mapping, nic_facts: Mapping, gpu_facts: Mapping, up: Mapping) -> str:
    lines = [f"<b>{esc(n.get('label') or n['id'])}</b> ({KIND_STYLE.get(n['kind'], KIND_STYLE['other'])[3]})"]
    if n.get("bdf"):
        lines.append(f"PCI address {esc(n['bdf'])}")
    if n.get("numa") is not None:
        lines.append(f"NUMA node {esc(n['numa'])}")
    if n["kind"] == "gpu":
        g = gpu_facts.get(n["id"], {})
        if g.get("model"):
            lines.append(esc(g["model"]))
        if g.get("nic"):
            lines.append(f"NCCL sends via {esc(g['nic'])}")
        if g.get("cpu_affinity"):
            lines.append(f"CPU affinity {esc(g['cpu_affinity'])}")
    if n["kind"] == "nic":
        f = nic_facts.get(n["id"], {})
        rate = f"{f['rate_gbps']:g} Gb/s line rate" if isinstance(f.get("rate_gbps"), (int, float)) else "rate unknown"
        lines.append(f"port {esc(f.get('port') or '?')}: {esc(f.get('state') or 'state unknown')}, {rate}")
        if f.get("link_layer"):
            lines.append(esc(f["link_layer"]))
        if f.get("compute") is False:
            lines.append("not used for GPU traffic (storage / management)")
    link = up.get(n["id"])
    if link and link.get("kind") == "pcie":
        lines.append(f"uplink PCIe {esc(describe_link(link))}, {_fmt(_gbs(link))} GB/s per direction")
    if n.get("inferred"):
        lines.append("<i>inferred from nvidia-smi topo -m (not seen directly)</i>")
    return "<br>".join(lines)


def _short(n: Mapping, nic_facts: Mapping) -> str:
    if n["kind"] == "nic":
        return esc(n["id"])
    if n["kind"] == "gpu":
        return esc(n["id"])
    if n["kind"] == "cpu":
        return esc(n.get("label") or n["id"])
    return ""


def _curve(x0: float, x1: float, y: float, depth: float, steps: int = 12) -> tuple[list, list]:
    xs, ys = [], []
    for i in range(steps + 1):
        t = i / steps
        xs.append(x0 + (x1 - x0) * t)
        ys.append(y - depth * 4 * t * (1 - t))
    return xs, ys


def _nvlink_bundles(doc: Mapping) -> tuple[dict, list]:
    """(GPU -> (links, GB/s, assumed) into the NVSwitch, [(a, b, links, GB/s, assumed) direct NVLink pairs]):
    the figures the capacity page states too (``nvlink_figures.nvlink_bundles``)."""
    return nvlink_bundles(doc)


def host_spec(doc: Mapping, *, highlight: Mapping[str, str] | None = None, title: str | None = None,
              height: int = 600, legend: bool = True, plot_width: float = PLOT_WIDTH_PX) -> dict:
    """The host drawn as the hardware is laid out.

    Traces: PCIe links by bandwidth band (dashed when inferred), degraded links, NVLink bundles,
    P2P gaps, then one marker trace per device kind (hollow when inferred) with the GPU and NIC
    traces carrying ``customdata = [["gpu", "GPU0"], ...]`` for click handling. ``plot_width``: about
    how wide the page draws it (``PLOT_WIDTH_PX``, ``CARD_WIDTH_PX``, ``HALF_WIDTH_PX``), so link
    labels and NIC names are spaced not to overlap (``figure_labels``).
    """
    nodes = {n["id"]: n for n in (doc.get("graph") or {}).get("nodes", [])}
    pos = node_positions(doc)
    nic_facts = {n["name"]: n for n in doc.get("nics", [])}
    gpu_facts = {g["name"]: g for g in doc.get("gpus", [])}
    up = upstream_links(doc)
    data: list[dict] = []
    shapes: list[dict] = []
    annotations: list[dict] = []

    # PCIe / CPU tree links
    groups: dict[tuple, dict] = {}
    link_labels: list[tuple] = []  # (parent, text, x, y, hover, rank) of each labelled link (figure_labels)
    degraded = {"x": [], "y": []}
    for nid, n in nodes.items():
        parent = n.get("parent")
        if parent not in pos or nid not in pos:
            continue
        link = up.get(nid)
        (x0, y0), (x1, y1) = pos[parent], pos[nid]
        gbs = _gbs(link)
        band = band_of(gbs)
        inferred = bool((link or {}).get("inferred") or n.get("inferred"))
        assumed = bool((link or {}).get("assumed"))
        g = groups.setdefault((band[2], inferred, assumed),
                              {"x": [], "y": [], "band": band, "inferred": inferred, "assumed": assumed})
        g["x"] += [x0, x1, None]
        g["y"] += [y0, y1, None]
        if link and link.get("degraded"):
            degraded["x"] += [x0, x1, None]
            degraded["y"] += [y0, y1, None]
        mid = (x0 + (x1 - x0) * 0.5, y0 + (y1 - y0) * 0.5)
        rank = 0 if link and link.get("degraded") else 1 if n["kind"] in ("gpu", "nic", "switch") else 2
        if link and link.get("kind") == "pcie" and assumed and not (link.get("gen") or link.get("width")):
            link_labels.append((parent, "*", *mid,
                                f"PCIe between {esc(nodes[parent].get('label'))} and {esc(n.get('label') or nid)}"
                                f"<br>{_fmt(gbs)} GB/s per direction (* assumed)<br>{esc(link.get('note'))}", rank))
        elif link and link.get("kind") == "pcie" and (link.get("gen") or link.get("width")):
            note = f"<br>{esc(link['note'])}" if link.get("note") else ""
            text = f"G{link.get('gen') or '?'} x{link.get('width') or '?'}" + ("*" if assumed else "")
            hover = (f"PCIe {esc(describe_link(link))} between {esc(nodes[parent].get('label'))} "
                     f"and {esc(n.get('label') or nid)}<br>{_fmt(gbs)} GB/s per direction expected "
                     f"({_fmt(link.get('spec_gbs'))} spec){note}")
            link_labels.append((parent, text, *mid, hover, rank))
    order = {b[2]: i for i, b in enumerate(BANDS)}
    for (label, inferred, assumed), g in sorted(groups.items(),
                                                key=lambda kv: (order.get(kv[0][0], 99), kv[0][1], kv[0][2])):
        data.append(dict(type="scatter", mode="lines", x=g["x"], y=g["y"], hoverinfo="skip",
                         line=dict(color=g["band"][1], width=2.5,
                                   dash="dot" if assumed else "dash" if inferred else "solid"),
                         name=f"PCIe link {label}" + (" * assumed" if assumed else " (inferred)" if inferred else ""),
                         legendgroup="links", meta="assumed" if assumed else "link"))
    if degraded["x"]:
        data.append(dict(type="scatter", mode="lines", x=degraded["x"], y=degraded["y"], hoverinfo="skip",
                         line=dict(color="#e03131", width=7), opacity=0.35,
                         name="degraded link (below its capability)"))
    sizes = {nid: KIND_STYLE.get(n["kind"], KIND_STYLE["other"])[1] for nid, n in nodes.items()}
    labels_x, labels_y, labels_text, labels_hover = link_label_points(link_labels, pos, height, plot_width, sizes)
    if labels_x:
        data.append(dict(type="scatter", mode="text", x=labels_x, y=labels_y, text=labels_text,
                         textfont=dict(size=12, color="#495057"), hovertext=labels_hover, hoverinfo="text",
                         showlegend=False, name="PCIe link labels"))

    # inter-socket link: a bar across the socket row
    cpus = sorted((i for i in nodes if nodes[i]["kind"] == "cpu" and i in pos), key=lambda i: pos[i][0])
    inter = [e for e in doc_edges(doc) if e.get("kind") == "inter_socket"] or \
        [e for e in (doc.get("graph") or {}).get("edges", []) if e.get("kind") == "inter_socket"]
    if len(cpus) > 1:
        gbs = _gbs(inter[0]) if inter else None
        xs = [pos[c][0] for c in cpus]
        y = pos[cpus[0]][1]
        note = esc(inter[0].get("note")) if inter and inter[0].get("note") else ""
        star = "*" if inter and inter[0].get("assumed") else ""
        data.append(dict(type="scatter", mode="lines", x=[min(xs), max(xs)], y=[y, y], hoverinfo="text",
                         hovertext=f"inter-socket link (UPI / xGMI): {_fmt(gbs)} GB/s per direction{star}<br>{note}",
                         line=dict(color=band_of(gbs)[1], width=4, dash="dot"),
                         name="inter-socket link (UPI / xGMI)" + (" * assumed" if star else ""),
                         meta="assumed" if star else "inter_socket"))
        annotations.append(dict(x=(min(xs) + max(xs)) / 2, y=y, yshift=9, showarrow=False,
                                text=f"{_fmt(gbs)} GB/s{star}", font=dict(size=12.5, color="#495057")))

    # NVLink
    to_switch, direct = _nvlink_bundles(doc)
    nvs = next((i for i in nodes if nodes[i]["kind"] == "nvswitch"), None)
    if to_switch and nvs in pos:
        xs, ys, tx, ty, tt = [], [], [], [], []
        sx, sy = pos[nvs]
        for gname, (links, gbs, _assumed) in sorted(to_switch.items(), key=lambda kv: natural_key(kv[0])):
            if gname not in pos:
                continue
            gx, gy = pos[gname]
            xs += [gx, gx, None]
            ys += [gy, sy, None]
            tx.append(gx)
            ty.append((gy + sy) / 2)
            tt.append(f"NV{links}" if links else "NVLink")
        gx = [pos[g][0] for g in to_switch if g in pos]
        data.append(dict(type="scatter", mode="lines", x=xs, y=ys, hoverinfo="skip",
                         line=dict(color="#0b7285", width=3), name="NVLink bundle to NVSwitch (NV# = links)"))
        bws = {gbs for _, gbs, _ in to_switch.values()}
        nv_star = "*" if any(a for _, _, a in to_switch.values()) else ""
        if len(set(tt)) == 1:
            bw = f", {_fmt(next(iter(bws)))} GB/s per direction{nv_star}" if len(bws) == 1 else nv_star
            annotations.append(dict(x=sx, y=sy, yshift=-16, xanchor="center", yanchor="top",
                                    showarrow=False, text=f"NVSwitch: {tt[0]} per GPU{bw}",
                                    font=dict(size=12, color="#0b7285")))
        else:
            data.append(dict(type="scatter", mode="text", x=tx, y=[sy + 0.35] * len(tx), text=tt, showlegend=False,
                             hoverinfo="skip", textfont=dict(size=12, color="#0b7285"), name="NVLink counts"))
        if gx:
            data.append(dict(type="scatter", mode="lines", x=[min(gx) - 0.3, max(gx) + 0.3], y=[sy, sy],
                             line=dict(color="#0b7285", width=10), hoverinfo="skip", showlegend=False,
                             name="NVSwitch fabric"))
    if direct:
        y = min((pos[g][1] for g in gpu_facts if g in pos), default=0.0)
        for a, b, links, gbs, assumed in direct:
            if a not in pos or b not in pos:
                continue
            xa, xb = pos[a][0], pos[b][0]
            cx, cy = _curve(xa, xb, y - 0.15, 0.25 + 0.12 * abs(xb - xa))
            data.append(dict(type="scatter", mode="lines", x=cx, y=cy, hoverinfo="text",
                             hovertext=f"NVLink {esc(a)} - {esc(b)}: {links or '?'} links, {_fmt(gbs)} GB/s per "
                                       f"direction{' (* assumed per-link rate)' if assumed else ''}",
                             line=dict(color="#0b7285", width=1.5 + (links or 1)), legendgroup="nvlink",
                             showlegend=False, name=f"NVLink {a}-{b}"))
            annotations.append(dict(x=(xa + xb) / 2, y=min(cy), text=(f"NV{links}" if links else "NV") + ("*" if assumed else ""),
                                    showarrow=False, font=dict(size=12, color="#0b7285"), yshift=-7))
        data.append(dict(type="scatter", mode="lines", x=[None], y=[None], line=dict(color="#0b7285", width=3),
                         legendgroup="nvlink", name="NVLink bundle (NV# = links; thicker = more)"))

    # P2P gaps
    gaps = doc.get("p2p_gaps") or []
    n_gpus = len([g for g in gpu_facts if g in pos])
    if gaps and n_gpus > 2 and len(gaps) >= n_gpus * (n_gpus - 1) // 2:
        # every pair lacks P2P (a PCIe box: 28 arcs for 8 GPUs would hide the GPU labels): one line instead
        y = min((pos[g][1] for g in gpu_facts if g in pos), default=0.0)
        annotations.append(dict(x=(min(pos[g][0] for g in gpu_facts if g in pos)
                                   + max(pos[g][0] for g in gpu_facts if g in pos)) / 2, y=y, yshift=-44,
                                showarrow=False, font=dict(size=12, color="#c92a2a"), meta="p2p-summary",
                                text=f"no P2P between any GPU pair: all {len(gaps)} copy through host memory (SHM)"))
        gaps = []
    if gaps:
        y = min((pos[g][1] for g in gpu_facts if g in pos), default=0.0)
        xs, ys, hx, hy, ht = [], [], [], [], []
        for gap in gaps:
            if gap["a"] not in pos or gap["b"] not in pos:
                continue
            xa, xb = pos[gap["a"]][0], pos[gap["b"]][0]
            cx, cy = _curve(xa, xb, y - 0.15, 0.15 + 0.08 * abs(xb - xa), steps=8)
            xs += cx + [None]
            ys += cy + [None]
            hx.append((xa + xb) / 2)
            hy.append(min(cy))
            ht.append(f"no P2P between {esc(gap['a'])} and {esc(gap['b'])}: {esc(gap['reason'])}")
        data.append(dict(type="scatter", mode="lines", x=xs, y=ys, hoverinfo="skip",
                         line=dict(color="#e03131", width=1.2, dash="dot"),
                         name="no P2P: GPU pair copies through host memory", legendgroup="p2p"))
        data.append(dict(type="scatter", mode="markers", x=hx, y=hy, hovertext=ht, hoverinfo="text",
                         marker=dict(size=6, color="#e03131", symbol="x-thin", line=dict(width=1, color="#e03131")),
                         showlegend=False, legendgroup="p2p", name="P2P gap details"))

    # contention outlines
    for c in sorted(doc.get("contention") or [], key=lambda c: -(c.get("ratio") or 0))[:6]:
        if (c.get("ratio") or 0) <= 1.0 or c.get("element") not in pos:
            continue
        members = [c["element"]] + [d for d in c.get("devices") or [] if d in pos]
        xs = [pos[m][0] for m in members]
        ys = [pos[m][1] for m in members]
        shapes.append(dict(type="rect", x0=min(xs) - 0.45, x1=max(xs) + 0.45, y0=min(ys) - 0.35, y1=max(ys) + 0.3,
                           line=dict(color="#f08c00", width=1.5, dash="dash"), fillcolor="rgba(240,140,0,0.05)",
                           layer="below"))
        annotations.append(dict(x=min(xs) - 0.4, y=max(ys) + 0.3, xanchor="left", yanchor="bottom", showarrow=False,
                                text=f"{c['ratio']:.1f}x oversubscribed",
                                hovertext=f"{esc(c.get('label'))}: {c['ratio']:.1f}x oversubscribed<br>"
                                          f"{c['flows']} flows want {_fmt(c.get('demand_gbs'))} of "
                                          f"{_fmt(c.get('capacity_gbs'))} GB/s per direction",
                                font=dict(size=12, color="#d9480f"), bgcolor="rgba(255,255,255,0.8)"))

    # device markers
    by_kind: dict[tuple, list[str]] = defaultdict(list)
    for nid, n in nodes.items():
        if nid in pos:
            by_kind[(n["kind"] if n["kind"] in KIND_STYLE else "other", bool(n.get("inferred")))].append(nid)
    kind_order = list(KIND_STYLE)
    px_x, px_y = scale(pos, height, plot_width)
    names = Labels()  # the GPUs' and NICs' names, clear of each other
    for (kind, inferred), ids in sorted(by_kind.items(), key=lambda kv: (kind_order.index(kv[0][0]), kv[0][1])):
        symbol, size, colour, label = KIND_STYLE[kind]
        ids.sort(key=natural_key)
        if kind in NAME_SHIFTS:  # GPUs, then NICs: names on the first line below the marker that is
            for i in sorted(ids, key=lambda i: pos[i][0]):  # free (the last when none is: never left out)
                x, y = pos[i][0] * px_x, pos[i][1] * px_y
                half = text_width(nodes[i]["id"], NAME_FONTS[kind]["size"]) / 2
                shift = names.place(x, y, half, NAME_SHIFTS[kind])
                if shift is None:
                    shift = NAME_SHIFTS[kind][-1]
                    names.put(x, y + shift, half)
                annotations.append(dict(x=pos[i][0], y=pos[i][1], text=_short(nodes[i], nic_facts), showarrow=False,
                                        yshift=shift, font=NAME_FONTS[kind]))
        trace = dict(type="scatter", mode="markers+text" if kind == "cpu" else "markers",
                     x=[pos[i][0] for i in ids], y=[pos[i][1] for i in ids],
                     text=[_short(nodes[i], nic_facts) for i in ids],
                     textposition="top center" if kind == "cpu" else "bottom center",
                     textfont=dict(size=12), hoverinfo="text",
                     hovertext=[_node_hover(nodes[i], doc, nic_facts, gpu_facts, up) for i in ids],
                     marker=dict(symbol=symbol + ("-open" if inferred else ""), size=size, color=colour,
                                 line=dict(width=2 if inferred else 1, color=colour if inferred else "#ffffff")),
                     name=label + (" (inferred)" if inferred else ""),
                     customdata=[[kind, i] for i in ids], meta=kind)
        data.append(trace)
    down = [i for i in nodes if nodes[i]["kind"] == "nic" and i in pos
            and nic_facts.get(i, {}).get("active") is False]
    if down:
        data.append(dict(type="scatter", mode="markers", x=[pos[i][0] for i in down], y=[pos[i][1] for i in down],
                         marker=dict(symbol="x", size=13, color="#e03131", line=dict(width=1, color="#ffffff")),
                         hoverinfo="text", name="NIC port not Active (Down / Polling)",
                         hovertext=[f"{esc(i)}: {esc(nic_facts[i].get('state'))} "
                                    f"({esc(nic_facts[i].get('phys_state') or '')})" for i in down]))
    if highlight:
        for status, colour in HIGHLIGHT.items():
            ids = [i for i, s in highlight.items() if s == status and i in pos]
            if ids:
                data.append(dict(type="scatter", mode="markers", x=[pos[i][0] for i in ids],
                                 y=[pos[i][1] for i in ids], hoverinfo="skip",
                                 marker=dict(symbol="circle-open", size=40, color=colour, line=dict(width=4)),
                                 name=f"{status} since the other snapshot", meta=f"highlight-{status}"))

    xs = [p[0] for p in pos.values()] or [0]
    ys = [p[1] for p in pos.values()] or [0]
    if to_switch and nvs in pos:
        ys.append(min(ys) - 0.5)  # room for the NVSwitch note
    axis = dict(visible=False, showgrid=False, zeroline=False, fixedrange=False)
    mode = (doc.get("graph") or {}).get("mode")
    subtitle = " (inferred from topo -m: dashed / hollow)" if mode == "inferred" else ""
    layout = _base_layout(title or f"{esc(doc.get('hostname'))}: PCIe, NVLink and NICs{subtitle}", height,
                          xaxis=dict(axis, range=[min(xs) - 1.0, max(xs) + 1.0]),
                          # a short drawing needs more room above the sockets for their labels
                          yaxis=dict(axis, range=[min(ys) - 0.9, max(ys) + (0.7 if height >= 500 else 1.1)]),
                          shapes=shapes, annotations=annotations, hovermode="closest", dragmode="pan",
                          legend=dict(orientation="h", y=-0.02, yanchor="top", x=0, font=dict(size=12.5)),
                          showlegend=legend, margin=dict(l=10, r=10, t=42, b=10))
    if not nodes:
        layout["annotations"] = [dict(text="No devices in this snapshot", showarrow=False, x=0, y=0)]
    return {"data": data, "layout": layout}


# -- matrices: figure_matrices.gpu_matrix_spec / nic_matrix_spec (coloured by what the GPU gets) --


# -- path -------------------------------------------------------------------------------------


def _hop_kind_of(name: str, host: str | None, kinds: Mapping[tuple, str]) -> str:
    if host is None:
        return "fabric"
    return kinds.get((host, name), "switch" if "switch" in name.lower() else "other")


HOP_LABELS = {"pcie": "PCIe", "nvlink": "NVLink", "nvswitch": "NVSwitch", "cpu_link": "CPU link",
              "inter_socket": "inter-socket", "host_memory_copy": "host memory copy", "fabric": "network",
              "fabric_link": "IB link"}
# the fabric's switches on a path: discovered ones by tier, assumed ones (the rail model) apart
FABRIC_STYLE = {
    "fabric": ("triangle-up", 18, "#495057", "network switch (assumed: rail model)"),
    "fabric:leaf": ("triangle-up", 19, "#0b7285", "leaf switch (discovered)"),
    "fabric:spine": ("triangle-down", 19, "#343a40", "spine switch (discovered)"),
    "fabric:core": ("diamond-tall", 19, "#862e9c", "core switch (discovered)"),
    "fabric:other": ("triangle-up", 18, "#364fc7", "switch (discovered)"),
}


def _fabric_link_label(h: Mapping) -> str:
    """A discovered cable bundle's words under the line: ``4X NDR`` and ``2 x 8 cables`` when its stage
    spreads over several equal-cost bundles."""
    rate = " ".join(x for x in (h.get("width"), h.get("speed")) if x) or "IB link"
    n, links = h.get("equal_cost") or 1, h.get("links") or 1
    if n > 1:
        return f"{rate}, {n} x {links} cables"
    return f"{rate}, {links} cables" if links > 1 else rate


def _switch_points(path: Mapping) -> dict[str, Mapping]:
    """``{fabric node id: the fabric_hops switch entry}`` of a discovered path."""
    return {e["node"]: e for e in path.get("fabric_hops") or [] if e.get("kind") == "switch" and e.get("node")}


CROWDED_HOPS = 12  # hops above which a path drawing staggers its hop labels


def path_spec(path: Mapping, docs: Iterable[Mapping] = (), height: int = 300) -> dict:
    """The hops of ``path_between`` as a horizontal chain: width and colour by GB/s per direction,
    each hop labelled with its link and bandwidth, the bottleneck marked, hosts outlined.

    Through a discovered fabric (``path["fabric"] == "discovered"``) every switch is drawn by its
    name and tier (leaf, spine, core; hover: its full node description and how many switches are
    equal-cost there), every cable bundle with its width, speed and GB/s (for a stage the routes
    spread over, all its equal-cost bundles together), and the fabric part is outlined and titled
    with the number of equal-cost routes and the narrowest cut. Under the rail model the switches
    are the assumed rail switches, titled so."""
    from apps.explorer.fabric_figures import short_name  # fabric_figures imports this module

    hops = list(path.get("hops") or [])
    kinds: dict[tuple, str] = {}
    for d in docs:
        for n in (d.get("graph") or {}).get("nodes", []):
            kinds[(d.get("hostname"), n["id"])] = n["kind"]
            kinds[(d.get("hostname"), n.get("label"))] = n["kind"]
    discovered = path.get("fabric") == "discovered"
    switches = _switch_points(path) if discovered else {}
    data: list[dict] = []
    annotations: list[dict] = []
    shapes: list[dict] = []
    bottleneck = path.get("bottleneck")
    points = []  # (name, host, id): a point belongs to the host of either hop touching it
    for i, h in enumerate(hops):
        if not points:
            points.append((h["from"], h.get("host"), h.get("from_id")))
        nxt = hops[i + 1] if i + 1 < len(hops) else {}
        points.append((h["to"], h.get("host") or nxt.get("host"), h.get("to_id")))
    for i, h in enumerate(hops):
        gbs = _gbs(h)
        band = band_of(gbs)
        width = 2 + (min(gbs, 400) / 400 * 14 if gbs else 0)
        is_bn = i == bottleneck
        kind = h.get("kind") or "?"
        label = _fabric_link_label(h) if kind == "fabric_link" else HOP_LABELS.get(kind, kind)
        note = f"<br>{esc(h['note'])}" if h.get("note") else ""
        flows = h.get("flows") or 1
        data.append(dict(type="scatter", mode="lines", x=[i, i + 1], y=[0, 0], hoverinfo="text",
                         hovertext=f"hop {i + 1}: {esc(h['from'])} -> {esc(h['to'])}<br>{esc(label)}: {_fmt(gbs)} GB/s"
                                   f"{' (* assumed)' if h.get('assumed') else ''} "
                                   f"per direction expected ({_fmt(h.get('spec_gbs'))} spec), {flows} flow(s){note}",
                         line=dict(color=band[1], width=width), showlegend=False, name=f"hop {i + 1}",
                         meta="bottleneck" if is_bn else "hop"))
        star = "*" if h.get("assumed") else ""
        # a long chain leaves each hop less room than its label (a cable bundle's is wider still): every
        # other label a line higher, so neighbours never overlap; "bottleneck" under its box, below the
        # devices' names
        lift = 28 if i % 2 and (kind == "fabric_link" or len(hops) > CROWDED_HOPS) else 0
        annotations.append(dict(x=i + 0.5, y=0, yshift=18 + lift, showarrow=False, font=dict(size=12),
                                text=f"{esc(label)}<br><b>{_fmt(gbs)} GB/s{star}</b>"))
        if is_bn:
            annotations.append(dict(x=i + 0.5, y=-0.5, yanchor="top", yshift=-2, showarrow=False,
                                    text="<b>bottleneck</b>", font=dict(color="#c92a2a", size=12)))
            shapes.append(dict(type="rect", x0=i + 0.05, x1=i + 0.95, y0=-0.5, y1=0.5,
                               line=dict(color="#c92a2a", width=2, dash="dot")))
    style = {**KIND_STYLE, **FABRIC_STYLE}
    xs_by: dict[str, list] = defaultdict(list)  # kind -> (index, name, hover, drawn a line lower)
    n_switches = 0
    for i, (name, host, nid) in enumerate(points):
        kind = _hop_kind_of(nid or name, host, kinds)
        sw = switches.get(nid) if host is None else None
        if sw is not None:
            tier = sw.get("tier")
            kind = f"fabric:{tier}" if f"fabric:{tier}" in style else "fabric:other"
            more = f"<br>1 of {sw['choices']} equal-cost {esc(tier or 'switch')}es here" if (sw.get("choices") or 1) > 1 \
                else ""
            # switch names are wider than a hop: every other one a line lower
            xs_by[kind].append((i, short_name(name), f"{esc(tier or 'switch')} {esc(name)}{more}", n_switches % 2 == 1))
            n_switches += 1
            continue
        if kind not in style:
            kind = "other"
        xs_by[kind].append((i, name, f"{esc(host) + ': ' if host else ''}{esc(name)}", False))
    for kind, items in xs_by.items():
        symbol, size, colour, label = style[kind]
        data.append(dict(type="scatter", mode="markers+text", x=[i for i, *_ in items], y=[0] * len(items),
                         text=[("<br>" if lower else "") + esc(n).replace(" (", "<br>(") for _, n, _, lower in items],
                         textposition="bottom center",
                         textfont=dict(size=12.5), hovertext=[t for _, _, t, _ in items], hoverinfo="text",
                         marker=dict(symbol=symbol, size=size, color=colour, line=dict(width=1, color="#fff")),
                         name=label))
    # host bands, and the fabric's between them
    spans: list[list] = []
    for i, (_, host, _) in enumerate(points):
        if spans and spans[-1][0] == host:
            spans[-1][2] = i
        else:
            spans.append([host, i, i])
    for host, a, b in spans:
        if host is None:
            if path.get("fabric") in ("discovered", "assumed"):
                shapes.append(dict(type="rect", x0=a - 0.45, x1=b + 0.45, y0=-0.95, y1=0.95, layer="below",
                                   line=dict(color="#c5cbd6", width=1, dash="dot"),
                                   fillcolor="rgba(11,114,133,0.04)" if discovered else "rgba(73,80,87,0.03)"))
                annotations.append(dict(x=(a + b) / 2, y=-0.95, yanchor="bottom", showarrow=False,
                                        text=esc(fabric_band_title(path)), font=dict(size=12.5, color="#0b7285"
                                                                                     if discovered else "#495057")))
            continue
        shapes.append(dict(type="rect", x0=a - 0.4, x1=b + 0.4, y0=-0.95, y1=0.95, layer="below",
                           line=dict(color="#d9dde5", width=1), fillcolor="rgba(36,87,197,0.04)"))
        annotations.append(dict(x=a - 0.35, y=0.95, xanchor="left", yanchor="top", showarrow=False,
                                text=f"<b>{esc(host)}</b>", font=dict(size=12, color="#2457c5")))
    n = max(len(points) - 1, 1)
    layout = _base_layout("Path hop by hop (line width and colour: GB/s per direction)", height,
                          xaxis=dict(visible=False, range=[-0.6, n + 0.6]),
                          yaxis=dict(visible=False, range=[-1.05, 1.05]), shapes=shapes, annotations=annotations,
                          legend=dict(orientation="h", y=-0.02, yanchor="top", x=0), hovermode="closest")
    if not hops:
        layout["annotations"] = [dict(text=esc(path.get("explanation") or "no path"), showarrow=False,
                                      xref="paper", yref="paper", x=0.5, y=0.5)]
    return {"data": data, "layout": layout}


def fabric_band_title(path: Mapping) -> str:
    """The words over the fabric part of a cross-host path drawing.

    >>> fabric_band_title({"fabric": "discovered", "equal_cost_paths": 2, "fabric_cut": {"where": "host link"}})
    'fabric (discovered): 2 equal-cost routes'
    >>> fabric_band_title({"fabric": "discovered", "equal_cost_paths": 16,
    ...                    "fabric_cut": {"where": "fabric", "expected_gbs": 37.2}})
    'fabric (discovered): 16 equal-cost routes, narrowest cut 37.2 GB/s (the bottleneck)'
    >>> fabric_band_title({"fabric": "assumed"})
    'fabric assumed (rail model)'
    """
    if path.get("fabric") != "discovered":
        return "fabric assumed (rail model)"
    n = path.get("equal_cost_paths") or 0
    text = f"fabric (discovered): {n} equal-cost route{'' if n == 1 else 's'}"
    cut = path.get("fabric_cut") or {}
    if cut.get("where") == "fabric":
        text += f", narrowest cut {_fmt(cut.get('expected_gbs'))} GB/s (the bottleneck)"
    return text


# -- capacity ---------------------------------------------------------------------------------

CAPACITY_COLOURS = ("#2457c5", "#d9480f", "#2b8a3e", "#7048e8")
CAPACITY_MARKERS = ("circle", "diamond", "square", "triangle-up")
CAPACITY_DASHES = ("solid", "dash", "dot", "dashdot")
CAPACITY_NUDGE = 0.06  # octaves between two layouts' points at one node count


def capacity_spec(layouts: Iterable[tuple[str, Mapping]], height: int = 420,
                  measured: Mapping[int, list[Mapping]] | None = None) -> dict:
    """Expected all-reduce bus bandwidth against node count (1..64, log2 axis), one line per layout;
    ``measured`` (layout index -> ``[{"nodes", "busbw_gbs", "label"}]``) adds the all-reduce runs
    measured on that layout as points over its line."""
    data = []
    annotations = []
    for k, (name, doc) in enumerate(layouts):
        est = doc.get("estimate") or {}
        pts = sorted(est.get("points") or [], key=lambda p: p["nodes"])
        colour = CAPACITY_COLOURS[k % len(CAPACITY_COLOURS)]
        # identical layouts draw identical points: the first layout sits on the node counts, each next
        # one a little to the right (a few percent of an octave on the log axis) with its own marker
        # and dash, so none hides another; hover says the node count itself
        shift = 2 ** (CAPACITY_NUDGE * k)
        data.append(dict(type="scatter", mode="lines+markers", x=[p["nodes"] * shift for p in pts],
                         y=[p["busbw_gbs"] for p in pts], name=esc(name),
                         line=dict(color=colour, width=3, dash=CAPACITY_DASHES[k % len(CAPACITY_DASHES)]),
                         marker=dict(size=10, symbol=CAPACITY_MARKERS[k % len(CAPACITY_MARKERS)],
                                     line=dict(width=1, color="#ffffff")),
                         customdata=[[esc(p.get("limit")), p["nodes"], esc(p.get("algorithm"))] for p in pts],
                         hovertemplate="%{customdata[1]} node(s): <b>%{y:.1f} GB/s</b> busbw (%{customdata[2]})"
                                       "<br>limited by %{customdata[0]}"
                                       f"<extra>{esc(name)}</extra>"))
        runs = (measured or {}).get(k) or []
        if runs:
            data.append(dict(type="scatter", mode="markers", x=[r["nodes"] * shift for r in runs],
                             y=[r["busbw_gbs"] for r in runs], name=f"measured on {esc(name.split(':')[0])}",
                             marker=dict(symbol="x", size=12, color=colour, line=dict(width=1, color="#1d2330")),
                             customdata=[[esc(r.get("label")), r["nodes"]] for r in runs],
                             hovertemplate="%{customdata[1]} node(s): <b>%{y:.1f} GB/s</b> measured<br>%{customdata[0]}"
                                           "<extra></extra>"))
        if pts:
            last = pts[-1]
            limit = str(est.get("limiting_link") or last.get("limit") or "")
            short = limit.split(" (", 1)[0]
            right_edge = last["nodes"] >= 16
            annotations.append(dict(x=math.log10(last["nodes"] * shift), y=last["busbw_gbs"], showarrow=False,
                                    xanchor="right" if right_edge else "left", xshift=0 if right_edge else 8,
                                    yanchor="bottom", yshift=4 + 17 * k, font=dict(size=12, color=colour),
                                    text=f"limit: {esc(short)}" + (" (1 node only)" if len(pts) == 1 else ""),
                                    hovertext=f"limit: {esc(limit)}", bgcolor="rgba(255,255,255,0.85)"))
    ticks = [1, 2, 4, 8, 16, 32, 64]
    layout = _base_layout("Expected all-reduce bus bandwidth (busbw) vs node count", height,
                          xaxis=dict(type="log", tickvals=ticks, ticktext=[str(t) for t in ticks],
                                     range=[math.log10(1) - 0.05, math.log10(64) + 0.09],  # 1..64 nodes (and the nudged layouts)
                                     title=dict(text="nodes (log2 scale)"), gridcolor="#eef1f6"),
                          yaxis=dict(title=dict(text="busbw, GB/s per GPU (large messages)"), rangemode="tozero",
                                     gridcolor="#eef1f6"),
                          annotations=annotations, legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0),
                          margin=dict(l=60, r=20, t=70, b=50), hovermode="closest")
    return {"data": data, "layout": layout}


# -- figure objects and JSON ------------------------------------------------------------------


def as_figure(spec: Mapping) -> go.Figure:
    """The spec as a validated ``plotly.graph_objects.Figure``."""
    return go.Figure(data=spec["data"], layout=spec["layout"])


def to_json(spec: Mapping) -> str:
    """The spec as Plotly.js reads it. ``template="none"`` (what plotly.py expands to an empty
    template) becomes ``{}``; anything plain JSON cannot hold goes through plotly.py's encoder."""
    layout = spec["layout"]
    if layout.get("template") == "none":
        layout = {**layout, "template": {}}
    try:
        return json.dumps({"data": spec["data"], "layout": layout}, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return as_figure(spec).to_json()


def host_figure(doc: Mapping, **kw: Any) -> go.Figure:
    """``host_spec`` as a Figure."""
    return as_figure(host_spec(doc, **kw))


def host_figure_json(doc: Mapping, **kw: Any) -> str:
    return to_json(host_spec(doc, **kw))


def gpu_matrix_figure(doc: Mapping, **kw: Any) -> go.Figure:
    """``gpu_matrix_spec`` as a Figure."""
    return as_figure(gpu_matrix_spec(doc, **kw))


def gpu_matrix_figure_json(doc: Mapping, **kw: Any) -> str:
    return to_json(gpu_matrix_spec(doc, **kw))


def nic_matrix_figure(doc: Mapping, **kw: Any) -> go.Figure:
    """``nic_matrix_spec`` as a Figure."""
    return as_figure(nic_matrix_spec(doc, **kw))


def nic_matrix_figure_json(doc: Mapping, **kw: Any) -> str:
    return to_json(nic_matrix_spec(doc, **kw))


def path_figure(path: Mapping, docs: Iterable[Mapping] = (), **kw: Any) -> go.Figure:
    """``path_spec`` as a Figure."""
    return as_figure(path_spec(path, docs, **kw))


def path_figure_json(path: Mapping, docs: Iterable[Mapping] = (), **kw: Any) -> str:
    return to_json(path_spec(path, docs, **kw))


def capacity_figure(layouts: Iterable[tuple[str, Mapping]], **kw: Any) -> go.Figure:
    """``capacity_spec`` as a Figure."""
    return as_figure(capacity_spec(layouts, **kw))


def capacity_figure_json(layouts: Iterable[tuple[str, Mapping]], **kw: Any) -> str:
    return to_json(capacity_spec(layouts, **kw))
