"""Parser benchmarks: every fixture of every kind, a 16-GPU/16-NIC topo matrix, a 10,000-line lspci -vvv,
a synthetic 64-rank x 30-size nccl-tests output, a synthetic 100,000-line NCCL log, a synthetic
2,000-switch / 16,000-HCA ibnetdiscover (bench/fabric_synth.py) and the real DGX SuperPOD one."""

from __future__ import annotations

from pathlib import Path

from apps.domain.parsers import ALL_KINDS, KINDS
from bench.fabric_synth import synthetic_ibnetdiscover
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


def synthetic_nccl_tests_64x30() -> str:
    """A synthetic nccl-tests output: the real 64-rank all_reduce capture's header and device list, with
    its 14 result rows replicated (in turn) to 30 sizes, 8 B to 4 GiB (size and count rewritten)."""
    real = (FIXTURES / "nccl_tests" / "h100_ib400_8node_allreduce_min_ctas24_qps2_391gbs_nccl_tests_issue_309.txt")
    lines = real.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line[:1] == " " and line.split()[0].isdigit())
    rows = [line for line in lines if line[:1] == " " and line.split()[0].isdigit()]
    tail = lines[first + len(rows):]
    out = lines[:first]
    for i in range(30):
        size = 8 << i
        cells = rows[i % len(rows)].split()
        out.append(f"{size:>12} {size // 4:>13} " + "".join(f"{c:>9}" for c in cells[2:]))
    return "\n".join(out + tail) + "\n"


def nccl_log_100k() -> str:
    """The real NCCL log excerpts (fixtures/nccl_log, non-synthetic) repeated to 100,000 lines."""
    parts = [p.read_text() for p in sorted((FIXTURES / "nccl_log").glob("*.txt"))
             if not p.name.startswith("synthetic_")]
    if not parts:
        return ""
    block = "".join(part.rstrip("\n") + "\n" for part in parts).splitlines(keepends=True)
    lines = (block * (100_000 // len(block) + 1))[:100_000]
    return "".join(lines)


def run() -> list[Measure]:
    rows = []
    topo = synthetic_topo_16x16()
    rows.append(measure("parse nvidia_smi_topo 16 GPU x 16 NIC", lambda: KINDS["nvidia_smi_topo"].parse(topo),
                        runs=200, target_ms=5.0))
    big = lspci_10k()
    if big:
        rows.append(measure(f"parse lspci_verbose {big.count(chr(10))} lines",
                            lambda: KINDS["lspci_verbose"].parse(big), runs=15, target_ms=200.0))
    table = synthetic_nccl_tests_64x30()
    rows.append(measure("parse nccl_tests 64 ranks x 30 sizes (synthetic)",
                        lambda: ALL_KINDS["nccl_tests"].parse(table), runs=50, target_ms=20.0))
    log = nccl_log_100k()
    if log:
        rows.append(measure("parse nccl_log 100,000 lines (synthetic)", lambda: ALL_KINDS["nccl_log"].parse(log),
                            runs=7, warmup=1, target_ms=1000.0))
    fabric = synthetic_ibnetdiscover()
    rows.append(measure("parse ibnetdiscover 2,000 switches / 16,000 HCAs (synthetic)",
                        lambda: ALL_KINDS["ibnetdiscover"].parse(fabric), runs=5, warmup=1, target_ms=2000.0,
                        note=f"{fabric.count(chr(10)):,} lines, 44,000 links; bench/fabric_synth.py"))
    superpod = (FIXTURES / "ibnetdiscover"
                / "nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.txt").read_text()
    rows.append(measure("parse ibnetdiscover DGX H100 SuperPOD (40 switches, 582 CAs)",
                        lambda: ALL_KINDS["ibnetdiscover"].parse(superpod), runs=15, note="real capture"))
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
