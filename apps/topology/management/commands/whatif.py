"""python manage.py whatif (--bundle DIR | --topo F --ibstat F ... | --snapshot ID) --edits E.json
[--hostname H] [--format json|text]: one host with edits applied (apps.domain.whatif), analysed
again beside the original.

JSON prints ``{"before": <document>, "after": <document>, "changes": <compare output>}``; text
prints what changed, then the edited host's tables (``analyze --format text``). ``--snapshot``
reads the database (an operator tool: no access check). A bad edit, an unreadable capture or an
unknown snapshot exits 2 with a message naming it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.domain.errors import ParseError, UnknownKindError
from apps.domain.whatif import WhatIfError, whatif
from apps.topology.management.commands.analyze import add_host_arguments, read_host, render_text


class Command(BaseCommand):
    help = "Apply what-if edits to one host and print the analysis before and after, and what changed."

    def add_arguments(self, parser) -> None:
        add_host_arguments(parser)
        parser.add_argument("--snapshot", type=int, metavar="ID", help="a stored snapshot as the base")
        parser.add_argument("--edits", required=True, metavar="E.json", help="JSON list of edits ('-' = stdin)")
        parser.add_argument("--format", choices=["json", "text"], default="json")

    def handle(self, *args, bundle: str | None, hostname: str | None, snapshot: int | None, edits: str,
               format: str, **options) -> None:
        edit_list = _read_edits(edits)
        name, sections, files = read_host(bundle, options)
        if bool(sections) == bool(snapshot):
            raise CommandError("give the host one way: --bundle DIR, capture files (--topo F ...) or --snapshot ID",
                               returncode=2)
        base = _snapshot_base(snapshot) if snapshot else sections
        try:
            result = whatif(base, edit_list, hostname=hostname or name)
        except WhatIfError as exc:
            raise CommandError(f"{edits}: {exc}", returncode=2) from None
        except ParseError as exc:
            self.stderr.write(f"{files.get(exc.kind, exc.kind)}:{exc.line_no}: {exc.reason}")
            sys.exit(2)
        except UnknownKindError as exc:
            raise CommandError(str(exc), returncode=2) from None
        if format == "json":
            self.stdout.write(json.dumps(result, indent=2, sort_keys=True))
        else:
            self.stdout.write(render_changes(result))


def render_changes(result: dict) -> str:
    """What the edits changed (compare's sentences, the estimate before -> after), then the
    edited host's tables."""
    before, after, changes = result["before"], result["after"], result["changes"]
    lines = ["Plan (what-if, not reported): " + (f"{len(changes['summary'])} changes" if changes["changed"]
                                                else "no change"), ""]
    lines += [f"  {s}" for s in changes["summary"]]
    a = {p["nodes"]: p for p in (before.get("estimate") or {}).get("points") or []}
    b = {p["nodes"]: p for p in (after.get("estimate") or {}).get("points") or []}
    if a or b:
        lines += ["", "Expected all-reduce busbw, GB/s (before -> after):"]
        for n in sorted(set(a) | set(b)):
            x, y = a.get(n), b.get(n)
            lines.append(f"  {n:>3} nodes: {_point(x)} -> {_point(y)}")
    lines += ["", "After the edits:", render_text(after)]
    return "\n".join(lines)


def _point(p: dict | None) -> str:
    return "-" if p is None else f"{p['busbw_gbs']:.1f} ({p.get('algorithm', '')})"


def _read_edits(path: str) -> list:
    if path == "-":
        text = sys.stdin.read()
    else:
        file = Path(path)
        if not file.is_file():
            raise CommandError(f"{path}: no such file", returncode=2)
        text = file.read_text(encoding="utf-8", errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path}:{exc.lineno}: not JSON: {exc.msg}", returncode=2) from None


def _snapshot_base(pk: int):
    from apps.ingest import plans

    try:
        return plans.snapshot_base(pk)
    except LookupError as exc:
        raise CommandError(str(exc), returncode=2) from None
