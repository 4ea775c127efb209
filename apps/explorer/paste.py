"""Split a paste of one or more command outputs into report sections (pure; no Django).

A user pastes ``nvidia-smi topo -m`` and then ``ibstat`` into one box and it just works:

1. lines ``### <kind>`` (a registry kind, e.g. ``### ibstat``) split explicitly;
2. shell prompt lines (``$ ibstat``, ``root@node:~# nvidia-smi topo -m``) split and are dropped;
3. otherwise a new section starts at a line that opens a known command's output (``CA 'mlx5_0'``
   for ibstat, the ``GPU0 GPU1 ...`` header of topo -m, ``hca_id:`` for ibv_devinfo, ...) when
   it differs from the section being read.

Every section is then named by ``apps.domain.parsers.detect_kind`` (an explicit ``###`` kind
wins). A fabric output (``ibnetdiscover``, ``iblinkinfo``, LLDP, ``ibdev2netdev``: the registry's
``fabric`` family, ``FABRIC_KINDS``) is a section too, named by its fabric kind: the paste page
stores it as a fabric upload of the cluster, not as a part of the host's report.
``Section.first_line`` is the 1-based line of the box where the section's text starts, so a
parser's line number maps back to the box: ``box_line = first_line + line_no - 1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.domain.errors import UnknownKindError
from apps.domain.parsers import ALL_KINDS, KINDS, detect_kind, kinds_of

__all__ = ["Section", "split_paste", "FABRIC_KINDS", "PASTE_KINDS"]

FABRIC_KINDS = kinds_of("fabric")
PASTE_KINDS = {**KINDS, **FABRIC_KINDS}  # what the paste page takes: a host's sections and fabric outputs

MARKER = re.compile(r"^\s*###\s*([A-Za-z0-9_]+)\s*$")
PROMPT = re.compile(r"^\s*(?:\S*[$#]|\$|>)\s+(nvidia-smi|ibstat|ibstatus|ibv_devinfo|lspci|lstopo|cat|sudo"
                    r"|ibnetdiscover|iblinkinfo|ibswitches|ibhosts|ibnodes|ibdev2netdev|lldpctl|lldpcli)\b(.*)$")
# ``ethtool -S IF`` names the interface its output belongs to: kept in the section, never dropped as a prompt
ETHTOOL_COMMAND = re.compile(r"^\s*(?:\S*[$#>]\s*)?(?:sudo\s+)?ethtool\s+(?:-S|--statistics)\s+\S+\s*$")
# line that opens a command's output -> the family it starts (kinds of one family never split)
STARTS = (
    (re.compile(r"^\s*GPU0(\s|$).*(GPU1|NIC0|mlx|CPU Affinity)"), "topo"),
    (re.compile(r"^CA '"), "ibstat"),
    (re.compile(r"^Infiniband device '"), "ibstatus"),
    (re.compile(r"^hca_id:"), "ibv_devinfo"),
    (re.compile(r"^\s*index,\s*(uuid|name|pci)"), "gpus"),
    (re.compile(r"^GPU \d+: .*\(UUID"), "nvlink"),
    (re.compile(r"^\s*[-+]\+?-?\[[0-9a-f]{4}:"), "lspci_tree"),
    (re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7] \S"), "lspci_verbose"),
    (re.compile(r"^# topoweb sysfs_pci"), "sysfs_pci"),
    (re.compile(r"^# topoweb sysfs_ib"), "sysfs_ib"),
    (re.compile(r"^# topoweb ethtool_stats|^NIC statistics:\s*$"), "ethtool"),
    (ETHTOOL_COMMAND, "ethtool"),
    (re.compile(r"^\s*<\?xml|^\s*<(system|topology)[\s>]"), "xml"),
    (re.compile(r"^#\s*Topology file:"), "ibnetdiscover"),
    (re.compile(r"^(?:Switch|CA):\s"), "iblinkinfo"),
)


@dataclass(frozen=True)
class Section:
    kind: str | None  # None when it cannot be told
    text: str
    first_line: int
    line_count: int
    error: str | None = None  # why the kind could not be told, or a duplicate

    def as_dict(self) -> dict:
        return {"kind": self.kind, "first_line": self.first_line, "line_count": self.line_count,
                "error": self.error, "command": ALL_KINDS[self.kind].command if self.kind in PASTE_KINDS else None,
                "family": ALL_KINDS[self.kind].family if self.kind in PASTE_KINDS else None}


def _family(line: str) -> str | None:
    for pattern, family in STARTS:
        if pattern.match(line):
            return family
    return None


def split_paste(text: str) -> list[Section]:
    """The sections of a paste, in order; empty chunks are dropped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    chunks: list[dict] = []
    current: dict | None = None

    def start(kind: str | None, family: str | None, at: int) -> dict:
        chunk = {"kind": kind, "family": family, "start": at, "lines": []}
        chunks.append(chunk)
        return chunk

    for no, line in enumerate(lines, start=1):
        m = MARKER.match(line)
        if m:
            current = start(m.group(1), None, no + 1)
            current["explicit"] = True
            continue
        if PROMPT.match(line) and not ETHTOOL_COMMAND.match(line):
            current = start(None, None, no + 1)
            continue
        family = _family(line)
        if family and (current is None or (not current.get("explicit") and current["family"] not in (None, family)
                                           and any(x.strip() for x in current["lines"]))):
            current = start(None, family, no)
        elif family and current is not None and current["family"] is None:
            current["family"] = family
        if current is None:
            current = start(None, None, no)
        current["lines"].append(line)

    sections: list[Section] = []
    for c in chunks:
        body = c["lines"]
        while body and not body[0].strip():
            body.pop(0)
            c["start"] += 1
        while body and not body[-1].strip():
            body.pop()
        if not body:
            continue
        chunk_text = "\n".join(body) + "\n"
        kind, error = c["kind"], None
        if kind is not None and kind not in PASTE_KINDS:
            kind, error = None, f"'### {c['kind']}' is not a known kind; use one of: {', '.join(PASTE_KINDS)}"
        elif kind is None:
            try:
                kind = detect_kind(chunk_text)
            except UnknownKindError as exc:
                error = str(exc)
            if kind is not None and kind not in PASTE_KINDS:  # a measurement
                what = ALL_KINDS[kind]
                kind, error = None, (f"this is {what.command} output ({what.family} data), not something a node "
                                     "says about itself; paste here the outputs of one host's commands"
                                     + ("; a measurement goes on the measurement page (/runs/paste/)"
                                        if what.family == "run" else ""))
        sections.append(Section(kind, chunk_text, c["start"], len(body), error))
    seen: set[str] = set()
    out = []
    for s in sections:
        if s.kind and s.kind in seen:
            s = Section(s.kind, s.text, s.first_line, s.line_count,
                        f"a second {s.kind} section: paste each command's output once")
        if s.kind:
            seen.add(s.kind)
        out.append(s)
    return out
