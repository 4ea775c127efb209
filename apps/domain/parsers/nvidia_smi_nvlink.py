"""Parser for ``nvidia-smi nvlink -s`` / ``nvidia-smi nvlink --status`` (optionally ``-i <gpu>``).

Layout (one header per GPU, then one line per NVLink link; the per-link figure is the link's
rate in GB/s (gigaBYTES per second) per direction as the driver reports it)::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5a10e6e5-95f7-2785-ed63-6f6147f304f7)
             Link 0: 26.562 GB/s
             Link 1: <inactive>

Driver generations differ only in details, all handled:

* indentation: TAB + space (``\\t Link 0:``, R4xx-R580 on A100/V100), nine spaces (tab-expanded copies,
  H100/B300), or anything else;
* rate text: ``25.781 GB/s`` (V100), ``25 GB/s`` (A100 prints no decimals), ``26.562 GB/s`` (H100),
  ``53.125 GB/s`` (B200/B300), ``14.062 GB/s`` (RTX 3090 bridge);
* a down link: ``Link 3: <inactive>`` (also ``Inactive``/``Disabled``/``N/A`` words);
* GPUs without NVLink: a header with no link lines, or a message under it such as
  ``NVML: Unable to retrieve NVLink information as all links are inActive`` (kept as a warning);
* ``-i N`` prints one GPU; UUIDs may be partly masked or non-ASCII in pasted copies (kept as printed).

Result :class:`NvlinkStatus`:

``gpus``: tuple of :class:`NvlinkGpu` in printed order, each

    ``index``  int, nvidia-smi GPU index (``GPU 0:``)
    ``name``   ``NVIDIA H100 80GB HBM3``
    ``uuid``   ``GPU-...`` as printed, or null when the header has no ``(UUID: ...)``
    ``links``  tuple of :class:`NvlinkLink`: ``link`` (int), ``gbps`` (float GB/s -- gigaBYTES per second,
               the figure printed; null when inactive), ``active`` (bool: a rate above 0 was printed),
               ``raw`` (the text after ``Link k:``).

``warnings``: tuple of strings.

Not this kind, rejected with a reason naming the command it is: ``nvidia-smi nvlink --capabilities``
(``Link 0, P2P is supported: true``), ``nvidia-smi nvlink -e`` (``Link 0: Replay Errors: 0``, kind
``nvidia_smi_nvlink_errors``), ``nvidia-smi c2c -s`` (``C2C Link 0: ...``, Grace Hopper chip-to-chip)
and ``nvidia-smi -q`` dumps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.domain.errors import ParseError
from apps.domain.parsers._nvlink_lines import CAPS_RE, GPU_RE, MESSAGE_RE, PROMPT_RE, SMI_Q_RE
from apps.domain.parsers.text import clean_lines

KIND = "nvidia_smi_nvlink"


@dataclass(frozen=True)
class NvlinkLink:
    link: int
    gbps: float | None
    active: bool
    raw: str


@dataclass(frozen=True)
class NvlinkGpu:
    index: int
    name: str
    uuid: str | None
    links: tuple[NvlinkLink, ...]


@dataclass(frozen=True)
class NvlinkStatus:
    gpus: tuple[NvlinkGpu, ...]
    warnings: tuple[str, ...]


_LINK_RE = re.compile(r"^\s*Link\s+(\d+)\s*:\s*(.*?)\s*$")
_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*GB/s$", re.I)
_INACTIVE_RE = re.compile(r"^<?\s*(inactive|disabled|n/?a|not supported|down)\s*>?$", re.I)
_ERRORS_RE = re.compile(r"^[A-Za-z][A-Za-z ]*Errors\s*:", re.I)
_C2C_RE = re.compile(r"^\s*C2C\s+Link\s+\d+\s*:", re.I)


def parse(text: str) -> NvlinkStatus:
    """Parse ``nvidia-smi nvlink -s`` output into GPUs and their links."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    warnings: list[str] = []
    gpus: list[NvlinkGpu] = []
    current: tuple[int, str, str | None] | None = None
    links: list[NvlinkLink] = []
    seen_links: set[int] = set()
    seen_gpus: set[int] = set()

    def close() -> None:
        if current is not None:
            gpus.append(NvlinkGpu(index=current[0], name=current[1], uuid=current[2], links=tuple(links)))

    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        m = _LINK_RE.match(line)
        if m and current is not None:
            number, raw = int(m.group(1)), m.group(2)
            rm = _RATE_RE.match(raw)
            if rm:
                gbps: float | None = float(rm.group(1))
                active = gbps > 0
            elif _INACTIVE_RE.match(raw):
                gbps, active = None, False
            elif _ERRORS_RE.match(raw):
                raise ParseError(KIND, no, line, "this is 'nvidia-smi nvlink -e' output (per-link error counters, "
                                 "kind nvidia_smi_nvlink_errors), not the link status of 'nvidia-smi nvlink -s'")
            else:
                raise ParseError(KIND, no, line, f"link {number} of GPU {current[0]}: expected "
                                 "'<number> GB/s' or '<inactive>'")
            if number in seen_links:
                warnings.append(f"line {no}: link {number} of GPU {current[0]} printed twice")
            seen_links.add(number)
            links.append(NvlinkLink(link=number, gbps=gbps, active=active, raw=raw))
            continue
        if m:
            raise ParseError(KIND, no, line, "'Link N:' line before any 'GPU N: <name> (UUID: ...)' line")
        if CAPS_RE.match(line):
            raise ParseError(KIND, no, line, "this is 'nvidia-smi nvlink --capabilities' output (per-link "
                             "capability flags), not the link status of 'nvidia-smi nvlink -s'")
        if _C2C_RE.match(line):
            raise ParseError(KIND, no, line, "this is 'nvidia-smi c2c -s' output (Grace Hopper chip-to-chip links), "
                             "not NVLink status from 'nvidia-smi nvlink -s'")
        if SMI_Q_RE.match(line):
            raise ParseError(KIND, no, line, "this is an 'nvidia-smi -q' dump, not 'nvidia-smi nvlink -s' output")
        m = GPU_RE.match(line)
        if m:
            close()
            index, name, uuid = int(m.group(1)), m.group(2), m.group(3)
            if not name:
                raise ParseError(KIND, no, line, "GPU header without a GPU name")
            if index in seen_gpus:
                warnings.append(f"line {no}: GPU {index} printed twice")
            seen_gpus.add(index)
            current, links, seen_links = (index, name, uuid or None), [], set()
            continue
        if current is None and PROMPT_RE.match(line):
            warnings.append(f"line {no}: skipped command line {stripped!r}")
            continue
        if current is not None and MESSAGE_RE.match(line):
            warnings.append(f"GPU {current[0]}: {stripped}")
            continue
        if current is None:
            raise ParseError(KIND, no, line, "expected 'GPU N: <name> (UUID: GPU-...)' as printed by "
                             "'nvidia-smi nvlink -s'")
        raise ParseError(KIND, no, line, f"unrecognised line under GPU {current[0]}; expected 'Link N: <rate> GB/s'")
    close()
    if not gpus:
        raise ParseError(KIND, 0, "", "no 'GPU N: ...' line found")
    return NvlinkStatus(gpus=tuple(gpus), warnings=tuple(warnings))


_DETECT_GPU_RE = re.compile(r"^GPU \d+: .*\(UUID: ", re.M)
_DETECT_LINK_RE = re.compile(r"^\s+Link \d+: (?:\d+(?:\.\d+)? GB/s|<inactive>)", re.M)


def detect(text: str) -> int:
    """Score ``nvidia-smi nvlink -s`` output: GPU headers followed by ``Link N: x GB/s`` lines."""
    head = text[:4000]
    if not _DETECT_GPU_RE.search(head) or not _DETECT_LINK_RE.search(head):
        return 0
    return 90
