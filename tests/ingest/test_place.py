"""``manage.py place``, ``POST /api/v1/clusters/{c}/place`` and the page ``/c/<cluster>/place/``
(apps/ingest/placing.py over apps/domain/placement.py) on the demo cluster: its SYNTHETIC fleet
and its SYNTHETIC rail-optimised H100 fabric (one leaf per rail, apps/ingest/demo/fleet_fabric.py)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from apps.ingest import fabrics
from apps.ingest.models import Cluster

RAIL_LEAVES = [f"DEMO-IBLEAF-R{k}" for k in range(8)]


@pytest.fixture
def demo(db, django_capture_on_commit_callbacks):
    fabrics.clear_caches()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("load_demo", stdout=io.StringIO(), stderr=io.StringIO())
    yield Cluster.objects.get(name="demo")
    fabrics.clear_caches()


def test_cli_api_and_page_place_a_job_on_the_demo_fleet(demo, logged_in_client):
    out = io.StringIO()
    call_command("place", "--cluster", "demo", "--nodes", "4", "--gpus-per-node", "8", "--format", "json", stdout=out)
    r = json.loads(out.getvalue())
    assert r["cluster"] == "demo" and r["fabric_id"] is not None
    assert r["nodelist"] == "h100-n[01-02,04-05]"   # h100-n03: its GPU link at x8 (P06)
    assert r["fabric"]["leaves"] == RAIL_LEAVES and r["fabric"]["leaf_sets"] == 1
    assert {s["host"] for s in r["skipped"]} >= {"h100-n03", "h100-n06", "h100-n09", "h100-n15"}
    assert r["expected_busbw_gbs"] > r["random_busbw_gbs"]

    text = io.StringIO()
    call_command("place", "--cluster", "demo", "--nodes", "4", "--gpus-per-node", "8", stdout=text)
    assert "# Slurm: --nodelist=h100-n[01-02,04-05]" in text.getvalue()

    api = logged_in_client.post("/api/v1/clusters/demo/place", data=json.dumps({"nodes": 4, "gpus_per_node": 8}),
                                content_type="application/json")
    assert api.status_code == 200, api.content
    body = api.json()
    for field in ("hosts", "nodelist", "hostfile", "cuda_visible_devices", "nccl_ib_hca", "torchrun",
                  "expected_busbw_gbs", "random_busbw_gbs", "skipped"):
        assert field in body
    assert body["nodelist"] == r["nodelist"] and body["cuda_visible_devices"]["h100-n01"] == "0,1,2,3,4,5,6,7"
    assert all(set(s) == {"host", "reason"} for s in body["skipped"])
    by_total = logged_in_client.post("/api/v1/clusters/demo/place", data=json.dumps({"gpus": 16}),
                                     content_type="application/json").json()
    assert (by_total["job"]["nodes"], by_total["job"]["gpus_per_node"]) == (2, 8)

    page = logged_in_client.get("/c/demo/place/?nodes=4&gpus_per_node=8").content.decode()
    assert "--nodelist=h100-n[01-02,04-05]" in page and 'id="hostfile"' in page
    assert "NCCL_IB_HCA==mlx5_0,mlx5_1" in page and 'id="place-skipped"' in page
    assert "/c/demo/place/" in logged_in_client.get("/c/demo/").content.decode()


def test_errors_name_the_field(demo, logged_in_client):
    with pytest.raises(CommandError, match="--nodes: not enough healthy hosts: the job needs 30 hosts"):
        call_command("place", "--cluster", "demo", "--nodes", "30", "--gpus-per-node", "8", stdout=io.StringIO())
    with pytest.raises(CommandError, match="--cluster: no cluster 'nope'"):
        call_command("place", "--cluster", "nope", "--nodes", "1", stdout=io.StringIO())

    def post(body):
        return logged_in_client.post("/api/v1/clusters/demo/place", data=json.dumps(body),
                                     content_type="application/json")

    bad = post({"nodes": 2, "gpus_per_node": 9})
    assert bad.status_code == 400 and bad.json()["field"] == "gpus_per_node"
    assert "no host has more than 8 GPUs" in bad.json()["error"]
    assert post({"nodes": "two"}).json()["field"] == "nodes"
    assert post({"nodes": 1, "color": 3}).json()["field"] == "color"
    assert post([1]).json()["field"] == "body"
    assert post({"nodes": 1}).status_code == 200
    assert logged_in_client.post("/api/v1/clusters/nope/place", data="{}", content_type="application/json"
                                 ).status_code == 404
    page = logged_in_client.get("/c/demo/place/?nodes=99&gpus_per_node=8").content.decode()
    assert 'id="place-error"' in page and "not enough healthy hosts" in page
    assert "is not a whole number" in logged_in_client.get("/c/demo/place/?nodes=x").content.decode()


def test_a_person_outside_the_cluster_cannot_place_on_it(demo, client, django_user_model):
    demo.open_to_all_users = False
    demo.save()
    client.force_login(django_user_model.objects.create_user("eve", password="pw-not-secret"))
    assert client.post("/api/v1/clusters/demo/place", data=json.dumps({"nodes": 1}),
                       content_type="application/json").status_code == 404
    assert client.get("/c/demo/place/?nodes=1").status_code == 404
