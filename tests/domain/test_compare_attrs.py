"""Every attribute change between two documents, grouped in sentences, and the bandwidth before/after.

The "after" documents are SYNTHETIC edits of a real capture's text (the mooncake 8x CX7 NDR +
CX6 Dx ibstat), each named by what it changes."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from apps.domain.analysis import analyze_host
from apps.domain.compare import compare_docs, compare_summary
from apps.domain.compare_attrs import attribute_changes, name_ranges, nvlink_changes
from apps.domain.compare_bandwidth import bandwidth_change, effective_gbs, gpu_bandwidth_changes

FIX = Path(__file__).resolve().parent.parent / "fixtures"
TOPO = (FIX / "nvidia_smi_topo" / "mooncake_issue_8xnv18_12nic_cpuset_list.txt").read_text()
IBSTAT = (FIX / "ibstat" / "mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt").read_text()
IB_PORTS = ["mlx5_0", "mlx5_10", "mlx5_11", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9"]  # the 8 CX7 NDR ports


def doc(ibstat: str = IBSTAT, hostname: str = "n1") -> dict:
    return analyze_host({"nvidia_smi_topo": TOPO, "ibstat": ibstat}, hostname).to_dict()


def synthetic_all_ethernet(text: str) -> str:
    """SYNTHETIC: the 8 InfiniBand ports switched to Ethernet (a fabric moved to RoCE)."""
    return text.replace("Link layer: InfiniBand", "Link layer: Ethernet")


def synthetic_rate(text: str, old: str, new: str) -> str:
    """SYNTHETIC: every port at ``old`` Gb/s now at ``new`` (cables trained lower)."""
    return text.replace(f"Rate: {old}\n", f"Rate: {new}\n")


def synthetic_firmware(text: str, nic: str, version: str) -> str:
    """SYNTHETIC: one HCA flashed with another firmware."""
    head, sep, tail = text.partition(f"CA '{nic}'")
    return head + sep + re.sub(r"Firmware version: \S+", f"Firmware version: {version}", tail, count=1)


def names_in(sentence: str) -> set[str]:
    """The device names a grouped sentence lists, ranges expanded."""
    out = set()
    for part in sentence.rsplit(": ", 1)[1].split(", "):
        if ".." in part:
            lo, hi = part.split("..")
            prefix = re.match(r"^(.*?)(\d+)$", lo).group(1)
            out |= {f"{prefix}{i}" for i in range(int(lo[len(prefix):]), int(hi[len(prefix):]) + 1)}
        else:
            out.add(part)
    return out


@pytest.fixture(scope="module")
def base():
    return doc()


def test_eight_ports_from_infiniband_to_ethernet_are_all_reported(base):
    after = doc(synthetic_all_ethernet(IBSTAT))
    r = compare_docs(base, after)
    layer = [x for x in r["attributes"] if x["attr"] == "link_layer"]
    assert sorted(x["device"] for x in layer) == sorted(IB_PORTS)
    assert all((x["before"], x["after"]) == ("InfiniBand", "Ethernet") for x in layer)
    # each NIC says it in its own row, and one sentence names all eight
    changed = {d["name"]: d["changes"] for d in r["devices"] if d["status"] == "changed"}
    assert all("link layer InfiniBand -> Ethernet" in changed[n] for n in IB_PORTS)
    sentence = next(s for s in r["summary"] if "InfiniBand -> Ethernet" in s)
    assert sentence.startswith("8 ports link layer InfiniBand -> Ethernet: ")
    assert names_in(sentence) == set(IB_PORTS)
    assert sentence == "8 ports link layer InfiniBand -> Ethernet: mlx5_0, mlx5_3..mlx5_6, mlx5_9..mlx5_11"
    assert compare_summary(base, after) == r["summary"]


def test_a_rate_change_on_every_port_is_one_sentence_and_the_bandwidth_line_follows(base):
    after = doc(synthetic_rate(IBSTAT, "400", "200"))
    r = compare_docs(base, after)
    sentence = next(s for s in r["summary"] if "400 Gb/s -> Active, 200 Gb/s" in s)
    assert sentence.startswith("8 ports Active, 400 Gb/s")
    assert names_in(sentence) == set(IB_PORTS)
    bw = r["bandwidth"]
    at = {p["nodes"]: p for p in bw["points"]}
    assert bw["changed"] and at[8]["after_gbs"] < at[8]["before_gbs"]
    assert at[1]["before_gbs"] == at[1]["after_gbs"]  # one node does not use the NICs
    assert bw["text"].startswith("expected all-reduce busbw at 1 node: ")
    assert f"at 8 nodes: {at[8]['before_gbs']:.1f} -> {at[8]['after_gbs']:.1f} GB/s" in bw["text"]
    # each GPU's GB/s to the network halves, read from the documents' own gpu_nic figures
    per_gpu = {g["gpu"]: g for g in r["gpu_gbs"]["gpus"]}
    for e in base["gpu_nic"]:
        new = next(x for x in after["gpu_nic"] if x["gpu"] == e["gpu"])
        assert per_gpu[e["gpu"]]["before_gbs"] == effective_gbs(e)
        assert per_gpu[e["gpu"]]["after_gbs"] == effective_gbs(new) < effective_gbs(e)
    assert r["gpu_gbs"]["lines"]


def test_firmware_is_compared_and_guids_only_within_one_host(base):
    after = doc(synthetic_firmware(IBSTAT, "mlx5_3", "28.42.1000"))
    r = compare_docs(base, after)
    assert "mlx5_3: firmware 28.41.1000 -> 28.42.1000" in r["summary"]
    other_host = copy.deepcopy(base)
    other_host["hostname"] = "n2"
    for n in other_host["graph"]["nodes"]:
        if (n.get("attrs") or {}).get("port_guid"):
            n["attrs"]["port_guid"] = "0x1111111111111111"
    assert not [x for x in attribute_changes(base, other_host) if x["attr"] == "port_guid"]
    other_host["hostname"] = "n1"  # the same host with new HCAs: the GUIDs say so
    guids = [x for x in attribute_changes(base, other_host) if x["attr"] == "port_guid"]
    assert len(guids) == sum(1 for n in base["graph"]["nodes"] if (n.get("attrs") or {}).get("port_guid"))


def test_attributes_known_on_one_side_only_are_said_once():
    topo_only = analyze_host({"nvidia_smi_topo": TOPO}, "n1").to_dict()
    r = compare_docs(topo_only, doc())
    one_side = [s for s in r["summary"] if "reported on one side only" in s]
    assert any(s.startswith("firmware reported on one side only for ") for s in one_side)
    assert not any("firmware" in s and "->" in s for s in r["summary"])


def test_gpu_model_and_numa_changes_are_grouped_with_their_values():
    def tiny(model: str, numa: int) -> dict:
        return {"hostname": "h", "gpus": [{"name": f"GPU{i}", "model": model, "numa": numa} for i in range(4)],
                "nics": [], "graph": {"nodes": [], "edges": []}}
    r = compare_docs(tiny("NVIDIA A100-SXM4-80GB", 0), tiny("NVIDIA H100 80GB HBM3", 1))
    assert "4 GPUs model NVIDIA A100-SXM4-80GB -> NVIDIA H100 80GB HBM3: GPU0..GPU3" in r["summary"]
    assert "4 GPUs NUMA node 0 -> 1: GPU0..GPU3" in r["summary"]


def test_an_nvlink_bundle_losing_links_is_a_link_change(base):
    after = copy.deepcopy(base)
    edge = next(e for e in after["graph"]["edges"] if e["kind"] == "nvlink" and "GPU2" in (e["source"], e["target"]))
    edge["links"] = 16
    changes = nvlink_changes(base, after)
    assert [(c["device"], c["before"], c["after"]) for c in changes] == [("GPU2 - NVSwitch fabric", "NVLink x18",
                                                                          "NVLink x16")]
    assert "GPU2 - NVSwitch fabric link NVLink x18 -> NVLink x16" in compare_docs(base, after)["summary"]


def test_name_ranges_name_every_device():
    assert name_ranges(["GPU3", "GPU1", "GPU0", "GPU2", "GPU7"]) == "GPU0..GPU3, GPU7"
    assert name_ranges(["mlx5_0", "mlx5_1"]) == "mlx5_0, mlx5_1"
    assert name_ranges(["eth0", "bond0", "NIC2"]) == "NIC2, bond0, eth0"  # natural order, as the pages sort


def test_bandwidth_change_covers_node_counts_of_either_side():
    one = {"estimate": {"points": [{"nodes": 1, "busbw_gbs": 485.3, "algorithm": "NVLS"}]}}
    two = {"estimate": {"points": [{"nodes": 1, "busbw_gbs": 485.3, "algorithm": "NVLS"},
                                   {"nodes": 8, "busbw_gbs": 365.4, "algorithm": "RING"}]}}
    r = bandwidth_change(one, two)
    assert [p["nodes"] for p in r["points"]] == [1, 8] and r["changed"]
    assert r["text"] == ("expected all-reduce busbw at 1 node: 485.3 -> 485.3 GB/s (NCCL algorithm NVLS); "
                         "at 8 nodes: not estimated -> 365.4 GB/s (NCCL algorithm none -> RING)")
    assert bandwidth_change({}, {}) == {"points": [], "changed": False, "text": None}
    assert gpu_bandwidth_changes(two, two) == {"gpus": [], "lines": []}


@pytest.mark.parametrize("module", ["apps.domain.compare_attrs", "apps.domain.compare_bandwidth",
                                    "apps.domain.nvlink_figures"])
def test_module_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and not result.failed
