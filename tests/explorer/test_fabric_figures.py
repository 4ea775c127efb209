"""fabric_figures.py: the fabric drawn by tier, checked on fig.data without a browser or a database.

Facts read off the real captures:
* teaker iblinkinfo: one 18-port "Infiniscale-IV Mellanox Technologies" switch, hosts teaker-4 ...
  teaker-11 at 4X 10.0 Gbps (QDR: 5 GB/s per direction), teaker-9's CA cabled twice (switch ports 3
  and 14), ports 8, 10-13 and 15-18 Down/Polling with nothing attached;
* DGX H100 SuperPOD ibnetdiscover: 31 leaves (IBLEAF) and 9 spines (IBSPINE), every cable 4xNDR;
  "A09-P1-IBLEAF-01-01" is cabled to all 9 spines, "A09-P1-IBLEAF-01-02" to 7 (not SPINE-01 nor
  SPINE-04); leaf "A09-P1-IBLEAF-04-04" (the first block) has 17 hosts on ports 1-17,
  a08-p1-dgx-04-c01 ... c17;
* bench/fabric_synth.py (SYNTHETIC): 40 pods of 25 leaves with 16 HCAs each, 20 spines per pod,
  200 core switches: 2,000 switches, 16,000 HCAs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain import fabric
from apps.domain.parsers import ibnetdiscover, iblinkinfo
from apps.explorer import fabric_figures as ff
from bench.fabric_synth import synthetic_ibnetdiscover

FIX = Path(__file__).resolve().parents[1] / "fixtures"  # real captures copied from ../shared/realdata
SUPERPOD = FIX / "ibnetdiscover" / "nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.txt"
TEAKER = FIX / "iblinkinfo" / "qdr_infiniscale_iv_18port_teaker_8hosts_one_dual_port_ca.txt"

MARKERS = ("switch", "group", "host", "hosts", "ca")


def markers(fig, *metas):
    return [t for t in fig.data if t.meta in (metas or MARKERS)]


def points(fig, *metas):
    """[(text, customdata, hovertext)] of every marker of these kinds."""
    return [(t.text[i], tuple(t.customdata[i]), t.hovertext[i]) for t in markers(fig, *metas) for i in range(len(t.x))]


@pytest.fixture(scope="module")
def teaker():
    return fabric.build_fabric(iblinkinfo.parse(TEAKER.read_text()))


@pytest.fixture(scope="module")
def superpod():
    return fabric.build_fabric(ibnetdiscover.parse(SUPERPOD.read_text()))


@pytest.fixture(scope="module")
def synthetic_2000():
    return fabric.build_fabric(ibnetdiscover.parse(synthetic_ibnetdiscover()))


def test_a_small_fabric_is_drawn_switch_by_switch_with_hosts_below_their_leaf(teaker):
    urls = {f"teaker-{i}": f"/c/lab/h/teaker-{i}/" for i in (4, 5, 6)}
    d = ff.fabric_drawing(teaker, host_urls=urls)
    assert d.mode == "detail" and d.rows == {0: "hosts", 1: "leaf"}
    fig = ff.fabric_figure(teaker, host_urls=urls)
    (switch,) = points(fig, "switch")
    assert switch[2].startswith("<b>Infiniscale-IV Mellanox Technologies</b><br>leaf switch")
    assert [a.text for a in fig.layout.annotations] == ["Infiniscale-IV Mellanox Technologies"]  # its label
    assert "9 ports down with nothing attached" in switch[2]
    hosts = {p[0]: p for p in points(fig, "host")}
    assert sorted(hosts) == sorted(f"teaker-{i}" for i in range(4, 12))
    assert hosts["teaker-4"][1] == ("host", "/c/lab/h/teaker-4/")  # a click opens its page
    assert hosts["teaker-9"][1] == ("", "")  # not known to topoweb: nothing to open
    assert "teaker-9 HCA-1 port 1 -> Infiniscale-IV Mellanox Technologies port 3: QDR 4X 5 GB/s" in hosts["teaker-9"][2]
    assert "teaker-9 HCA-1 port 2 -> Infiniscale-IV Mellanox Technologies port 14" in hosts["teaker-9"][2]
    assert {t.name for t in fig.data if t.meta == "link"} == {"QDR 4X 5 GB/s"}
    assert not [t for t in fig.data if t.meta in ("degraded", "down")]  # nothing wrong in this capture
    hovers = " ".join(t for tr in fig.data if tr.meta == "link_hover" for t in tr.hovertext)
    assert "Infiniscale-IV Mellanox Technologies - teaker-9 HCA-1</b><br>port 3 - port 1: 4X QDR, 5 GB/s, Active" \
        "<br>port 14 - port 2: 4X QDR, 5 GB/s, Active<br>capacity 10 GB/s per direction" in hovers
    leaf_y = next(t.y[0] for t in markers(fig, "switch"))
    assert all(y < leaf_y for t in markers(fig, "host") for y in t.y)  # hosts below their leaf


def test_a_slow_cable_and_a_port_down_are_marked_distinctly(teaker):
    """SYNTHETIC derivation of the real teaker capture: the teaker-6 cable (switch port 6) trained at
    1X, and the teaker-7 cable (switch port 5) Initializing, at both ends."""
    text = TEAKER.read_text()
    active, init = "==( 4X          10.0 Gbps Active", "==( 4X          10.0 Gbps Initializing"
    for old, new in (("8    1[  ] ==( 4X ", "8    1[  ] ==( 1X "), ("2    6[  ] ==( 4X ", "2    6[  ] ==( 1X "),
                     (f"5    1[  ] {active}", f"5    1[  ] {init}"), (f"2    5[  ] {active}", f"2    5[  ] {init}")):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    G = fabric.build_fabric(iblinkinfo.parse(text))
    fig = ff.fabric_figure(G)
    (halo,) = [t for t in fig.data if t.meta == "degraded"]
    hosts = {p[0]: p for p in points(fig, "host")}
    x6 = next(t.x[list(t.text).index("teaker-6")] for t in markers(fig, "host") if "teaker-6" in t.text)
    assert x6 in halo.x  # the halo runs to teaker-6
    assert "QDR 1X 1.25 GB/s" in {t.name for t in fig.data if t.meta == "link"}
    (down,) = [t for t in fig.data if t.meta == "down"]
    assert len(down.x) == 2  # the switch and teaker-7, each with its end of the cable
    assert "1 port down that leads somewhere" in hosts["teaker-7"][2]
    assert "no Active cable" in {t.name for t in fig.data if t.meta == "link"}


def test_the_superpod_is_drawn_by_group_leaves_sharing_their_spines(superpod):
    d = ff.fabric_drawing(superpod)
    assert d.mode == "grouped" and len(d.boxes) <= ff.BUDGET
    leaves = [b for b in d.boxes.values() if b.tier == "leaf"]
    spines = [b for b in d.boxes.values() if b.tier == "spine"]
    assert sum(len(b.nodes) for b in leaves) == 31 and sum(len(b.nodes) for b in spines) == 9
    name_of = {n: ff.short_name(superpod.nodes[n]["name"]) for n in superpod}
    group = {name_of[n]: b for b in leaves for n in b.nodes}
    assert group["A09-P1-IBLEAF-01-01"] is not group["A09-P1-IBLEAF-01-02"]  # 9 spines vs 7
    assert sum(len(b.nodes) for b in d.boxes.values() if b.kind == "hosts") == 542  # every HCA, none drawn twice
    fig = ff.fabric_figure(superpod)
    assert {t.name for t in fig.data if t.meta == "link"} == {"NDR 4X 50 GB/s"}
    groups = points(fig, "group")
    assert groups and all(cd[0] == "expand" and cd[1] for _t, cd, _h in groups)
    lone = next(h for _t, _cd, h in points(fig, "switch") if "A09-P1-IBLEAF-01-02" in h)
    assert "cabled to 7 of the 9 spines: not to A10-P1-IBSPINE-01, A10-P1-IBSPINE-04" in lone
    bundles = " ".join(t for tr in fig.data if tr.meta == "link_hover" for t in tr.hovertext)
    assert "capacity" in bundles and "x NDR 4X 50 GB/s" in bundles
    assert "SHARP aggregation node" in " ".join(h for _t, _cd, h in points(fig, "group", "switch"))


def test_expanding_a_group_and_then_one_leaf_draws_its_hosts_one_by_one(superpod):
    closed = ff.fabric_drawing(superpod)
    big = max((b for b in closed.boxes.values() if b.kind == "group" and b.tier == "leaf"), key=lambda b: b.count)
    opened = ff.fabric_drawing(superpod, expand=big.id)
    assert opened.expanded == big.id
    members = [b for b in opened.boxes.values() if b.kind == "switch" and b.nodes[0] in big.nodes]
    assert len(members) == big.count
    per_leaf = [b for b in opened.boxes.values() if b.kind == "hosts" and b.parent in big.nodes]
    assert per_leaf and all(b.action == "expand" and b.target == b.parent for b in per_leaf)  # too many to draw
    assert len(opened.boxes) <= ff.BUDGET
    leaf = next(n for n in superpod if superpod.nodes[n].get("name") == "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1")
    urls = {"a08-p1-dgx-04-c01": "/c/lab/h/a08-p1-dgx-04-c01/"}
    focus = ff.fabric_drawing(superpod, expand=leaf, host_urls=urls)
    hosts = sorted(b.label for b in focus.boxes.values() if b.kind == "host" and b.parent == leaf)
    assert hosts == [f"a08-p1-dgx-04-c{i:02d}" for i in range(1, 18)]
    c01 = next(b for b in focus.boxes.values() if b.label == "a08-p1-dgx-04-c01" and b.parent == leaf)
    assert (c01.action, c01.target) == ("host", "/c/lab/h/a08-p1-dgx-04-c01/")
    assert ff.fabric_drawing(superpod, expand="leaf-999").notes == [
        "nothing to expand called 'leaf-999': every group is drawn closed"]


def test_synthetic_2000_switches_are_drawn_by_group_never_one_by_one(synthetic_2000):
    d = ff.fabric_drawing(synthetic_2000)
    assert d.mode == "grouped" and len(d.boxes) <= ff.BUDGET
    by_tier = {}
    for b in d.boxes.values():
        by_tier.setdefault((b.tier, b.kind), []).append(b)
    assert [b.count for b in by_tier["leaf", "group"]] == [25] * 40  # one group per pod: the leaves share its spines
    assert [b.count for b in by_tier["spine", "group"]] == [20] * 40
    assert [b.count for b in by_tier["core", "group"]] == [200]
    assert [b.count for b in by_tier["host", "hosts"]] == [50] * 40  # 400 HCAs, 8 per host, per pod
    leaf_group = by_tier["leaf", "group"][0]
    up = next(x for x in d.bundles if leaf_group.id in (x.a, x.b) and d.boxes[x.b if x.a == leaf_group.id
                                                                              else x.a].tier == "spine")
    assert (up.cables, up.gbs) == (25 * 20, 25 * 20 * 50.0)  # every leaf to every spine of its pod, 4X NDR
    fig = ff.fabric_figure(synthetic_2000, expand="leaf-3")
    hosts = points(fig, "host")
    assert len(hosts) == 50 and all(h.startswith("<b>node") for _t, _cd, h in hosts)  # too many for labels
    assert sum(len(t.x) for t in markers(fig)) <= 2 * ff.BUDGET


def test_an_irregular_fabric_keeps_to_the_group_limit():
    """SYNTHETIC: the bench generator's fat tree with one uplink of every leaf removed, each a
    different spine, so no two leaves of a pod share their spine set."""
    G = fabric.build_fabric(ibnetdiscover.parse(synthetic_ibnetdiscover(
        pods=2, leaves_per_pod=20, spines_per_pod=20, cores=4, hcas_per_leaf=8, core_links_per_spine=2))).copy()
    for n in [n for n, d in G.nodes(data=True) if d.get("tier") == "leaf"]:
        spine = sorted(m for m in G[n] if G.nodes[m].get("tier") == "spine")[int(G.nodes[n]["name"][-2:])]
        G.remove_edge(n, spine)
    d = ff.fabric_drawing(G, budget=40, max_groups=6)
    leaves = [b for b in d.boxes.values() if b.tier == "leaf"]
    assert len(leaves) <= 6 and sum(len(b.nodes) for b in leaves) == 40
    assert len([b for b in d.boxes.values() if b.tier == "spine"]) <= 6


def test_names_from_the_fabric_are_text_never_markup():
    G = fabric.build_fabric({"switches": [{"guid": "0x1", "name": "<b>leaf</b>"}], "links": [
        {"a": {"guid": "0x1", "port": 1}, "b": {"guid": "0xa", "port": 1}, "width": "4X", "speed": "HDR"}],
        "cas": [{"guid": "0xa", "name": "<img src=x> mlx5_0", "host": "<img src=x>"}]})
    fig = ff.fabric_figure(G)
    text = repr([(t.text, t.hovertext) for t in markers(fig)])
    assert "<img" not in text and "&lt;img src=x&gt;" in text and "&lt;b&gt;leaf&lt;/b&gt;" in text
    assert {t.name for t in fig.data if t.meta == "link"} == {"HDR 4X 25 GB/s"}
