"""Synthetic clusters for the benchmarks and the reliability tests, built from real captures.

Every host of a synthetic cluster is one of the real report bundles of ``tests/fixtures/bundles/``
(real captures copied byte for byte; ``synthetic_*`` bundles are skipped) under a new name,
``synth-<layout>-<nnnn>``, with every report marked ``"meta": {"synthetic": true, ...}``. Some
hosts carry one fault, written into the captured text the way the fault shows on a real machine:

``narrowed_link``  a GPU's PCIe link trained narrower than it can: ``lspci -vvv`` ``LnkSta`` of the
                   first NVIDIA GPU ``Width x16 (ok)`` -> ``Width x8 (downgraded)``; NCCL XML
                   ``link_width="16"`` -> ``"8"`` on the first GPU (class 0x03...).
``port_down``      the first port that is up is down: ``ibstat`` ``State: Active`` / ``Physical
                   state: LinkUp``, ``ibstatus`` ``4: ACTIVE`` / ``5: LinkUp``, ``ibv_devinfo``
                   ``PORT_ACTIVE (4)`` -> down / disabled.
``moved_nic``      two NICs swapped between slots (the first and the middle one of the NIC
                   names of ``nvidia-smi topo -m`` or of the NCCL XML): each name now sits where
                   the other was, so GPU->NIC affinity and rails change.

A fault is only given to a host whose sections can show it; the report's ``meta.fault`` names
it (``null`` for a healthy host) and ``meta.layout`` the bundle it came from. The generator is
deterministic for a given ``seed``.

    >>> reports = generate_reports(16, seed=1)
    >>> reports[0]["hostname"].startswith("synth-"), reports[0]["meta"]["synthetic"]
    (True, True)
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
BUNDLES = ROOT / "tests" / "fixtures" / "bundles"
REPORT_SCHEMA = "topoweb.report/1"
AGENT_VERSION = "synth/1"
FAULTS = ("narrowed_link", "port_down", "moved_nic")


@dataclass(frozen=True)
class Layout:
    """One real bundle: its folder name, the captured hostname and the sections (kind -> text)."""

    name: str
    hostname: str
    sections: dict

    @property
    def short(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")[:24]


def load_layouts(names: list[str] | None = None) -> list[Layout]:
    """The real bundles (sorted; duplicates of the same captures kept once), or those ``names``."""
    from apps.domain.bundle import read_bundle  # the domain's own bundle reader

    layouts, seen = [], set()
    for folder in sorted(p for p in BUNDLES.iterdir() if p.is_dir()):
        if folder.name.startswith("synthetic") or (names is not None and folder.name not in names):
            continue
        hostname, sections = read_bundle(folder)
        digest = hashlib.sha256(json.dumps(sections, sort_keys=True).encode()).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        layouts.append(Layout(folder.name, hostname or folder.name, sections))
    if names is not None:
        missing = sorted(set(names) - {lay.name for lay in layouts})
        if missing:
            raise ValueError(f"no bundle named {', '.join(missing)} in {BUNDLES}")
    return layouts


# ------------------------------------------------------------------------------------ faults


def _narrow_lspci(text: str) -> str | None:
    lines = text.splitlines(keepends=True)
    in_gpu = False
    for i, line in enumerate(lines):
        if line[:1] not in (" ", "\t", "\n", "\r") and line.strip():
            in_gpu = "NVIDIA" in line and ("3D controller" in line or "VGA compatible" in line)
        elif in_gpu and "LnkSta:" in line and "Width x16" in line:
            new = re.sub(r"Width x16( \((ok|downgraded)\))?", "Width x8 (downgraded)", line, count=1)
            lines[i] = new
            return "".join(lines)
    return None


def _narrow_nccl_xml(text: str) -> str | None:
    m = re.search(r'<pci [^>]*class="0x03[^"]*"[^>]*link_width="16"', text)
    if not m:
        return None
    start, end = m.span()
    return text[:start] + text[start:end].replace('link_width="16"', 'link_width="8"') + text[end:]


_PORT_DOWN: dict[str, list[tuple[str, str]]] = {
    # kind -> (pattern of the first up port's state line, replacement), then the physical state
    "ibstat": [(r"State: Active", "State: Down"), (r"Physical state: LinkUp", "Physical state: Disabled")],
    "ibstatus": [(r"state:(\s+)4: ACTIVE", r"state:\g<1>1: DOWN"),
                 (r"phys state:(\s+)5: LinkUp", r"phys state:\g<1>3: Disabled")],
    "ibv_devinfo": [(r"PORT_ACTIVE \(4\)", "PORT_DOWN (1)"), (r"LINK_UP \(5\)", "DISABLED (3)")],
}


def _port_down(kind: str) -> Callable[[str], str | None]:
    def apply(text: str) -> str | None:
        (state, down), (phys, disabled) = _PORT_DOWN[kind]
        m = re.search(state, text)
        if not m:
            return None
        text = text[:m.start()] + re.sub(state, down, text[m.start():], count=1)
        p = re.search(phys, text[m.start():])
        if p:  # the physical state follows the state within the same port block
            at = m.start() + p.start()
            text = text[:at] + re.sub(phys, disabled, text[at:], count=1)
        return text
    return apply




def _swap(text: str, a: str, b: str) -> str:
    pattern = re.compile(rf"(?<![\w])({re.escape(a)}|{re.escape(b)})(?![\w])")
    return pattern.sub(lambda m: b if m.group(1) == a else a, text)


def _move_nic_topo(text: str) -> str | None:
    names = sorted({n for n in re.findall(r"(?<![\w])(mlx\d+_\d+)(?![\w])", text)}, key=_natural)
    if len(names) < 2:
        return None
    return _swap(text, names[0], names[len(names) // 2])


def _move_nic_nccl_xml(text: str) -> str | None:
    names = sorted(set(re.findall(r'<net [^>]*name="([^"]+)"', text)), key=_natural)
    if len(names) < 2:
        return None
    a, b = names[0], names[len(names) // 2]
    return re.sub(rf'name="({re.escape(a)}|{re.escape(b)})"', lambda m: f'name="{b if m.group(1) == a else a}"',
                  text)


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


# fault -> [(section kind, transform)]: the first kind present whose transform applies is used.
_FAULT_EDITS: dict[str, list[tuple[str, Callable[[str], str | None]]]] = {
    "narrowed_link": [("lspci_verbose", _narrow_lspci), ("nccl_topo_xml", _narrow_nccl_xml)],
    "port_down": [(k, _port_down(k)) for k in ("ibstat", "ibstatus", "ibv_devinfo")],
    "moved_nic": [("nvidia_smi_topo", _move_nic_topo), ("nccl_topo_xml", _move_nic_nccl_xml)],
}


def apply_fault(sections: dict, fault: str) -> dict | None:
    """A copy of ``sections`` with ``fault`` written in, or None when these sections cannot show it."""
    for kind, edit in _FAULT_EDITS[fault]:
        if kind in sections:
            changed = edit(sections[kind])
            if changed is not None and changed != sections[kind]:
                return {**sections, kind: changed}
    return None


def faults_for(layout: Layout) -> list[str]:
    """The faults this layout's sections can show."""
    return [f for f in FAULTS if apply_fault(layout.sections, f) is not None]


# ------------------------------------------------------------------------------------ reports


def synthetic_report(layout: Layout, index: int, fault: str | None = None, *, cluster: str = "synth") -> dict:
    """One ``topoweb.report/1`` document: ``layout``'s real sections under a synthetic name."""
    sections = dict(layout.sections)
    if fault is not None:
        faulty = apply_fault(sections, fault)
        if faulty is None:
            raise ValueError(f"layout {layout.name} cannot show fault {fault}")
        sections = faulty
    hostname = f"synth-{layout.short}-{index:04d}"
    return {
        "schema": REPORT_SCHEMA,
        "hostname": hostname,
        "collected_at": "2025-01-31T12:00:00Z",
        "agent_version": AGENT_VERSION,
        "meta": {"synthetic": True, "generator": "bench.synth", "cluster": cluster, "layout": layout.name,
                 "captured_hostname": layout.hostname, "fault": fault},
        "sections": sections,
        "unavailable": {},
    }


def iter_reports(n: int, *, seed: int = 0, fault_every: int = 8, layouts: list[Layout] | None = None,
                 cluster: str = "synth") -> Iterator[dict]:
    """``n`` synthetic host reports: layouts taken in turn (shuffled per round), one host in
    ``fault_every`` given a fault its sections can show (``fault_every=0``: no faults)."""
    layouts = layouts if layouts is not None else load_layouts()
    if not layouts:
        raise ValueError(f"no real bundles under {BUNDLES}")
    rng = random.Random(seed)
    possible = {lay.name: faults_for(lay) for lay in layouts}
    order: list[Layout] = []
    for i in range(n):
        if not order:
            order = list(layouts)
            rng.shuffle(order)
        layout = order.pop()
        fault = None
        if fault_every and i % fault_every == fault_every - 1 and possible[layout.name]:
            fault = rng.choice(possible[layout.name])
        yield synthetic_report(layout, i, fault, cluster=cluster)


def generate_reports(n: int, **kwargs) -> list[dict]:
    """``list(iter_reports(n, ...))``."""
    return list(iter_reports(n, **kwargs))


def report_bytes(report: dict) -> bytes:
    """The body an agent would POST."""
    return json.dumps(report, ensure_ascii=False).encode("utf-8")


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.synth N OUTDIR``: write N reports as OUTDIR/<hostname>.json."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m bench.synth", description=main.__doc__)
    p.add_argument("n", type=int)
    p.add_argument("outdir", type=Path)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fault-every", type=int, default=8)
    args = p.parse_args(argv)
    args.outdir.mkdir(parents=True, exist_ok=True)
    for r in iter_reports(args.n, seed=args.seed, fault_every=args.fault_every):
        (args.outdir / f"{r['hostname']}.json").write_bytes(report_bytes(r))
    print(f"wrote {args.n} synthetic reports to {args.outdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
