"""Every fixture under tests/fixtures/<kind>/ parses to its reviewed golden (or fails as stated)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import ALL_KINDS, to_jsonable

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
NOT_KINDS = {"bundles"}  # whole-host capture folders (tests/fixtures/bundles), read by the engine tests


def fixture_inputs():
    for kind_dir in sorted(p for p in FIXTURES.iterdir() if p.is_dir() and p.name not in NOT_KINDS):
        for path in sorted(kind_dir.iterdir()):
            if path.suffix == ".json" or path.name.startswith("."):
                continue
            yield pytest.param(kind_dir.name, path, id=f"{kind_dir.name}/{path.name}")


def read_input(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


@pytest.mark.parametrize("kind,path", list(fixture_inputs()))
def test_fixture_matches_golden(kind: str, path: Path) -> None:
    assert kind in ALL_KINDS, f"fixture folder {kind!r} is not a parser kind"
    text = read_input(path)
    error_file = path.with_name(path.stem + ".error.json")
    golden_file = path.with_suffix(".json")
    if error_file.exists():
        expected = json.loads(error_file.read_text())
        with pytest.raises(ParseError) as info:
            ALL_KINDS[kind].parse(text)
        assert info.value.kind == kind
        assert info.value.line_no == expected["line_no"]
        assert expected["reason"] in info.value.reason
        return
    assert golden_file.exists(), f"no golden {golden_file.name} (run python -m tests.regen_goldens {kind})"
    got = json.loads(json.dumps(to_jsonable(ALL_KINDS[kind].parse(text))))
    assert got == json.loads(golden_file.read_text())


def test_every_kind_has_fixtures() -> None:
    present = {p.name for p in FIXTURES.iterdir() if p.is_dir() and any(p.iterdir())}
    missing = set(ALL_KINDS) - present
    assert not missing, f"kinds without fixtures: {sorted(missing)}"
