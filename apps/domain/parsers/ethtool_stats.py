"""Parser for ``ethtool -S <netdev>`` (NIC statistics) of one or several interfaces (section ``ethtool_stats``).

What it is for: the pause (flow control, PFC) and discard counters of RoCE ports, which domain.md
section 7 row T1 reads ("``ethtool -S`` pause/discard counters rising"): a RoCE fabric that is not
lossless drops packets and RDMA falls to a third of the line rate. The RDMA side of the same port
(``ib_counters``: ``out_of_sequence``, ``packet_seq_err``...) shows the retransmissions; these
counters show the Ethernet side: who sent pause frames, whether the NIC ran out of buffers.

Counter names (the driver chooses them; ``ethtool -S`` prints ``name: value`` lines):

* mlx5 (ConnectX-4 and later, BlueField), from the kernel's
  ``Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst``: link-level
  pause ``rx_pause_ctrl_phy`` / ``tx_pause_ctrl_phy`` (and ``rx_global_pause`` / ``tx_global_pause``
  when global pause is on), per-priority PFC ``rx_prio<p>_pause`` / ``tx_prio<p>_pause`` (present
  only for priorities with PFC enabled), pause storms ``tx_pause_storm_warning_events`` /
  ``tx_pause_storm_error_events`` (the NIC paused its peer so long that pause sending was
  disabled: drops followed), discards ``rx_discards_phy`` (no receive buffer: the adapter is
  congested), ``tx_discards_phy`` (dropped on transmit: link down, head-of-line drop, pause from
  the network), ``rx_out_of_buffer`` (no software buffer in the receive queue),
  ``dev_out_of_buffer``, ``rx_prio<p>_discards`` / ``_buf_discard`` / ``_cong_discard``, and
  errors ``rx_crc_errors_phy``, ``rx_symbol_err_phy``, ``rx_pcs_symbol_err_phy``,
  ``link_down_events_phy``, ``rx_pci_signal_integrity`` / ``tx_pci_signal_integrity`` (PCIe link
  recoveries: a bad slot or riser), ``module_bus_stuck``, ``module_high_temp``, ``module_bad_shorted``.
* other drivers: ``rx_pause_frames`` / ``tx_pause_frames`` and ``rx_pfc_ena_frames_pri<p>`` /
  ``tx_pfc_ena_frames_pri<p>`` (bnxt_en), ``link_xoff_rx`` / ``link_xoff_tx`` and
  ``rx_priority_<p>_xoff`` / ``tx_priority_<p>_xoff`` (ice with a ``.nic`` suffix, i40e with a
  ``port.`` prefix and ``_rx`` / ``_tx`` suffix), ``rx_pause`` / ``tx_pause``; any counter whose
  name holds ``discard`` is a discard counter; ``rx_crc_errors`` / ``rx_fcs_errors`` are errors.

Input
=====

Plain text, UTF-8. Either the agent's listing or one or more pasted ``ethtool -S`` outputs:

* ``# topoweb ethtool_stats v1``: the agent's header (optional; other lines starting with ``#``
  and blank lines are ignored).
* ``interface NAME [ca CA [port N]]`` (the agent) opens the block of network interface ``NAME``
  and names the RDMA device and port it belongs to (``/sys/class/infiniband/CA/device/net/NAME``);
  a shell command line ``[prompt] [sudo] ethtool -S NAME`` (also ``--statistics``) opens a block of
  ``NAME`` (RDMA device unknown).
* ``NIC statistics:`` (the first line ``ethtool -S`` prints) belongs to the block just opened,
  or opens a block whose interface is not named (a bare paste: ``name`` null, with a warning).
  ``Standard stats for NAME:`` (``--all-groups``) continues or opens the block of ``NAME``.
* ``NAME: VALUE``, indented or not, is one counter of the current block: the name is the text
  before the last ``:`` (``[0]: rx_ucast_packets`` stays whole), the value a decimal integer.
  Counters before any opener open an unnamed block (with a warning).
* ``no stats available`` and ``Cannot get ...`` (ethtool's messages) are kept as warnings.
* ``unavailable NAME REASON`` (the agent: ``ethtool -S NAME`` failed) is kept in ``unavailable``.
* ``end`` (the agent) is the last line; a listing with the header but without it is flagged as
  possibly cut short.

Example (the agent; trimmed)::

    # topoweb ethtool_stats v1
    interface ens108np0 ca mlx5_0 port 1
    NIC statistics:
         rx_packets: 1733425
         rx_out_of_buffer: 0
         rx_pause_ctrl_phy: 0
         tx_pause_ctrl_phy: 0
         rx_discards_phy: 4211
         rx_prio3_pause: 918211
         tx_prio3_pause: 12
         tx_pause_storm_warning_events: 3
    end

Result :class:`EthtoolStats`
============================

``interfaces``: tuple of :class:`EthtoolInterface` in printed order, each with ``name`` (text or
null), ``ca`` and ``port`` (the RDMA device and port, or null), ``line_no`` (the line that opened
the block), ``counters`` ({name: int} in printed order), ``counter_lines`` ({name: line number}),
and, read from the counters by the names above:

* ``pause``: ``{"rx": int|null, "tx": int|null, "rx_counter": name|null, "tx_counter": name|null,
  "per_priority": {"3": {"rx": int|null, "tx": int|null}, ...}, "storm_warning": int|null,
  "storm_error": int|null}``: link-level pause frames received/sent (the first of the names above
  the interface has), PFC frames per priority, and mlx5's pause-storm events;
* ``discards``: ``{name: int}`` of the discard counters;
* ``errors``: ``{name: int}`` of the link, module and PCIe error counters.

``unavailable`` ({interface: reason}) and ``warnings``.

Errors name the line: a counter whose value is not a non-negative integer, an ``interface`` line
that is not ``interface NAME [ca CA [port N]]``, any other text, text after ``end``, an empty
text or one without any counter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.domain.errors import ParseError
from apps.domain.parsers.text import clean_lines

KIND = "ethtool_stats"
HEADER = "# topoweb ethtool_stats v1"

__all__ = ["EthtoolInterface", "EthtoolStats", "HEADER", "parse", "detect", "pause_of", "discards_of", "errors_of"]


@dataclass(frozen=True)
class EthtoolInterface:
    name: str | None
    ca: str | None
    port: int | None
    line_no: int
    counters: dict
    counter_lines: dict
    pause: dict
    discards: dict
    errors: dict


@dataclass(frozen=True)
class EthtoolStats:
    interfaces: tuple[EthtoolInterface, ...]
    unavailable: dict
    warnings: tuple[str, ...]


_HEADER_RE = re.compile(r"^#\s*topoweb\s+ethtool_stats\s+(v\S+)\s*$")
_IFNAME = r"[A-Za-z0-9_.:@-]{1,64}"
_INTERFACE_RE = re.compile(rf"^interface\s+({_IFNAME})(?:\s+ca\s+({_IFNAME})(?:\s+port\s+(\d+))?)?\s*$")
_PROMPT_RE = re.compile(rf"^(?:.*[$#>]\s*)?(?:sudo\s+)?(?:\S*/)?ethtool\s+(?:-S|--statistics)\s+({_IFNAME})\s*$")
_NIC_STATS_RE = re.compile(r"^NIC statistics:\s*$")
_STANDARD_RE = re.compile(rf"^Standard stats for ({_IFNAME}):\s*$")
_COUNTER_RE = re.compile(r"^(.+?):\s*(\S+)\s*$")
_MESSAGE_RE = re.compile(r"^(?:no stats available|Cannot get .*)$", re.I)
_UNAVAILABLE_RE = re.compile(rf"^unavailable\s+({_IFNAME})\s+(.+)$")

# link-level pause frames, received and sent: the first name an interface has counts
PAUSE_RX = ("rx_pause_ctrl_phy", "rx_global_pause", "rx_pause_frames", "link_xoff_rx", "rx_pause")
PAUSE_TX = ("tx_pause_ctrl_phy", "tx_global_pause", "tx_pause_frames", "link_xoff_tx", "tx_pause")
# PFC frames per priority: mlx5, bnxt_en, ice / i40e (after the names are normalised)
_PRIO_RES = (re.compile(r"^(rx|tx)_prio(\d)_pause$"), re.compile(r"^(rx|tx)_pfc_ena_frames_pri(\d)$"),
             re.compile(r"^(rx|tx)_priority_(\d)_xoff(?:_(?:rx|tx))?$"))
STORM_WARNING = "tx_pause_storm_warning_events"
STORM_ERROR = "tx_pause_storm_error_events"
_DISCARD_EXTRA = ("rx_out_of_buffer", "dev_out_of_buffer", "outbound_pci_buffer_overflow")
ERRORS = ("rx_crc_errors_phy", "rx_symbol_err_phy", "rx_pcs_symbol_err_phy", "link_down_events_phy",
          "rx_pci_signal_integrity", "tx_pci_signal_integrity", "module_bus_stuck", "module_high_temp",
          "module_bad_shorted", "rx_crc_errors", "rx_fcs_errors", "rx_fcs_err_frames")


def _normal(name: str) -> str:
    """A counter name without the ``port.`` prefix (i40e) and ``.nic`` suffix (ice)."""
    if name.startswith("port."):
        name = name[5:]
    return name[:-4] if name.endswith(".nic") else name


def pause_of(counters: dict) -> dict:
    """The ``pause`` summary of one interface's counters (see the module docstring).

    >>> p = pause_of({"rx_pause_ctrl_phy": 5, "tx_pause_ctrl_phy": 0, "rx_prio3_pause": 7})
    >>> p["rx"], p["rx_counter"], p["per_priority"]
    (5, 'rx_pause_ctrl_phy', {'3': {'rx': 7, 'tx': None}})
    """
    # a cheap substring test first: an mlx5 port prints a thousand ring counters
    by_normal = {_normal(k): k for k in counters if "pause" in k or "xoff" in k or "pfc" in k}
    out: dict = {"rx": None, "tx": None, "rx_counter": None, "tx_counter": None, "per_priority": {},
                 "storm_warning": counters.get(STORM_WARNING), "storm_error": counters.get(STORM_ERROR)}
    for side, names in (("rx", PAUSE_RX), ("tx", PAUSE_TX)):
        name = next((by_normal[n] for n in names if n in by_normal), None)
        if name is not None:
            out[side], out[f"{side}_counter"] = counters[name], name
    for normal, name in by_normal.items():
        for rx in _PRIO_RES:
            m = rx.match(normal)
            if m:
                prio = out["per_priority"].setdefault(m.group(2), {"rx": None, "tx": None})
                prio[m.group(1)] = counters[name]
                break
    out["per_priority"] = dict(sorted(out["per_priority"].items()))
    return out


def discards_of(counters: dict) -> dict:
    """``{name: value}`` of the discard counters (names holding ``discard``, and mlx5's out-of-buffer ones)."""
    out = {}
    for k, v in counters.items():
        if "discard" in k or "buffer" in k:
            n = _normal(k)
            if ("discard" in n and not n.endswith("_bytes")) or n in _DISCARD_EXTRA:
                out[k] = v
    return out


def errors_of(counters: dict) -> dict:
    """``{name: value}`` of the link, module and PCIe error counters named in the module docstring."""
    return {k: v for k, v in counters.items() if ("err" in k or "integrity" in k or "module_" in k or "link_down" in k)
            and _normal(k) in ERRORS}


class _Block:
    def __init__(self, name: str | None, ca: str | None, port: int | None, line_no: int) -> None:
        self.name, self.ca, self.port, self.line_no = name, ca, port, line_no
        self.counters: dict[str, int] = {}
        self.lines: dict[str, int] = {}
        self.stats_seen = False

    def record(self) -> EthtoolInterface:
        return EthtoolInterface(name=self.name, ca=self.ca, port=self.port, line_no=self.line_no,
                                counters=dict(self.counters), counter_lines=dict(self.lines),
                                pause=pause_of(self.counters), discards=discards_of(self.counters),
                                errors=errors_of(self.counters))


def parse(text: str) -> EthtoolStats:
    """Parse ``ethtool -S`` output (the agent's listing, or pasted outputs) into per-interface counters."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    warnings: list[str] = []
    blocks: list[_Block] = []
    unavailable: dict[str, str] = {}
    header_seen = False
    ended_at: int | None = None
    current: _Block | None = None

    def open_block(name: str | None, ca: str | None, port: int | None, no: int) -> _Block:
        block = _Block(name, ca, port, no)
        blocks.append(block)
        return block

    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        if current is not None and line[0] in " \t" and ended_at is None:  # ethtool indents its counters
            name, colon, value = stripped.rpartition(":")
            value = value.strip()
            if colon and value.isascii() and value.isdigit() and name.strip():
                name = name.strip()
                if name in current.counters:
                    warnings.append(f"line {no}: counter {name!r} of {current.name or 'the interface'} repeated; "
                                    "last kept")
                current.counters[name] = int(value)
                current.lines[name] = no
                continue
        if stripped.startswith("#") and not _PROMPT_RE.match(stripped):  # '# ethtool -S eth0' is a root prompt
            m = _HEADER_RE.match(stripped)
            if m and not header_seen and not blocks:
                header_seen = True
                if m.group(1) != "v1":
                    warnings.append(f"line {no}: listing format {m.group(1)}; read as v1")
            continue
        if ended_at is not None:
            raise ParseError(KIND, no, line, f"text after the 'end' line (line {ended_at})")
        if stripped == "end":
            ended_at = no
            continue
        if stripped.startswith("interface ") or stripped == "interface":
            m = _INTERFACE_RE.match(stripped)
            if not m:
                raise ParseError(KIND, no, line, "expected 'interface <name> [ca <rdma device> [port <n>]]'")
            current = open_block(m.group(1), m.group(2), int(m.group(3)) if m.group(3) else None, no)
            continue
        m = _UNAVAILABLE_RE.match(stripped)
        if m:
            unavailable[m.group(1)] = m.group(2).strip()
            warnings.append(f"line {no}: ethtool -S {m.group(1)} unavailable: {m.group(2).strip()}")
            continue
        m = _PROMPT_RE.match(stripped)
        if m:
            if current is not None and current.name == m.group(1) and not current.counters:
                continue  # the agent's interface line, then the command as typed
            current = open_block(m.group(1), None, None, no)
            continue
        m = _STANDARD_RE.match(stripped)
        if _NIC_STATS_RE.match(stripped) or m:
            name = m.group(1) if m else None
            fresh = current is not None and not current.counters and not current.stats_seen
            same = current is not None and m is not None and current.name == name
            if not (fresh or same):
                current = open_block(name, None, None, no)
                if name is None:
                    warnings.append(f"line {no}: 'NIC statistics:' without the interface it belongs to "
                                    "(paste the 'ethtool -S <name>' line too)")
            if current.name is None and name is not None:
                current.name = name
            current.stats_seen = True
            continue
        if _MESSAGE_RE.match(stripped):
            who = (current.name if current is not None else None) or "the interface"
            warnings.append(f"line {no}: {who}: ethtool says {stripped!r}")
            continue
        m = _COUNTER_RE.match(stripped)
        if not m:
            raise ParseError(KIND, no, line, "not an ethtool -S line: expected 'name: value', 'NIC statistics:', "
                             "'ethtool -S <interface>' or 'interface <name> ...'")
        name, value = m.group(1).strip(), m.group(2)
        if current is None:
            current = open_block(None, None, None, no)
            warnings.append(f"line {no}: counters without a 'NIC statistics:' line or interface name")
        if not (value.isascii() and value.isdigit()):
            raise ParseError(KIND, no, line, f"counter {name!r} of {current.name or 'the interface'}: {value!r} is "
                             "not a non-negative integer")
        if name in current.counters:
            warnings.append(f"line {no}: counter {name!r} of {current.name or 'the interface'} repeated; last kept")
        current.counters[name] = int(value)
        current.lines[name] = no
    if header_seen and ended_at is None:
        warnings.append("no closing 'end' line: the listing may be cut short")
    kept = [b for b in blocks if b.counters]
    for b in blocks:
        if not b.counters and b.name and b.name not in unavailable:
            warnings.append(f"{b.name}: no counters listed (line {b.line_no})")
    if not kept:
        raise ParseError(KIND, 0, "", "no counter found (expected 'name: value' lines of ethtool -S)")
    names = [b.name for b in kept if b.name]
    for name in sorted({n for n in names if names.count(n) > 1}):
        warnings.append(f"interface {name} listed more than once; each block kept")
    return EthtoolStats(interfaces=tuple(b.record() for b in kept), unavailable=unavailable,
                        warnings=tuple(warnings))


_DETECT_COUNTER_RE = re.compile(r"^\s+[A-Za-z][\w.\[\]-]*:\s+\d+\s*$", re.M)


def detect(text: str) -> int:
    """Score ``ethtool -S`` output: the agent's header, or ``NIC statistics:`` (or ``ethtool -S``)
    followed by indented ``name: value`` lines."""
    head = text[:4000].lstrip("\ufeff")
    if _HEADER_RE.match(head.split("\n", 1)[0].strip()):
        return 100
    opener = re.search(r"^NIC statistics:\s*$", head, re.M) or re.search(r"ethtool\s+(?:-S|--statistics)\s+\S+", head)
    if opener and _DETECT_COUNTER_RE.search(head, opener.end()):
        return 90
    return 0
