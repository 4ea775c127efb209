"""Parser for NCCL debug output (``NCCL_DEBUG=INFO``, optionally ``NCCL_DEBUG_SUBSYS=...``), from any job:
nccl-tests, PyTorch (torchrun), Ray, MPI.

Every NCCL line carries ``host:pid:tid [cudaDev] NCCL LEVEL message``; launchers may put their own tag
in front (``[default0]:``, ``(RayWorkerWrapper pid=81, ip=10.0.0.2)``, ``0:``, ``[1,0]<stdout>:``,
timestamps), so the prefix is searched, not anchored. Sample (trimmed)::

    node1:2201:2290 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
    node1:2201:2290 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/RoCE [RO]; OOB ib0:10.0.0.1<0>
    node1:2201:2290 [0] NCCL INFO Using network IB
    node1:2201:2290 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.
    node1:2201:2290 [0] NCCL INFO Channel 00/32 :    0   1   2   3   4   5   6   7
    node1:2201:2290 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1
    node1:2201:2290 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0(8)/GDRDMA
    node1:2201:2290 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
    node1:2201:2290 [0] NCCL INFO comm 0x55d5 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x9c - Init COMPLETE
    node1:2201:2301 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<41234> with error 12, opcode 0, len 0

Line forms read: connections ``Channel NN/c : a[b] -> c[d] [send|receive] via T`` and the pre-2.12
``Channel NN : ...`` / ``Ring NN : ...`` forms, where ``[b]`` is the CUDA device (2.19+) or the bus id
(``0[1b000]``, 2.8-2.18); ring orders ``Channel NN/MM : r0 r1 ...``; ``Trees [c] d0/d1/d2->rank->up``;
``NET/IB : Using [i]dev:port/IB|RoCE``, ``NET/Socket : Using [i]ifname:addr<0>``, ``NET/OFI`` lines
(aws-ofi-nccl: ``Selected Provider is efa (found 4 nics)``); ``Using network X``, ``P2P plugin X``,
``NET/Plugin`` lines; ``NCCL_X set by environment to V.``, ``NCCL_X set to V``, the plugin's
``Setting NCCL_X to V`` and bare ``NCCL_X=V`` lines (launch scripts echo them); ``Init COMPLETE`` lines;
``Connected all rings, use ring PXN p GDR g``; NVLS lines.

Result :class:`NcclLog`, one fixed schema:

``version``        NCCL version (``"2.21.5"``) or null; ``cuda_version`` (``"12.4"``) or null
``plugin``         the network NCCL used: the ``Using network X`` name (``IB``, ``Socket``, ``IBext_v8``,
                   ``AWS Libfabric``...), else from the ``NET/...`` lines (``OFI``, else ``IB`` when ``NET/IB : Using``
                   was printed, else ``Socket``: NCCL uses sockets only without an IB device), else the plugin
                   named by NET connections; null when the log says nothing
``plugin_path``    ``Plugin Path : ...`` when printed, else null
``ofi_provider``   ``efa`` etc. and ``ofi_nics`` (int) from aws-ofi-nccl, else null
``nics``           tuple of :class:`Nic`: ``host, index, name, port`` (null for sockets), ``link_layer``
                   (``IB``/``RoCE``, null for sockets), ``address`` (sockets' IP, else null), ``plugin``
                   (``IB``/``Socket``), ``relaxed_ordering`` (``[RO]``), ``line_no``; one per host and index
``connections``    tuple of :class:`Connection`, one per ``Channel``/``Ring`` connection line: ``host, device``
                   (the logging CUDA device), ``channel``, ``conn_index`` (the ``/c``, null in old forms),
                   ``src_rank, dst_rank``, ``src_dev, dst_dev`` (CUDA devices, null when a bus id is printed),
                   ``src_bus_id, dst_bus_id`` (canonical BDF when a bus id is printed), ``direction``
                   (``send``/``receive``/null), ``transport`` (``NET``, ``P2P``, ``SHM``, ``NVLS``, ``COLLNET``;
                   NCCL 2.4's ``via direct shared memory`` reads as ``SHM``),
                   ``plugin`` (NET: ``IB``, ``Socket``...; else null), ``net_dev`` (NET device index),
                   ``proxy_rank`` (PXN: the rank in ``0(8)``), ``gdr`` (NET: ``GDRDMA`` present; else null),
                   ``mechanism`` (P2P/SHM: ``CUMEM``, ``IPC``, ``direct pointer``, ``direct``), ``read`` (``/read``),
                   ``via`` (the text after ``via``), ``line_no``
``rings``          tuple of :class:`RingOrder`: ``host, channel, nchannels, ranks, line_no``; one per
                   (channel, order)
``trees``          tuple of :class:`TreeLink`: ``host, channel, rank, up, down`` (-1 entries dropped), ``line_no``;
                   one per (channel, rank)
``comms``          tuple of :class:`CommInit` from ``Init COMPLETE`` lines: ``host, comm, rank, nranks, cuda_dev,
                   nvml_dev, bus_id`` (canonical BDF; null before NCCL 2.5 printed it), ``line_no``; one per
                   (host, comm, rank)
``ring_connects``  tuple of :class:`RingConnect` (``Connected all rings, use ring PXN p GDR g``): ``host, device,
                   pxn, gdr, line_no``
``nvls``           true when NCCL says NVLS (NVLink SHARP) is usable or used (``NVLS multicast support is
                   available``, ``Connected NVLS``, ``NVLS comm``, ``via NVLS``), else false
``settings``       dict ``NCCL_*`` name -> value (first value seen; each different later value is one warning)
``errors``         tuple of :class:`LogError`: ``line_no, host, level`` (``WARN``, ``INFO``, ``ERROR`` or null for
                   lines outside NCCL's prefix), ``text``: every ``NCCL WARN`` line and every line reporting a
                   failure (``failed``, ``error``, ``timeout``, ``timed out``, ``No device found``, NCCL's
                   ``file.cc:N -> code`` traces, PyTorch's ``NCCL error`` / watchdog timeouts)
``hosts``          distinct hosts in order of first appearance
``nranks``         the largest ``nranks`` of the Init lines, else the longest ring order, else null
``nnodes``         the largest ``nNodes`` NCCL printed (2.2x ``comm ... nRanks N nNodes M`` lines), else null
``warnings``       tuple of strings about the reading itself (no NCCL line at all is an error instead)

Line numbers are 1-based lines of the text as sent. Broken input raises :class:`ParseError`: an empty
text, or a text without a single NCCL line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from functools import lru_cache

from apps.domain.errors import ParseError
from apps.domain.parsers._launch import strip_launcher_prefix
from apps.domain.parsers.text import clean_lines
from apps.domain.pci import bdf_from_nccl_busid

KIND = "nccl_log"


@dataclass(frozen=True)
class Nic:
    host: str | None
    index: int
    name: str
    port: int | None
    link_layer: str | None
    address: str | None
    plugin: str
    relaxed_ordering: bool
    line_no: int


@dataclass(frozen=True)
class Connection:
    host: str | None
    device: int | None
    channel: int
    conn_index: int | None
    src_rank: int
    dst_rank: int
    src_dev: int | None
    dst_dev: int | None
    src_bus_id: str | None
    dst_bus_id: str | None
    direction: str | None
    transport: str
    plugin: str | None
    net_dev: int | None
    proxy_rank: int | None
    gdr: bool | None
    mechanism: str | None
    read: bool
    via: str
    line_no: int


@dataclass(frozen=True)
class RingOrder:
    host: str | None
    channel: int
    nchannels: int | None
    ranks: tuple[int, ...]
    line_no: int


@dataclass(frozen=True)
class TreeLink:
    host: str | None
    channel: int
    rank: int
    up: int | None
    down: tuple[int, ...]
    line_no: int


@dataclass(frozen=True)
class CommInit:
    host: str | None
    comm: str
    rank: int
    nranks: int
    cuda_dev: int
    nvml_dev: int | None
    bus_id: str | None
    line_no: int


@dataclass(frozen=True)
class RingConnect:
    host: str | None
    device: int | None
    pxn: int | None
    gdr: int | None
    line_no: int


@dataclass(frozen=True)
class LogError:
    line_no: int
    host: str | None
    level: str | None
    text: str


@dataclass(frozen=True)
class NcclLog:
    version: str | None
    cuda_version: str | None
    plugin: str | None
    plugin_path: str | None
    ofi_provider: str | None
    ofi_nics: int | None
    nics: tuple[Nic, ...]
    connections: tuple[Connection, ...]
    rings: tuple[RingOrder, ...]
    trees: tuple[TreeLink, ...]
    comms: tuple[CommInit, ...]
    ring_connects: tuple[RingConnect, ...]
    nvls: bool
    settings: dict[str, str]
    errors: tuple[LogError, ...]
    hosts: tuple[str, ...]
    nranks: int | None
    nnodes: int | None
    warnings: tuple[str, ...]


_LEVELS = ("INFO", "WARN", "TRACE", "ERROR", "ABORT")
_CONN_RE = re.compile(r"(?:Channel|Ring) (\d+)(?:/(\d+))? : (\d+)(?:\[([0-9a-fA-F]+)\])? "
                      r"-> (\d+)(?:\[([0-9a-fA-F]+)\])?"
                      r"(?: \[(send|receive)\])? via (.+?)\s*$")
_RING_RE = re.compile(r"(?:Channel|Ring) (\d+)(?:/(\d+))? :((?:\s+-?\d+)+)\s*$")
_TREE_RE = re.compile(r"\[(\d+)\] (-?\d+)/(-?\d+)/(-?\d+)->(-?\d+)->(-?\d+)")
_VERSION_RE = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\+cuda(\d+\.\d+))?")
_IB_NIC_RE = re.compile(r"\[(\d+)\]([\w.:-]+?):(\d+)/(IB|RoCE)")
_SOCKET_NIC_RE = re.compile(r"\[(\d+)\]([\w.-]+):([^<\s]+)<\d+>")
_NETWORK_RE = re.compile(r"Using network (.+?)\s*$")
_P2P_PLUGIN_RE = re.compile(r"P2P plugin (?:v\d+ )?(\S+)")
_PLUGIN_PATH_RE = re.compile(r"Plugin Path : (\S+)")
_OFI_PROVIDER_RE = re.compile(r"Selected [Pp]rovider is (\w[\w-]*)(?:, fabric is [\w-]+)? \(found (\d+) nics\)")
_SETTING_RE = re.compile(r"(NCCL_[A-Z0-9_]+) set (?:by environment )?to (.*?)\.?\s*$")
_PLUGIN_SETTING_RE = re.compile(r"Setting (NCCL_[A-Z0-9_]+) (?:environment variable )?to (\S+?)\.?\s*$")
_ENV_RE = re.compile(r"^\s*(?:export\s+)?(NCCL_[A-Z0-9_]+)=(\S*)\s*$")
_INIT_RE = re.compile(r"comm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+) cudaDev (\d+)(?: nvmlDev (\d+))?"
                      r"(?: busId ([0-9a-fA-F]+))?(?: commId 0x[0-9a-fA-F]+)? - Init COMPLETE")
_NVLS_RE = re.compile(r"NVLS multicast support is available|Connected NVLS|NVLS comm 0x")
_PLAIN_VERSION_RE = re.compile(r"^\s*NCCL version (\d+\.\d+\.\d+)(?:\+cuda(\d+\.\d+))?\s*$")
_NNODES_RE = re.compile(r"\bnNodes (\d+)")
_CONNECTED_RE = re.compile(r"Connected all rings(?:, use ring PXN (\d+) GDR (\d+))?")
_FAILURE_RE = re.compile(r"\bfailed\b|\bfailure\b|\berror\b|\btimeout\b|\btimed out\b|No device found|"
                         r"\.(?:cc|cu|h):\d+ -> \d+|\bWatchdog caught\b|\bunhandled \w+ error\b", re.I)


@dataclass
class _Acc:
    """What one pass over the lines has read so far (private to :func:`parse`)."""

    warnings: list[str] = field(default_factory=list)
    version: str | None = None
    cuda_version: str | None = None
    network: str | None = None
    net_said: set[str] = field(default_factory=set)
    plugin_path: str | None = None
    ofi_provider: str | None = None
    ofi_nics: int | None = None
    nics: dict[tuple[str | None, str, int], Nic] = field(default_factory=dict)
    connections: list[Connection] = field(default_factory=list)
    rings: dict[tuple[int, tuple[int, ...]], RingOrder] = field(default_factory=dict)
    trees: dict[tuple[int, int], TreeLink] = field(default_factory=dict)
    comms: dict[tuple[str | None, str, int], CommInit] = field(default_factory=dict)
    ring_connects: list[RingConnect] = field(default_factory=list)
    nvls: bool = False
    settings: dict[str, str] = field(default_factory=dict)
    setting_lines: dict[str, int] = field(default_factory=dict)
    conflicts: set[tuple[str, str]] = field(default_factory=set)
    errors: list[LogError] = field(default_factory=list)
    hosts: dict[str, None] = field(default_factory=dict)
    nnodes: int | None = None
    nccl_lines: int = 0


@lru_cache(maxsize=4096)
def _endpoint(text: str | None) -> tuple[int | None, str | None]:
    """``(cuda device, None)`` for ``[3]``; ``(None, canonical BDF)`` for a bus id such as ``[1b000]``."""
    if text is None:
        return None, None
    if len(text) <= 3 and text.isdecimal():
        return int(text), None
    return None, bdf_from_nccl_busid(text)


_NET_DEV_RE = re.compile(r"(\d+)(?:\((\d+)\))?")


@lru_cache(maxsize=1024)
def _via_fields(via: str) -> tuple[str, str | None, int | None, int | None, bool | None, str | None, bool]:
    """``(transport, plugin, net_dev, proxy_rank, gdr, mechanism, read)`` of the text after ``via``
    (a log repeats a handful of these thousands of times, hence the cache)."""
    parts = via.split("/")
    transport = parts[0].strip().upper()
    if via.startswith("direct shared memory"):  # NCCL 2.4 and older name of the SHM transport
        return "SHM", None, None, None, None, "direct", False
    if transport != "NET":
        return transport, None, None, None, None, parts[1] if len(parts) > 1 else None, "read" in parts[2:]
    net_dev = proxy = None
    dev = _NET_DEV_RE.match(parts[2]) if len(parts) > 2 else None
    if dev:
        net_dev = int(dev.group(1))
        proxy = int(dev.group(2)) if dev.group(2) else None
    return transport, parts[1] if len(parts) > 1 else None, net_dev, proxy, "GDRDMA" in parts[3:], None, False


_CONNECTION_FIELDS = len(fields(Connection))


def _connection(m: re.Match, host: str | None, device: int | None, no: int) -> Connection:
    channel, conn_index, src, src_ep, dst, dst_ep, direction, via = m.groups()
    transport, plugin, net_dev, proxy, gdr, mechanism, read = _via_fields(via)
    src_dev, src_bus = _endpoint(src_ep)
    dst_dev, dst_bus = _endpoint(dst_ep)
    return _record(Connection, _CONNECTION_FIELDS, {
        "host": host, "device": device, "channel": int(channel), "conn_index": int(conn_index) if conn_index else None,
        "src_rank": int(src), "dst_rank": int(dst), "src_dev": src_dev, "dst_dev": dst_dev, "src_bus_id": src_bus,
        "dst_bus_id": dst_bus, "direction": direction, "transport": transport, "plugin": plugin, "net_dev": net_dev,
        "proxy_rank": proxy, "gdr": gdr, "mechanism": mechanism, "read": read, "via": via, "line_no": no,
    })


def _record(cls: type, nfields: int, values: dict):
    """An instance of the frozen dataclass ``cls`` holding ``values`` (field name -> value), built
    without its generated ``__init__``.

    The result is the object the constructor makes (equal, hashable, immutable through its
    attributes), about ten times cheaper: a frozen ``__init__`` sets every field through
    ``object.__setattr__``, and a 100,000-line log holds some 60,000 connection lines. ``nfields``
    (the class's field count) guards against a field left out.
    """
    assert len(values) == nfields, f"{cls.__name__}: {len(values)} of {nfields} fields given"
    obj = object.__new__(cls)
    object.__setattr__(obj, "__dict__", values)
    return obj


def _add_setting(acc: _Acc, name: str, value: str, no: int) -> None:
    old = acc.settings.get(name)
    if old is None:
        acc.settings[name] = value
        acc.setting_lines[name] = no
    elif old != value and (name, value) not in acc.conflicts:
        acc.conflicts.add((name, value))
        acc.warnings.append(f"line {no}: {name} is {value!r} here but {old!r} at line {acc.setting_lines[name]}; "
                            "first kept")


def _read_net(acc: _Acc, msg: str, host: str | None, no: int) -> bool:
    """NIC and plugin lines; True when ``msg`` was one."""
    if msg.startswith("NET/IB : Using"):
        ro = "[RO]" in msg
        for m in _IB_NIC_RE.finditer(msg.split(";", 1)[0]):
            nic = Nic(host, int(m.group(1)), m.group(2), int(m.group(3)), m.group(4), None, "IB", ro, no)
            acc.nics.setdefault((host, "IB", nic.index), nic)
        acc.net_said.add("IB")
        return True
    if msg.startswith("NET/Socket : Using"):
        for m in _SOCKET_NIC_RE.finditer(msg):
            nic = Nic(host, int(m.group(1)), m.group(2), None, None, m.group(3), "Socket", False, no)
            acc.nics.setdefault((host, "Socket", nic.index), nic)
        acc.net_said.add("Socket")
        return True
    if msg.startswith("NET/OFI"):
        acc.net_said.add("OFI")
        m = _OFI_PROVIDER_RE.search(msg)
        if m:
            acc.ofi_provider, acc.ofi_nics = m.group(1), int(m.group(2))
        m = _PLUGIN_SETTING_RE.search(msg)
        if m:
            _add_setting(acc, m.group(1), m.group(2), no)
        return True
    m = _NETWORK_RE.match(msg)
    if m:
        acc.network = acc.network or m.group(1)
        return True
    m = _P2P_PLUGIN_RE.match(msg)
    if m:
        acc.network = acc.network or m.group(1)
        return True
    m = _PLUGIN_PATH_RE.match(msg)
    if m:
        acc.plugin_path = acc.plugin_path or m.group(1)
        return True
    return False


def _read_channel(acc: _Acc, msg: str, host: str | None, device: int | None, no: int) -> bool:
    """Connection and ring-order lines; True when ``msg`` was one."""
    m = _CONN_RE.match(msg)
    if m:
        conn = _connection(m, host, device, no)
        acc.connections.append(conn)
        acc.nvls = acc.nvls or conn.transport == "NVLS"
        return True
    m = _RING_RE.match(msg)
    if m:
        ranks = tuple(int(x) for x in m.group(3).split())
        key = (int(m.group(1)), ranks)
        if key not in acc.rings:
            acc.rings[key] = RingOrder(host, key[0], int(m.group(2)) if m.group(2) else None, ranks, no)
        return True
    return False


def _read_trees(acc: _Acc, msg: str, host: str | None, no: int) -> None:
    for m in _TREE_RE.finditer(msg):
        channel, rank = int(m.group(1)), int(m.group(5))
        down = tuple(int(m.group(i)) for i in (2, 3, 4) if int(m.group(i)) >= 0)
        up = int(m.group(6))
        acc.trees.setdefault((channel, rank), TreeLink(host, channel, rank, up if up >= 0 else None, down, no))


def _read_message(acc: _Acc, msg: str, host: str | None, device: int | None, level: str, no: int) -> None:
    """One NCCL message (the text after ``NCCL LEVEL``)."""
    head = msg[:4]
    if head in ("Chan", "Ring") and _read_channel(acc, msg, host, device, no):
        return
    if head == "Tree":
        _read_trees(acc, msg, host, no)
        return
    if head == "NCCL":
        m = _SETTING_RE.match(msg)
        if m:
            _add_setting(acc, m.group(1), m.group(2), no)
            return
        m = _VERSION_RE.match(msg)
        if m:
            acc.version = acc.version or m.group(1)
            acc.cuda_version = acc.cuda_version or m.group(2)
            return
    if (head in ("NET/", "Usin", "P2P ", "Plug")) and _read_net(acc, msg, host, no):
        return
    if "Init COMPLETE" in msg:
        m = _INIT_RE.search(msg)
        if m:
            key = (host, m.group(1), int(m.group(2)))
            acc.comms.setdefault(key, CommInit(
                host, m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)),
                int(m.group(5)) if m.group(5) else None,
                bdf_from_nccl_busid(m.group(6)) if m.group(6) else None, no))
            return
    if head == "Conn":
        m = _CONNECTED_RE.match(msg)
        if m:
            acc.ring_connects.append(RingConnect(host, device, int(m.group(1)) if m.group(1) else None,
                                                 int(m.group(2)) if m.group(2) else None, no))
            return
    m = _NNODES_RE.search(msg) if "nNodes" in msg else None
    if m:
        acc.nnodes = max(acc.nnodes or 0, int(m.group(1)))
    if "NVLS" in msg and _NVLS_RE.search(msg):
        acc.nvls = True
    if level in ("WARN", "ERROR", "ABORT") or _FAILURE_RE.search(msg):
        acc.errors.append(LogError(no, host, level, msg.strip()))


def _read_plain(acc: _Acc, line: str, no: int) -> None:
    """A line without NCCL's prefix: bare version lines, echoed environment, framework errors."""
    body, _ = strip_launcher_prefix(line)
    m = _PLAIN_VERSION_RE.match(body)
    if m:
        acc.version = acc.version or m.group(1)
        acc.cuda_version = acc.cuda_version or m.group(2)
        acc.nccl_lines += 1
        return
    m = _ENV_RE.match(body)
    if m:
        _add_setting(acc, m.group(1), m.group(2), no)
        return
    if _FAILURE_RE.search(body):
        acc.errors.append(LogError(no, None, None, line.strip()))


@lru_cache(maxsize=8192)
def _split_prefix(prefix: str) -> tuple[str, int] | None:
    """``(host, cuda device)`` of a line's text before `` NCCL LEVEL`` when it ends with NCCL's
    ``host:pid:tid [dev]``, else None. Whatever a launcher put before the host is skipped. (Cached:
    one thread prints its prefix on thousands of lines.)"""
    at = len(prefix)
    if at < 2 or prefix[at - 1] != "]":
        return None
    open_at = prefix.rfind(" [")
    dev = prefix[open_at + 2:at - 1]
    if open_at < 0 or not dev.isdecimal():
        return None
    head = prefix[:open_at]
    token = head[head.rfind(" ") + 1:]
    parts = token.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdecimal() or not parts[2].isdecimal():
        return None
    host = parts[0]
    for mark in ("]", ")", ">", ":"):  # "[default0]:host", "(pid=1)host", "[1,0]<stdout>:host"
        if mark in host:
            host = host.rsplit(mark, 1)[1]
    return (host, int(dev)) if host else None


def parse(text: str) -> NcclLog:
    """Parse NCCL ``NCCL_DEBUG=INFO`` output (any job, any launcher prefix)."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    acc = _Acc()
    for no, line in enumerate(lines, 1):
        at = line.find(" NCCL ")
        if at < 0:
            if line and "NCCL" in line:
                _read_plain(acc, line, no)
            continue
        level, _, msg = line[at + 6:].partition(" ")
        prefix = _split_prefix(line[:at]) if level in _LEVELS else None
        if prefix is None:
            _read_plain(acc, line, no)
            continue
        acc.nccl_lines += 1
        host, device = prefix
        acc.hosts.setdefault(host, None)
        _read_message(acc, msg, host, device, level, no)
    if not acc.nccl_lines and not acc.settings:
        no, line = next((no, line) for no, line in enumerate(lines, 1) if line.strip())
        raise ParseError(KIND, no, line, "no NCCL debug line ('host:pid:tid [dev] NCCL INFO ...'): "
                         "not NCCL_DEBUG=INFO output")
    return _finish(acc)


def _plugin(acc: _Acc) -> str | None:
    if acc.network:
        return acc.network
    for name in ("OFI", "IB", "Socket"):  # NCCL falls back to sockets only when no IB device is found
        if name in acc.net_said:
            return name
    return next((c.plugin for c in acc.connections if c.transport == "NET" and c.plugin), None)


def _finish(acc: _Acc) -> NcclLog:
    nranks = max((c.nranks for c in acc.comms.values()), default=None)
    if nranks is None and acc.rings:
        nranks = max(len(r.ranks) for r in acc.rings.values())
    if not acc.connections and acc.nccl_lines:
        acc.warnings.append("no 'Channel ... via ...' connection lines (NCCL_DEBUG_SUBSYS without INIT, "
                            "or the log was cut before the communicators connected)")
    return NcclLog(
        version=acc.version, cuda_version=acc.cuda_version, plugin=_plugin(acc), plugin_path=acc.plugin_path,
        ofi_provider=acc.ofi_provider, ofi_nics=acc.ofi_nics, nics=tuple(acc.nics.values()),
        connections=tuple(acc.connections), rings=tuple(acc.rings.values()), trees=tuple(acc.trees.values()),
        comms=tuple(acc.comms.values()), ring_connects=tuple(acc.ring_connects), nvls=acc.nvls,
        settings=dict(acc.settings), errors=tuple(acc.errors), hosts=tuple(acc.hosts), nranks=nranks,
        nnodes=acc.nnodes, warnings=tuple(acc.warnings),
    )


_DETECT_RE = re.compile(r"\S+:\d+:\d+ \[\d+\] NCCL (?:INFO|WARN)\b")


def detect(text: str) -> int:
    """Score NCCL debug output by its ``host:pid:tid [dev] NCCL INFO`` lines (at most 90, so that nccl-tests
    output with NCCL lines interleaved stays nccl-tests)."""
    head = text[:20000]
    n = len(_DETECT_RE.findall(head))
    if not n:
        return 0
    return min(90, 60 + 5 * n)
