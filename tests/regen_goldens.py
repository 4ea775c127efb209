"""Rewrite golden JSON files: python -m tests.regen_goldens KIND [NAME ...].

Only for deliberate parser changes: review ``git diff tests/fixtures`` afterwards.
Fixtures with a ``NAME.error.json`` are left alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from apps.domain.parsers import ALL_KINDS, to_jsonable

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ALL_KINDS:
        print(f"usage: python -m tests.regen_goldens KIND [NAME ...]; kinds: {', '.join(ALL_KINDS)}")
        return 2
    kind, names = argv[0], set(argv[1:])
    for path in sorted((FIXTURES / kind).iterdir()):
        if path.suffix == ".json" or (names and path.stem not in names and path.name not in names):
            continue
        if path.with_name(path.stem + ".error.json").exists():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        result = to_jsonable(ALL_KINDS[kind].parse(text))
        path.with_suffix(".json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        print(f"wrote {path.with_suffix('.json').relative_to(FIXTURES.parent.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
