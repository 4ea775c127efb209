"""A job's hosts typed by a person (fabric_job_report.job_hosts), the verdict sentence, and F08 deferring to
L03 on the real DGX H100 SuperPOD ibnetdiscover, where b08-p1-dgx-08-c01's HCA-5 and HCA-6 are cabled to
each other's leaves (B09-P1-IBLEAF-04-08 and -03-08, port 1, read off the capture)."""

from __future__ import annotations

from pathlib import Path

from apps.domain.fabric import attach_hosts, build_fabric
from apps.domain.fabric_job_report import job_hosts, job_verdict
from apps.domain.fabric_paths import FabricView
from apps.domain.fabric_rules import fabric_findings
from apps.domain.fleet_rules import evaluate_fleet
from apps.domain.parsers import parse

SUPERPOD = Path("/work/shared/realdata/ibnetdiscover/nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.out")


def test_names_globs_and_unknowns_in_rank_order():
    known = ["n1", "n2", "n10", "gpu-a.lab", "other"]
    assert job_hosts("n10 n*", known) == (["n10", "n1", "n2"], [])
    assert job_hosts("GPU-A, zz", known) == (["gpu-a.lab"], ["zz"])
    assert job_hosts("", known) == ([], [])


def test_verdict_names_the_leaf_whose_uplinks_are_over_capacity():
    c = {"nodes": 4, "algorithm": "ring", "oversubscription": 2.0, "design_oversubscription": 1.0,
         "demand_ratio": 1.5, "worst_leaf": "leaf-7", "missing": [], "off_rail": [],
         "leaves": [{"name": "leaf-7", "flows": 3, "flows_per_uplink": 1.5, "demand_ratio": 1.5},
                    {"name": "leaf-8", "flows": 1, "flows_per_uplink": 0.5, "demand_ratio": 0.5}]}
    assert job_verdict(c) == ("4 hosts: ring traffic crosses 2 leaves, at most 1.5 flows per uplink, 2:1 - the uplinks "
                              "of leaf-7 are the bottleneck (1.5x what they carry).")


def test_f08_defers_the_superpod_swap_to_l03():
    G = build_fabric(parse("ibnetdiscover", SUPERPOD.read_text()))
    l03 = [f for f in fabric_findings(FabricView.build(G, attach_hosts(G))) if f["rule"] == "L03"]
    assert [f["hosts"] for f in l03] == [["b08-p1-dgx-08-c01"]]
    alone = evaluate_fleet([], G)
    assert [f["hosts"] for f in alone["findings"] if f["rule"] == "F08"] == [["b08-p1-dgx-08-c01"]]
    deferred = evaluate_fleet([], G, fabric_findings=l03)
    assert [f for f in deferred["findings"] if f["rule"] == "F08"] == []
    assert any(u.startswith("F08: the rail cabling of b08-p1-dgx-08-c01 is reported once, as L03")
               for u in deferred["unknowns"])
