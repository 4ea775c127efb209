"""Where the host figure's text goes so that it stays readable: PCIe link labels, GPU and NIC names.

A whole-machine capture puts a GPU, one or two NICs and a drive under each PCIe switch, a leaf
slot (one x unit of ``figures.node_positions``) apart: a label per link, at each link's middle,
covers its neighbours. ``link_label_points`` merges sibling links of one label and leaves out
what has no room (the devices' hovers still say it); ``Labels`` keeps the boxes placed so far,
for the link labels and the device names alike. Sizes are estimates in pixels at the width the
page draws the figure (``PLOT_WIDTH_PX``, ``CARD_WIDTH_PX``, ``HALF_WIDTH_PX``).
"""

from __future__ import annotations

from typing import Iterable, Mapping

LABEL_LINE_PX = 14.0  # height of a label's line
_NARROW = frozenset(".,:;!|'ijlI ")  # about 0.28 em in the sans-serif fonts Plotly falls back to
_WIDE = frozenset("mwMW")  # about 0.85 em; the rest about 0.56 em (digits, most letters)


def text_width(text: str, size: float = 12.0) -> float:
    """About how many pixels ``text`` takes at font ``size`` (px): a label's width for ``Labels``."""
    return size * sum(0.28 if c in _NARROW else 0.85 if c in _WIDE else 0.56 for c in text)


# the host figure's plotting width at 1366-1440 px (narrower screens scale it): the page's whole width,
# a 3/5-wide card (the host page's drawing of a small host), half the page (two hosts side by side)
PLOT_WIDTH_PX = 1150.0
CARD_WIDTH_PX = 700.0
HALF_WIDTH_PX = 560.0
LABEL_SHIFTS_PX = (0.0, LABEL_LINE_PX)  # where a crowded link label may go: where it is, or a line up
# where a GPU's or a NIC's name may go below it: under the marker, then a line lower, and so on (a
# NIC's name may have to pass below the GPUs, which sit half a row lower, and their names)
NAME_SHIFTS = {"gpu": tuple(-20.0 - k * LABEL_LINE_PX for k in range(3)),
               "nic": tuple(-15.0 - k * LABEL_LINE_PX for k in range(4))}


def scale(pos: Mapping[str, tuple[float, float]], height: int, width: float) -> tuple[float, float]:
    """About how many pixels one x unit (a leaf slot) and one tree row of ``node_positions`` take
    in a host figure ``width`` px wide to plot in (its axes' ranges are the positions' plus
    margins; see ``figures.host_spec``)."""
    xs = [p[0] for p in pos.values()] or [0.0]
    ys = [p[1] for p in pos.values()] or [0.0]
    return width / (max(xs) - min(xs) + 2.0), max(height - 270, 150) / (max(ys) - min(ys) + 2.1)


class Labels:
    """Label boxes placed so far in pixels (centre x, centre y, half width, half height); a new
    label takes the first of its shifts at which its box meets none of them."""

    def __init__(self):
        self.boxes: list[tuple[float, float, float, float]] = []

    def place(self, x: float, y: float, half_w: float, shifts: Iterable[float]) -> float | None:
        half_h = LABEL_LINE_PX / 2
        for shift in shifts:
            cy = y + shift
            if all(abs(x - bx) >= half_w + bw or abs(cy - by) >= half_h + bh for bx, by, bw, bh in self.boxes):
                self.boxes.append((x, cy, half_w, half_h))
                return shift
        return None

    def put(self, x: float, y: float, half_w: float, half_h: float = LABEL_LINE_PX / 2) -> None:
        """A box taken whatever it covers: a label that must show, or a marker no label may cover."""
        self.boxes.append((x, y, half_w, half_h))


def link_label_points(labels: list[tuple], pos: Mapping[str, tuple[float, float]], height: int, width: float,
                       markers: Mapping[str, float]) -> tuple[list, list, list, list]:
    """Where the PCIe link labels go. ``labels``: (parent, text, x, y, hover, rank) of each labelled
    link, rank 0 for a degraded link, 1 for one to a GPU, NIC or switch (the data path), 2 for any
    other; ``markers``: node id -> its marker's size in pixels, boxes no label may cover.

    Sibling links with the same label (a switch's four ``G5 x16`` children) get one label,
    ``4× G5 x16``, above the middle of their midpoints, its hover naming each link. Labels are
    placed by rank, then row by row, left to right: one that would overlap a label or marker placed
    before moves a line up, and where neither is free it is left out unless a link of it is
    degraded (each device's own hover still gives its uplink). Returns the text trace's x, y, text
    and hover lists."""
    merged: dict[tuple, list] = {}
    for parent, text, x, y, hover, rank in labels:
        merged.setdefault((parent, text), []).append((x, y, hover, rank))
    px_x, px_y = scale(pos, height, width)
    points = []
    for (_, text), links in merged.items():
        shown = text if len(links) == 1 or text == "*" else f"{len(links)}× {text}"
        hovers = [h for _, _, h, _ in links]
        hover = "<br>".join(hovers[:6]) + (f"<br>... and {len(hovers) - 6} more" if len(hovers) > 6 else "")
        # at the highest of the midpoints (a GPU sits half a row below its sibling NICs and drives)
        points.append((min(p[3] for p in links), -max(p[1] for p in links), sum(p[0] for p in links) / len(links),
                       shown, hover))
    out: tuple[list, list, list, list] = ([], [], [], [])
    placed = Labels()
    for nid, size in markers.items():
        if nid in pos:
            placed.put(pos[nid][0] * px_x, pos[nid][1] * px_y, size / 2, size / 2)
    for rank, depth, x, text, hover in sorted(points):
        half = text_width(text) / 2
        shift = placed.place(x * px_x, -depth * px_y, half, LABEL_SHIFTS_PX)
        if shift is None:
            if rank:
                continue
            shift = 0.0
            placed.put(x * px_x, -depth * px_y, half)
        for values, v in zip(out, (x, round(-depth + shift / px_y, 3), text, hover)):
            values.append(v)
    return out
