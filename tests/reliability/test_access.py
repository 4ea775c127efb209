"""Access rules the other suites do not cover yet, end to end through the real ingest path.

* every explorer page (each URL pattern, so a new page is checked without a change here) needs a
  logged-in session, except a share link; an agent token is not a session;
* an agent token reads neither the read API nor raw reports, of its cluster or another;
* strings a node sends (here NIC names of ``nvidia-smi topo -m``'s legend, carried through
  parsing, analysis, the stored document and the figures) never become markup or script in the
  host, cluster, path and compare pages.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import URLPattern, reverse

from bench.synth import load_layouts

PAYLOAD = "</script><script>alert(1)</script><img/src=x/onerror=alert(2)>"
SAMPLE_ARGS = {"cluster": "alpha", "hostname": "synth-a", "token": "x" * 20, "snapshot_id": 1, "run_id": 1,
               "plan_id": 1}


SHARE_LINKS = {"share-view", "capacity-shared", "plan-shared"}


def _page_urls() -> list[str]:
    from apps.explorer import urls

    out = []
    for p in urls.urlpatterns:
        assert isinstance(p, URLPattern)
        if p.name in SHARE_LINKS:  # public by design: the token in the URL is the permission
            continue
        args = {k: SAMPLE_ARGS[k] for k in p.pattern.converters}
        out.append(reverse(f"explorer:{p.name}", kwargs=args))
    return out


@pytest.mark.django_db
@pytest.mark.parametrize("auth", [None, "token"])
def test_every_page_needs_a_login_and_a_token_is_not_one(client, cluster_with_token, auth):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {cluster_with_token[1]}"} if auth else {}
    urls = _page_urls()
    assert len(urls) >= 8
    for url in urls:
        for method in ("get", "post"):
            resp = getattr(client, method)(url, **headers)
            if resp.status_code == 405:  # the method is refused before anything is shown
                continue
            assert resp.status_code == 302 and resp["Location"].startswith("/accounts/login/"), (method, url)


@pytest.mark.django_db
def test_a_share_link_with_a_forged_token_shows_nothing(client):
    from apps.explorer import urls

    names = {p.name for p in urls.urlpatterns if "token" in p.pattern.converters}
    assert names == SHARE_LINKS, "a new public link: say here why it needs no login"
    for name in sorted(names):
        resp = client.get(reverse(f"explorer:{name}", kwargs={"token": "x" * 20}))
        assert resp.status_code in (404, 410), (name, resp.status_code)


def _report(hostname: str, topo: str) -> bytes:
    return json.dumps({"schema": "topoweb.report/1", "hostname": hostname, "meta": {"synthetic": True},
                       "sections": {"nvidia_smi_topo": topo}}).encode()


@pytest.mark.django_db
def test_a_token_reads_no_api_data_nor_raw_reports(cluster_with_token, agent_client):
    from apps.ingest import services

    topo = load_layouts(["paths_della_8xh100_6nic"])[0].sections["nvidia_smi_topo"]
    resp = agent_client.post("/api/v1/reports", data=_report("synth-a", topo), content_type="application/json")
    assert resp.status_code == 202
    upload_id = resp.json()["upload_id"]
    other = services.create_cluster(name="beta")
    _, other_secret = services.issue_token(cluster=other)
    other_agent = Client(HTTP_AUTHORIZATION=f"Bearer {other_secret}")
    for c in (agent_client, other_agent):
        for url in (f"/api/v1/uploads/{upload_id}/report", "/api/v1/clusters", "/api/v1/clusters/alpha/hosts",
                    "/api/v1/clusters/alpha/uploads", "/api/v1/snapshots/1", "/api/v1/path?src=1/GPU0&dst=1/GPU1"):
            r = c.get(url)
            assert r.status_code in (401, 404), (url, r.status_code)
            assert b"GPU0" not in r.content and b"synth-a" not in r.content
    assert other_agent.get(f"/api/v1/uploads/{upload_id}").status_code == 404


@pytest.mark.django_db
def test_node_supplied_names_never_execute_in_pages(agent_client, logged_in_client,
                                                   django_capture_on_commit_callbacks):
    topo = load_layouts(["paths_della_8xh100_6nic"])[0].sections["nvidia_smi_topo"]
    assert "  NIC0: mlx5_0" in topo
    evil = topo.replace("  NIC0: mlx5_0", f"  NIC0: {PAYLOAD}")
    for host, text in (("synth-a", evil), ("synth-b", topo), ("synth-a", evil + "\n")):
        with django_capture_on_commit_callbacks(execute=True):  # processing runs after commit
            r = agent_client.post("/api/v1/reports", data=_report(host, text), content_type="application/json")
        assert r.status_code == 202, r.content
    from apps.ingest.models import Snapshot

    doc = Snapshot.objects.filter(host__hostname="synth-a").first().document
    assert any(n["name"] == PAYLOAD for n in doc["nics"]), "the name did not reach the document: test is vacuous"
    pages = [reverse("explorer:host", args=["alpha", "synth-a"]), reverse("explorer:cluster", args=["alpha"]),
             reverse("explorer:compare", args=["alpha", "synth-a"]),
             reverse("explorer:path") + "?src=alpha/synth-a/GPU0&dst=alpha/synth-b/GPU1"]
    seen = False
    for url in pages:
        resp = logged_in_client.get(url)
        assert resp.status_code == 200, url
        body = resp.content.decode()
        assert "<script>alert(1)" not in body and "<img/src=x" not in body, url
        assert body.count("</script>") == body.count("<script"), url  # no script closed early
        seen = seen or "alert(1)" in body  # shown, escaped
    assert seen, "the payload appears in no page: the escaping was not exercised"
