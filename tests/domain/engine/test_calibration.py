"""The estimate against published nccl-tests results: docs/calibration.md, checked.

Reads /work/shared/realdata/published_busbw.tsv (the published all-reduce results; missing means
the test environment is wrong, and the test says so rather than skipping) and docs/calibration.md,
which lists every row: the rows the model covers, each with the layout it is estimated on, and
the rows it does not cover, each with the reason. For every covered row the estimate must lie
within +-15 % of the published figure, and the estimate and ratio the document prints must be
today's. The efficiencies ETA_INTRA and ETA_NET must be what the document says they are set from:
the geometric mean over their stated subset of published / NCCL's figure, to two decimals.

The layouts are real captures of the platform (tests/fixtures), plus the NIC facts the published
row states (rate, link layer) written onto the capture's compute NICs where the capture does not
report them; docs/calibration.md ("Layouts") says which capture stands for which row.
"""

from __future__ import annotations

import copy
import csv
import math
import re
from functools import lru_cache
from pathlib import Path

import pytest

from apps.domain import estimate as est
from apps.domain.analysis import analyze_host
from apps.domain.bundle import read_bundle

PUBLISHED = Path("/work/shared/realdata/published_busbw.tsv")
DOC = Path(__file__).resolve().parents[3] / "docs" / "calibration.md"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
BAND = 0.15

# layout id -> (capture under tests/fixtures, NIC rate Gb/s stated by the row or None, link layer)
LAYOUTS = {
    "hgx-h100-ib": ("nvidia_smi_topo/sglang_30401_8xh100_hbm3_8nic.txt", 400, "InfiniBand"),
    "hgx-h100-roce": ("nvidia_smi_topo/sglang_30401_8xh100_hbm3_8nic.txt", 400, "Ethernet"),
    "xe9680": ("bundles/dell_xe9680_lspci", None, None),
    "p4de-efa": ("bundles/aws_p4de_xml", 100, None),
    "a100-2rail-roce": ("nvidia_smi_topo/cn_notes_8xa100_17nic_mlx5_2-17_bond0_single_numa.txt", 100, "Ethernet"),
}


def published() -> list[dict]:
    assert PUBLISHED.exists(), (f"{PUBLISHED} is missing: the calibration needs the published results "
                                "(/work/shared/realdata); this is an environment error, not a skip")
    with PUBLISHED.open() as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _table(section: str) -> list[list[str]]:
    """The rows of the first markdown table under heading ``section`` of docs/calibration.md."""
    text = DOC.read_text()
    start = text.index(f"## {section}")
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not re.match(r"^\|[\s:|-]+\|$", line):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows[1:]  # without the header


@lru_cache(maxsize=None)
def layout(layout_id: str) -> dict:
    """The snapshot document a row is estimated on: the capture analysed as topoweb analyses any
    report, then the row's stated NIC rate and link layer on its compute NICs."""
    capture, rate, layer = LAYOUTS[layout_id]
    path = FIXTURES / capture
    if path.is_dir():
        name, sections = read_bundle(path)
    else:
        name, sections = layout_id, {"nvidia_smi_topo": path.read_text()}
    doc = analyze_host(sections, name or layout_id).doc
    if rate:
        doc = copy.deepcopy(doc)
        for n in doc["nics"]:
            if n.get("compute"):
                n.update(rate_gbps=rate, link_layer=layer or n.get("link_layer"), state="Active",
                         phys_state="LinkUp", active=True)
    return doc


def _env(text: str) -> dict[str, str]:
    if text in ("", "-", "defaults"):
        return {}
    return dict(part.strip().split("=", 1) for part in text.split(","))


def estimate_row(layout_id: str, nodes: int, figure: str, env: dict[str, str]) -> tuple[float, dict]:
    """(the figure the row is compared with, the estimate's point for ``nodes``)."""
    e = est.estimate(layout(layout_id), env=env)
    point = next(p for p in e["points"] if p["nodes"] == nodes)
    return (point["ring_busbw_gbs"] if figure == "ring" else point["busbw_gbs"]), point


def covered() -> list[dict]:
    out = []
    for cells in _table("Covered rows"):
        row, system, nodes, figure, lay, env, measured, estimate, algorithm, ratio, subset = cells
        out.append({"row": int(row), "system": system, "nodes": int(nodes), "figure": figure, "layout": lay.strip("`"),
                    "env": _env(env.strip("`")), "measured": float(measured), "estimate": float(estimate),
                    "algorithm": algorithm, "ratio": float(ratio), "subset": subset})
    return out


def _numbers(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", cell)]


COVERED = covered() if DOC.exists() else []


def test_every_published_row_is_covered_or_excluded_with_a_reason():
    rows = published()
    seen = {c["row"] for c in COVERED}
    excluded = {}
    for cells in _table("Rows not covered"):
        row, system, reason = cells[0], cells[1], cells[-1]
        excluded[int(row)] = (system, reason)
        assert rows[int(row) - 1]["system"] == system, f"row {row} of the document is not {system!r} in the tsv"
        assert len(reason) > 20, f"row {row}: the reason must say why"
    assert not seen & set(excluded), "a row is both covered and excluded"
    assert seen | set(excluded) == set(range(1, len(rows) + 1)), "every published row is listed"


def test_layouts_name_the_captures_the_test_builds():
    listed = {cells[0].strip("`"): cells[1].strip("`") for cells in _table("Layouts")}
    assert listed == {k: v[0] for k, v in LAYOUTS.items()}
    for capture in listed.values():
        assert (FIXTURES / capture).exists(), capture


@pytest.mark.parametrize("row", COVERED, ids=lambda r: f"row{r['row']}-{r['figure']}-{r['nodes']}n")
def test_covered_row_within_band(row):
    """The estimate lies within +-15 % of the published figure, and the document is up to date."""
    tsv = published()[row["row"] - 1]
    assert tsv["system"] == row["system"] and int(_numbers(tsv["nodes"])[0]) == row["nodes"]
    assert row["measured"] in _numbers(tsv["busbw_gbs"]), (row["measured"], tsv["busbw_gbs"])
    value, point = estimate_row(row["layout"], row["nodes"], row["figure"], row["env"])
    ratio = row["measured"] / value
    assert 1 - BAND <= ratio <= 1 + BAND, (row["system"], row["measured"], value, point["limit"])
    assert value == pytest.approx(row["estimate"], abs=0.6), "docs/calibration.md shows an old estimate"
    assert ratio == pytest.approx(row["ratio"], abs=0.006), "docs/calibration.md shows an old ratio"
    if row["figure"] == "busbw":
        assert point["algorithm"] == row["algorithm"]


@pytest.mark.parametrize("subset,constant", [("intra", "ETA_INTRA"), ("net", "ETA_NET")])
def test_efficiencies_are_set_once_from_their_stated_subset(subset, constant):
    """ETA = geometric mean of published / NCCL's figure over the subset (the estimate without ETA)."""
    eta = getattr(est, constant)
    rows = [r for r in COVERED if r["subset"] == subset]
    assert len(rows) >= 3
    logs = []
    for r in rows:
        value, _point = estimate_row(r["layout"], r["nodes"], r["figure"], r["env"])
        logs.append(math.log(r["measured"] / (value / eta)))
    assert round(math.exp(sum(logs) / len(logs)), 2) == eta
