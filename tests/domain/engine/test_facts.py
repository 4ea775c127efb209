"""HostFacts: frozen, lookups by name, label and PCI address."""

from __future__ import annotations

import dataclasses

import pytest

from apps.domain.facts import GpuFact, HostFacts, NicFact, PciDeviceFact


def small() -> HostFacts:
    return HostFacts(
        hostname="h",
        gpus=(GpuFact(index=0, name="GPU0", bdf="0000:1b:00.0"),),
        nics=(NicFact(name="mlx5_0", label="NIC0", device="mlx5_0", state="Active"),
              NicFact(name="NIC1", label="NIC1")),
        pci=(PciDeviceFact(bdf="0000:1b:00.0", kind="gpu", parent_bdf="0000:1a:00.0"),),
    )


def test_facts_are_frozen():
    f = small()
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.hostname = "other"  # type: ignore[misc]


def test_lookups():
    f = small()
    assert f.gpu("GPU0").bdf == "0000:1b:00.0" and f.gpu("GPU9") is None
    assert f.nic("NIC0").name == "mlx5_0" and f.nic("mlx5_0").label == "NIC0"
    assert f.pci_device("0000:1b:00.0").kind == "gpu" and f.pci_device("0000:00:00.0") is None
    assert f.has_pci_tree is True
    assert f.label_of("mlx5_0") == "NIC0" and f.label_of("GPU0") == "GPU0"


def test_nic_active_is_unknown_without_state():
    assert NicFact(name="NIC1").active is None
    assert NicFact(name="x", state="Active").active is True
    assert NicFact(name="x", state="Down").active is False


def test_no_pci_tree_without_parents():
    assert HostFacts(hostname="h", pci=(PciDeviceFact(bdf="0000:01:00.0"),)).has_pci_tree is False
