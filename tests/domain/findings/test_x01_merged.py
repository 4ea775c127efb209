"""X01 on a real matrix that says SYS for six GPU pairs on one NUMA node: one finding, not six."""

from __future__ import annotations

from pathlib import Path

from apps.domain.analysis import analyze_host

TOPO = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia_smi_topo" / "notes_8gpu_pcie_all_sys_anomaly.txt"


def test_one_x01_per_source_set_lists_every_disagreement():
    # the capture: 8 GPUs, all SYS; GPU0-3 report NUMA 0, GPU4-7 NUMA 1, so 3 + 3 pairs (GPU0 with
    # GPU1-3, GPU4 with GPU5-7) contradict their shared affinity
    doc = analyze_host({"nvidia_smi_topo": TOPO.read_text(encoding="utf-8")}, "h").doc
    x01 = [f for f in doc["findings"] if f["rule"] == "X01"]
    assert len(x01) == 1
    [f] = x01
    assert f["severity"] == "LOW" and f["title"] == "one capture contradicts itself"
    assert f["message"].startswith("6 disagreements (sources: nvidia_smi_topo): (1) topo -m says SYS for GPU0-GPU1")
    for pair in ("GPU0-GPU1", "GPU0-GPU2", "GPU0-GPU3", "GPU4-GPU5", "GPU4-GPU6", "GPU4-GPU7"):
        assert f"SYS for {pair} " in f["message"]
    assert f["devices"] == [f"GPU{i}" for i in range(8)]
    assert len(doc["graph"]["disagreements"]) == 6  # the engine's record stays one entry per pair
