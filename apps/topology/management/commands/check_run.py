"""python manage.py check_run FILE [--kind K] [--bundle DIR ...] [--topo F --ibstat F ...] [--hostname H]
[--format json|text]: a measurement (nccl-tests, an NCCL log, perftest, a P2P test) against the layout
of the hosts it ran on -- measured, expected, the verdict and the evidence.

Layouts: each ``--bundle`` is one host (its ``hostname.txt`` or folder name); the per-file options
(``--topo``, ``--ibstat``, ... as ``analyze`` takes them) are one more host named ``--hostname``.
A run's host takes the layout of the same name (or short name); when one layout is given it
stands for every host of the run (a fleet of identical nodes), and the result says so. Without
any layout the run is read and diagnosed from its own lines, and its verdict is not_comparable.

Exit status 0 when the run was read and checked (whatever the verdict), 2 when FILE or a layout
cannot be read (``FILE:LINE: reason`` on stderr).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.domain.errors import ParseError, UnknownKindError
from apps.domain.parsers.text import clean_lines
from apps.domain.run_causes import size_text
from apps.domain.run_node import NODE_KINDS
from apps.domain.runs import RUN_KINDS, check_run, read_run, run_hosts
from apps.topology.management.commands.analyze import add_host_arguments, analyze_or_exit, read_host


GIVEN = "given-layout"  # the name of the per-file options' host when --hostname is not given


class Command(BaseCommand):
    help = "Check a measurement (nccl-tests, NCCL log, perftest, P2P test) against the hosts' layout."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="the run's output ('-' reads standard input)")
        parser.add_argument("--kind", choices=["auto", *RUN_KINDS], default="auto")
        add_host_arguments(parser, bundles="many")
        parser.add_argument("--format", choices=["json", "text"], default="json")

    def handle(self, *args, file: str, kind: str, bundle: list[str], hostname: str | None, format: str,
               **options) -> None:
        text = _read_run_file(file)
        try:
            kind, parsed = read_run(text, kind)
        except ParseError as exc:
            self.stderr.write(f"{file}:{exc.line_no}: {exc.reason}")
            if exc.line.strip():
                self.stderr.write(f"    {exc.line.rstrip()}")
            sys.exit(2)
        except UnknownKindError as exc:
            self.stderr.write(f"{file}:0: {exc}")
            sys.exit(2)
        layouts, evidence = self._layouts(bundle, hostname, options)
        docs, notes = layouts_for_run(kind, parsed, layouts)
        result = check_run(kind, parsed, docs, raw_lines=clean_lines(text), name=file,
                           host_sections=evidence_for_run(docs, layouts, evidence))
        result["warnings"] = notes + result["warnings"]
        self.stdout.write(json.dumps(result, indent=2) if format == "json" else render_text(result, file))

    def _layouts(self, bundles: list[str], hostname: str | None,
                 options: dict) -> tuple[list[tuple[str, dict]], dict[str, dict]]:
        """``([(hostname, document)], {hostname: node evidence sample})``: each host's layout, and its
        ``show_gids`` / ``ib_counters`` / ``ethtool_stats`` texts for the causes that quote them."""
        out, evidence = [], {}
        hosts = [(b, *read_host(b, {})) for b in bundles]
        _name, sections, files = read_host(None, options)
        if sections:
            hosts.append((None, hostname or GIVEN, sections, files))
        for where, name, sections, files in hosts:
            doc = analyze_or_exit(self, sections, name or Path(where).name, files)
            out.append((doc["hostname"], doc))
            texts = {k: v for k, v in sections.items() if k in NODE_KINDS}
            if texts:
                evidence[doc["hostname"]] = {"source": where or ", ".join(files[k] for k in texts), "sections": texts}
        return out, evidence


def _read_run_file(file: str) -> str:
    if file == "-":
        return sys.stdin.read()
    path = Path(file)
    if not path.is_file():
        raise CommandError(f"{file}: no such file", returncode=2)
    return path.read_bytes().decode("utf-8", errors="replace")


def _short(name: str) -> str:
    return name.split(".")[0].lower()


def layouts_for_run(kind: str, parsed: dict, layouts: list[tuple[str, dict]]) -> tuple[dict[str, dict], list[str]]:
    """``({run host: document}, notes)``: each host of the run gets the layout of its name (or
    short name); one layout alone stands for every host; an output naming no host runs on the
    layouts given."""
    names = [h["host"] for h in run_hosts(kind, parsed) if h["host"]]
    if not names:
        return dict(layouts[:1] if kind == "perftest" else layouts), []
    by_name = {_short(n): doc for n, doc in layouts}
    docs = {n: by_name[_short(n)] for n in names if _short(n) in by_name}
    notes = []
    if not docs and len(layouts) == 1:
        docs = {n: layouts[0][1] for n in names}
        which = "the layout given" if layouts[0][0] == GIVEN else f"the layout of {layouts[0][0]}"
        notes.append(f"{which} stands for every host of the run ({', '.join(names)})")
    return docs, notes


def evidence_for_run(docs: dict[str, dict], layouts: list[tuple[str, dict]],
                     evidence: dict[str, dict]) -> dict[str, list[dict]]:
    """``{run host: [sample]}``: the node evidence of the layout each run host was given."""
    by_doc = {id(doc): name for name, doc in layouts}
    out = {}
    for run_host, doc in docs.items():
        sample = evidence.get(by_doc.get(id(doc)))
        if sample:
            out[run_host] = [sample]
    return out


def _pct(value) -> str:
    return "-" if value is None else f"{value:.0%}"


def _num(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def render_text(r: dict, file: str) -> str:
    """Measured against expected, the verdict, each cause with its ``FILE:LINE`` evidence, the points."""
    m, e = r.get("measured") or {}, r.get("expected") or {}
    lines = [f"{file}: {r['kind']}" + (f" {m['collective']}" if m.get("collective") else "") +
             (f", {e['nodes']} node(s) x {e['ranks_per_node']} GPUs" if e.get("nodes") else ""),
             f"verdict: {r['verdict']}" + (f" ({_pct(r['efficiency'])} of expected)" if r.get("efficiency") else ""),
             f"  {r['reason']}"]
    if m:
        lines.append(f"measured: {m['value']:.2f} {m['unit']}  {m.get('what', '')}")
    if e:
        value = e.get("value") if e.get("value") is not None else e.get("plateau")
        lines.append(f"expected: {_num(value)} {e.get('unit', '')}{' *' if e.get('assumed') else ''}"
                     f"  limit: {e.get('limit') or 'unknown'}" + (f" ({e['host']})" if e.get("host") else ""))
        lines += [f"  note: {n}" for n in e.get("notes") or []]
    for f in r["findings"]:
        where = f" ({', '.join(f['hosts'])})" if f.get("hosts") else ""
        lines += ["", f"[{f['severity']}] {f['rule']} {f['title']}{where}", f"    {f['message']}"]
        for i in f["evidence"]:
            ev = r["evidence"][i]
            lines.append(f"    {ev.get('file') or file}:{ev['line'] or 0}: {ev['text']}")
            lines.append(f"        -> {ev['means']}")
        lines += [f"    layout: {x['rule']} {x['title']} ({x['host']})" for x in f.get("layout") or []]
        lines.append(f"    fix: {f['fix']}")
    points = r.get("points") or []
    if points:
        unit = "Gb/s" if r["kind"] == "perftest" else "GB/s"
        key_m, key_e = ("measured_gbit", "expected_gbit") if r["kind"] == "perftest" else (
            "measured_busbw_gbs", "expected_busbw_gbs")
        lines += ["", f"{'size':>10}  {'measured ' + unit:>14}  {'expected ' + unit:>14}  of expected"]
        for p in points:
            ratio = p[key_m] / p[key_e] if p.get(key_m) is not None and p.get(key_e) else None
            lines.append(f"{size_text(p['size_bytes']):>10}  {_num(p.get(key_m)):>14}  {_num(p.get(key_e)):>14}  "
                         f"{_pct(ratio):>8}")
    if r.get("warnings"):
        lines += ["", "warnings:"] + [f"  {w}" for w in r["warnings"]]
    return "\n".join(lines)
