"""GPU x GPU and GPU x NIC matrices, coloured by what the GPU gets (pure functions, as ``figures``).

Each cell's colour is a category, not a bandwidth: a GPU pair over NVLink is best, P2P over PCIe
good, a pair without P2P (NCCL copies through host memory, SHM) a warning and across sockets worse;
a GPU's NIC cell is best when GPUDirect RDMA is on (PIX/PXB: NCCL's default GDR cutoff,
``NCCL_NET_GDR_LEVEL`` in paths.cc ``ncclTopoCheckGdr``), a warning when the NIC is far
(PHB/NODE/SYS, GDR off: staged through host memory) and worst when the port is down. The line rate
never sets the colour (a far 400G NIC is not better than a near one). Every cell shows its path class
and its GB/s (two lines, both 12 px); the cell's category key is in the heatmap's ``customdata`` and a
legend under the matrix says what each colour means.

The value line is a text-only scatter trace over the heatmap (a heatmap's text template cannot
place two values in one cell), so the heatmap's own ``text`` stays the path class.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from apps.domain.names import natural_key

from apps.explorer.figures_base import base_layout, esc, fmt_gbs

NEAR = ("PIX", "PXB")  # NCCL's default GPUDirect RDMA cutoff on x86 is PXB
CROSS_SOCKET = ("SYS", "SOC")

# key -> (colour, legend text, text colour on it)
GPU_CATEGORIES = {
    "nvlink": ("#2b8a3e", "NVLink / NVSwitch (best)", "#ffffff"),
    "p2p_pcie": ("#8ce99a", "P2P over PCIe", "#1d2330"),
    "no_p2p": ("#f59f00", "no P2P (SHM)", "#1d2330"),
    "no_p2p_sys": ("#e03131", "no P2P, across sockets", "#ffffff"),
    "unknown": ("#dee2e6", "unknown", "#1d2330"),
}
NIC_CATEGORIES = {
    "gdr": ("#2b8a3e", "GDR on (best)", "#ffffff"),
    "near_no_gdr": ("#ffd43b", "near, GDR off", "#1d2330"),
    "far": ("#f59f00", "far (PHB/NODE/SYS), GDR off", "#1d2330"),
    "down": ("#e03131", "port down", "#ffffff"),
    "not_compute": ("#dee2e6", "storage / mgmt NIC", "#1d2330"),
    "unknown": ("#f1f3f5", "path unknown", "#1d2330"),
}
SELF = "self"
SELF_COLOUR = "#f8f9fa"
CELL_PX = 46  # row height, px
MAX_COLUMNS = 8  # columns of 12 px "NODE" / "46.5" that fit the matrix card at 1366 px
FONT_PX = 12


def gpu_pair_category(pair: Mapping) -> str:
    """The colour category of one GPU pair (``apps/domain`` ``gpu_pairs`` entry)."""
    cls = (pair.get("path_class") or "").upper()
    if pair.get("mechanism") in ("nvlink", "nvswitch") or cls.startswith("NV"):
        return "nvlink"
    if pair.get("p2p") is True:
        return "p2p_pcie"
    if pair.get("p2p") is False:
        return "no_p2p_sys" if cls in CROSS_SOCKET else "no_p2p"
    return "unknown"


def gpu_nic_category(cell: Mapping, nic: Mapping | None) -> str:
    """The colour category of one GPU x NIC cell: what the GPU gets through that NIC."""
    nic = nic or {}
    if nic.get("active") is False:
        return "down"
    if nic.get("compute") is False:
        return "not_compute"
    cls = (cell.get("path_class") or "").upper()
    if cell.get("gdr"):
        return "gdr"
    if not cls:
        return "unknown"
    return "near_no_gdr" if cls in NEAR else "far"


def _value(gbs: float | None) -> str:
    if gbs is None:
        return "?"
    return f"{gbs:.0f}" if gbs >= 100 else f"{gbs:.1f}"


def _colorscale(keys: Sequence[str], colours: Mapping[str, str]) -> list:
    """A stepped colour scale: z = index of the key in ``keys`` (zmin -0.5, zmax len - 0.5)."""
    n = len(keys)
    out = []
    for i, k in enumerate(keys):
        out += [[i / n, colours[k]], [(i + 1) / n, colours[k]]]
    return out


def _legend(categories: Mapping[str, tuple], shown: Sequence[str], extra: str = "") -> dict:
    """One annotation under the matrix: a coloured square and its meaning per category."""
    items = [f'<span style="color:{categories[k][0]}">\u25a0</span> {esc(categories[k][1])}' for k in shown]
    lines, line = [], []
    for it in items:  # two per line: the matrix card is narrow at 1366 px
        line.append(it)
        if len(line) == 2:
            lines.append("   ".join(line))
            line = []
    if line:
        lines.append("   ".join(line))
    if extra:
        lines.append(extra)
    return dict(text="<br>".join(lines), showarrow=False, xref="paper", yref="paper", x=0, y=0, xanchor="left",
                yanchor="top", yshift=-6, align="left", font=dict(size=FONT_PX, color="#495057"))


def _matrix(rows: list[str], cols: list[str], cells: Mapping[tuple[int, int], tuple[str, str, str, str]],
            categories: Mapping[str, tuple], title: str, name: str, legend_extra: str, tickangle: int) -> dict:
    """The heatmap: ``cells[(i, j)] = (category, class label, value text, hover)``."""
    keys = [SELF, *categories]
    colours = {SELF: SELF_COLOUR, **{k: v[0] for k, v in categories.items()}}
    idx = {k: i for i, k in enumerate(keys)}
    n, m = len(rows), len(cols)
    z = [[None] * m for _ in range(n)]
    text = [[""] * m for _ in range(n)]
    hover = [[""] * m for _ in range(n)]
    cat = [[""] * m for _ in range(n)]
    vx, vy, vt, vc = [], [], [], []
    for (i, j), (key, label, value, hv) in cells.items():
        z[i][j], cat[i][j], hover[i][j] = idx[key], key, hv
        text[i][j] = f"{label}<br> " if value else label  # the blank line lifts the class above the value
        if value:
            vx.append(cols[j])
            vy.append(rows[i])
            vt.append(value)
            vc.append(categories[key][2] if key in categories else "#1d2330")
    data = [dict(type="heatmap", z=z, x=cols, y=rows, text=text, texttemplate="%{text}",
                 textfont=dict(size=FONT_PX), hovertext=hover, hoverinfo="text", customdata=cat,
                 colorscale=_colorscale(keys, colours), zmin=-0.5, zmax=len(keys) - 0.5, showscale=False,
                 xgap=2, ygap=2, name=name),
            dict(type="scatter", mode="markers+text", x=vx, y=vy, text=vt, textposition="bottom center",
                 textfont=dict(size=FONT_PX, color=vc), marker=dict(size=2, color="rgba(0,0,0,0)"),
                 hoverinfo="skip", showlegend=False, name=f"{name} values", meta="values")]
    shown = [k for k in categories if any(k in row for row in cat)] or list(categories)[:1]
    legend_lines = (len(shown) + 1) // 2 + (1 if legend_extra else 0)
    top = 64 if tickangle == 0 else 100
    bottom = 14 + 17 * legend_lines
    layout = base_layout(title, top + CELL_PX * max(n, 1) + bottom,
                         xaxis=dict(side="top", tickfont=dict(size=FONT_PX), tickangle=tickangle, title=None,
                                    type="category", fixedrange=True),
                         yaxis=dict(autorange="reversed", tickfont=dict(size=FONT_PX), type="category",
                                    fixedrange=True),
                         margin=dict(l=56, r=10, t=top, b=bottom), showlegend=False,
                         hoverlabel=dict(font=dict(size=FONT_PX), align="left"),
                         annotations=[_legend(categories, shown, legend_extra)])
    return {"data": data, "layout": layout}


def _wrap(text: str, width: int = 60) -> str:
    """Hover text cut into lines of about ``width`` characters (a long line runs off the card)."""
    out, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "<br>".join(out + [line])


def gpu_matrix_spec(doc: Mapping, height: int | None = None) -> dict:
    """GPU x GPU: each cell's path class and expected GB/s per direction, coloured by what the pair gets."""
    gpus = sorted((g["name"] for g in doc.get("gpus", [])), key=natural_key)
    idx = {g: i for i, g in enumerate(gpus)}
    cells: dict[tuple[int, int], tuple[str, str, str, str]] = {}
    for g in gpus:
        cells[(idx[g], idx[g])] = (SELF, "X", "", f"{esc(g)} itself")
    for p in doc.get("gpu_pairs", []):
        if p["a"] not in idx or p["b"] not in idx:
            continue
        key = gpu_pair_category(p)
        star = "*" if p.get("assumed") else ""
        hv = (f"{esc(p['a'])} - {esc(p['b'])}: <b>{esc(p.get('path_class'))}</b>, "
              f"{fmt_gbs(p.get('bottleneck_gbs'))} GB/s per direction{star}<br>"
              + _wrap(f"{'P2P' if p.get('p2p') else 'no P2P'}: {esc(p.get('reason'))}"))
        value = _value(p.get("bottleneck_gbs")) + star if p.get("p2p") or key == "nvlink" else ""
        for a, b in ((idx[p["a"]], idx[p["b"]]), (idx[p["b"]], idx[p["a"]])):
            cells[(a, b)] = (key, esc(p.get("path_class") or "?"), value, hv)
    spec = _matrix(gpus, gpus, cells, GPU_CATEGORIES, "GPU x GPU: path class and GB/s per direction", "GPU x GPU",
                   "no GB/s: no P2P, NCCL copies through host memory; * = assumed", 0)
    if height:
        spec["layout"]["height"] = height
    return spec


def nic_matrix_spec(doc: Mapping, height: int | None = None) -> dict:
    """GPU x NIC: each cell's path class and GB/s, coloured by what the GPU gets through that NIC
    (its path class and GPUDirect RDMA decision; a port down), never by the NIC's line rate; the NIC
    NCCL picks for the GPU in bold. More than ``MAX_COLUMNS`` NICs (and more NICs than GPUs): one row
    per NIC."""
    gpus = sorted((g["name"] for g in doc.get("gpus", [])), key=natural_key)
    nics = sorted({c["nic"] for c in doc.get("gpu_nic_matrix", [])}, key=natural_key)
    facts = {n["name"]: n for n in doc.get("nics", [])}
    chosen = {e["gpu"]: e for e in doc.get("gpu_nic", [])}
    gi, ni = {g: i for i, g in enumerate(gpus)}, {n: i for i, n in enumerate(nics)}
    cells: dict[tuple[int, int], tuple[str, str, str, str]] = {}
    for c in doc.get("gpu_nic_matrix", []):
        if c["gpu"] not in gi or c["nic"] not in ni:
            continue
        nic = facts.get(c["nic"])
        key = gpu_nic_category(c, nic)
        pick = chosen.get(c["gpu"], {})
        picked = c["nic"] in (pick.get("nics") or [pick.get("nic")])
        cls = esc(c.get("path_class") or "?")
        label = f"<b>{cls}</b>" if picked else cls
        value = "down" if key == "down" else _value(c.get("bandwidth_gbs"))
        hv = (f"{esc(c['gpu'])} - {esc(c['nic'])}: <b>{cls}</b>, {fmt_gbs(c.get('bandwidth_gbs'))} GB/s per direction"
              f"<br>GPUDirect RDMA {'on' if c.get('gdr') else 'off'}")
        if nic:
            hv += (f"<br>{esc(c['nic'])}: {esc(nic.get('state') or 'state unknown')}, "
                   f"{esc(nic.get('rate_gbps') or '?')} Gb/s line rate"
                   + ("" if nic.get("compute", True) else ", storage / management"))
        if picked:
            hv += "<br>NCCL picks this NIC for this GPU" + (
                f" (PXN via {esc(pick['pxn_via'])})" if pick.get("pxn_via") else "")
        cells[(gi[c["gpu"]], ni[c["nic"]])] = (key, label, value, hv)
    legend = "bold = the NIC(s) NCCL picks for the GPU; GDR = GPUDirect RDMA"
    if len(nics) > MAX_COLUMNS and len(nics) > len(gpus):
        # more NICs than fit side by side in the card at 12 px ("NODE" cells would run into each other):
        # one row per NIC instead
        spec = _matrix([esc(n) for n in nics], gpus, {(j, i): v for (i, j), v in cells.items()}, NIC_CATEGORIES,
                       "NIC x GPU: what each GPU gets through each NIC", "GPU x NIC", legend, 0)
    else:
        spec = _matrix(gpus, [esc(n) for n in nics], cells, NIC_CATEGORIES,
                       "GPU x NIC: what each GPU gets through each NIC", "GPU x NIC", legend,
                       -45 if len(nics) > 4 else 0)
    if height:
        spec["layout"]["height"] = height
    if not nics:
        spec["layout"]["annotations"] = [dict(text="No NICs in this snapshot: paste ibstat or the topo -m NIC columns",
                                              showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)]
    return spec
