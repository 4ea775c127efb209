"""The paste page: one output of each kind (a second one is refused, naming both boxes), the
size limit checked before the body is read (413), caps on the host, and no analysis in the
request when workers do the processing."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from apps.ingest.models import Snapshot, Upload
from tests.domain.engine.test_limits import synthetic_topo
from tests.explorer import helpers as h

pytestmark = pytest.mark.django_db


def test_the_same_kind_in_two_boxes_is_refused_naming_both(signed_in):
    h.cluster()
    resp = signed_in.post("/paste/", {"hostname": "two", "cluster": "lab",
                                      "text": [h.read(h.TOPO), h.read(h.IBSTAT), h.read(h.TOPO_DELLA)]})
    body = resp.content.decode()
    assert resp.status_code == 400
    assert "a second nvidia_smi_topo output (box 1 has one already)" in body and "box 3" in body
    assert not Upload.objects.exists()


def test_a_report_file_over_the_limit_is_413_before_it_is_read(signed_in, settings):
    h.cluster()
    settings.MAX_REPORT_BYTES = 2048
    big = SimpleUploadedFile("report.json", b"{" + b" " * 4000 + b"}", content_type="application/json")
    resp = signed_in.post("/paste/", {"cluster": "lab", "report": big})
    assert resp.status_code == 413 and b"the limit is 2048 bytes" in resp.content
    assert not Upload.objects.exists()


def test_a_body_declared_over_the_limit_is_413_unread(signed_in, settings):
    h.cluster()
    settings.MAX_REPORT_BYTES = 2048
    resp = signed_in.generic("POST", "/paste/", b"x" * 10, content_type="application/x-www-form-urlencoded",
                             CONTENT_LENGTH=str(2048 + 64 * 1024 + 1))
    assert resp.status_code == 413 and b"nothing was read" in resp.content


def test_a_host_past_the_caps_is_refused_with_the_line(signed_in):
    h.cluster()
    resp = signed_in.post("/paste/", {"hostname": "huge", "cluster": "lab", "text": synthetic_topo(40, 4)})
    assert resp.status_code == 400 and b"40 GPUs columns" in resp.content and b"at most 32" in resp.content
    assert not Upload.objects.exists()


@override_settings(CELERY_TASK_ALWAYS_EAGER=False)
def test_with_workers_the_request_does_no_analysis(signed_in, monkeypatch):
    from apps.ingest import processing, services

    h.cluster()
    sent = []
    monkeypatch.setattr(services, "enqueue_upload", lambda upload_id: sent.append(upload_id) or True)
    monkeypatch.setattr(processing, "process_upload", lambda *a: pytest.fail("analysed in the request"))
    resp = signed_in.post("/paste/", {"hostname": "queued", "cluster": "lab", "text": h.read(h.TOPO)})
    assert resp.status_code == 302 and "upload=" in resp["Location"]
    page = signed_in.get(resp["Location"]).content.decode()
    assert "is being read" in page and 'http-equiv="refresh"' in page
    assert not Snapshot.objects.exists()
    upload = Upload.objects.get()
    assert json.loads(upload.raw)["hostname"] == "queued"


def test_a_measurement_pasted_as_a_host_section_is_named_and_refused():
    from apps.explorer.paste import split_paste

    text = (h.FIXTURES / "nccl_tests").glob("*.txt").__next__().read_text()
    [section] = split_paste(text)
    assert section.kind is None and "not something a node says about itself" in section.error
