"""What limits, said honestly: no invented element joins devices of two sockets, a contention row
names only the devices below its element, and flows toward a NIC want no more than the NIC takes.

Built from two real captures (tests/fixtures/nvidia_smi_topo, copies of /work/shared/realdata/topo):
an 8x H20 box whose two NICs (one dual-port ConnectX-6 Lx, PIX to each other) hang off the second
socket, and an 8x P40 box with two levels of PCIe switches and one mlx5_0 on the other socket.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from apps.domain.analysis import analyze_host
from apps.domain.hostgraph import ancestors

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
H20 = FIXTURES / "nvidia_smi_topo/h20_8gpu_nv18_2nic_cx6lx_genoa_arthurchiao_notes.txt"
P40 = FIXTURES / "nvidia_smi_topo/paddle_8xp40_pcie_switches_soc.txt"
POLARIS = FIXTURES / "nvidia_smi_topo/alcf_polaris_4xa100_nv4_nps4_mangled_header.txt"

# synthetic ibstat (written for this test, not a capture): the P40 box's mlx5_0 as a 100 Gb/s port
P40_IBSTAT_100G = ("CA 'mlx5_0'\n\tCA type: MT4115\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n"
                   "\t\tPhysical state: LinkUp\n\t\tRate: 100\n\t\tBase lid: 5\n\t\tSM lid: 1\n"
                   "\t\tPort GUID: 0x248a0703005c5ba0\n\t\tLink layer: InfiniBand\n")


def analyze(**sections):
    a = analyze_host({k: v.read_text() if isinstance(v, Path) else v for k, v in sections.items()}, "h")
    return a.doc, a.graph


def rules(doc, rule):
    return [f for f in doc["findings"] if f["rule"] == rule]


def below(G, node):
    return [n for n in G if G.nodes[n]["kind"] in ("gpu", "nic") and node in ancestors(G, n)[1:]]


def test_h20_capture_reads_as_printed():
    """Facts read off the capture: 8 GPUs NV18 to each other, NUMA 0 for GPU0-3 and 1 for GPU4-7,
    NIC0/NIC1 PIX to each other, PHB to GPU6 only."""
    doc, G = analyze(nvidia_smi_topo=H20)
    assert doc["summary"]["gpu_count"] == 8 and [n["name"] for n in doc["nics"]] == ["NIC0", "NIC1"]
    assert [g["numa"] for g in doc["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert {p["path_class"] for p in doc["gpu_pairs"]} == {"NV18"}
    cls = {(c["gpu"], c["nic"]): c["path_class"] for c in doc["gpu_nic_matrix"]}
    assert cls["GPU6", "NIC0"] == "PHB" and cls["GPU0", "NIC1"] == "SYS" and cls["GPU4", "NIC0"] == "NODE"


def test_h20_no_inferred_element_holds_devices_of_both_sockets():
    doc, G = analyze(nvidia_smi_topo=H20)
    numa = {g["name"]: g["numa"] for g in doc["gpus"]}
    for n, d in G.nodes(data=True):
        if d["kind"] in ("switch", "root_complex", "cpu"):
            assert len({numa[x] for x in below(G, n) if x in numa}) <= 1, n
    # the NICs' switch (the dual-port card) holds the NICs only, on the socket of GPU4-7
    [sw] = [n for n, d in G.nodes(data=True) if d["kind"] == "switch"]
    assert sorted(below(G, sw)) == ["NIC0", "NIC1"] and G.nodes[sw]["numa"] == 1


def test_h20_rows_name_only_the_devices_below_and_nothing_is_sized_from_unknown_nic_rates():
    """It read "uplink of PCIe switch (inferred) shared by GPU0-GPU7, NIC0, NIC1 ... 8x
    oversubscribed": the switch holds the two NICs only, and topo -m gives no NIC rate, so the
    demand of the flows toward them is unknown."""
    doc, G = analyze(nvidia_smi_topo=H20)
    for c in doc["contention"]:
        if c["kind"] != "inter_socket":
            assert all(c["element"] in ancestors(G, x)[1:] for x in c["devices"]), c
    assert [c for c in doc["contention"] if c["scenario"] == "gpu_to_nic"] == []
    assert not rules(doc, "P09") and not rules(doc, "P10")
    g05 = {f["devices"][-1]: f for f in rules(doc, "G05")}
    assert g05["NIC0"]["devices"] == ["GPU0", "GPU2", "GPU4", "GPU6", "NIC0"]
    assert g05["NIC1"]["devices"] == ["GPU1", "GPU3", "GPU5", "GPU7", "NIC1"]
    assert "line rate is not reported" in g05["NIC0"]["message"] and g05["NIC0"]["severity"] == "MED"


def test_p40_capture_reads_as_printed():
    """Facts read off the capture: 8 GPUs, PIX inside GPU0-3 and GPU4-7, PXB across, one mlx5_0 SOC
    (= SYS) to every GPU, CPU affinity 0-13 for all, legacy legend."""
    doc, G = analyze(nvidia_smi_topo=P40)
    assert doc["summary"]["gpu_count"] == 8 and [n["name"] for n in doc["nics"]] == ["mlx5_0"]
    pairs = {(p["a"], p["b"]): p["path_class"] for p in doc["gpu_pairs"]}
    assert pairs["GPU0", "GPU3"] == "PIX" and pairs["GPU4", "GPU7"] == "PIX" and pairs["GPU3", "GPU4"] == "PXB"
    assert {c["path_class"] for c in doc["gpu_nic_matrix"]} == {"SYS"}
    assert {g["cpu_affinity"] for g in doc["gpus"]} == {"0-13"}


def test_p40_one_nic_for_eight_gpus_is_what_limits():
    """It read "8 flows need 8x the switch uplink": the 8 GPUs share one NIC, which is the limit."""
    doc, _ = analyze(nvidia_smi_topo=P40)
    [g05] = rules(doc, "G05")
    assert g05["severity"] == "MED" and g05["devices"] == [f"GPU{i}" for i in range(8)] + ["mlx5_0"]
    assert g05["message"].startswith("8 GPUs share one NIC, mlx5_0")
    assert all(c["scenario"] == "all_pairs" for c in doc["contention"])  # no NIC demand sized from a guess

    doc, _ = analyze(nvidia_smi_topo=P40, ibstat=P40_IBSTAT_100G)
    [g05] = rules(doc, "G05")
    assert g05["message"].startswith("8 GPUs share one 100 Gb/s NIC, mlx5_0")
    # the port's expected 11.625 GB/s (100 Gb/s / 8 x 0.93) over 8 GPUs: the verdict's figure, one model
    assert "about 1.45 GB/s each" in g05["message"] and "11.6 GB/s per direction being the limit" in g05["message"]
    from apps.domain.verdict import gpu_rows

    assert {r["effective_gbs"] for r in gpu_rows(doc)} == {1.45}
    to_nic = [c for c in doc["contention"] if c["scenario"] == "gpu_to_nic"]
    port = 100 / 8 * 0.93  # bandwidth.ib_port(100).expected_gbs
    assert to_nic and all(c["demand_gbs"] <= port + 1e-6 for c in to_nic)
    assert all(c["ratio"] <= 1 for c in to_nic if c["kind"] == "switch_uplink")
    assert not [f for f in rules(doc, "P09") if "sending to its NIC" in f["message"]]


def test_polaris_gpus_on_two_numa_nodes_are_not_joined():
    """The capture's GPU0 (NUMA 3) and GPU2 (NUMA 1) have the same cells (SYS to everything else,
    NV4 between them): the same cells do not put two NUMA nodes in one place."""
    doc, G = analyze(nvidia_smi_topo=POLARIS)
    assert {g["name"]: g["numa"] for g in doc["gpus"]} == {"GPU0": 3, "GPU1": 2, "GPU2": 1, "GPU3": 0}
    assert ancestors(G, "GPU0")[-1] == "cpu3" and ancestors(G, "GPU2")[-1] == "cpu1"


# synthetic topo -m (written for this test): a NIC NODE to GPUs of both sockets, which the matrix
# puts SYS apart; and three GPUs whose PIX cells cannot all hold under one switch
_NIC_BETWEEN_SOCKETS = (
    "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tSYS\tNODE\t0-7\t0\n"
    "GPU1\tSYS\t X \tNODE\t8-15\t1\n"
    "NIC0\tNODE\tNODE\t X \n"
    "\nNIC Legend:\n\n  NIC0: mlx5_0\n"
)
_PIX_CHAIN = (
    "\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tPIX\tPXB\t0-7\t0\n"
    "GPU1\tPIX\t X \tPIX\t0-7\t0\n"
    "GPU2\tPXB\tPIX\t X \t0-7\t0\n"
)


def test_a_nic_node_to_two_sockets_joins_one_of_them():
    doc, G = analyze(nvidia_smi_topo=_NIC_BETWEEN_SOCKETS)
    tops = Counter(ancestors(G, x)[-1] for x in ("GPU0", "GPU1", "mlx5_0"))
    assert ancestors(G, "GPU0")[-1] != ancestors(G, "GPU1")[-1] and sorted(tops.values()) == [1, 2]
    # the cell the layout cannot hold is named
    assert any("mlx5_0" in d["subject"] or "NIC0" in d["subject"] for d in doc["graph"]["disagreements"])


def test_pix_cells_that_cannot_all_hold_keep_the_farther_pair_apart():
    doc, G = analyze(nvidia_smi_topo=_PIX_CHAIN)
    parents = {g: G.nodes[g]["parent"] for g in ("GPU0", "GPU1", "GPU2")}
    assert parents["GPU0"] == parents["GPU1"] != parents["GPU2"]
    pairs = {(p["a"], p["b"]): p["path_class"] for p in doc["gpu_pairs"]}
    assert pairs["GPU0", "GPU2"] == "PXB"  # as printed
    assert [d["subject"] for d in doc["graph"]["disagreements"]] == ["GPU1-GPU2"]
