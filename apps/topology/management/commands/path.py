"""python manage.py path --bundle A_DIR --bundle B_DIR --src HOST/GPU<i> --dst HOST/GPU<j>:
print the hops from one GPU's memory to another's, with bandwidths and the bottleneck marked."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from apps.domain.analysis import analyze_host
from apps.domain.bundle import BundleError, read_bundle
from apps.domain.cluster import ClusterIndex
from apps.domain.errors import ParseError, UnknownKindError


class Command(BaseCommand):
    help = "Trace GPU memory -> (remote) GPU memory between hosts given as bundle folders."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--bundle", action="append", required=True, help="bundle folder (repeat per host)")
        parser.add_argument("--src", required=True, help="HOST/GPU<i>")
        parser.add_argument("--dst", required=True, help="HOST/GPU<j>")
        parser.add_argument("--format", choices=["json", "text"], default="text")

    def handle(self, *args, bundle: list[str], src: str, dst: str, format: str, **options) -> None:
        index = ClusterIndex()
        for folder in bundle:
            try:
                hostname, sections = read_bundle(folder)
                index.add(analyze_host(sections, hostname or folder.rstrip("/").rsplit("/", 1)[-1]).doc)
            except BundleError as exc:
                raise CommandError(str(exc), returncode=2) from None
            except ParseError as exc:
                self.stderr.write(f"{folder}/{exc.kind}:{exc.line_no}: {exc.reason}")
                sys.exit(2)
            except UnknownKindError as exc:
                self.stderr.write(str(exc))
                sys.exit(2)
        try:
            result = index.path(src, dst)
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        if format == "json":
            self.stdout.write(json.dumps(result, indent=2, sort_keys=True))
            return
        self.stdout.write(render_path(result))


def _g(v) -> str:
    return "-" if v is None else f"{v:.1f}"


def _figures(h: dict) -> str:
    if h["spec_gbs"] is None and h["expected_gbs"] is None:
        return {"cpu_link": "inside the CPU", "host_memory_copy": "copy in host memory"}.get(
            h["kind"], "bandwidth not reported")
    text = f"{_g(h['expected_gbs'])} GB/s expected (spec {_g(h['spec_gbs'])})"
    return text + (", assumed" if h.get("assumed") else "")


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
    lines.append(result["explanation"])
    return "\n".join(lines)
