"""python manage.py parse KIND FILE [--format json|text]: print what a parser reads from FILE."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.domain.errors import ParseError, UnknownKindError
from apps.domain.parsers import ALL_KINDS, detect_kind, to_jsonable


class Command(BaseCommand):
    help = "Parse one captured command output and print the records (KIND may be 'auto')."

    def add_arguments(self, parser) -> None:
        parser.add_argument("kind", help=f"one of: auto, {', '.join(ALL_KINDS)}")
        parser.add_argument("file", help="the captured output ('-' reads standard input)")
        parser.add_argument("--format", choices=["json", "text"], default="json")

    def handle(self, *args, kind: str, file: str, format: str, **options) -> None:
        text = self._read(file)
        try:
            if kind == "auto":
                kind = detect_kind(text)
                self.stderr.write(f"{file}: detected kind {kind}")
            if kind not in ALL_KINDS:
                raise CommandError(f"unknown kind {kind!r}; known kinds: auto, {', '.join(ALL_KINDS)}", returncode=2)
            result = ALL_KINDS[kind].parse(text)
        except ParseError as exc:
            self.stderr.write(f"{file}:{exc.line_no}: {exc.reason}")
            if exc.line.strip():
                self.stderr.write(f"    {exc.line.rstrip()}")
            sys.exit(2)
        except UnknownKindError as exc:
            self.stderr.write(f"{file}:0: {exc}")
            sys.exit(2)
        data = to_jsonable(result)
        if format == "json":
            self.stdout.write(json.dumps(data, indent=2, sort_keys=True))
        else:
            self.stdout.write(render_text(kind, data))

    @staticmethod
    def _read(file: str) -> str:
        if file == "-":
            return sys.stdin.read()
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"{file}: no such file", returncode=2)
        return path.read_bytes().decode("utf-8", errors="replace")


def render_text(kind: str, data: dict) -> str:
    """A readable outline of any parser result: scalars, then each list as an indented block."""
    lines = [f"kind: {kind}"]

    def walk(value, indent: int, label: str) -> None:
        pad = "  " * indent
        if isinstance(value, dict):
            if label:
                lines.append(f"{pad}{label}:")
            scalars = {k: v for k, v in value.items() if not isinstance(v, (dict, list))}
            if scalars:
                lines.append(pad + ("  " if label else "") + ", ".join(f"{k}={_fmt(v)}" for k, v in scalars.items()))
            for k, v in value.items():
                if isinstance(v, (dict, list)) and v:
                    walk(v, indent + (1 if label else 0), k)
        elif isinstance(value, list):
            lines.append(f"{pad}{label} ({len(value)}):")
            for item in value:
                if isinstance(item, (dict, list)):
                    walk(item, indent + 1, "-")
                else:
                    lines.append(f"{pad}  - {_fmt(item)}")

    walk(data, 0, "")
    return "\n".join(lines)


def _fmt(value) -> str:
    if value is None:
        return "-"
    return str(value)
