"""Caps on one host (apps/domain/limits.py): past them a report fails to parse, naming the cap and
the section, before the analysis (which grows with the cube of the devices) runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain import limits
from apps.domain.analysis import analyze_host
from apps.domain.errors import ParseError
from apps.domain.facts import HostFacts, PciDeviceFact

IBSTAT = Path(__file__).resolve().parents[2] / "fixtures" / "ibstat" / "mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt"


def synthetic_topo(gpus: int, nics: int) -> str:
    """SYNTHETIC: a `nvidia-smi topo -m` matrix of ``gpus`` GPUs and ``nics`` NICs (PIX pairs)."""
    labels = [f"GPU{i}" for i in range(gpus)] + [f"NIC{j}" for j in range(nics)]
    lines = ["\t" + "\t".join(labels) + "\tCPU Affinity\tNUMA Affinity"]
    for a in labels:
        cells = ["X" if a == b else ("PIX" if int(a[3:]) // 2 == int(b[3:]) // 2 else "SYS") for b in labels]
        lines.append(a + "\t" + "\t".join(cells) + ("\t0-63\t0" if a.startswith("GPU") else ""))
    lines += ["", "NIC Legend:", ""] + [f"  NIC{j}: mlx5_{j}" for j in range(nics)]
    return "\n".join(lines) + "\n"


def test_the_largest_allowed_host_is_analysed():
    doc = analyze_host({"nvidia_smi_topo": synthetic_topo(limits.MAX_GPUS, 8)}, "big").doc
    assert len(doc["gpus"]) == limits.MAX_GPUS


@pytest.mark.parametrize("gpus,nics,what", [(limits.MAX_GPUS + 1, 0, "GPUs"), (2, limits.MAX_NICS + 1, "NICs")])
def test_a_matrix_past_the_caps_fails_at_its_header(gpus, nics, what):
    with pytest.raises(ParseError) as err:
        analyze_host({"nvidia_smi_topo": synthetic_topo(gpus, nics)}, "huge")
    e = err.value
    assert e.kind == "nvidia_smi_topo" and e.line_no == 1
    assert f"{max(gpus, nics)} {what} columns" in e.reason and f"at most {limits.MAX_GPUS if what == 'GPUs' else limits.MAX_NICS}" in e.reason


def test_too_many_nic_ports_from_ibstat_name_the_section():
    # SYNTHETIC: the real 12-CA ibstat repeated under new names until it lists 72 ports
    text = IBSTAT.read_text()
    copies = [text.replace("CA 'mlx5_", f"CA 'mlx{i}_") for i in range(6)]
    with pytest.raises(ParseError) as err:
        analyze_host({"ibstat": "".join(copies)}, "many-nics")
    assert err.value.kind == "ibstat" and "NIC ports on one host" in err.value.reason


def test_too_many_pci_functions():
    pci = tuple(PciDeviceFact(bdf=f"0000:{b // 256:02x}:{(b % 256) // 8:02x}.{b % 8}") for b in range(4097))
    facts = HostFacts(hostname="h", sources=("lspci_verbose",), pci=pci)
    with pytest.raises(ParseError) as err:
        limits.check_host_size(facts)
    assert err.value.kind == "lspci_verbose" and "4097 PCI functions" in err.value.reason
    limits.check_host_size(HostFacts(hostname="h", sources=("lspci_verbose",), pci=pci[:4096]))
