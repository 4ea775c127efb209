"""Verdict box, consistency banner with advice held back, and NIC-role overrides.

The disagreeing pair is SYNTHETIC: the real della topo -m (6 NICs) with the real gpud 12-CA ibstat
of another H100 host, so topo -m and ibstat disagree on six NIC ports."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from apps.domain import verdict as dv
from apps.domain.analysis import analyze_host
from apps.ingest import access
from tests.explorer import helpers as h

pytestmark = pytest.mark.django_db

IB12 = h.FIXTURES / "ibstat" / "gpud_h100_12ca_roce_3_down_disabled.txt"


def synthetic_disagreeing_pair() -> dict[str, str]:
    return {"nvidia_smi_topo": h.read(h.TOPO_DELLA), "ibstat": h.read(IB12)}


def test_domain_verdict_counts_sharing_and_holds_back_nic_advice():
    doc = analyze_host(synthetic_disagreeing_pair(), "x").doc
    v = dv.host_verdict(doc)
    rows = {r["gpu"]: r for r in v["gpus"]}
    # mlx5_0 is GPU0's NIC on channel 0 for 6 GPUs: each gets a sixth of its port
    assert rows["GPU0"]["share"] == 6 and rows["GPU0"]["effective_gbs"] == pytest.approx(46.5 / 6, abs=0.01)
    assert rows["GPU4"]["effective_gbs"] == pytest.approx(46.5)
    assert rows["GPU1"]["gdr"]["state"] == "pxn" and rows["GPU1"]["gdr"]["pxn_via"] == "GPU0"
    # the NICs the GPU's other channels use, as the GPU x NIC matrix marks them
    assert rows["GPU1"]["also"] == ["mlx5_3", "mlx5_4", "mlx5_5"] and rows["GPU0"]["also"] == []
    assert [d["nic"] for d in v["ports_down"]] == ["mlx5_2", "mlx5_7", "mlx5_8"]
    assert v["conflict"] and not v["conflict"]["resolved"] and "mlx5_6" in v["conflict"]["nics"]
    assert "NCCL_IB_HCA" in [s["name"] for s in v["advice"]["held_settings"]]
    assert "NCCL_IB_HCA" not in [s["name"] for s in v["advice"]["settings"]]
    assert v["busbw"]["one"]["nodes"] == 1 and v["busbw"]["multi"]["nodes"] > 1


def test_the_verdict_names_the_nics_a_gpus_other_channels_use(signed_in):
    h.snapshot(h.cluster(), "della", synthetic_disagreeing_pair())
    body = signed_in.get(reverse("explorer:host", args=["lab", "della"])).content.decode()
    table = body[body.index('id="verdict-gpus"'):body.index("</table>", body.index('id="verdict-gpus"'))]
    row = table[table.index("<td>GPU1</td>"):table.index("</tr>", table.index("<td>GPU1</td>"))]
    assert "mlx5_0" in row and "+ mlx5_3, mlx5_4, mlx5_5</span>" in row


def test_overrides_rederive_roles_and_resolve_the_banner():
    roles = {"mlx5_1": "storage"}
    doc = analyze_host(synthetic_disagreeing_pair(), "x", nic_roles=roles).doc
    nics = {n["name"]: n for n in doc["nics"]}
    assert nics["mlx5_1"]["compute"] is False
    hca = next(s for s in doc["nccl_settings"] if s["name"] == "NCCL_IB_HCA")
    assert "mlx5_1," not in hca["value"] + "," and "storage/management" in hca["reason"]
    conflict = dv.host_verdict(doc)["conflict"]
    stored = {n: {"role": "compute", "by": "u", "at": "2026-01-01T00:00:00"} for n in conflict["nics"]}
    assert dv.host_verdict(doc, stored)["conflict"]["resolved"] is True
    assert dv.host_verdict(doc, stored)["advice"]["held_settings"] == []


def test_gdr_words_are_the_same_on_host_and_path_pages(signed_in):
    snap = h.snapshot(h.cluster(), "d", synthetic_disagreeing_pair())
    host = signed_in.get(reverse("explorer:host", args=["lab", "d"])).content.decode()
    words = dv.gpu_gdr(snap.document, "GPU1")
    assert words["words"] in host
    path = signed_in.get(reverse("explorer:path") + f"?src={snap.pk}/GPU1&dst={snap.pk}/GPU4").content.decode()
    assert 'id="verdict-line"' in path
    other = h.snapshot(h.cluster(), "e", synthetic_disagreeing_pair())
    path = signed_in.get(reverse("explorer:path") + f"?src={snap.pk}/GPU1&dst={other.pk}/GPU1").content.decode()
    assert words["send"] in path and words["receive"] in path


def test_host_page_verdict_first_banner_and_roles_api(signed_in, django_user_model):
    snap = h.snapshot(h.cluster(), "d", synthetic_disagreeing_pair())
    body = signed_in.get(reverse("explorer:host", args=["lab", "d"])).content.decode()
    assert body.index('id="consistency-banner"') < body.index('id="verdict"') < body.index('id="fig-host"')
    assert dv.HELD_WORDS in body and 'id="held-settings"' in body
    url = f"/api/v1/snapshots/{snap.pk}/nic_roles"
    names = dv.host_verdict(snap.document)["conflict"]["nics"]
    r = signed_in.put(url, data=json.dumps({n: "compute" for n in names} | {"mlx5_1": "storage"}),
                      content_type="application/json")
    assert r.status_code == 200, r.content
    assert r.json()["nic_roles"]["mlx5_1"]["role"] == "storage"
    body = signed_in.get(reverse("explorer:host", args=["lab", "d"])).content.decode()
    assert "Resolved by you" in body and 'id="held-settings"' not in body and "storage</b> <span" in body
    bad = signed_in.put(url, data=json.dumps({"mlx5_99": "compute"}), content_type="application/json")
    assert bad.status_code == 400 and "mlx5_99" in bad.json()["error"]
    # a viewer may not set roles
    viewer = django_user_model.objects.create_user("viewer", password="pw")
    access.grant(cluster="lab", role=access.VIEWER, username="viewer")
    signed_in.force_login(viewer)
    assert signed_in.put(url, data=json.dumps({"mlx5_1": None}), content_type="application/json").status_code == 403
    # a new snapshot of the host (SYNTHETIC change: mlx5_9 Down) carries the roles forward
    text = h.read(IB12)
    head, sep, tail = text.partition("CA 'mlx5_9'")
    tail = tail.replace("State: Active", "State: Down", 1)
    later = h.snapshot(h.cluster(), "d", {"nvidia_smi_topo": h.read(h.TOPO_DELLA), "ibstat": head + sep + tail},
                       collected_at="2030-01-01T00:00:00Z")
    later.refresh_from_db()
    assert later.pk != snap.pk and later.nic_roles["mlx5_1"]["role"] == "storage"
    assert {n["name"]: n["compute"] for n in later.document["nics"]}["mlx5_1"] is False


def test_the_nic_roles_form_needs_the_editor_role_and_hides_other_clusters(signed_in, django_user_model):
    snap = h.snapshot(h.cluster(), "d", synthetic_disagreeing_pair())
    url = reverse("explorer:nic-roles", args=["lab", "d"])
    form = {"snapshot": snap.pk, "role_mlx5_1": "storage"}
    r = signed_in.post(url, form)
    assert r.status_code == 302 and r["Location"].endswith("#verdict")
    snap.refresh_from_db()
    assert snap.nic_roles["mlx5_1"]["role"] == "storage"
    viewer = django_user_model.objects.create_user("viewer", password="pw")
    access.grant(cluster="lab", role=access.VIEWER, username="viewer")
    signed_in.force_login(viewer)
    assert signed_in.post(url, {**form, "role_mlx5_1": ""}).status_code == 403
    snap.refresh_from_db()
    assert snap.nic_roles["mlx5_1"]["role"] == "storage"  # the refusal changed nothing
    outsider = django_user_model.objects.create_user("outsider", password="pw")
    signed_in.force_login(outsider)
    assert signed_in.post(url, form).status_code == 404
