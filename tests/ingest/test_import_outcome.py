"""Bulk imports always finish and say what happened: per-member errors, damaged archives, limits.

Archives are built in each test from the ingest helpers' real capture (``report()``), each member
padded with random text so that its compressed size is proportional to its place in the stream,
then damaged on purpose: cut short, CRC flipped, garbage appended, a tar header's checksum broken.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.ingest import archive, imports, processing, services
from apps.ingest.models import ImportJob, Upload
from tests.ingest.helpers import report

pytestmark = pytest.mark.django_db


# ------------------------------------------------------------------------------------ builders


def good_member(i: int) -> tuple[str, bytes]:
    data = report(hostname=f"host-{i:02d}", meta={"pad": os.urandom(3000).hex()})
    return f"fleet/host-{i:02d}.json", json.dumps(data).encode()


def good_members(n: int) -> list[tuple[str, bytes]]:
    return [good_member(i) for i in range(n)]


def tar_bytes(members: list[tuple[str, bytes]], *, gz: bool = True) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def header_offset(members: list[tuple[str, bytes]], index: int) -> int:
    """Byte offset of member ``index``'s header in the uncompressed tar stream."""
    offset = 0
    for _, data in members[:index]:
        offset += 512 + (len(data) + 511) // 512 * 512
    return offset


def run_job(cluster, data: bytes, name: str = "fleet.tar.gz") -> ImportJob:
    """Queue an import of ``data`` and run it here, as a worker would."""
    buf = io.BytesIO(data)
    buf.name = name
    job = imports.start_import(cluster=cluster, path_or_fileobj=buf, user=None)
    imports.run_import_job(job.pk)
    return ImportJob.objects.get(pk=job.pk)


def stored_hosts() -> list[str]:
    return sorted(Upload.objects.values_list("host__hostname", flat=True))


@pytest.fixture
def cluster():
    return services.create_cluster(name="lab")


# ------------------------------------------------------------------------- members that fail


def test_a_member_nested_100000_deep_is_recorded_and_the_others_are_imported(cluster):
    members = good_members(2) + [("fleet/deep.json", b"[" * 100_000 + b"]" * 100_000)] + [good_member(2)]
    job = run_job(cluster, tar_bytes(members))
    assert job.status == ImportJob.Status.DONE_WITH_ERRORS
    assert job.finished_at is not None
    assert (job.created_count, job.failed_count, job.processed, job.total) == (3, 1, 4, 4)
    assert [e["file"] for e in job.errors] == ["fleet/deep.json"]
    assert stored_hosts() == ["host-00", "host-01", "host-02"]


@pytest.mark.parametrize("exc", [RecursionError("maximum recursion depth exceeded"),
                                 UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed"),
                                 ValueError("odd value"), RuntimeError("anything else")])
def test_any_exception_of_one_member_is_recorded_and_the_import_goes_on(cluster, monkeypatch, exc):
    real_submit = services.submit_report

    def submit(**kwargs):
        if kwargs["source_name"].endswith("host-01.json"):
            raise exc
        return real_submit(**kwargs)

    monkeypatch.setattr(services, "submit_report", submit)
    job = run_job(cluster, tar_bytes(good_members(3)))
    assert job.status == ImportJob.Status.DONE_WITH_ERRORS
    assert job.errors == [{"file": "fleet/host-01.json", "error": f"cannot import: {type(exc).__name__}: {exc}"}]
    assert stored_hosts() == ["host-00", "host-02"]


def test_a_sound_archive_ends_done(cluster):
    job = run_job(cluster, tar_bytes(good_members(3)))
    assert job.status == ImportJob.Status.DONE and job.errors == []
    assert job.message == "3 new, 0 already stored, 0 rejected of 3 reports"
    again = run_job(cluster, tar_bytes(good_members(3)[:1]), name="again.tar.gz")
    assert again.status == ImportJob.Status.DONE and again.duplicate_count == 1


def test_member_names_that_are_not_utf8_are_stored_escaped(cluster):
    members = [("fleet/h\udcff.json", b"{oops"), good_member(0)]
    job = run_job(cluster, tar_bytes(members))
    assert job.status == ImportJob.Status.DONE_WITH_ERRORS
    assert job.errors[0]["file"] == "fleet/h\\udcff.json"


# ------------------------------------------------------------------------- the job itself fails


def test_a_job_that_crashes_ends_failed_with_finished_at_and_the_reason(cluster, monkeypatch):
    def crash(**kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(imports, "import_reports", crash)
    job = run_job(cluster, tar_bytes(good_members(1)))
    assert job.status == ImportJob.Status.FAILED and job.finished_at is not None
    assert "RuntimeError: disk on fire" in job.message


def test_a_job_interrupted_by_the_worker_ends_failed_and_the_interrupt_goes_on(cluster, monkeypatch):
    def interrupt(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(imports, "import_reports", interrupt)
    buf = io.BytesIO(tar_bytes(good_members(1)))
    buf.name = "fleet.tar.gz"
    job = imports.start_import(cluster=cluster, path_or_fileobj=buf, user=None)
    with pytest.raises(KeyboardInterrupt):
        imports.run_import_job(job.pk)
    job.refresh_from_db()
    assert job.status == ImportJob.Status.FAILED and "interrupted" in job.message and job.finished_at


def test_the_task_time_limit_stops_the_job_and_says_so(cluster, monkeypatch):
    def slow(**kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(services, "submit_report", slow)
    job = run_job(cluster, tar_bytes(good_members(3)))
    assert job.status == ImportJob.Status.FAILED and "TOPOWEB_TASK_SOFT_TIME_LIMIT" in job.message
    assert job.failed_count == 0  # not blamed on the member


def test_an_unreadable_or_empty_archive_ends_failed(cluster):
    job = run_job(cluster, b"this is not an archive at all")
    assert job.status == ImportJob.Status.FAILED and job.message.startswith("cannot read fleet.tar.gz")
    job = run_job(cluster, tar_bytes([("fleet/notes.md", b"hello")]), name="empty.tar.gz")
    assert job.status == ImportJob.Status.FAILED and "no *.json reports" in job.message


# ------------------------------------------------------------------------------ damaged archives


def test_an_archive_cut_in_its_gzip_trailer_is_not_done(cluster):
    members = good_members(4)
    job = run_job(cluster, tar_bytes(members)[:-6])
    assert job.status == ImportJob.Status.FAILED and job.finished_at is not None
    assert job.message.startswith("fleet.tar.gz is truncated or corrupt after member 4 (fleet/host-03.json): "
                                  "unexpected end of data")
    assert "imported before the damage: 4 new" in job.message
    assert stored_hosts() == [f"host-{i:02d}" for i in range(4)]  # all were read before the damage


def test_an_archive_cut_in_the_middle_imports_what_came_before(cluster):
    members = good_members(8)
    data = tar_bytes(members)
    job = run_job(cluster, data[: len(data) // 2])
    assert job.status == ImportJob.Status.FAILED
    assert "fleet.tar.gz is truncated or corrupt after member" in job.message
    assert "unexpected end of data" in job.message
    assert 1 <= job.created_count < 8
    # Exactly the members before the cut are stored; one whose data the cut runs through is rejected.
    assert stored_hosts() == [f"host-{i:02d}" for i in range(job.created_count)]
    assert job.failed_count <= 1


def test_garbage_after_the_gzip_stream_is_found(cluster):
    job = run_job(cluster, tar_bytes(good_members(3)) + b"garbage appended by a bad copy")
    assert job.status == ImportJob.Status.FAILED
    assert "after member 3 (fleet/host-02.json): garbage after the end of the gzip stream" in job.message


def test_a_bad_gzip_crc_is_found(cluster):
    data = bytearray(tar_bytes(good_members(2)))
    data[-8] ^= 0xFF  # the CRC32 of the trailer
    job = run_job(cluster, bytes(data))
    assert job.status == ImportJob.Status.FAILED and "bad CRC" in job.message


@pytest.mark.parametrize("gz", [False, True], ids=["tar", "tar.gz"])
def test_a_tar_header_with_a_bad_checksum_is_found(cluster, gz):
    members = good_members(4)
    raw = bytearray(tar_bytes(members, gz=False))
    at = header_offset(members, 2)
    raw[at + 6] ^= 0x01  # a letter of the third member's name: its header checksum no longer holds
    data = gzip.compress(bytes(raw)) if gz else bytes(raw)
    job = run_job(cluster, data, name="fleet.tar.gz" if gz else "fleet.tar")
    assert job.status == ImportJob.Status.FAILED
    assert f"after member 2 (fleet/host-01.json): bad tar header at byte {at}: bad checksum" in job.message
    assert stored_hosts() == ["host-00", "host-01"]


def test_a_plain_tar_cut_between_members_is_found(cluster):
    members = good_members(3)
    raw = tar_bytes(members, gz=False)[: header_offset(members, 2)]
    job = run_job(cluster, raw, name="fleet.tar")
    assert job.status == ImportJob.Status.FAILED and "no end-of-archive block" in job.message
    assert stored_hosts() == ["host-00", "host-01"]


def test_the_listing_stops_silently_where_tarfile_would_and_scan_tar_says_why():
    """tarfile alone lists a gzip-truncated archive to its end without a word."""
    data = tar_bytes(good_members(3))[:-6]
    tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    assert len(tar.getmembers()) == 3  # no error from tarfile
    tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    scan = archive.scan_tar(tar, archive_name="x.tar.gz", max_members=10)
    assert scan.count == 3 and "unexpected end of data" in scan.damage


@pytest.mark.parametrize("compression", ["gz", "bz2", "xz"])
def test_a_stream_cut_in_its_last_bytes_is_found_for_each_compression(compression):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=f"w:{compression}") as tar:
        for name, data in good_members(3):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    whole = buf.getvalue()
    sound = archive.scan_tar(archive.open_tar(fileobj=io.BytesIO(whole)), archive_name="a", max_members=9)
    assert sound.count == 3 and sound.damage == ""
    cut = archive.scan_tar(archive.open_tar(fileobj=io.BytesIO(whole[:-5])), archive_name="a", max_members=9)
    assert cut.damage.startswith("a is truncated or corrupt after member 3 (fleet/host-02.json): unexpected end")


# ------------------------------------------------------------------------------------- limits


def test_an_archive_over_the_member_limit_stops_reading_and_says_so(cluster, settings):
    settings.IMPORT_MAX_MEMBERS = 3
    job = run_job(cluster, tar_bytes(good_members(5)))
    assert job.status == ImportJob.Status.DONE_WITH_ERRORS
    assert job.message.startswith("fleet.tar.gz has more than 3 members (TOPOWEB_IMPORT_MAX_MEMBERS); members "
                                  "after member 3 (fleet/host-02.json) were not read")
    assert (job.total, job.created_count) == (3, 3)
    assert stored_hosts() == ["host-00", "host-01", "host-02"]


def test_a_folder_over_the_member_limit_stops_reading_and_says_so(tmp_path, settings):
    settings.IMPORT_MAX_MEMBERS = 3
    for name, data in good_members(5):
        (tmp_path / name.split("/")[-1]).write_bytes(data)
    with imports.iter_report_sources(tmp_path) as listing:
        assert [s.name for s in listing] == ["host-00.json", "host-01.json", "host-02.json"]
        assert listing.members == 3
        assert "more than 3 files" in listing.limit and "after host-02.json" in listing.limit


def test_the_error_list_is_capped_and_the_rest_counted(cluster, settings, admin_client):
    settings.IMPORT_MAX_ERRORS = 2
    members = [(f"fleet/bad-{i}.json", b"{oops") for i in range(5)] + [good_member(0)]
    job = run_job(cluster, tar_bytes(members))
    assert job.status == ImportJob.Status.DONE_WITH_ERRORS and job.failed_count == 5
    assert [e["file"] for e in job.errors] == ["fleet/bad-0.json", "fleet/bad-1.json"]
    state = admin_client.get(f"/api/v1/imports/{job.pk}").json()
    assert state["errors_omitted"] == 3 and len(state["errors"]) == 2


def test_the_error_list_is_not_rewritten_for_every_member(cluster, monkeypatch):
    monkeypatch.setattr(imports, "PROGRESS_WRITE_SECONDS", 0)  # counters after every member
    members = [(f"fleet/bad-{i:03d}.json", b"{oops") for i in range(250)]
    buf = io.BytesIO(tar_bytes(members))
    buf.name = "bad.tar.gz"
    job = imports.start_import(cluster=cluster, path_or_fileobj=buf, user=None)
    with CaptureQueriesContext(connection) as queries:
        imports.run_import_job(job.pk)
    updates = [q["sql"] for q in queries if q["sql"].startswith('UPDATE "ingest_importjob"')]
    with_errors = [q for q in updates if '"errors" =' in q]
    assert len(updates) >= 250  # the counters did follow every member
    assert len(with_errors) <= 250 // imports.ERRORS_WRITE_EVERY + 1
    assert ImportJob.objects.get(pk=job.pk).failed_count == 250


# ------------------------------------------------------------------------------ CLI and API


def run_cli(path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command("import_reports", str(path), "--cluster", "lab", "--no-progress", stdout=out, stderr=err)
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_cli_says_a_truncated_archive_is_corrupt_and_exits_2(tmp_path):
    path = tmp_path / "fleet.tar.gz"
    path.write_bytes(tar_bytes(good_members(3))[:-6])
    code, out, err = run_cli(path)
    assert code == 2
    assert "status: failed: fleet.tar.gz is truncated or corrupt after member 3 (fleet/host-02.json)" in out
    assert "imported before the damage: 3 new" in out
    assert err.strip().splitlines()[-1].startswith("error: fleet.tar.gz is truncated or corrupt")


def test_cli_exit_codes_for_a_sound_archive_and_one_over_the_limit(tmp_path, settings):
    path = tmp_path / "fleet.tar.gz"
    path.write_bytes(tar_bytes(good_members(3)))
    code, out, _ = run_cli(path)
    assert code == 0 and "status: done: 3 new" in out
    settings.IMPORT_MAX_MEMBERS = 2
    code, out, _ = run_cli(path)
    assert code == 1 and "status: done_with_errors: fleet.tar.gz has more than 2 members" in out


def test_cli_lists_the_capped_errors_and_counts_the_rest(tmp_path, settings):
    settings.IMPORT_MAX_ERRORS = 1
    path = tmp_path / "bad.tar.gz"
    path.write_bytes(tar_bytes([(f"bad-{i}.json", b"{oops") for i in range(3)]))
    code, out, _ = run_cli(path)
    assert code == 1 and out.count("  rejected ") == 1 and "... and 2 more rejected (not listed)" in out


def test_api_shows_the_outcome_of_a_damaged_import(cluster, admin_client):
    job = run_job(cluster, tar_bytes(good_members(2)) + b"junk")
    state = admin_client.get(f"/api/v1/imports/{job.pk}").json()
    assert state["status"] == "failed" and state["finished_at"] is not None
    assert state["created"] == 2 and state["errors_omitted"] == 0
    assert "garbage after the end of the gzip stream" in state["message"]
    job = run_job(cluster, tar_bytes([("x/bad.json", b"{oops"), good_member(5)]), name="mixed.tar.gz")
    state = admin_client.get(f"/api/v1/imports/{job.pk}").json()
    assert state["status"] == "done_with_errors" and state["errors"][0]["file"] == "x/bad.json"


def test_the_sweeper_ends_an_import_whose_worker_died(cluster_with_token, settings):
    """A job left ``running`` past its hard time limit has lost its worker: it ends ``failed``."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.ingest.models import ImportJob

    cluster, _ = cluster_with_token
    started = timezone.now() - timedelta(seconds=settings.IMPORT_TIME_LIMIT + 61)
    dead = ImportJob.objects.create(cluster=cluster, source_name="a.tar.gz", status=ImportJob.Status.RUNNING,
                                    started_at=started, processed=7, total=20)
    alive = ImportJob.objects.create(cluster=cluster, source_name="b.tar.gz", status=ImportJob.Status.RUNNING,
                                     started_at=timezone.now() - timedelta(seconds=30))
    processing.sweep_uploads()
    dead.refresh_from_db()
    alive.refresh_from_db()
    assert dead.status == ImportJob.Status.FAILED and dead.finished_at is not None
    assert "worker died or was killed" in dead.message and dead.processed == 7
    assert alive.status == ImportJob.Status.RUNNING
