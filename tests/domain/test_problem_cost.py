"""problem_cost: what a finding costs (bandwidth lost x GPUs) and the fleet ranking built on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain import problem_cost as pc
from apps.domain.analysis import analyze_host

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TOPO = FIXTURES / "nvidia_smi_topo" / "mooncake_issue_8xnv18_12nic_cpuset_list.txt"
IBSTAT = FIXTURES / "ibstat" / "mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt"


def port_down(text: str, nic: str) -> str:
    """SYNTHETIC: the real mooncake ibstat with CA ``nic``'s port turned Down."""
    head, sep, tail = text.partition(f"CA '{nic}'")
    block, nxt, rest = tail.partition("\nCA '")
    assert sep, nic
    block = block.replace("State: Active", "State: Down").replace("Physical state: LinkUp", "Physical state: Polling")
    return head + sep + block + nxt + rest


def real_doc(ibstat: str) -> dict:
    return analyze_host({"nvidia_smi_topo": TOPO.read_text(), "ibstat": ibstat}, "n").to_dict()


def by_rule(problems: list[dict], rule: str) -> dict:
    found = [p for p in problems if p["rule"] == rule]
    assert len(found) == 1, problems
    return found[0]


def test_a_port_down_costs_its_share_of_the_compute_nics_from_every_gpu():
    before = real_doc(IBSTAT.read_text())
    after = real_doc(port_down(IBSTAT.read_text(), "mlx5_3"))
    compute = [n["name"] for n in after["nics"] if n["compute"]]
    down_before = [n for n in compute if not next(x for x in before["nics"] if x["name"] == n)["active"]]
    assert "mlx5_3" not in down_before
    f01 = by_rule(pc.host_problems(after), "F01")
    assert f01["fraction"] == pytest.approx((len(down_before) + 1) / len(compute), abs=1e-4)
    assert f01["gpus"] == 8 and f01["of"] == pc.INTER_NODE and not f01["estimated"]
    assert "mlx5_3" in f01["devices"]
    assert f01["cost"] > by_rule(pc.host_problems(before), "F01")["cost"]


def test_a_port_the_user_calls_storage_costs_nothing():
    doc = real_doc(port_down(IBSTAT.read_text(), "mlx5_3"))
    down = [n["name"] for n in doc["nics"] if n["compute"] and not n["active"]]
    roles = {name: {"role": "storage", "by": "u", "at": "2025-01-01T00:00:00Z"} for name in down}
    assert not [p for p in pc.host_problems(doc, roles) if p["rule"] == "F01"]


def synthetic_doc(findings, nics=(), edges=(), gpus=8) -> dict:
    """SYNTHETIC: the few document keys the cost reads (``analysis.py`` contract)."""
    return {"findings": list(findings), "nics": list(nics), "summary": {"gpu_count": gpus},
            "graph": {"edges": list(edges)}}


def f(rule, severity, devices, title="t"):
    return {"rule": rule, "severity": severity, "title": title, "devices": devices, "message": "", "fix": "",
            "source": ""}


RAILS = [{"name": f"mlx5_{i}", "compute": True, "active": True, "rate_gbps": 400.0} for i in range(8)]


def test_one_port_down_of_eight_is_an_eighth_of_inter_node_bandwidth():
    nics = [dict(n) for n in RAILS]
    nics[6]["active"] = False
    p = by_rule(pc.host_problems(synthetic_doc([f("F01", "HIGH", ["mlx5_6"])], nics)), "F01")
    assert (p["fraction"], p["gpus"], p["cost"]) == (0.125, 8, 1.0)
    assert pc.problem_sentence(p, hosts=12) == "a compute port Down -> 1/8 of inter-node bandwidth each"


def test_a_slow_rail_sets_the_rate_of_every_rail():
    nics = [dict(n) for n in RAILS]
    nics[2]["rate_gbps"] = 200.0
    p = by_rule(pc.host_problems(synthetic_doc([f("F02", "HIGH", ["mlx5_2"])], nics)), "F02")
    assert p["what"] == "a compute port at 200 of 400 Gb/s" and p["fraction"] == 0.5 and p["gpus"] == 8


def test_a_narrowed_gpu_link_costs_that_gpu_its_lost_width():
    edges = [{"source": "sw", "target": "GPU3", "kind": "pcie", "width": 8, "max_width": 16},
             {"source": "sw", "target": "GPU4", "kind": "pcie", "width": 16, "max_width": 16}]
    p = by_rule(pc.host_problems(synthetic_doc([f("P06", "HIGH", ["GPU3"])], edges=edges)), "P06")
    assert (p["what"], p["fraction"], p["gpus"], p["of"]) == ("a GPU link at x8 of x16", 0.5, 1, pc.PCIE)
    assert pc.problem_sentence(p) == "a GPU link at x8 of x16 -> 1/2 of PCIe bandwidth of 1 GPU"
    assert pc.needs_edges([f("P06", "HIGH", ["GPU3"])]) and not pc.needs_edges([f("F01", "HIGH", [])])


def test_missing_nvlinks_slow_every_ring_of_the_node():
    edges = [{"source": f"GPU{i}", "target": "nvswitch0", "kind": "nvlink", "links": 16 if i == 2 else 18}
             for i in range(8)]
    p = by_rule(pc.host_problems(synthetic_doc([f("N01", "HIGH", ["GPU2"])], edges=edges)), "N01")
    assert p["fraction"] == pytest.approx(1 / 9, abs=1e-4) and p["gpus"] == 8
    assert pc.fraction_text(p["fraction"]) == "1/9"


def test_rules_without_a_model_are_estimated_from_severity_on_the_gpus_they_name():
    doc = synthetic_doc([f("G01", "HIGH", ["GPU0", "mlx5_0"], "NIC too far"),
                         f("G01", "HIGH", ["GPU1", "mlx5_1"], "NIC too far"),
                         f("P09", "LOW", ["GPU0"]), f("H04", "CRIT", ["mlx5_0"], "sockets")], gpus=4)
    problems = pc.host_problems(doc)
    assert [p["rule"] for p in problems] == ["H04", "G01"]  # LOW is a note; costliest first
    g01 = by_rule(problems, "G01")
    assert g01["estimated"] and g01["gpus"] == 2 and g01["cost"] == 1.0  # one problem on both GPUs
    assert by_rule(problems, "H04")["gpus"] == 4  # names no GPU: every GPU of the host
    assert "(estimated from its severity)" in pc.problem_sentence(g01)


def test_gdr_off_costs_what_the_host_pages_per_gpu_figure_loses():
    """G01 by the verdict's per-GPU GB/s (one model on every page): the real P40 box's 8 GPUs share
    its one NIC, here a SYNTHETIC 100 Gb/s port, so the port, not the host-memory staging, limits
    each GPU (1.45 GB/s, the figure the host page shows): GDR off loses no bandwidth there. A
    SYNTHETIC GPU whose staging path (10 GB/s) is narrower than its port (46.5) loses 1 - 10 / 46.5."""
    from apps.domain.verdict import gpu_rows
    from tests.domain.engine.test_honest_contention import P40, P40_IBSTAT_100G

    doc = analyze_host({"nvidia_smi_topo": P40.read_text(), "ibstat": P40_IBSTAT_100G}, "p40").doc
    assert {r["effective_gbs"] for r in gpu_rows(doc)} == {1.45}
    g01 = by_rule(pc.host_problems(doc), "G01")
    assert (g01["fraction"], g01["cost"], g01["gpus"], g01["estimated"]) == (0.0, 0.0, 8, False)
    assert pc.problem_sentence(g01).startswith("GDR off, staged in host memory: no bandwidth lost")
    g05 = by_rule(pc.host_problems(doc), "G05")  # what the sharing takes: 7/8 of a port each
    assert g05["fraction"] == pytest.approx(1 - 1.45 / 11.625, abs=1e-3) and g05["gpus"] == 8
    assert g05["what"] == "GPUs sharing a NIC: 1.45 GB/s each of the port's 11.625 GB/s"
    one = {"findings": [f("G01", "HIGH", ["GPU0", "mlx5_0"])], "summary": {"gpu_count": 8},
           "nics": [{"name": "mlx5_0", "rate_gbps": 400.0, "compute": True, "active": True}],
           "gpu_nic": [{"gpu": "GPU0", "nic": "mlx5_0", "gdr": False, "bandwidth_gbs": 10.0, "nic_share": 1}]}
    p = by_rule(pc.host_problems(one), "G01")
    assert p["fraction"] == pytest.approx(1 - 10 / 46.5, abs=1e-4) and p["gpus"] == 1 and not p["estimated"]
    assert p["what"] == "GDR off, staged in host memory at 10 of 46.5 GB/s"


def test_the_fleet_ranking_sums_equal_problems_over_hosts():
    nics = [dict(n) for n in RAILS]
    nics[6]["active"] = False
    down = pc.host_problems(synthetic_doc([f("F01", "HIGH", ["mlx5_6"])], nics))
    edges = [{"source": "sw", "target": "GPU3", "kind": "pcie", "width": 8, "max_width": 16}]
    narrow = pc.host_problems(synthetic_doc([f("P06", "HIGH", ["GPU3"])], edges=edges))
    hosts = [(("c", f"n{i:02d}"), down) for i in range(12)] + [(("c", "n12"), narrow), (("c", "n13"), [])]
    ranked = pc.rank_fleet(hosts)
    assert [g["rule"] for g in ranked] == ["F01", "P06"]
    assert len(ranked[0]["hosts"]) == 12 and ranked[0]["cost"] == 12.0
    assert ranked[0]["sentence"] == "a compute port Down -> 1/8 of inter-node bandwidth each"
    assert ranked[1]["hosts"] == [(("c", "n12"), ["GPU3"])] and ranked[1]["cost"] == 0.5
    assert pc.rank_fleet(hosts, limit=1) == ranked[:1]


@pytest.mark.parametrize("fraction, text", [(0.125, "1/8"), (0.5, "1/2"), (1.0, "all"), (0.37, "37%"),
                                            (2 / 3, "2/3")])
def test_fraction_text(fraction, text):
    assert pc.fraction_text(fraction) == text
