"""Compile the channel search's C recursion (``apps/domain/_search_core.c``) in place.

``make install`` runs ``python -m apps.domain.build_native``; without a C compiler it says so and
the search runs its Python recursion (:mod:`apps.domain.nccl_search_native`). The module it makes,
``apps/domain/_search_core<EXT_SUFFIX>``, is a build output (``.gitignore``).
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "apps/domain/_search_core.c"


def source_sha(path: Path = ROOT / SOURCE) -> str:
    """The digest of the C source a build is made from: the module carries it (``source_sha``), so
    a module older than its source is known (``nccl_search_native`` then runs the Python one)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def main() -> int:
    from setuptools import Extension, setup

    with tempfile.TemporaryDirectory(prefix="topoweb-build-") as tmp:
        try:
            setup(name="topoweb-search-core", script_name="build_native", script_args=[
                "-q", "build_ext", "--inplace", "--build-temp", tmp, "--build-lib", tmp],
                ext_modules=[Extension("apps.domain._search_core", [SOURCE], extra_compile_args=["-O2"],
                                       define_macros=[("SOURCE_SHA", f'"{source_sha()}"')])])
        except (SystemExit, Exception) as exc:  # distutils reports a failed compile as SystemExit
            print(f"the channel search's C recursion was not built ({exc}); the Python one runs", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    import os

    os.chdir(ROOT)
    sys.exit(main())
