"""Fabric rules L01-L08 (apps/domain/fabric_rules.py) on the real captures (the DGX H100 SuperPOD
ibnetdiscover, iblinkinfo and ibstat outputs of /work/shared/realdata), the synthetic iblinkinfo fixture
and small hand-built fabrics."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from apps.domain import fabric, fabric_health
from apps.domain.fabric_paths import FabricView
from apps.domain.fabric_rules import FABRIC_RULE_IDS, fabric_findings, rule_l01, rule_l06, rule_l07
from apps.domain.parsers import ibnetdiscover, iblinkinfo
from bench.fabric_synth import synthetic_ibnetdiscover
from tests.domain.fabric_jobs.test_jobs import uplink_short
from tests.domain.fabric_paths.inputs import FIXTURES, REAL, ca, ibstat_doc, link, nic_doc, sw, two_leaves

ROOT = Path(__file__).resolve().parents[3]
HDR_LEAF = FIXTURES / "iblinkinfo" / "synthetic_hdr_leaf_could_be_down_disabled_init.txt"
LEAF = "MF0;leaf-hdr-01:MQM8790/U1"


def view_of(path: Path, parser=iblinkinfo) -> FabricView:
    return FabricView.build(fabric.build_fabric(parser.parse(path.read_text())))


def rules(found: list[dict], rule: str) -> list[dict]:
    return [f for f in found if f["rule"] == rule]


def test_rule_ids_are_documented_in_readme_and_the_module():
    import apps.domain.fabric_rules as mod

    readme = (ROOT / "README.md").read_text()
    assert FABRIC_RULE_IDS == ("L01", "L02", "L03", "L04", "L05", "L06", "L07", "L08")
    for rid in FABRIC_RULE_IDS:
        assert rid in readme and re.search(rf"^{rid}\s", mod.__doc__, re.M), rid


def test_the_real_superpod_shows_the_swapped_host_and_the_default_descriptions(superpod_text, superpod_view):
    found = fabric_findings(superpod_view)
    assert [f["rule"] for f in found] == ["L03", "L06"]
    (l03,) = rules(found, "L03")
    # read off the capture: b08-p1-dgx-08-c01 HCA-5 on port 1 of IBLEAF-04-08, HCA-6 on port 1 of IBLEAF-03-08
    assert '"b08-p1-dgx-08-c01 HCA-5"' in superpod_text
    assert (l03["severity"], l03["hosts"]) == ("MED", ["b08-p1-dgx-08-c01"])
    assert [(e["switch"], e["switch_port"], e["nic"], e["rail_of_leaf"]) for e in l03["evidence"]] == [
        ("MF0;B09-P1-IBLEAF-04-08:MQM9701/U1", 1, "HCA-5", "HCA-6"),
        ("MF0;B09-P1-IBLEAF-03-08:MQM9701/U1", 1, "HCA-6", "HCA-5")]
    assert "its HCA-5 and HCA-6 cables are swapped" in l03["message"]
    assert "the hosts beside it have their HCA-5 on MF0;B09-P1-IBLEAF-03-08:MQM9701/U1" in l03["message"]
    (l06,) = rules(found, "L06")
    count = len(re.findall(r'^Ca\s+\d+ "H-\w+"\s+# "MT4129 ConnectX7   Mellanox Technologies"', superpod_text, re.M))
    assert count == 69 and len(l06["evidence"]) == count and l06["severity"] == "LOW"
    assert l06["message"].startswith("69 host adapters share the node description 'MT4129 ConnectX7   Mellanox")


def test_l01_could_be_and_below_the_leaf_usual_rate():
    found = rules(fabric_findings(view_of(HDR_LEAF)), "L01")
    assert [(f["hosts"], f["evidence"][0]["switch_port"]) for f in found] == [(["gpu-a02"], 2), (["gpu-a03"], 3)]
    a02, a03 = found
    assert a02["evidence"][0] == {"switch": LEAF, "switch_port": 2, "host": "gpu-a02", "nic": "mlx5_0",
                                  "peer": "gpu-a02 mlx5_0", "peer_port": 1, "width": "2X", "speed": "HDR",
                                  "usual_width": "4X", "usual_speed": "HDR"}
    assert "iblinkinfo: could be 4X" in a02["message"] and "At 4X HDR it would carry 25 GB/s" in a02["message"]
    assert "4X EDR" in a03["message"] and "could be HDR" in a03["message"]
    assert "ibdiagnet" in a03["source"] and "PortInfo" in a03["source"]


def test_l01_host_ibstat_rate_above_the_fabric_link():
    # gpu-a01 is at 4X HDR on the leaf; a real H100 ibstat (mlx5_0 at Rate 400, NDR) sent as gpu-a01's
    doc, _ = ibstat_doc("gpud_h100_8x_cx7_ndr_ib_plus_bluefield3_eth.txt", "gpu-a01")
    (f,) = [f for f in rules(fabric_findings(view_of(HDR_LEAF), [doc]), "L01") if f["hosts"] == ["gpu-a01"]]
    assert "the host's ibstat reports 400 Gb/s, but the fabric shows the link at 4X HDR (200 Gb/s)" in f["message"]
    assert (f["evidence"][0]["switch"], f["evidence"][0]["switch_port"]) == (LEAF, 1)


def test_l01_an_edr_capable_hca_at_sdr():
    """
    Synthetic: n1's ConnectX-4 (CA type MT4115, EDR) trained 4X SDR on leaf1, whose uplink runs 4X EDR;
    n1's ibstat agrees (Rate 10), so only the adapter's model tells it could do more.
    """
    g = {n: f"0x{i:016x}" for i, n in enumerate(["leaf1", "spine1", "n1"], 1)}
    data = {"switches": [sw(g["leaf1"], "leaf1"), sw(g["spine1"], "spine1")], "cas": [ca(g["n1"], "n1 mlx5_0")],
            "links": [link(g["n1"], 1, g["leaf1"], 1, speed="SDR"), link(g["leaf1"], 20, g["spine1"], 1, speed="EDR")]}
    view = FabricView.build(fabric.build_fabric(data))
    doc = nic_doc("n1", {"mlx5_0": 10})
    ib = {"n1": {"ibstat": {"cas": [{"name": "mlx5_0", "ca_type": "MT4115"}]}}}
    (f,) = rule_l01(view, {"n1": doc}, ib)
    assert "a EDR-capable ConnectX-4 (MT4115) trained at 4X SDR (10 Gb/s)" in f["message"]
    assert rule_l01(view, {"n1": doc}, None) == []  # without the CA type nothing says it could do more
    ib["n1"]["ibstat"]["cas"][0]["ca_type"] = "MT4099"  # a ConnectX-3 (FDR) at SDR, on a leaf running EDR
    assert "FDR-capable ConnectX-3" in rule_l01(view, {"n1": doc}, ib)[0]["message"]


def test_l02_port_to_a_host_not_active_but_not_empty_ports():
    found = rules(fabric_findings(view_of(HDR_LEAF)), "L02")
    assert [(f["hosts"], f["evidence"][0]["switch_port"], f["evidence"][0]["state"]) for f in found] == [
        (["gpu-a04"], 4, "Initializing")]
    assert "no subnet manager has configured the port" in found[0]["message"]
    # the real QDR switch: ports 8, 10-13, 15-18 are Down/Polling with nothing cabled: not findings
    teaker = view_of(REAL / "iblinkinfo" / "qdr_infiniscale_iv_18port_teaker_8hosts_one_dual_port_ca.txt")
    assert len(fabric_health.down_ports(teaker.graph)) == 9 and rules(fabric_findings(teaker), "L02") == []


def test_l02_l01_l05_from_a_real_host_report_against_the_superpod(superpod_view):
    """The Dell XE9780 ibstat (seven ConnectX-8 ports Down/Disabled: mlx5_0, 1, 6-10; four ConnectX-7,
    mlx5_2-5, Active at 100 Gb/s) sent as a08-p1-dgx-04-c01, whose mlx5_0, 1, 4 and 5 the SuperPOD capture
    shows at 4X NDR (two real captures of different machines joined: the facts of each are real)."""
    doc, results = ibstat_doc("dell_xe9780_b300_cx8_down_cx7_active.txt", "a08-p1-dgx-04-c01")
    found = fabric_findings(superpod_view, [doc], ib_reports={"a08-p1-dgx-04-c01": results})
    l02 = rules(found, "L02")
    assert [e["nic"] for f in l02 for e in f["evidence"]] == ["mlx5_0", "mlx5_1"]
    assert "is Down/Disabled on the host (ibstat), while the fabric's capture shows its link to " \
           "MF0;A09-P1-IBLEAF-01-04:MQM9701/U1 port 1 up" in l02[0]["message"]
    l01 = rules(found, "L01")
    assert [e["nic"] for f in l01 for e in f["evidence"]] == ["mlx5_4", "mlx5_5"]
    assert "reports 100 Gb/s, below the 4X NDR (400 Gb/s) the fabric's capture shows" in l01[0]["message"]
    (l05,) = rules(found, "L05")
    absent = [e["nic"] for e in l05["evidence"]]
    cas = re.findall(r"^CA '(\w+)'", (REAL / "ibstat" / "dell_xe9780_b300_cx8_down_cx7_active.txt").read_text(), re.M)
    assert len(cas) == 11  # mlx5_0 .. mlx5_10; the SuperPOD capture has mlx5_0, 1, 4 and 5 of this host
    assert absent == sorted((c for c in cas if c not in ("mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5")),
                            key=lambda n: int(n.split("_")[1]))
    assert "mlx5_2 (Active" in l05["message"] and "on another subnet" in l05["message"]


def test_l05_ignores_ethernet_and_hosts_the_fabric_names_otherwise(superpod_view):
    doc, _ = ibstat_doc("gpud_h100_8x_cx7_ndr_ib_plus_bluefield3_eth.txt", "a08-p1-dgx-04-c01")
    (l05,) = rules(fabric_findings(superpod_view, [doc]), "L05")
    assert [e["nic"] for e in l05["evidence"]] == ["mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]  # not the RoCE bond
    assert "the fabric has 4 of its adapters (mlx5_0, mlx5_1, mlx5_4 and mlx5_5)" in l05["message"]
    # b05-p1-dgx-05-c08's adapters are HCA-1.. in the capture: names cannot join mlx5_*, so no verdict
    other, _ = ibstat_doc("gpud_h100_8x_cx7_ndr_ib_plus_bluefield3_eth.txt", "b05-p1-dgx-05-c08")
    assert rules(fabric_findings(superpod_view, [other]), "L05") == []


def test_l04_a_leaf_short_of_uplinks_for_the_job():
    view = FabricView.build(fabric.build_fabric(uplink_short()))
    # all four of leaf1's hosts: 4:1 over its one uplink, beyond the 1:1 design, but their flows stay on leaf1
    (alone,) = rules(fabric_findings(view, job_hosts=["a1", "a2", "a3", "a4"]), "L04")
    assert (alone["severity"], alone["evidence"][0]["switch"]) == ("MED", "leaf1")
    assert alone["message"] == ("leaf1: the job's 4 adapter(s) on it (a1, a2, a3 and a4) have 200 GB/s toward the "
                                "hosts and the leaf 50 GB/s of usable uplinks (1 cable): 4.0:1, beyond the 1.0:1 most "
                                "leaves are built with.")
    # with leaf2's hosts after them: the ring leaves leaf1 once (46.5 of 50 GB/s), NCCL's two trees twice
    (block,) = rules(fabric_findings(view, job_hosts=["a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"]), "L04")
    assert block["severity"] == "HIGH" and "Under ring" not in block["message"]
    assert "Under tree all-reduce 2 of the job's flows cross these uplinks (93 GB/s, 1.86x" in block["message"]
    # interleaved, every ring step crosses: 4 flows out of leaf1
    (mixed,) = rules(fabric_findings(view, job_hosts=["a1", "b1", "a2", "b2", "a3", "b3", "a4", "b4"]), "L04")
    assert "Under ring all-reduce 4 of the job's flows cross these uplinks (186 GB/s, 3.72x" in mixed["message"]
    assert rules(fabric_findings(view, job_hosts=["b1", "b2", "c1"]), "L04") == []  # full uplinks
    assert rules(fabric_findings(view), "L04") == []  # no job, no L04


def test_l06_a_description_naming_a_host_twice_is_med():
    data = two_leaves()
    data["cas"][1]["name"] = "n1 mlx5_0"  # n2's adapter also calls itself n1 mlx5_0
    (f,) = rule_l06(FabricView.build(fabric.build_fabric(data)))
    assert f["severity"] == "MED" and "puts two machines' adapters under one host" in f["message"]
    assert [e["switch_port"] for e in f["evidence"]] == [1, 2]
    data = two_leaves()
    data["switches"][1]["name"] = "leaf1"  # two switches called leaf1
    (f,) = rule_l06(FabricView.build(fabric.build_fabric(data)))
    assert f["severity"] == "LOW" and f["message"].startswith("2 switches share the node description 'leaf1'")
    assert [e["switch"] for e in f["evidence"]] == ["leaf1", "leaf1"]


def test_l07_pods_joined_by_fewer_core_links_than_their_hosts():
    # synthetic fat tree: 2 pods of 2 leaves (4 HCAs each), each spine one cable to the core
    view = FabricView.build(fabric.build_fabric(ibnetdiscover.parse(synthetic_ibnetdiscover(
        pods=2, leaves_per_pod=2, spines_per_pod=2, cores=2, hcas_per_leaf=4, core_links_per_spine=1))))
    (pods,) = rule_l07(view, {}, None)  # both pods alike: one finding
    assert pods["severity"] == "MED" and len(pods["evidence"]) == 2
    assert pods["message"] == ("2 islands of 2 leaves (from leaf-00-00, leaf-01-00): each reaches the rest of the "
                               "fabric over 2 cables (100 GB/s per direction) while its 8 host links carry 400 GB/s: "
                               "4.0:1 for traffic between it and the rest.")
    job = rule_l07(view, {}, ["node00000", "node00001"])  # one host per pod: 8 adapters each side
    assert [f["severity"] for f in job] == ["MED", "HIGH", "HIGH"]
    assert job[1]["message"].startswith("The job spans islands: 1 of its hosts (node00000) sits in the island")


def test_l07_a_split_fabric_and_a_one_island_fabric(superpod_view):
    data = two_leaves()
    data["links"] = data["links"][:4]
    (split,) = rule_l07(FabricView.build(fabric.build_fabric(data)), {}, None)
    assert split["severity"] == "HIGH" and split["message"].startswith(
        "2 islands of 1 leaf (from leaf1, leaf2): each has no usable link to the rest of the fabric")
    assert rule_l07(superpod_view, {}, None) == []  # two tiers, every leaf on the same spines


def test_l08_mixed_link_speeds_in_one_job():
    found = rules(fabric_findings(view_of(HDR_LEAF), job_hosts=["gpu-a01", "gpu-a02", "gpu-a03"]), "L08")
    (f,) = found
    assert "The job's adapters run at 3 link rates: 4X HDR (200 Gb/s): 1 link(s), gpu-a01/mlx5_0" in f["message"]
    assert f["hosts"] == ["gpu-a02", "gpu-a03"] and "init.cc L1436-1443" in f["source"]
    assert rules(fabric_findings(view_of(HDR_LEAF), job_hosts=["gpu-a01"]), "L08") == []


def test_findings_are_sorted_and_carry_evidence():
    found = fabric_findings(view_of(HDR_LEAF), job_hosts=["gpu-a01", "gpu-a02", "gpu-a03"])
    assert [f["rule"] for f in found] == ["L01", "L01", "L02", "L08"]
    for f in found:
        assert {"rule", "severity", "title", "devices", "message", "fix", "source", "hosts", "evidence"} <= set(f)
        assert all({"switch", "switch_port", "host", "nic"} <= set(e) for e in f["evidence"])


@pytest.mark.parametrize("name", ["nccl_tests_issue_71_hdr_mqm8700_4x_v100_hosts_edr_links_sharp_an_partial.txt",
                                  "edr_sb7700_2nodes_mgt_grep_up_partial.txt",
                                  "archwiki_two_connectx_mlx4_back_to_back_ddr_no_switch.txt"])
def test_healthy_real_captures_have_no_findings(name):
    # EDR hosts on an HDR switch (only the SHARP node runs HDR), a grep'd EDR listing, two back-to-back DDR HCAs
    assert fabric_findings(view_of(REAL / "iblinkinfo" / name)) == []


def test_l05_hosts_none_of_whose_adapters_are_in_the_discovery_make_one_low_finding(superpod_view):
    """Two hosts the SuperPOD capture does not have (names not in it; SYNTHETIC pairing of a real ibstat
    with them): their ports are on another subnet as far as this discovery knows, one LOW finding."""
    pairs = [ibstat_doc("gpud_h100_8x_cx7_ndr_ib_plus_bluefield3_eth.txt", name) for name in ("pod2-n01", "pod2-n02")]
    docs = [doc for doc, _ in pairs]
    ports = fabric.host_ports_from_ib({doc["hostname"]: results["ibstat"] for doc, results in pairs})
    view = FabricView.build(superpod_view.graph, fabric.attach_hosts(superpod_view.graph, ports))
    (l05,) = rules(fabric_findings(view, docs), "L05")
    assert l05["severity"] == "LOW" and l05["hosts"] == ["pod2-n01", "pod2-n02"]
    assert l05["message"].startswith("2 host(s) report InfiniBand ports of which the discovery has none")
