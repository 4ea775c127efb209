"""Parsers for lldpd's neighbour listings: which switch and switch port each Ethernet/RoCE NIC is cabled to.

Kinds (both give the one result below):

* ``lldpctl_json`` (``parse_json``): ``lldpctl -f json`` / ``lldpcli -f json show neighbors [details]``,
  and the stable ``-f json0`` form. In ``json`` one neighbour is an object keyed by interface name
  and several are a list of such objects; a chassis with a SysName is keyed by it; single values
  are strings and repeated ones lists. In ``json0`` every value is a list and names are fields::

      {"lldp": {"interface": {"eth0": {"via": "LLDP", "rid": "1", "age": "0 day, 00:00:21",
          "chassis": {"leaf1": {"id": {"type": "mac", "value": "0c:42:a1:00:00:01"}, "descr": "...",
                                "mgmt-ip": "10.0.0.1", "capability": [{"type": "Bridge", "enabled": true}]}},
          "port": {"id": {"type": "ifname", "value": "Ethernet8"}, "descr": "Ethernet8", "ttl": "120"}}}}}
      {"lldp": [{"interface": [{"name": "eth0", "via": "LLDP", "chassis": [{"id": [{"type": "mac", ...}],
          "name": [{"value": "leaf1"}], ...}], "port": [{"id": [...], "descr": [{"value": "Ethernet8"}]}]}]}]}

* ``lldpcli_neighbors`` (``parse_text``): ``lldpcli show neighbors [details]`` / ``lldpctl``::

      -------------------------------------------------------------------------------
      LLDP neighbors:
      -------------------------------------------------------------------------------
      Interface:    eth0, via: LLDP, RID: 1, Time: 0 day, 00:00:21
        Chassis:
          ChassisID:    mac 0c:42:a1:00:00:01
          SysName:      leaf1
          SysDescr:     SONiC Software Version: SONiC.202305
          MgmtIP:       10.0.0.1
          Capability:   Bridge, on
        Port:
          PortID:       ifname Ethernet8
          PortDescr:    Ethernet8
          TTL:          120

Formats modelled on lldpd's own documented outputs (``tests/integration/test_lldpcli.py`` of
lldpd: text, json and json0 of ``show neighbors details``).

Result :class:`LldpResult`: ``source`` (``"lldpctl -f json"``, ``"lldpctl -f json0"``, ``"lldpcli show
neighbors"``), ``neighbors`` (tuple of :class:`LldpNeighbor`, in the order printed), ``warnings``.

:class:`LldpNeighbor`:
    ``interface``        the local interface (``ens1f0np0``, ``eth0``): join it to ``ibdev2netdev``.
    ``via``              ``LLDP`` (or ``CDPv2``, ``EDP``...); ``rid`` lldpd's remote index (int); ``age`` as printed.
    ``switch``           the neighbour's SysName; null when it sends none.
    ``switch_descr``     SysDescr (wrapped lines joined).
    ``chassis_id``, ``chassis_id_type``   ``0c:42:a1:00:00:01``, ``mac`` (or ``local``, ``ip``, ``ifname``).
    ``mgmt_ips``         tuple of management addresses.
    ``capabilities``     tuple of the enabled capabilities (``Bridge``, ``Router``).
    ``port_id``, ``port_id_type``         ``Ethernet8``, ``ifname`` (or ``mac``, ``local``, ``ifalias``).
    ``port_descr``       PortDescr.
    ``switch_port``      the switch port's name: ``port_id`` when it is a name (``ifname``, ``ifalias``,
                         ``local``), else ``port_descr``, else ``port_id``.
    ``ttl``              seconds (int).

Unreadable JSON, or JSON without ``lldp``, is a ``ParseError``; ``{"lldp": {}}`` (no neighbour
heard) is an empty result with a warning.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from apps.domain.errors import ParseError
from apps.domain.parsers.fabric_common import is_fabric_echo
from apps.domain.parsers.text import clean_lines

__all__ = ["LldpNeighbor", "LldpResult", "parse_json", "parse_text", "detect_json", "detect_text"]

_NAMED_PORT_IDS = {"ifname", "ifalias", "local"}


@dataclass(frozen=True)
class LldpNeighbor:
    interface: str
    via: str | None = None
    rid: int | None = None
    age: str | None = None
    switch: str | None = None
    switch_descr: str | None = None
    chassis_id: str | None = None
    chassis_id_type: str | None = None
    mgmt_ips: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()
    port_id: str | None = None
    port_id_type: str | None = None
    port_descr: str | None = None
    switch_port: str | None = None
    ttl: int | None = None


@dataclass(frozen=True)
class LldpResult:
    source: str
    neighbors: tuple[LldpNeighbor, ...]
    warnings: tuple[str, ...]


def _switch_port(port_id: str | None, id_type: str | None, descr: str | None) -> str | None:
    if port_id and id_type in _NAMED_PORT_IDS:
        return port_id
    return descr or port_id


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


# --- JSON -----------------------------------------------------------------------------------------


def _first(value: Any) -> Any:
    """json0 wraps every value in a list: the first item (or the value itself)."""
    if isinstance(value, list):
        return value[0] if value else None
    return value


def _text(value: Any) -> str | None:
    """A scalar from ``"x"``, ``{"value": "x"}``, ``[{"value": "x"}]``."""
    value = _first(value)
    if isinstance(value, dict):
        value = value.get("value")
    return None if value is None else str(value)


def _all_texts(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    return tuple(t for t in (_text(v) for v in items if v is not None) if t is not None)


def _id(value: Any) -> tuple[str | None, str | None]:
    value = _first(value)
    if isinstance(value, dict):
        return _text(value.get("value")), _text(value.get("type"))
    return _text(value), None


def _capabilities(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value] if value else []
    out = []
    for item in items:
        if isinstance(item, dict) and str(item.get("enabled")).lower() in ("true", "on", "yes"):
            out.append(str(item.get("type")))
    return tuple(out)


def _chassis(value: Any) -> tuple[str | None, dict]:
    """(SysName, chassis fields) of json (keyed by SysName when there is one) or json0."""
    value = _first(value) or {}
    if not isinstance(value, dict):
        return None, {}
    if "id" in value or "name" in value or not value:
        return _text(value.get("name")), value
    name, body = next(iter(value.items()))
    return name, body if isinstance(body, dict) else {}


def _interfaces(lldp: Any) -> list[tuple[str, dict]]:
    """(name, body) of every interface in json (dict, or list of one-key dicts) or json0 (list with name)."""
    lldp = _first(lldp) or {}
    if not isinstance(lldp, dict):
        return []
    raw = lldp.get("interface")
    items = raw if isinstance(raw, list) else [raw] if raw else []
    out: list[tuple[str, dict]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        if "name" in item and not isinstance(item["name"], dict):
            out.append((str(_text(item["name"])), item))
        else:
            out.extend((str(k), v) for k, v in item.items() if isinstance(v, dict))
    return out


def _neighbor_from_json(name: str, body: dict) -> LldpNeighbor:
    switch, chassis = _chassis(body.get("chassis"))
    chassis_id, chassis_type = _id(chassis.get("id"))
    port = _first(body.get("port")) or {}
    port_id, port_type = _id(port.get("id"))
    port_descr = _text(port.get("descr"))
    ttl = port.get("ttl", body.get("ttl"))
    if isinstance(_first(ttl), dict) and "ttl" in _first(ttl):
        ttl = _first(ttl)["ttl"]
    return LldpNeighbor(
        interface=name, via=_text(body.get("via")), rid=_int(_text(body.get("rid"))), age=_text(body.get("age")),
        switch=switch, switch_descr=_text(chassis.get("descr")), chassis_id=chassis_id, chassis_id_type=chassis_type,
        mgmt_ips=_all_texts(chassis.get("mgmt-ip")) if chassis.get("mgmt-ip") is not None else (),
        capabilities=_capabilities(chassis.get("capability")), port_id=port_id, port_id_type=port_type,
        port_descr=port_descr, switch_port=_switch_port(port_id, port_type, port_descr), ttl=_int(_text(ttl)),
    )


def parse_json(text: str) -> LldpResult:
    """Parse ``lldpctl -f json`` / ``-f json0`` neighbour output."""
    kind = "lldpctl_json"
    body = text.lstrip("\ufeff").strip()
    if not body:
        raise ParseError(kind, 0, "", "the text is empty")
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        lines = clean_lines(text)
        line = lines[exc.lineno - 1] if 0 < exc.lineno <= len(lines) else ""
        raise ParseError(kind, exc.lineno, line, f"not JSON: {exc.msg}") from None
    if not isinstance(data, dict) or "lldp" not in data:
        raise ParseError(kind, 1, clean_lines(text)[0], "JSON without an 'lldp' object: not lldpctl output")
    json0 = isinstance(data["lldp"], list)
    neighbors = tuple(_neighbor_from_json(name, item) for name, item in _interfaces(data["lldp"]))
    warnings = () if neighbors else ("no LLDP neighbour listed (lldpd heard none, or LLDP is off on the switch)",)
    return LldpResult(source="lldpctl -f json0" if json0 else "lldpctl -f json", neighbors=neighbors, warnings=warnings)


# --- text ------------------------------------------------------------------------------------------

_IFACE_RE = re.compile(r"^Interface:\s+([^,\s]+),\s*via:\s*([^,\s]+)(?:,\s*RID:\s*(\d+))?(?:,\s*Time:\s*(.*?))?\s*$")
_KV_RE = re.compile(r"^(\s+)([A-Za-z][A-Za-z0-9 ]*?):\s*(.*?)\s*$")
_TEXT_KEYS = {"ChassisID", "SysName", "SysDescr", "MgmtIP", "Capability", "PortID", "PortDescr", "TTL"}


def _neighbor_from_text(iface: re.Match, fields: dict[str, list[str]]) -> LldpNeighbor:
    def one(key: str) -> str | None:
        values = fields.get(key)
        return values[0] if values else None

    def typed(key: str) -> tuple[str | None, str | None]:
        raw = one(key)
        if raw is None:
            return None, None
        kind, _, value = raw.partition(" ")
        return (value.strip(), kind) if value.strip() else (kind, None)

    chassis_id, chassis_type = typed("ChassisID")
    port_id, port_type = typed("PortID")
    caps = tuple(c.split(",")[0].strip() for c in fields.get("Capability", []) if c.rstrip().endswith("on"))
    return LldpNeighbor(
        interface=iface.group(1), via=iface.group(2), rid=_int(iface.group(3)), age=iface.group(4),
        switch=one("SysName"), switch_descr=one("SysDescr"), chassis_id=chassis_id, chassis_id_type=chassis_type,
        mgmt_ips=tuple(fields.get("MgmtIP", [])), capabilities=caps, port_id=port_id, port_id_type=port_type,
        port_descr=one("PortDescr"), switch_port=_switch_port(port_id, port_type, one("PortDescr")),
        ttl=_int(one("TTL")),
    )


def parse_text(text: str) -> LldpResult:
    """Parse ``lldpcli show neighbors [details|summary]`` (or plain ``lldpctl``) output."""
    kind = "lldpcli_neighbors"
    lines = clean_lines(text)
    warnings: list[str] = []
    neighbors: list[LldpNeighbor] = []
    iface: re.Match | None = None
    fields: dict[str, list[str]] = {}
    last: tuple[str, int] | None = None
    header = False
    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or set(stripped) == {"-"}:
            continue
        if stripped.startswith("LLDP neighbors") or stripped.startswith("LLDP interfaces"):
            header = True
            continue
        m = _IFACE_RE.match(stripped)
        if m:
            if iface is not None:
                neighbors.append(_neighbor_from_text(iface, fields))
            iface, fields, last = m, {}, None
            continue
        if iface is None:
            if not header and is_fabric_echo(line):
                warnings.append(f"line {no}: skipped command line {stripped!r}")
                continue
            raise ParseError(kind, no, line, "expected 'Interface: <name>, via: LLDP, ...' (lldpcli show neighbors)")
        m = _KV_RE.match(line)
        if m and m.group(2) in ("Chassis", "Port", "VLAN", "PPVID", "PI", "LLDP-MED", "Unknown TLVs") \
                and not m.group(3):
            last = None
            continue
        if m and m.group(2) in _TEXT_KEYS:
            fields.setdefault(m.group(2), []).append(m.group(3))
            last = (m.group(2), len(fields[m.group(2)]) - 1)
            continue
        if m:  # other TLVs (autoneg, MFS, VLAN...): not needed here
            last = None
            continue
        if last is not None and line[:1].isspace():  # a wrapped SysDescr/PortDescr line
            key, i = last
            fields[key][i] = f"{fields[key][i]} {stripped}"
            continue
        raise ParseError(kind, no, line, "unrecognised line in an lldpcli neighbour listing")
    if iface is not None:
        neighbors.append(_neighbor_from_text(iface, fields))
    if not neighbors:
        if not header:
            no, line = next(((n, ln) for n, ln in enumerate(lines, 1) if ln.strip()), (0, ""))
            raise ParseError(kind, no, line, "no 'Interface:' block: not lldpcli output" if no else "the text is empty")
        warnings.append("no LLDP neighbour listed (lldpd heard none, or LLDP is off on the switch)")
    return LldpResult(source="lldpcli show neighbors", neighbors=tuple(neighbors), warnings=tuple(warnings))


def detect_json(text: str) -> int:
    """Score lldpctl JSON: an object whose first key is ``"lldp"``."""
    head = text[:2000].lstrip("\ufeff \t\r\n")
    return 90 if head.startswith("{") and re.match(r'\{\s*"lldp"\s*:', head) else 0


def detect_text(text: str) -> int:
    """Score lldpcli text: ``LLDP neighbors:`` and ``Interface: x, via: ...`` lines."""
    head = text[:4000]
    score = 0
    if "LLDP neighbors:" in head:
        score += 50
    if re.search(r"^Interface:\s+\S+,\s*via:", head, re.M):
        score += 40
    if "ChassisID:" in head:
        score += 5
    return min(score, 95)
