"""Read a node report saved as a folder: one file per section, named after its registry kind.

Layout (what ``python manage.py analyze --bundle DIR`` and the tests read)::

    DIR/hostname.txt            the host's name (first line), optional
    DIR/nvidia_smi_topo.txt     nvidia-smi topo -m
    DIR/ibstat.txt              ibstat
    DIR/nccl_topo_xml.xml       NCCL_TOPO_DUMP_FILE
    ...                         any kind of apps.domain.parsers.KINDS, as <kind>.txt or <kind>.xml

Files are read as UTF-8 (undecodable bytes replaced, as uploads are); hidden files (``.*``) and
provenance notes (``SOURCE.txt``, ``SOURCES.tsv``, ``README.md``: where each capture came from)
are ignored. Any other file name is an error naming the file and the known kinds.
"""

from __future__ import annotations

from pathlib import Path

from apps.domain.parsers import KINDS

__all__ = ["BundleError", "read_bundle", "SUFFIXES"]

SUFFIXES = (".txt", ".xml")
PROVENANCE = frozenset({"SOURCE.txt", "SOURCES.tsv", "README.md"})


class BundleError(ValueError):
    """A bundle folder that cannot be read as a node report."""


def read_bundle(directory: str | Path) -> tuple[str | None, dict[str, str]]:
    """Return ``(hostname or None, {kind: text})`` for a bundle folder.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "hostname.txt").write_text("node7\\n"); _ = (d / "ibstat.txt").write_text("CA 'mlx5_0'\\n")
    >>> read_bundle(d)
    ('node7', {'ibstat': "CA 'mlx5_0'\\n"})
    """
    path = Path(directory)
    if not path.is_dir():
        raise BundleError(f"{path}: not a folder")
    hostname: str | None = None
    sections: dict[str, str] = {}
    for f in sorted(path.iterdir()):
        if f.name.startswith(".") or f.name in PROVENANCE:
            continue
        if not f.is_file() or f.suffix not in SUFFIXES:
            raise BundleError(_unknown(f))
        text = f.read_bytes().decode("utf-8", errors="replace")
        if f.stem == "hostname":
            hostname = next((ln.strip() for ln in text.splitlines() if ln.strip()), None)
            continue
        if f.stem not in KINDS:
            raise BundleError(_unknown(f))
        if f.stem in sections:
            raise BundleError(f"{f}: section {f.stem!r} given twice (as .txt and .xml)")
        sections[f.stem] = text
    if not sections:
        raise BundleError(f"{path}: no section files (expected <kind>.txt or <kind>.xml; known kinds: "
                          f"{', '.join(KINDS)})")
    return hostname, sections


def _unknown(f: Path) -> str:
    return (f"{f}: not a section file; expected hostname.txt or <kind>.txt / <kind>.xml with kind one of: "
            f"{', '.join(KINDS)}")
