"""analyze_host on real captures (bundles under tests/fixtures/bundles, copied byte for byte)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apps.domain.analysis import DOC_KEYS, HostAnalysis, analyze_host
from apps.domain.bundle import BundleError, read_bundle
from apps.domain.errors import ParseError, UnknownKindError

BUNDLES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"


def analyze(name: str) -> dict:
    hostname, sections = read_bundle(BUNDLES / name)
    return analyze_host(sections, hostname).to_dict()


def by_pair(doc: dict) -> dict:
    return {(p["a"], p["b"]): p for p in doc["gpu_pairs"]}


def by_gpu(doc: dict) -> dict:
    return {e["gpu"]: e for e in doc["gpu_nic"]}


def test_a100_with_eight_nics_in_four_switches_gets_one_local_nic_per_gpu_with_gdr() -> None:
    doc = analyze("paths_deepep_8xa100_8nic_roce")
    assert set(doc) >= set(DOC_KEYS)
    assert doc["hostname"] == "deepep-a100-node"
    choice = by_gpu(doc)
    assert {g: e["nic"] for g, e in choice.items()} == {f"GPU{i}": f"mlx5_{i}" for i in range(8)}
    assert all(e["gdr"] and e["path_class"] == "PXB" and e["pxn_via"] is None for e in choice.values())
    assert all(p["mechanism"] == "nvswitch" and p["path_class"] == "NV12" for p in doc["gpu_pairs"])
    assert [n["rail"] for n in doc["nics"]] == list(range(8))
    assert all(n["link_layer"] == "Ethernet" and n["active"] for n in doc["nics"])
    assert doc["summary"]["nic_rates_gbps"] == [100] * 8
    assert doc["p2p_gaps"] == []
    # two GPUs and their two NICs share each inferred switch uplink
    uplinks = [c for c in doc["contention"] if c["kind"] == "switch_uplink" and c["scenario"] == "gpu_to_nic"]
    assert len(uplinks) == 4 and all(c["flows"] == 2 for c in uplinks)


def test_dgx1_cube_mesh_relays_non_nvlink_pairs_through_a_peer() -> None:
    doc = analyze("microway_dgx1_v100")
    pairs = by_pair(doc)
    assert len(pairs) == 28
    direct = [p for p in pairs.values() if p["nccl_path"] == "NVL"]
    relayed = [p for p in pairs.values() if p["nccl_path"] == "NVB"]
    assert len(direct) == 16 and len(relayed) == 12
    assert pairs["GPU0", "GPU3"]["path_class"] == "NV2"
    gpu0_5 = pairs["GPU0", "GPU5"]
    # GPU1 and GPU4 both have NVLink to GPU0 and GPU5; NCCL's relay is the lower index
    assert gpu0_5["path_class"] == "SYS" and gpu0_5["via"] == "GPU1"
    assert all(p["p2p"] for p in pairs.values())
    choice = by_gpu(doc)
    assert choice["GPU0"]["nic"] == "mlx5_0" and choice["GPU2"]["nic"] == "mlx5_1"
    assert choice["GPU4"]["nic"] == "mlx5_2" and choice["GPU7"]["nic"] == "mlx5_3"
    assert all(e["gdr"] and e["path_class"] == "PIX" for e in choice.values())


def test_pcie_box_with_one_far_nic_stages_every_gpu_through_host_memory() -> None:
    doc = analyze("paddle_8xp40")
    assert {p["mechanism"] for p in doc["gpu_pairs"]} == {"pcie_p2p"}
    assert by_pair(doc)["GPU0", "GPU4"]["path_class"] == "PXB"
    choice = by_gpu(doc)
    assert len(choice) == 8
    for e in choice.values():
        assert (e["nic"], e["path_class"], e["gdr"]) == ("mlx5_0", "SYS", False)
        kinds = [h["kind"] for h in e["hops"]]
        assert "host_memory_copy" in kinds and "inter_socket" in kinds
        assert e["nic_share"] == 8
    # topo -m gives no NIC rate: the eight flows toward mlx5_0 have no known demand, so neither
    # the socket link nor a switch uplink is sized from a guess
    assert [c for c in doc["contention"] if c["scenario"] == "gpu_to_nic"] == []
    assert any(f["rule"] == "G01" for f in doc["findings"])


def test_nvlink_gpus_with_far_nics_use_pxn() -> None:
    doc = analyze("paths_della_8xh100_6nic")
    choice = by_gpu(doc)
    # mlx5_0 and mlx5_1 are both PIX to GPU0: device 0 takes the first (ncclTopoGetLocalNet)
    assert choice["GPU0"]["nic"] == "mlx5_0" and choice["GPU0"]["gdr"]
    far = choice["GPU1"]
    assert far["path_class"] == "NODE" and far["gdr"] is False
    assert far["pxn_via"] is not None and far["pxn_gdr"] is True
    assert far["pxn_hops"][0]["kind"] == "nvswitch"  # NV18 to every peer: the NVSwitch fabric


def test_nccl_xml_of_a_cloud_vm_pairs_gpus_with_their_switch_nic() -> None:
    doc = analyze("paths_azhpc_ndv4")
    assert doc["graph"]["mode"] == "nccl_xml" and doc["inferred"] is False
    choice = by_gpu(doc)
    assert len(choice) == 8 and all(e["path_class"] == "PIX" and e["gdr"] for e in choice.values())
    # each virtual switch holds two GPUs and two NICs: one NIC per GPU
    assert len({e["nic"] for e in choice.values()}) == 8
    assert all(e["bandwidth_gbs"] for e in choice.values())


def test_document_round_trips_through_json_and_from_dict() -> None:
    hostname, sections = read_bundle(BUNDLES / "microway_dgx1_v100")
    a = analyze_host(sections, hostname)
    doc = json.loads(json.dumps(a.to_dict()))
    b = HostAnalysis.from_dict(doc)
    assert b.to_dict() == a.to_dict()
    G = b.host_graph()
    assert set(G.nodes) == set(a.graph.nodes) and G.number_of_edges() == a.graph.number_of_edges()
    with pytest.raises(ValueError, match="schema"):
        HostAnalysis.from_dict({"schema": 2})


def test_hostname_comes_from_argument_then_section_then_default() -> None:
    topo = (BUNDLES / "paddle_8xp40" / "nvidia_smi_topo.txt").read_text()
    assert analyze_host({"nvidia_smi_topo": topo}).doc["hostname"] == "unknown-host"
    assert analyze_host({"nvidia_smi_topo": topo, "hostname": "n9\n"}).doc["hostname"] == "n9"
    assert analyze_host({"nvidia_smi_topo": topo, "hostname": "n9"}, "n1").doc["hostname"] == "n1"


def test_a_broken_section_raises_its_parse_error_and_unknown_kinds_are_refused() -> None:
    with pytest.raises(ParseError) as err:
        analyze_host({"nvidia_smi_topo": ""})
    assert err.value.kind == "nvidia_smi_topo"
    with pytest.raises(UnknownKindError, match="dmesg"):
        analyze_host({"dmesg": "x"})


def test_bundle_with_an_unknown_file_names_it(tmp_path: Path) -> None:
    (tmp_path / "ibstat.txt").write_text("")
    (tmp_path / "topo.txt").write_text("")
    with pytest.raises(BundleError, match=r"topo\.txt.*nvidia_smi_topo"):
        read_bundle(tmp_path)
