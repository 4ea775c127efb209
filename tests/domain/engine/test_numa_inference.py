"""NUMA nodes inferred from topo -m affinity columns: a DGX A100 in NPS4 (2 sockets x 4 NUMA nodes)
reports GPUs on NUMA 1, 3, 5, 7; NODE = one NUMA node, different host bridges; SYS = different
NUMA nodes (which may share a socket: sockets are not reported by topo -m)."""

from __future__ import annotations

from pathlib import Path

from apps.domain.analysis import analyze_host
from apps.domain.bundle import read_bundle
from apps.domain.hostgraph import ancestors

BUNDLES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"


def _analysis(name: str, only: tuple[str, ...] | None = None):
    host, sections = read_bundle(BUNDLES / name)
    if only:
        sections = {k: v for k, v in sections.items() if k in only}
    return analyze_host(sections, host)


def _cpu(G, n):
    return next(a for a in ancestors(G, n) if G.nodes[a]["kind"] == "cpu")


def _rc(G, n):
    return next(a for a in ancestors(G, n) if G.nodes[a]["kind"] == "root_complex")


def test_dgx_a100_nps4_has_eight_numa_nodes_and_no_claimed_sockets():
    a = _analysis("dgx_a100_ash6")
    s, G = a.doc["summary"], a.graph
    assert s["numa_nodes"] == 8  # NUMA ids up to 7 in the affinity column
    assert s["socket_count"] is None  # topo -m cannot tell sockets from NUMA nodes
    gpu_numa = {G.nodes[_cpu(G, g)]["numa"] for g in (f"GPU{i}" for i in range(8))}
    assert gpu_numa == {1, 3, 5, 7}
    nic_only = [n for n, d in G.nodes(data=True) if d["kind"] == "cpu" and d["numa"] is None]
    assert len(nic_only) == 2  # mlx5_4/5 and mlx5_10/11: SYS to every GPU
    assert all(G.nodes[c]["numa_candidates"] == [0, 2, 4, 6] for c in nic_only)
    # the inferred layout reproduces every cell of the matrix
    assert a.doc["graph"]["disagreements"] == []
    # SYS pairs (by PCIe) sit on different NUMA nodes, PXB pairs on one
    assert _cpu(G, "GPU0") != _cpu(G, "GPU2") and _cpu(G, "GPU0") == _cpu(G, "mlx5_0")
    text_edges = [d["note"] for _, _, d in G.edges(data=True) if d["kind"] == "inter_socket"]
    assert text_edges and all("between NUMA nodes" in (n or "") for n in text_edges)


def test_node_is_one_numa_node_with_two_host_bridges_and_sys_crosses():
    a = _analysis("stelline_esc8000a", only=("nvidia_smi_topo",))
    G = a.graph
    # GPU0-GPU1 NODE: same NUMA node, different host bridges; GPU0-GPU2 SYS: different NUMA nodes
    assert _cpu(G, "GPU0") == _cpu(G, "GPU1") and _rc(G, "GPU0") != _rc(G, "GPU1")
    assert _cpu(G, "GPU0") != _cpu(G, "GPU2")
    assert a.doc["summary"]["numa_nodes"] == 2
    assert a.doc["graph"]["disagreements"] == []
