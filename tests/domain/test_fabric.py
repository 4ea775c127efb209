"""The fabric graph (apps/domain/fabric.py): the real SuperPOD capture, small hand-built fabrics, the
filtered/cut iblinkinfo captures, host joins by GUID and by name, routes, sharing and link health."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain import fabric, fabric_health
from apps.domain.bandwidth import ib_link, ib_speed_from_lane
from apps.domain.parsers import ibnetdiscover, iblinkinfo, ibstat, to_jsonable
from bench.fabric_synth import synthetic_ibnetdiscover

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SUPERPOD = FIX / "ibnetdiscover" / "nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.txt"


@pytest.fixture(scope="module")
def pod():
    return fabric.build_fabric(ibnetdiscover.parse(SUPERPOD.read_text()))


def by_name(G, name: str) -> str:
    return next(n for n, d in G.nodes(data=True) if d["name"] == name)


def sw(guid: str, name: str) -> dict:
    return {"guid": guid, "name": name}


def ca(guid: str, name: str) -> dict:
    return {"guid": guid, "name": name, "host": name.split()[0], "kind": "hca"}


def link(a: str, pa: int, b: str, pb: int, width: str = "4X", speed: str = "NDR", state: str | None = None) -> dict:
    return {"a": {"guid": a, "port": pa}, "b": {"guid": b, "port": pb}, "width": width, "speed": speed,
            "state": state}


def two_leaves(uplink_width: str = "4X") -> dict:
    """
    n1 mlx5_0 --\\            /== spine1 ==\\            /-- n3 mlx5_0
                 leaf1 ===<              >=== leaf2
    n2 mlx5_0 --/            \\== spine2 ==/            \\-- n4 mlx5_0
    every '=' is two cables (4X NDR, 50 GB/s each); '-' one
    """
    g = {n: f"0x{i:016x}" for i, n in enumerate(["leaf1", "leaf2", "spine1", "spine2", "n1", "n2", "n3", "n4"], 1)}
    links = [link(g["n1"], 1, g["leaf1"], 1), link(g["n2"], 1, g["leaf1"], 2),
             link(g["n3"], 1, g["leaf2"], 1), link(g["n4"], 1, g["leaf2"], 2)]
    for leaf in ("leaf1", "leaf2"):
        for s_i, spine in enumerate(("spine1", "spine2")):
            for c in range(2):
                port = 10 + 2 * s_i + c
                links.append(link(g[leaf], port, g[spine], 10 + c + (2 if leaf == "leaf2" else 0), uplink_width))
    return {"switches": [sw(g[n], n) for n in ("leaf1", "leaf2", "spine1", "spine2")],
            "cas": [ca(g[n], f"{n} mlx5_0") for n in ("n1", "n2", "n3", "n4")], "links": links, "warnings": []}


def node(G, name: str) -> str:
    return by_name(G, name)


# --- the real SuperPOD ---------------------------------------------------------------------------


def test_superpod_tiers_read_off_the_capture(pod):
    # 31 "IBLEAF" switches have DGX HCAs on ports 1-18; the 9 "IBSPINE" ones only leaves (and their own SHARP node)
    t = fabric.tiers(pod)
    assert sorted(pod.nodes[n]["name"] for n, tier in t.items() if tier == "spine") == [
        f"MF0;{r}-P1-IBSPINE-0{i}:MQM9701/U1" for r, i in
        [("A10", 1), ("A10", 2), ("A10", 3), ("A10", 4), ("B10", 5), ("B10", 6), ("B10", 7), ("B10", 8), ("B10", 9)]]
    assert sum(tier == "leaf" for tier in t.values()) == 31
    assert all("IBLEAF" in pod.nodes[n]["name"] for n, tier in t.items() if tier == "leaf")
    s = fabric.summary(pod)
    assert (s["host_adapters"], s["other_cas"], s["links"]) == (542, 40, 1114)


def test_superpod_ca_leaf_and_port(pod):
    # [1](e09d730300859334)  "S-2c5eab0300b87a80"[10]  # lid 500 lmc 0 "MF0;A09-P1-IBLEAF-01-02:MQM9701/U1"
    att = fabric.attach_hosts(pod)["hosts"]["a06-p1-dgx-02-c10"]
    row = next(r for r in att if r["ca"] == "ib:0xe09d730300859334")
    assert (row["leaf_name"], row["leaf_port"], row["nic"], row["match"]) == (
        "MF0;A09-P1-IBLEAF-01-02:MQM9701/U1", 10, "HCA-1", "name")
    assert pod.nodes[row["leaf"]]["tier"] == "leaf"


def test_superpod_route_between_leaves_counts_the_shared_spines(pod):
    # IBLEAF-04-04 reaches spines 02-09 (ports 35-50, two cables each); IBLEAF-04-05 all nine: 8 shared spines
    a, b = node(pod, "a08-p1-dgx-04-c01 mlx5_5"), node(pod, "b05-p1-dgx-05-c08 HCA-6")
    r = fabric.route(pod, a, b)
    assert [h["to_name"] for h in r["hops"]][0] == "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"
    assert "IBSPINE" in r["hops"][1]["to_name"] and r["hops"][1]["links"] == 2
    assert (len(r["hops"]), r["equal_cost_paths"], r["equal_cost_port_paths"]) == (4, 8, 32)
    assert (r["bottleneck_gbs"], r["bottleneck"], r["leaf_cut_gbs"]) == (50.0, "host link", 800.0)


def test_superpod_route_on_one_leaf(pod):
    r = fabric.route(pod, node(pod, "a08-p1-dgx-04-c01 mlx5_5"), node(pod, "a08-p1-dgx-04-c02 mlx5_5"))
    assert ([h["to_name"] for h in r["hops"]], r["equal_cost_paths"], r["leaf_cut_gbs"]) == (
        ["MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", "a08-p1-dgx-04-c02 mlx5_5"], 1, None)


def test_superpod_uplink_sharing(pod):
    # IBLEAF-04-04: HCAs on ports 1-17, 16 uplinks -> 17/16 oversubscribed
    leaf = node(pod, "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1")
    row = fabric.uplink_sharing(pod)[leaf]
    assert (row["host_links"], row["uplinks"], row["down_gbs"], row["up_gbs"]) == (17, 16, 850.0, 800.0)
    assert row["oversubscription"] == pytest.approx(17 / 16, abs=1e-3)
    job = fabric.uplink_sharing(pod, hosts=["a08-p1-dgx-04-c01", "a08-p1-dgx-04-c02"])
    assert job[leaf]["host_links"] == 2 and job[leaf]["hosts"] == ["a08-p1-dgx-04-c01", "a08-p1-dgx-04-c02"]
    # the capture shows four HCAs of each (mlx5_0, _1, _4, _5), each rail on its own leaf
    assert all(v["host_links"] == 2 for v in job.values()) and len(job) == 4


def test_superpod_guid_join_beats_names_and_unknown_guids_are_listed(pod):
    host_ports = {"dgx-c10": [{"nic": "mlx5_0", "port": 1, "port_guid": "0xe09d730300859334", "node_guid": None}],
                  "ghost": [{"nic": "mlx5_0", "port": 1, "port_guid": "0x1111111111111111", "node_guid": None}]}
    out = fabric.attach_hosts(pod, host_ports)
    (row,) = out["hosts"]["dgx-c10"]
    assert (row["match"], row["leaf_port"], row["nic"]) == ("port_guid", 10, "mlx5_0")
    assert out["unmatched"] == [{"host": "ghost", "nic": "mlx5_0", "port": 1, "port_guid": "0x1111111111111111",
                                 "node_guid": None}]
    assert all(r["ca"] != "ib:0xe09d730300859334" for r in out["hosts"]["a06-p1-dgx-02-c10"])


def test_superpod_is_healthy(pod):
    assert fabric_health.degraded_links(pod) == [] and fabric_health.down_ports(pod) == []


# --- small fabrics -------------------------------------------------------------------------------


def test_two_leaves_two_spines_route():
    G = fabric.build_fabric(two_leaves())
    r = fabric.route(G, node(G, "n1 mlx5_0"), node(G, "n3 mlx5_0"))
    assert [h["to_name"] for h in r["hops"]][::2] == ["leaf1", "leaf2"]
    assert (r["equal_cost_paths"], r["equal_cost_port_paths"]) == (2, 8)
    assert (r["bottleneck_gbs"], r["bottleneck"], r["leaf_cut_gbs"]) == (50.0, "host link", 200.0)
    assert r["bottleneck_expected_gbs"] == pytest.approx(50 * 0.93)


def test_narrow_uplinks_make_the_fabric_the_bottleneck():
    """
    The two-leaf fabric with every leaf-spine cable trained at 1X NDR (12.5 GB/s):
    leaf1 = 4 cables = 50 GB/s to the spines, as much as n1's own link: still the host link.
    Then one cable per leaf-spine pair (ports 11 and 13 unplugged): 2 x 12.5 = 25 GB/s < 50, the fabric.
    """
    G = fabric.build_fabric(two_leaves(uplink_width="1X"))
    r = fabric.route(G, node(G, "n1 mlx5_0"), node(G, "n3 mlx5_0"))
    assert (r["leaf_cut_gbs"], r["bottleneck_gbs"], r["bottleneck"]) == (50.0, 50.0, "host link")
    data = two_leaves(uplink_width="1X")
    data["links"] = [lk for lk in data["links"] if not ({lk["a"]["port"]} & {11, 13})]
    G = fabric.build_fabric(data)
    r = fabric.route(G, node(G, "n1 mlx5_0"), node(G, "n3 mlx5_0"))
    assert (r["bottleneck_gbs"], r["bottleneck"], r["equal_cost_port_paths"]) == (25.0, "fabric", 2)
    assert r["cut"] in ([[node(G, "leaf1"), node(G, "spine1")], [node(G, "leaf1"), node(G, "spine2")]],
                        [[node(G, "spine1"), node(G, "leaf2")], [node(G, "spine2"), node(G, "leaf2")]])


def test_uplink_sharing_counts_only_the_given_hosts():
    G = fabric.build_fabric(two_leaves())
    leaf1 = node(G, "leaf1")
    every = fabric.uplink_sharing(G)[leaf1]
    assert (every["host_links"], every["uplinks"], every["oversubscription"]) == (2, 4, 0.5)
    assert fabric.uplink_sharing(G, hosts=["n3"]) == {node(G, "leaf2"): {
        "name": "leaf2", "hosts": ["n3"], "host_links": 1, "down_gbs": 50.0, "uplinks": 4, "up_gbs": 200.0,
        "oversubscription": 0.25}}


def test_not_active_link_carries_nothing():
    data = two_leaves()
    for lk in data["links"]:
        if lk["a"]["port"] in (10, 11, 12, 13) and lk["a"]["guid"] == "0x0000000000000001":
            lk["state"] = "Initializing"  # leaf1's uplinks came up without a subnet manager
    G = fabric.build_fabric(data)
    r = fabric.route(G, node(G, "n1 mlx5_0"), node(G, "n3 mlx5_0"))
    assert r["hops"] == [] and r["bottleneck_gbs"] is None


def test_switchless_back_to_back_route():
    G = fabric.build_fabric(iblinkinfo.parse((FIX / "iblinkinfo" /
                                              "archwiki_two_connectx_mlx4_back_to_back_ddr_no_switch.txt").read_text()))
    assert fabric.tiers(G) == {}
    a, b = fabric.host_cas(G)
    r = fabric.route(G, a, b)
    assert (len(r["hops"]), r["hops"][0]["speed"], r["bottleneck_gbs"]) == (1, "DDR", 2.5)


def test_filtered_iblinkinfo_switch_known_by_lid_is_a_leaf():
    text = (FIX / "iblinkinfo" / "edr_sb7700_2nodes_mgt_grep_up_partial.txt").read_text()
    G = fabric.build_fabric(iblinkinfo.parse(text))
    assert fabric.tiers(G) == {"ib:lid2": "leaf"}
    hosts = fabric.attach_hosts(G)["hosts"]
    assert {h: [(r["leaf"], r["leaf_port"]) for r in rows] for h, rows in hosts.items()} == {
        "n02": [("ib:lid2", 17)], "mgt": [("ib:lid2", 36)], "n01": [("ib:lid2", 18)]}


def test_cut_iblinkinfo_peer_known_only_by_lid_is_an_inferred_host():
    G = fabric.build_fabric(iblinkinfo.parse((FIX / "iblinkinfo" /
        "nccl_tests_issue_71_hdr_mqm8700_4x_v100_hosts_edr_links_sharp_an_partial.txt").read_text()))
    d = G.nodes["ib:lid5"]
    assert (d["type"], d["host"], d["inferred"]) == ("ca", "gpu-v100-2", True)
    assert sorted(fabric.attach_hosts(G)["hosts"]) == ["gpu-v100-0", "gpu-v100-1", "gpu-v100-2", "gpu-v100-3"]
    assert fabric.summary(G)["other_cas"] == 1  # the SHARP aggregation node on port 41


def test_degraded_links_from_could_be_and_from_peers():
    G = fabric.build_fabric(iblinkinfo.parse((FIX / "iblinkinfo" /
                                              "synthetic_hdr_leaf_could_be_down_disabled_init.txt").read_text()))
    bad = {({r["a_name"], r["b_name"]} - {"MF0;leaf-hdr-01:MQM8790/U1"}).pop(): r for r in fabric_health.degraded_links(G)}
    assert {(host, r["width"], r["speed"]) for host, r in bad.items()} == {("gpu-a02 mlx5_0", "2X", "HDR"),
                                                                          ("gpu-a03 mlx5_0", "4X", "EDR")}
    assert bad["gpu-a02 mlx5_0"]["reasons"][0] == "iblinkinfo: could be 4X"
    assert (bad["gpu-a03 mlx5_0"]["usual_width"], bad["gpu-a03 mlx5_0"]["usual_speed"]) == ("4X", "HDR")
    down = [(r["name"], r["port"], r["state"], r["phys_state"]) for r in fabric_health.down_ports(G)]
    assert ("MF0;leaf-hdr-01:MQM8790/U1", 5, "Down", "Polling") in down
    assert ("MF0;leaf-hdr-01:MQM8790/U1", 6, "Down", "Disabled") in down
    assert ("gpu-a04 mlx5_0", 1, "Initializing", "LinkUp") in down


def test_link_below_the_fabrics_host_links_is_flagged_without_could_be():
    G = fabric.build_fabric(ibnetdiscover.parse((FIX / "ibnetdiscover" /
                                                 "synthetic_partial_discovery_node_name_map.txt").read_text()))
    (bad,) = fabric_health.degraded_links(G)
    assert (bad["width"], bad["b_name"] if bad["a_name"] == "leaf02" else bad["a_name"]) == (
        "2X", "MT4129 ConnectX7   Mellanox Technologies")
    assert bad["reasons"] == ["below the fabric's host links (most are 4X NDR)"]
    assert fabric.attach_hosts(G)["hosts"]["node04"][0]["nic"] == "mlx5_0"  # from the peers' name (alias)


def test_host_ports_from_ibstat_join_by_guid():
    text = (FIX / "ibstat" / "cx6_hdr_active_after_sm.txt").read_text()
    ports = fabric.host_ports_from_ib({"ubuntu": ibstat.parse(text)})
    row = next(r for r in ports["ubuntu"] if r["nic"] == "mlx5_5")
    assert row == {"nic": "mlx5_5", "port": 1, "port_guid": "0x08c0eb0300ea50e6", "node_guid": "0x08c0eb0300ea50e6"}
    G = fabric.build_fabric({"switches": [sw("0x00000000000000aa", "leaf")], "cas": [
        {"guid": "0x08c0eb0300ea50e6", "name": "MT4123 ConnectX6   Mellanox Technologies", "kind": "hca",
         "ports": [{"port": 1, "port_guid": "0x08c0eb0300ea50e6", "peer": {"guid": "0x00000000000000aa", "port": 7}}]}],
        "links": [link("0x08c0eb0300ea50e6", 1, "0x00000000000000aa", 7, speed="HDR")]})
    (att,) = fabric.attach_hosts(G, ports)["hosts"]["ubuntu"]
    assert (att["nic"], att["match"], att["leaf_port"]) == ("mlx5_5", "port_guid", 7)


def test_json_and_records_build_the_same_graph():
    r = iblinkinfo.parse((FIX / "iblinkinfo" /
                          "qdr_infiniscale_iv_18port_teaker_8hosts_one_dual_port_ca.txt").read_text())
    a, b = fabric.build_fabric(r), fabric.build_fabric(to_jsonable(r))
    assert sorted(a.nodes) == sorted(b.nodes) and sorted(a.edges) == sorted(b.edges)
    assert fabric.summary(a) == fabric.summary(b) == {"switches": 1, "tiers": {"leaf": 1}, "host_adapters": 8,
                                                      "other_cas": 0, "links": 9, "hosts": 8}
    assert a.edges[node(a, "teaker-9 HCA-1"), node(a, "Infiniscale-IV Mellanox Technologies")]["count"] == 2


def test_synthetic_three_tier_fat_tree():
    text = synthetic_ibnetdiscover(pods=3, leaves_per_pod=2, spines_per_pod=2, cores=4, hcas_per_leaf=2,
                                   core_links_per_spine=2)
    G = fabric.build_fabric(ibnetdiscover.parse(text))
    assert fabric.summary(G)["tiers"] == {"core": 4, "leaf": 6, "spine": 6}
    cas = fabric.host_cas(G)
    r = fabric.route(G, cas[0], cas[-1])  # pod 0 to pod 2: 2 spines x 2 cores each
    assert (len(r["hops"]), r["equal_cost_paths"], r["leaf_cut_gbs"]) == (6, 4, 100.0)


def test_ib_link_rates_from_the_one_table():
    assert (ib_link("4X", "NDR").spec_gbs, ib_link("2X", "NDR").spec_gbs, ib_link("4X", "EDR").spec_gbs,
            ib_link("1X", "SDR").spec_gbs, ib_link("4X", "XDR").spec_gbs) == (50.0, 25.0, 12.5, 0.3125, 100.0)
    assert ib_link("4X", None).spec_gbs is None
    assert [ib_speed_from_lane(x) for x in (2.5, 5.0, 10.0, 14.0625, 25.78125, 53.125, 106.25, 212.5)] == [
        "SDR", "DDR", "QDR", "FDR", "EDR", "HDR", "NDR", "XDR"]


def test_route_refuses_unknown_or_same_node(pod):
    with pytest.raises(KeyError):
        fabric.route(pod, "ib:0x0000000000000bad", node(pod, "a08-p1-dgx-04-c01 mlx5_5"))
    with pytest.raises(ValueError):
        fabric.route(pod, "0xe09d730300859334", "e09d730300859334")
