"""A damaged bulk-import archive through the whole stack: job queued -> Redis -> Celery worker ->
PostgreSQL, then the same archive through ``manage.py import_reports``.

The archive holds synthetic reports (``bench.synth``: real captures under ``synth-`` names) and is
cut short part way through its compressed stream. The job must end ``failed`` with a message
naming the damage, the members read before the cut must be stored exactly once (and processed),
and a second import of the same archive must store nothing new and exit 2. Run with ``make soak``.
"""

from __future__ import annotations

import io
import subprocess
import tarfile

import pytest

from bench.synth import iter_reports, report_bytes
from tests.reliability.stack import PYTHON, ROOT, Stack, wait_until

pytestmark = pytest.mark.soak


def _members(n: int) -> list[tuple[str, bytes]]:
    out = []
    for r in iter_reports(n, seed=7):
        r["hostname"] = r["hostname"].replace("synth-", "synth-import-", 1)
        out.append((f"fleet/{r['hostname']}.json", report_bytes(r)))
    return out


def _tar_gz(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _readable_before_damage(data: bytes) -> list[str]:
    """The members a plain forward read of ``data`` gets whole before the damage (tarfile in
    stream mode: no seeking, no help from the code under test)."""
    names = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|gz") as tar:
            for member in tar:
                tar.extractfile(member).read()
                names.append(member.name)
    except (tarfile.TarError, EOFError, OSError):
        pass
    return names


def _job(stack: Stack, job_id: int):
    rows = stack.sql("SELECT status, message, created_count, failed_count, processed, total, finished_at "
                     "FROM ingest_importjob WHERE id = %s", (job_id,))
    return rows[0] if rows and rows[0][0] not in ("pending", "running") else None


def test_a_truncated_archive_ends_failed_and_the_members_before_the_cut_are_stored_once(stack):
    stack.create_cluster("soak-import")
    stack.start_worker()
    members = _members(16)
    whole = _tar_gz(members)
    cut = whole[: len(whole) * 6 // 10]
    readable = _readable_before_damage(cut)
    assert 0 < len(readable) < len(members), "the cut must fall inside the archive"
    path = stack.workdir / "fleet.tar.gz"
    path.write_bytes(cut)

    # Queued as the web UI queues it; a worker runs it.
    out = stack.manage("shell", "-c", (
        "from apps.ingest import imports; from apps.ingest.models import Cluster; "
        f"print(imports.start_import(cluster=Cluster.objects.get(name='soak-import'), "
        f"path_or_fileobj={str(path)!r}, user=None).pk)"))
    job_id = int(out.strip().splitlines()[-1])
    status, message, created, rejected, processed, total, finished_at = wait_until(
        lambda: _job(stack, job_id), 180, "the import job finished", interval=1.0)
    assert status == "failed" and finished_at is not None, message
    assert message.startswith("fleet.tar.gz is truncated or corrupt after member "), message
    assert "unexpected end of data" in message
    assert created == len(readable) and processed == total and rejected <= 1

    # Each member read before the cut is stored exactly once, and processed.
    hosts = [name.split("/")[-1][: -len(".json")] for name in readable]
    wait_until(lambda: sum(stack.statuses().values()) == len(hosts)
               and set(stack.statuses()) <= {"done", "failed"}, 180, "the imported uploads processed")
    per_host = dict(stack.sql("SELECT h.hostname, count(u.id) FROM ingest_host h JOIN ingest_upload u "
                              "ON u.host_id = h.id GROUP BY h.hostname"))
    assert per_host == {h: 1 for h in hosts}
    assert stack.statuses() == {"done": len(hosts)}

    # The same archive through the command: nothing new, the damage said, exit status 2.
    cli = subprocess.run([PYTHON, "manage.py", "import_reports", str(path), "--cluster", "soak-import",
                          "--no-progress"], cwd=ROOT, env=stack.env, capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2, cli.stdout + cli.stderr
    assert f"0 new, {len(hosts)} already stored" in cli.stdout
    assert "status: failed: fleet.tar.gz is truncated or corrupt after member" in cli.stdout
    assert stack.sql("SELECT count(*) FROM ingest_upload")[0][0] == len(hosts)
