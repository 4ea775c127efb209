"""python manage.py path --bundle A_DIR --bundle B_DIR --src HOST/GPU<i> --dst HOST/GPU<j> [--fabric FILE]:
print the hops from one GPU's memory to another's, with bandwidths and the bottleneck marked; with
``--fabric`` (an ``ibnetdiscover`` or ``iblinkinfo`` capture) the hosts' NICs are joined to the
fabric (by port GUID from the bundles' ibstat/ibstatus/ibv_devinfo/sysfs_ib, else by node
description) and the route goes through its switches."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.domain.analysis import HostAnalysis, analyze_host
from apps.domain.bundle import BundleError, read_bundle
from apps.domain.cluster import ClusterIndex
from apps.domain.errors import ParseError, UnknownKindError
from apps.domain.fabric import attach_hosts, build_fabric
from apps.domain.fabric_paths import FabricView, host_ports_of
from apps.domain.parsers import detect_kind, parse

FABRIC_KINDS = ("ibnetdiscover", "iblinkinfo")  # the fabric kinds that list links


class Command(BaseCommand):
    help = "Trace GPU memory -> (remote) GPU memory between hosts given as bundle folders."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--bundle", action="append", required=True, help="bundle folder (repeat per host)")
        parser.add_argument("--src", required=True, help="HOST/GPU<i>")
        parser.add_argument("--dst", required=True, help="HOST/GPU<j>")
        parser.add_argument("--fabric", help="an ibnetdiscover or iblinkinfo capture of the fabric joining the hosts")
        parser.add_argument("--format", choices=["json", "text"], default="text")

    def handle(self, *args, bundle: list[str], src: str, dst: str, format: str, fabric: str | None = None,
               **options) -> None:
        index = ClusterIndex()
        analyses: list[HostAnalysis] = []
        for folder in bundle:
            try:
                hostname, sections = read_bundle(folder)
                analyses.append(analyze_host(sections, hostname or folder.rstrip("/").rsplit("/", 1)[-1]))
            except BundleError as exc:
                raise CommandError(str(exc), returncode=2) from None
            except ParseError as exc:
                self.stderr.write(f"{folder}/{exc.kind}:{exc.line_no}: {exc.reason}")
                sys.exit(2)
            except UnknownKindError as exc:
                self.stderr.write(str(exc))
                sys.exit(2)
            index.add(analyses[-1].doc)
        if fabric:
            index.fabric = fabric_view(fabric, analyses)
        try:
            result = index.path(src, dst)
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        if format == "json":
            self.stdout.write(json.dumps(result, indent=2, sort_keys=True))
            return
        self.stdout.write(render_path(result))


def fabric_view(path: str, analyses: list[HostAnalysis]) -> FabricView:
    """The fabric capture at ``path`` with the analysed hosts attached; errors as ``FILE:LINE: reason``."""
    file = Path(path)
    if not file.is_file():
        raise CommandError(f"{path}: no such file", returncode=2)
    text = file.read_bytes().decode("utf-8", errors="replace")
    try:
        kind = detect_kind(text, family="fabric")
    except UnknownKindError as exc:
        raise CommandError(f"{path}: {exc}", returncode=2) from None
    if kind not in FABRIC_KINDS:
        raise CommandError(f"{path}: this is {kind} output, which lists no links; give ibnetdiscover or iblinkinfo "
                           "output", returncode=2)
    try:
        G = build_fabric(parse(kind, text))
    except ParseError as exc:
        raise CommandError(f"{path}:{exc.line_no}: {exc.reason}", returncode=2) from None
    ports = host_ports_of({a.hostname: a.results for a in analyses})
    return FabricView.build(G, attach_hosts(G, ports))


def _g(v) -> str:
    return "-" if v is None else f"{v:.1f}"


def _figures(h: dict) -> str:
    if h["spec_gbs"] is None and h["expected_gbs"] is None:
        return {"cpu_link": "inside the CPU", "host_memory_copy": "copy in host memory"}.get(
            h["kind"], "bandwidth not reported")
    text = f"{_g(h['expected_gbs'])} GB/s expected (spec {_g(h['spec_gbs'])})"
    return text + (", assumed" if h.get("assumed") else "")


def _fabric_line(result: dict) -> str | None:
    if result.get("fabric") == "discovered":
        cut = result.get("fabric_cut") or {}
        text = (f"fabric: discovered; {result['equal_cost_paths']} equal-cost route(s) "
                f"({result['equal_cost_port_paths']} counting parallel cables)")
        if cut.get("gbs") is not None:
            text += f"; narrowest cut {_g(cut['gbs'])} GB/s per direction ({cut['where']})"
        return text
    if result.get("fabric") == "assumed":
        why = f": {result['fabric_reason']}" if result.get("fabric_reason") else ""
        return f"fabric: assumed (one non-blocking switch per rail){why}"
    return None


def render_path(result: dict) -> str:
    """Hop list, GB/s per direction; the slowest hop marked; each distinct note printed once."""
    lines = [f"{result['src']} -> {result['dst']} ({result['mechanism']}; GB/s per direction)"]
    seen: set[str] = set()
    for i, h in enumerate(result["hops"]):
        where = f"{h['host']}: " if h.get("host") else "fabric: "
        flows = h.get("flows", 1) or 1
        row = (f"  {i + 1:>2}. {where}{h['from']} -> {h['to']}  [{h['kind'].replace('_', ' ')}]  {_figures(h)}"
               + (f", shared by {flows} flows" if flows > 1 else ""))
        if i == result["bottleneck"]:
            row += "  <== bottleneck"
        lines.append(row)
        if h.get("note") and h["note"] not in seen:
            seen.add(h["note"])
            lines.append(f"        {h['note']}")
    lines.append(f"bottleneck: {_g(result['bottleneck_gbs'])} GB/s per direction")
    fabric = _fabric_line(result)
    if fabric:
        lines.append(fabric)
    lines.append(result["explanation"])
    return "\n".join(lines)
