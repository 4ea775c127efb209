"""Bulk imports of report files: a folder, a ``.tar.gz``/``.tgz``/``.tar`` archive, or one JSON file.

``iter_report_sources(path, *, name=None) -> ReportListing``  the reports (and runs) found, with damage and
    member-limit notices (read and verified to the end of the archive's compressed stream,
    ``apps.ingest.archive``)
``import_reports(*, cluster, path, user=None, progress=None, sources=None) -> ImportSummary``
    synchronous; one bad member never stops the rest
``start_import(*, cluster, path_or_fileobj, user) -> ImportJob``  background, pollable
``run_import_job(job_id) -> None``  the worker side of ``start_import``; the job always ends
    ``done``, ``done_with_errors`` or ``failed``

Runs (measurements: nccl-tests, NCCL logs, perftest, P2P tests) travel with the reports: every
``*.log`` and ``*.out`` file, and every ``*.txt`` file under a folder named ``runs``, is imported
as a run (``apps.ingest.runs.submit_run``, kind detected). A run in a capture folder, or in the
``runs/`` folder of one, is checked against that folder's host (its ``hostname.txt``, else the
folder name); elsewhere against the hosts it names itself.

Fabric outputs travel with them too (``apps.ingest.fabrics.submit_fabric``): every file under a
folder named ``fabric``, and every file named after a fabric kind (``ibnetdiscover.txt``,
``iblinkinfo.out``, ``lldpctl_json.json``, ``ibdev2netdev.txt``...), is imported as a fabric upload
(the kind from the file name, else detected). A per-host output (LLDP, ``ibdev2netdev``) belongs
to the host of its folder (the parent of a ``fabric`` folder): its ``hostname.txt``, else the
folder's name.
"""

from __future__ import annotations

import io
import logging
import os
import re
import shutil
import tarfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.domain.parsers import KINDS
from apps.ingest import archive, fabrics, runs, services
from apps.ingest.models import Cluster, ImportJob, Upload
from apps.ingest.reports import REPORT_SCHEMA, ReportRejected, decode_report

log = logging.getLogger(__name__)



# --------------------------------------------------------------------------------------------
# Bulk import

IMPORT_MAX_ERRORS = 1000  # rejected members an import lists by name; the rest are only counted
ERRORS_WRITE_EVERY = 100  # an import job's error list is saved at most once per this many members
PROGRESS_WRITE_SECONDS = 0.5  # an import job's counters are saved at most this often (and at the end)
_TEXT_MAX = 500  # longest file name or error message kept per rejected member


def import_max_members() -> int:
    """Most members one import reads: entries of an archive, files of a folder (TOPOWEB_IMPORT_MAX_MEMBERS)."""
    return int(getattr(settings, "IMPORT_MAX_MEMBERS", 100_000))


def import_max_errors() -> int:
    """Most rejected members an import lists in its errors (``IMPORT_MAX_ERRORS``)."""
    return int(getattr(settings, "IMPORT_MAX_ERRORS", IMPORT_MAX_ERRORS))


def _clean_text(text: str, limit: int = _TEXT_MAX) -> str:
    """``text`` cut to ``limit`` characters, storable in any database text or JSON column: lone
    surrogates (undecodable bytes of tar member names) and NUL become backslash escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")[:limit]


@dataclass(frozen=True)
class ReportSource:
    """One report found in a folder or archive (a JSON file or a capture folder), one run
    (``is_run``: ``load`` returns ``(text, host hint or None)``) or one fabric output (``is_fabric``:
    ``load`` returns the same)."""

    name: str
    load: Callable[[], dict]
    is_run: bool = False
    is_fabric: bool = False


RUN_SUFFIXES = (".log", ".out")
RUNS_FOLDER = "runs"


def is_run_name(path: str) -> bool:
    """Whether a member is a run: ``*.log`` / ``*.out`` anywhere, ``*.txt`` under a ``runs`` folder."""
    parts = path.replace("\\", "/").split("/")
    base = parts[-1]
    if base.startswith(".") or base.startswith("._"):
        return False
    return base.endswith(RUN_SUFFIXES) or (base.endswith(".txt") and RUNS_FOLDER in parts[:-1])


FABRIC_FOLDER = "fabric"
FABRIC_SUFFIXES = (".txt", ".out", ".log", ".json")


def fabric_kind_of_name(path: str) -> str | None:
    """The fabric kind a member's name gives (``ibnetdiscover.txt`` -> ``ibnetdiscover``), else None."""
    base = path.replace("\\", "/").rsplit("/", 1)[-1]
    stem, dot, _suffix = base.rpartition(".")
    return stem if dot and stem in fabrics.FABRIC_KINDS else None


def is_fabric_name(path: str) -> bool:
    """Whether a member is a fabric output: any text file under a ``fabric`` folder, or one named after
    a fabric kind (``<kind>.txt`` / ``.out`` / ``.log`` / ``.json``)."""
    parts = path.replace("\\", "/").split("/")
    base = parts[-1]
    if base.startswith(".") or not base.endswith(FABRIC_SUFFIXES):
        return False
    return FABRIC_FOLDER in parts[:-1] or fabric_kind_of_name(base) is not None


def _host_folder(folder: str) -> str:
    """The capture folder a run (or a fabric output) belongs to: its own folder, or the parent of a
    ``runs`` (or ``fabric``) folder."""
    parts = [p for p in folder.split("/") if p]
    if parts and parts[-1] in (RUNS_FOLDER, FABRIC_FOLDER):
        parts = parts[:-1]
    return "/".join(parts)


def _run_text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


@dataclass
class ReportListing:
    """The reports found at one path, in the order they are stored, and how the listing ended.

    ``members`` counts what was read: an archive's entries (files, folders, links), a folder's
    files. ``damage`` is "" unless the archive is truncated or corrupt; it then names the
    archive, the last member read before the damage and the reason (``apps.ingest.archive``),
    and ``sources`` holds what was listed before that point. ``limit`` is "" unless the listing
    stopped at ``import_max_members()``; it then says what was left unread. Iterating gives the
    sources; ``close()`` (or ``with``) releases the archive their loaders read from.
    """

    name: str
    sources: list[ReportSource] = field(default_factory=list)
    members: int = 0
    damage: str = ""
    limit: str = ""
    closer: Callable[[], None] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.sources)

    def __iter__(self):
        return iter(self.sources)

    def close(self) -> None:
        closer, self.closer = self.closer, None
        if closer is not None:
            closer()

    def __enter__(self) -> ReportListing:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def report_from_captures(files: dict[str, bytes], *, default_hostname: str, where: str) -> dict:
    """Build a report from a capture folder: ``<kind>.txt`` files and an optional ``hostname.txt``."""
    sections: dict[str, str] = {}
    for name, data in sorted(files.items()):
        kind = name[:-4]
        if name.endswith(".txt") and kind in KINDS:
            sections[kind] = data.decode("utf-8", errors="replace")
    hostname = files.get("hostname.txt", b"").decode("utf-8", errors="replace").strip() or default_hostname
    if not sections:
        raise ReportRejected(f"{where}: no <kind>.txt capture files", code="invalid_report")
    return {"schema": REPORT_SCHEMA, "hostname": hostname, "sections": sections,
            "meta": {"source": "capture folder"}, "unavailable": {}}


def _load_json_report(data: bytes, where: str) -> dict:
    report, _ = decode_report(data)
    return report


def _is_capture_name(name: str) -> bool:
    return name == "hostname.txt" or (name.endswith(".txt") and name[:-4] in KINDS)


def iter_report_sources(path: str | os.PathLike | io.IOBase, *, name: str | None = None) -> ReportListing:
    """List the reports in a folder, a ``.tar.gz``/``.tgz``/``.tar`` archive, or one JSON file.

    A ``*.json`` file is one agent report. A folder holding ``<kind>.txt`` files (and optionally
    ``hostname.txt``; else the folder name is the hostname) is one capture folder. Archives are
    read in memory, member by member; nothing is extracted to disk. At most
    ``import_max_members()`` members are read (``ReportListing.limit`` says when more were
    left). An archive is read and verified to the end of its compressed stream before this
    returns: damage is reported in ``ReportListing.damage``, not raised. ``name`` is the name
    messages use (default: the file or folder name). Raises ``OSError`` or
    ``tarfile.TarError`` only when the path cannot be read at all. Close the listing after use.
    """
    max_members = import_max_members()
    if isinstance(path, (str, os.PathLike)):
        p = Path(path)
        label = name or p.name
        if p.is_dir():
            return _sources_from_dir(p, label, max_members)
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no such file or folder")
        if p.suffix == ".json":
            return ReportListing(label, [ReportSource(label, lambda: _load_json_report(_read_limited(p), label))],
                                 members=1)
        return _sources_from_tar(archive.open_tar(p), label, max_members)
    label = name or Path(getattr(path, "name", "") or "archive").name
    return _sources_from_tar(archive.open_tar(fileobj=path), label, max_members)


def _sources_from_dir(root: Path, label: str, max_members: int) -> ReportListing:
    """The reports under a folder, reading at most ``max_members`` files (in sorted order)."""
    listing = ReportListing(label)
    last = ""
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        folder_path = Path(folder)
        rel = folder_path.relative_to(root)
        names = sorted(files)
        over = len(names) > max_members - listing.members
        if over:
            names = names[:max_members - listing.members]
        listing.members += len(names)
        if names:
            last = str(rel / names[-1])
        for name in names:
            if is_fabric_name(str(rel / name)):
                listing.sources.append(ReportSource(str(rel / name), _dir_fabric_loader(root, folder_path / name),
                                                    is_fabric=True))
            elif name.endswith(".json") and not name.startswith("."):
                fp = folder_path / name
                listing.sources.append(ReportSource(str(rel / name), lambda fp=fp, n=str(rel / name): _load_json_report(
                    _read_limited(fp), n)))
            elif is_run_name(str(rel / name)):
                listing.sources.append(ReportSource(str(rel / name), _dir_run_loader(root, folder_path / name),
                                                    is_run=True))
        captures = [n for n in names if _is_capture_name(n) and n != "hostname.txt"]
        if captures:
            where = str(rel) if str(rel) != "." else root.name

            def load(folder_path=folder_path, where=where) -> dict:
                data = {n: _read_limited(folder_path / n) for n in os.listdir(folder_path) if _is_capture_name(n)}
                return report_from_captures(data, default_hostname=folder_path.name, where=where)

            listing.sources.append(ReportSource(where + "/", load))
        if over:  # max_members >= 1, so at least one file was read: ``last`` names it
            listing.limit = (f"{label} holds more than {max_members} files (TOPOWEB_IMPORT_MAX_MEMBERS); "
                             f"files after {last} were not read")
            break
    return listing


def _dir_run_loader(root: Path, fp: Path) -> Callable[[], tuple[str, str | None]]:
    """The loader of a run file in a folder tree: its text and the host of its capture folder."""
    def load() -> tuple[str, str | None]:
        folder = root / _host_folder(str(fp.parent.relative_to(root)))
        hint = None
        if folder != root and any(_is_capture_name(n) and n != "hostname.txt" for n in os.listdir(folder)):
            named = folder / "hostname.txt"
            hint = (_read_limited(named).decode("utf-8", "replace").strip() if named.is_file() else "") or folder.name
        return _run_text(_read_limited(fp)), hint

    return load


def _dir_fabric_loader(root: Path, fp: Path) -> Callable[[], tuple[str, str | None]]:
    """The loader of a fabric file in a folder tree: its text and the host of its folder (the folder's
    hostname.txt, else its name; None at the top of the tree)."""
    def load() -> tuple[str, str | None]:
        folder = root / _host_folder(str(fp.parent.relative_to(root)))
        hint = None
        if folder != root:
            named = folder / "hostname.txt"
            hint = (_read_limited(named).decode("utf-8", "replace").strip() if named.is_file() else "") or folder.name
        return _run_text(_read_limited(fp)), hint

    return load


def _read_limited(fp: Path) -> bytes:
    size = fp.stat().st_size
    if size > settings.MAX_REPORT_BYTES:
        raise ReportRejected(f"{size} bytes; the limit is {settings.MAX_REPORT_BYTES}", status=413, code="too_large")
    return fp.read_bytes()


def _sources_from_tar(tar: tarfile.TarFile, archive_name: str, max_members: int) -> ReportListing:
    """The reports of an open archive, in archive order, after ``archive.scan_tar`` has read and
    verified it. Sources are returned in the order their first member is stored, so that
    importing them reads the archive forwards once more (no rewind per member)."""
    scan = archive.scan_tar(tar, archive_name=archive_name, max_members=max_members)
    limit = settings.MAX_REPORT_BYTES

    def read(member: tarfile.TarInfo) -> bytes:
        if member.size > limit:
            raise ReportRejected(f"{member.size} bytes; the limit is {limit}", status=413, code="too_large")
        fh = tar.extractfile(member)
        return fh.read() if fh else b""

    entries: list[ReportSource | str] = []  # a JSON report, or the name of a capture folder
    folders: dict[str, list[tarfile.TarInfo]] = {}
    for m in scan.files:
        base = m.name.rsplit("/", 1)[-1]
        if base.startswith("._"):  # macOS resource forks in tarballs
            continue
        if is_fabric_name(m.name):
            entries.append(ReportSource(m.name, lambda m=m: (_run_text(read(m)), _tar_fabric_hint(m.name)),
                                        is_fabric=True))
        elif base.endswith(".json"):
            entries.append(ReportSource(m.name, lambda m=m: _load_json_report(read(m), m.name)))
        elif is_run_name(m.name):
            entries.append(ReportSource(m.name, lambda m=m: (_run_text(read(m)), _tar_hint(m.name)), is_run=True))
        elif _is_capture_name(base):
            folder = m.name.rsplit("/", 1)[0] if "/" in m.name else ""
            if folder not in folders:
                folders[folder] = []
                entries.append(folder)
            folders[folder].append(m)
    def _tar_hint(name: str) -> str | None:
        """The host of a run's capture folder in the archive (its hostname.txt, else its name)."""
        folder = _host_folder(name.rsplit("/", 1)[0] if "/" in name else "")
        items = folders.get(folder) or []
        if not any(not m.name.endswith("hostname.txt") for m in items):
            return None
        named = next((m for m in items if m.name.endswith("/hostname.txt") or m.name == "hostname.txt"), None)
        text = read(named).decode("utf-8", "replace").strip() if named is not None else ""
        return text or folder.rsplit("/", 1)[-1] or None

    def _tar_fabric_hint(name: str) -> str | None:
        """The host of a fabric file's folder in the archive (its hostname.txt, else its name)."""
        folder = _host_folder(name.rsplit("/", 1)[0] if "/" in name else "")
        named = next((m for m in folders.get(folder) or [] if m.name == f"{folder}/hostname.txt"
                      or m.name == "hostname.txt"), None)
        text = read(named).decode("utf-8", "replace").strip() if named is not None else ""
        return text or folder.rsplit("/", 1)[-1] or None

    sources: list[ReportSource] = []
    for entry in entries:
        if isinstance(entry, ReportSource):
            sources.append(entry)
            continue
        items = folders[entry]
        if all(m.name.endswith("/hostname.txt") or m.name == "hostname.txt" for m in items):
            continue
        default_host = entry.rstrip("/").rsplit("/", 1)[-1] or Path(archive_name).name.split(".")[0]

        def load(items=items, folder=entry, default_host=default_host) -> dict:
            data = {m.name.rsplit("/", 1)[-1]: read(m) for m in items}
            return report_from_captures(data, default_hostname=default_host, where=folder or archive_name)

        sources.append(ReportSource((entry or archive_name) + "/", load))
    over = archive.over_limit_message(archive_name, max_members, scan.last_name) if scan.over_limit else ""
    return ReportListing(archive_name, sources, members=scan.count, damage=scan.damage, limit=over,
                         closer=tar.close)


@dataclass
class ImportSummary:
    """What one import did.

    ``errors`` lists (file, message) for the first ``max_errors`` rejected members;
    ``errors_omitted`` counts the rejected members past those. ``damage`` and ``limit`` are the
    listing's (see ``ReportListing``); ``status`` and ``describe()`` give the outcome in the
    words of ``ImportJob``.
    """

    total: int = 0
    created: int = 0
    duplicates: int = 0
    rejected: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)  # (file, message)
    errors_omitted: int = 0
    upload_ids: list[int] = field(default_factory=list)  # the uploads created
    runs_total: int = 0
    runs_created: int = 0
    runs_duplicates: int = 0
    runs_rejected: int = 0  # runs that could not be read (stored all the same) or were refused
    fabrics_total: int = 0
    fabrics_created: int = 0
    fabrics_duplicates: int = 0
    fabrics_rejected: int = 0  # fabric outputs that could not be read (stored all the same) or were refused
    damage: str = ""
    limit: str = ""
    max_errors: int = field(default_factory=import_max_errors)

    @property
    def processed(self) -> int:
        return self.created + self.duplicates + self.rejected + self.runs_created + self.runs_duplicates + \
            self.runs_rejected + self.fabrics_created + self.fabrics_duplicates + self.fabrics_rejected

    def reject(self, name: str, message: str, *, run: bool = False, fabric: bool = False) -> None:
        """Count one rejected member (a report, a run or a fabric output); list it while fewer than
        ``max_errors`` are listed."""
        if fabric:
            self.fabrics_rejected += 1
        elif run:
            self.runs_rejected += 1
        else:
            self.rejected += 1
        if len(self.errors) < self.max_errors:
            self.errors.append((_clean_text(name), _clean_text(message)))
        else:
            self.errors_omitted += 1

    @property
    def status(self) -> str:
        """``failed`` for a damaged archive, ``done_with_errors`` when members were rejected or
        left unread (member limit), else ``done``."""
        if self.damage:
            return ImportJob.Status.FAILED
        if self.rejected or self.runs_rejected or self.fabrics_rejected or self.limit:
            return ImportJob.Status.DONE_WITH_ERRORS
        return ImportJob.Status.DONE

    def describe_runs(self) -> str:
        return (f"runs: {self.runs_created} new, {self.runs_duplicates} already stored, {self.runs_rejected} "
                "unreadable")

    def describe_fabrics(self) -> str:
        return (f"fabric: {self.fabrics_created} new, {self.fabrics_duplicates} already stored, "
                f"{self.fabrics_rejected} unreadable or refused")

    @property
    def reports_total(self) -> int:
        """Members that are reports (neither runs nor fabric outputs)."""
        return self.total - self.runs_total - self.fabrics_total

    def describe(self) -> str:
        """One line: the damage or the limit when there is one, then the counts."""
        counts = (f"{self.created} new, {self.duplicates} already stored, {self.rejected} rejected "
                  f"of {self.reports_total} reports")
        if self.runs_total:
            counts += "; " + self.describe_runs()
        if self.fabrics_total:
            counts += "; " + self.describe_fabrics()
        if self.damage:
            counts = "imported before the damage: " + counts
        return "; ".join([note for note in (self.damage, self.limit) if note] + [counts])


def import_reports(
    *,
    cluster: Cluster,
    path: str | os.PathLike | io.IOBase,
    user=None,
    progress: Callable[[str, ImportSummary], None] | None = None,
    sources: ReportListing | list[ReportSource] | None = None,
) -> ImportSummary:
    """Submit every report found at ``path`` (or in ``sources``, a listing already made) into
    ``cluster`` (via ``import``); one bad member never stops the rest.

    Whatever loading or submitting one member raises -- ``ReportRejected``, an unreadable or
    truncated member, ``RecursionError``, ``UnicodeError``, ``ValueError``, any other
    ``Exception`` but ``MemoryError`` and Celery's ``SoftTimeLimitExceeded``, which stop the
    import -- is recorded for that member (``ImportSummary.reject``) and the import goes on. Each member is submitted in a transaction of its own (a savepoint
    inside an outer one), so a database error undoes that member alone. ``progress`` is called
    after every member. A listing made here is closed here; one passed in is the caller's.
    """
    listing = iter_report_sources(path) if sources is None else sources
    try:
        summary = ImportSummary(total=len(listing), damage=getattr(listing, "damage", ""),
                                limit=getattr(listing, "limit", ""),
                                runs_total=sum(1 for source in listing if source.is_run),
                                fabrics_total=sum(1 for source in listing if source.is_fabric))
        for source in listing:
            if source.is_fabric:
                _import_fabric(summary, cluster=cluster, source=source, user=user)
                if progress is not None:
                    progress(source.name, summary)
                continue
            if source.is_run:
                _import_run(summary, cluster=cluster, source=source, user=user)
                if progress is not None:
                    progress(source.name, summary)
                continue
            try:
                upload, created = _import_one(cluster=cluster, source=source, user=user)
            except (MemoryError, SoftTimeLimitExceeded):  # the process or the task is out of room or time
                raise
            except Exception as exc:
                summary.reject(source.name, _member_error(source.name, exc))
            else:
                if created:
                    summary.created += 1
                    summary.upload_ids.append(upload.pk)
                else:
                    summary.duplicates += 1
            if progress is not None:
                progress(source.name, summary)
    finally:
        if sources is None:
            listing.close()
    return summary


def _import_run(summary: ImportSummary, *, cluster: Cluster, source: ReportSource, user) -> None:
    """Store one run (its own transaction) and count it; an unreadable one is kept and listed with
    ``FILE:LINE: reason``."""
    try:
        text, hint = source.load()
        with transaction.atomic():
            run, created = runs.submit_run(cluster=cluster, text=text, via=Upload.Via.IMPORT, user=user,
                                           hosts=[hint] if hint else None, source_name=_clean_text(source.name))
    except (MemoryError, SoftTimeLimitExceeded):
        raise
    except Exception as exc:
        summary.reject(source.name, _member_error(source.name, exc), run=True)
        return
    if run.status == run.Status.FAILED:
        summary.reject(source.name, f"{runs.run_error_text(run)} (the text is kept as run {run.pk})", run=True)
    elif created:
        summary.runs_created += 1
    else:
        summary.runs_duplicates += 1


def _import_fabric(summary: ImportSummary, *, cluster: Cluster, source: ReportSource, user) -> None:
    """Store one fabric output (its own transaction) and count it; an unreadable one is kept and listed
    with ``FILE:LINE: reason``."""
    try:
        text, hint = source.load()
        with transaction.atomic():  # the host hint is used for per-host kinds only
            row, created = fabrics.submit_fabric(cluster=cluster, text=text, via=Upload.Via.IMPORT, user=user,
                                                 kind=fabric_kind_of_name(source.name), host=hint,
                                                 source_name=_clean_text(source.name))
    except (MemoryError, SoftTimeLimitExceeded):
        raise
    except Exception as exc:
        summary.reject(source.name, _member_error(source.name, exc), fabric=True)
        return
    if row.status == row.Status.FAILED:
        summary.reject(source.name, f"{fabrics.fabric_error_text(row)} (the text is kept as fabric upload {row.pk})",
                       fabric=True)
    elif created:
        summary.fabrics_created += 1
    else:
        summary.fabrics_duplicates += 1


def _import_one(*, cluster: Cluster, source: ReportSource, user) -> tuple[Upload, bool]:
    """Load one source and submit it in its own transaction; raises what either raises."""
    report = source.load()
    with transaction.atomic():
        return services.submit_report(cluster=cluster, report=report, via=Upload.Via.IMPORT, user=user,
                             source_name=_clean_text(source.name))


def _member_error(name: str, exc: Exception) -> str:
    """The reason recorded for a member whose import raised ``exc``."""
    if isinstance(exc, ReportRejected):
        return exc.message
    if isinstance(exc, archive.STREAM_ERRORS):
        return f"cannot read: {archive.describe_stream_error(exc)}"
    log.warning("import of %s failed: %s: %s", _clean_text(name), type(exc).__name__, _clean_text(str(exc)))
    return f"cannot import: {type(exc).__name__}: {exc}"


def import_errors_omitted(job: ImportJob) -> int:
    """Rejected members of a finished job that ``job.errors`` does not list (past the cap); 0
    while the job runs (its error list is saved at most every ``ERRORS_WRITE_EVERY`` members)."""
    if job.finished_at is None:
        return 0
    return max(0, job.failed_count - len(job.errors or []))


def _import_dir() -> Path:
    return Path(getattr(settings, "IMPORT_UPLOAD_DIR", settings.VAR_DIR / "imports"))


def start_import(*, cluster: Cluster, path_or_fileobj, user) -> ImportJob:
    """Queue a bulk import and return its ``ImportJob`` (poll ``GET /api/v1/imports/{id}``).

    ``path_or_fileobj`` is a server-side path (folder or archive) or an uploaded file object
    (e.g. Django's ``UploadedFile``); a file object is copied under ``var/imports/`` first so a
    worker can read it after the request ends (workers must share that folder).
    """
    if isinstance(path_or_fileobj, (str, os.PathLike)):
        p = Path(path_or_fileobj)
        if not p.exists():
            raise FileNotFoundError(f"{p}: no such file or folder")
        stored, name = str(p.resolve()), p.name
    else:
        name = Path(getattr(path_or_fileobj, "name", "") or "upload.tar.gz").name
        folder = _import_dir()
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{uuid.uuid4().hex}-{re.sub(r'[^A-Za-z0-9._-]', '_', name)[:100]}"
        with open(target, "wb") as out:
            if hasattr(path_or_fileobj, "chunks"):
                for chunk in path_or_fileobj.chunks():
                    out.write(chunk)
            else:
                shutil.copyfileobj(path_or_fileobj, out)
        stored = str(target)
    with transaction.atomic():
        job = ImportJob.objects.create(cluster=cluster, user=user, source_name=name, stored_path=stored)
        transaction.on_commit(lambda: enqueue_import(job.pk))
    return job


def enqueue_import(job_id: int) -> bool:
    from apps.ingest.tasks import run_import_job_task

    if services.tasks_in_process():
        run_import_job_task.apply_async((job_id,))
        return True
    try:
        run_import_job_task.apply_async((job_id,), retry=True, retry_policy=services.PUBLISH_RETRY)
    except Exception:
        log.exception("could not enqueue import job %s; it stays 'pending' for sweep_uploads", job_id)
        return False
    return True


def run_import_job(job_id: int) -> None:
    """Run a queued import to its end; a job that is not ``pending`` (started or finished) is left alone.

    The job always ends with ``finished_at`` set and one of: ``done`` (every member imported or
    already stored), ``done_with_errors`` (some members rejected -- listed in ``errors`` -- or
    members past ``TOPOWEB_IMPORT_MAX_MEMBERS`` left unread, said in ``message``), ``failed``
    (the archive cannot be read, or is truncated or corrupt -- the reports before the damage
    are imported and ``message`` names where it broke -- or the import itself raised:
    ``message`` says what). Every ``Exception`` is caught and logged here; any other
    ``BaseException`` (a worker shutting down) marks the job ``failed`` and propagates.
    Progress (counters, errors) is saved as ``_JobProgress`` says.
    """
    if not ImportJob.objects.filter(pk=job_id, status=ImportJob.Status.PENDING).update(
        status=ImportJob.Status.RUNNING, started_at=timezone.now()
    ):
        return
    job = None
    progress = _JobProgress(job_id)
    try:
        job = ImportJob.objects.select_related("cluster", "user").get(pk=job_id)
        status, message = _run_import(job, progress)
    except Exception as exc:
        log.exception("import job %s stopped on an internal error", job_id)
        status, message = ImportJob.Status.FAILED, progress.crash_message(exc)
    except BaseException as exc:
        progress.finish(ImportJob.Status.FAILED, progress.crash_message(exc, interrupted=True))
        raise
    finally:
        if job is not None:
            _discard_stored(job)
    progress.finish(status, message)


def _run_import(job: ImportJob, progress: _JobProgress) -> tuple[str, str]:
    """List and import one job's archive or folder; (final status, message)."""
    try:
        listing = iter_report_sources(job.stored_path, name=job.source_name)
    except archive.STREAM_ERRORS as exc:
        return ImportJob.Status.FAILED, f"cannot read {job.source_name}: {archive.describe_stream_error(exc)}"
    with listing:
        if not listing and not (listing.damage or listing.limit):
            return ImportJob.Status.FAILED, (f"{job.source_name}: no *.json reports and no folders of "
                                             "<kind>.txt captures found")
        progress.start(len(listing))
        summary = import_reports(cluster=job.cluster, path=job.stored_path, user=job.user, progress=progress,
                                 sources=listing)
    return summary.status, summary.describe()


class _JobProgress:
    """Saves an import job's progress as ``import_reports`` goes: the counters in one small
    UPDATE at most every ``PROGRESS_WRITE_SECONDS``; the error list with them, only when it
    changed and at most every ``ERRORS_WRITE_EVERY`` members (it holds at most
    ``import_max_errors()`` entries); everything, with the final status, in ``finish``."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.total = 0
        self.summary: ImportSummary | None = None
        self._errors_saved = 0  # entries of the error list in the database
        self._since_errors_saved = 0  # members since the error list was last saved
        self._saved_at = float("-inf")  # time.monotonic() of the last progress write

    def start(self, total: int) -> None:
        self.total = total
        ImportJob.objects.filter(pk=self.job_id).update(total=total)

    def __call__(self, name: str, summary: ImportSummary) -> None:
        self.summary = summary
        self._since_errors_saved += 1
        now = time.monotonic()
        if now - self._saved_at < PROGRESS_WRITE_SECONDS:
            return
        self._saved_at = now
        fields = self._counters()
        if len(summary.errors) != self._errors_saved and self._since_errors_saved >= ERRORS_WRITE_EVERY:
            fields.update(self._errors())
        ImportJob.objects.filter(pk=self.job_id).update(**fields)

    def _counters(self) -> dict:
        s = self.summary
        return {"processed": s.processed, "created_count": s.created, "duplicate_count": s.duplicates,
                "failed_count": s.rejected}

    def _errors(self) -> dict:
        self._errors_saved, self._since_errors_saved = len(self.summary.errors), 0
        return {"errors": [{"file": f, "error": e} for f, e in self.summary.errors]}

    def crash_message(self, exc: BaseException, *, interrupted: bool = False) -> str:
        done = self.summary.processed if self.summary is not None else 0
        if isinstance(exc, SoftTimeLimitExceeded):
            return (f"the import ran past the task time limit (TOPOWEB_TASK_SOFT_TIME_LIMIT, "
                    f"{getattr(settings, 'TASK_SOFT_TIME_LIMIT', '?')} s) after {done} of {self.total} reports")
        what = "was interrupted" if interrupted else "stopped on an internal error"
        return f"the import {what} after {done} of {self.total} reports: {type(exc).__name__}: {exc}"

    def finish(self, status: str, message: str) -> None:
        """Save the final status, message, counters and error list; never raises. After a
        failed write (a database error, a value the database refuses) the status alone is
        written once more, on a fresh connection where one may be opened: a job never stays
        ``running`` while the database takes writes."""
        end = {"status": status, "message": _clean_text(message, 4000), "finished_at": timezone.now()}
        fields = dict(end)
        if self.summary is not None:
            fields.update(self._counters())
            fields.update(self._errors())
        try:
            ImportJob.objects.filter(pk=self.job_id).update(**fields)
            return
        except Exception:
            log.exception("could not save the end of import job %s; saving its status alone", self.job_id)
        try:
            if not connection.in_atomic_block:
                connection.close()
            ImportJob.objects.filter(pk=self.job_id).update(**end)
        except Exception:
            log.exception("could not save the end of import job %s; it stays running", self.job_id)


def _discard_stored(job: ImportJob) -> None:
    """Delete an archive we copied for the worker (never a path the user pointed at)."""
    try:
        p = Path(job.stored_path)
        if p.is_file() and p.parent.resolve() == _import_dir().resolve():
            p.unlink()
    except OSError:
        log.warning("could not delete %s", job.stored_path)

