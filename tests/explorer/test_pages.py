"""Every explorer page renders for a signed-in user, with real captures behind it."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from apps.explorer.models import ShareLink
from apps.ingest.models import Host, Snapshot
from tests.explorer import helpers as h

pytestmark = pytest.mark.django_db


def figure(html: str, element_id: str) -> dict:
    m = re.search(rf'<script id="{element_id}" type="application/json"[^>]*>(.*?)</script>', html, re.S)
    assert m, f"no figure {element_id}"
    return json.loads(m.group(1))


def test_pages_need_a_login(client):
    for url in ("/", "/paste/", "/capacity/", "/path/", "/shared/"):
        resp = client.get(url)
        assert resp.status_code == 302 and resp["Location"].startswith("/accounts/login/"), url


def test_no_clusters_says_how_to_start(signed_in):
    body = signed_in.get("/").content.decode()
    assert "create_cluster" in body and "agent.py" in body and "/paste/" in body


def test_cluster_page_groups_hosts_and_names_the_odd_one_out(signed_in):
    c = h.cluster()
    for name in ("node-a", "node-b", "node-c"):
        h.standard_host(c, name)
    h.snapshot(c, "node-d", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_3")})
    body = signed_in.get(reverse("explorer:cluster", args=["lab"])).content.decode()
    assert body.count('class="odd-one"') == 1
    odd_row = body[body.index('class="odd-one"'):]
    odd_row = odd_row[:odd_row.index("</tr>")]
    assert "node-d" in odd_row and "mlx5_3" in odd_row and "Down" in odd_row
    assert "2</b> distinct layouts" in body


def test_host_page_draws_gpus_and_nics_and_lists_findings(signed_in):
    s = h.standard_host(h.cluster(), "node-a")
    resp = signed_in.get(reverse("explorer:host", args=["lab", "node-a"]))
    body = resp.content.decode()
    fig = figure(body, "fig-host-data")
    kinds = {t.get("meta") for t in fig["data"]}
    assert {"gpu", "nic", "nvswitch"} <= kinds
    gpu = next(t for t in fig["data"] if t.get("meta") == "gpu")
    assert len(gpu["x"]) == 8 and gpu["customdata"][0] == ["gpu", "GPU0"]
    assert figure(body, "fig-gpu-data")["data"][0]["type"] == "heatmap"
    assert figure(body, "fig-nic-data")["data"][0]["type"] == "heatmap"
    assert "NCCL_IB_HCA" in body and 'data-copy="nccl-export"' in body
    assert "Mixed link layers" in body  # a real finding of this capture
    assert f'value="{s.pk}" selected' in body


def test_host_page_snapshot_selector_shows_history(signed_in):
    c = h.cluster()
    old = h.standard_host(c, "node-a", collected_at="2025-01-01T00:00:00Z")
    new = h.snapshot(c, "node-a", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down()},
                     collected_at="2025-02-01T00:00:00Z")
    url = reverse("explorer:host", args=["lab", "node-a"])
    body = signed_in.get(url).content.decode()
    assert f'value="{new.pk}" selected' in body and f'value="{old.pk}"' in body
    body = signed_in.get(f"{url}?snapshot={old.pk}").content.decode()
    assert f'value="{old.pk}" selected' in body


def test_markup_in_names_renders_as_text(signed_in):
    """Hostnames and device names come from nodes: they must never become markup."""
    evil = "<img src=x onerror=alert(1)>"
    c = h.cluster()
    s = h.standard_host(c, "node-a")
    doc = s.document
    doc["hostname"] = evil
    doc["nics"][0]["name"] = evil
    for n in doc["graph"]["nodes"]:
        if n["id"] == "mlx5_0":
            n["label"] = evil
    Snapshot.objects.filter(pk=s.pk).update(document=doc)
    Host.objects.filter(pk=s.host_id).update(description=evil)
    bad = Host.objects.create(cluster=c, hostname=evil)  # stored by a path that skipped validation
    h.snapshot(c, "node-b", {"nvidia_smi_topo": h.read(h.TOPO)})
    Snapshot.objects.filter(host__hostname="node-b").update(host=bad)
    for url in (reverse("explorer:host", args=["lab", "node-a"]), reverse("explorer:cluster", args=["lab"])):
        body = signed_in.get(url).content.decode()
        assert evil not in body, url
        assert "&lt;img src=x onerror=alert(1)&gt;" in body or "\\u003Cimg" in body, url
    resp = signed_in.post("/paste/", {"hostname": evil, "cluster": "lab", "text": h.read(h.TOPO)})
    body = resp.content.decode()
    assert resp.status_code == 400 and evil not in body and "&lt;img src=x" in body


def test_paste_two_outputs_in_one_box_opens_the_host_page(signed_in):
    h.cluster()
    box = "$ nvidia-smi topo -m\n" + h.read(h.TOPO) + "\n$ ibstat\n" + h.read(h.IBSTAT)
    resp = signed_in.post("/paste/", {"hostname": "pasted-1", "cluster": "lab", "text": box})
    assert resp.status_code == 302
    assert resp["Location"].startswith(reverse("explorer:host", args=["lab", "pasted-1"]))
    snap = Snapshot.objects.get(host__hostname="pasted-1")
    assert set(snap.document["sources"]) == {"nvidia_smi_topo", "ibstat"}
    assert snap.upload.via == "web"


def test_paste_parse_error_names_section_and_line(signed_in):
    h.cluster()
    topo = h.read(h.TOPO).splitlines()
    topo[3] = topo[3].replace("NV18", "QQQQ", 1)  # a broken cell
    box = "### nvidia_smi_topo\n" + "\n".join(topo) + "\n"
    resp = signed_in.post("/paste/", {"hostname": "pasted-2", "cluster": "lab", "text": box})
    body = resp.content.decode()
    assert resp.status_code == 400
    assert "nvidia_smi_topo" in body and "line 4 of that output" in body and "line 5 of the box" in body
    assert not Snapshot.objects.filter(host__hostname="pasted-2").exists()


def test_paste_detect_reports_kinds_live(signed_in):
    box = h.read(h.TOPO) + h.read(h.IBSTAT)
    data = signed_in.post("/paste/detect/", {"text": box}).json()
    assert [s["kind"] for s in data["sections"]] == ["nvidia_smi_topo", "ibstat"]


def test_upload_agent_report_file(signed_in):
    from django.core.files.uploadedfile import SimpleUploadedFile

    h.cluster()
    report = {"schema": "topoweb.report/1", "hostname": "agent-1", "sections": {"nvidia_smi_topo": h.read(h.TOPO)}}
    f = SimpleUploadedFile("report.json", json.dumps(report).encode(), content_type="application/json")
    resp = signed_in.post("/paste/", {"cluster": "lab", "report": f})
    assert resp.status_code == 302 and "/h/agent-1/" in resp["Location"]


def test_path_across_hosts_lists_hops_and_bottleneck(signed_in):
    c = h.cluster()
    a = h.standard_host(c, "node-a")
    b = h.standard_host(c, "node-b")
    resp = signed_in.get(f"/path/?src={a.pk}/GPU5&dst={b.pk}/GPU5")
    body = resp.content.decode()
    assert resp.status_code == 200
    assert body.count("<tr class=\"bottleneck\">") == 1
    fig = figure(body, "fig-path-data")
    assert sum(1 for t in fig["data"] if t.get("meta") == "bottleneck") == 1
    assert "GPUDirect RDMA at node-a/GPU5" in body
    # by host name too
    assert signed_in.get("/path/?src=lab/node-a/GPU0&dst=lab/node-b/GPU1").status_code == 200


def test_path_bad_reference_is_explained(signed_in):
    body = signed_in.get("/path/?src=999/GPU0&dst=998/GPU1").content.decode()
    assert "no snapshot 999" in body


def test_share_link_works_without_login_until_revoked(signed_in, client):
    c = h.cluster()
    a = h.standard_host(c, "node-a")
    b = h.standard_host(c, "node-b")
    resp = signed_in.post("/path/share/", {"src": f"{a.pk}/GPU1", "dst": f"{b.pk}/GPU2"}, follow=True)
    url = re.search(r"(http://testserver/s/[^/\s]+/)", resp.content.decode()).group(1)
    signed_in.logout()
    anon = client.get(url.replace("http://testserver", ""))
    assert anon.status_code == 200 and "node-a/GPU1" in anon.content.decode()
    link = ShareLink.objects.get()
    signed_in.force_login(link.created_by)
    signed_in.post("/shared/", {"link": link.pk})
    signed_in.logout()
    assert client.get(url.replace("http://testserver", "")).status_code == 410
    assert client.get("/s/not-a-token/").status_code == 410


def test_share_link_expires(signed_in, client, settings):
    from datetime import timedelta
    from unittest import mock

    from django.core import signing

    c = h.cluster()
    a = h.standard_host(c, "node-a")
    signed_in.post("/path/share/", {"src": f"{a.pk}/GPU1", "dst": f"{a.pk}/GPU2"})
    link = ShareLink.objects.get()
    token = signing.dumps(link.pk, salt="topoweb.sharelink", compress=True)
    later = signing.TimestampSigner().timestamp
    settings.SHARE_LINK_MAX_AGE_DAYS = 1
    with mock.patch("time.time", return_value=__import__("time").time() + timedelta(days=2).total_seconds()):
        resp = client.get(f"/s/{token}/")
    assert resp.status_code == 410 and "expired" in resp.content.decode()
    assert later  # the signer in use has timestamps


def test_compare_highlights_the_change(signed_in):
    c = h.cluster()
    old = h.standard_host(c, "node-a", collected_at="2025-01-01T00:00:00Z")
    new = h.snapshot(c, "node-a", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_0")},
                     collected_at="2025-02-01T00:00:00Z")
    url = reverse("explorer:compare", args=["lab", "node-a"])
    body = signed_in.get(f"{url}?a={old.pk}&b={new.pk}").content.decode()
    assert "mlx5_0: port Active, 400 Gb/s -&gt; Down" in body
    fig_b = figure(body, "fig-b-data")
    assert any(t.get("meta") == "highlight-changed" for t in fig_b["data"])
    assert "GPU0 -&gt; mlx5_3 (was mlx5_0)" in body  # GPU0 loses its PIX NIC


def test_cluster_at_two_moments(signed_in):
    c = h.cluster()
    h.standard_host(c, "node-a", collected_at="2025-01-01T00:00:00Z")
    h.snapshot(c, "node-a", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down()},
               collected_at="2025-02-01T00:00:00Z")
    body = signed_in.get(reverse("explorer:cluster-compare", args=["lab"]) + "?a=2025-01-15T00:00").content.decode()
    assert "mlx5_0" in body and "details" in body


def test_capacity_two_layouts(signed_in):
    c = h.cluster()
    a = h.standard_host(c, "node-a")
    b = h.snapshot(c, "della", {"nvidia_smi_topo": h.read(h.TOPO_DELLA)})
    body = signed_in.get(f"/capacity/?a={a.pk}&b={b.pk}").content.decode()
    fig = figure(body, "fig-capacity-data")
    assert len(fig["data"]) == 2
    assert fig["layout"]["xaxis"]["type"] == "log"
    assert "NIC sum across nodes" in body
