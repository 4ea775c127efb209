"""Fabric outputs on the paste page (stored as fabric uploads of the chosen cluster) and the fabric
section of the cluster compared at two moments, on the real SuperPOD ibnetdiscover and a version of
it derived in tests/domain/test_fabric_compare.py."""

from __future__ import annotations

import json

import pytest

from apps.ingest import fabrics
from apps.ingest.models import Fabric, Upload
from tests.domain.test_fabric_compare import LEAF, SUPERPOD, superpod_next_day
from tests.explorer import helpers as h

pytestmark = pytest.mark.django_db

IBM_2NODE = SUPERPOD.parent / "ibm_pcm_2node_mt43132_8port_switch_sdr_2009.txt"
LLDP_TEXT = h.FIXTURES / "lldpcli_neighbors" / "synthetic_roce_gpu_node_4nics_two_leaves.txt"


@pytest.fixture(autouse=True)
def _fresh_caches():
    fabrics.clear_caches()
    yield
    fabrics.clear_caches()


def test_a_pasted_discovery_is_a_fabric_upload_and_opens_the_fabric_page(signed_in):
    h.cluster()
    resp = signed_in.post("/paste/", {"cluster": "lab", "hostname": "", "text": "$ ibnetdiscover\n" + h.read(IBM_2NODE)})
    assert resp.status_code == 302 and resp["Location"] == "/c/lab/fabric/"
    row = Fabric.objects.get()
    assert row.kind == "ibnetdiscover" and row.via == "web" and row.host is None and row.source_name == "paste (box 1)"
    assert row.summary["switches"] == 1 and row.summary["host_adapters"] == 2  # one MT43132 switch, two HCAs
    assert not Upload.objects.exists()  # no host report: nothing of a host was pasted


def test_host_outputs_and_a_per_host_fabric_output_pasted_together(signed_in):
    h.cluster()
    text = h.read(h.TOPO) + "\n$ lldpcli show neighbors\n" + h.read(LLDP_TEXT)
    resp = signed_in.post("/paste/", {"cluster": "lab", "hostname": "gpu-r01", "text": text}, follow=True)
    assert resp.status_code == 200 and resp.redirect_chain[-1][0].startswith("/c/lab/h/gpu-r01/")
    assert "Fabric: lldpcli_neighbors of gpu-r01 (stored as fabric upload" in resp.content.decode()
    upload = Upload.objects.get()
    assert set(json.loads(upload.raw)["sections"]) == {"nvidia_smi_topo"}
    assert Fabric.objects.get().host.hostname == "gpu-r01"


def test_a_per_host_fabric_output_needs_the_host_name_and_a_bad_one_names_its_line(signed_in):
    h.cluster()
    resp = signed_in.post("/paste/", {"cluster": "lab", "hostname": "", "text": h.read(LLDP_TEXT)})
    assert resp.status_code == 400 and b"Host name: give the name" in resp.content
    lines = h.read(IBM_2NODE).split("\n")
    lines[10] = '[1]     "H-0002c902002789ac[1](2c902002789ad)   # "compute-00-01 HCA-1" lid 1 4xSDR'
    resp = signed_in.post("/paste/", {"cluster": "lab", "text": "### ibnetdiscover\n" + "\n".join(lines)})
    body = resp.content.decode()
    assert resp.status_code == 400 and "line 11 of that output, line 12 of the box" in body
    assert not Fabric.objects.exists()  # a paste that cannot be read stores nothing, as for host outputs


def test_the_cluster_at_two_moments_says_what_changed_in_the_fabric(signed_in):
    c = h.cluster()
    h.standard_host(c, "node-a", collected_at="2025-03-01T00:00:00Z")
    fabrics.submit_fabric(cluster=c, text=SUPERPOD.read_text(), via="web", collected_at="2025-03-01T00:00:00Z")
    fabrics.submit_fabric(cluster=c, text=superpod_next_day(SUPERPOD.read_text()), via="web",
                          collected_at="2025-03-02T00:00:00Z")
    body = signed_in.get("/c/lab/compare/?a=2025-03-01T12:00&b=2025-03-03T00:00").content.decode()
    assert 'id="fabric-compare"' in body
    assert f"a08-p1-dgx-04-c02 mlx5_5 moved from {LEAF} port 2 to {LEAF} port 18" in body
    assert "went down (a08-p1-dgx-04-c01 mlx5_5 is gone from the discovery)" in body
    assert "4X NDR (50 GB/s) -&gt; 2X NDR (25 GB/s)" in body
    same = signed_in.get("/c/lab/compare/?a=2025-03-02T12:00&b=2025-03-03T00:00").content.decode()
    assert "The same discovery at both moments." in same
    before_any = signed_in.get("/c/lab/compare/?a=2025-02-01T00:00&b=2025-03-03T00:00").content.decode()
    assert 'id="fabric-compare"' not in before_any  # no fabric at the first moment: no fabric section
