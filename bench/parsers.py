"""Parser benchmarks: every fixture of every kind, a 16-GPU/16-NIC topo matrix, a 10,000-line lspci -vvv."""

from __future__ import annotations

from pathlib import Path

from apps.domain.parsers import KINDS
from bench.timing import Measure, measure

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

TOKENS_GPU = ["NV18"]


def synthetic_topo_16x16() -> str:
    """A synthetic `nvidia-smi topo -m` of 16 GPUs and 16 NICs (tab-separated, current legend)."""
    gpus = [f"GPU{i}" for i in range(16)]
    nics = [f"NIC{i}" for i in range(16)]
    labels = gpus + nics
    header = "\t" + "\t".join(labels) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    rows = [header]
    for i, row in enumerate(labels):
        cells = []
        for j, col in enumerate(labels):
            if i == j:
                cells.append(" X ")
            elif row.startswith("GPU") and col.startswith("GPU"):
                cells.append("NV18")
            elif (i % 16) // 2 == (j % 16) // 2:
                cells.append("PIX")
            elif (i % 16) // 8 == (j % 16) // 8:
                cells.append("NODE")
            else:
                cells.append("SYS")
        tail = ["0-55,112-167" if (i % 16) < 8 else "56-111,168-223", "0" if (i % 16) < 8 else "1", "N/A"]
        if row.startswith("NIC"):
            tail = ["", "", ""]
        rows.append(row + "\t" + "\t".join(cells) + "\t" + "\t".join(tail))
    legend = [
        "", "Legend:", "",
        "  X    = Self",
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
        "  PIX  = Connection traversing at most a single PCIe bridge",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
        "", "NIC Legend:", "",
    ] + [f"  NIC{i}: mlx5_{i}" for i in range(16)]
    return "\n".join(rows + legend) + "\n"


def lspci_10k() -> str:
    """Real lspci -vvv captures (complete ones) repeated to at least 10,000 lines."""
    parts = [p.read_text(errors="replace") for p in sorted((FIXTURES / "lspci_verbose").glob("*.txt"))
             if "partial" not in p.name]
    if not parts:
        return ""
    text, lines = [], 0
    while lines < 10_000:
        for part in parts:
            text.append(part.rstrip("\n") + "\n\n")
            lines += part.count("\n") + 1
    return "".join(text)


def run() -> list[Measure]:
    rows = []
    topo = synthetic_topo_16x16()
    rows.append(measure("parse nvidia_smi_topo 16 GPU x 16 NIC", lambda: KINDS["nvidia_smi_topo"].parse(topo),
                        runs=200, target_ms=5.0))
    big = lspci_10k()
    if big:
        rows.append(measure(f"parse lspci_verbose {big.count(chr(10))} lines",
                            lambda: KINDS["lspci_verbose"].parse(big), runs=15, target_ms=200.0))
    for kind in KINDS:
        folder = FIXTURES / kind
        inputs = [p for p in sorted(folder.glob("*")) if p.suffix in (".txt", ".xml")
                  and not p.with_name(p.stem + ".error.json").exists()] if folder.is_dir() else []
        if not inputs:
            continue
        texts = [p.read_text(errors="replace") for p in inputs]
        parse = KINDS[kind].parse
        rows.append(measure(f"parse {kind} (all {len(texts)} fixtures)", lambda: [parse(t) for t in texts], runs=20))
    return rows
