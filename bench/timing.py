"""Small timing helpers: medians over repeated runs with the spread, never a single sample.

A ``Measure`` is one row of the table: a median with its p10-p90 spread (and p95 where the tail
matters, e.g. query latency), in a unit (``ms`` by default; ``reports/s``, ``KiB``, ``x`` for a
ratio). ``ratio`` compares the median with the target so that below 1.0 always meets it (for a
unit where higher is better, such as a throughput, it is target / median).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Iterable

HIGHER_IS_BETTER = {"reports/s", "queries/s"}


@dataclass
class Measure:
    name: str
    median_ms: float
    p10_ms: float
    p90_ms: float
    runs: int
    target_ms: float | None = None
    note: str = ""
    unit: str = "ms"
    p95_ms: float | None = None
    target_on: str = "median"  # or "p95": which figure the target applies to

    @property
    def ratio(self) -> float | None:
        """figure / target (target / figure for throughputs): below 1.0 meets the target."""
        value = self.p95_ms if self.target_on == "p95" else self.median_ms
        if not self.target_ms or not value:
            return None
        if self.unit in HIGHER_IS_BETTER:
            return self.target_ms / value
        return value / self.target_ms

    def as_dict(self) -> dict:
        r = lambda v: None if v is None else round(v, 4)  # noqa: E731
        return {
            "name": self.name, "unit": self.unit, "median": r(self.median_ms), "p10": r(self.p10_ms),
            "p90": r(self.p90_ms), "p95": r(self.p95_ms), "runs": self.runs, "target": self.target_ms,
            "target_on": self.target_on, "ratio_to_target": None if self.ratio is None else round(self.ratio, 3), "note": self.note,
        }


def summarize(name: str, samples: Iterable[float], *, target_ms: float | None = None, note: str = "",
              unit: str = "ms") -> Measure:
    """A Measure of already-taken samples (median, p10, p90, p95)."""
    s = sorted(samples)
    if not s:
        raise ValueError(f"{name}: no samples")
    if len(s) >= 2:
        dec = statistics.quantiles(s, n=10, method="inclusive")
        p95 = statistics.quantiles(s, n=20, method="inclusive")[-1]
    else:
        dec, p95 = [s[0]] * 9, s[0]
    return Measure(name, statistics.median(s), dec[0], dec[-1], len(s), target_ms, note, unit, p95)


def measure(name: str, fn: Callable[[], object], *, runs: int = 30, warmup: int = 3,
            target_ms: float | None = None, note: str = "") -> Measure:
    """Call ``fn`` ``warmup`` times, then time ``runs`` calls (ms)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000.0)
    return summarize(name, samples, target_ms=target_ms, note=note)


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    """(milliseconds, result) of one call."""
    start = time.perf_counter()
    out = fn()
    return (time.perf_counter() - start) * 1000.0, out


def print_table(rows: list[Measure]) -> None:
    width = max(len(r.name) for r in rows) + 2
    print(f"{'benchmark':<{width}} {'median':>10} {'p10':>9} {'p90':>9} {'p95':>9} {'unit':>9} {'target':>12} "
          f"{'ratio':>7}  note")
    for r in rows:
        target = f"{r.target_ms:g}" if r.target_ms else "-"
        target += "@p95" if r.target_ms and r.target_on == "p95" else ""
        ratio = f"{r.ratio:.3f}" if r.ratio is not None else "-"
        p95 = f"{r.p95_ms:9.3f}" if r.p95_ms is not None else f"{'-':>9}"
        print(f"{r.name:<{width}} {r.median_ms:>10.3f} {r.p10_ms:>9.3f} {r.p90_ms:>9.3f} {p95} {r.unit:>9} "
              f"{target:>12} {ratio:>7}  {r.note}")
