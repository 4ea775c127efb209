"""Host page matrices coloured by what the GPU gets, values in the cells, sources as links, GPU buttons."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from apps.explorer.figure_matrices import GPU_CATEGORIES, NIC_CATEGORIES
from tests.explorer import helpers as h

pytestmark = pytest.mark.django_db

# two PCIe GPUs under one host bridge: their only pair has no P2P (PHB: NCCL copies through host memory)
TWO_GPU_PHB = h.FIXTURES / "nvidia_smi_topo" / "stas00_mleng_2gpu_pcie_phb.txt"
# 4x L40S, every pair NODE or SYS (no P2P at all)
L40S = h.FIXTURES / "nvidia_smi_topo" / "aws_g6e_12xlarge_4x_l40s_node.txt"
WARNING = {"no_p2p", "no_p2p_sys"}


def figure(body: str, element_id: str) -> dict:
    m = re.search(rf'<script id="{element_id}" type="application/json"[^>]*>(.*?)</script>', body, re.S)
    assert m, f"no figure {element_id}"
    return json.loads(m.group(1))


def cell(fig: dict, row: str, col: str) -> tuple[str, str, str | None]:
    """(category key, colour, value text) of one matrix cell."""
    heat, values = fig["data"][0], fig["data"][1]
    if row not in heat["y"]:  # one row per NIC (a box with many NICs)
        row, col = col, row
    i, j = heat["y"].index(row), heat["x"].index(col)
    key = heat["customdata"][i][j]
    z = heat["z"][i][j]
    scale = heat["colorscale"]
    colour = scale[2 * z][1] if z is not None else None  # stepped scale: two stops per category (z = its index)
    value = next((t for x, y, t in zip(values["x"], values["y"], values["text"]) if (x, y) == (col, row)), None)
    return key, colour, value


def host_body(client, host: str) -> str:
    return client.get(reverse("explorer:host", args=["lab", host])).content.decode()


def test_the_only_pair_of_a_two_gpu_box_without_p2p_is_a_warning(signed_in):
    h.snapshot(h.cluster(), "two", {"nvidia_smi_topo": h.read(TWO_GPU_PHB)})
    fig = figure(host_body(signed_in, "two"), "fig-gpu-data")
    key, colour, value = cell(fig, "GPU0", "GPU1")
    assert key == "no_p2p" and colour == GPU_CATEGORIES["no_p2p"][0] != GPU_CATEGORIES["nvlink"][0]
    assert value is None  # no GB/s: the pair has no P2P
    assert fig["data"][0]["text"][0][1].startswith("PHB")
    assert "no P2P (SHM)" in fig["layout"]["annotations"][0]["text"]  # the legend says what the colour means


def test_nvlink_pairs_are_best_and_show_their_figure(signed_in):
    h.standard_host(h.cluster(), "nv")
    fig = figure(host_body(signed_in, "nv"), "fig-gpu-data")
    key, colour, value = cell(fig, "GPU0", "GPU5")
    assert key == "nvlink" and colour == GPU_CATEGORIES["nvlink"][0]
    assert value == "396*" and fig["data"][0]["text"][0][5].startswith("NV18")


def test_a_far_node_nic_is_not_in_the_best_colour(signed_in):
    h.standard_host(h.cluster(), "nv")
    fig = figure(host_body(signed_in, "nv"), "fig-nic-data")
    near = cell(fig, "GPU0", "mlx5_0")  # PIX, GDR on, NCCL's pick (bold)
    far = cell(fig, "GPU0", "mlx5_3")  # NODE, GDR off: same 400G line rate
    assert near[0] == "gdr" and near[1] == NIC_CATEGORIES["gdr"][0] and near[2] == "46.5"
    assert far[0] == "far" and far[1] != NIC_CATEGORIES["gdr"][0] and far[2] == "46.5"
    assert fig["data"][0]["text"][0][0].startswith("<b>PIX</b>") and "NODE" in fig["data"][0]["text"][3][0]


def test_a_down_port_is_a_warning_in_the_nic_matrix(signed_in):
    h.standard_host(h.cluster(), "nv")
    fig = figure(host_body(signed_in, "nv"), "fig-nic-data")
    heat = fig["data"][0]
    assert heat["y"][0] == "mlx5_0" and heat["x"][0] == "GPU0"  # 12 NICs, 8 GPUs: one row per NIC
    down = [heat["y"][i] for i in range(len(heat["y"])) if heat["customdata"][i][0] == "down"]
    assert down  # this capture has ports that are not Active
    assert cell(fig, "GPU0", down[0])[1:] == (NIC_CATEGORIES["down"][0], "down")


def test_matrix_text_is_at_least_12_px(signed_in):
    h.standard_host(h.cluster(), "nv")
    body = host_body(signed_in, "nv")
    for fid in ("fig-gpu-data", "fig-nic-data", "fig-host-data"):
        fig = figure(body, fid)
        sizes = [t["textfont"]["size"] for t in fig["data"] if "textfont" in t]
        sizes += [a["font"]["size"] for a in fig["layout"].get("annotations", []) if "font" in a]
        assert sizes and min(sizes) >= 12, (fid, sizes)


def test_a_box_without_any_p2p_pair_says_so_instead_of_drawing_every_arc(signed_in):
    h.snapshot(h.cluster(), "l40s", {"nvidia_smi_topo": h.read(L40S)})
    fig = figure(host_body(signed_in, "l40s"), "fig-host-data")
    assert not any(t.get("legendgroup") == "p2p" for t in fig["data"])
    assert any(a.get("meta") == "p2p-summary" and "no P2P between any GPU pair" in a["text"]
               for a in fig["layout"]["annotations"])


def test_finding_sources_are_links_and_gpus_have_buttons(signed_in):
    snap = h.standard_host(h.cluster(), "nv")
    body = host_body(signed_in, "nv")
    assert ('<a class="cite" href="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/transport/net_ib/connect.cc'
            '#L985-L990"') in body  # F04 (mixed link layers) cites connect.cc L985-990
    assert 'Source: ' in body and "[S10]</a>" in body
    for g in range(8):
        button = f'<button type="button" class="gpu-key" data-gpu="GPU{g}" data-snapshot="{snap.pk}">GPU{g}</button>'
        assert button in body
