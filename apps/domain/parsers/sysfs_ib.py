"""Parser for the topoweb node agent's listing of ``/sys/class/infiniband`` (section ``sysfs_ib``).

This docstring is the contract between the agent (which writes the listing) and this parser.
The listing carries what ``ibstat`` shows (domain.md 2.3, table "ibstat field <-> sysfs file")
plus what ibstat cannot show: the CA's PCI address and ancestry (domain.md 4.2 joins 2 and 5),
its netdevs (join 3), the rate string with width (``400 Gb/sec (4X NDR)``) and the GID table
with RoCE types and netdevs (rule F05). It needs no root and no infiniband-diags.

Format ``topoweb sysfs_ib v1``
==============================

Plain text, UTF-8, lines ended by ``\\n``. Each line is ``KEY SP VALUE``: the key is one or more
space-separated words fixed below, and the VALUE is the rest of the line (it may contain spaces)
with trailing whitespace removed. VALUE is the *first line* of the sysfs file, stripped, unchanged.

* Line 1 is the header ``# topoweb sysfs_ib v1``. Other lines starting with ``#`` and blank
  lines are ignored (the agent may write ``# error <path>: <message>`` notes).
* ``ca NAME`` opens the block of one CA (``NAME`` = the directory name in
  ``/sys/class/infiniband/``, e.g. ``mlx5_0``); every line up to the next ``ca`` or ``end`` belongs
  to it. Each CA appears once.
* CA lines (each at most once except ``netdev``; a line whose file is missing/unreadable/empty
  is simply left out):

  ==================  ===========================================================  =====================
  line                source                                                       example
  ==================  ===========================================================  =====================
  ``device PATH``     ``readlink -f /sys/class/infiniband/NAME/device``             ``/sys/devices/pci0000:00/0000:00:01.1/0000:02:00.0/0000:03:00.0``
  ``node_guid V``     ``NAME/node_guid``                                           ``946d:ae03:00cd:e72c``
  ``sys_image_guid V``  ``NAME/sys_image_guid``                                    ``946d:ae03:00cd:e72c``
  ``fw_ver V``        ``NAME/fw_ver``                                              ``28.39.1002``
  ``hw_rev V``        ``NAME/hw_rev``                                              ``0``
  ``hca_type V``      ``NAME/hca_type``                                            ``MT4129``
  ``board_id V``      ``NAME/board_id``                                            ``MT_0000000838``
  ``node_type V``     ``NAME/node_type``                                           ``1: CA``
  ``node_desc V``     ``NAME/node_desc``                                           ``node12 mlx5_0``
  ``netdev IF``       one line per entry of ``ls NAME/device/net/``               ``ibp3s0``
  ==================  ===========================================================  =====================

* Port lines, ``port N ATTR VALUE`` for ``N`` in ``ls NAME/ports/`` (numeric order) and ATTR each of
  ``state`` (``4: ACTIVE``), ``phys_state`` (``5: LinkUp``), ``rate`` (``400 Gb/sec (4X NDR)``),
  ``link_layer`` (``InfiniBand``/``Ethernet``), ``lid`` (``0x4b``), ``lid_mask_count`` (``0``),
  ``sm_lid`` (``0x14e``), ``sm_sl`` (``0``), ``cap_mask`` (``0xa751e848``): the file
  ``NAME/ports/N/ATTR``.
* GID lines, for each index ``I`` in ``ls NAME/ports/N/gids/`` whose GID is not all zeros:
  ``port N gid I GID`` (``NAME/ports/N/gids/I``), then, when readable, ``port N gid_type I TYPE``
  (``NAME/ports/N/gid_attrs/types/I``: ``IB/RoCE v1`` or ``RoCE v2``) and ``port N gid_ndev I IF``
  (``NAME/ports/N/gid_attrs/ndevs/I``; RoCE only). GID 0 gives the port GUID (its low 64 bits).
* ``end`` is the last line. Without it the listing is read but flagged as possibly cut short.

Example (one IB port, one RoCE port)::

    # topoweb sysfs_ib v1
    ca mlx5_0
    device /sys/devices/pci0000:00/0000:00:01.1/0000:02:00.0/0000:03:00.0
    node_guid 946d:ae03:00cd:e72c
    sys_image_guid 946d:ae03:00cd:e72c
    fw_ver 28.39.1002
    hw_rev 0
    hca_type MT4129
    board_id MT_0000000838
    node_type 1: CA
    netdev ibp3s0
    port 1 state 4: ACTIVE
    port 1 phys_state 5: LinkUp
    port 1 rate 400 Gb/sec (4X NDR)
    port 1 link_layer InfiniBand
    port 1 lid 0x4b
    port 1 lid_mask_count 0
    port 1 sm_lid 0x14e
    port 1 sm_sl 0
    port 1 cap_mask 0xa751e848
    port 1 gid 0 fe80:0000:0000:0000:946d:ae03:00cd:e72c
    port 1 gid_type 0 IB/RoCE v1
    ca mlx5_8
    device /sys/devices/pci0000:a0/0000:a0:03.1/0000:a3:00.0
    ...
    port 1 link_layer Ethernet
    port 1 gid 3 0000:0000:0000:0000:0000:ffff:0a00:0101
    port 1 gid_type 3 RoCE v2
    port 1 gid_ndev 3 eth2
    end

Reference producer (Python 3.6+, stdlib only; this is what the agent must be equivalent to)::

    import os

    def first_line(path):
        try:
            with open(path) as f:
                return f.readline().strip()
        except (OSError, UnicodeDecodeError) as e:   # EINVAL on unused gid_attrs entries, etc.
            return None

    def numeric(names):
        return sorted(names, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n))

    CA_FILES = ("node_guid", "sys_image_guid", "fw_ver", "hw_rev", "hca_type", "board_id",
                "node_type", "node_desc")
    PORT_FILES = ("state", "phys_state", "rate", "link_layer", "lid", "lid_mask_count",
                  "sm_lid", "sm_sl", "cap_mask")
    ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"

    def sysfs_ib(root="/sys/class/infiniband"):
        out = ["# topoweb sysfs_ib v1"]
        names = sorted(os.listdir(root)) if os.path.isdir(root) else []
        for ca in names:
            d = os.path.join(root, ca)
            out.append("ca " + ca)
            if os.path.exists(os.path.join(d, "device")):
                out.append("device " + os.path.realpath(os.path.join(d, "device")))
            for name in CA_FILES:
                v = first_line(os.path.join(d, name))
                if v:
                    out.append("%s %s" % (name, v))
            net = os.path.join(d, "device", "net")
            for ifname in (sorted(os.listdir(net)) if os.path.isdir(net) else []):
                out.append("netdev " + ifname)
            ports = os.path.join(d, "ports")
            for p in numeric(os.listdir(ports) if os.path.isdir(ports) else []):
                pd = os.path.join(ports, p)
                for name in PORT_FILES:
                    v = first_line(os.path.join(pd, name))
                    if v:
                        out.append("port %s %s %s" % (p, name, v))
                gids = os.path.join(pd, "gids")
                for i in numeric(os.listdir(gids) if os.path.isdir(gids) else []):
                    g = first_line(os.path.join(gids, i))
                    if not g or g == ZERO_GID:
                        continue
                    out.append("port %s gid %s %s" % (p, i, g))
                    t = first_line(os.path.join(pd, "gid_attrs", "types", i))
                    if t:
                        out.append("port %s gid_type %s %s" % (p, i, t))
                    n = first_line(os.path.join(pd, "gid_attrs", "ndevs", i))
                    if n:
                        out.append("port %s gid_ndev %s %s" % (p, i, n))
        out.append("end")
        return "\\n".join(out) + "\\n"

The same, line by line, in shell (``for c in /sys/class/infiniband/*``)::

    echo "# topoweb sysfs_ib v1"
    for c in /sys/class/infiniband/*; do
      [ -e "$c" ] || continue
      echo "ca ${c##*/}"
      [ -e "$c/device" ] && echo "device $(readlink -f "$c/device")"
      for f in node_guid sys_image_guid fw_ver hw_rev hca_type board_id node_type node_desc; do
        v=$(head -n1 "$c/$f" 2>/dev/null) && [ -n "$v" ] && echo "$f $v"
      done
      for n in "$c"/device/net/*; do [ -e "$n" ] && echo "netdev ${n##*/}"; done
      for p in $(ls "$c/ports" | sort -n); do
        for f in state phys_state rate link_layer lid lid_mask_count sm_lid sm_sl cap_mask; do
          v=$(head -n1 "$c/ports/$p/$f" 2>/dev/null) && [ -n "$v" ] && echo "port $p $f $v"
        done
        for i in $(ls "$c/ports/$p/gids" | sort -n); do
          g=$(head -n1 "$c/ports/$p/gids/$i" 2>/dev/null)
          [ -z "$g" ] || [ "$g" = 0000:0000:0000:0000:0000:0000:0000:0000 ] && continue
          echo "port $p gid $i $g"
          t=$(head -n1 "$c/ports/$p/gid_attrs/types/$i" 2>/dev/null) && [ -n "$t" ] && echo "port $p gid_type $i $t"
          n=$(head -n1 "$c/ports/$p/gid_attrs/ndevs/$i" 2>/dev/null) && [ -n "$n" ] && echo "port $p gid_ndev $i $n"
        done
      done
    done
    echo end

Result
======

:class:`apps.domain.parsers._ib.IbResult` with ``source`` ``"sysfs_ib"`` (same records as ibstat,
ibstatus and ibv_devinfo; field list in ``_ib``). Per CA: ``ca_type`` (hca_type),
``firmware_version`` (fw_ver), ``hardware_version`` (hw_rev), ``node_guid``/``system_image_guid``
(canonical ``0x...``), ``board_id``, ``num_ports`` (number of port numbers listed), ``device_path``,
``bdf`` (canonical, the last PCI address in ``device_path``; null for a CA without a PCI device,
e.g. soft-RoCE ``rxe0``), ``pci_path`` (every PCI address in ``device_path`` from the root port down to
the CA itself), ``netdevs``. Per port: ``state``/``phys_state`` normalised (``4: ACTIVE`` -> ``Active``)
with raw text kept, ``rate_gbps``/``width``/``speed_name``/``rate_raw`` from the rate string,
``link_layer``, ``base_lid`` (lid, hex), ``lmc`` (lid_mask_count), ``sm_lid`` (hex),
``capability_mask``, ``gids`` (index, gid, type, ndev), ``default_gid`` (GID 0) and ``port_guid``.

Errors: a line before the first ``ca`` that is not a comment, a malformed ``port`` line (number or
GID index not an integer, attribute missing), a CA listed twice, anything after ``end``. Unknown
keys (a newer agent) are skipped with a warning; so is a header naming another version.
"""

from __future__ import annotations

import re

from apps.domain.errors import ParseError
from apps.domain.parsers._ib import (
    Ca,
    Gid,
    IbResult,
    Port,
    PortFields,
    canonical_guid,
    guid_from_gid,
    normalise_phys_state,
    normalise_state,
    parse_int,
    parse_rate,
    port_guids_of,
)
from apps.domain.parsers.text import clean_lines
from apps.domain.pci import canonical_bdf

KIND = "sysfs_ib"
HEADER = "# topoweb sysfs_ib v1"

_HEADER_RE = re.compile(r"^#\s*topoweb\s+sysfs_ib\s+(v\S+)\s*$")
_FULL_BDF_RE = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_CA_TEXT = {"fw_ver": "firmware_version", "hw_rev": "hardware_version", "hca_type": "ca_type",
            "board_id": "board_id"}
_CA_IGNORED = {"node_type", "node_desc"}  # read cleanly, not part of the shared records
_PORT_ATTRS = {"state", "phys_state", "rate", "link_layer", "lid", "lid_mask_count", "sm_lid", "sm_sl", "cap_mask"}
_GID_ATTRS = {"gid", "gid_type", "gid_ndev"}
_HEX_RE = re.compile(r"^(?:0[xX])?[0-9a-fA-F]{1,8}$")
_DETECT_CA_RE = re.compile(r"^ca \S+\s*$", re.M)


class _Port:
    __slots__ = ("raw", "gids", "types", "ndevs")

    def __init__(self) -> None:
        self.raw: dict[str, tuple[int, str, str]] = {}
        self.gids: dict[int, str] = {}
        self.types: dict[int, tuple[int, str]] = {}
        self.ndevs: dict[int, tuple[int, str]] = {}


class _Ca:
    __slots__ = ("name", "fields", "netdevs", "ports")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fields: dict[str, object] = {}
        self.netdevs: list[str] = []
        self.ports: dict[int, _Port] = {}


def _pci_path(path: str) -> tuple[str, ...]:
    return tuple(canonical_bdf(part) for part in path.split("/") if _FULL_BDF_RE.match(part))


def _finish_port(ca: str, number: int, acc: _Port, warnings: list[str]) -> Port:
    raw = acc.raw
    where = f"port {number} of CA '{ca}'"

    fields = PortFields(KIND, raw, where, sep="")
    value, as_int = fields.value, fields.as_int

    state_raw, phys_raw, rate_raw = value("state"), value("phys_state"), value("rate")
    state = fields.normalised("state", normalise_state, warnings, blank_is_missing=True)
    phys = fields.normalised("phys_state", normalise_phys_state, warnings, blank_is_missing=True)
    rate = width = speed = None
    if rate_raw:
        rate, width, speed = parse_rate(rate_raw)
        if rate is None:
            item = raw["rate"]
            raise ParseError(KIND, item[0], item[1], f"'rate' of {where} is not like '400 Gb/sec (4X NDR)'")
    mask = value("cap_mask")
    if mask is not None:
        if parse_int(mask) is None:
            item = raw["cap_mask"]
            raise ParseError(KIND, item[0], item[1], f"'cap_mask' of {where} is not a hex number")
        mask = mask.lower()
    # sysfs prints lid/sm_lid in hex ("0x4b"); a bare number there is hex too.
    lids = {}
    for key in ("lid", "sm_lid"):
        item = raw.get(key)
        if item is None:
            lids[key] = None
            continue
        if not _HEX_RE.match(item[2]):
            raise ParseError(KIND, item[0], item[1], f"'{key}' of {where} is not a hex number")
        lids[key] = int(item[2], 16)
    for index in sorted(set(acc.types) | set(acc.ndevs)):
        if index not in acc.gids:
            warnings.append(f"{where}: gid_type/gid_ndev for GID {index} without a 'gid {index}' line; ignored")
    gids = tuple(
        Gid(index=i, gid=acc.gids[i], type=acc.types.get(i, (0, None))[1], ndev=acc.ndevs.get(i, (0, None))[1])
        for i in sorted(acc.gids)
    )
    gid0 = acc.gids.get(0)
    if not raw:
        warnings.append(f"{where} lists no attributes (listing cut?)")
    return Port(
        number=number,
        state=state,
        state_raw=state_raw,
        phys_state=phys,
        phys_state_raw=phys_raw,
        rate_gbps=rate,
        rate_raw=rate_raw,
        width=width,
        speed_name=speed,
        link_layer=value("link_layer"),
        base_lid=lids["lid"],
        lmc=as_int("lid_mask_count"),
        sm_lid=lids["sm_lid"],
        capability_mask=mask,
        port_guid=guid_from_gid(gid0) if gid0 else None,
        default_gid=gid0,
        gids=gids,
    )


def _finish_ca(acc: _Ca, warnings: list[str]) -> Ca:
    fields = dict(acc.fields)
    path = fields.get("device_path")
    if isinstance(path, str):
        pci = _pci_path(path)
        fields["pci_path"] = pci
        fields["bdf"] = pci[-1] if pci else None
        if not pci:
            warnings.append(f"CA '{acc.name}': device path {path!r} holds no PCI address")
    ports = tuple(_finish_port(acc.name, n, p, warnings) for n, p in sorted(acc.ports.items()))
    return Ca(name=acc.name, num_ports=len(ports), netdevs=tuple(acc.netdevs), ports=ports, **fields)


def parse(text: str) -> IbResult:
    """Parse a ``topoweb sysfs_ib v1`` listing into CAs, ports, PCI addresses and netdevs."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    warnings: list[str] = []
    cas: list[Ca] = []
    names: set[str] = set()
    ca: _Ca | None = None
    header_seen = False
    ended_at: int | None = None

    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            m = _HEADER_RE.match(stripped)
            if m and not header_seen and not cas and ca is None:
                header_seen = True
                if m.group(1) != "v1":
                    warnings.append(f"line {no}: listing format {m.group(1)}; read as v1")
            continue
        if ended_at is not None:
            raise ParseError(KIND, no, line, f"text after the 'end' line (line {ended_at})")
        key, _, rest = stripped.partition(" ")
        rest = rest.strip()
        if key == "end":
            ended_at = no
            continue
        if key == "ca":
            if not rest or " " in rest:
                raise ParseError(KIND, no, line, "expected 'ca <name>' with one CA name")
            if rest in names:
                raise ParseError(KIND, no, line, f"CA '{rest}' listed twice")
            if ca is not None:
                cas.append(_finish_ca(ca, warnings))
            names.add(rest)
            ca = _Ca(rest)
            continue
        if ca is None:
            raise ParseError(KIND, no, line, f"expected '{HEADER}' then 'ca <name>' before any other line")
        if key == "port":
            parts = rest.split(" ", 2)
            if len(parts) < 3 or not parts[0].isascii() or not parts[0].isdigit():
                raise ParseError(KIND, no, line, f"expected 'port <number> <attribute> <value>' in CA '{ca.name}'")
            number, attr, value = int(parts[0]), parts[1], parts[2].strip()
            port = ca.ports.setdefault(number, _Port())
            if attr in _GID_ATTRS:
                idx_text, _, gid_value = value.partition(" ")
                gid_value = gid_value.strip()
                if not idx_text.isascii() or not idx_text.isdigit() or not gid_value:
                    raise ParseError(KIND, no, line, f"expected 'port {number} {attr} <index> <value>'")
                index = int(idx_text)
                if attr == "gid":
                    port.gids[index] = gid_value.lower()
                elif attr == "gid_type":
                    port.types[index] = (no, gid_value)
                else:
                    port.ndevs[index] = (no, gid_value)
                continue
            if attr not in _PORT_ATTRS:
                warnings.append(f"line {no}: unknown port attribute '{attr}' skipped")
                continue
            if attr in port.raw:
                warnings.append(f"line {no}: 'port {number} {attr}' repeated in CA '{ca.name}'; last kept")
            port.raw[attr] = (no, line, value)
            continue
        if not rest:
            raise ParseError(KIND, no, line, f"'{key}' without a value in CA '{ca.name}'")
        if key == "netdev":
            ca.netdevs.append(rest)
        elif key == "device":
            ca.fields["device_path"] = rest
        elif key in ("node_guid", "sys_image_guid"):
            guid = canonical_guid(rest)
            if guid is None:
                raise ParseError(KIND, no, line, f"'{key}' of CA '{ca.name}' is not a GUID")
            ca.fields["node_guid" if key == "node_guid" else "system_image_guid"] = guid
        elif key in _CA_TEXT:
            ca.fields[_CA_TEXT[key]] = rest
        elif key not in _CA_IGNORED:
            warnings.append(f"line {no}: unknown key '{key}' skipped")
    if ca is not None:
        cas.append(_finish_ca(ca, warnings))
    if not header_seen:
        warnings.append(f"no '{HEADER}' header line")
    if ended_at is None:
        warnings.append("no closing 'end' line: the listing may be cut short")
    guids = port_guids_of(cas)
    return IbResult(source="sysfs_ib", cas=tuple(cas), port_guids=guids, warnings=tuple(warnings))


_DETECT_PORT_RE = re.compile(r"^port \d+ (state|phys_state|rate|link_layer) ", re.M)


def detect(text: str) -> int:
    """Score the agent's listing: its header line, or ``ca`` + ``port N state`` lines."""
    head = text[:4000]
    if _HEADER_RE.match(head.lstrip("\ufeff").split("\n", 1)[0].strip()):
        return 100
    if _DETECT_CA_RE.search(head) and _DETECT_PORT_RE.search(head):
        return 70
    return 0
