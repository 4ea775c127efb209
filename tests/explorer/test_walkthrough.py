"""What a user walking through the pages at 1366x768 found wrong, one test per finding (real captures)."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from apps.domain import labels
from tests.explorer import helpers as h

pytestmark = pytest.mark.django_db

TOPO_DIR = h.FIXTURES / "nvidia_smi_topo"
P4D = TOPO_DIR / "aws_p4d_24xlarge_8xa100_nv12.txt"          # 8x A100, NVSwitch (NV12)
V100 = TOPO_DIR / "korean_wiki_8xv100_vm_nv1nv2_phb.txt"     # 8x V100, NVLink hybrid cube mesh
DEEPEP = TOPO_DIR / "deepep_issue_8xa100_80g_8nic_roce.txt"     # 8x A100, 8 NICs, no ibstat
PCIE8 = TOPO_DIR / "lmdeploy_issue_8gpu_pcie_node_sys_256t.txt"  # 8 GPUs, PCIe only


def rows_of(body: str) -> dict[str, str]:
    """Host name -> its row's HTML in the cluster table."""
    table = body[body.index('<table id="hosts"'):]
    out = {}
    for row in re.findall(r"<tr class=.*?</tr>", table, re.S):
        m = re.search(r'<td data-v="([^"]+)"><a', row)
        if m:
            out[m.group(1)] = row
    return out


def test_hosts_of_different_gpu_models_are_different_platforms(signed_in):
    """8-GPU boards of different models are never each other's norm; the odd one out of the
    H100-class platform is the host with a port down, named first and in a few lines."""
    c = h.cluster()
    h.snapshot(c, "a100", {"nvidia_smi_topo": h.read(P4D)})
    h.snapshot(c, "v100", {"nvidia_smi_topo": h.read(V100)})
    h.snapshot(c, "pcie", {"nvidia_smi_topo": h.read(PCIE8)})
    for name in ("h-1", "h-2", "h-3"):
        h.standard_host(c, name)
    h.snapshot(c, "h-4", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_3")})
    body = signed_in.get(reverse("explorer:cluster", args=["lab"])).content.decode()
    rows = rows_of(body)
    assert [name for name, row in rows.items() if 'class="odd-one"' in row] == ["h-4"]
    assert "<b>1</b> odd one out" in body
    for name in ("a100", "v100", "pcie"):
        assert "only host of its platform" in rows[name]
    odd = re.findall(r"<li>(.*?)</li>", rows["h-4"])
    assert 1 <= len(odd) <= 6
    assert odd[0].startswith("mlx5_3: port Active") and "Down" in odd[0]
    assert "GPU0 moved" not in rows["h-4"]
    for name in ("h-1", "h-2", "h-3"):
        assert "matches the norm" in rows[name]


def test_two_hosts_with_two_layouts_flag_neither(signed_in):
    c = h.cluster()
    h.standard_host(c, "h-1")
    h.snapshot(c, "h-2", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_3")})
    body = signed_in.get(reverse("explorer:cluster", args=["lab"])).content.decode()
    assert 'class="odd-one"' not in body and "no majority layout" in body


def test_unknown_model_shows_the_assumed_class_and_unknown_nic_state(signed_in):
    c = h.cluster()
    h.snapshot(c, "a100", {"nvidia_smi_topo": h.read(DEEPEP)})
    h.standard_host(c, "h-1")
    body = signed_in.get(reverse("explorer:cluster", args=["lab"])).content.decode()
    rows = rows_of(body)
    assert "unknown (assumed A100-class)" in rows["a100"]
    assert "8 (state unknown)" in rows["a100"] and "(0)" not in rows["a100"]
    assert "rate unknown" in rows["a100"] and "x NIC<" not in rows["a100"]
    assert re.search(r"12 \(\d+ Active\)", rows["h-1"])
    host = signed_in.get(reverse("explorer:host", args=["lab", "a100"])).content.decode()
    assert "unknown (assumed A100-class)" in host
    assert "state unknown (send ibstat)" in host and "0 Active" not in host


def test_labels_say_what_is_not_known():
    assert labels.gpu_model({"gpu_model_assumed": "H100-class (NVLink4, 18 links per GPU)"}) == \
        "unknown (assumed H100-class)"
    assert labels.gpu_model({"gpu_model": "NVIDIA H100 80GB HBM3"}) == "NVIDIA H100 80GB HBM3"
    assert labels.gpu_model({}) == "unknown"
    assert labels.nic_cell({"nic_state_count": 0}, 8, 0) == "8 (state unknown)"
    assert labels.nic_cell({"nic_state_count": 12}, 12, 9) == "12 (9 Active)"
    assert labels.nic_header({"nic_count": 8, "nic_state_count": 0}) == "8 NIC ports, state unknown (send ibstat)"
    assert labels.nic_rates("8x NIC") == "8x rate unknown"
    assert labels.nic_rates("4x 400 Gb/s Eth, 2x NIC Eth") == "4x 400 Gb/s Eth, 2x Eth (rate unknown)"
    a, _ = labels.platform(8, {"gpu_model_assumed": "A100-class (x)", "nvswitch": True})
    b, _ = labels.platform(8, {"gpu_model_assumed": "H100-class (x)", "nvswitch": True})
    c, _ = labels.platform(8, {"gpu_model_assumed": "H100-class (y)", "nvswitch": True})
    assert a != b and b == c
    assert labels.platform(8, {}, nvlink_class="NV12")[0] != labels.platform(8, {}, nvlink_class="NV18")[0]


def figure(html: str, element_id: str) -> dict:
    m = re.search(rf'<script id="{element_id}" type="application/json"[^>]*>(.*?)</script>', html, re.S)
    assert m, f"no figure {element_id}"
    return json.loads(m.group(1))


def test_host_page_shows_the_assumptions_and_draws_assumed_links_apart(signed_in):
    c = h.cluster()
    s = h.snapshot(c, "a100", {"nvidia_smi_topo": h.read(DEEPEP)})
    doc = s.document
    assert doc["assumptions"]
    body = signed_in.get(reverse("explorer:host", args=["lab", "a100"])).content.decode()
    note = body[body.index('id="assumptions"'):]
    note = note[:note.index("</div>")]
    assert "* = assumed figure" in note
    for sentence in doc["assumptions"]:
        assert sentence.split(":")[0] in note
    fig = figure(body, "fig-host-data")
    assumed = [t for t in fig["data"] if t.get("meta") == "assumed"]
    assert assumed and all(t["line"]["dash"] == "dot" and "assumed" in t["name"] for t in assumed)
    texts = [a["text"] for a in fig["layout"]["annotations"]]
    assert any(t.startswith("NVSwitch:") and t.endswith("*") for t in texts)


def test_host_page_without_assumptions_has_no_note(signed_in):
    h.standard_host(h.cluster(), "node-a")
    s = h.standard_host(h.cluster(), "node-a")
    body = signed_in.get(reverse("explorer:host", args=["lab", "node-a"])).content.decode()
    assert ('id="assumptions"' in body) == bool(s.document.get("assumptions"))


def test_path_selectors_reflect_refs_by_host_name(signed_in):
    c = h.cluster()
    a = h.snapshot(c, "a100", {"nvidia_smi_topo": h.read(DEEPEP)})
    b = h.standard_host(c, "node-b")
    body = signed_in.get("/path/?src=lab/a100/GPU5&dst=lab/node-b/GPU3").content.decode()
    src_host = body[body.index('id="src-host"'):body.index("</select>", body.index('id="src-host"'))]
    dst_host = body[body.index('id="dst-host"'):body.index("</select>", body.index('id="dst-host"'))]
    assert f'value="{a.pk}" selected' in src_host and f'value="{b.pk}" selected' in dst_host
    assert f'id="src-gpu" aria-label="source GPU" data-host="{a.pk}" data-selected="GPU5"' in body
    assert f'id="dst-gpu" aria-label="destination GPU" data-host="{b.pk}" data-selected="GPU3"' in body
    # assumed figures are starred in the hop table and explained once
    table = body[body.index('id="hop-table"'):body.index("</table>", body.index('id="hop-table"'))]
    assert "GB/s*" in table
    assert body.count('id="assumed-note"') == 1


def test_capacity_selectors_reflect_refs_by_host_name_and_axis_spans_1_to_64(signed_in):
    c = h.cluster()
    a = h.snapshot(c, "a100", {"nvidia_smi_topo": h.read(DEEPEP)})
    b = h.standard_host(c, "node-b")
    body = signed_in.get("/capacity/?a=lab/node-b&b=lab/a100").content.decode()
    sel_a = body[body.index('name="a"'):body.index("</select>", body.index('name="a"'))]
    sel_b = body[body.index('name="b"'):body.index("</select>", body.index('name="b"'))]
    assert f'value="{b.pk}" selected' in sel_a and f'value="{a.pk}" selected' in sel_b
    fig = figure(body, "fig-capacity-data")
    lo, hi = fig["layout"]["xaxis"]["range"]
    assert -0.1 < lo <= 0 and 1.806 <= hi < 1.9  # log10(1) .. log10(64)
    for ann, trace in zip(fig["layout"]["annotations"], fig["data"]):
        last = max(trace["x"])
        assert ann["xanchor"] == ("right" if last >= 16 else "left")


def test_capacity_without_parameters_preselects_the_two_best_layouts(signed_in):
    c = h.cluster()
    h.snapshot(c, "a100", {"nvidia_smi_topo": h.read(DEEPEP)})
    h.standard_host(c, "node-b")
    h.standard_host(c, "node-c")  # same layout as node-b: not offered twice
    resp = signed_in.get("/capacity/")
    assert resp.status_code == 302
    query = resp["Location"].split("?", 1)[1]
    ids = [int(v.split("=")[1]) for v in query.split("&")]
    from apps.ingest.models import Snapshot
    hosts = {Snapshot.objects.get(pk=i).host.hostname for i in ids}
    assert len(ids) == 2 and "a100" in hosts and len(hosts & {"node-b", "node-c"}) == 1


def test_an_empty_database_explains_every_page(signed_in):
    for url, words in (("/", "create_cluster"), ("/path/", "No host has a snapshot yet"),
                       ("/capacity/", "No layout yet"), ("/shared/", "You have not shared a path yet"),
                       ("/paste/", "Paste")):
        resp = signed_in.get(url)
        assert resp.status_code == 200, url
        assert words in resp.content.decode(), url
