"""Parser for ``show_gids`` (Mellanox/NVIDIA mlnx-tools, MLNX_OFED/DOCA): every non-zero GID of every RDMA port.

The script reads ``/sys/class/infiniband/<dev>/ports/<port>/gids/<index>`` with
``gid_attrs/types/<index>`` and ``gid_attrs/ndevs/<index>`` and prints one tab-separated line per
GID (domain.md rule F05, [S23])::

    DEV     PORT    INDEX   GID                                     IPv4            VER     DEV
    ---     ----    -----   ---                                     ------------    ---     ---
    mlx5_0  1       0       fe80:0000:0000:0000:0e42:a1ff:fe40:29a0                 v1      eth01
    mlx5_0  1       3       0000:0000:0000:0000:0000:ffff:0a6c:a424 10.108.164.36   v2      eth01
    n_gids_found=12

Columns: RDMA device, port, GID index, GID (eight groups of four hex digits), the IPv4 address of
an IPv4-mapped GID (empty otherwise), RoCE version (``v1`` = ``IB/RoCE v1``, ``v2`` = ``RoCE v2``)
and the network interface the GID belongs to (RoCE only; empty on InfiniBand ports). The
script pads with runs of tabs and ``"  "`` after the IPv4 text, so the columns drift; the line is
read as whitespace-separated tokens (no token contains a space), which also reads pasted copies
whose tabs became spaces. Header and dash lines, a ``n_gids_found=N`` trailer (checked against the
rows read), colour escapes and a leading ``$ show_gids`` line are accepted.

Result :class:`ShowGids`:

``gids``: tuple of :class:`GidEntry` in printed order: ``ca`` (``mlx5_0``), ``port`` (int),
``index`` (int), ``gid`` (lower case as printed), ``ipv4`` (text or null), ``version``
(``v1``/``v2``), ``netdev`` (text or null), and, read from the GID itself, ``family``:
``ipv4`` (``::ffff:a.b.c.d``, IPv4-mapped), ``link_local`` (``fe80::/10``: never routed) or
``ipv6`` (any other address).

``n_gids_found`` (int from the trailer, or null) and ``warnings``.

Errors name the line: a row whose port or index is not a number, whose GID is not eight groups
of four hex digits, or whose version is not ``v1``/``v2``; any other text.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from apps.domain.errors import ParseError
from apps.domain.parsers.text import clean_lines

KIND = "show_gids"

__all__ = ["GidEntry", "ShowGids", "gid_family", "parse", "detect"]


@dataclass(frozen=True)
class GidEntry:
    ca: str
    port: int
    index: int
    gid: str
    ipv4: str | None
    version: str
    netdev: str | None
    family: str


@dataclass(frozen=True)
class ShowGids:
    gids: tuple[GidEntry, ...]
    n_gids_found: int | None
    warnings: tuple[str, ...]


_GID_RE = re.compile(r"^[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7}$")
_IPV4_RE = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_HEADER_RE = re.compile(r"^DEV\s+PORT\s+INDEX\s+GID\b", re.I)
_DASHES_RE = re.compile(r"^-{3}\s+-{4}\s+-{5}\s+-{3}")
_TRAILER_RE = re.compile(r"^n_gids_found\s*=\s*(\d+)$")
_PROMPT_RE = re.compile(r"^(?:.*[$#>]\s*)?(?:sudo\s+)?(?:\S*/)?show_gids\b")
_VERSIONS = {"v1": "v1", "v2": "v2", "ib/roce v1": "v1", "roce v2": "v2"}


def gid_family(gid: str) -> str:
    """``"ipv4"`` (IPv4-mapped ``::ffff:a.b.c.d``), ``"link_local"`` (``fe80::/10``) or ``"ipv6"``.

    >>> gid_family("0000:0000:0000:0000:0000:ffff:0a6c:a424"), gid_family("fe80:0000:0000:0000:0e42:a1ff:fe40:29a0")
    ('ipv4', 'link_local')
    """
    addr = ipaddress.IPv6Address(gid)
    if addr.ipv4_mapped is not None:
        return "ipv4"
    return "link_local" if addr.is_link_local else "ipv6"


def parse(text: str) -> ShowGids:
    """Parse ``show_gids`` output into one record per GID."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    warnings: list[str] = []
    gids: list[GidEntry] = []
    found: int | None = None
    seen: dict[tuple[str, int, int], int] = {}
    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or _HEADER_RE.match(stripped) or _DASHES_RE.match(stripped):
            continue
        m = _TRAILER_RE.match(stripped)
        if m:
            found = int(m.group(1))
            continue
        if not gids and _PROMPT_RE.match(stripped):
            warnings.append(f"line {no}: skipped command line {stripped!r}")
            continue
        tokens = stripped.split()
        if len(tokens) < 5:
            raise ParseError(KIND, no, line, "expected 'DEV PORT INDEX GID [IPv4] VER [DEV]' as printed by show_gids")
        ca, port, index, gid, *rest = tokens
        if not (port.isascii() and port.isdigit() and index.isascii() and index.isdigit()):
            raise ParseError(KIND, no, line, f"port {port!r} and GID index {index!r} must be numbers")
        if not _GID_RE.match(gid):
            raise ParseError(KIND, no, line, f"{gid!r} is not a GID (eight groups of four hex digits)")
        ipv4 = None
        if rest and _IPV4_RE.match(rest[0]):
            ipv4, rest = rest[0], rest[1:]
        if not rest or rest[0].lower() not in _VERSIONS:
            raise ParseError(KIND, no, line, "expected the RoCE version v1 or v2 after the GID "
                             "(and the IPv4 address, when there is one)")
        version = _VERSIONS[rest[0].lower()]
        if len(rest) > 2:
            raise ParseError(KIND, no, line, f"unexpected text after the network interface: {' '.join(rest[2:])!r}")
        netdev = rest[1] if len(rest) == 2 else None
        gid = gid.lower()
        family = gid_family(gid)
        if ipv4 is not None and family == "ipv4":
            mapped = str(ipaddress.IPv6Address(gid).ipv4_mapped)
            if mapped != ipv4:
                warnings.append(f"line {no}: the IPv4 column says {ipv4} but the GID maps {mapped}")
        elif ipv4 is not None:
            warnings.append(f"line {no}: an IPv4 address {ipv4} beside a GID that is not IPv4-mapped")
        key = (ca, int(port), int(index))
        if key in seen:
            warnings.append(f"line {no}: {ca} port {port} GID index {index} printed twice (first at line "
                            f"{seen[key]}); both kept")
        seen.setdefault(key, no)
        gids.append(GidEntry(ca=ca, port=int(port), index=int(index), gid=gid, ipv4=ipv4, version=version,
                             netdev=netdev, family=family))
    if not gids:
        raise ParseError(KIND, 0, "", "no GID row found")
    if found is not None and found != len(gids):
        warnings.append(f"n_gids_found={found} but {len(gids)} GID rows were read: the text may be cut")
    return ShowGids(gids=tuple(gids), n_gids_found=found, warnings=tuple(warnings))


_DETECT_ROW_RE = re.compile(r"^\S+\s+\d+\s+\d+\s+[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7}\s+(?:\S+\s+)?v[12]\b", re.M)


def detect(text: str) -> int:
    """Score ``show_gids`` output: its header, or rows of device, port, index, GID and version."""
    head = text[:4000].lstrip("\ufeff")
    if re.search(r"^DEV\tPORT\tINDEX\tGID", head, re.M):
        return 100
    if _DETECT_ROW_RE.search(head):
        return 80
    return 0
