"""The report API: POST /api/v1/reports and its errors, and the read endpoints' access rules."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from apps.domain.parsers import KINDS
from apps.ingest import services
from apps.ingest.models import Snapshot, Upload
from tests.ingest.helpers import TOPO_P40, body, broken_topo_report, report

pytestmark = pytest.mark.django_db


@pytest.fixture
def post(django_capture_on_commit_callbacks):
    """POST a report and run the on-commit enqueue (in-process, eager Celery)."""

    def _post(client: Client, payload, **headers):
        data = payload if isinstance(payload, (bytes, str)) else body(payload)
        with django_capture_on_commit_callbacks(execute=True):
            return client.post("/api/v1/reports", data=data, content_type="application/json", **headers)

    return _post


def test_report_is_accepted_processed_and_readable_by_its_token(agent_client, post):
    resp = post(agent_client, report())
    assert resp.status_code == 202, resp.content
    out = resp.json()
    assert out["duplicate"] is False and out["status"] == "received"
    assert out["status_url"].endswith(f"/api/v1/uploads/{out['upload_id']}")
    status = agent_client.get(f"/api/v1/uploads/{out['upload_id']}").json()
    assert status["status"] == "done" and status["error"] is None
    snap = Snapshot.objects.get(pk=status["snapshot_id"])
    assert snap.gpu_count == 8 and snap.host.hostname == "h100-a01"


def test_raw_report_is_stored_byte_for_byte(agent_client, post, logged_in_client):
    raw = json.dumps(report(), indent=3, ensure_ascii=False).encode()  # odd formatting on purpose
    upload_id = post(agent_client, raw).json()["upload_id"]
    assert Upload.objects.get(pk=upload_id).raw.encode() == raw
    assert logged_in_client.get(f"/api/v1/uploads/{upload_id}/report").content == raw


def test_same_report_twice_is_a_duplicate_of_the_first(agent_client, post):
    first = post(agent_client, report()).json()
    again = report(collected_at="2025-02-01T00:00:00Z", meta={"root": True})  # same host + sections
    second = post(agent_client, again)
    assert second.status_code == 202
    assert second.json()["duplicate"] is True and second.json()["upload_id"] == first["upload_id"]
    assert Upload.objects.count() == 1


def test_changed_sections_are_a_new_upload(agent_client, post):
    post(agent_client, report())
    other = report(topo=TOPO_P40)
    assert post(agent_client, other).json()["duplicate"] is False
    assert Upload.objects.count() == 2


def test_oversized_report_is_413(agent_client, post, settings):
    settings.MAX_REPORT_BYTES = 2048
    resp = post(agent_client, report())
    assert resp.status_code == 413
    assert resp.json()["code"] == "too_large" and resp.json()["limit"] == 2048
    assert Upload.objects.count() == 0


@pytest.mark.parametrize("raw, field", [
    (b"{not json", None),
    (b"", None),
    (b"\xff\xfe", None),
])
def test_body_that_is_not_json_is_400(agent_client, post, raw, field):
    resp = post(agent_client, raw)
    assert resp.status_code == 400
    assert resp.json()["code"] == "not_json"


@pytest.mark.parametrize("change, field", [
    ({"schema": "topoweb.report/9"}, "schema"),
    ({"schema": None}, "schema"),
    ({"hostname": ""}, "hostname"),
    ({"hostname": "bad host/name"}, "hostname"),
    ({"sections": []}, "sections"),
    ({"sections": {}}, "sections"),
    ({"sections": {"nvidia_smi_topo": 42}}, "sections.nvidia_smi_topo"),
    ({"sections": {"nvidia_smi_topo": "   \n"}}, "sections.nvidia_smi_topo"),
    ({"unavailable": {"ibstat": 1}}, "unavailable"),
    ({"meta": "root"}, "meta"),
    ({"collected_at": "yesterday"}, "collected_at"),
])
def test_wrong_shape_is_400_naming_the_field(agent_client, post, change, field):
    data = report()
    data.update(change)
    if change.get("schema", "x") is None:
        del data["schema"]
    resp = post(agent_client, data)
    assert resp.status_code == 400, resp.content
    assert resp.json()["field"] == field
    assert field.split(".")[0] in resp.json()["error"]


def test_json_that_is_not_an_object_is_400(agent_client, post):
    resp = post(agent_client, b"[1, 2]")
    assert resp.status_code == 400 and "object" in resp.json()["error"]


def test_unknown_section_kind_is_400_naming_it_and_listing_known_kinds(agent_client, post):
    data = report()
    data["sections"]["dmesg"] = "hello"
    resp = post(agent_client, data)
    assert resp.status_code == 400
    out = resp.json()
    assert out["code"] == "unknown_kind" and out["kind"] == "dmesg"
    assert "dmesg" in out["error"] and "nvidia_smi_topo" in out["error"]
    assert out["known_kinds"] == list(KINDS)


def test_section_that_fails_to_parse_stores_a_failed_upload_with_the_line(agent_client, post):
    resp = post(agent_client, broken_topo_report())
    assert resp.status_code == 202
    status = agent_client.get(resp.json()["status_url"]).json()
    assert status["status"] == "failed" and status["snapshot_id"] is None
    assert status["error"]["section"] == "nvidia_smi_topo"
    assert status["error"]["line_no"] == 4
    assert status["error"]["line"].startswith("GPU2")
    assert "cells" in status["error"]["reason"]


def test_analysis_crash_fails_the_upload_and_is_never_a_500(agent_client, post, monkeypatch):
    import apps.domain.analysis as analysis

    def boom(sections, hostname):
        raise RuntimeError("bug in analysis")

    monkeypatch.setattr(analysis, "analyze_host", boom)
    resp = post(agent_client, report())
    assert resp.status_code == 202
    upload = Upload.objects.get(pk=resp.json()["upload_id"])
    assert upload.status == "failed" and "bug in analysis" in upload.error["reason"]


def test_nan_and_infinity_in_a_document_are_stored_as_null(agent_client, post, monkeypatch):
    import apps.domain.analysis as analysis

    real = analysis.analyze_host

    def with_nan(sections, hostname):
        result = real(sections, hostname)
        result.doc["estimate"]["odd"] = [float("nan"), float("inf"), {"x": -float("inf")}, 1.5]
        # as analyze_host gives it: the JSON text of the document, NaN and Infinity included
        return analysis.HostAnalysis(result.doc, result.graph, result.results, json.dumps(result.doc))

    monkeypatch.setattr(analysis, "analyze_host", with_nan)
    resp = post(agent_client, report())
    upload = Upload.objects.get(pk=resp.json()["upload_id"])
    assert upload.status == "done", upload.error
    document = Snapshot.objects.get(upload=upload).document
    assert isinstance(document, dict) and document["estimate"]["odd"] == [None, None, {"x": None}, 1.5]
    assert Snapshot.objects.filter(upload=upload, document__summary__gpu_count=8).exists()  # a JSON object


@pytest.mark.parametrize("header", [None, "Bearer nope", "Basic abc", "Bearer "])
def test_missing_or_bad_token_is_401(post, header):
    client = Client(HTTP_AUTHORIZATION=header) if header else Client()
    resp = post(client, report())
    assert resp.status_code == 401
    assert resp.json()["code"] in ("unauthorized", "invalid_token")
    assert Upload.objects.count() == 0


def test_revoked_token_is_401(cluster_with_token, agent_client, post):
    _, secret = cluster_with_token
    services.revoke_token(secret[:11])
    resp = post(agent_client, report())
    assert resp.status_code == 401 and "revoked" in resp.json()["error"]


def test_token_writes_only_into_its_own_cluster(cluster_with_token, agent_client, post):
    other = services.create_cluster(name="beta")
    _, other_secret = services.issue_token(cluster=other)
    post(agent_client, report())
    post(Client(HTTP_AUTHORIZATION=f"Bearer {other_secret}"), report(hostname="b-01"))
    assert set(Upload.objects.filter(cluster=cluster_with_token[0]).values_list("host__hostname", flat=True)) == {
        "h100-a01"}
    assert set(Upload.objects.filter(cluster=other).values_list("host__hostname", flat=True)) == {"b-01"}
    # The same report into another cluster is not a duplicate of the first cluster's.
    assert post(Client(HTTP_AUTHORIZATION=f"Bearer {other_secret}"), report()).json()["duplicate"] is False


def test_a_token_cannot_read_the_read_api_or_other_tokens_uploads(cluster_with_token, agent_client, post):
    upload_id = post(agent_client, report()).json()["upload_id"]
    for url in ("/api/v1/clusters", "/api/v1/clusters/alpha/hosts", f"/api/v1/snapshots/1",
                f"/api/v1/uploads/{upload_id}/report", "/api/v1/path?src=1/GPU0&dst=1/GPU1"):
        assert agent_client.get(url).status_code == 401, url
    _, second = services.issue_token(cluster=cluster_with_token[0])
    assert Client(HTTP_AUTHORIZATION=f"Bearer {second}").get(f"/api/v1/uploads/{upload_id}").status_code == 404


def test_read_endpoints_require_login(client):
    for url in ("/api/v1/clusters", "/api/v1/uploads/1", "/api/v1/imports/1", "/api/v1/path?src=a&dst=b"):
        resp = client.get(url)
        assert resp.status_code == 401 and resp.json()["code"] == "unauthorized"


def test_session_cannot_post_reports(logged_in_client, post):
    assert post(logged_in_client, report()).status_code == 401


def test_read_endpoints_serve_clusters_hosts_snapshots_and_documents(agent_client, post, logged_in_client):
    post(agent_client, report())
    post(agent_client, report(hostname="p40-01", topo=TOPO_P40))
    clusters = logged_in_client.get("/api/v1/clusters").json()
    assert [(c["name"], c["hosts"], c["snapshots"]) for c in clusters] == [("alpha", 2, 2)]
    hosts = logged_in_client.get("/api/v1/clusters/alpha/hosts").json()
    assert [h["hostname"] for h in hosts] == ["h100-a01", "p40-01"]
    assert hosts[1]["latest_snapshot"]["gpu_count"] == 8
    snaps = logged_in_client.get("/api/v1/clusters/alpha/hosts/p40-01/snapshots").json()
    doc = logged_in_client.get(f"/api/v1/snapshots/{snaps[0]['id']}").json()
    assert doc["hostname"] == "p40-01" and doc["document"]["hostname"] == "p40-01"
    assert {"graph", "findings", "gpus"} <= set(doc["document"])
    assert logged_in_client.get("/api/v1/clusters/nope/hosts").status_code == 404
    assert logged_in_client.get("/api/v1/snapshots/999999").status_code == 404
    failed = logged_in_client.get("/api/v1/clusters/alpha/uploads?status=failed").json()
    assert failed == []
    assert logged_in_client.get("/api/v1/clusters/alpha/uploads?status=bogus").status_code == 400


def test_path_between_gpus_of_two_hosts(agent_client, post, logged_in_client):
    post(agent_client, report())
    post(agent_client, report(hostname="p40-01", topo=TOPO_P40))
    snap = Snapshot.objects.get(host__hostname="p40-01")
    resp = logged_in_client.get(f"/api/v1/path?src=alpha/h100-a01/GPU5&dst={snap.pk}/GPU3")
    assert resp.status_code == 200, resp.content
    out = resp.json()
    assert out["same_host"] is False and out["hops"] and out["src_snapshot"] != out["dst_snapshot"]
    same = logged_in_client.get("/api/v1/path?src=alpha/h100-a01/GPU0&dst=alpha/h100-a01/GPU1").json()
    assert same["same_host"] is True


@pytest.mark.parametrize("query, status", [
    ("src=alpha/h100-a01/GPU0", 400),
    ("src=alpha/h100-a01/GPU0&dst=alpha/h100-a01/GPU99", 400),
    ("src=alpha/h100-a01/GPU0&dst=alpha/nohost/GPU1", 404),
    ("src=alpha/h100-a01/GPU0&dst=99999/GPU1", 404),
    ("src=alpha/h100-a01/GPU0&dst=garbage", 400),
])
def test_path_errors_name_the_problem(agent_client, post, logged_in_client, query, status):
    post(agent_client, report())
    resp = logged_in_client.get(f"/api/v1/path?{query}")
    assert resp.status_code == status
    assert resp.json()["error"]


def test_agent_script_is_served(client):
    resp = client.get("/agent.py")
    assert resp.status_code == 200 and resp["Content-Type"].startswith("text/x-python")
    assert b"topoweb.report/1" in resp.content


def test_openapi_document_lists_the_endpoints(client):
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    assert {"/api/v1/reports", "/api/v1/uploads/{upload_id}", "/api/v1/path", "/api/v1/imports/{job_id}"} <= set(paths)


def test_a_path_reads_legs_only_and_answers_as_the_whole_documents_do(agent_client, post, user,
                                                                       django_assert_max_num_queries):
    """``path_between_refs`` reads the hosts with their newest snapshot's legs in one query; its
    answer is the one ``path_between_snapshots`` gives on the whole documents, for references by host name and
    by snapshot id, across hosts and on one, and for a host whose newest snapshot ingest has not
    noted (it is then found by date)."""
    from apps.domain.cluster import path_between
    from apps.ingest import selectors
    from apps.ingest.models import Host

    post(agent_client, report())
    post(agent_client, report(hostname="p40-01", topo=TOPO_P40))
    a = Snapshot.objects.select_related("host__cluster").get(host__hostname="h100-a01")
    b = Snapshot.objects.select_related("host__cluster").get(host__hostname="p40-01")
    assert Host.objects.get(hostname="p40-01").latest_snapshot_id == b.pk
    cases = [("alpha/h100-a01/GPU5", "alpha/p40-01/GPU3", a, "GPU5", b, "GPU3"),
             (f"{a.pk}/GPU0", "alpha/p40-01/GPU1", a, "GPU0", b, "GPU1"),
             ("alpha/h100-a01/GPU0", "alpha/h100-a01/GPU7", a, "GPU0", a, "GPU7"),
             ("alpha/h100-a01/GPU2", f"{a.pk}/GPU6", a, "GPU2", a, "GPU6")]
    for src, dst, sa, ga, sb, gb in cases:
        with django_assert_max_num_queries(6):
            got = selectors.path_between_refs(src, dst, user)
        want = selectors.path_between_snapshots(sa, ga, sb, gb)  # reads the whole documents
        assert got == want, (src, dst)
        assert (got["src_snapshot"], got["dst_snapshot"]) == (sa.pk, sb.pk)
    Host.objects.filter(hostname="p40-01").update(latest_snapshot=None)
    got = selectors.path_between_refs("alpha/h100-a01/GPU5", "alpha/p40-01/GPU3", user)
    assert got["dst_snapshot"] == b.pk and got["hops"] == path_between(a.document, "GPU5", b.document, "GPU3")["hops"]
    with pytest.raises(selectors.RefError, match="has no GPU9"):
        selectors.path_between_refs("alpha/h100-a01/GPU0", "alpha/p40-01/GPU9", user)
