"""Reading bulk-import archives and telling a sound archive from a damaged one (standard library only).

``scan_tar(tar, archive_name=..., max_members=...) -> TarScan`` walks an open archive's listing
with ``tar.next()`` (never ``getmembers()``), one header at a time, and stops after
``max_members`` entries. When the listing ends it checks that it ended on tar's end-of-archive
block and reads the compressed stream (gzip, bzip2, xz) to its very end, so that a truncated
stream, a bad gzip CRC or garbage after a gzip stream is found even where ``tarfile`` itself
would stop silently (at a zero block before a cut-off gzip trailer, or at a header with a bad
checksum). Python's bzip2 and xz readers ignore data after their stream; so does this.

The result says what was read and, in ``damage``, where and why the archive broke::

    fleet.tar.gz is truncated or corrupt after member 12 (fleet/host-12.json): unexpected end of data (...)

Members listed before the damage point stay readable with ``tar.extractfile``; reading a member
whose data runs past the damage point raises one of ``STREAM_ERRORS``.
"""

from __future__ import annotations

import gzip
import lzma
import tarfile
import zlib
from dataclasses import dataclass, field

# What reading a damaged archive can raise: tarfile's own errors, the decompressors' (gzip:
# EOFError on a cut-off stream, BadGzipFile -- an OSError -- on a bad CRC or trailing garbage;
# bz2: OSError; xz: LZMAError; deflate data: zlib.error) and the file system's.
STREAM_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError)

_READ_CHUNK = 1 << 20


@dataclass
class TarScan:
    """What ``scan_tar`` read: the regular files in archive order and how the listing ended.

    ``count`` counts every entry read (files, folders, links). ``damage`` is "" when the archive
    was read, and its compressed stream verified, to its end; ``over_limit`` is True when the
    listing stopped at ``max_members`` with more entries left (the rest was neither read nor
    verified). ``last_name`` is the name of the last entry read.
    """

    files: list[tarfile.TarInfo] = field(default_factory=list)
    count: int = 0
    last_name: str = ""
    damage: str = ""
    over_limit: bool = False


def open_tar(path=None, *, fileobj=None) -> tarfile.TarFile:
    """Open an archive for reading (any compression tarfile knows); raises ``tarfile.TarError``
    or ``OSError`` (e.g. ``FileNotFoundError``) when it cannot be read at all."""
    try:
        if fileobj is not None:
            return tarfile.open(fileobj=fileobj, mode="r:*")
        return tarfile.open(path, "r:*")
    except (EOFError, zlib.error, lzma.LZMAError) as exc:  # damage in the very first blocks
        raise tarfile.ReadError(describe_stream_error(exc)) from exc


def scan_tar(tar: tarfile.TarFile, *, archive_name: str, max_members: int) -> TarScan:
    """Read the listing of ``tar`` header by header (at most ``max_members`` entries) and verify
    the archive to its end; never raises for a damaged archive (see ``TarScan.damage``)."""
    scan = TarScan()
    try:
        while True:
            member = tar.next()
            if member is None:
                break
            if scan.count >= max_members:
                scan.over_limit = True
                return scan
            scan.count += 1
            scan.last_name = member.name
            if member.isfile():
                scan.files.append(member)
        reason = end_of_archive_problem(tar)
        if not reason:
            read_to_end(tar.fileobj)
    except STREAM_ERRORS as exc:
        reason = describe_stream_error(exc)
    if reason:
        scan.damage = damage_message(archive_name, scan.count, scan.last_name, reason)
    return scan


def end_of_archive_problem(tar: tarfile.TarFile) -> str:
    """Why the listing of ``tar`` stopped where it did, when that was not tar's end-of-archive
    block (a block of zeros): "" for a proper end, else the reason and the byte offset in the
    tar stream. ``tarfile`` ends a listing without an error on a bad header checksum or a
    missing end block; this tells those apart from a proper end."""
    offset = tar.offset
    tar.fileobj.seek(offset)
    block = tar.fileobj.read(tarfile.BLOCKSIZE)
    if len(block) == tarfile.BLOCKSIZE and block.count(tarfile.NUL) == tarfile.BLOCKSIZE:
        return ""
    if not block:
        return f"no end-of-archive block at byte {offset} (the tar stream is cut short)"
    if len(block) < tarfile.BLOCKSIZE:
        return f"truncated tar header at byte {offset}"
    try:
        tarfile.TarInfo.frombuf(block, tar.encoding, tar.errors)
    except tarfile.HeaderError as exc:
        return f"bad tar header at byte {offset}: {exc}"
    return f"unreadable tar header at byte {offset}"


def read_to_end(fileobj) -> None:
    """Read ``fileobj`` to its end in chunks, so that a decompressor checks the stream's trailer
    (gzip's CRC and length) and whatever follows it; raises one of ``STREAM_ERRORS``."""
    while fileobj.read(_READ_CHUNK):
        pass


def describe_stream_error(exc: BaseException) -> str:
    """A short reason for an error met while reading an archive's stream."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, EOFError):
        return f"unexpected end of data ({text})"
    if isinstance(exc, gzip.BadGzipFile) and text.startswith("Not a gzipped file"):
        return f"garbage after the end of the gzip stream ({text})"
    if isinstance(exc, gzip.BadGzipFile) and text.startswith("CRC check failed"):
        return f"bad CRC ({text})"
    if isinstance(exc, zlib.error):
        return f"corrupt compressed data ({text})"
    return text


def damage_message(archive_name: str, count: int, last_name: str, reason: str) -> str:
    """``<archive> is truncated or corrupt after member <n> (<name>): <reason>``."""
    where = f"after member {count} ({last_name})" if count else "at its start"
    return f"{archive_name} is truncated or corrupt {where}: {reason}"


def over_limit_message(archive_name: str, max_members: int, last_name: str) -> str:
    """The notice for a listing stopped at the member limit."""
    return (f"{archive_name} has more than {max_members} members (TOPOWEB_IMPORT_MAX_MEMBERS); members "
            f"after member {max_members} ({last_name}) were not read")
