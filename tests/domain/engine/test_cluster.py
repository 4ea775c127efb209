"""Cross-host paths joined from snapshot documents (real bundles + one hand-made document)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from apps.domain.analysis import analyze_host
from apps.domain.bandwidth import ib_port
from apps.domain.bundle import read_bundle
from apps.domain.cluster import ClusterIndex, path_between

BUNDLES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"


def doc(name: str, hostname: str | None = None) -> dict:
    host, sections = read_bundle(BUNDLES / name)
    return analyze_host(sections, hostname or host).to_dict()


@pytest.fixture(scope="module")
def a100() -> dict:
    return doc("paths_deepep_8xa100_8nic_roce", "a100-a")


@pytest.fixture(scope="module")
def p40() -> dict:
    return doc("paddle_8xp40", "p40-a")


def test_same_rail_gdr_path_is_bounded_by_the_nic_port(a100: dict) -> None:
    """
    a100-a/GPU5 --PCIe--> switch --PCIe--> mlx5_5 ==RoCE 100G== rail 5 switch ==RoCE 100G== mlx5_5 ... a100-b/GPU5
                                                   ^^^^^^^^^^^ bottleneck (11.6 GB/s expected)
    """
    b = copy.deepcopy(a100)
    b["hostname"] = "a100-b"
    p = path_between(a100, "GPU5", b, "GPU5")
    assert (p["src"], p["dst"], p["same_host"], p["mechanism"]) == ("a100-a/GPU5", "a100-b/GPU5", False, "net")
    assert p["gdr_src"] is True and p["gdr_dst"] is True and p["rail_src"] == p["rail_dst"] == 5
    kinds = [h["kind"] for h in p["hops"]]
    assert kinds.count("fabric") == 2 and "host_memory_copy" not in kinds
    assert p["hops"][0]["from"] == "GPU5" and p["hops"][-1]["to"] == "GPU5"
    assert [h["host"] for h in p["hops"]][0] == "a100-a" and p["hops"][-1]["host"] == "a100-b"
    assert p["hops"][p["bottleneck"]]["kind"] == "fabric"
    assert p["bottleneck_gbs"] == ib_port(100).expected_gbs
    assert "rail 5" in p["explanation"] and "GPUDirect RDMA" in p["explanation"]


def test_far_nic_path_explains_the_host_memory_bounce(p40: dict) -> None:
    b = copy.deepcopy(p40)
    b["hostname"] = "p40-b"
    p = path_between(p40, "GPU5", b, "GPU5")
    assert p["gdr_src"] is False and p["gdr_dst"] is False
    kinds = [h["kind"] for h in p["hops"]]
    assert kinds.count("host_memory_copy") == 2 and kinds.count("inter_socket") == 2
    # the receive leg is the source leg mirrored
    assert p["hops"][-1]["to"] == "GPU5" and p["hops"][-1]["host"] == "p40-b"
    text = p["explanation"]
    assert "p40-a/GPU5 has no NIC behind its PCIe switch" in text
    assert "CPU memory and the inter-socket link" in text


def test_different_link_layers_never_connect(a100: dict, p40: dict) -> None:
    b = copy.deepcopy(p40)
    for n in b["nics"]:
        n["link_layer"] = "InfiniBand"
    p = path_between(a100, "GPU0", b, "GPU0")
    assert p["mechanism"] == "none" and p["bottleneck"] is None
    assert "Ethernet" in p["explanation"] and "InfiniBand" in p["explanation"]
    assert "never connect" in p["explanation"]


def test_different_rails_go_through_an_assumed_spine(a100: dict) -> None:
    b = copy.deepcopy(a100)
    b["hostname"] = "a100-b"
    p = path_between(a100, "GPU0", b, "GPU3")
    assert (p["rail_src"], p["rail_dst"]) == (0, 3)
    assert sum(1 for h in p["hops"] if h["kind"] == "fabric") == 3
    assert "crosses rails" in p["explanation"]


def test_same_host_query_returns_the_gpu_pair(a100: dict) -> None:
    p = path_between(a100, "GPU3", a100, "GPU1")
    assert p["same_host"] is True and p["mechanism"] == "nvswitch"
    assert [h["to"] for h in p["hops"]] == ["NVSwitch", "GPU1"]  # reversed from the stored GPU1->GPU3 pair


def test_index_answers_host_slash_gpu_queries_and_unknown_hosts(a100: dict, p40: dict) -> None:
    idx = ClusterIndex([a100, p40])
    assert len(idx) == 2
    assert idx.path("a100-a/GPU0", "p40-a/GPU1")["mechanism"] == "net"
    assert idx.path("a100-a/GPU0", "nowhere/GPU1")["explanation"] == "unknown host nowhere"
    assert "no GPU9" in idx.path("a100-a/GPU9", "p40-a/GPU1")["explanation"]
    with pytest.raises(ValueError):
        idx.path("GPU0", "p40-a/GPU1")
