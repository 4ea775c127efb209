"""Host page charts: no empty matrix (a box without NICs says why instead), and one X01 card."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.explorer import helpers as h

pytestmark = pytest.mark.django_db

# AWS p4d: EFA never shows in nvidia-smi topo -m, so the capture has 8 GPUs (28 pairs) and no NIC column
P4D = h.FIXTURES / "nvidia_smi_topo" / "aws_p4d_24xlarge_8xa100_nv12.txt"
# 8 PCIe GPUs, every pair SYS although GPU0-3 share NUMA 0 and GPU4-7 NUMA 1: six contradictions
ALL_SYS = h.FIXTURES / "nvidia_smi_topo" / "notes_8gpu_pcie_all_sys_anomaly.txt"


def test_host_without_nics_draws_no_nic_chart_and_says_why(signed_in):
    h.snapshot(h.cluster(), "p4d", {"nvidia_smi_topo": h.read(P4D)})
    body = signed_in.get(reverse("explorer:host", args=["lab", "p4d"])).content.decode()
    assert 'id="fig-nic-data"' not in body and 'id="fig-nic"' not in body
    assert "No NIC was reported: send <code>ibstat</code> or the agent's sysfs_ib listing." in body
    assert 'id="fig-gpu-data"' in body  # its 28 GPU pairs still get their chart


def test_host_with_nics_keeps_both_charts(signed_in):
    h.standard_host(h.cluster(), "node-a")
    body = signed_in.get(reverse("explorer:host", args=["lab", "node-a"])).content.decode()
    assert 'id="fig-nic-data"' in body and 'id="fig-gpu-data"' in body
    assert 'id="no-nic-matrix"' not in body and 'id="no-gpu-matrix"' not in body


def test_contradictions_of_one_source_are_one_card(signed_in):
    h.snapshot(h.cluster(), "pcie", {"nvidia_smi_topo": h.read(ALL_SYS)})
    body = signed_in.get(reverse("explorer:host", args=["lab", "pcie"])).content.decode()
    cards = body.split('<li class="finding">')[1:]
    x01 = [c for c in cards if "X01" in c[:c.index("</div>")]]
    assert len(x01) == 1
    assert "6 disagreements" in x01[0] and "GPU4-GPU7" in x01[0]


def test_cluster_compare_opens_on_the_last_change(signed_in):
    c = h.cluster()
    h.standard_host(c, "node-a", collected_at="2025-01-01T00:00:00Z")
    h.standard_host(c, "node-b", collected_at="2025-01-10T08:30:15Z")
    # SYNTHETIC: node-a's mlx5_0 port turned Down in a later report
    h.snapshot(c, "node-a", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_0")},
               collected_at="2025-02-01T00:00:00Z")
    body = signed_in.get(reverse("explorer:cluster-compare", args=["lab"])).content.decode()
    assert 'name="a" value="2025-01-10T08:30:15"' in body
    assert "Showing the last change: node-a's snapshot" in body and "Before = 2025-01-10 08:30:15 UTC" in body
    assert "mlx5_0: port Active, 400 Gb/s -&gt; Down" in body  # the change itself is listed


def test_cluster_compare_with_one_moment_says_nothing_to_compare(signed_in):
    h.standard_host(h.cluster(), "node-a", collected_at="2025-01-01T00:00:00Z")
    body = signed_in.get(reverse("explorer:cluster-compare", args=["lab"])).content.decode()
    # no empty picker: both hold a moment (the one snapshot time, and now)
    assert "fewer than two snapshot times" in body and 'value=""' not in body
    assert 'name="a" value="2025-01-01T00:00:00"' in body


def test_capacity_opens_on_the_layouts_with_most_data_and_a_verdict(signed_in):
    c = h.cluster()
    a1 = h.standard_host(c, "node-a")  # 8 GPUs + the real ibstat's Active ports, two hosts
    h.standard_host(c, "node-b")
    # SYNTHETIC: one host of the same capture with mlx5_0 Down: a second layout with NICs known
    down = h.snapshot(c, "node-c", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_0")})
    h.snapshot(c, "p4d", {"nvidia_smi_topo": h.read(P4D)})  # no NIC at all
    h.snapshot(c, "della", {"nvidia_smi_topo": h.read(h.TOPO_DELLA)})  # NICs without port states
    resp = signed_in.get("/capacity/?cluster=lab")
    assert resp.status_code == 302
    assert resp["Location"].endswith(f"?a={a1.pk}&b={down.pk}")
    body = signed_in.get(resp["Location"]).content.decode()
    verdict = body[body.index('id="capacity-verdict"'):]
    verdict = verdict[:verdict.index("</p>")]
    assert "at 64 nodes" in verdict and "node-a" in verdict and "node-c" in verdict


def test_a_host_with_many_devices_gets_the_whole_width_for_its_drawing(signed_in):
    h.standard_host(h.cluster(), "node-a")  # 8 GPUs and 12 NICs
    h.snapshot(h.cluster(), "p4d", {"nvidia_smi_topo": h.read(P4D)})  # 8 GPUs, no NIC
    wide = signed_in.get(reverse("explorer:host", args=["lab", "node-a"])).content.decode()
    narrow = signed_in.get(reverse("explorer:host", args=["lab", "p4d"])).content.decode()
    assert '<div class="grid2 wide" id="host-figures">' in wide
    assert '<div class="grid2" id="host-figures">' in narrow
