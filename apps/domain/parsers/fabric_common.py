"""Fabric records shared by the ``ibnetdiscover``, ``iblinkinfo``, ``ibswitches``/``ibhosts``/``ibnodes`` parsers.

Every one of those parsers returns a :class:`FabricResult`, whose JSON (``to_jsonable``) is a
contract read by ``apps/domain/fabric.py`` and by people::

    {"source": "ibnetdiscover",
     "initiated_from": {"node_guid": "0x...", "port_guid": "0x..."} | null,
     "switches": [{"guid", "name", "num_ports", "lid", "lmc", "enhanced_port0", "devid", "vendid",
                   "system_image_guid", "ports": [PORT, ...]}],
     "cas": [{"guid", "name", "host", "kind", "alias", "node_guid", "num_ports", "devid", "vendid",
              "system_image_guid", "ports": [PORT, ...]}],
     "links": [{"a": END, "b": END, "width", "speed", "state", "could_be_width", "could_be_speed"}],
     "warnings": ["..."]}

    PORT = {"port", "state", "phys_state", "width", "speed", "lane_gbps", "lid", "port_guid",
            "could_be_width", "could_be_speed", "peer": END | null}
    END  = {"guid", "port", "lid", "name"}

Conventions:

* **GUIDs** are ``0x`` + 16 lower-case hex digits, whatever the tool printed (``S-2c5eab0300b87b40``,
  ``(2c902002789ad)``, ``0x0002C903...``): see :func:`fabric_guid`.
* A node's ``guid`` is how links refer to it. It is the node GUID when the tool prints one
  (ibnetdiscover's ``switchguid=``/``caguid=``, ibswitches/ibhosts); iblinkinfo and the
  ``ibnetdiscover -p`` ports report print only port GUIDs, so there a CA's ``guid`` is its first
  port's GUID and ``node_guid`` is null, and a switch's ``guid`` is its port-0 GUID. A node whose
  GUID the text never gives (a filtered or cut iblinkinfo) has ``guid`` null and is named by
  ``lid``; so is a link end, ``END.guid`` null with ``END.lid`` set.
* ``width`` is ``1X``/``2X``/``4X``/``8X``/``12X``; ``speed`` the IB generation ``SDR`` ... ``XDR``
  (``FDR10``); either is null when the tool printed ``??``/``???`` or nothing (a down port).
  ``lane_gbps`` is iblinkinfo's per-lane signalling rate as printed (``25.78125``), else null.
* ``state``/``phys_state`` use ibstat's words (``Active``, ``Down``, ``Initializing``, ``Armed``;
  ``LinkUp``, ``Polling``, ``Disabled``...). ibnetdiscover prints neither: every port it lists
  has a link (physically up) and both are null there.
* ``could_be_width``/``could_be_speed``: iblinkinfo's ``Could be 4X`` / ``Could be 53.125 Gbps``
  (a link trained below what both ends support), as a width and a speed name.
* ``cas[].kind``: ``hca`` (a host adapter), ``aggregation_node`` (the switch-resident SHARP
  ``Mellanox Technologies Aggregation Node``, never a host) or ``router``.
* ``cas[].host``: the host name taken from the node description when it has the form rdma-ndd
  and the OFED scripts give it, ``<host> <device>`` (``node17 HCA-1``, ``node17 mlx5_0``,
  ``dgx-04 mlx5_ib3``); null for descriptions that name no host (``MT4129 ConnectX7   Mellanox
  Technologies``, the default before a host name is set). ``alias`` is the name peers print for
  the node when it differs from its own description (ibnetdiscover run with a node-name map
  renames peers but not a CA's own line).
* ``links`` hold every physical link once (the tools list each link from both ends); ``a`` is the
  end printed first. A link's ``state`` is its ports' state (null for ibnetdiscover).
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

from apps.domain.bandwidth import IB_WIDTH_LANES, IB_SPEEDS

__all__ = ["End", "FabricPort", "Switch", "CaNode", "Link", "FabricResult", "fabric_guid", "host_of",
           "device_of", "ca_kind", "width_of", "speed_of", "dedupe_links", "DIAG_RE", "is_fabric_echo", "paused_gc"]


@dataclass(frozen=True, slots=True)
class End:
    guid: str | None
    port: int
    lid: int | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class FabricPort:
    port: int
    state: str | None = None
    phys_state: str | None = None
    width: str | None = None
    speed: str | None = None
    lane_gbps: float | None = None
    lid: int | None = None
    port_guid: str | None = None
    could_be_width: str | None = None
    could_be_speed: str | None = None
    peer: End | None = None


@dataclass(frozen=True, slots=True)
class Switch:
    guid: str | None
    name: str | None
    num_ports: int | None = None
    lid: int | None = None
    lmc: int | None = None
    enhanced_port0: bool | None = None
    devid: str | None = None
    vendid: str | None = None
    system_image_guid: str | None = None
    ports: tuple[FabricPort, ...] = ()


@dataclass(frozen=True, slots=True)
class CaNode:
    guid: str | None
    name: str | None
    host: str | None
    kind: str = "hca"
    alias: str | None = None
    node_guid: str | None = None
    num_ports: int | None = None
    devid: str | None = None
    vendid: str | None = None
    system_image_guid: str | None = None
    ports: tuple[FabricPort, ...] = ()


@dataclass(frozen=True, slots=True)
class Link:
    a: End
    b: End
    width: str | None
    speed: str | None
    state: str | None = None
    could_be_width: str | None = None
    could_be_speed: str | None = None


@dataclass(frozen=True, slots=True)
class FabricResult:
    source: str
    switches: tuple[Switch, ...]
    cas: tuple[CaNode, ...]
    links: tuple[Link, ...]
    warnings: tuple[str, ...]
    initiated_from: dict | None = None


_HEX_RE = re.compile(r"^(?:0[xX])?([0-9a-fA-F]{1,16})$")


@lru_cache(maxsize=1 << 17)  # a fabric names each GUID many times (every port line of every peer)
def fabric_guid(text: str) -> str | None:
    """``S-2c5eab0300b87b40`` / ``2c902002789ad`` / ``0x2C9`` -> ``0x`` + 16 lower-case hex; else None.

    >>> fabric_guid("H-0002c902002789ac"), fabric_guid("b8cffff0053ee")
    ('0x0002c902002789ac', '0x000b8cffff0053ee')
    """
    text = text.strip().strip('"')
    if len(text) > 2 and text[1] == "-" and text[0] in "SHR?":
        text = text[2:]
    m = _HEX_RE.match(text)
    return "0x" + m.group(1).lower().rjust(16, "0") if m else None


# "<host> <device>": rdma-ndd's default "%h %d", OFED's "<host> HCA-<n>".
_DEVICE_RE = re.compile(r"^(?:HCA-\d+|[a-z][a-z0-9]*_[a-z0-9]+|(?:rxe|irdma|siw|qedr|hfi1_|bnxt_re)\d+)$")
_HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def host_of(description: str | None) -> str | None:
    """The host name in a CA's node description, or None when it names none.

    >>> host_of("node17 HCA-1"), host_of("dgx-04-c01 mlx5_5"), host_of("MT4129 ConnectX7   Mellanox Technologies")
    ('node17', 'dgx-04-c01', None)
    """
    if not description:
        return None
    parts = description.split()
    if len(parts) != 2 or not _DEVICE_RE.match(parts[1]) or not _HOST_RE.match(parts[0]):
        return None
    return parts[0]


def device_of(description: str | None) -> str | None:
    """The device half of a ``<host> <device>`` description (``mlx5_5``, ``HCA-6``), else None."""
    return description.split()[1] if host_of(description) else None


def ca_kind(description: str | None, router: bool = False) -> str:
    """``router``, ``aggregation_node`` (SHARP, switch-resident) or ``hca``."""
    if router:
        return "router"
    if description and "aggregation node" in description.lower():
        return "aggregation_node"
    return "hca"


_WIDTHS = {w.lower(): w for w in IB_WIDTH_LANES} | {w: w for w in IB_WIDTH_LANES}
_SPEEDS = {sp.lower(): sp for sp in IB_SPEEDS} | {sp: sp for sp in IB_SPEEDS}


def width_of(text: str | None) -> str | None:
    """``4x`` / ``4X`` -> ``4X``; ``??`` or unknown -> None."""
    if text is None:
        return None
    return _WIDTHS.get(text) or _WIDTHS.get(text.strip().lower())


def speed_of(text: str | None) -> str | None:
    """``NDR`` / ``ndr`` -> ``NDR``; ``???`` or unknown -> None."""
    if text is None:
        return None
    return _SPEEDS.get(text) or _SPEEDS.get(text.strip().lower())


def _end_key(e: End) -> tuple:
    return (e.guid, 0, e.port) if e.guid is not None else ("", e.lid, e.port)


def _needs_merge(first: Link, link: Link) -> bool:
    return ((first.width is None and link.width is not None) or (first.speed is None and link.speed is not None)
            or (first.state is None and link.state is not None)
            or (link.could_be_width is not None and first.could_be_width is None)
            or (link.could_be_speed is not None and first.could_be_speed is None))


def dedupe_links(links: list[Link], warnings: list[str]) -> tuple[Link, ...]:
    """Each physical link once: the two listings of one link merge; a disagreement is a warning.

    Widths/speeds that differ between the two ends keep the first end's values and say so; what
    only the second listing has (a state, a ``Could be``) is added.
    """
    seen: dict[tuple, int] = {}
    out: list[Link] = []
    for link in links:
        ka, kb = _end_key(link.a), _end_key(link.b)
        key = (ka, kb) if ka <= kb else (kb, ka)
        at = seen.get(key)
        if at is None:
            seen[key] = len(out)
            out.append(link)
            continue
        first = out[at]
        if (first.width != link.width or first.speed != link.speed) and None not in (link.width, link.speed) \
                and None not in (first.width, first.speed):
            warnings.append(f"link {_show(first.a)} - {_show(first.b)}: the ends disagree on width/speed "
                            f"({first.width} {first.speed} vs {link.width} {link.speed}); first kept")
        if _needs_merge(first, link):
            out[at] = Link(first.a, first.b, first.width or link.width, first.speed or link.speed,
                           first.state or link.state, first.could_be_width or link.could_be_width,
                           first.could_be_speed or link.could_be_speed)
    return tuple(out)


def _show(e: End) -> str:
    return f"{e.guid or f'lid {e.lid}'}[{e.port}]"


# Diagnostics the infiniband-diags tools print among (or before) their output: unreachable nodes
# during discovery ("src/query_smp.c:199; umad (DR path ...) bad status 110; Connection timed out"),
# libibmad/libibnetdisc warnings ("ibwarn: [3873] mad_rpc: _do_madrpc failed; dport (DR path ...)").
DIAG_RE = re.compile(r"^\s*(?:ibwarn|ibpanic|iberror|ibdebug|ibnetdiscover|iblinkinfo|ibswitches|ibhosts|ibnodes)\s*:"
                     r"|^\s*\S+\.c:\d+;|^\s*\S+\.c:\d+:\s|^\s*(?:ERROR|WARN(?:ING)?)\s*:|[Tt]imed out\s*$")

_ECHO_RE = re.compile(r"^\s*(?:.*[$#>]\s*)?(?:sudo\s+)?(?:\S*/)?"
                      r"(?:ibnetdiscover|iblinkinfo|ibswitches|ibhosts|ibnodes|ibdev2netdev|lldpctl|lldpcli)\b(?!\s*:)")


def is_fabric_echo(line: str) -> bool:
    """True for a pasted prompt/command line (``$ ibnetdiscover -p``, ``[root@n1 ~]# iblinkinfo``)."""
    return bool(_ECHO_RE.match(line))


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a large fabric is read or built.

    Reading a fabric allocates a few records per port line and makes no reference cycles, so the
    collector finds nothing, yet it rescans every record made so far several times while a large
    text is read: about a third of the time of a 200,000-line ibnetdiscover. Reference counting
    still frees everything as usual; the collector's previous state is restored on the way out.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
