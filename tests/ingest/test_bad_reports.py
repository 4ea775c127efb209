"""Every malformed report gets a 4xx naming the field and writes nothing; a wrong clock cannot pin
"latest"; a database outage answers 503 JSON with Retry-After; no traceback reaches a client."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.test import Client
from django.utils import timezone

from apps.ingest import reports, services
from apps.ingest.models import Host, Snapshot, Upload
from tests.ingest.helpers import TOPO_P40, body, report

pytestmark = pytest.mark.django_db


@pytest.fixture
def post(django_capture_on_commit_callbacks):
    def _post(client: Client, payload):
        data = payload if isinstance(payload, (bytes, str)) else body(payload)
        with django_capture_on_commit_callbacks(execute=True):
            return client.post("/api/v1/reports", data=data, content_type="application/json")

    return _post


def nothing_written() -> bool:
    return not Host.objects.exists() and not Upload.objects.exists()


def nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def test_deeply_nested_meta_is_a_400_and_nothing_is_written(agent_client, post):
    text = json.dumps(report())
    raw = text.replace('"meta": {', f'"meta": {{"deep": {nested(100_000)}, ', 1)
    resp = post(agent_client, raw.encode())
    assert resp.status_code == 400, resp.content
    assert resp.json()["field"] == "(root)" and "nested too deeply" in resp.json()["error"]
    assert nothing_written()


def test_meta_nested_past_the_limit_names_the_field(agent_client, post):
    data = report(meta={"x": json.loads(nested(reports.MAX_NESTING + 1))})
    resp = post(agent_client, data)
    assert resp.status_code == 400
    assert resp.json()["field"].startswith("meta.x.a.a") and "nested deeper" in resp.json()["error"]
    assert nothing_written()


def test_a_lone_surrogate_in_a_section_is_a_400_naming_it(agent_client, post):
    text = json.dumps(report(sections={"nvidia_smi_topo": TOPO_P40.read_text(), "ibstat": "CA 'mlx5_0'\nX"}))
    raw = text.replace("CA 'mlx5_0'", "CA 'mlx5_\\ud800'", 1)  # a JSON escape of half a UTF-16 pair
    resp = post(agent_client, raw.encode())
    assert resp.status_code == 400, resp.content
    assert resp.json()["field"] == "sections.ibstat" and "surrogate" in resp.json()["error"]
    assert nothing_written()


def test_a_lone_surrogate_in_a_report_given_as_a_dict_is_refused(cluster_with_token):
    cluster, _ = cluster_with_token
    data = report(agent_version="v\ud800")
    with pytest.raises(reports.ReportRejected) as err:
        services.submit_report(cluster=cluster, report=data, via="import")
    assert err.value.details["field"] == "agent_version"
    assert nothing_written()


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+05:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59-05:00",
                                  "2999-01-01T00:00:00Z"])
def test_a_wrong_clock_is_dated_by_arrival_and_said(agent_client, post, when):
    before = timezone.now()
    resp = post(agent_client, report(collected_at=when))
    assert resp.status_code == 202, resp.content
    assert "dated by its arrival" in resp.json()["warnings"][0]
    upload = Upload.objects.get(pk=resp.json()["upload_id"])
    assert upload.collected_at is None and json.loads(upload.raw)["collected_at"] == when  # raw kept as sent
    snap = Snapshot.objects.get(upload=upload)
    assert before <= snap.collected_at <= timezone.now()


def test_a_report_dated_2999_does_not_pin_latest(agent_client, post):
    post(agent_client, report(collected_at="2999-01-01T00:00:00Z"))
    now = (timezone.now() + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    newer = post(agent_client, report(topo=TOPO_P40, collected_at=now)).json()
    latest = Snapshot.objects.filter(host__hostname="h100-a01").order_by("-collected_at", "-id").first()
    assert latest.upload_id == newer["upload_id"]


def test_a_time_within_the_skew_is_kept(agent_client, post):
    soon = (timezone.now() + timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")
    resp = post(agent_client, report(collected_at=soon))
    assert resp.json()["warnings"] == []
    assert Upload.objects.get(pk=resp.json()["upload_id"]).collected_at is not None


def test_database_outage_is_503_json_with_retry_after(cluster_with_token, monkeypatch):
    _, secret = cluster_with_token

    def down(**kwargs):
        raise OperationalError("connection to server at 127.0.0.1, port 5432 failed: Connection refused")

    monkeypatch.setattr(services, "submit_report", down)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}", raise_request_exception=False)
    resp = client.post("/api/v1/reports", data=body(report()), content_type="application/json")
    assert resp.status_code == 503
    assert resp["Retry-After"].isdigit() and resp.json()["code"] == "unavailable"
    assert "5432" not in resp.content.decode()  # the database's own message stays in the log


def test_database_outage_on_a_page_is_503(logged_in_client, monkeypatch):
    from apps.ingest import access

    def down(*args, **kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(access, "visible_clusters", down)
    logged_in_client.raise_request_exception = False
    resp = logged_in_client.get("/")
    assert resp.status_code == 503 and resp["Retry-After"].isdigit()
    assert b"locked" not in resp.content and b"Traceback" not in resp.content


def test_no_traceback_or_url_list_reaches_a_client(logged_in_client, monkeypatch):
    from apps.ingest import access

    resp = logged_in_client.get("/no/such/page/")
    assert resp.status_code == 404
    assert b"admin/" not in resp.content and b"urlpatterns" not in resp.content.lower()
    api = logged_in_client.get("/api/v1/nope")
    assert api.status_code == 404 and api.json()["code"] == "not_found"

    def boom(*args, **kwargs):
        raise ValueError("secret internals")

    monkeypatch.setattr(access, "visible_clusters", boom)
    logged_in_client.raise_request_exception = False
    page = logged_in_client.get("/")
    assert page.status_code == 500 and b"secret internals" not in page.content and b"Traceback" not in page.content
    listing = logged_in_client.get("/api/v1/clusters")
    assert listing.status_code == 500 and listing.json()["code"] == "internal_error"
    assert b"secret internals" not in listing.content
