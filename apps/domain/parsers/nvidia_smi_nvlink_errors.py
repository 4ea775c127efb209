"""Parser for ``nvidia-smi nvlink -e`` / ``nvidia-smi nvlink --errorcounters`` (optionally ``-i <gpu>``).

Layout (one header per GPU, then one line per counter and link, links often separated by blank
lines; the counters count since the driver loaded or since ``nvidia-smi nvlink -r`` reset them)::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-abcdefab-cdef-abdc-abcd-abababababab)
             Link 0: Replay Errors: 0
             Link 0: Recovery Errors: 0
             Link 0: CRC Errors: 0

             Link 1: Replay Errors: 0

Variants read: TAB + space or nine-space indentation (as ``nvlink -s``); counter names as printed
by the driver (``Replay Errors``, ``Recovery Errors``, ``CRC Errors``; drivers that split CRC
errors print ``CRC FLIT Errors`` and ``CRC Data Errors``); ``N/A`` for a counter the GPU does not
keep; ``Link 3: <inactive>``; an NVML message under a GPU without NVLink (kept as a warning); a
leading ``$ nvidia-smi nvlink -e`` line (skipped with a warning).

Result :class:`NvlinkErrors`:

``gpus``: tuple of :class:`NvlinkErrorGpu` in printed order, each

    ``index``  int, nvidia-smi GPU index (``GPU 0:``)
    ``name``   ``NVIDIA H100 80GB HBM3``
    ``uuid``   ``GPU-...`` as printed, or null
    ``links``  tuple of :class:`NvlinkErrorLink` in printed order:
               ``link`` (int), ``counters`` ({snake_case counter name: int or null}: ``replay_errors``,
               ``recovery_errors``, ``crc_errors``, ``crc_flit_errors``, ``crc_data_errors`` ... as
               printed), ``replay_errors``, ``recovery_errors`` (ints or null), ``crc_errors`` (int or
               null: ``CRC Errors``, or the sum of ``CRC FLIT Errors`` and ``CRC Data Errors`` when the
               driver prints those instead), ``inactive`` (bool: ``<inactive>`` was printed).

``warnings``: tuple of strings.

Not this kind, rejected with a reason: ``nvidia-smi nvlink -s`` (``Link 0: 26.562 GB/s``),
``nvidia-smi nvlink --capabilities`` and ``nvidia-smi -q`` dumps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.domain.errors import ParseError
from apps.domain.parsers._nvlink_lines import CAPS_RE, GPU_RE, MESSAGE_RE, PROMPT_RE, SMI_Q_RE
from apps.domain.parsers.text import clean_lines

KIND = "nvidia_smi_nvlink_errors"

__all__ = ["NvlinkErrorLink", "NvlinkErrorGpu", "NvlinkErrors", "parse", "detect"]


@dataclass(frozen=True)
class NvlinkErrorLink:
    link: int
    counters: dict
    replay_errors: int | None
    recovery_errors: int | None
    crc_errors: int | None
    inactive: bool


@dataclass(frozen=True)
class NvlinkErrorGpu:
    index: int
    name: str
    uuid: str | None
    links: tuple[NvlinkErrorLink, ...]


@dataclass(frozen=True)
class NvlinkErrors:
    gpus: tuple[NvlinkErrorGpu, ...]
    warnings: tuple[str, ...]


_COUNTER_RE = re.compile(r"^\s*Link\s+(\d+)\s*:\s*([A-Za-z][A-Za-z0-9 ._/-]*?)\s*:\s*(\S.*?)\s*$")
_INACTIVE_RE = re.compile(r"^\s*Link\s+(\d+)\s*:\s*<?\s*(inactive|disabled|n/?a|not supported)\s*>?\s*$", re.I)
_RATE_RE = re.compile(r"^\s*Link\s+\d+\s*:\s*\d+(?:\.\d+)?\s*GB/s\s*$", re.I)


def _snake(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


class _Link:
    def __init__(self, number: int) -> None:
        self.number = number
        self.counters: dict[str, int | None] = {}
        self.inactive = False

    def finish(self) -> NvlinkErrorLink:
        c = self.counters
        crc = c.get("crc_errors")
        if crc is None and ("crc_flit_errors" in c or "crc_data_errors" in c):
            parts = [c.get("crc_flit_errors"), c.get("crc_data_errors")]
            crc = sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None
        return NvlinkErrorLink(link=self.number, counters=dict(c), replay_errors=c.get("replay_errors"),
                               recovery_errors=c.get("recovery_errors"), crc_errors=crc, inactive=self.inactive)


def parse(text: str) -> NvlinkErrors:
    """Parse ``nvidia-smi nvlink -e`` output into GPUs, links and their error counters."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    warnings: list[str] = []
    gpus: list[NvlinkErrorGpu] = []
    current: tuple[int, str, str | None] | None = None
    links: dict[int, _Link] = {}
    seen_gpus: set[int] = set()

    def close() -> None:
        if current is not None:
            gpus.append(NvlinkErrorGpu(index=current[0], name=current[1], uuid=current[2],
                                       links=tuple(lk.finish() for lk in links.values())))

    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        if _RATE_RE.match(line):
            raise ParseError(KIND, no, line, "this is 'nvidia-smi nvlink -s' output (link rates), not the error "
                             "counters of 'nvidia-smi nvlink -e'")
        if CAPS_RE.match(line):
            raise ParseError(KIND, no, line, "this is 'nvidia-smi nvlink --capabilities' output, not the error "
                             "counters of 'nvidia-smi nvlink -e'")
        if SMI_Q_RE.match(line):
            raise ParseError(KIND, no, line, "this is an 'nvidia-smi -q' dump, not 'nvidia-smi nvlink -e' output")
        m = _COUNTER_RE.match(line) or _INACTIVE_RE.match(line)
        if m and current is None:
            raise ParseError(KIND, no, line, "'Link N:' line before any 'GPU N: <name> (UUID: ...)' line")
        if m:
            number = int(m.group(1))
            link = links.setdefault(number, _Link(number))
            if m.re is _INACTIVE_RE:
                link.inactive = True
                continue
            name, raw = _snake(m.group(2)), m.group(3)
            if re.fullmatch(r"\d+", raw):
                value: int | None = int(raw)
            elif re.fullmatch(r"\[?n/?a\]?|not supported", raw, re.I):
                value = None
            else:
                raise ParseError(KIND, no, line, f"link {number} of GPU {current[0]}: the {m.group(2)} count "
                                 f"{raw!r} is not a number")
            if name in link.counters:
                warnings.append(f"line {no}: {m.group(2)} of link {number} of GPU {current[0]} printed twice; "
                                "the first is kept")
                continue
            link.counters[name] = value
            continue
        g = GPU_RE.match(line)
        if g and g.group(2):
            close()
            index = int(g.group(1))
            if index in seen_gpus:
                warnings.append(f"line {no}: GPU {index} printed twice")
            seen_gpus.add(index)
            current, links = (index, g.group(2), g.group(3) or None), {}
            continue
        if current is None and PROMPT_RE.match(line):
            warnings.append(f"line {no}: skipped command line {stripped!r}")
            continue
        if current is not None and MESSAGE_RE.match(line):
            warnings.append(f"GPU {current[0]}: {stripped}")
            continue
        if current is None:
            raise ParseError(KIND, no, line, "expected 'GPU N: <name> (UUID: GPU-...)' as printed by "
                             "'nvidia-smi nvlink -e'")
        raise ParseError(KIND, no, line, f"unrecognised line under GPU {current[0]}; expected "
                         "'Link N: <counter> Errors: <count>'")
    close()
    if not gpus:
        raise ParseError(KIND, 0, "", "no 'GPU N: ...' line found")
    return NvlinkErrors(gpus=tuple(gpus), warnings=tuple(warnings))


_DETECT_GPU_RE = re.compile(r"^GPU \d+: .*\(UUID: ", re.M)
_DETECT_LINK_RE = re.compile(r"^\s+Link \d+: [A-Za-z ]*Errors: (?:\d+|N/A)\s*$", re.M)


def detect(text: str) -> int:
    """Score ``nvidia-smi nvlink -e`` output: GPU headers followed by ``Link N: <counter> Errors: n`` lines."""
    head = text[:4000]
    if not _DETECT_GPU_RE.search(head) or not _DETECT_LINK_RE.search(head):
        return 0
    return 90
