"""Clusters belong to teams: every page, API endpoint, selector list, paste target and share link
is filtered by membership (apps/ingest/access.py).

Two clusters, ``red`` (one host) and ``blue`` (one host); people: a viewer and an editor of red, a
member of a group that views red, an outsider with no role anywhere, and a superuser. A
cluster the person may not view does not exist for them (404), one they may view with too low
a role refuses the action (403 or a message), and nothing is written when refused.
"""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from apps.explorer.models import ShareLink
from apps.ingest import access, fabrics, runs, services
from apps.ingest.models import Cluster, ClusterGrant, Run, Upload
from tests.explorer.helpers import FIXTURES, IBSTAT, TOPO, cluster, read, standard_host

PERFTEST = FIXTURES / "perftest" / "roce_mlx5_0_mtu4096_ib_write_bw_mbsec_labelled_send_bw.txt"
FABRIC = FIXTURES / "ibnetdiscover" / "ibm_pcm_2node_mt43132_8port_switch_sdr_2009.txt"  # real, SDR, 2 hosts

PASSWORD = "pw-not-secret"


@pytest.fixture
def world(db, django_user_model):
    red, blue = cluster("red"), cluster("blue")
    red_snap, blue_snap = standard_host(red, "red-01"), standard_host(blue, "blue-01")
    people = {name: django_user_model.objects.create_user(name, password=PASSWORD)
              for name in ("viewer", "editor", "teammate", "outsider", "creator")}
    people["root"] = django_user_model.objects.create_superuser("root", password=PASSWORD)
    access.grant(cluster=red, role=access.VIEWER, username="viewer")
    access.grant(cluster=red, role=access.EDITOR, username="editor")
    team = Group.objects.create(name="red-team")
    people["teammate"].groups.add(team)
    access.grant(cluster=red, role=access.VIEWER, group="red-team")
    people["creator"].user_permissions.add(Permission.objects.get(codename="add_cluster"))
    red_run, _ = runs.submit_run(cluster=red, text=read(PERFTEST), via="web", hosts=["red-01"])
    red_fabric, _ = fabrics.submit_fabric(cluster=red, text=read(FABRIC), via="web")
    return {"red": red, "blue": blue, "red_snap": red_snap, "blue_snap": blue_snap, "red_run": red_run,
            "red_fabric": red_fabric, **people}


def client_of(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def red_urls(w) -> list[str]:
    """Every page and API read that shows something of cluster red."""
    s = w["red_snap"]
    upload = s.upload_id
    return [
        "/c/red/", "/c/red/h/red-01/", "/c/red/h/red-01/compare/", "/c/red/compare/?a=2020-01-01T00:00",
        f"/path/?src=red/red-01/GPU0&dst={s.pk}/GPU1", f"/path/gpus/{s.pk}/", f"/capacity/?a={s.pk}",
        "/api/v1/clusters/red/hosts", "/api/v1/clusters/red/uploads", "/api/v1/clusters/red/hosts/red-01/snapshots",
        f"/api/v1/snapshots/{s.pk}", f"/api/v1/uploads/{upload}", f"/api/v1/uploads/{upload}/report",
        f"/api/v1/path?src=red/red-01/GPU0&dst={s.pk}/GPU1",
        f"/c/red/runs/{w['red_run'].pk}/", f"/api/v1/runs/{w['red_run'].pk}", f"/api/v1/runs/{w['red_run'].pk}/raw",
        "/api/v1/clusters/red/runs",
        "/c/red/fabric/", f"/api/v1/fabric/{w['red_fabric'].pk}", f"/api/v1/fabric/{w['red_fabric'].pk}/raw",
        "/api/v1/clusters/red/fabric",
        f"/api/v1/clusters/red/fabric/compare?from={w['red_fabric'].pk}&to={w['red_fabric'].pk}",
        "/api/v1/clusters/red/fabric/job?hosts=red-*&algorithm=ring", "/c/red/fabric/?job=red-01",
    ]


@pytest.mark.parametrize("who", ["viewer", "editor", "teammate", "root"])
def test_members_read_every_page_and_endpoint_of_their_cluster(world, who):
    c = client_of(world[who])
    for url in red_urls(world):
        r = c.get(url)
        assert r.status_code == 200, (who, url, r.status_code)
        if url.startswith("/capacity/"):
            assert b"red-01" in r.content


def test_an_outsider_finds_nothing_of_another_team(world):
    c = client_of(world["outsider"])
    for url in red_urls(world):
        r = c.get(url)
        if url.startswith("/capacity/"):  # the page opens (it is the outsider's too) but shows no red layout
            assert r.status_code == 200 and b"red-01" not in r.content, url
            continue
        if url.startswith("/path/?"):  # the path page opens with the reference refused, not shown
            assert r.status_code == 200 and b"red-01/GPU0" in r.content and b"no host" in r.content, url
            assert b"GPU1 &rarr;" not in r.content
            continue
        assert r.status_code == 404, (url, r.status_code)
        # nothing of the snapshot itself (names in the answer are only the ones the URL asked for)
        assert b"mlx5" not in r.content and world["red_snap"].fingerprint.encode() not in r.content, url


def test_listings_and_selectors_hold_only_visible_clusters(world):
    viewer, outsider, root = (client_of(world[k]) for k in ("viewer", "outsider", "root"))
    assert [c["name"] for c in viewer.get("/api/v1/clusters").json()] == ["red"]
    assert outsider.get("/api/v1/clusters").json() == []
    assert [c["name"] for c in root.get("/api/v1/clusters").json()] == ["blue", "red"]
    page = viewer.get("/").content.decode()
    assert "/c/red/" in page and "/c/blue/" not in page
    for url in ("/path/", "/capacity/", "/paste/"):
        body = viewer.get(url, follow=True).content.decode()
        assert "blue-01" not in body and "blue/" not in body, url
    assert "red/red-01" in viewer.get("/path/").content.decode()


def test_paste_needs_the_editor_role_and_refusal_writes_nothing(world):
    form = {"cluster": "red", "new_cluster": "", "hostname": "red-02", "text": read(TOPO)}
    before = Upload.objects.count()
    r = client_of(world["viewer"]).post("/paste/", form)
    assert r.status_code == 403 and b"needs editor" in r.content
    r = client_of(world["outsider"]).post("/paste/", form)
    assert r.status_code == 400 and b"no cluster" in r.content
    r = client_of(world["outsider"]).post("/paste/", {**form, "cluster": "blue"})
    assert r.status_code == 400
    assert Upload.objects.count() == before
    r = client_of(world["editor"]).post("/paste/", form)
    assert r.status_code == 302 and "/c/red/h/red-02/" in r["Location"]
    assert Upload.objects.count() == before + 1
    # the paste page offers an editor's clusters only
    body = client_of(world["viewer"]).get("/paste/").content.decode()
    assert 'value="red"' not in body and "not an editor of any cluster" in body


def test_new_clusters_need_the_permission_and_their_creator_becomes_admin(world):
    form = {"cluster": "", "new_cluster": "green", "hostname": "g-01", "text": read(TOPO)}
    r = client_of(world["editor"]).post("/paste/", form)
    assert r.status_code == 400 and b"may not create clusters" in r.content
    assert not Cluster.objects.filter(name="green").exists()
    r = client_of(world["creator"]).post("/paste/", form)
    assert r.status_code == 302
    green = Cluster.objects.get(name="green")
    assert access.role_of(world["creator"], green) == access.ADMIN
    assert access.role_of(world["editor"], green) is None


def test_a_failed_paste_creates_no_cluster(world):
    form = {"cluster": "", "new_cluster": "broken", "hostname": "b-01", "text": "GPU0\tGPU1\nGPU0\tX\tbogus\n"}
    r = client_of(world["creator"]).post("/paste/", form)
    assert r.status_code == 400
    assert not Cluster.objects.filter(name="broken").exists()


def test_share_links_are_for_editors_of_both_ends(world):
    s = world["red_snap"]
    form = {"src": f"{s.pk}/GPU0", "dst": f"{s.pk}/GPU1"}
    client_of(world["viewer"]).post("/path/share/", form)
    assert not ShareLink.objects.exists()
    client_of(world["editor"]).post("/path/share/", {**form, "dst": f"{world['blue_snap'].pk}/GPU1"})
    assert not ShareLink.objects.exists()  # blue is not the editor's
    client_of(world["editor"]).post("/path/share/", form)
    assert ShareLink.objects.count() == 1


def test_clusters_open_to_all_users_are_readable_not_writable(world):
    blue = world["blue"]
    blue.open_to_all_users = True
    blue.save()
    outsider = client_of(world["outsider"])
    assert outsider.get("/c/blue/h/blue-01/").status_code == 200
    assert [c["name"] for c in outsider.get("/api/v1/clusters").json()] == ["blue"]
    r = outsider.post("/paste/", {"cluster": "blue", "hostname": "x", "text": read(IBSTAT)})
    assert r.status_code == 403


def test_roles_combine_user_group_and_superuser(world):
    red = world["red"]
    assert access.role_of(world["teammate"], red) == access.VIEWER
    access.grant(cluster=red, role=access.ADMIN, group="red-team")
    assert access.role_of(world["teammate"], red) == access.ADMIN
    assert access.role_of(world["root"], world["blue"]) == access.ADMIN
    assert access.role_of(world["outsider"], red) is None
    assert set(access.clusters_with_role(world["editor"], access.EDITOR)) == {red}
    assert set(access.clusters_with_role(world["viewer"], access.EDITOR)) == set()


def test_grant_and_revoke_commands(world):
    out = io.StringIO()
    call_command("grant", "outsider", "blue", "--role", "editor", stdout=out)
    assert "now editor of cluster 'blue'" in out.getvalue()
    assert access.role_of(world["outsider"], world["blue"]) == access.EDITOR
    call_command("grant", "outsider", "blue", "--role", "viewer", stdout=out)  # replaces, never adds a row
    assert ClusterGrant.objects.filter(cluster=world["blue"], user=world["outsider"]).count() == 1
    out = io.StringIO()
    call_command("revoke", "outsider", "blue", stdout=out)
    assert "role removed" in out.getvalue()
    assert access.role_of(world["outsider"], world["blue"]) is None
    out = io.StringIO()
    call_command("revoke", "teammate", "red", stdout=out)
    assert "still viewer" in out.getvalue()  # the group's grant stays
    call_command("grant", "blue-team", "blue", "--group", "--create-group", "--role", "admin", stdout=out)
    assert ClusterGrant.objects.filter(group__name="blue-team", role="admin").exists()
    for args in (("nobody", "red"), ("viewer", "nocluster")):
        with pytest.raises(CommandError) as err:
            call_command("grant", *args)
        assert err.value.returncode == 2


def test_the_admin_site_shows_a_cluster_admin_only_their_clusters(world, django_user_model):
    lead = django_user_model.objects.create_user("lead", password=PASSWORD, is_staff=True)
    lead.user_permissions.add(*Permission.objects.filter(content_type__app_label="ingest"))
    access.grant(cluster=world["red"], role=access.ADMIN, username="lead")
    c = client_of(lead)
    listing = c.get("/admin/ingest/cluster/").content.decode()
    assert ">red<" in listing and ">blue<" not in listing
    assert c.get(f"/admin/ingest/cluster/{world['blue'].pk}/change/").status_code == 302  # not found: back to index
    grants = c.get("/admin/ingest/clustergrant/").content.decode()
    assert "red" in grants and "blue" not in grants
    hosts = c.get("/admin/ingest/host/").content.decode()
    assert "red-01" in hosts and "blue-01" not in hosts
    # members are managed inline on the cluster, as with manage.py grant
    page = c.get(f"/admin/ingest/cluster/{world['red'].pk}/change/")
    assert page.status_code == 200 and b"grants-TOTAL_FORMS" in page.content


# Every route of the site, and how the walks above cover it. A new route must be added here,
# with the walk that proves its access rule, or this test fails.
COVERED = {
    "explorer:cluster", "explorer:host", "explorer:compare", "explorer:cluster-compare", "explorer:path",
    "explorer:path-gpus", "explorer:capacity", "api:cluster-hosts", "api:cluster-uploads", "api:host-snapshots",
    "api:snapshot", "api:upload-status", "api:upload-report", "api:path",  # red_urls, members vs outsider
    "explorer:run", "api:run", "api:run-raw", "api:cluster-runs",  # red_urls too (the world's red run)
    "explorer:fabric", "api:fabric", "api:fabric-raw", "api:cluster-fabric",  # red_urls too (red's discovery)
    "api:cluster-fabric-compare", "api:cluster-fabric-job",  # red_urls too
    "api:fabric-upload",  # test_posting_a_fabric_needs_the_editor_role_or_the_clusters_token
    "explorer:run-paste",  # test_run_paste_needs_the_editor_role_and_refusal_writes_nothing
    "api:runs",  # test_posting_runs_needs_the_editor_role_or_the_clusters_token
    "explorer:clusters", "api:clusters",  # test_listings_and_selectors_hold_only_visible_clusters
    "explorer:paste",  # test_paste_needs_the_editor_role_and_refusal_writes_nothing
    "explorer:share-create",  # test_share_links_are_for_editors_of_both_ends
    "api:import-job",  # test_import_jobs_are_read_by_viewers_only
    # tests/explorer/test_plans.py: viewers read, editors write, outsiders get 404
    "explorer:whatif", "explorer:whatif-paste", "explorer:plan", "explorer:plan-delete", "api:whatif",
    "api:cluster-plans", "api:cluster-plans-create", "api:plan", "api:plan-update", "api:plan-delete",
    # tests/ingest/test_place.py and tests/explorer/test_figure_export.py: viewers read, outsiders get 404
    "explorer:place", "api:cluster-place", "api:snapshot-figure",
    # tests/explorer/test_verdict.py: editors set NIC roles, viewers get 403, outsiders 404
    "explorer:nic-roles", "api:snapshot-nic-roles",
}
NOT_CLUSTER_DATA = {
    "explorer:paste-detect": "splits the posted text into sections; reads nothing stored",
    "explorer:share-list": "the signed-in person's own links only (ShareLink.created_by)",
    "explorer:share-view": "public by design: the signed link is the sender's authority, revocable",
    "explorer:capacity-shared": "public by design: a signed, expiring token an editor made "
                                "(test_compare_capacity: share links are for editors, tampered/expired refused)",
    "explorer:plan-shared": "public by design: a signed, expiring token an editor made "
                            "(test_plans: editors only, tampered or deleted refused)",
    "api:reports": "agent token: writes into the token's own cluster only",
    "api:api-root": "no data", "api:openapi-json": "the API schema", "api:openapi-view": "the API page",
    "agent-script": "the agent script: public, holds no secret",
}


def test_every_route_is_walked_or_holds_no_cluster_data():
    from django.urls import URLPattern, URLResolver, get_resolver

    def names(resolver, namespace=""):
        for p in resolver.url_patterns:
            if isinstance(p, URLResolver):
                if p.namespace in ("admin",) or str(p.pattern).startswith("accounts/"):
                    continue  # Django's own admin (scoped above) and login pages
                yield from names(p, f"{p.namespace}:" if p.namespace else namespace)
            elif isinstance(p, URLPattern) and p.name:
                yield namespace + p.name

    routes = set(names(get_resolver()))
    assert routes - COVERED - set(NOT_CLUSTER_DATA) == set()
    assert COVERED | set(NOT_CLUSTER_DATA) <= routes  # no stale entries


def test_import_jobs_are_read_by_viewers_only(world):
    from apps.ingest.models import ImportJob

    job = ImportJob.objects.create(cluster=world["red"], source_name="fleet.tar.gz")
    assert client_of(world["viewer"]).get(f"/api/v1/imports/{job.pk}").status_code == 200
    assert client_of(world["outsider"]).get(f"/api/v1/imports/{job.pk}").status_code == 404


def test_run_paste_needs_the_editor_role_and_refusal_writes_nothing(world):
    form = {"cluster": "red", "text": read(FIXTURES / "nccl_log" / "korean_eks_llama3_shm_socket_cumem_partial.txt")}
    before = Run.objects.count()
    body = client_of(world["viewer"]).get("/runs/paste/").content.decode()
    assert 'value="red"' not in body and "not an editor of any cluster" in body
    for who in ("viewer", "outsider"):
        r = client_of(world[who]).post("/runs/paste/", form)
        assert r.status_code == 400 and b"where you are an editor" in r.content, who
    assert client_of(world["editor"]).post("/runs/paste/", {**form, "cluster": "blue"}).status_code == 400
    assert Run.objects.count() == before
    r = client_of(world["editor"]).post("/runs/paste/", form)
    assert r.status_code == 302 and r["Location"].startswith("/c/red/runs/")
    assert Run.objects.count() == before + 1


def test_posting_runs_needs_the_editor_role_or_the_clusters_token(world):
    import json as _json

    text = read(FIXTURES / "nccl_log" / "korean_eks_llama3_shm_socket_cumem_partial.txt")

    def post(c, **body):
        return c.post("/api/v1/runs", data=_json.dumps({"text": text, **body}), content_type="application/json")

    before = Run.objects.count()
    assert post(client_of(world["viewer"]), cluster="red").status_code == 403
    assert post(client_of(world["outsider"]), cluster="red").status_code == 404
    assert post(Client(), cluster="red").status_code == 401
    _, blue_token = services.issue_token(cluster=world["blue"])
    blue_agent = Client(HTTP_AUTHORIZATION=f"Bearer {blue_token}")
    assert post(blue_agent, cluster="red").status_code == 400  # a token writes into its own cluster only
    assert Run.objects.count() == before
    assert post(client_of(world["editor"]), cluster="red").status_code == 201
    r = post(blue_agent)
    assert r.status_code == 201 and Run.objects.get(pk=r.json()["run_id"]).cluster == world["blue"]
    # the token reads its own run, not red's
    assert blue_agent.get(f"/api/v1/runs/{r.json()['run_id']}").status_code == 200
    assert blue_agent.get(f"/api/v1/runs/{world['red_run'].pk}").status_code == 404


def test_posting_a_fabric_needs_the_editor_role_or_the_clusters_token(world):
    import json as _json

    from apps.ingest.models import Fabric

    text = read(FIXTURES / "iblinkinfo" / "qdr_infiniscale_iv_18port_teaker_8hosts_one_dual_port_ca.txt")

    def post(c, **body):
        return c.post("/api/v1/fabric", data=_json.dumps({"text": text, **body}), content_type="application/json")

    before = Fabric.objects.count()
    assert post(client_of(world["viewer"]), cluster="red").status_code == 403
    assert post(client_of(world["outsider"]), cluster="red").status_code == 404
    assert post(Client(), cluster="red").status_code == 401
    _, blue_token = services.issue_token(cluster=world["blue"])
    blue_agent = Client(HTTP_AUTHORIZATION=f"Bearer {blue_token}")
    assert post(blue_agent, cluster="red").status_code == 400  # a token writes into its own cluster only
    assert Fabric.objects.count() == before
    assert post(client_of(world["editor"]), cluster="red").status_code == 201
    r = post(blue_agent)
    assert r.status_code == 201 and Fabric.objects.get(pk=r.json()["fabric_id"]).cluster == world["blue"]
    assert blue_agent.get(f"/api/v1/fabric/{r.json()['fabric_id']}").status_code == 200
    assert blue_agent.get(f"/api/v1/fabric/{world['red_fabric'].pk}").status_code == 404
