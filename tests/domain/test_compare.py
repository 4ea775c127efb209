"""compare_docs: what changed between two snapshot documents, on real captures and tiny documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.analysis import analyze_host
from apps.domain.compare import compare_docs, describe_link, doc_edges, short_summary, upstream_links

FIX = Path(__file__).resolve().parent.parent / "fixtures"
TOPO = (FIX / "nvidia_smi_topo" / "mooncake_issue_8xnv18_12nic_cpuset_list.txt").read_text()
IBSTAT = (FIX / "ibstat" / "mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt").read_text()


def port_down(text: str, nic: str) -> str:
    """SYNTHETIC variant of a real ibstat: one HCA port Down."""
    head, sep, tail = text.partition(f"CA '{nic}'")
    block, nxt, rest = tail.partition("\nCA '")
    return head + sep + block.replace("State: Active", "State: Down") + nxt + rest


@pytest.fixture(scope="module")
def base():
    return analyze_host({"nvidia_smi_topo": TOPO, "ibstat": IBSTAT}, "n1").to_dict()


def test_identical_documents_have_no_change(base):
    r = compare_docs(base, base)
    assert r["changed"] is False and r["summary"] == [] and r["highlight_a"] == r["highlight_b"] == {}


def test_a_port_going_down_moves_the_gpu_to_another_nic(base):
    after = analyze_host({"nvidia_smi_topo": TOPO, "ibstat": port_down(IBSTAT, "mlx5_0")}, "n1").to_dict()
    r = compare_docs(base, after)
    assert r["changed"]
    nic = next(d for d in r["devices"] if d["name"] == "mlx5_0")
    assert nic["status"] == "changed" and "Active" in nic["changes"][0] and "Down" in nic["changes"][0]
    gpu0 = next(e for e in r["gpu_nic"] if e["gpu"] == "GPU0")
    assert gpu0["before"]["nic"] == "mlx5_0" and gpu0["after"]["nic"] != "mlx5_0"
    assert gpu0["before"]["path_class"] == "PIX" and gpu0["after"]["path_class"] != "PIX"
    assert gpu0["text"].startswith(f"GPU0 -> {gpu0['after']['nic']} (was mlx5_0): PIX -> ")
    assert {f["rule"] for f in r["findings"]["new"]} >= {"F01"}
    assert r["highlight_b"]["mlx5_0"] == "changed"
    # and back: the finding is fixed
    back = compare_docs(after, base)
    assert "F01" in {f["rule"] for f in back["findings"]["fixed"]}


def test_a_narrower_link_is_listed_with_its_bandwidth():
    def doc(width: int) -> dict:
        return {"hostname": "h", "gpus": [{"name": "GPU0"}], "nics": [], "gpu_pairs": [], "gpu_nic": [],
                "gpu_nic_matrix": [], "findings": [],
                "graph": {"nodes": [{"id": "sw", "kind": "switch", "label": "PCIe switch", "bdf": "0000:10:00.0",
                                     "parent": None},
                                    {"id": "GPU0", "kind": "gpu", "label": "GPU0", "bdf": None, "parent": "sw"}],
                          "edges": [{"source": "sw", "target": "GPU0", "kind": "pcie", "gen": 4, "width": width,
                                     "max_gen": 4, "max_width": 16, "expected_gbs": 27.72 * width / 16,
                                     "degraded": width < 16}]}}
    r = compare_docs(doc(16), doc(8))
    assert r["links"] == [{"device": "GPU0", "kind": "pcie", "before": "Gen4 x16", "after": "Gen4 x8 (capable of x16)",
                           "before_gbs": 27.72, "after_gbs": 13.86, "status": "changed"}]
    assert "GPU0 link Gen4 x16 -> Gen4 x8 (capable of x16)" in r["summary"]


def test_nic_count_and_added_devices(base):
    fewer = dict(base)
    fewer["nics"] = base["nics"][:-1]
    fewer["graph"] = {**base["graph"], "nodes": [n for n in base["graph"]["nodes"] if n["id"] != "mlx5_11"]}
    r = compare_docs(fewer, base)
    assert "NIC count 11 -> 12" in r["summary"]
    assert {"name": "mlx5_11", "kind": "nic", "status": "added", "changes": []} in r["devices"]
    assert r["highlight_b"]["mlx5_11"] == "added"


def test_nics_in_another_order_is_named():
    def doc(order: list[str]) -> dict:
        return {"hostname": "h", "gpus": [{"name": "GPU0"}, {"name": "GPU1"}],
                "nics": [{"name": "mlx5_0"}, {"name": "mlx5_1"}], "graph": {"nodes": [], "edges": []},
                "gpu_pairs": [], "gpu_nic_matrix": [], "findings": [],
                "gpu_nic": [{"gpu": f"GPU{i}", "nic": n, "path_class": "PIX", "gdr": True, "bandwidth_gbs": 24.0,
                             "pxn_via": None, "hops": []} for i, n in enumerate(order)]}
    r = compare_docs(doc(["mlx5_0", "mlx5_1"]), doc(["mlx5_1", "mlx5_0"]))
    assert r["nic_order"] is True
    assert r["summary"][0].startswith("NICs in another order")


def test_edges_with_a_citation_in_place_of_the_source_are_repaired(base):
    nodes = {n["id"]: n for n in base["graph"]["nodes"]}
    for e in doc_edges(base):
        assert e["source"] in nodes and e["target"] in nodes
    up = upstream_links(base)
    assert up["GPU0"]["kind"] == "pcie" and describe_link(up["GPU0"]).startswith("Gen")


def test_summary_ranks_a_port_down_before_the_nic_choices_it_causes(base):
    after = analyze_host({"nvidia_smi_topo": TOPO, "ibstat": port_down(IBSTAT, "mlx5_0")}, "n1").to_dict()
    r = compare_docs(base, after)
    assert r["summary"][0].startswith("mlx5_0: port Active")
    assert any(line.startswith("GPU0 -> ") for line in r["summary"][1:])
    findings_at = [i for i, line in enumerate(r["summary"]) if line.startswith(("new:", "fixed:"))]
    assert findings_at and min(findings_at) > 0


def test_another_machine_model_reads_as_a_few_lines_not_one_per_device(base):
    """Two different real captures (12-NIC NV18 board vs a 6-NIC H100 board): moves are grouped."""
    della = analyze_host({"nvidia_smi_topo": (FIX / "bundles" / "paths_della_8xh100_6nic" / "nvidia_smi_topo.txt")
                          .read_text()}, "d1").to_dict()
    r = compare_docs(base, della)
    moved_lines = [line for line in r["summary"] if "PCIe tree" in line or ": moved" in line]
    assert len(moved_lines) <= 1
    assert r["summary"][0].startswith(("NIC count", "GPU count")) or "port" in r["summary"][0]
    short = short_summary(r, limit=5)
    assert len(short) <= 6
    if len(r["summary"]) > 5:
        assert short[-1] == f"and {len(r['summary']) - 5} more"


def test_short_summary_keeps_short_lists_whole():
    assert short_summary({"summary": ["a", "b"]}) == ["a", "b"]
    assert short_summary({"summary": list("abcdefg")}, limit=3) == ["a", "b", "c", "and 4 more"]


def test_the_same_finding_on_several_devices_is_one_summary_line(base):
    after = analyze_host({"nvidia_smi_topo": TOPO, "ibstat": port_down(port_down(IBSTAT, "mlx5_0"), "mlx5_3")},
                         "n1").to_dict()
    r = compare_docs(base, after)
    f01 = [line for line in r["summary"] if line.startswith("new: F01")]
    n_new = sum(1 for f in r["findings"]["new"] if f["rule"] == "F01")
    assert len(f01) == 1 and (n_new == 1 or f01[0].endswith(f"(x{n_new})"))


def test_compare_summary_says_what_compare_docs_says(base):
    """The cluster page's fast path: the same sentences, on pairs of real captures (and a synthetic
    port Down), in both directions, including two documents that differ in nothing."""
    from apps.domain.compare import compare_summary

    others = [analyze_host({"nvidia_smi_topo": TOPO, "ibstat": port_down(IBSTAT, "mlx5_3")}, "n2").to_dict(),
              analyze_host({"nvidia_smi_topo": TOPO}, "n3").to_dict()]
    for name in ("dgx_a100_ash6_mlx5_0-11_headers_nps4.txt", "hpc_blog_k80_4gpu_mlx4_soc_cpuset.txt",
                 "paddle_8xp40_pcie_switches_soc.txt"):
        others.append(analyze_host({"nvidia_smi_topo": (FIX / "nvidia_smi_topo" / name).read_text()}, "n4").to_dict())
    for other in others + [base]:
        for a, b in ((base, other), (other, base)):
            assert compare_summary(a, b) == compare_docs(a, b)["summary"]
    assert compare_summary(base, others[0])  # a port Down is named
    assert compare_summary(base, base) == []
