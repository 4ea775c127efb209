"""The measurement ("run") parsers against every real capture in ../shared/realdata, the fixture
copies against their sources, the registry entries, and ``manage.py parse auto`` on a run capture."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import ALL_KINDS, KINDS, detect_kind, kinds_of

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
REALDATA = ROOT.parent / "shared" / "realdata"
RUN_KINDS = ("nccl_tests", "nccl_log", "perftest", "p2p_bandwidth")
REAL_FOLDERS = ("nccl_tests", "nccl_log", "perftest")  # realdata holds no p2pBandwidthLatencyTest/nvbandwidth capture


@pytest.mark.parametrize("kind", REAL_FOLDERS)
def test_every_real_capture_parses_and_is_detected(kind: str) -> None:
    folder = REALDATA / kind
    if not folder.is_dir():
        pytest.fail(f"{folder} is missing: the real captures must be present to test the {kind} parser")
    files = sorted(p for p in folder.iterdir() if p.is_file())
    assert files, f"{folder} holds no capture"
    failures = []
    for path in files:
        text = path.read_bytes().decode("utf-8", errors="replace")
        try:
            ALL_KINDS[kind].parse(text)
        except ParseError as exc:
            failures.append(f"{path.name}: {exc}")
            continue
        if detect_kind(text) != kind:
            failures.append(f"{path.name}: detected as {detect_kind(text)}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("kind", RUN_KINDS)
def test_fixture_copies_are_byte_identical_to_their_sources(kind: str) -> None:
    sources = FIXTURES / f"SOURCES.{kind}.tsv"
    rows = list(csv.reader(sources.open(), delimiter="\t"))
    listed = {Path(row[0]).name for row in rows}
    present = {p.name for p in (FIXTURES / kind).glob("*.txt")}
    assert present == listed, f"fixtures and {sources.name} differ: {sorted(present ^ listed)}"
    for fixture, source, _ in rows:
        if source == "-":
            assert Path(fixture).name.startswith("synthetic_"), fixture
            continue
        assert (ROOT / fixture).read_bytes() == (REALDATA.parent / source).read_bytes(), fixture


def test_run_kinds_are_registered_outside_the_report_sections() -> None:
    assert set(RUN_KINDS) <= set(kinds_of("run"))
    assert not set(RUN_KINDS) & set(KINDS)  # a node report may not carry measurements as sections


def test_parse_command_detects_a_run_capture() -> None:
    path = FIXTURES / "nccl_tests" / "dell_h200_2node_bf3_roce400_ocp_allreduce_1k_16g.txt"
    proc = subprocess.run([sys.executable, "manage.py", "parse", "auto", str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "detected kind nccl_tests" in proc.stderr
    data = json.loads(proc.stdout)
    assert (data["collective"], data["peak_busbw_gbs"], data["nranks"]) == ("all_reduce", 485.66, 16)
    assert data["ranks"][9] == {"rank": 9, "group": 0, "pid": 9750, "host": "nvidiatools-dell-h200-3-workload",
                                "device": 1, "bus_id": "0000:3c:00", "bdf": "0000:3c:00.0", "pci_bus": 0x3C,
                                "model": "NVIDIA H200", "line_no": 15}
    assert data["rows"][-1]["out_of_place"] == {"time_us": 66326.9, "algbw_gbs": 259.02, "busbw_gbs": 485.66,
                                                "wrong": 0, "error": None}
