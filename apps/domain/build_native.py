"""Compile the engine's C parts in place, and load them only when they are as new as their source.

* ``apps/domain/_search_core.c``: the channel search's recursion (:mod:`apps.domain.nccl_search_native`);
* ``apps/domain/parsers/_lspci_scan.c``: the ``lspci -vvv`` parser's scans
  (:mod:`apps.domain.parsers.lspci_verbose`).

``make install`` runs ``python -m apps.domain.build_native``; without a C compiler it says so and
each caller runs its Python reference instead, which gives the same answers more slowly. The
modules it makes (``<name><EXT_SUFFIX>`` beside each source) are build outputs (``.gitignore``).
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = {  # module name -> its C source, relative to ROOT
    "apps.domain._search_core": "apps/domain/_search_core.c",
    "apps.domain.parsers._lspci_scan": "apps/domain/parsers/_lspci_scan.c",
}
SOURCE = MODULES["apps.domain._search_core"]

log = logging.getLogger(__name__)


def source_sha(path: Path = ROOT / SOURCE) -> str:
    """The digest of the C source a build is made from: the module carries it (``source_sha``), so
    a module older than its source is known (:func:`load` then returns None)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def load(name: str):
    """The built module ``name`` (a key of :data:`MODULES`), or None when it is not built (no C
    compiler at install) or is older than its source (a checkout updated without ``make install``:
    said once, as a warning)."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    source = ROOT / MODULES[name]
    if source.exists() and getattr(module, "source_sha", None) != source_sha(source):
        log.warning("%s is older than %s: its Python reference runs until make install builds it again",
                    module.__file__, MODULES[name])
        return None
    return module


def main() -> int:
    from setuptools import Extension, setup

    failed = 0
    for name, source in MODULES.items():
        with tempfile.TemporaryDirectory(prefix="topoweb-build-") as tmp:
            try:
                setup(name=f"topoweb-{name.rsplit('.', 1)[1].strip('_')}", script_name="build_native", script_args=[
                    "-q", "build_ext", "--inplace", "--build-temp", tmp, "--build-lib", tmp],
                    ext_modules=[Extension(name, [source], extra_compile_args=["-O2"],
                                           define_macros=[("SOURCE_SHA", f'"{source_sha(ROOT / source)}"')])])
            except (SystemExit, Exception) as exc:  # distutils reports a failed compile as SystemExit
                print(f"{source} was not built ({exc}); its Python reference runs", file=sys.stderr)
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    import os

    os.chdir(ROOT)
    sys.exit(main())
