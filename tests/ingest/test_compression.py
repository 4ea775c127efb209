"""The large columns are compressed with lz4 on PostgreSQL (migrations 0007 and 0008): written in a
fraction of pglz's time, and a whole-machine report kept in a fraction of its bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection

from apps.ingest.models import Fabric, Plan, Run, Snapshot, Upload

pytestmark = pytest.mark.django_db

LARGE = [(Upload, "raw"), (Snapshot, "document"), (Fabric, "raw"), (Fabric, "document"), (Run, "raw"),
         (Plan, "base_sections")]
XE9680 = Path(__file__).resolve().parents[1] / "fixtures" / "lspci_verbose" / \
    "gpud_dell_xe9680_hgx_h100_8gpu_full_lspci_vvv.txt"


def _postgres_with_lz4() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's TOAST compression (make test runs this on PostgreSQL)")
    with connection.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)")
        assert cur.fetchone() is not None, "this PostgreSQL is built without lz4 (Debian's and the images' have it)"


def test_every_large_column_is_compressed_with_lz4():
    _postgres_with_lz4()
    with connection.cursor() as cur:
        for model, name in LARGE:
            cur.execute("SELECT attcompression FROM pg_attribute WHERE attrelid = %s::regclass AND attname = %s",
                        [model._meta.db_table, model._meta.get_field(name).column])
            assert cur.fetchone() == ("l",), f"{model.__name__}.{name}"


def test_a_whole_machine_report_is_stored_in_a_tenth_of_its_size():
    # the Dell XE9680's 927 KB lspci -vvv in one report: lz4 keeps about 66 KB of it, pglz 277 KB
    from apps.ingest import services

    _postgres_with_lz4()
    cluster = services.create_cluster(name="lz4")
    report = {"schema": "topoweb.report/1", "hostname": "xe9680", "sections": {"lspci_verbose": XE9680.read_text()}}
    text = json.dumps(report)
    real = services.enqueue_upload
    services.enqueue_upload = lambda upload_id: True  # stored only: the size is the question
    try:
        upload, _ = services.submit_report(cluster=cluster, report=text, via="import")
    finally:
        services.enqueue_upload = real
    with connection.cursor() as cur:
        cur.execute(f"SELECT pg_column_size(raw), octet_length(raw) FROM {Upload._meta.db_table} WHERE id = %s",
                    [upload.pk])
        stored, length = cur.fetchone()
    assert length > 900_000 and stored < length / 10
