"""Stored documents are read with orjson (``models.DocumentField``, ``models.read_json``) and come
back as the standard library would read them."""

from __future__ import annotations

import json
import math

import pytest

from apps.ingest.models import DocumentField, Fabric, Snapshot, read_json


@pytest.mark.parametrize("text", [
    '{"gpus": [{"name": "GPU0", "index": 0, "bdf": "0000:18:00.0"}], "x": 1.5, "y": null, "z": true}',
    '"\\ud800"',  # a lone surrogate: orjson refuses it, json reads it
    '{"guid": 18446744073709551615}',  # the largest 64-bit GUID as a number
    '[]',
])
def test_read_json_gives_what_json_gives(text):
    assert read_json(text) == json.loads(text)


def test_nan_which_orjson_refuses_is_read_by_json():
    assert math.isnan(read_json('{"a": NaN}')["a"])


def test_the_document_columns_migrate_as_json_fields():
    for model in (Snapshot, Fabric):
        field = model._meta.get_field("document")
        assert isinstance(field, DocumentField)
        assert field.deconstruct()[1] == "django.db.models.JSONField"  # no migration for the reader


@pytest.mark.django_db
def test_a_snapshot_document_round_trips():
    from apps.domain.analysis import analyze_host
    from apps.ingest import processing, services

    cluster = services.create_cluster(name="json-rt")
    topo = "\tGPU0\tGPU1\nGPU0\t X \tNV12\nGPU1\tNV12\t X \n"
    report = {"schema": "topoweb.report/1", "hostname": "h1", "sections": {"nvidia_smi_topo": topo}}
    upload = services.submit_report(cluster=cluster, report=report, via="import")[0]
    assert processing.process_upload(upload.pk) == "done"
    stored = Snapshot.objects.get(host__hostname="h1").document
    assert stored == analyze_host({"nvidia_smi_topo": topo}, "h1").doc
