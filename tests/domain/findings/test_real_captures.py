"""Rules on real captures from /work/shared/realdata, run through ``analyze_host`` end to end.

Expected device sets are read from the capture text itself (independently of the parsers), so a
test states what the capture shows rather than a stored answer.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from apps.domain.analysis import analyze_host

REAL = Path("/work/shared/realdata")


def analyze(**sections):
    texts = {kind: (REAL / path).read_text() for kind, path in sections.items()}
    return analyze_host(texts, "capture").to_dict()


def by_rule(doc, rule):
    return [f for f in doc["findings"] if f["rule"] == rule]


def test_gpud_h100_12ca_f01_for_exactly_the_down_ports():
    """ibstat of an HGX H100 with 12 CAs, three CX-6 Dx Ethernet ports Down/Disabled."""
    text = (REAL / "ibstat/gpud_h100_12ca_roce_3_down_disabled.txt").read_text()
    down = {m.group(1) for m in re.finditer(r"CA '(\w+)'(?:(?!CA ').)*?State: Down", text, re.S)}
    assert len(down) == 3
    doc = analyze(ibstat="ibstat/gpud_h100_12ca_roce_3_down_disabled.txt")
    f01 = by_rule(doc, "F01")
    assert {d for f in f01 for d in f["devices"]} == down
    assert all("Disabled" in f["message"] and f["severity"] == "HIGH" for f in f01)
    assert by_rule(doc, "F03") == []  # IB ports have LIDs; Ethernet ports with LID 0 are normal
    # one Active Ethernet port next to the InfiniBand ones: mixing them in one NCCL net (F04)
    [f04] = by_rule(doc, "F04")
    assert f04["fix"].startswith("Restrict NCCL to the InfiniBand ports: NCCL_IB_HCA==mlx5_0,")
    ib_active = sorted(m.group(1) for m in re.finditer(
        r"CA '(\w+)'(?:(?!CA ').)*?State: Active(?:(?!CA ').)*?Link layer: InfiniBand", text, re.S))
    settings = {s["name"]: s["value"] for s in doc["nccl_settings"]}
    assert set(settings["NCCL_IB_HCA"].lstrip("=").split(",")) == set(ib_active)


def test_paddle_p40_far_nic_g01_for_every_gpu():
    """8x P40 under two levels of PCIe switches (PIX/PXB), the only NIC mlx5_0 on the other socket (SOC).

    Every GPU reaches mlx5_0 through SYS: G01 and H02 name all eight GPUs. No GPU pair crosses the
    socket link, so P01 must not fire.
    """
    doc = analyze(nvidia_smi_topo="topo/paddle_8xp40_pcie_switches_soc.txt")
    [g01] = by_rule(doc, "G01")
    assert g01["devices"] == [f"GPU{i}" for i in range(8)] + ["mlx5_0"]
    assert "SYS" in g01["message"]
    assert by_rule(doc, "H02") and by_rule(doc, "P01") == []
    assert by_rule(doc, "P02") == []


def test_microway_dgx1_partial_mesh_is_n04_info_not_n01():
    """DGX-1 V100 hybrid cube mesh: NV1/NV2 pairs plus SYS pairs without NVLink (expected)."""
    doc = analyze(nvidia_smi_topo="topo/microway_dgx1_v100_4x_mlx5.txt")
    [n04] = by_rule(doc, "N04")
    assert n04["severity"] == "INFO"
    assert by_rule(doc, "N01") == [] and by_rule(doc, "P01") == []
    assert not [f for f in doc["findings"] if f["severity"] in ("CRIT", "HIGH")]
    # NCCL's rings use every NVLink of the cube mesh side by side: 6 channels x 20 GB/s (SM70_NVLINK_BW)
    assert doc["estimate"]["b_gpu_gbs"] == pytest.approx(120)


def test_b300_with_one_gpu_at_node_is_n01():
    """SYNTHETIC variant of the real Dell XE9780 HGX B300 capture (topo/dell_xe9780_hgx_b300_7gpu_nv18.txt):
    GPU2's NV18 cells are replaced by NODE in this test, the fault of vllm #16336 (a B200 with GPU2 at
    NODE). The unmodified capture's only N01 is the GPU missing from its 8-GPU board."""
    text = (REAL / "topo/dell_xe9780_hgx_b300_7gpu_nv18.txt").read_text()
    healthy = analyze_host({"nvidia_smi_topo": text}, "b300").to_dict()
    assert [f["title"] for f in by_rule(healthy, "N01")] == ["GPU missing from an NVSwitch board"]
    lines = text.splitlines(keepends=True)
    out = []
    for line in lines:
        parts = re.split(r"(\s+)", line)
        if parts and re.fullmatch(r"GPU\d", parts[0]):
            if parts[0] == "GPU2":
                line = line.replace("NV18", "NODE")
            else:
                cells = [i for i, p in enumerate(parts) if p.strip()]
                parts[cells[3]] = parts[cells[3]].replace("NV18", "NODE")
                line = "".join(parts)
        out.append(line)
    broken = analyze_host({"nvidia_smi_topo": "".join(out)}, "b300").to_dict()
    [n01] = [f for f in by_rule(broken, "N01") if f["title"] != "GPU missing from an NVSwitch board"]
    assert n01["devices"] == ["GPU2"] and n01["severity"] == "CRIT"
