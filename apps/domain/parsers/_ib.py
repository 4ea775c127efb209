"""InfiniBand / RoCE records shared by the ``ibstat``, ``ibstatus``, ``ibv_devinfo`` and ``sysfs_ib`` parsers.

Four producers describe the same HCAs (channel adapters, "CAs") and ports; each parser fills the
records below so that downstream code (rules F01-F05 of domain.md, the NIC joins of 4.2) treats
them alike. A field a producer does not print is ``None`` (or an empty tuple).

``IbResult``
    ``source``       which producer the text came from: ``"ibstat"``, ``"ibstat -p"``, ``"ibstatus"``,
                     ``"ibv_devinfo"`` or ``"sysfs_ib"``.
    ``cas``          tuple of :class:`Ca` in the order printed.
    ``port_guids``   every port GUID in the order printed (``ibstat -p`` prints nothing else; for the
                     other producers it repeats ``Port.port_guid`` of every port that has a non-zero one:
                     Ethernet ports of some adapters print ``Port GUID: 0x0``).
    ``warnings``     tuple of strings: anything recovered rather than read cleanly.

``Ca``
    ``name``               ``mlx5_0`` (``None`` only for ``ibstat <ca> <port>``, which prints no CA line).
    ``ca_type``            ``MT4129`` (ibstat ``CA type:``, sysfs ``hca_type``; for ibv_devinfo
                           ``MT<vendor_part_id>`` when the vendor is Mellanox/NVIDIA ``0x02c9``/``0x15b3``).
    ``num_ports``          int (ibstat ``Number of ports:``, ibv_devinfo ``phys_port_cnt:``).
    ``firmware_version``   ``28.39.1002``.
    ``hardware_version``   as printed (``0``, ``a0``, ``0x0``, ``0xEFA0``).
    ``node_guid``, ``system_image_guid``
                           canonical ``0x`` + 16 lowercase hex digits, whatever the producer printed
                           (ibstat ``0x0002c90300002f78``, ibv_devinfo/sysfs ``0002:c903:0000:2f78``).
    ``board_id``           ``MT_0000000838`` (ibv_devinfo, sysfs).
    ``transport``          ibv_devinfo ``transport:`` as printed (``InfiniBand (0)``, ``unspecified (4)``).
    ``vendor_id``          ``0x02c9`` (ibv_devinfo), lowercase.
    ``vendor_part_id``     int, ``4129`` (ibv_devinfo).
    ``device_path``        sysfs only: ``readlink -f /sys/class/infiniband/<ca>/device``.
    ``bdf``                sysfs only: canonical PCI address of the CA (last BDF in ``device_path``).
    ``pci_path``           sysfs only: every BDF of ``device_path`` from the root port down to the CA
                           itself (the CA's PCI ancestry, domain.md 4.2 join 5).
    ``netdevs``            sysfs only: names in ``/sys/class/infiniband/<ca>/device/net/``.
    ``ports``              tuple of :class:`Port`, in the order printed.

``Port``
    ``number``             1-based port number.
    ``state``              normalised to ibstat's words: ``Down``, ``Initializing``, ``Armed``, ``Active``
                           (``ActiveDefer`` for the kernel's ``5: ACTIVE_DEFER``); ``None`` if unknown.
    ``state_raw``          the text as printed (``Active``, ``4: ACTIVE``, ``PORT_ACTIVE (4)``).
    ``phys_state``         normalised to ibstat's words: ``Sleep``, ``Polling``, ``Disabled``,
                           ``PortConfigurationTraining``, ``LinkUp``, ``LinkErrorRecovery``, ``PhyTest``.
    ``phys_state_raw``     as printed (``LinkUp``, ``5: LinkUp``, ``LINK_UP (5)``).
    ``rate_gbps``          line rate in Gb/s as a number (``400``, ``2.5``); ibv_devinfo -v: width x lane speed.
    ``rate_raw``           as printed (``40 (FDR10)``, ``200 Gb/sec (4X HDR)``).
    ``width``              ``4X`` etc. when printed (ibstatus/sysfs rate string, ibv_devinfo -v); ibstat loses it.
    ``speed_name``         ``SDR`` ... ``XDR`` when printed (ibstat only says ``FDR10``).
    ``link_layer``         ``InfiniBand`` or ``Ethernet`` (RoCE).
    ``base_lid``, ``lmc``, ``sm_lid``
                           ints (ibstatus and sysfs print hex, ibstat decimal; all converted).
    ``capability_mask``    lowercase hex text ``0xa751e848`` (ibstat ``Capability mask:``, sysfs
                           ``cap_mask``, ibv_devinfo -v ``port_cap_flags``).
    ``port_guid``          canonical ``0x`` + 16 hex digits; ibstatus/ibv_devinfo -v/sysfs: the interface-id
                           (low 64 bits) of GID 0, which is how libibumad (and so ibstat) derives it.
    ``default_gid``        GID 0 as printed (ibstatus ``default gid:``, sysfs ``gids/0``, ibv_devinfo ``GID[0]``).
    ``max_mtu``, ``active_mtu``
                           ints in bytes (ibv_devinfo ``4096 (5)`` -> 4096).
    ``active_width``, ``active_speed``
                           ibv_devinfo -v text as printed (``4X (2)``, ``25.0 Gbps (32)``).
    ``gids``               tuple of :class:`Gid` (ibv_devinfo -v GID table, sysfs ``gids/N`` with
                           ``gid_attrs/types/N`` and ``gid_attrs/ndevs/N``).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from apps.domain.errors import ParseError

__all__ = [
    "Gid",
    "Port",
    "Ca",
    "IbResult",
    "STATE_WORDS",
    "PHYS_STATE_WORDS",
    "normalise_state",
    "normalise_phys_state",
    "canonical_guid",
    "parse_int",
    "parse_rate",
    "guid_from_gid",
    "number",
    "SPEED_BY_LANE_GBPS",
    "SPEED_BY_CODE",
    "is_command_echo",
    "missing_lines",
    "port_guids_of",
    "ZERO_GUID",
]


@dataclass(frozen=True)
class Gid:
    index: int
    gid: str
    type: str | None = None  # "IB/RoCE v1", "RoCE v2"
    ndev: str | None = None  # netdev the GID belongs to (RoCE)


@dataclass(frozen=True)
class Port:
    number: int
    state: str | None = None
    state_raw: str | None = None
    phys_state: str | None = None
    phys_state_raw: str | None = None
    rate_gbps: float | int | None = None
    rate_raw: str | None = None
    width: str | None = None
    speed_name: str | None = None
    link_layer: str | None = None
    base_lid: int | None = None
    lmc: int | None = None
    sm_lid: int | None = None
    capability_mask: str | None = None
    port_guid: str | None = None
    default_gid: str | None = None
    max_mtu: int | None = None
    active_mtu: int | None = None
    active_width: str | None = None
    active_speed: str | None = None
    gids: tuple[Gid, ...] = ()


@dataclass(frozen=True)
class Ca:
    name: str | None
    ca_type: str | None = None
    num_ports: int | None = None
    firmware_version: str | None = None
    hardware_version: str | None = None
    node_guid: str | None = None
    system_image_guid: str | None = None
    board_id: str | None = None
    transport: str | None = None
    vendor_id: str | None = None
    vendor_part_id: int | None = None
    device_path: str | None = None
    bdf: str | None = None
    pci_path: tuple[str, ...] = ()
    netdevs: tuple[str, ...] = ()
    ports: tuple[Port, ...] = ()


@dataclass(frozen=True)
class IbResult:
    source: str
    cas: tuple[Ca, ...]
    port_guids: tuple[str, ...]
    warnings: tuple[str, ...]


# Index = the IB numeric code (kernel sysfs "4: ACTIVE", ibv_devinfo "PORT_ACTIVE (4)").
STATE_WORDS = {1: "Down", 2: "Initializing", 3: "Armed", 4: "Active", 5: "ActiveDefer"}
PHYS_STATE_WORDS = {
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "PhyTest",
}
# Words as the producers spell them, squeezed (lowercase, letters only) -> code.
_STATE_BY_WORD = {
    "down": 1, "portdown": 1,
    "init": 2, "initializing": 2, "initialize": 2, "portinit": 2,
    "armed": 3, "portarmed": 3,
    "active": 4, "portactive": 4,
    "activedefer": 5, "portactivedefer": 5,
}
_PHYS_BY_WORD = {
    "sleep": 1,
    "polling": 2,
    "disabled": 3,
    "portconfigurationtraining": 4,
    "portconfigurationtrainning": 4,  # rdma-core devinfo.c spells it so
    "linkup": 5,
    "linkerrorrecovery": 6,
    "phytest": 7,
}
_CODE_RE = re.compile(r"^\s*(\d+)\s*:\s*(.*?)\s*$|^\s*(.*?)\s*\(\s*(\d+)\s*\)\s*$")
_SQUEEZE_RE = re.compile(r"[^a-z]")


def _normalise(raw: str, words: dict[int, str], by_word: dict[str, int]) -> str | None:
    m = _CODE_RE.match(raw)
    if m:
        code = int(m.group(1) or m.group(4))
        if code in words:
            return words[code]
        word = m.group(2) if m.group(1) else m.group(3)
    else:
        word = raw
    code = by_word.get(_SQUEEZE_RE.sub("", word.lower()))
    return words[code] if code else None


def normalise_state(raw: str) -> str | None:
    """``Active`` / ``4: ACTIVE`` / ``PORT_ACTIVE (4)`` -> ``Active``; unknown -> None."""
    return _normalise(raw, STATE_WORDS, _STATE_BY_WORD)


def normalise_phys_state(raw: str) -> str | None:
    """``LinkUp`` / ``5: LinkUp`` / ``LINK_UP (5)`` / ``Phy Test`` -> ibstat's word; unknown -> None."""
    return _normalise(raw, PHYS_STATE_WORDS, _PHYS_BY_WORD)


_HEX16_RE = re.compile(r"^(?:0x)?([0-9a-fA-F]{1,16})$")
_COLON_GUID_RE = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{4}):([0-9a-fA-F]{4}):([0-9a-fA-F]{4})$")


def canonical_guid(text: str) -> str | None:
    """``0x0002c90300002f78`` / ``0002:c903:0000:2f78`` / ``0x0`` -> ``0x0002c90300002f78``; else None."""
    text = text.strip()
    m = _COLON_GUID_RE.match(text)
    if m:
        return "0x" + "".join(m.groups()).lower()
    m = _HEX16_RE.match(text)
    if m and (text.lower().startswith("0x") or len(text) == 16):
        return "0x" + m.group(1).lower().rjust(16, "0")
    return None


def guid_from_gid(gid: str) -> str | None:
    """Interface-id (low 64 bits) of GID 0: the port GUID, as libibumad derives it.

    ``fe80:0000:0000:0000:0c42:a103:00d1:2a3c`` (full form) or ``fe80::c42:a103:d1:2a3c``
    (compressed) -> ``0x0c42a10300d12a3c``; None for unreadable or all-zero GIDs.
    """
    try:
        packed = ipaddress.IPv6Address(gid.strip()).packed
    except ValueError:
        return None
    low = packed[8:].hex()
    return None if low == "0" * 16 else "0x" + low


_INT_RE = re.compile(r"^\s*(0[xX][0-9a-fA-F]+|\d+)\b")


def parse_int(text: str) -> int | None:
    """``18`` -> 18, ``0x33bf`` -> 13247, ``4096 (5)`` -> 4096; None when no leading number."""
    m = _INT_RE.match(text)
    if not m:
        return None
    token = m.group(1)
    return int(token, 16) if token[:2].lower() == "0x" else int(token)


def number(value: float) -> float | int:
    """Integral floats as ints (400.0 -> 400) so JSON shows what the tools print."""
    return int(value) if float(value).is_integer() else value


# ibstat "Rate: 400", "Rate: 2.5", "Rate: 40 (FDR10)"; kernel/ibstatus "400 Gb/sec (4X NDR)",
# "10 Gb/sec (4X)" (old kernels without a speed word).
_RATE_RE = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*(?:Gb/sec|Gb/s|Gbps)?\s*(?:\(\s*(?:(\d+X)\s*)?([A-Za-z][A-Za-z0-9]*)?\s*\))?\s*$"
)


def parse_rate(text: str) -> tuple[float | int | None, str | None, str | None]:
    """Return (rate_gbps, width, speed_name) from a rate text; (None, None, None) when unreadable."""
    m = _RATE_RE.match(text)
    if not m:
        return None, None, None
    return number(float(m.group(1))), m.group(2), (m.group(3).upper() if m.group(3) else None)


# Per-lane nominal rate (Gb/s) as rdma-core's ibv_devinfo prints active_speed, and the IB name.
SPEED_BY_LANE_GBPS = {2.5: "SDR", 5.0: "DDR", 10.0: "QDR", 14.0: "FDR", 25.0: "EDR", 50.0: "HDR", 100.0: "NDR",
                      200.0: "XDR"}
# ibv_devinfo active_speed enum code -> name (IBV_SPEED_*; 4 and 8 both print "10.0 Gbps").
SPEED_BY_CODE = {1: "SDR", 2: "DDR", 4: "QDR", 8: "FDR10", 16: "FDR", 32: "EDR", 64: "HDR", 128: "NDR", 256: "XDR"}


_PROMPT_RE = re.compile(r"^\s*(?:.*[$#>]\s*)?(?:sudo\s+)?(?:\S*/)?(ibstat|ibstatus|ibv_devinfo)\b")


def is_command_echo(line: str) -> bool:
    """True for a pasted prompt/command line such as ``$ ibstat`` or ``[root@n1 ~]# ibv_devinfo -v``."""
    return bool(_PROMPT_RE.match(line))


def missing_lines(where: str, labels: list[str]) -> str:
    """Warning text for labels a producer always prints but the text lacks."""
    shown = ", ".join(repr(label + ":") for label in labels)
    return f"{where} has no {shown} line{'s' if len(labels) > 1 else ''} (output trimmed?)"


ZERO_GUID = "0x" + "0" * 16


def port_guids_of(cas) -> tuple[str, ...]:
    """Non-zero port GUIDs of every port of ``cas``, in order."""
    return tuple(p.port_guid for c in cas for p in c.ports if p.port_guid not in (None, ZERO_GUID))


class PortFields:
    """One port's raw fields (``label -> (line_no, line, value)``), read with errors naming the line.

    Shared by the ibstat, ibstatus, ibv_devinfo and sysfs_ib parsers; ``sep`` is what follows a
    label in that tool's output (``":"``, or ``""`` for sysfs keys) and appears in messages.
    """

    def __init__(self, kind: str, raw: dict, where: str, sep: str = ":") -> None:
        self.kind, self.raw, self.where, self.sep = kind, raw, where, sep

    def value(self, label: str) -> str | None:
        item = self.raw.get(label)
        return item[2] if item else None

    def error(self, label: str, what: str) -> ParseError:
        line_no, line, _ = self.raw[label]
        return ParseError(self.kind, line_no, line, f"'{label}{self.sep}' of {self.where} {what}")

    def as_int(self, label: str) -> int | None:
        item = self.raw.get(label)
        if item is None:
            return None
        n = parse_int(item[2])
        if n is None:
            raise self.error(label, "is not a number")
        return n

    def normalised(self, label: str, normalise, warnings: list[str], *, blank_is_missing: bool = False) -> str | None:
        """The field through ``normalise`` (state words); an unknown word is a warning, not an error."""
        raw = self.value(label)
        if raw is None or (blank_is_missing and not raw):
            return None
        word = normalise(raw)
        if word is None:
            warnings.append(f"{self.where}: unknown {label} '{raw}'")
        return word
