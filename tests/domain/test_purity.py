"""apps/domain stays plain Python: no Django, no Celery, anywhere in the package; and the data app imports no page code."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

DOMAIN = Path(__file__).resolve().parents[2] / "apps" / "domain"
FORBIDDEN = ("django", "celery", "ninja", "kombu", "redis", "psycopg")


def _imports(package: Path = DOMAIN) -> Iterator[tuple[str, int, str]]:
    """(file, line, module) of every import in ``package`` (apps/domain unless told)."""
    for path in package.rglob("*.py"):
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


def test_ingest_imports_nothing_of_the_pages() -> None:
    """The data app stores, serves and schedules; the pages (``apps.explorer``) build on it. The
    drawings the API exports are the explorer's endpoint, put on the API by ``topoweb/api.py``."""
    ingest = DOMAIN.parent / "ingest"
    offenders = [f"{f}:{line} imports {name}" for f, line, name in _imports(ingest)
                 if name.startswith("apps.explorer")]
    assert not offenders, "\n".join(offenders)
