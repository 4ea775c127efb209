"""All-reduce busbw estimate (NCCL's plan: channel search + tuning model) and suggested NCCL settings.

Real captures are the fixture files (tests/fixtures, copied byte for byte from /work/shared/realdata);
NIC facts a capture does not report are written as an ibstat section in the test ("stated"), and
every synthetic layout says so with its diagram. The published rows are checked in
test_calibration.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain import nccl_system
from apps.domain.analysis import analyze_host
from apps.domain.bundle import read_bundle
from apps.domain.estimate import (
    ETA_INTRA, ETA_NET, PLATEAU_BYTES, channel_search, curve, estimate, link_figures, suggest_nccl_settings,
)
from tests.domain.findings.docs import host, nic

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HGX_H100 = FIXTURES / "nvidia_smi_topo" / "sglang_30401_8xh100_hbm3_8nic.txt"  # 8x H100, NIC k PIX to GPU k


def ibstat(names, rate=400, layer="InfiniBand", down=()):
    """An ibstat section stating each port's state, rate and link layer (stated facts, not a capture)."""
    out = []
    for n in names:
        state, phys = ("Down", "Polling") if n in down else ("Active", "LinkUp")
        out.append(f"CA '{n}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: {state}\n"
                   f"\t\tPhysical state: {phys}\n\t\tRate: {rate}\n\t\tBase lid: 1\n\t\tLMC: 0\n\t\tSM lid: 1\n"
                   f"\t\tCapability mask: 0x2651e848\n\t\tPort GUID: 0x{abs(hash(n)) % (1 << 60):016x}\n"
                   f"\t\tLink layer: {layer}\n")
    return "\n".join(out)


def hgx(nics=8, rate=400, down=(), env=None):
    sections = {"nvidia_smi_topo": HGX_H100.read_text()}
    if nics:
        sections["ibstat"] = ibstat([f"mlx5_{i}" for i in range(nics)], rate, down=down)
    if env:
        sections["host_info"] = "".join(f"nccl_env\t{k}={v}\n" for k, v in env.items())
    return analyze_host(sections, "hgx").doc


def point(est, nodes):
    return next(p for p in est["points"] if p["nodes"] == nodes)


# ---- NVSwitch Hopper: NVLS, NVLS tree and the ring ---------------------------------------------

def test_hgx_h100_one_node_is_nvls_not_one_ring():
    """NCCL's default for large all-reduce on one HGX H100 is NVLS: 8 channels x 40 GB/s, 0.85
    efficiency, two operations pipelined -> 476 GB/s planned (published runs: 480-482). The old
    estimate, one ring x 0.82, said 369: a healthy node read as impossible."""
    est = estimate(hgx(nics=0))
    p = point(est, 1)
    assert p["algorithm"] == "NVLS" and p["protocol"] == "SIMPLE"
    assert p["nccl_busbw_gbs"] == pytest.approx(476.0, abs=0.1)
    assert p["busbw_gbs"] == pytest.approx(476.0 * ETA_INTRA, abs=0.5)
    assert p["ring_busbw_gbs"] == pytest.approx(360 * ETA_INTRA, abs=1)  # NCCL_ALGO=Ring: 12 x 30
    assert "NVLink SHARP" in p["limit"] and est["b_gpu_gbs"] == 360
    assert [q["nodes"] for q in est["points"]] == [1]  # no NIC reported: no multi-node point


def test_nvls_disabled_or_ring_forced_gives_the_ring():
    """NCCL_NVLS_ENABLE=0 and NCCL_ALGO=Ring (the host's reported settings) are honoured."""
    for env in ({"NCCL_NVLS_ENABLE": "0"}, {"NCCL_ALGO": "Ring"}):
        doc = hgx(nics=0, env=env)
        assert doc["nccl_env"] == env
        p = point(estimate(doc), 1)
        assert p["algorithm"] == "RING" and p["busbw_gbs"] == pytest.approx(p["ring_busbw_gbs"])
        assert "NVLink inside the node" in p["limit"]
    # the same through the estimate's env argument
    assert point(estimate(hgx(nics=0), env={"NCCL_ALGO": "Tree"}), 1)["algorithm"] == "TREE"


def test_hgx_h100_across_nodes_nvls_tree_then_ring():
    """8 x NDR400 (8 x 50 GB/s): 2 nodes run NVLS tree, above the NIC sum (8 channels x NCCL's
    57.7 GB/s per-channel maximum); from 4 nodes the ring, 8 channels x 48 GB/s."""
    est = estimate(hgx())
    assert est["b_node_gbs"] == 400
    two, four = point(est, 2), point(est, 4)
    assert two["algorithm"] == "NVLS_TREE" and two["nccl_busbw_gbs"] == pytest.approx(461.6)
    assert two["busbw_gbs"] > est["b_node_gbs"] and "per-channel NVLS tree maximum" in two["limit"]
    assert four["algorithm"] == "RING" and four["nccl_busbw_gbs"] == pytest.approx(384.0)
    assert four["limit"].startswith("NIC sum across nodes (8 x 50 GB/s)")
    assert four["busbw_gbs"] == pytest.approx(384 * ETA_NET, rel=0.01)
    assert [q["nodes"] for q in est["points"]] == [1, 2, 4, 8, 16, 32, 64]
    inter = est["channels"]["inter"]
    assert inter["RING"]["channels"] == 8 and inter["RING"]["type_inter"] == "PXN"  # GPUs reach far NICs by PXN


def test_one_nic_down_costs_its_share():
    """Same, mlx5_3 Down/Polling (F01): NCCL skips the port, the NIC sum is 7 x 50."""
    est = estimate(hgx(down=("mlx5_3",)))
    assert est["b_node_gbs"] == 350
    full = estimate(hgx())
    assert point(est, 4)["busbw_gbs"] < point(full, 4)["busbw_gbs"]
    assert point(est, 4)["busbw_gbs"] <= 350 * ETA_NET + 1


def test_ib_hca_of_one_port_is_one_nic():
    """NCCL_IB_HCA=mlx5_0 (F07): NCCL uses one port; the estimate follows the setting."""
    est = estimate(hgx(), env={"NCCL_IB_HCA": "=mlx5_0"})
    assert est["b_node_gbs"] == 50
    assert point(est, 4)["busbw_gbs"] < 50


def test_gb200_tray_rings_beat_nvls_on_four_gpus():
    """GB200 compute tray (4 GPUs, NVLink5 x 18): NVLS on 4 GPUs plans 4 x 90 = 360, the ring
    16 channels x 45 = 720: NCCL picks the ring, so the estimate does not assume NVLS on every
    NVSwitch board. The old estimate read it as an H100 ring."""
    tray = FIXTURES / "nvidia_smi_topo" / "gb200_4gpu_tray_numa_lists_gpu_numa_id_trimmed.txt"
    doc = analyze_host({"nvidia_smi_topo": tray.read_text()}, "tray").doc
    p = point(estimate(doc), 1)
    assert p["algorithm"] == "RING" and p["nccl_busbw_gbs"] == pytest.approx(720)
    assert p["algorithms"]["NVLS"] < p["busbw_gbs"]


def test_a100_nvswitch_has_no_nvls():
    """NVLS needs sm90 (search.cc L1124): an A100 board runs the ring, 12 channels x 20 GB/s."""
    name, sections = read_bundle(FIXTURES / "bundles" / "dgx_a100_ash6")
    p = point(estimate(analyze_host(sections, name).doc), 1)
    assert p["algorithm"] == "RING" and p["nccl_busbw_gbs"] == 240 and "NVLS" not in p["algorithms"]


# ---- switchless meshes: several rings over disjoint links ----------------------------------------

def test_dgx1_v100_cube_mesh_carries_six_rings():
    """DGX-1 V100 hybrid cube mesh (real capture): each GPU has 6 NVLinks (NV2 to two peers, NV1 to
    two). NCCL's search finds 6 rings of 20 GB/s (SM70_NVLINK_BW) that together use every link once
    per direction -- 120 GB/s, where the old estimate took one ring's slowest pair (41)."""
    doc = analyze_host({"nvidia_smi_topo": (FIXTURES / "nvidia_smi_topo" / "microway_dgx1_v100_4x_mlx5.txt")
                        .read_text()}, "dgx1").doc
    system = link_figures(doc)
    ring = channel_search(system).intra["RING"]
    assert (ring.n_channels, ring.bw_intra, ring.type_intra) == (6, 20.0, "NVL")
    used: dict = {}
    for order in ring.channels:
        for a, b in zip(order, order[1:] + order[:1]):
            for link in system.gpu_paths[(a, b)].links:
                used[link] = used.get(link, 0) + ring.bw_intra
    assert all(v <= system.cap[k] + 1e-6 for k, v in used.items())  # no link carries more than it has
    assert sum(used.values()) == pytest.approx(6 * 8 * 20)  # every ring step on a direct NVLink
    p = point(estimate(doc), 1)
    assert p["algorithm"] == "RING" and p["busbw_gbs"] == pytest.approx(120 * ETA_INTRA, abs=0.5)


def test_pcie_box_rings_follow_the_pcie_tree():
    """Real capture (Paddle, 8x Tesla P40, PCIe switches, legacy SOC legend): one ring at NCCL's
    Gen3 x16 figure (12 GB/s); the ring keeps each switch's GPUs together, so every shared
    uplink carries it once per direction."""
    name, sections = read_bundle(FIXTURES / "bundles" / "paddle_8xp40")
    doc = analyze_host(sections, name).doc
    est = estimate(doc)
    assert est["b_gpu_gbs"] == pytest.approx(12.0)
    group = {f"GPU{i}": i // 4 for i in range(8)}
    ring = est["ring"]
    assert sum(group[a] != group[b] for a, b in zip(ring, ring[1:] + ring[:1])) == 2
    assert point(est, 1)["limit"].startswith("PCIe inside the node")


def test_shm_across_sockets_uses_nccls_cpu_link_figure():
    """Real capture (ASUS ESC8000A-E12, 4x RTX 6000 Ada, no P2P): host-memory hops across the
    sockets are planned at NCCL's CPU<->CPU figure (AMD_BW 16), not the xGMI spec."""
    name, sections = read_bundle(FIXTURES / "bundles" / "stelline_esc8000a")
    doc = analyze_host(sections, name).doc
    [link] = [e for e in doc["graph"]["edges"] if e["kind"] == "inter_socket"]
    est = estimate(doc)
    assert link["spec_gbs"] > link["nccl_gbs"]
    assert est["b_gpu_gbs"] <= link["nccl_gbs"] and "CPU socket link" in est["limiting_link"]


def test_unknown_gpu_pairs_give_no_figure():
    """An NCCL topology file without <nvlink> (Azure NDv4): the pairs are unknown, so NCCL's
    channels cannot be found: no point, and the reason."""
    name, sections = read_bundle(FIXTURES / "bundles" / "azhpc_ndv4_xml")
    est = estimate(analyze_host(sections, name).doc)
    assert est["points"] == [] and est["limiting_link"].startswith("unknown inside the node")


# ---- curve ---------------------------------------------------------------------------------------

def test_curve_latency_bound_then_plateau_with_nccls_choice_per_size():
    doc = hgx()
    sizes = [1 << 10, 1 << 20, 1 << 26, PLATEAU_BYTES]
    one = curve(doc, 1, sizes)
    assert [p["size"] for p in one] == sizes
    assert one[0]["busbw_gbs"] < 0.05 * one[-1]["busbw_gbs"]  # 1 KiB: latency-bound
    assert one[0]["protocol"] == "LL" and one[-1]["algorithm"] == "NVLS"
    assert all(a["busbw_gbs"] <= b["busbw_gbs"] for a, b in zip(one, one[1:]))
    assert one[-1]["busbw_gbs"] == pytest.approx(point(estimate(doc), 1)["busbw_gbs"], abs=0.1)
    four = curve(doc, 4, sizes)
    assert four[-1]["algorithm"] == "RING" and four[-1]["algo"] == "ring"
    assert four[-1]["busbw_gbs"] == pytest.approx(point(estimate(doc), 4)["busbw_gbs"], abs=0.1)


def test_estimate_of_a_stored_document_matches_the_fresh_one():
    """A stored document (no HostGraph kept) is estimated the same: the graph is rebuilt from it."""
    doc = hgx()
    fresh = doc["estimate"]
    assert nccl_system.document_graph(doc).number_of_edges() == len(doc["graph"]["edges"])
    stored = estimate(dict(doc))  # another object: nothing cached, the graph rebuilt from the document
    assert [p["busbw_gbs"] for p in stored["points"]] == [p["busbw_gbs"] for p in fresh["points"]]


# ---- NCCL settings -------------------------------------------------------------------------------

def test_settings_exact_ib_hca_skips_down_and_roce():
    """8 IB NDR (mlx5_0..7, mlx5_3 Down) + 2 RoCE 100G (mlx5_8, mlx5_9); mlx5_10 storage."""
    ports = [nic(f"mlx5_{i}", rate=400, state="Down" if i == 3 else "Active",
                 phys="Polling" if i == 3 else "LinkUp") for i in range(8)]
    ports += [nic("mlx5_8", rate=100, layer="Ethernet"), nic("mlx5_9", rate=100, layer="Ethernet"),
              nic("mlx5_10", rate=200, compute=False)]
    doc = host(8, nvswitch=True, nics=ports, gpu_nic={f"GPU{i}": (f"mlx5_{i}", "PIX") for i in range(8)})
    s = {x["name"]: x for x in suggest_nccl_settings(doc)}
    assert s["NCCL_IB_HCA"]["value"] == "=mlx5_0,mlx5_1,mlx5_2,mlx5_4,mlx5_5,mlx5_6,mlx5_7"
    assert "mlx5_3" in s["NCCL_IB_HCA"]["reason"] and "InfiniBand" in s["NCCL_IB_HCA"]["reason"]
    assert "NCCL_P2P_LEVEL" not in s and "NCCL_NET_GDR_LEVEL" not in s


def test_settings_p2p_and_gdr_levels_come_with_caveats():
    doc = host(2, model="Tesla P40", default_pair="SYS", nics=[nic("mlx5_0")],
               gpu_nic={"GPU0": ("mlx5_0", "PIX"), "GPU1": ("mlx5_0", "SYS")})
    s = {x["name"]: x for x in suggest_nccl_settings(doc)}
    assert s["NCCL_P2P_LEVEL"]["value"] == "SYS" and "p2pBandwidthLatencyTest" in s["NCCL_P2P_LEVEL"]["reason"]
    assert s["NCCL_NET_GDR_LEVEL"]["value"] == "PHB" and "ib_write_bw --use_cuda" in s["NCCL_NET_GDR_LEVEL"]["reason"]
    assert "NCCL_CROSS_NIC" not in s
