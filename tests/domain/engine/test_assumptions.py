"""The assumption policy (assumptions.assume) as the graph, paths, contention, estimate and the
document use it; NCCL XML host bridges per NUMA node; inferred NVSwitch; dual-port HCAs."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain import assumptions
from apps.domain import bandwidth as bw
from apps.domain.analysis import HostAnalysis, analyze_host
from apps.domain.assemble import assemble
from apps.domain.bundle import read_bundle
from apps.domain.hostgraph import build_host_graph, path_class

BUNDLES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"
TOPO = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia_smi_topo"


def analyze(name: str, **extra: str) -> HostAnalysis:
    host, sections = read_bundle(BUNDLES / name)
    return analyze_host({**sections, **extra}, host)


# -- the policy itself --------------------------------------------------------------------------


@pytest.mark.parametrize("counts,gpus,family,sm", [
    ([18] * 28, 8, "H100", 90),
    ([12] * 28, 8, "A100", 80),
    ([1, 2, 2, 1, 1, 2, 2, 1] * 2, 8, "V100", 70),
    ([4], 2, "GA10x", 86),
    ([4] * 6, 4, "A100", 80),
])
def test_gpu_class_from_nvlink_counts(counts, gpus, family, sm) -> None:
    model, words = assumptions.infer_gpu_class(counts, gpus)
    info = bw.gpu_generation(model)
    assert info.family == family and info.sm == sm and words


def test_no_nvlink_tells_nothing_about_the_model() -> None:
    assert assumptions.infer_gpu_class([], 8) == (None, None)
    a = assumptions.assume(None, nv_counts=[], gpu_count=8)
    assert a.gpu_model is None and not a.gpu_assumed
    assert a.pcie_gen == assumptions.ASSUMED_PCIE_GEN == 4 and "GPU query" not in a.sentences["pcie"]
    assert "--query-gpu" in a.sentences["gpu"]


def test_nv18_names_b200_ambiguity_and_inter_socket_is_nccl_skl() -> None:
    a = assumptions.assume(None, nv_counts=[18] * 28, gpu_count=8)
    assert a.gpu_assumed and "H100-class" in a.sentences["gpu"] and "B200" in a.sentences["gpu"]
    assert a.pcie_gen == 5  # the H100 class's host link
    assert a.inter_socket_assumed and a.inter_socket.nccl_gbs == bw.INTER_SOCKET_TABLE["SKL"][1]
    assert "host_info" in a.sentences["inter_socket"]


def test_known_cpu_and_model_assume_nothing_but_unreported_links() -> None:
    a = assumptions.assume("NVIDIA A100-SXM4-80GB", cpu_vendor="amd", cpu_model=1, cpu_family=25)
    assert not a.gpu_assumed and not a.inter_socket_assumed
    assert a.inter_socket.nccl_gbs == bw.INTER_SOCKET_TABLE["AMD"][1]
    assert set(a.sentences) == {"pcie"}


def test_legacy_legend_assumes_gen3() -> None:
    assert assumptions.assume(None, legacy_topo=True).pcie_gen == 3


# -- topo -m alone: every hop has a figure, flagged, and the document says why -----------------


def test_topo_only_a100_every_pcie_hop_has_an_assumed_figure() -> None:
    a = analyze("dgx_a100_ash6")
    doc = a.doc
    assert doc["summary"]["gpu_model"] is None
    assert doc["summary"]["gpu_model_assumed"].startswith("A100-class")
    assert doc["graph"]["assumed_gpu_model"]
    pcie = [e for e in doc["graph"]["edges"] if e["kind"] == "pcie"]
    assert pcie and all(e["spec_gbs"] == bw.pcie_link(4, 16).spec_gbs and e["assumed"] for e in pcie)
    nv = [e for e in doc["graph"]["edges"] if e["kind"] == "nvlink"]
    assert nv and all(e["assumed"] and e["spec_gbs"] == 12 * 25.0 for e in nv)
    for entry in doc["gpu_nic"]:
        pcie_hops = [h for h in entry["hops"] if h["kind"] == "pcie"]
        assert pcie_hops and all(h["expected_gbs"] is not None and h["assumed"] for h in pcie_hops)
    text = " ".join(doc["assumptions"])
    assert "A100-class" in text and "Gen4 x16" in text and "SKL_QPI_BW" in text


def test_estimate_uses_the_same_assumed_links_as_the_graph() -> None:
    doc = analyze("paddle_8xp40").doc  # PCIe-only legacy box: Gen3 x16 assumed everywhere
    gen3 = bw.pcie_link(3, 16).spec_gbs
    assert all(e["spec_gbs"] == gen3 for e in doc["graph"]["edges"] if e["kind"] == "pcie" and e["assumed"])
    est = doc["estimate"]
    assert est["b_gpu_gbs"] <= gen3 + 1e-6
    # before the policy the estimate silently assumed Gen4 (31.5) while the graph had no figure
    assert est["b_gpu_gbs"] < bw.pcie_link(4, 16).spec_gbs


def test_journey1_p40_gpu5_through_host_memory_and_the_socket_link() -> None:
    doc = analyze("paddle_8xp40").doc
    e = next(x for x in doc["gpu_nic"] if x["gpu"] == "GPU5")
    kinds = [h["kind"] for h in e["hops"]]
    assert e["gdr"] is False and "host_memory_copy" in kinds and "inter_socket" in kinds
    slow = e["hops"][e["bottleneck"]]
    assert slow["kind"] == "inter_socket" and slow["assumed"] and "host_info" in slow["note"]
    assert e["bandwidth_gbs"] == bw.INTER_SOCKET_TABLE["SKL"][1]


def test_host_info_cpu_replaces_the_inter_socket_assumption(tmp_path) -> None:
    info = "cpu_vendor\tGenuineIntel\ncpu_family\t6\ncpu_model\t143\nsockets\t2\n"
    doc = analyze("paddle_8xp40", host_info=info).doc
    sock = [e for e in doc["graph"]["edges"] if e["kind"] == "inter_socket"]
    assert sock and all(not e["assumed"] and e["nccl_gbs"] == bw.INTER_SOCKET_TABLE["SRP"][1] for e in sock)
    assert not any("SKL_QPI_BW" in s for s in doc["assumptions"])
    assert doc["graph"]["cpu_vendor"] == "intel" and doc["graph"]["cpu_model"] == 143


def test_nic_state_unknown_from_topo_alone() -> None:
    topo = (TOPO / "paddle_8xp40_pcie_switches_soc.txt").read_text()
    s = analyze_host({"nvidia_smi_topo": topo}, "h").doc["summary"]
    assert s["nic_count"] == 1 and s["nic_state_count"] == 0 and s["active_nic_count"] == 0
    s2 = analyze("paths_deepep_8xa100_8nic_roce").doc["summary"]
    assert s2["nic_state_count"] == s2["nic_count"] == 8


def test_document_round_trip_keeps_assumptions() -> None:
    a = analyze("dgx_a100_ash6")
    b = HostAnalysis.from_dict(a.to_dict())
    G = b.host_graph()
    assert G.graph["assumptions"] == a.doc["assumptions"]
    old = a.to_dict()
    del old["assumptions"]
    assert HostAnalysis.from_dict(old).doc["assumptions"] == []


def test_known_model_and_links_assume_nothing() -> None:
    doc = analyze("synthetic_hgx_h100_gpu_x8").doc
    assert doc["summary"]["gpu_model_assumed"] is None
    assert not any(e["assumed"] for e in doc["graph"]["edges"] if e["kind"] == "pcie")


# -- NCCL XML -------------------------------------------------------------------------------------


def test_ndv4_xml_one_host_bridge_per_numa_node_and_virtual_switches() -> None:
    a = analyze("azhpc_ndv4_xml")
    G = a.graph
    rcs = sorted(n for n, d in G.nodes(data=True) if d["kind"] == "root_complex")
    assert rcs == ["rc:numa0", "rc:numa1", "rc:numa2", "rc:numa3"]
    sw = G.nodes["pci:ffff:ff:01.0"]
    assert sw["kind"] == "switch" and sw["parent"] == "rc:numa0"
    # same <pci> switch: PIX; different <cpu>: SYS
    gpus = {G.nodes[g]["bdf"]: g for g in G if G.nodes[g]["kind"] == "gpu"}
    assert path_class(G, gpus["0003:00:00.0"], gpus["0004:00:00.0"]) == "PIX"
    assert path_class(G, gpus["0003:00:00.0"], gpus["0001:00:00.0"]) == "SYS"


def test_p4de_xml_same_cpu_other_switch_is_phb_and_nvswitch_is_inferred() -> None:
    a = analyze("aws_p4de_xml")
    G, doc = a.graph, a.doc
    assert path_class(G, "GPU0", "GPU1").startswith("NV")  # NVSwitch, not PIX P2P over PCIe
    from apps.domain.hostgraph import pcie_class
    assert pcie_class(G, "GPU0", "GPU2") == "PHB"  # two switches under one <cpu>
    assert pcie_class(G, "GPU0", "GPU4") == "SYS"
    assert G.nodes["nvswitch0"]["inferred"]
    e = G.edges["GPU0", "nvswitch0"]
    assert e["links"] == 12 and e["inferred"] and e["assumed"]
    pair = next(p for p in doc["gpu_pairs"] if (p["a"], p["b"]) == ("GPU0", "GPU4"))
    assert pair["mechanism"] == "nvswitch" and pair["path_class"] == "NV12"
    assert any("NVSwitch board is assumed" in s for s in doc["assumptions"])


def test_no_nvswitch_inferred_when_a_source_reports_nvlink() -> None:
    # the DGX-1 has SXM2 GPUs but topo -m shows the real hybrid mesh: nothing inferred
    G = analyze("microway_dgx1_v100").graph
    assert "nvswitch0" not in G


# -- dual-port HCAs ----------------------------------------------------------------------------


def test_second_hca_port_shares_the_topo_label_and_place() -> None:
    topo = {"matrix": {"GPU0": {"GPU0": "X", "GPU1": "PIX", "NIC0": "PIX"},
                       "GPU1": {"GPU0": "PIX", "GPU1": "X", "NIC0": "PIX"},
                       "NIC0": {"GPU0": "PIX", "GPU1": "PIX", "NIC0": "X"}},
            "nics": [{"name": "NIC0", "device": "mlx5_0"}]}
    ib = {"cas": [{"name": "mlx5_0", "ports": [
        {"number": 1, "state": "Active", "rate_gbps": 200, "link_layer": "InfiniBand"},
        {"number": 2, "state": "Active", "rate_gbps": 200, "link_layer": "InfiniBand"}]}]}
    facts = assemble({"nvidia_smi_topo": topo, "ibstat": ib}, "h")
    ports = {n.name: n for n in facts.nics}
    assert set(ports) == {"mlx5_0", "mlx5_0:2"} and ports["mlx5_0:2"].label == "NIC0"
    G = build_host_graph(facts)
    assert G.nodes["mlx5_0:2"]["kind"] == "nic"
    assert G.nodes["mlx5_0:2"]["parent"] == G.nodes["mlx5_0"]["parent"]
    assert path_class(G, "GPU0", "mlx5_0:2") == "PIX"
    assert not G.graph["disagreements"]


def test_the_policy_s_docstring_examples_hold():
    import doctest

    failed, tried = doctest.testmod(assumptions)
    assert tried >= 6 and failed == 0
