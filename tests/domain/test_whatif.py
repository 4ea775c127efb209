"""What-if layouts (apps.domain.whatif): edits applied to real captures, analysed again.

The captures are fixture files copied byte for byte from /work/shared/realdata: Princeton Della's
8x H100 with six NICs (GPU0, GPU3, GPU4 and GPU6 have a NIC on their switch; GPU1, GPU2, GPU5 and
GPU7 reach one only across the host bridges) and an HGX H100 whose NIC k sits under GPU k.
NIC states and rates the captures do not report are written as an ibstat section in the test
(stated facts, as tests/domain/engine/test_estimate.py does).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from apps.domain.analysis import analyze_host
from apps.domain.whatif import HONOURED_ENV, WhatIfError, apply_edits, validate_edits, whatif
from tests.domain.engine.test_estimate import ibstat

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DELLA = FIXTURES / "bundles" / "paths_della_8xh100_6nic" / "nvidia_smi_topo.txt"
HGX_H100 = FIXTURES / "nvidia_smi_topo" / "sglang_30401_8xh100_hbm3_8nic.txt"


def della(rate: int = 200) -> dict:
    return {"nvidia_smi_topo": DELLA.read_text(), "ibstat": ibstat([f"mlx5_{i}" for i in range(6)], rate)}


def hgx(rate: int = 400) -> dict:
    return {"nvidia_smi_topo": HGX_H100.read_text(), "ibstat": ibstat([f"mlx5_{i}" for i in range(8)], rate)}


def choice(doc: dict, gpu: str) -> dict:
    return next(e for e in doc["gpu_nic"] if e["gpu"] == gpu)


def point(doc: dict, nodes: int) -> dict:
    return next(p for p in doc["estimate"]["points"] if p["nodes"] == nodes)


def test_adding_a_nic_beside_a_gpu_without_one_gives_it_that_nic_with_gdr():
    r = whatif(della(), [{"op": "add_nic", "name": "mlx5_6", "near": "GPU1", "rate_gbit": 200,
                          "link_layer": "InfiniBand"}])
    before, after = choice(r["before"], "GPU1"), choice(r["after"], "GPU1")
    assert (before["nic"], before["path_class"], before["gdr"]) == ("mlx5_0", "NODE", False)
    assert (after["nic"], after["path_class"], after["gdr"]) == ("mlx5_6", "PIX", True)
    assert any("mlx5_6 added" in s for s in r["changes"]["summary"])
    assert point(r["after"], 8)["busbw_gbs"] > point(r["before"], 8)["busbw_gbs"]
    assert r["after"]["plan"] is True and "plan" not in r["before"]


def test_moving_a_nic_from_a_shared_switch_to_a_gpu_without_one():
    """Della's GPU4 has mlx5_3 and mlx5_4 on its switch, GPU5 none: move mlx5_4 beside GPU5."""
    r = whatif(della(), [{"op": "move_nic", "name": "mlx5_4", "near": "GPU5"}])
    assert choice(r["before"], "GPU5")["path_class"] == "NODE"
    after = choice(r["after"], "GPU5")
    assert (after["nic"], after["path_class"], after["gdr"]) == ("mlx5_4", "PIX", True)
    moved = next(d for d in r["changes"]["devices"] if d["name"] == "mlx5_4")
    assert moved["status"] == "changed"
    assert not [lk for lk in r["changes"]["links"] if lk["device"] == "mlx5_4"]  # it keeps its PCIe link


def test_raising_the_nics_from_200_to_400_gbit_raises_the_multi_node_estimate():
    edits = [{"op": "set_nic", "name": f"mlx5_{i}", "rate_gbit": 400} for i in range(8)]
    r = whatif(hgx(rate=200), edits)
    assert r["after"]["summary"]["nic_rates_gbps"] == [400] * 8
    for nodes in (2, 8, 64):
        assert point(r["after"], nodes)["busbw_gbs"] > point(r["before"], nodes)["busbw_gbs"] * 1.3
    assert point(r["after"], 1)["busbw_gbs"] == point(r["before"], 1)["busbw_gbs"]


def test_nvls_disabled_turns_the_h100_one_node_estimate_from_nvls_to_ring():
    r = whatif(hgx(), [{"op": "set_env", "name": "NCCL_NVLS_ENABLE", "value": "0"}])
    assert point(r["before"], 1)["algorithm"] == "NVLS"
    assert point(r["after"], 1)["algorithm"] == "RING"
    assert point(r["after"], 1)["busbw_gbs"] < point(r["before"], 1)["busbw_gbs"]
    assert r["after"]["nccl_env"] == {"NCCL_NVLS_ENABLE": "0"}
    assert r["changes"]["summary"][0] == "NCCL_NVLS_ENABLE: unset -> 0" and r["changes"]["changed"]


def test_removing_a_nic_leaves_its_gpu_to_another_nic_without_gdr():
    r = whatif(hgx(), [{"op": "remove", "name": "mlx5_3"}])
    assert [n["name"] for n in r["after"]["nics"]] == [f"mlx5_{i}" for i in range(8) if i != 3]
    assert choice(r["before"], "GPU3")["nic"] == "mlx5_3"
    after = choice(r["after"], "GPU3")
    assert after["nic"] != "mlx5_3" and after["path_class"] == "NODE" and after["gdr"] is False
    assert any("mlx5_3" in s and "removed" in s for s in r["changes"]["summary"])


def test_a_port_set_down_becomes_a_finding_and_back_up_clears_it():
    down = whatif(hgx(), [{"op": "set_nic", "name": "mlx5_2", "state": "Down"}])
    assert "F01" not in {f["rule"] for f in down["before"]["findings"]}
    assert "F01" in {f["rule"] for f in down["after"]["findings"]}
    assert "F01" in {f["rule"] for f in down["changes"]["findings"]["new"]}


def test_a_narrowed_gpu_link_shows_in_the_changes():
    r = whatif(hgx(), [{"op": "set_link", "device": "GPU3", "gen": 4, "width": 8}])
    link = next(lk for lk in r["changes"]["links"] if lk["device"] == "GPU3")
    assert link["after_gbs"] < link["before_gbs"]


def test_set_gpu_model_replaces_the_assumed_class():
    r = whatif(hgx(), [{"op": "set_gpu_model", "model": "NVIDIA H100 80GB HBM3"}])
    assert r["before"]["summary"]["gpu_model"] is None and r["before"]["summary"]["gpu_model_assumed"]
    assert r["after"]["summary"]["gpu_model"] == "NVIDIA H100 80GB HBM3"
    assert r["after"]["summary"]["gpu_model_assumed"] is None
    assert not any(a.startswith("GPU model unknown") for a in r["after"]["assumptions"])


def test_a_stored_document_is_a_base_too():
    doc = analyze_host(hgx()).to_dict()
    r = whatif(doc, [{"op": "set_env", "name": "NCCL_NVLS_ENABLE", "value": "0"}])
    assert point(r["before"], 1)["algorithm"] == "NVLS" and point(r["after"], 1)["algorithm"] == "RING"


def test_edits_leave_the_base_graph_unchanged():
    a = analyze_host(della())
    nodes = dict(a.graph.nodes(data=True))
    apply_edits(a.graph, a.results, [{"op": "add_nic", "name": "mlx5_9", "near": "GPU2", "rate_gbit": 400},
                                     {"op": "remove", "name": "mlx5_0"}])
    assert "mlx5_9" not in a.graph and "mlx5_0" in a.graph and a.graph.nodes["GPU2"] == nodes["GPU2"]


@pytest.mark.parametrize(("edits", "words"), [
    ({"op": "x"}, "edits: must be a JSON list"),
    ([{"op": "grow"}], "edit 0: field 'op': unknown op 'grow'"),
    ([{"op": "remove", "name": "mlx5_0"}, {"op": "set_nic", "name": "mlx5_1", "rate_gbit": "fast"}],
     "edit 1 (set_nic): field 'rate_gbit': must be a number, got 'fast'"),
    ([{"op": "add_nic", "name": "mlx5_1", "near": "GPU0"}], "edit 0 (add_nic): field 'rate_gbit': missing"),
    ([{"op": "set_nic", "name": "mlx5_1", "speed": 400}], "edit 0 (set_nic): field 'speed': unknown field"),
    ([{"op": "set_nic", "name": "mlx5_1", "state": "Up"}], "field 'state': must be one of Active"),
    ([{"op": "set_env", "name": "NCCL_BUFFSIZE", "value": "1"}], "field 'name': 'NCCL_BUFFSIZE' is not an NCCL"),
    ([{"op": "set_link", "device": "GPU0", "gen": 5, "width": 12}], "field 'width': must be a PCIe width"),
    ([{"op": "set_gpu_model", "model": "Potato 9000"}], "field 'model': unknown GPU model"),
    ([{"op": "add_nic", "name": "mlx 5", "near": "GPU0", "rate_gbit": 200}], "field 'name': 'mlx 5' holds"),
])
def test_a_bad_edit_list_names_the_edit_and_the_field(edits, words):
    with pytest.raises(WhatIfError) as err:
        validate_edits(edits)
    assert words in str(err.value)


@pytest.mark.parametrize(("edit", "words"), [
    ({"op": "add_nic", "name": "mlx5_0", "near": "GPU0", "rate_gbit": 200}, "'mlx5_0' is already taken"),
    ({"op": "add_nic", "name": "mlx5_9", "near": "GPU9", "rate_gbit": 200}, "field 'near': no GPU 'GPU9'"),
    ({"op": "move_nic", "name": "mlx5_9", "near": "GPU1"}, "field 'name': no NIC 'mlx5_9'"),
    ({"op": "set_link", "device": "nvme7", "gen": 5, "width": 16}, "field 'device': no device 'nvme7'"),
])
def test_an_edit_naming_a_device_the_host_lacks_is_refused(edit, words):
    with pytest.raises(WhatIfError) as err:
        whatif(della(), [{"op": "set_env", "name": "NCCL_ALGO", "value": "Ring"}, edit])
    assert str(err.value).startswith(f"edit 1 ({edit['op']})") and words in str(err.value)


def test_the_honoured_settings_are_the_ones_the_engine_reads():
    domain = Path(__file__).resolve().parents[2] / "apps" / "domain"
    read = set()
    for path in domain.rglob("*.py"):
        read |= set(re.findall(r'env\.get\("(NCCL_[A-Z0-9_]+)"', path.read_text()))
    assert read and read == set(HONOURED_ENV)
