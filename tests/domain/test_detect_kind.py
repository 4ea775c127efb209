"""detect_kind names the kind of every real fixture, and says plainly when it cannot tell."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import UnknownKindError
from apps.domain.parsers import ALL_KINDS, detect_kind, parse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# Kinds that share a format: detection may name either (the registry still parses the text correctly).
EQUIVALENT = {
    "nvidia_smi_topo_pci": {"nvidia_smi_topo_pci", "nvidia_smi_topo"},
}


def fixtures():
    for kind in ALL_KINDS:
        folder = FIXTURES / kind
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.suffix in (".txt", ".xml") and not path.with_name(path.stem + ".error.json").exists():
                yield pytest.param(kind, path, id=f"{kind}/{path.name}")


@pytest.mark.parametrize("kind,path", list(fixtures()))
def test_detects_fixture_kind(kind: str, path: Path) -> None:
    text = path.read_bytes().decode("utf-8", errors="replace")
    assert detect_kind(text) in EQUIVALENT.get(kind, {kind})


@pytest.mark.parametrize("text", ["", "   \n\n", "hello world\nthis is not a capture\n", "{\"a\": 1}"])
def test_unknown_text_is_refused_with_reason(text: str) -> None:
    with pytest.raises(UnknownKindError) as info:
        detect_kind(text)
    assert str(info.value)


def test_parse_auto_uses_detection() -> None:
    text = (FIXTURES / "nvidia_smi_topo" / "stas00_mleng_2gpu_pcie_phb.txt").read_text()
    result = parse("auto", text)
    assert [g.name for g in result.gpus] == ["GPU0", "GPU1"]


def test_unknown_kind_name() -> None:
    with pytest.raises(UnknownKindError, match="unknown kind .nvidia_smi_topology.; known kinds: nvidia_smi_topo"):
        parse("nvidia_smi_topology", "x")
