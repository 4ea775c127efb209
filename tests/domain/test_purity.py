"""apps/domain stays plain Python: no Django, no Celery, anywhere in the package."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

DOMAIN = Path(__file__).resolve().parents[2] / "apps" / "domain"
FORBIDDEN = ("django", "celery", "ninja", "kombu", "redis", "psycopg")


def _imports() -> Iterator[tuple[str, int, str]]:
    """(file, line, module) of every import in apps/domain."""
    for path in DOMAIN.rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                yield str(path.relative_to(DOMAIN.parent.parent)), node.lineno, name


def test_domain_imports_no_framework() -> None:
    offenders = [f"{f}:{line} imports {name}" for f, line, name in _imports() if name.split(".")[0] in FORBIDDEN]
    assert not offenders, "\n".join(offenders)


def test_domain_imports_no_other_app() -> None:
    """The Django apps build on the engine, never the other way round (ingest keeps the layout
    groups of ``apps.domain.platforms``; the pages word them with ``apps.domain.labels``)."""
    offenders = [f"{f}:{line} imports {name}" for f, line, name in _imports()
                 if name.startswith("apps.") and not name.startswith("apps.domain")]
    assert not offenders, "\n".join(offenders)
