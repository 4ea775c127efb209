"""The fabric parsers against every real capture in ../shared/realdata (ibnetdiscover, iblinkinfo,
ibdev2netdev), the fixture copies against their sources, and the registry entries."""

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
REAL_FOLDERS = ("ibnetdiscover", "iblinkinfo", "ibdev2netdev")
FABRIC_KINDS = ("ibnetdiscover", "iblinkinfo", "ibswitches", "ibhosts", "ibnodes", "lldpctl_json",
                "lldpcli_neighbors", "ibdev2netdev")
# realdata keeps the outputs of the ibnetdiscover wrappers in its ibnetdiscover folder
BY_PREFIX = {"ibhosts_": "ibhosts", "ibswitches_": "ibswitches", "ibnodes_": "ibnodes"}


def expected_kind(folder: str, name: str) -> str:
    return next((kind for prefix, kind in BY_PREFIX.items() if name.startswith(prefix)), folder)


@pytest.mark.parametrize("folder", REAL_FOLDERS)
def test_every_real_capture_parses_and_is_detected(folder: str) -> None:
    path = REALDATA / folder
    if not path.is_dir():
        pytest.fail(f"{path} is missing: the real captures must be present to test the {folder} parser")
    files = sorted(p for p in path.iterdir() if p.is_file())
    assert files, f"{path} holds no capture"
    failures = []
    for capture in files:
        kind = expected_kind(folder, capture.name)
        text = capture.read_bytes().decode("utf-8", errors="replace")
        try:
            ALL_KINDS[kind].parse(text)
        except ParseError as exc:
            failures.append(f"{capture.name}: {exc}")
            continue
        if detect_kind(text) != kind:
            failures.append(f"{capture.name}: detected as {detect_kind(text)}, not {kind}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("kind", FABRIC_KINDS)
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


def test_fabric_kinds_are_registered_outside_the_report_sections() -> None:
    assert set(FABRIC_KINDS) == set(kinds_of("fabric"))
    assert not set(FABRIC_KINDS) & set(KINDS)


def test_parse_command_detects_a_fabric_capture() -> None:
    path = FIXTURES / "iblinkinfo" / "qdr_infiniscale_iv_18port_teaker_8hosts_one_dual_port_ca.txt"
    proc = subprocess.run([sys.executable, "manage.py", "parse", "auto", str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "detected kind iblinkinfo" in proc.stderr
    data = json.loads(proc.stdout)
    assert [s["guid"] for s in data["switches"]] == ["0x0002c902004b2678"]
    assert {"guid", "name", "ports"} <= set(data["switches"][0]) and {"guid", "name", "host"} <= set(data["cas"][0])
    link = data["links"][0]
    assert set(link) >= {"a", "b", "width", "speed", "state"} and set(link["a"]) >= {"guid", "port"}
    assert set(data["switches"][0]["ports"][0]) >= {"port", "state", "width", "speed", "peer"}
