"""Paths on tiny hand-built HostGraphs (engine contract shapes): GPU pairs and GPU -> NIC choice.

Link figures are the PCIe/NVLink/IB numbers of apps.domain.bandwidth, so the tests check the
wiring of paths.py, not a copy of its arithmetic.
"""

from __future__ import annotations

import networkx as nx

from apps.domain import nic_paths, paths
from apps.domain.bandwidth import inter_socket, nvlink, pcie_link

GEN3 = pcie_link(3, 16)
GEN4 = pcie_link(4, 16)


def new_host(vendor: str = "intel", **graph) -> nx.Graph:
    G = nx.Graph(hostname="h", inferred=False, sources=[], cpu_vendor=vendor, cpu_model=None,
                 gpu_model=None, warnings=[], **graph)
    return G


def add(G: nx.Graph, node: str, kind: str, parent: str | None = None, link=GEN4, edge_kind: str = "pcie",
        **attrs) -> None:
    G.add_node(node, kind=kind, label=attrs.pop("label", node), bdf=None, numa=attrs.pop("numa", None),
               parent=parent, inferred=False, **attrs)
    if parent is not None:
        G.add_edge(node, parent, kind=edge_kind, spec_gbs=link.spec_gbs if link else None,
                   expected_gbs=link.expected_gbs if link else None, degraded=False, inferred=False, note=None)


def add_socket(G: nx.Graph, cpu: str, numa: int) -> None:
    add(G, cpu, "cpu", numa=numa)
    add(G, f"rc{numa}", "root_complex", cpu, link=None, edge_kind="cpu_link")


def link_sockets(G: nx.Graph, a: str = "cpu0", b: str = "cpu1") -> None:
    bw = inter_socket(G.graph["cpu_vendor"], G.graph.get("cpu_model"))
    G.add_edge(a, b, kind="inter_socket", spec_gbs=bw.spec_gbs, expected_gbs=bw.expected_gbs,
               degraded=False, inferred=False, note=None)


def add_nvlink(G: nx.Graph, a: str, b: str, links: int, model: int = 70) -> None:
    bw = nvlink(model, links)
    G.add_edge(a, b, kind="nvlink", links=links, spec_gbs=bw.spec_gbs, expected_gbs=bw.expected_gbs,
               degraded=False, inferred=False, note=None)


def gpu(G: nx.Graph, i: int, parent: str, link=GEN4) -> str:
    add(G, f"GPU{i}", "gpu", parent, link=link, index=i, model="test GPU")
    return f"GPU{i}"


def nic(G: nx.Graph, name: str, parent: str, rate: float = 200, state: str = "Active", link_layer="InfiniBand",
        link=GEN4) -> str:
    add(G, name, "nic", parent, link=link, port=1, state=state, phys_state="LinkUp", rate_gbps=rate,
        link_layer=link_layer, active=state == "Active")
    return name


def two_socket_pcie_box() -> nx.Graph:
    """
        cpu0 ====inter-socket==== cpu1
         |                         |
        rc0                       rc1
         |                         |
        sw0 (Gen3 uplink)         sw1 (Gen3 uplink)
        /   \\                     /    \\
     GPU0   GPU1               GPU2    mlx5_0
    """
    G = new_host()
    add_socket(G, "cpu0", 0)
    add_socket(G, "cpu1", 1)
    link_sockets(G)
    add(G, "sw0", "switch", "rc0", link=GEN3)
    add(G, "sw1", "switch", "rc1", link=GEN3)
    gpu(G, 0, "sw0", GEN3)
    gpu(G, 1, "sw0", GEN3)
    gpu(G, 2, "sw1", GEN3)
    nic(G, "mlx5_0", "sw1", rate=100, link=GEN3)
    return G


def test_pix_pair_uses_pcie_p2p_and_sys_pair_uses_shm_across_sockets() -> None:
    G = two_socket_pcie_box()
    pix = paths.gpu_pair(G, "GPU0", "GPU1")
    assert (pix["path_class"], pix["mechanism"], pix["p2p"]) == ("PIX", "pcie_p2p", True)
    assert [(h["from"], h["to"]) for h in pix["hops"]] == [("GPU0", "sw0"), ("sw0", "GPU1")]
    sys_ = paths.gpu_pair(G, "GPU0", "GPU2")
    assert (sys_["path_class"], sys_["mechanism"], sys_["p2p"]) == ("SYS", "shm", False)
    assert "PXB" in sys_["reason"] and "SHM" in sys_["reason"]
    kinds = [h["kind"] for h in sys_["hops"]]
    assert kinds == ["pcie", "pcie", "cpu_link", "inter_socket", "host_memory_copy", "cpu_link", "pcie", "pcie"]
    # the host-memory buffer is local to the receiving GPU
    mem = sys_["hops"][kinds.index("host_memory_copy")]
    assert mem["from"] == "cpu1"
    assert sys_["bottleneck_gbs"] == inter_socket("intel").expected_gbs
    assert sys_["hops"][sys_["bottleneck"]]["kind"] == "inter_socket"


def test_path_classes_follow_the_lowest_common_ancestor() -> None:
    """
              cpu0
          /          \\
        rc0           rc1
         |             |
        swA           swC
       /    \\          |
    GPU0    swB       GPU3
            /  \\
         GPU1  GPU2
    """
    G = new_host()
    add(G, "cpu0", "cpu", numa=0)
    add(G, "rc0", "root_complex", "cpu0", link=None, edge_kind="cpu_link")
    add(G, "rc1", "root_complex", "cpu0", link=None, edge_kind="cpu_link")
    add(G, "swA", "switch", "rc0")
    add(G, "swB", "switch", "swA")
    add(G, "swC", "switch", "rc1")
    gpu(G, 0, "swA")
    gpu(G, 1, "swB")
    gpu(G, 2, "swB")
    gpu(G, 3, "swC")
    add(G, "rc2", "root_complex", "cpu0", link=None, edge_kind="cpu_link")
    gpu(G, 4, "rc2")
    gpu(G, 5, "rc2")
    assert paths.path_class(G, "GPU1", "GPU2") == "PIX"
    assert paths.path_class(G, "GPU0", "GPU1") == "PXB"
    assert paths.path_class(G, "GPU0", "GPU3") == "NODE"
    assert paths.path_class(G, "GPU4", "GPU5") == "PHB"
    assert paths.gpu_pair(G, "GPU0", "GPU1")["mechanism"] == "pcie_p2p"
    node = paths.gpu_pair(G, "GPU0", "GPU3")
    assert node["mechanism"] == "shm" and node["nccl_path"] == "PHB"


def test_amd_host_with_two_gpus_allows_p2p_across_sockets() -> None:
    G = two_socket_pcie_box()
    G.graph["cpu_vendor"] = "amd"
    G.remove_node("GPU1")
    pair = paths.gpu_pair(G, "GPU0", "GPU2")
    assert (pair["path_class"], pair["mechanism"], pair["p2p"]) == ("SYS", "pcie_p2p", True)


def test_p2p_status_not_ok_turns_a_pix_pair_into_shm_and_names_the_token() -> None:
    G = two_socket_pcie_box()
    p2p = {"r": {"GPU0": {"GPU0": "X", "GPU1": "CNS"}, "GPU1": {"GPU0": "CNS", "GPU1": "X"}}}
    pair = paths.gpu_pair(G, "GPU0", "GPU1", p2p=p2p)
    assert (pair["mechanism"], pair["p2p"]) == ("shm", False)
    assert "CNS" in pair["reason"] and "chipset" in pair["reason"]
    # the same facts read from the graph
    G.graph["p2p"] = p2p
    assert paths.gpu_pair(G, "GPU0", "GPU1")["mechanism"] == "shm"


def cube_fragment() -> nx.Graph:
    """
    GPU0 ==NV2== GPU1 ==NV1== GPU2        GPU3 (no NVLink)
      \\__________ all four under one switch sw0 __________/
    """
    G = new_host()
    add_socket(G, "cpu0", 0)
    add(G, "sw0", "switch", "rc0", link=GEN3)
    for i in range(4):
        gpu(G, i, "sw0", GEN3)
    add_nvlink(G, "GPU0", "GPU1", 2)
    add_nvlink(G, "GPU1", "GPU2", 1)
    return G


def test_nvlink_pairs_direct_relayed_and_absent() -> None:
    G = cube_fragment()
    direct = paths.gpu_pair(G, "GPU0", "GPU1")
    assert (direct["path_class"], direct["mechanism"], direct["bottleneck_gbs"]) == (
        "NV2", "nvlink", nvlink(70, 2).expected_gbs)
    relayed = paths.gpu_pair(G, "GPU0", "GPU2")
    assert (relayed["mechanism"], relayed["nccl_path"], relayed["via"], relayed["p2p"]) == (
        "nvlink", "NVB", "GPU1", True)
    assert relayed["bottleneck_gbs"] == nvlink(70, 1).expected_gbs
    assert relayed["path_class"] == "PIX"  # the PCIe class topo -m would show
    plain = paths.gpu_pair(G, "GPU0", "GPU3")
    assert (plain["mechanism"], plain["path_class"]) == ("pcie_p2p", "PIX")


def test_nvlink_pair_with_p2p_disabled_is_reported_as_broken() -> None:
    G = cube_fragment()
    p2p = {"n": {"GPU0": {"GPU1": "NS"}, "GPU1": {"GPU0": "NS"}}}
    pair = paths.gpu_pair(G, "GPU0", "GPU1", p2p=p2p)
    assert (pair["mechanism"], pair["p2p"]) == ("nvlink", False)
    assert "P2P is disabled between NVLINK connected GPUs" in pair["reason"]
    # an NVLink status matrix says nothing about PCIe-only pairs
    assert paths.gpu_pair(G, "GPU0", "GPU3", p2p={"n": {"GPU0": {"GPU3": "NS"}}})["p2p"] is True


def test_nvswitch_pairs_go_through_the_fabric() -> None:
    """GPU0..GPU3 each with 12 links into nvswitch0 (A100 HGX style)."""
    G = new_host()
    add_socket(G, "cpu0", 0)
    add(G, "nvswitch0", "nvswitch")
    for i in range(4):
        gpu(G, i, "rc0")
        add_nvlink(G, f"GPU{i}", "nvswitch0", 12, model=80)
    routes, pairs = paths.all_gpu_pairs(G)
    assert len(pairs) == 6
    assert {(p["mechanism"], p["path_class"]) for p in pairs} == {("nvswitch", "NV12")}
    first = pairs[0]
    assert [h["kind"] for h in first["hops"]] == ["nvswitch", "nvswitch"]
    assert first["bottleneck_gbs"] == nvlink(80, 12).expected_gbs
    # every GPU's fabric link carries its 3 peers when all pairs talk at once
    assert [h["flows"] for h in first["hops"]] == [3, 3]


def eight_nic_board() -> nx.Graph:
    """DGX-A100-like slice: two GPUs and two NIC ports under each switch.

        cpu0 - rc0 - swP0 -+- swA -+- GPU0, GPU1, mlx5_0, mlx5_1
                           +- swB -+- GPU2, GPU3, mlx5_2, mlx5_3
    """
    G = new_host()
    add_socket(G, "cpu0", 0)
    add(G, "swP0", "switch", "rc0")
    for s, base in (("swA", 0), ("swB", 2)):
        add(G, s, "switch", "swP0")
        gpu(G, base, s)
        gpu(G, base + 1, s)
        nic(G, f"mlx5_{base}", s)
        nic(G, f"mlx5_{base + 1}", s)
    return G


def test_gpus_spread_over_equally_close_nics_with_gdr_on() -> None:
    G = eight_nic_board()
    choice = {e["gpu"]: e for e in nic_paths.gpu_nic_choice(G)}
    assert {g: e["nic"] for g, e in choice.items()} == {
        "GPU0": "mlx5_0", "GPU1": "mlx5_1", "GPU2": "mlx5_2", "GPU3": "mlx5_3"}
    assert all(e["gdr"] and e["path_class"] == "PIX" for e in choice.values())
    assert [h["to"] for h in choice["GPU1"]["hops"]] == ["swA", "mlx5_1"]


def test_nic_that_is_not_active_is_skipped() -> None:
    G = eight_nic_board()
    G.nodes["mlx5_1"].update(state="Down", active=False)
    choice = {e["gpu"]: e["nic"] for e in nic_paths.gpu_nic_choice(G)}
    assert choice["GPU1"] == "mlx5_0"
    assert choice["GPU0"] == "mlx5_0"


def test_far_nic_turns_gdr_off_and_stages_in_memory_near_the_gpu() -> None:
    G = two_socket_pcie_box()
    choice = {e["gpu"]: e for e in nic_paths.gpu_nic_choice(G)}
    assert set(choice) == {"GPU0", "GPU1", "GPU2"}
    near, far = choice["GPU2"], choice["GPU0"]
    assert (near["nic"], near["path_class"], near["gdr"]) == ("mlx5_0", "PIX", True)
    assert (far["nic"], far["path_class"], far["gdr"]) == ("mlx5_0", "SYS", False)
    assert "PXB" in far["reason"] and "host memory" in far["reason"]
    kinds = [h["kind"] for h in far["hops"]]
    assert kinds.index("host_memory_copy") < kinds.index("inter_socket")
    assert far["hops"][kinds.index("host_memory_copy")]["from"] == "cpu0"
    # GPU0 and GPU1 both cross the switch uplink of sw0 and the inter-socket link
    up = next(h for h in far["hops"] if h["from"] == "sw0")
    assert up["flows"] == 2
    assert next(h for h in far["hops"] if h["kind"] == "inter_socket")["flows"] == 2
    assert far["nic_share"] == 3


def test_missing_gdr_module_turns_gdr_off_even_for_pix() -> None:
    G = two_socket_pcie_box()
    G.graph["gdr_module"] = False
    near = {e["gpu"]: e for e in nic_paths.gpu_nic_choice(G)}["GPU2"]
    assert near["gdr"] is False and "nvidia_peermem" in near["reason"]


def test_pxn_relays_through_the_nvlink_peer_next_to_the_nic() -> None:
    """
        cpu0 -+- rc0 - sw0 -+- GPU0, mlx5_0
              +- rc1 - sw1 -+- GPU1            GPU0 ==NV4== GPU1
    """
    G = new_host()
    add(G, "cpu0", "cpu", numa=0)
    for r in ("rc0", "rc1"):
        add(G, r, "root_complex", "cpu0", link=None, edge_kind="cpu_link")
    add(G, "sw0", "switch", "rc0")
    add(G, "sw1", "switch", "rc1")
    gpu(G, 0, "sw0")
    gpu(G, 1, "sw1")
    nic(G, "mlx5_0", "sw0")
    add_nvlink(G, "GPU0", "GPU1", 4, model=80)
    e = {x["gpu"]: x for x in nic_paths.gpu_nic_choice(G)}["GPU1"]
    assert (e["nic"], e["path_class"], e["gdr"], e["pxn_via"], e["nccl_path"]) == (
        "mlx5_0", "NODE", False, "GPU0", "PXN")
    assert e["pxn_gdr"] is True
    assert [h["kind"] for h in e["pxn_hops"]] == ["nvlink", "pcie", "pcie"]
    assert e["pxn_bandwidth_gbs"] > e["bandwidth_gbs"] or e["pxn_bandwidth_gbs"] == e["bandwidth_gbs"]


def test_matrix_has_every_gpu_nic_cell() -> None:
    G = eight_nic_board()
    cells = nic_paths.gpu_nic_matrix(G)
    assert len(cells) == 16
    cell = next(c for c in cells if c["gpu"] == "GPU0" and c["nic"] == "mlx5_3")
    assert (cell["path_class"], cell["gdr"]) == ("PXB", True)


def test_nccl_prefers_the_faster_nic_before_the_closer_one() -> None:
    """
                 cpu0
                  |
                 rc0 ---------------- sw1 (Gen5)
                  |                     |
                 sw0 (Gen5)          mlx5_1 (400 Gb/s; PHB from GPU0)
                /    \\
            GPU0    mlx5_0 (100 Gb/s; PIX from GPU0)

    ncclTopoGetLocal keeps the NICs with the most path bandwidth first and only then the lowest
    path type: GPU0 uses the 400 Gb/s mlx5_1 (PHB, 50 GB/s) rather than the 100 Gb/s mlx5_0 on
    its own switch (PIX, 12.5 GB/s). With equal rates the closer one wins.
    """
    gen5 = pcie_link(5, 16)
    G = new_host()
    add_socket(G, "cpu0", 0)
    add(G, "sw0", "switch", "rc0", link=gen5)
    add(G, "sw1", "switch", "rc0", link=gen5)
    gpu(G, 0, "sw0", gen5)
    nic(G, "mlx5_0", "sw0", rate=100, link=gen5)
    nic(G, "mlx5_1", "sw1", rate=400, link=gen5)
    choice = nic_paths.nic_choice(G)
    assert choice["GPU0"]["nic"] == "mlx5_1"
    assert choice["GPU0"]["gdr"] is False  # PHB is beyond NCCL's default GPUDirect RDMA level

    G.nodes["mlx5_0"]["rate_gbps"] = 400
    assert nic_paths.nic_choice(G)["GPU0"]["nic"] == "mlx5_0"


def _walk_min(G: nx.Graph, steps, figure: str):
    """The smallest figure over a route's graph edges, walked edge by edge (what route_min reads off the chains)."""
    vals = []
    for u, v in steps:
        if u in ("mem", "nvsw", "nvsw_in"):
            continue
        d = G.edges[u, v]
        vals.append(d.get("spec_gbs") if figure == "spec" else (
            d.get("expected_gbs") if d.get("expected_gbs") is not None else d.get("spec_gbs")))
    return min((x for x in vals if x is not None), default=None)


def test_route_minima_read_off_the_chains_equal_a_walk_over_every_route() -> None:
    """Every GPU x NIC (and GPU x GPU) route of every bundle, across sockets and host-staged
    included: route_min gives what walking the route's edges gives, for both figures."""
    from apps.domain.analysis import analyze_host
    from apps.domain.bundle import read_bundle
    from pathlib import Path

    bundles = sorted(p for p in (Path(__file__).resolve().parents[2] / "fixtures" / "bundles").iterdir() if p.is_dir())
    checked = across = 0
    for folder in bundles:
        hostname, sections = read_bundle(folder)
        G = analyze_host(sections, hostname or folder.name).graph
        devices = paths.gpu_names(G) + paths.nic_names(G)
        for a in paths.gpu_names(G):
            for b in devices:
                if a == b:
                    continue
                tree = paths.tree_route(G, a, b)
                ca, cb = paths.cpu_of(G, a), paths.cpu_of(G, b)
                mid = paths.socket_path(G, ca, cb) if ca and cb else None
                staged = [] if mid is None else (paths.steps_of(paths.ancestry(G, a)) + paths.steps_of(mid)
                                                 + paths.steps_of(reversed(paths.ancestry(G, b))))
                for figure in ("spec", "expected"):
                    assert nic_paths.route_min(G, a, b, figure) == _walk_min(G, paths.steps_of(tree or ()), figure), \
                        (folder.name, a, b, figure)
                    assert nic_paths.route_min(G, a, b, figure, staged=True) == _walk_min(G, staged, figure), \
                        (folder.name, a, b, figure, "staged")
                checked += 1
                across += paths.cpu_of(G, a) != paths.cpu_of(G, b)
    assert checked > 1000 and across > 100  # both kinds of route were met
