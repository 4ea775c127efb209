"""Plans (saved what-ifs) through the API and the pages: viewers read, editors write, outsiders see
nothing; a plan is labelled as such everywhere and never becomes a snapshot.

The base host is Princeton Della's 8x H100 capture (real topo -m, six NICs; GPU1 reaches a NIC only
across the host bridges) with its NIC ports stated Active at 200 Gb/s in an ibstat written for the
test (as tests/domain/engine/test_estimate.py does).
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from apps.explorer import plan_capacity
from apps.ingest import access, plans
from apps.ingest.models import Plan, Snapshot
from tests.domain.engine.test_estimate import ibstat
from tests.explorer.helpers import TOPO_DELLA, cluster, read, snapshot

ADD_NIC = [{"op": "add_nic", "name": "mlx5_6", "near": "GPU1", "rate_gbit": 200, "link_layer": "InfiniBand"}]


@pytest.fixture
def world(db, django_user_model):
    red, blue = cluster("red"), cluster("blue")
    sections = {"nvidia_smi_topo": read(TOPO_DELLA), "ibstat": ibstat([f"mlx5_{i}" for i in range(6)], 200)}
    snap = snapshot(red, "della-1", sections)
    people = {n: django_user_model.objects.create_user(n, password="pw") for n in ("viewer", "editor", "outsider")}
    access.grant(cluster=red, role=access.VIEWER, username="viewer")
    access.grant(cluster=red, role=access.EDITOR, username="editor")
    return {"red": red, "blue": blue, "snap": snap, "sections": sections, **people}


def client_of(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def post(c: Client, url: str, body: dict, method: str = "post"):
    return getattr(c, method)(url, data=json.dumps(body), content_type="application/json")


def test_stateless_whatif_of_a_snapshot_and_of_pasted_sections(world):
    c = client_of(world["viewer"])
    r = post(c, "/api/v1/whatif", {"snapshot": world["snap"].pk, "edits": ADD_NIC})
    assert r.status_code == 200, r.content
    data = r.json()
    assert data["label"] == "Plan (what-if, not reported)" and data["after"]["plan"] is True
    gpu1 = next(e for e in data["after"]["gpu_nic"] if e["gpu"] == "GPU1")
    assert (gpu1["nic"], gpu1["gdr"]) == ("mlx5_6", True)
    pasted = post(client_of(world["outsider"]), "/api/v1/whatif", {"sections": world["sections"], "edits": ADD_NIC})
    assert pasted.status_code == 200 and "mlx5_6 added" in pasted.json()["changes"]["summary"]
    assert Snapshot.objects.count() == 1 and Plan.objects.count() == 0


def test_whatif_errors_name_the_edit_and_hide_other_teams_snapshots(world):
    r = post(client_of(world["viewer"]), "/api/v1/whatif",
             {"snapshot": world["snap"].pk, "edits": [{"op": "remove", "name": "mlx5_0"}, {"op": "warp"}]})
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "invalid_edit" and body["index"] == 1 and body["field"] == "op"
    hidden = post(client_of(world["outsider"]), "/api/v1/whatif", {"snapshot": world["snap"].pk, "edits": ADD_NIC})
    assert hidden.status_code == 404


def test_plans_api_editors_write_viewers_read_outsiders_see_nothing(world):
    url = "/api/v1/clusters/red/plans"
    body = {"name": "NIC for GPU1", "snapshot": world["snap"].pk, "edits": ADD_NIC}
    assert post(client_of(world["viewer"]), url, body).status_code == 403
    assert post(client_of(world["outsider"]), url, body).status_code == 404
    created = post(client_of(world["editor"]), url, body)
    assert created.status_code == 201, created.content
    plan = created.json()
    assert plan["label"] == "Plan (what-if, not reported)" and plan["base_host"] == "della-1"
    assert post(client_of(world["editor"]), url, body).json()["field"] == "name"  # the name is taken
    listed = client_of(world["viewer"]).get(url).json()
    assert [p["name"] for p in listed] == ["NIC for GPU1"]
    one = client_of(world["viewer"]).get(f"/api/v1/plans/{plan['id']}").json()
    assert one["whatif"]["after"]["plan_label"] == "Plan (what-if, not reported)"
    assert client_of(world["outsider"]).get(f"/api/v1/plans/{plan['id']}").status_code == 404
    assert post(client_of(world["viewer"]), f"/api/v1/plans/{plan['id']}", {"name": "x"}, "put").status_code == 403
    renamed = post(client_of(world["editor"]), f"/api/v1/plans/{plan['id']}",
                   {"name": "400G", "edits": [{"op": "set_nic", "name": "mlx5_0", "rate_gbit": 400}]}, "put")
    assert renamed.status_code == 200 and renamed.json()["name"] == "400G"
    bad = post(client_of(world["editor"]), f"/api/v1/plans/{plan['id']}", {"edits": [{"op": "remove"}]}, "put")
    assert bad.status_code == 400 and bad.json()["field"] == "name"  # edit 0's missing field
    assert client_of(world["viewer"]).delete(f"/api/v1/plans/{plan['id']}").status_code == 403
    assert client_of(world["editor"]).delete(f"/api/v1/plans/{plan['id']}").status_code == 204
    assert Plan.objects.count() == 0 and Snapshot.objects.count() == 1


def test_whatif_page_from_the_host_page_then_saved_as_a_plan(world):
    editor = client_of(world["editor"])
    host = editor.get("/c/red/h/della-1/")
    assert b'id="whatif-link"' in host.content
    page = editor.get(f"/c/red/h/della-1/whatif/?snapshot={world['snap'].pk}")
    assert page.status_code == 200 and b"Plan (what-if, not reported)" in page.content
    shown = editor.post(f"/c/red/h/della-1/whatif/?snapshot={world['snap'].pk}",
                        {"edits": json.dumps(ADD_NIC), "action": "evaluate"})
    assert shown.status_code == 200 and b"mlx5_6 added" in shown.content and b'id="plan-gpu-nic"' in shown.content
    bad = editor.post(f"/c/red/h/della-1/whatif/?snapshot={world['snap'].pk}", {"edits": "[{"})
    assert bad.status_code == 400 and b"Edits are not JSON" in bad.content
    saved = editor.post(f"/c/red/h/della-1/whatif/?snapshot={world['snap'].pk}",
                        {"edits": json.dumps(ADD_NIC), "action": "save", "name": "GPU1 NIC"})
    plan = Plan.objects.get(name="GPU1 NIC")
    assert saved.status_code == 302 and saved["Location"] == f"/plans/{plan.pk}/"
    viewer = client_of(world["viewer"])
    page = viewer.get(f"/plans/{plan.pk}/")
    assert page.status_code == 200 and b"Plan (what-if, not reported)" in page.content
    assert b'id="plan-form"' not in page.content  # viewers read only
    assert b"GPU1 NIC" in viewer.get("/c/red/").content
    assert client_of(world["outsider"]).get(f"/plans/{plan.pk}/").status_code == 404
    assert viewer.post(f"/plans/{plan.pk}/delete/").status_code == 302 and Plan.objects.filter(pk=plan.pk).exists()


def test_plans_are_capacity_options_of_the_clusters_one_may_view(world):
    plan = plans.create_plan(cluster=world["red"], user=world["editor"], name="400G", snapshot=world["snap"],
                             edits=[{"op": "set_nic", "name": f"mlx5_{i}", "rate_gbit": 400} for i in range(6)])
    options = plans.plan_capacity_options({world["red"].pk})
    assert options == [{"id": f"plan:{plan.pk}", "label": "plan: 400G (red)", "cluster": "red",
                        "hostname": "della-1", "gpus": [], "plan": True}]
    assert plans.plan_capacity_options({world["blue"].pk}) == []
    name, doc = plans.plan_capacity_ref(f"plan:{plan.pk}", world["viewer"])
    assert name == "plan: 400G" and doc["summary"]["nic_rates_gbps"] == [400] * 6
    assert plans.plan_capacity_ref(f"plan:{plan.pk}", world["outsider"]) is None


def test_the_capacity_page_draws_a_plan_beside_its_real_layout(world):
    plan = plans.create_plan(cluster=world["red"], user=world["editor"], name="400G", snapshot=world["snap"],
                             edits=[{"op": "set_nic", "name": f"mlx5_{i}", "rate_gbit": 400} for i in range(6)])
    page = client_of(world["viewer"]).get(f"/capacity/?a={world['snap'].pk}&b=plan:{plan.pk}")
    assert page.status_code == 200
    text = page.content.decode()
    assert f'value="plan:{plan.pk}" selected' in text and "plan: 400G (red)" in text
    assert "B: plan: 400G (Plan (what-if, not reported))" in text
    assert client_of(world["outsider"]).get(f"/capacity/?b=plan:{plan.pk}").context["chosen"] == []


def test_an_editor_gets_a_signed_read_only_link_that_opens_without_an_account(world):
    plan = plans.create_plan(cluster=world["red"], user=world["editor"], name="GPU1 NIC", snapshot=world["snap"],
                             edits=ADD_NIC)
    page = client_of(world["editor"]).get(f"/plans/{plan.pk}/").content.decode()
    link = page.split('id="plan-signed-link">', 1)[1].split("<", 1)[0]
    assert 'id="plan-signed-link"' not in client_of(world["viewer"]).get(f"/plans/{plan.pk}/").content.decode()
    path = link.removeprefix("http://testserver")
    shared = Client().get(path)
    text = shared.content.decode()
    assert shared.status_code == 200 and "Read-only plan shared by editor" in text and "mlx5_6 added" in text
    assert 'id="plan-form"' not in text
    assert Client().get(path[:-3] + "xx/").status_code == 410
    plan.delete()
    assert Client().get(path).status_code == 410


def test_a_plan_on_pasted_sections_is_kept_with_them_and_left_out_of_capacity(world):
    c = client_of(world["editor"])
    created = post(c, "/api/v1/clusters/red/plans", {"name": "pasted", "sections": world["sections"],
                                                     "edits": [{"op": "remove", "name": "mlx5_5"}]})
    assert created.status_code == 201 and created.json()["pasted_base"] is True
    plan = Plan.objects.get(name="pasted")
    assert plan.base_snapshot is None and plan.base_sections == world["sections"]
    got = c.get(f"/api/v1/plans/{plan.pk}").json()
    assert [n["name"] for n in got["whatif"]["after"]["nics"]] == [f"mlx5_{i}" for i in range(5)]
    assert [o["hostname"] for o in plans.plan_capacity_options(None)] == [""]
    assert plan_capacity.options(world["editor"]) == []  # no base snapshot to draw it from
    bad = post(c, "/api/v1/clusters/red/plans", {"name": "x", "sections": {"nvidia_smi_topo": 5}, "edits": []})
    assert bad.status_code == 400 and bad.json()["field"] == "sections"


def test_a_what_if_of_pasted_outputs_saved_as_a_plan_of_a_cluster_one_edits(world):
    paste = "$ nvidia-smi topo -m\n" + world["sections"]["nvidia_smi_topo"] + "\n$ ibstat\n" + world["sections"]["ibstat"]
    edits = json.dumps([{"op": "set_env", "name": "NCCL_NVLS_ENABLE", "value": "0"}])
    editor = client_of(world["editor"])
    shown = editor.post("/whatif/", {"text": paste, "hostname": "della-x", "edits": edits, "action": "evaluate"})
    assert shown.status_code == 200 and "NCCL_NVLS_ENABLE: unset -&gt; 0" in shown.content.decode()
    assert editor.post("/whatif/", {"text": "hello\n", "edits": edits}).status_code == 400
    refused = client_of(world["viewer"]).post("/whatif/", {"text": paste, "edits": edits, "action": "save",
                                                           "cluster": "red", "name": "nope"})
    assert refused.status_code == 400 and not Plan.objects.exists()
    saved = editor.post("/whatif/", {"text": paste, "hostname": "della-x", "edits": edits, "action": "save",
                                     "cluster": "red", "name": "NVLS off"})
    plan = Plan.objects.get(name="NVLS off")
    assert saved.status_code == 302 and plan.base_sections["hostname"] == "della-x" and plan.base_snapshot is None
    assert Snapshot.objects.count() == 1
