"""figures.py: pure figure builders, checked on fig.data without a browser."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from apps.domain.analysis import analyze_host, path_between
from apps.explorer import figure_labels, figures

FIX = Path(__file__).resolve().parent.parent / "fixtures"
TOPO = (FIX / "nvidia_smi_topo" / "mooncake_issue_8xnv18_12nic_cpuset_list.txt").read_text()
IBSTAT = (FIX / "ibstat" / "mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt").read_text()
K80 = (FIX / "nvidia_smi_topo" / "hpc_blog_k80_4gpu_mlx4_soc_cpuset.txt").read_text()


@pytest.fixture(scope="module")
def doc():
    return analyze_host({"nvidia_smi_topo": TOPO, "ibstat": IBSTAT}, "n1").to_dict()


def by_meta(fig, meta):
    return [t for t in fig.data if t.meta == meta]


def test_layout_sockets_on_top_devices_at_the_bottom(doc):
    pos = figures.node_positions(doc)
    kinds = {n["id"]: n["kind"] for n in doc["graph"]["nodes"]}
    top = max(y for _, y in pos.values())
    assert all(pos[i][1] == top for i, k in kinds.items() if k == "cpu")
    gpu_y = {pos[i][1] for i, k in kinds.items() if k == "gpu"}
    nic_y = {pos[i][1] for i, k in kinds.items() if k == "nic"}
    switch_y = [pos[i][1] for i, k in kinds.items() if k == "switch"]
    assert len(gpu_y) == 1 and len(nic_y) == 1 and max(gpu_y | nic_y) < min(switch_y)
    nvs = next(i for i, k in kinds.items() if k == "nvswitch")
    assert pos[nvs][1] < min(gpu_y)


def test_gpus_and_nics_differ_in_shape_and_colour_and_inferred_is_hollow(doc):
    fig = figures.host_figure(doc)
    gpu, nic = by_meta(fig, "gpu")[0], by_meta(fig, "nic")[0]
    assert gpu.marker.symbol != nic.marker.symbol and gpu.marker.color != nic.marker.color
    assert gpu.marker.symbol.endswith("-open") and "(inferred)" in gpu.name  # topo -m alone: inferred
    assert [c[1] for c in gpu.customdata] == [f"GPU{i}" for i in range(8)]
    assert any("NIC port not Active" in (t.name or "") for t in fig.data)  # mlx5_1, mlx5_2 are Down
    assert any("NVSwitch: NV18 per GPU" in a.text for a in fig.layout.annotations)


def test_p2p_gaps_and_degraded_links_are_drawn():
    d = analyze_host({"nvidia_smi_topo": K80}, "k80").to_dict()
    assert d["p2p_gaps"], "this real capture has GPU pairs across sockets"
    fig = figures.host_figure(d)
    assert any((t.name or "").startswith("no P2P") for t in fig.data)
    d2 = copy.deepcopy(d)
    gpu0 = next(n for n in d2["graph"]["nodes"] if n["id"] == "GPU0")
    edge = next(e for e in d2["graph"]["edges"] if e["target"] == "GPU0" and e["kind"] == "pcie")
    edge.update(source=gpu0["parent"], width=8, max_width=16, degraded=True)
    assert any((t.name or "").startswith("degraded link") for t in figures.host_figure(d2).data)


def test_names_from_nodes_are_escaped(doc):
    d = copy.deepcopy(doc)
    d["hostname"] = "<b>x</b>"
    for n in d["graph"]["nodes"]:
        if n["id"] == "GPU0":
            n["label"] = "<img src=x onerror=alert(1)>"
    fig = figures.host_figure(d)
    text = fig.to_json()
    assert "<img" not in text and "&lt;img src=x" in text and "&lt;b&gt;x&lt;" in fig.layout.title.text


def test_matrices_show_class_and_value_in_each_cell(doc):
    g, values = figures.gpu_matrix_figure(doc).data[:2]
    assert g.text[0][1].startswith("NV18") and g.customdata[0][1] == "nvlink" and g.customdata[0][0] == "self"
    cell = list(zip(values.x, values.y, values.text))
    assert ("GPU1", "GPU0", "396*") in cell  # the pair's expected GB/s (assumed H100 rate) under its class
    n, nvalues = figures.nic_matrix_figure(doc).data[:2]
    i = list(n.y).index("mlx5_0")  # 12 NICs: one row per NIC
    assert n.text[i][0].startswith("<b>PIX</b>")  # GPU0 picks mlx5_0 (bold) ...
    assert n.customdata[i][0] == "gdr"  # ... with GPUDirect RDMA: the best colour
    assert ("GPU0", "mlx5_0", "46.5") in list(zip(nvalues.x, nvalues.y, nvalues.text))


def test_path_marks_one_bottleneck_and_both_hosts(doc):
    other = {**doc, "hostname": "n2"}
    p = path_between(doc, "GPU5", other, "GPU5")
    fig = figures.path_figure(p, [doc, other])
    assert len(by_meta(fig, "bottleneck")) == 1
    assert len(by_meta(fig, "hop")) + 1 == len(p["hops"])
    hosts = [a.text for a in fig.layout.annotations if a.text in ("<b>n1</b>", "<b>n2</b>")]
    assert hosts == ["<b>n1</b>", "<b>n2</b>"]


def test_a_long_path_staggers_its_hop_labels_and_keeps_the_bottleneck_word_under_its_box():
    """A synthetic chain of 14 PCIe hops (more than CROWDED_HOPS): neighbouring labels sit at two heights."""
    hops = [{"from": f"d{i}", "to": f"d{i + 1}", "kind": "pcie", "expected_gbs": 20.0 + i, "spec_gbs": 32.0,
             "flows": 1, "host": "n1", "from_id": f"d{i}", "to_id": f"d{i + 1}"} for i in range(14)]
    spec = figures.path_spec({"hops": hops, "bottleneck": 0, "bottleneck_gbs": 20.0})
    labels = [a for a in spec["layout"]["annotations"] if "GB/s" in (a.get("text") or "")]
    assert len(labels) == 14 > figures.CROWDED_HOPS
    assert [a["yshift"] for a in labels[:4]] == [18, 46, 18, 46]
    [word] = [a for a in spec["layout"]["annotations"] if "bottleneck" in (a.get("text") or "")]
    assert (word["x"], word["y"], word["yanchor"]) == (0.5, -0.5, "top")  # under the dotted box, not on a label
    few = figures.path_spec({"hops": hops[:3], "bottleneck": 0, "bottleneck_gbs": 20.0})
    assert {a["yshift"] for a in few["layout"]["annotations"] if "GB/s" in (a.get("text") or "")} == {18}


def test_capacity_has_a_log2_node_axis_and_one_line_per_layout(doc):
    fig = figures.capacity_figure([("A", doc), ("B", doc)])
    assert len(fig.data) == 2 and fig.layout.xaxis.type == "log"
    assert list(fig.layout.xaxis.tickvals) == [1, 2, 4, 8, 16, 32, 64]
    assert list(fig.data[0].x)[-1] == 64
    assert "GB/s" in fig.layout.yaxis.title.text and "nodes" in fig.layout.xaxis.title.text


def _boxes(texts, xs, ys, px_x, px_y):
    return [(x * px_x, y * px_y, figure_labels.text_width(t) / 2, figure_labels.LABEL_LINE_PX / 2)
            for t, x, y in zip(texts, xs, ys)]


def _overlaps(boxes):
    return [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if abs(a[0] - b[0]) < a[2] + b[2] and abs(a[1] - b[1]) < a[3] + b[3]]


@pytest.mark.parametrize("width", [figure_labels.PLOT_WIDTH_PX, figure_labels.HALF_WIDTH_PX])
def test_crowded_switches_get_one_label_per_kind_of_link_and_labels_never_overlap(width):
    """The Dell XE9680's whole lspci -vvv: each of its eight GPU switches holds one H100 and one
    ConnectX NIC at Gen5 x16 (read off the capture: LnkSta 32GT/s x16 on both), drawn as one
    "2× G5 x16" label; no two link labels, and no two GPU or NIC names, cover each other."""
    text = (FIX / "lspci_verbose" / "gpud_dell_xe9680_hgx_h100_8gpu_full_lspci_vvv.txt").read_text()
    doc = analyze_host({"lspci_verbose": text}, "xe9680").to_dict()
    spec = figures.host_spec(doc, plot_width=width)
    trace = next(t for t in spec["data"] if t.get("name") == "PCIe link labels")
    assert width == figure_labels.HALF_WIDTH_PX or trace["text"].count("2× G5 x16") == 8
    px_x, px_y = figure_labels.scale(figures.node_positions(doc), 600, width)
    assert not _overlaps(_boxes(trace["text"], trace["x"], trace["y"], px_x, px_y))
    names = [a for a in spec["layout"]["annotations"] if str(a.get("text", "")).startswith(("pci:", "GPU"))]
    assert len(names) == len(doc["nics"]) + len(doc["gpus"]) == 12 + 8  # every NIC and GPU named, none left out
    boxes = [(a["x"] * px_x, a["y"] * px_y + a["yshift"], figure_labels.text_width(a["text"], a["font"]["size"]) / 2,
              figure_labels.LABEL_LINE_PX / 2) for a in names]
    # at full width every name finds a free line; at half width some must share one
    assert not _overlaps(boxes) or width == figure_labels.HALF_WIDTH_PX


def test_a_degraded_link_keeps_its_label_however_crowded():
    text = (FIX / "lspci_verbose" / "gpud_dell_xe9680_hgx_h100_8gpu_full_lspci_vvv.txt").read_text()
    doc = analyze_host({"lspci_verbose": text}, "xe9680").to_dict()
    edges = [e for e in doc["graph"]["edges"] if e["kind"] == "pcie" and e.get("gen") == 5 and e.get("width") == 16]
    for e in edges:  # SYNTHETIC: every Gen5 x16 link marked degraded, in a figure only 300 px wide
        e["degraded"] = True
    spec = figures.host_spec(doc, plot_width=300)
    trace = next(t for t in spec["data"] if t.get("name") == "PCIe link labels")
    assert sum(1 for t in trace["text"] if "G5 x16" in t) == 16  # 8 switch uplinks + 8 merged GPU/NIC pairs
