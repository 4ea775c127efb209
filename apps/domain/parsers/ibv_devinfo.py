"""Parser for ``ibv_devinfo`` and ``ibv_devinfo -v`` (rdma-core ``libibverbs/examples/devinfo.c``).

Commands::

    ibv_devinfo                 # every device: identity + per-port state, MTU, LIDs, link layer
    ibv_devinfo -v              # + device capabilities, per-port caps, width/speed, phys_state, GID table
    ibv_devinfo -d mlx5_0 [-i 1] [-v]   # one device / one port (same layout)

Layout (tabs as devinfo.c prints them; pasted copies have spaces or mixed indentation, so lines
are recognised by their keys, not their indentation)::

    hca_id: mlx5_0
            transport:                      InfiniBand (0)
            fw_ver:                         28.38.1002
            node_guid:                      48b0:2d03:00f4:07fb
            sys_image_guid:                 48b0:2d03:00f4:07fb
            vendor_id:                      0x02c9
            vendor_part_id:                 4129
            hw_ver:                         0x0
            board_id:                       NVD0000000033         (absent when sysfs has none, e.g. EFA)
            phys_port_cnt:                  1
            [-v: max_mr_size, max_qp, device_cap_flags + one flag name per line, odp caps, ...]
                    port:   1
                            state:                  PORT_ACTIVE (4)       PORT_DOWN/INIT/ARMED/ACTIVE
                            max_mtu:                4096 (5)
                            active_mtu:             4096 (5)
                            sm_lid:                 0                     decimal
                            port_lid:               0                     decimal
                            port_lmc:               0x00
                            link_layer:             Ethernet
                            [-v: port_cap_flags: 0x2651e848, active_width: 4X (2),
                                 active_speed: 25.0 Gbps (32), phys_state: LINK_UP (5),
                                 GID[  0]: fe80:0000:...  (newer rdma-core: "<gid>, RoCE v2")]

Result: :class:`apps.domain.parsers._ib.IbResult` with ``source`` ``"ibv_devinfo"``. Per CA:
``transport`` as printed, ``firmware_version`` (fw_ver), ``node_guid``/``system_image_guid`` canonical
``0x...``, ``vendor_id`` lowercase text, ``vendor_part_id`` int, ``hardware_version`` (hw_ver as printed),
``board_id``, ``num_ports`` (phys_port_cnt), and ``ca_type`` ``MT<vendor_part_id>`` for Mellanox/NVIDIA
vendors (``0x02c9``, ``0x15b3``; what ibstat's ``CA type:`` shows), else null. Per port:
``state`` (``PORT_ACTIVE (4)`` -> ``Active``) and with -v ``phys_state`` (``LINK_UP (5)`` -> ``LinkUp``)
normalised to ibstat's words, raw text kept; ``max_mtu``/``active_mtu`` bytes; ``sm_lid``,
``base_lid`` (port_lid), ``lmc``; ``link_layer``; with -v ``capability_mask`` (port_cap_flags),
``active_width``/``active_speed`` as printed and from them ``width`` (``4X``), ``speed_name`` (from the
speed code: 1 SDR, 2 DDR, 4 QDR, 8 FDR10, 16 FDR, 32 EDR, 64 HDR, 128 NDR, 256 XDR) and
``rate_gbps`` = lanes x lane speed (4X x 25.0 -> 100), plus ``gids`` and ``default_gid`` (GID 0) and
``port_guid`` (interface-id half of GID 0).

Variants: EFA (``transport: unspecified (4)``, zero GUIDs, no board_id); Azure SR-IOV VFs (zero
sys_image_guid); an RST/markdown indent on the first line; a stray markdown fence line ( ```` ``` ````)
or prompt line, skipped with a warning; ``ibv_devinfo | head`` cutting a port short (warning naming the
port with no fields); ``No IB devices found`` (empty ``cas``, with a warning).
"""

from __future__ import annotations

import re

from apps.domain.errors import ParseError
from apps.domain.parsers._ib import (
    SPEED_BY_CODE,
    SPEED_BY_LANE_GBPS,
    Ca,
    Gid,
    IbResult,
    Port,
    PortFields,
    canonical_guid,
    guid_from_gid,
    is_command_echo,
    normalise_phys_state,
    normalise_state,
    number,
    parse_int,
    port_guids_of,
)
from apps.domain.parsers.text import clean_lines

KIND = "ibv_devinfo"

_KV_RE = re.compile(r"^(\s*)([A-Za-z][\w .\-]*?):(?:\s+(.*?))?\s*$")
_GID_RE = re.compile(r"^\s*GID\[\s*(\d+)\]:\s*([0-9A-Fa-f:.]+)\s*(?:,\s*(.*?))?\s*$")
_FENCE_RE = re.compile(r"^\s*(```|~~~|\.\. code-block::).*$")
_NO_DEV_RE = re.compile(r"^\s*No IB devices found\s*$", re.I)
_WIDTH_RE = re.compile(r"^\s*(\d+)X\b")
_SPEED_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gbps(?:\s*\(\s*(\d+)\s*\))?")
_MELLANOX_VENDORS = {"0x02c9", "0x15b3"}

_CA_TEXT = {"transport": "transport", "fw_ver": "firmware_version", "hw_ver": "hardware_version",
            "board_id": "board_id"}
_PORT_KEYS = {"state", "max_mtu", "active_mtu", "sm_lid", "port_lid", "port_lmc", "link_layer",
              "port_cap_flags", "active_width", "active_speed", "phys_state"}


class _Port:
    __slots__ = ("number", "line_no", "raw", "gids")

    def __init__(self, number: int, line_no: int) -> None:
        self.number = number
        self.line_no = line_no
        self.raw: dict[str, tuple[int, str, str]] = {}
        self.gids: list[Gid] = []


class _Ca:
    __slots__ = ("name", "line_no", "fields", "ports")

    def __init__(self, name: str, line_no: int) -> None:
        self.name = name
        self.line_no = line_no
        self.fields: dict[str, object] = {}
        self.ports: list[Port] = []


def _finish_port(acc: _Port, ca: _Ca, warnings: list[str]) -> Port:
    raw = acc.raw
    where = f"port {acc.number} of '{ca.name}'"
    if not raw and not acc.gids:
        warnings.append(f"{where} shows no fields (output cut?)")

    fields = PortFields(KIND, raw, where)
    value, as_int = fields.value, fields.as_int

    state_raw, phys_raw = value("state"), value("phys_state")
    state = fields.normalised("state", normalise_state, warnings, blank_is_missing=True)
    phys = fields.normalised("phys_state", normalise_phys_state, warnings, blank_is_missing=True)
    width_raw, speed_raw = value("active_width"), value("active_speed")
    width = speed_name = rate = None
    lanes = None
    if width_raw:
        m = _WIDTH_RE.match(width_raw)
        if m:
            lanes = int(m.group(1))
            width = f"{lanes}X"
        else:
            warnings.append(f"{where}: unreadable active_width '{width_raw}'")
    if speed_raw:
        m = _SPEED_RE.match(speed_raw)
        if m:
            lane = float(m.group(1))
            code = int(m.group(2)) if m.group(2) else None
            speed_name = SPEED_BY_CODE.get(code) if code is not None else None
            if speed_name is None:
                speed_name = SPEED_BY_LANE_GBPS.get(lane)
            if lanes is not None:
                rate = number(round(lanes * lane, 3))
        else:
            warnings.append(f"{where}: unreadable active_speed '{speed_raw}'")
    mask = value("port_cap_flags")
    if mask is not None:
        if parse_int(mask) is None:
            item = raw["port_cap_flags"]
            raise ParseError(KIND, item[0], item[1], f"'port_cap_flags:' of {where} is not a hex number")
        mask = mask.lower()
    gid0 = next((g.gid for g in acc.gids if g.index == 0), None)
    return Port(
        number=acc.number,
        state=state,
        state_raw=state_raw,
        phys_state=phys,
        phys_state_raw=phys_raw,
        rate_gbps=rate,
        width=width,
        speed_name=speed_name,
        link_layer=value("link_layer"),
        base_lid=as_int("port_lid"),
        lmc=as_int("port_lmc"),
        sm_lid=as_int("sm_lid"),
        capability_mask=mask,
        port_guid=guid_from_gid(gid0) if gid0 else None,
        default_gid=gid0,
        max_mtu=as_int("max_mtu"),
        active_mtu=as_int("active_mtu"),
        active_width=width_raw,
        active_speed=speed_raw,
        gids=tuple(acc.gids),
    )


def _finish_ca(acc: _Ca, warnings: list[str]) -> Ca:
    fields = dict(acc.fields)
    vendor, part = fields.get("vendor_id"), fields.get("vendor_part_id")
    if vendor in _MELLANOX_VENDORS and isinstance(part, int):
        fields["ca_type"] = f"MT{part}"
    num = fields.get("num_ports")
    if isinstance(num, int) and len(acc.ports) < num:
        # "ibv_devinfo -i N" prints one port on purpose; fewer ports than phys_port_cnt is noted only.
        warnings.append(f"'{acc.name}' has {num} ports but {len(acc.ports)} 'port:' block(s) were printed")
    return Ca(name=acc.name, ports=tuple(acc.ports), **fields)  # type: ignore[arg-type]


def parse(text: str) -> IbResult:
    """Parse ``ibv_devinfo [-v]`` output into CAs and ports."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    warnings: list[str] = []
    cas: list[Ca] = []
    ca: _Ca | None = None
    port: _Port | None = None
    no_devices = False
    seen_names: set[str] = set()

    def close_port() -> None:
        nonlocal port
        if port is not None and ca is not None:
            ca.ports.append(_finish_port(port, ca, warnings))
        port = None

    def close_ca() -> None:
        nonlocal ca
        close_port()
        if ca is not None:
            cas.append(_finish_ca(ca, warnings))
        ca = None

    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        if _FENCE_RE.match(line):
            warnings.append(f"line {no}: skipped markup line {stripped!r}")
            continue
        if _NO_DEV_RE.match(line):
            no_devices = True
            warnings.append(f"line {no}: ibv_devinfo says: {stripped}")
            continue
        gm = _GID_RE.match(line)
        if gm:
            if port is None:
                raise ParseError(KIND, no, line, "GID line outside a 'port:' block")
            port.gids.append(Gid(index=int(gm.group(1)), gid=gm.group(2).lower(), type=gm.group(3) or None))
            continue
        m = _KV_RE.match(line)
        if m is None:
            if ca is not None and line[:1].isspace():
                continue  # -v flag names and "... not supported" notes under a device
            if ca is None and is_command_echo(line):
                warnings.append(f"line {no}: skipped command line {stripped!r}")
                continue
            raise ParseError(KIND, no, line, "unrecognised line; ibv_devinfo output starts with 'hca_id:'"
                             if ca is None else f"unrecognised line inside device '{ca.name}'")
        key, value = m.group(2), (m.group(3) or "")
        if key == "hca_id":
            close_ca()
            if not value:
                raise ParseError(KIND, no, line, "'hca_id:' without a device name")
            if value in seen_names:
                warnings.append(f"line {no}: device '{value}' printed twice")
            seen_names.add(value)
            ca = _Ca(value, no)
            continue
        if ca is None:
            if is_command_echo(line):
                warnings.append(f"line {no}: skipped command line {stripped!r}")
                continue
            raise ParseError(KIND, no, line, f"'{key}:' before any 'hca_id:' line")
        if key == "port":
            n = parse_int(value)
            if n is None:
                raise ParseError(KIND, no, line, f"'port:' of device '{ca.name}' is not a number")
            close_port()
            port = _Port(n, no)
            continue
        if port is not None:
            if key in _PORT_KEYS:
                port.raw[key] = (no, line, value)
            continue  # other -v port attributes (max_msg_sz, pkey_tbl_len, ...) are not kept
        if key in _CA_TEXT:
            ca.fields[_CA_TEXT[key]] = value
        elif key in ("node_guid", "sys_image_guid"):
            guid = canonical_guid(value)
            if guid is None:
                raise ParseError(KIND, no, line, f"'{key}:' of device '{ca.name}' is not a GUID")
            ca.fields["node_guid" if key == "node_guid" else "system_image_guid"] = guid
        elif key == "vendor_id":
            if parse_int(value) is None:
                raise ParseError(KIND, no, line, f"'vendor_id:' of device '{ca.name}' is not a number")
            ca.fields["vendor_id"] = value.lower()
        elif key in ("vendor_part_id", "phys_port_cnt"):
            n = parse_int(value)
            if n is None:
                raise ParseError(KIND, no, line, f"'{key}:' of device '{ca.name}' is not a number")
            ca.fields["vendor_part_id" if key == "vendor_part_id" else "num_ports"] = n
        # other device attributes (-v capabilities) are not kept
    close_ca()
    if not cas and not no_devices:
        raise ParseError(KIND, 0, "", "no 'hca_id:' line found: this is not ibv_devinfo output")
    guids = port_guids_of(cas)
    return IbResult(source="ibv_devinfo", cas=tuple(cas), port_guids=guids, warnings=tuple(warnings))


_DETECT_RE = re.compile(r"^\s*hca_id:\s+\S+", re.M)


def detect(text: str) -> int:
    """Score ibv_devinfo output by its ``hca_id:`` lines and port attribute keys."""
    head = text[:4000]
    if not _DETECT_RE.search(head):
        return 30 if "No IB devices found" in head[:200] else 0
    score = 70
    if "phys_port_cnt:" in head or "link_layer:" in head:
        score += 15
    if "PORT_" in head or "vendor_part_id:" in head:
        score += 10
    return score
