"""Parser for the topoweb node agent's listing of InfiniBand/RoCE port counters (section ``ib_counters``).

This docstring is the contract between the agent (which writes the listing) and this parser, as
``sysfs_ib`` is for the port state. It carries the files of
``/sys/class/infiniband/<ca>/ports/<port>/counters/`` (the IB port counters: ``symbol_error``,
``link_error_recovery``, ``link_downed``, ``port_rcv_errors``, ...; rule F09) and of
``.../hw_counters/`` (the driver's transport counters, mlx5: ``out_of_sequence``,
``packet_seq_err``, ``local_ack_timeout_err``, ``rnr_nak_retry_err``, ``roce_slow_restart``, ...;
rules F06, F09), and the seconds since boot, so that a count becomes at least an average rate:
the counters run from driver load (or a reset with ``perfquery -R``) and so never longer than the
uptime. It needs no infiniband-diags.

Format ``topoweb ib_counters v1``
=================================

Plain text, UTF-8, lines ended by ``\\n``; each line is space-separated words as below.

* Line 1 is the header ``# topoweb ib_counters v1``. Other lines starting with ``#`` and blank
  lines are ignored.
* ``uptime_s S``: the first field of ``/proc/uptime`` (seconds since boot, a decimal number);
  optional, before the first ``ca``.
* ``ca NAME`` opens the block of one CA (``NAME`` = the directory name in ``/sys/class/infiniband/``);
  every line up to the next ``ca`` or ``end`` belongs to it. Each CA appears once.
* For each port ``N`` in ``ls NAME/ports/`` (numeric order):

  * ``port N link_layer V`` and ``port N state V``: the first line of ``NAME/ports/N/link_layer``
    (``InfiniBand``/``Ethernet``) and ``NAME/ports/N/state`` (``4: ACTIVE``), when readable;
  * ``port N counter C V`` for each file ``C`` of ``NAME/ports/N/counters/`` (sorted by name) and
    ``port N hw_counter C V`` for each file of ``NAME/ports/N/hw_counters/``, ``V`` being the file's
    content: a decimal integer. A file that cannot be read (some drivers answer EINVAL or EIO for
    counters they do not keep, or need root), does not hold an integer, or whose name is not a
    plain word (letters, digits, ``_.-``) is left out.

* ``end`` is the last line. Without it the listing is read but flagged as possibly cut short.

Example::

    # topoweb ib_counters v1
    uptime_s 864000.25
    ca mlx5_0
    port 1 link_layer InfiniBand
    port 1 state 4: ACTIVE
    port 1 counter link_downed 0
    port 1 counter symbol_error 0
    port 1 hw_counter rnr_nak_retry_err 0
    end

Reference producer (Python 3.6+, stdlib only; the agent's ``ib_counters_listing``)::

    import os, re

    def first_line(path):
        try:
            with open(path) as f:
                return f.readline().strip()
        except (OSError, UnicodeDecodeError):
            return None

    def numeric(names):
        return sorted(names, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n))

    def ib_counters(root="/sys/class/infiniband", proc="/proc"):
        out = ["# topoweb ib_counters v1"]
        up = first_line(os.path.join(proc, "uptime"))
        if up:
            out.append("uptime_s " + up.split()[0])
        for ca in sorted(os.listdir(root)):
            out.append("ca " + ca)
            ports = os.path.join(root, ca, "ports")
            for p in numeric(os.listdir(ports) if os.path.isdir(ports) else []):
                pd = os.path.join(ports, p)
                for name in ("link_layer", "state"):
                    v = first_line(os.path.join(pd, name))
                    if v:
                        out.append("port %s %s %s" % (p, name, v))
                for sub, word in (("counters", "counter"), ("hw_counters", "hw_counter")):
                    d = os.path.join(pd, sub)
                    for c in (sorted(os.listdir(d)) if os.path.isdir(d) else []):
                        v = first_line(os.path.join(d, c))
                        if v and v.isdigit() and re.match(r"^[A-Za-z0-9_.-]{1,64}$", c):
                            out.append("port %s %s %s %s" % (p, word, c, v))
        out.append("end")
        return "\\n".join(out) + "\\n"

Result :class:`IbCounters`
==========================

``uptime_s`` (float or null), ``ports`` (tuple of :class:`IbCounterPort` in listed order: ``ca``,
``port`` (int), ``link_layer`` (text or null), ``state`` (``Active``, ``Down``... normalised as
``sysfs_ib``; null when not listed), ``state_raw``, ``counters`` and ``hw_counters`` ({name: int})),
and ``warnings``.

Errors name the line: a line before the first ``ca`` other than the header, comments and
``uptime_s``; a ``port`` line whose number is not an integer or whose counter value is not a
non-negative integer; a CA listed twice; text after ``end``. Unknown keys (a newer agent) are
skipped with a warning; so is a header naming another version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.domain.errors import ParseError
from apps.domain.parsers._ib import normalise_state
from apps.domain.parsers.text import clean_lines

KIND = "ib_counters"
HEADER = "# topoweb ib_counters v1"

__all__ = ["IbCounterPort", "IbCounters", "HEADER", "parse", "detect"]


@dataclass(frozen=True)
class IbCounterPort:
    ca: str
    port: int
    link_layer: str | None
    state: str | None
    state_raw: str | None
    counters: dict
    hw_counters: dict


@dataclass(frozen=True)
class IbCounters:
    uptime_s: float | None
    ports: tuple[IbCounterPort, ...]
    warnings: tuple[str, ...]


_HEADER_RE = re.compile(r"^#\s*topoweb\s+ib_counters\s+(v\S+)\s*$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")


class _Port:
    def __init__(self) -> None:
        self.attrs: dict[str, str] = {}
        self.counters: dict[str, int] = {}
        self.hw: dict[str, int] = {}


def parse(text: str) -> IbCounters:
    """Parse a ``topoweb ib_counters v1`` listing into per-port counters."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    warnings: list[str] = []
    uptime: float | None = None
    cas: list[tuple[str, dict[int, _Port]]] = []
    names: set[str] = set()
    ports: dict[int, _Port] | None = None
    ca = ""
    header_seen = False
    ended_at: int | None = None
    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            m = _HEADER_RE.match(stripped)
            if m and not header_seen and not cas:
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
        if key == "uptime_s" and ports is None:
            try:
                uptime = float(rest)
            except ValueError:
                raise ParseError(KIND, no, line, "'uptime_s' is not a number of seconds") from None
            if not uptime >= 0:  # NaN, negative
                raise ParseError(KIND, no, line, "'uptime_s' is not a number of seconds")
            continue
        if key == "ca":
            if not rest or " " in rest:
                raise ParseError(KIND, no, line, "expected 'ca <name>' with one CA name")
            if rest in names:
                raise ParseError(KIND, no, line, f"CA '{rest}' listed twice")
            names.add(rest)
            ca, ports = rest, {}
            cas.append((ca, ports))
            continue
        if ports is None:
            raise ParseError(KIND, no, line, f"expected '{HEADER}' then 'ca <name>' before any other line")
        if key != "port":
            warnings.append(f"line {no}: unknown key '{key}' skipped")
            continue
        parts = rest.split(" ", 2)
        if len(parts) < 3 or not parts[0].isascii() or not parts[0].isdigit():
            raise ParseError(KIND, no, line, f"expected 'port <number> <what> ...' in CA '{ca}'")
        number, what, value = int(parts[0]), parts[1], parts[2].strip()
        port = ports.setdefault(number, _Port())
        if what in ("link_layer", "state"):
            port.attrs.setdefault(what, value)
            continue
        if what not in ("counter", "hw_counter"):
            warnings.append(f"line {no}: unknown port attribute '{what}' skipped")
            continue
        name, _, count = value.partition(" ")
        count = count.strip()
        if not _NAME_RE.match(name) or not count:
            raise ParseError(KIND, no, line, f"expected 'port {number} {what} <name> <value>'")
        if not (count.isascii() and count.isdigit()):
            raise ParseError(KIND, no, line, f"{what} '{name}' of CA '{ca}' port {number}: {count!r} is not a "
                             "non-negative integer")
        target = port.counters if what == "counter" else port.hw
        if name in target:
            warnings.append(f"line {no}: {what} '{name}' of CA '{ca}' port {number} repeated; last kept")
        target[name] = int(count)
    if not header_seen:
        warnings.append(f"no '{HEADER}' header line")
    if ended_at is None:
        warnings.append("no closing 'end' line: the listing may be cut short")
    if not cas:
        raise ParseError(KIND, 0, "", "no 'ca <name>' block found")
    out = []
    for name, by_number in cas:
        for number, p in sorted(by_number.items()):
            raw = p.attrs.get("state")
            state = normalise_state(raw) if raw else None
            if raw and state is None:
                warnings.append(f"CA '{name}' port {number}: state {raw!r} not recognised")
            out.append(IbCounterPort(ca=name, port=number, link_layer=p.attrs.get("link_layer"), state=state,
                                     state_raw=raw, counters=dict(sorted(p.counters.items())),
                                     hw_counters=dict(sorted(p.hw.items()))))
    return IbCounters(uptime_s=uptime, ports=tuple(out), warnings=tuple(warnings))


_DETECT_RE = re.compile(r"^port \d+ (?:hw_)?counter \S+ \d+\s*$", re.M)


def detect(text: str) -> int:
    """Score the agent's counter listing: its header line, or ``ca`` + ``port N counter`` lines."""
    head = text[:4000]
    if _HEADER_RE.match(head.lstrip("\ufeff").split("\n", 1)[0].strip()):
        return 100
    if re.search(r"^ca \S+\s*$", head, re.M) and _DETECT_RE.search(head):
        return 75  # above sysfs_ib's 70 for 'ca' + 'port N state' lines: counter lines are this kind's own
    return 0
