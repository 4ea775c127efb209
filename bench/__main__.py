"""python -m bench [GROUP ...]: run the benchmarks, print one table, write bench/results/latest.json.

Groups (all by default, in this order):

  parsers   parse time per kind, a 16 GPU x 16 NIC topo -m, a 10,000-line lspci -vvv
  engine    host graph build per real layout (target 20 ms for 8-GPU/8+-NIC hosts), whole
            analysis, path query p50/p95 over 1,024 synthetic hosts (target p95 5 ms)
  fabric    cross-host path query through a synthetic 2,000-switch fabric joined to 1,024
            hosts (target p95 5 ms), building the fabric view
  pages     server time and payload of the host, cluster (256 and 1,024 hosts), path and compare
            pages (bench PostgreSQL, filled once by the generator)
  peers     lstopo drawing a host from hwloc XML vs our analysis + host page; raw psycopg INSERT
            vs our ingest accept; ratios
  browser   time to interactive of the host and cluster pages in headless Chromium
  pipeline  end-to-end ingest of 1,024 synthetic hosts with 1 and 2 workers (private PostgreSQL
            and Redis), scaling ratio
  rebuild   rebuild_snapshots over 1 and 2 Celery workers (private PostgreSQL and Redis), snapshots/s
  ingest    ingestion figures (bench/ingest.py: one worker's throughput, accept
            latency under 50 concurrent agents), run in a subprocess of its own
  ui        page figures (bench/ui.py) when present, also in a subprocess
  scale     a synthetic 16,384-host fleet in the bench PostgreSQL: cluster page interactive, path
            query p95, whole-machine lspci ingest, bytes per snapshot, path index memory, rebuild
            rate (bench/scale.py); not in the default run (minutes to fill): name it

Figures are medians over repeated runs with the p10-p90 spread (p95 where the tail matters) and
the ratio to each target (below 1.0 meets it). A run of some groups keeps the other groups of the
previous latest.json, each with the time it was measured. Groups that need Django share the bench database
(``bench.db``, TOPOWEB_BENCH_DATABASE_URL); a group that fails is reported and the others run.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

from bench.timing import Measure, print_table

ROOT = Path(__file__).resolve().parent.parent
GROUPS = ["parsers", "engine", "fabric", "pages", "peers", "browser", "pipeline", "rebuild", "ingest", "ui", "scale"]
DEFAULT_OFF = {"scale"}
DJANGO_GROUPS = {"pages", "peers", "browser", "scale"}
SUBPROCESS_GROUPS = {"ingest", "ui"}  # others' modules: their own Django settings and services
MARK = "@@BENCH-JSON@@"


def _subprocess_group(group: str) -> dict:
    code = (f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); import bench.{group} as m; "
            f"print({MARK!r} + json.dumps(m.run(), default=str))")
    env = {k: v for k, v in os.environ.items() if k != "TOPOWEB_DATABASE_URL"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=3600)
    for line in reversed(out.stdout.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    raise RuntimeError(f"bench.{group} failed ({out.returncode}): {out.stderr[-1500:]}")


def _unit(key: str) -> str:
    key = key.lower()
    if key.endswith("_ms") or "_ms_" in key or key.endswith("ms"):
        return "ms"
    if "per_s" in key or "per_second" in key:
        return "reports/s"
    if key.endswith("_kb") or "_kb_" in key:
        return "KiB"
    if "seconds" in key:
        return "s"
    return ""


def _flatten(prefix: str, value) -> list[Measure]:
    """Rows for another group's dict: a dict with "median" (p10, p90, runs, target) or "value" is one
    row; a numeric leaf with a unit in its name is one row, taking a sibling "target..." of the same
    unit as its target; a count of lost uploads is kept too; other counts stay in the JSON only."""
    rows: list[Measure] = []
    if not isinstance(value, dict):
        return rows
    num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    if num(value.get("median")) or num(value.get("value")):
        key = prefix.rsplit(" ", 1)[-1]
        med = value.get("median", value.get("value"))
        m = Measure(prefix, float(med), float(value.get("p10", med)), float(value.get("p90", med)),
                    int(value.get("runs", 1)), value.get("target"), unit=_unit(key))
        if num(value.get("p95")):
            m.p95_ms = float(value["p95"])
        return [m]
    targets = {(_unit(k), "p95" in k): v for k, v in value.items() if k.startswith("target") and num(v)}
    for k, v in value.items():
        if isinstance(v, dict):
            rows += _flatten(f"{prefix} {k}", v)
        elif num(v) and not k.startswith("target") and (_unit(k) or k == "lost"):
            unit = _unit(k)
            rows.append(Measure(f"{prefix} {k}", float(v), float(v), float(v), 1,
                                targets.get((unit, "p95" in k)), unit=unit or "count"))
    return rows


def _write(path: Path, report: dict) -> None:
    """``report`` into ``path``, keeping the groups of the previous file this run did not measure."""
    try:
        previous = json.loads(path.read_text())
    except (OSError, ValueError):
        previous = {}
    kept = {g: v for g, v in (previous.get("groups") or {}).items() if g not in report["groups"]}
    for v in kept.values():
        v.setdefault("when", previous.get("when"))
    report["groups"] = {**kept, **report["groups"]}
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")


def main(argv: list[str]) -> int:
    groups = argv or [g for g in GROUPS if g not in DEFAULT_OFF and (g != "ui" or (ROOT / "bench" / "ui.py").exists())]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        print(f"unknown group(s) {unknown}; groups: {', '.join(GROUPS)}")
        return 2
    report = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": platform.python_version(),
              "cpus": os.cpu_count(), "machine": platform.machine(), "loadavg_start": os.getloadavg(), "groups": {}, "failed": {}}
    if DJANGO_GROUPS & set(groups):
        from bench import db

        report["database"] = db.setup().rsplit("@", 1)[-1]
    all_rows: list[Measure] = []
    for group in groups:
        print(f"\n== {group} ==", flush=True)
        start = time.perf_counter()
        try:
            if group in SUBPROCESS_GROUPS:
                raw = _subprocess_group(group)
            else:
                raw = importlib.import_module(f"bench.{group}").run()
        except Exception as exc:  # one broken group must not hide the others' figures
            traceback.print_exc()
            report["failed"][group] = f"{type(exc).__name__}: {exc}"[:2000]
            continue
        rows = raw if isinstance(raw, list) else _flatten(group, raw)
        if rows:
            print_table(rows)
        report["groups"][group] = {"rows": [r.as_dict() for r in rows], "seconds": round(time.perf_counter() - start, 1),
                                   "when": report["when"]}
        if not isinstance(raw, list):
            report["groups"][group]["raw"] = raw
        all_rows += rows
    report["loadavg_end"] = os.getloadavg()  # the machine is shared: figures move with its load
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    _write(out / "latest.json", report)
    targets = [r for r in all_rows if r.ratio is not None and r.unit != "x"]
    if targets:
        print("\n== targets ==")
        for r in targets:
            verdict = "meets" if r.ratio <= 1.0 else "MISSES"
            print(f"{verdict:<7} {r.name} ({r.target_on} {'>=' if r.unit in ('reports/s',) else '<='} "
                  f"{r.target_ms:g} {r.unit}; ratio {r.ratio:.3f})")
    if report["failed"]:
        print(f"\nfailed groups: {', '.join(report['failed'])}")
    print(f"\nload average {report['loadavg_start'][0]:.1f} at start, {report['loadavg_end'][0]:.1f} at end "
          f"({os.cpu_count()} CPUs)")
    print(f"wrote {out / 'latest.json'}")
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
