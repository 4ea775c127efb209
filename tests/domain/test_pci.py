"""Canonical PCI addresses: every producer's spelling folds to dddd:bb:dd.f."""

import pytest

from apps.domain.pci import bdf_from_nccl_busid, canonical_bdf, is_bdf


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("00000000:1B:00.0", "0000:1b:00.0"),  # nvidia-smi
        ("1b:00.0", "0000:1b:00.0"),  # lspci without -D
        ("0000:3b:00.1", "0000:3b:00.1"),  # sysfs
        ("0001:02:03.4", "0001:02:03.4"),
        ("10000:e0:06.0", "10000:e0:06.0"),  # Intel VMD domain stays distinct from domain 0
        ("00010000:E0:06.0", "10000:e0:06.0"),
    ],
)
def test_canonical_bdf(raw: str, expected: str) -> None:
    assert canonical_bdf(raw) == expected


@pytest.mark.parametrize("raw", ["", "GPU0", "1b:00", "zz:00.0", "0000:1b:00.8"])
def test_not_an_address(raw: str) -> None:
    assert not is_bdf(raw)
    with pytest.raises(ValueError):
        canonical_bdf(raw)


def test_nccl_busid() -> None:
    assert bdf_from_nccl_busid("1c000") == "0000:1c:00.0"
    assert bdf_from_nccl_busid(0x1B000) == "0000:1b:00.0"
