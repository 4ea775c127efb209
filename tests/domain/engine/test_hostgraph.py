"""HostGraph: exact, XML and inferred builds, path classes and cross-checks against topo -m."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.assemble import assemble
from apps.domain.facts import HostFacts
from apps.domain.hostgraph import build_host_graph, path_class, pcie_path
from apps.domain.parsers import KINDS, parse

BUNDLES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"


def load_results(name: str, only: tuple[str, ...] | None = None) -> tuple[dict, str]:
    """Parse every ``<kind>.txt|xml`` of a bundle folder (``only``: restrict to these kinds)."""
    folder = BUNDLES / name
    results = {}
    for path in sorted(folder.iterdir()):
        kind = path.stem
        if kind in KINDS and (only is None or kind in only):
            results[kind] = parse(kind, path.read_text(encoding="utf-8", errors="replace"))
    host = folder / "hostname.txt"
    return results, host.read_text().strip() if host.exists() else name


def load_facts(name: str, only: tuple[str, ...] | None = None) -> HostFacts:
    results, hostname = load_results(name, only)
    return assemble(results, hostname)


def topo(rows: dict[str, str], nics: dict[str, str] | None = None, affinity: dict[str, str] | None = None) -> dict:
    """A topo -m parser result from compact rows: {"GPU0": "X PIX PXB", ...} in label order."""
    labels = list(rows)
    matrix = {r: dict(zip(labels, cells.split())) for r, cells in rows.items()}
    gpus = [{"index": int(lb[3:]), "name": lb, "numa_affinity": (affinity or {}).get(lb)}
            for lb in labels if lb.startswith("GPU")]
    nic_list = [{"name": lb, "device": (nics or {}).get(lb, lb)} for lb in labels if not lb.startswith("GPU")]
    return {"variant": "link", "legend": "current", "columns": labels, "gpus": gpus, "nics": nic_list,
            "matrix": matrix, "warnings": []}


def matrix_cells(facts: HostFacts):
    """Every (a, b, token) cell of topo -m with a != b, labels as printed."""
    for a, cols in facts.topo.items():
        for b, t in cols.items():
            if a != b and t and t != "X":
                yield a, b, t


def node_for(facts: HostFacts, label: str) -> str:
    n = facts.nic(label)
    return n.name if n else label


# -- inferred (topo -m only) -----------------------------------------------------------------


def test_pix_group_shares_one_inferred_switch():
    """
        cpu0
         |
        rc (inferred)
         |
        sw (inferred)
       /   |    \\
    GPU0  GPU1  mlx5_0          all PIX
    """
    facts = assemble({"nvidia_smi_topo": topo({
        "GPU0": "X PIX PIX", "GPU1": "PIX X PIX", "mlx5_0": "PIX PIX X"})}, "h")
    G = build_host_graph(facts)
    assert G.graph["inferred"] is True and G.graph["mode"] == "inferred"
    parents = {G.nodes[n]["parent"] for n in ("GPU0", "GPU1", "mlx5_0")}
    assert len(parents) == 1
    (sw,) = parents
    assert G.nodes[sw]["kind"] == "switch" and G.nodes[sw]["inferred"] is True
    assert G.nodes[G.nodes[sw]["parent"]]["kind"] == "root_complex"
    assert all(d["inferred"] for _, _, d in G.edges(data=True))
    assert path_class(G, "GPU0", "mlx5_0") == "PIX"


def test_pxb_builds_a_two_level_switch_tree():
    """
               rc
               |
             top sw
            /      \\
         sw A      sw B
        /   \\      /   \\
     GPU0 GPU1  GPU2 GPU3      PIX inside a pair, PXB across
    """
    facts = assemble({"nvidia_smi_topo": topo({
        "GPU0": "X PIX PXB PXB", "GPU1": "PIX X PXB PXB", "GPU2": "PXB PXB X PIX", "GPU3": "PXB PXB PIX X"})}, "h")
    G = build_host_graph(facts)
    a, b = G.nodes["GPU0"]["parent"], G.nodes["GPU2"]["parent"]
    assert a != b and G.nodes["GPU1"]["parent"] == a and G.nodes["GPU3"]["parent"] == b
    assert G.nodes[a]["parent"] == G.nodes[b]["parent"]
    assert G.nodes[G.nodes[a]["parent"]]["kind"] == "switch"
    assert path_class(G, "GPU0", "GPU3") == "PXB"
    assert pcie_path(G, "GPU0", "GPU3") == ["GPU0", a, G.nodes[a]["parent"], b, "GPU3"]


def test_node_splits_root_complexes_and_sys_splits_sockets():
    """
        cpu0 ========= cpu1
        /   \\            |
     rc0    rc1         rc2
      |      |           |
     GPU0   GPU1        GPU2       GPU0-GPU1 NODE, GPU2 SYS to both
    """
    facts = assemble({"nvidia_smi_topo": topo(
        {"GPU0": "X NODE SYS", "GPU1": "NODE X SYS", "GPU2": "SYS SYS X"},
        affinity={"GPU0": "0", "GPU1": "0", "GPU2": "1"})}, "h")
    G = build_host_graph(facts)
    assert G.nodes["GPU0"]["parent"] != G.nodes["GPU1"]["parent"]
    assert G.nodes["GPU0"]["numa"] == 0 and G.nodes["GPU2"]["numa"] == 1
    assert G.has_edge("cpu0", "cpu1") and G.edges["cpu0", "cpu1"]["kind"] == "inter_socket"
    assert [path_class(G, "GPU0", "GPU1"), path_class(G, "GPU0", "GPU2")] == ["NODE", "SYS"]
    assert pcie_path(G, "GPU0", "GPU2")[-3:] == ["cpu1", G.nodes["GPU2"]["parent"], "GPU2"]
    assert G.graph["disagreements"] == []


def test_phb_pair_shares_an_inferred_root_complex_without_switch():
    """
        rc
       /  \\
    GPU0  GPU1      PHB
    """
    facts = assemble({"nvidia_smi_topo": topo({"GPU0": "X PHB", "GPU1": "PHB X"})}, "h")
    G = build_host_graph(facts)
    assert G.nodes["GPU0"]["parent"] == G.nodes["GPU1"]["parent"]
    assert G.nodes[G.nodes["GPU0"]["parent"]]["kind"] == "root_complex"
    assert path_class(G, "GPU0", "GPU1") == "PHB"


def test_direct_nvlink_pairs_become_gpu_gpu_edges():
    """
    GPU0 ==NV2== GPU1        no NVSwitch: 2 x 25 GB/s (model unknown: V100-A100-H100 per-link spec)
    """
    facts = assemble({"nvidia_smi_topo": topo({"GPU0": "X NV2", "GPU1": "NV2 X"})}, "h")
    G = build_host_graph(facts)
    e = G.edges["GPU0", "GPU1"]
    assert e["kind"] == "nvlink" and e["links"] == 2 and e["spec_gbs"] == 50.0
    assert "nvswitch0" not in G
    assert path_class(G, "GPU0", "GPU1") == "NV2"


def test_nv12_between_all_pairs_implies_an_nvswitch_fabric():
    """
    GPU0..GPU3 each NV12 to 3 peers = 36 links > 18: only an NVSwitch can do that
          nvswitch0
       /   |   |   \\
    GPU0 GPU1 GPU2 GPU3     (12 links each)
    """
    rows = {f"GPU{i}": " ".join("X" if i == j else "NV12" for j in range(4)) for i in range(4)}
    G = build_host_graph(assemble({"nvidia_smi_topo": topo(rows)}, "h"))
    assert G.nodes["nvswitch0"]["kind"] == "nvswitch" and G.nodes["nvswitch0"]["inferred"] is True
    assert not G.has_edge("GPU0", "GPU1")
    assert G.edges["GPU0", "nvswitch0"]["links"] == 12
    assert path_class(G, "GPU1", "GPU3") == "NV12"


def test_topo_with_nothing_else_marks_every_node_inferred():
    facts = load_facts("paddle_8xp40")
    G = build_host_graph(facts)
    assert all(d["inferred"] for _, d in G.nodes(data=True))


# -- real layouts, topo -m only ---------------------------------------------------------------

REAL_TOPO = ["dgx_a100_ash6", "microway_dgx1_v100", "paddle_8xp40"]


@pytest.mark.parametrize("name", REAL_TOPO)
def test_inferred_path_classes_equal_the_matrix(name):
    facts = load_facts(name, ("nvidia_smi_topo",))
    G = build_host_graph(facts)
    cells = list(matrix_cells(facts))
    assert cells
    for a, b, t in cells:
        assert path_class(G, node_for(facts, a), node_for(facts, b)) == t, (a, b)
    assert G.graph["disagreements"] == []


def test_dgx_a100_inferred_layout():
    """DGX A100 (NPS4): 4 GPU pairs each PXB to 2 compute NICs; 2 dual-port storage NICs SYS to all.

    cpu3: top sw -> [GPU0] [GPU1] [mlx5_0] [mlx5_1]   (one leaf switch each: PXB between all)
    cpu1, cpu7, cpu5: the same for GPU2/3, GPU4/5, GPU6/7
    cpu8, cpu9 (NUMA unknown): sw -> mlx5_4, mlx5_5 (PIX) and mlx5_10, mlx5_11
    nvswitch0: NV12 to every GPU
    """
    facts = load_facts("dgx_a100_ash6")
    G = build_host_graph(facts)
    cpus = sorted(n for n, d in G.nodes(data=True) if d["kind"] == "cpu")
    assert {G.nodes[c]["numa"] for c in cpus} == {1, 3, 5, 7, None}
    assert len(cpus) == 6
    assert G.nodes["GPU0"]["numa"] == 3 and G.nodes["mlx5_0"]["numa"] == 3
    assert G.nodes["mlx5_4"]["parent"] == G.nodes["mlx5_5"]["parent"]
    assert G.nodes["mlx5_4"]["numa"] is None
    top = G.nodes[G.nodes["GPU0"]["parent"]]["parent"]
    assert G.nodes[top]["kind"] == "switch"
    below = {n for n in G if G.nodes[n].get("parent") == top}
    assert len(below) == 4  # four leaf switches, one per device
    assert "nvswitch0" in G and G.edges["GPU7", "nvswitch0"]["links"] == 12
    assert sum(1 for _, _, d in G.edges(data=True) if d["kind"] == "nvlink") == 8


def test_dgx1_hybrid_cube_mesh_keeps_pcie_only_pairs():
    """DGX-1 V100: NV1/NV2 links between some pairs, SYS between others; no NVSwitch.

    GPU0 -NV1- GPU1, GPU0 -NV2- GPU3, GPU0 -NV2- GPU4, GPU0 .. GPU5: SYS (no NVLink)
    """
    facts = load_facts("microway_dgx1_v100")
    G = build_host_graph(facts)
    assert "nvswitch0" not in G
    nv = {(a, b): d["links"] for a, b, d in G.edges(data=True) if d["kind"] == "nvlink"}
    assert len(nv) == 16
    assert sorted(set(nv.values())) == [1, 2]
    assert path_class(G, "GPU0", "GPU5") == "SYS"
    assert path_class(G, "GPU0", "mlx5_0") == "PIX"
    assert path_class(G, "GPU0", "mlx5_1") == "PHB"
    # V100-era boards: typical Gen3 x16 assumed for inferred links, and said so
    e = G.edges["GPU0", G.nodes["GPU0"]["parent"]]
    # the reported gen/width stay unknown; the figures come from the assumption policy
    assert e["gen"] is None and e["width"] is None and e["inferred"] and e["assumed"]
    assert e["spec_gbs"] == 15.75 and "assumed" in e["note"]


def test_pcie_only_box_with_two_switch_levels_and_far_nic():
    """8x P40 behind PCIe switches (PIX in 4s, PXB across), one NIC on the other socket (SOC).

                 cpu0 ==== cpu1
                  |          |
                 rc0        rc1
                  |          |
                top sw     mlx5_0
               /      \\
          sw (0-3)   sw (4-7)
    """
    facts = load_facts("paddle_8xp40")
    G = build_host_graph(facts)
    assert facts.topo_legacy is True
    leaf = {G.nodes[f"GPU{i}"]["parent"] for i in range(8)}
    assert len(leaf) == 2
    tops = {G.nodes[s]["parent"] for s in leaf}
    assert len(tops) == 1 and G.nodes[next(iter(tops))]["kind"] == "switch"
    assert G.nodes["GPU0"]["numa"] != G.nodes["mlx5_0"]["numa"] or G.nodes["mlx5_0"]["numa"] is None
    assert path_class(G, "GPU0", "mlx5_0") == "SYS"
    assert not any(d["kind"] == "nvlink" for _, _, d in G.edges(data=True))


# -- exact (PCI listings) ----------------------------------------------------------------------


def sysfs_dev(bdf: str, ancestry: list[str], cls: str, vendor: str = "15b3", numa: int = 0,
              cur: tuple = (16.0, 16), mx: tuple = (16.0, 16)) -> dict:
    return {"bdf": bdf, "ancestry": ancestry, "root_complex": "pci0000:" + (ancestry[0][5:7] if ancestry else bdf[5:7]),
            "class_code": cls, "vendor_id": vendor, "device_id": "0000", "numa_node": numa,
            "current_link_speed_gts": cur[0], "current_link_width": cur[1],
            "max_link_speed_gts": mx[0], "max_link_width": mx[1]}


def two_root_ports_host(topo_token: str) -> dict:
    """
        cpu0
         |
      rc:0000:00
       /       \\
    00:01.0   00:02.0     (root ports)
      |          |
     GPU0     mlx5_0      -> PHB by the tree
    """
    rp1, rp2 = "0000:00:01.0", "0000:00:02.0"
    return {
        "sysfs_pci": {"devices": [
            sysfs_dev(rp1, [], "0604", "8086"), sysfs_dev(rp2, [], "0604", "8086"),
            sysfs_dev("0000:01:00.0", [rp1], "0302", "10de"), sysfs_dev("0000:02:00.0", [rp2], "0207")]},
        "nvidia_smi_gpus": {"gpus": [{"index": 0, "bdf": "00000000:01:00.0", "name": "NVIDIA H100 80GB HBM3",
                                      "link_gen_current": 5, "link_gen_max": 5, "link_width_current": 16,
                                      "link_width_max": 16}]},
        "sysfs_ib": {"cas": [{"name": "mlx5_0", "bdf": "0000:02:00.0",
                              "ports": [{"number": 1, "state": "Active", "rate_gbps": 400,
                                         "link_layer": "InfiniBand"}]}]},
        "nvidia_smi_topo": topo({"GPU0": f"X {topo_token}", "NIC0": f"{topo_token} X"}, nics={"NIC0": "mlx5_0"}),
    }


def test_exact_tree_agrees_with_topo():
    G = build_host_graph(assemble(two_root_ports_host("PHB"), "h"))
    assert G.graph["mode"] == "exact" and G.graph["inferred"] is False
    assert G.nodes["GPU0"]["parent"] == "pci:0000:00:01.0"
    assert G.nodes["mlx5_0"]["parent"] == "pci:0000:00:02.0"
    assert G.nodes["mlx5_0"]["label"] == "NIC0" and G.nodes["mlx5_0"]["rate_gbps"] == 400
    assert path_class(G, "GPU0", "mlx5_0") == "PHB"
    assert pcie_path(G, "GPU0", "mlx5_0") == ["GPU0", "pci:0000:00:01.0", "rc:0000:00", "pci:0000:00:02.0", "mlx5_0"]
    assert G.graph["disagreements"] == []


def test_topo_that_contradicts_the_tree_is_recorded_not_fatal():
    """topo -m says PIX for GPU0-mlx5_0, but the tree puts them under different root ports (PHB)."""
    G = build_host_graph(assemble(two_root_ports_host("PIX"), "h"))
    msgs = [d["message"] for d in G.graph["disagreements"]]
    assert any("PIX" in m and "GPU0-NIC0" in m and "PHB" in m for m in msgs), msgs
    assert path_class(G, "GPU0", "mlx5_0") == "PHB"  # the graph follows the exact source


def test_gpu_idle_downclock_is_not_degraded_but_narrow_width_is():
    """
    root port (Gen5 x16) -- GPU0 at Gen1 x16 (idle, P8)   -> not degraded
    root port (Gen5 x16) -- mlx5_0 at Gen5 x8             -> degraded (width)
    """
    host = two_root_ports_host("PHB")
    devs = host["sysfs_pci"]["devices"]
    devs[2].update(current_link_speed_gts=2.5)
    devs[3].update(current_link_width=8)
    G = build_host_graph(assemble(host, "h"))
    g = G.edges["GPU0", "pci:0000:00:01.0"]
    n = G.edges["mlx5_0", "pci:0000:00:02.0"]
    assert g["degraded"] is False and "idle" in g["note"]
    assert g["spec_gbs"] == pytest.approx(31.5)  # 16 GT/s max: the link the GPU trains to under load
    assert n["degraded"] is True and n["width"] == 8 and n["spec_gbs"] == pytest.approx(31.5 / 2)


def test_dell_xe9680_lspci_switch_grouping_and_nvswitches():
    """Dell XE9680 HGX H100 full lspci -vvv: 8 Broadcom PEX switches, one per GPU, 4 NVSwitches.

    rc:0000:15 -- root port 15:01.0 -- switch 16:00.0 (downstream ports 17:00.0..17:03.0)
                                          +-- GPU0 (19:00.0), NICs, NVMe
    """
    facts = load_facts("dell_xe9680_lspci")
    G = build_host_graph(facts)
    assert G.graph["mode"] == "exact"
    switches = [n for n, d in G.nodes(data=True) if d["kind"] == "switch"]
    assert len(switches) == 8
    sw = G.nodes["pci:0000:16:00.0"]
    assert sw["upstream_bdf"] == "0000:16:00.0"
    assert sorted(sw["port_bdfs"]) == ["0000:17:00.0", "0000:17:01.0", "0000:17:02.0", "0000:17:03.0"]
    assert G.nodes["GPU0"]["parent"] == "pci:0000:16:00.0" and G.nodes["GPU0"]["bdf"] == "0000:19:00.0"
    assert all(G.nodes[G.nodes[f"GPU{i}"]["parent"]]["kind"] == "switch" for i in range(8))
    assert {G.nodes[f"GPU{i}"]["numa"] for i in range(4)} == {0} and G.nodes["GPU4"]["numa"] == 1
    nvs = G.nodes["nvswitch0"]
    assert nvs["kind"] == "nvswitch" and nvs["switch_count"] == 4 and len(nvs["bdfs"]) == 4
    e = G.edges["GPU0", "nvswitch0"]
    assert e["links"] == 18 and e["inferred"] is True  # board norm: lspci does not show link counts
    assert path_class(G, "GPU0", "GPU5") == "NV18"
    up = G.edges["pci:0000:16:00.0", "pci:0000:15:01.0"]
    assert (up["gen"], up["width"]) == (5, 16) and up["degraded"] is False
    assert not any(d["degraded"] for _, _, d in G.edges(data=True))
    assert not any(G.nodes[n]["kind"] == "nvswitch" for n in G if n.startswith("pci:"))


def test_synthetic_downtrained_gpu_is_degraded():
    facts = load_facts("synthetic_hgx_h100_gpu_x8")
    G = build_host_graph(facts)
    bad = [(a, b) for a, b, d in G.edges(data=True) if d["degraded"]]
    assert len(bad) == 1
    (a, b) = bad[0]
    gpu = a if a.startswith("GPU") else b
    assert G.nodes[gpu]["bdf"] == "0000:3b:00.0"
    assert G.edges[a, b]["width"] == 8 and G.edges[a, b]["max_width"] == 16
    # Broadcom PEX Gen5 switches are marked for NCCL's flattening (domain.md section 1 notes)
    assert any(d.get("bcm_gen") == 5 for _, d in G.nodes(data=True) if d["kind"] == "switch")


def test_stelline_three_sources_agree_with_topo():
    """ASUS ESC8000A-E12 (2x Genoa): GPUs straight on root ports, dual-port CX-7 per socket.

    cpu0: rc 00 -- rp 01.1 -- GPU0 | rc 20 -- rp 03.1 -- mlx5_0, mlx5_1 | rc 40 -- GPU1 | rc 60 (NVMe)
    cpu1: rc 80 -- rp 01.1 -- mlx5_2, mlx5_3 | rc c0 -- GPU2 | rc e0 -- GPU3
    """
    facts = load_facts("stelline_esc8000a")
    G = build_host_graph(facts)
    assert G.graph["mode"] == "exact"
    for a, b, t in matrix_cells(facts):
        assert path_class(G, node_for(facts, a), node_for(facts, b)) == t, (a, b)
    assert G.graph["disagreements"] == []
    assert G.nodes["mlx5_0"]["parent"] == G.nodes["mlx5_1"]["parent"] == "pci:0000:20:03.1"
    assert G.nodes["mlx5_2"]["bdf"] == "0000:81:00.0"
    assert any("bus order" in w for w in G.graph["warnings"])
    assert G.nodes["GPU0"]["parent"] == "pci:0000:00:01.1"
    assert G.nodes["rc:0000:60"]["numa"] == 0  # from the RAID card's NUMA line, not a kept device
    assert G.nodes["mlx5_0"]["active"] is False  # ibv_devinfo: PORT_DOWN


def test_nccl_xml_of_a_cloud_vm():
    """Azure ND96asr_v4 NCCL topology file: 4 virtual switches ffff:ff:0x.0, 2 GPUs + 2 NICs each.

    cpu0 -- rc(ffff:ff:01.0) -- switch -- 2 GPUs, 2 IB NICs      (x4 NUMA nodes, AMD Rome)
    """
    facts = load_facts("azhpc_ndv4_xml")
    G = build_host_graph(facts)
    assert G.graph["mode"] == "nccl_xml" and G.graph["cpu_vendor"] == "amd"
    assert len([n for n, d in G.nodes(data=True) if d["kind"] == "gpu"]) == 8
    nics = [n for n, d in G.nodes(data=True) if d["kind"] == "nic"]
    assert len(nics) == 8
    switches = [n for n, d in G.nodes(data=True) if d["kind"] == "switch"]
    assert len(switches) == 4 and len({G.nodes[s]["numa"] for s in switches}) == 4
    for s in switches:
        below = [n for n in G if G.nodes[n].get("parent") == s]
        assert sorted(G.nodes[n]["kind"] for n in below) == ["gpu", "gpu", "nic", "nic"]
    gpu = next(n for n in G.nodes if G.nodes[n]["kind"] == "gpu")
    nic = next(n for n in nics if G.nodes[n]["parent"] == G.nodes[gpu]["parent"])
    assert path_class(G, gpu, nic) == "PIX"
    assert G.edges["cpu0", "cpu1"]["nccl_gbs"] == 16.0  # AMD_BW
    assert all(G.nodes[r]["inferred"] for r in G if G.nodes[r]["kind"] == "root_complex")


def test_nccl_xml_intel_host_without_gpu_names():
    """AWS p4de.24xlarge topology file: Intel Cascade Lake (model 0x55 -> SKL_QPI_BW 10), 8 A100.

    GPU model comes from the PCI device id (0x20b2); CPU model id stays the CPU's.
    """
    facts = load_facts("aws_p4de_xml")
    G = build_host_graph(facts)
    assert facts.cpu_vendor == "intel" and facts.cpu_model == 85
    assert facts.gpu_model == "NVIDIA A100-SXM4-80GB"
    assert G.edges["cpu0", "cpu1"]["nccl_gbs"] == 10.0
    switches = [n for n, d in G.nodes(data=True) if d["kind"] == "switch"]
    assert len(switches) == 4
    for s in switches:
        kinds = sorted(G.nodes[n]["kind"] for n in G if G.nodes[n].get("parent") == s)
        assert kinds == ["gpu", "gpu", "nic"]
