"""Comparing two fabric discoveries (apps/domain/fabric_compare.py): the real SuperPOD ibnetdiscover and
the real QDR iblinkinfo against versions derived from them in this file, and small hand-built fabrics."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.fabric import build_fabric
from apps.domain.fabric_compare import compare_fabrics, describe_end, fabric_links
from apps.domain.parsers import iblinkinfo, ibnetdiscover

FIX = Path(__file__).resolve().parents[1] / "fixtures"  # real captures copied from ../shared/realdata (SOURCES.*.tsv)
SUPERPOD = FIX / "ibnetdiscover" / "nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.txt"
TEAKER = FIX / "iblinkinfo" / "qdr_infiniscale_iv_18port_teaker_8hosts_one_dual_port_ca.txt"

LEAF = "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"  # S-2c5eab0300b87b40, the capture's first block
SPINE = "MF0;A10-P1-IBSPINE-02:MQM9701/U1"  # S-2c5eab0300c26280


def _replace(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def superpod_next_day(text: str) -> str:
    """DERIVED IN THIS TEST from the real SuperPOD capture, as if discovered again after three changes:

    1. the adapter "a08-p1-dgx-04-c01 mlx5_5" (H-e09d7303007a4bd8) on LEAF port 1 was unplugged:
       its Ca block and LEAF's port-1 line are gone (ibnetdiscover lists linked ports only);
    2. "a08-p1-dgx-04-c02 mlx5_5" (H-e09d730300859298) was recabled from LEAF port 2 to port 18
       (both listings of the cable say so);
    3. the LEAF port 35 <-> SPINE port 32 cable trained at 2X instead of 4X (both listings).
    """
    blocks = [b for b in text.split("\n\n") if "caguid=0xe09d7303007a4bd8" not in b]
    text = "\n".join(line for line in "\n\n".join(blocks).split("\n") if '"H-e09d7303007a4bd8"' not in line)
    text = _replace(text, '[2]\t"H-e09d730300859298"[1]', '[18]\t"H-e09d730300859298"[1]')
    text = _replace(text, '"S-2c5eab0300b87b40"[2]\t\t# lid 641', '"S-2c5eab0300b87b40"[18]\t\t# lid 641')
    text = _replace(text, f'[35]\t"S-2c5eab0300c26280"[32]\t\t# "{SPINE}" lid 236 4xNDR',
                    f'[35]\t"S-2c5eab0300c26280"[32]\t\t# "{SPINE}" lid 236 2xNDR')
    text = _replace(text, f'[32]\t"S-2c5eab0300b87b40"[35]\t\t# "{LEAF}" lid 73 4xNDR',
                    f'[32]\t"S-2c5eab0300b87b40"[35]\t\t# "{LEAF}" lid 73 2xNDR')
    return text


@pytest.fixture(scope="module")
def superpod():
    text = SUPERPOD.read_text()
    return build_fabric(ibnetdiscover.parse(text)), build_fabric(ibnetdiscover.parse(superpod_next_day(text)))


def test_the_same_discovery_has_no_change(superpod):
    before, _ = superpod
    diff = compare_fabrics(before, before)
    assert diff["changed"] is False and diff["summary"] == [] and set(diff["counts"].values()) == {0}
    assert len(fabric_links(before)) == 1114  # each physical link once (ibnetdiscover lists both ends)


def test_superpod_next_day_says_what_changed_in_sentences(superpod):
    before, after = superpod
    diff = compare_fabrics(before, after)
    assert diff["summary"] == [
        f"{LEAF} port 1 to a08-p1-dgx-04-c01 mlx5_5 went down (a08-p1-dgx-04-c01 mlx5_5 is gone from the discovery)",
        f"a08-p1-dgx-04-c02 mlx5_5 moved from {LEAF} port 2 to {LEAF} port 18",
        f"{LEAF} port 35 to {SPINE} port 32: 4X NDR (50 GB/s) -> 2X NDR (25 GB/s)",
    ]
    assert diff["counts"] == {"links_down": 1, "links_up": 0, "moved": 1, "rate_changes": 1, "state_changes": 0,
                              "switches_added": 0, "switches_removed": 0, "cas_added": 0, "cas_removed": 1,
                              "renamed": 0}
    down = diff["links_down"][0]
    assert (down["a"]["name"], down["a"]["port"], down["b"]["node"]) == (LEAF, 1, "ib:0xe09d7303007a4bd8")
    move = diff["moved"][0]
    assert move["end"]["node"] == "ib:0xe09d730300859298" and (move["from"]["port"], move["to"]["port"]) == (2, 18)
    rate = diff["rate_changes"][0]
    assert (rate["old_width"], rate["width"], rate["old_gbs"], rate["gbs"]) == ("4X", "2X", 50.0, 25.0)
    back = compare_fabrics(after, before)  # and the other way round
    assert f"a08-p1-dgx-04-c02 mlx5_5 moved from {LEAF} port 18 to {LEAF} port 2" in back["summary"]
    assert (f"{LEAF} port 1 to a08-p1-dgx-04-c01 mlx5_5 came up (a08-p1-dgx-04-c01 mlx5_5 is new in the discovery)"
            in back["summary"])


def teaker_port_down(text: str) -> str:
    """DERIVED IN THIS TEST from the real QDR iblinkinfo: teaker-9's second port (switch port 14) is
    down, printed as iblinkinfo prints a port with no link (both ends)."""
    text = _replace(text, "      0xf45214030091ba52      4    2[  ] ==( 4X          10.0 Gbps Active/  LinkUp)==>"
                          "       2   14[  ] \"Infiniscale-IV Mellanox Technologies\" ( )",
                    "      0xf45214030091ba52      4    2[  ] ==(                Down/ Polling)==>             "
                    "[  ] \"\" ( )")
    return _replace(text, "           2   14[  ] ==( 4X          10.0 Gbps Active/  LinkUp)==>       4    2[  ] "
                          "\"teaker-9 HCA-1\" ( )",
                    "           2   14[  ] ==(                Down/ Polling)==>             [  ] \"\" ( )")


def test_an_iblinkinfo_port_going_down_is_one_link_down():
    text = TEAKER.read_text()
    diff = compare_fabrics(build_fabric(iblinkinfo.parse(text)), build_fabric(iblinkinfo.parse(teaker_port_down(text))))
    assert diff["summary"] == ["Infiniscale-IV Mellanox Technologies port 14 to teaker-9 HCA-1 port 2 went down"]
    assert diff["cas_removed"] == []  # teaker-9 keeps its first port


# --- hand-built fabrics (synthetic) ---------------------------------------------------------------


def sw(guid: str, name: str) -> dict:
    return {"guid": guid, "name": name}


def ca(guid: str, name: str, port_guid: str | None = None, node_guid: str | None = None) -> dict:
    ports = [{"port": 1, "port_guid": port_guid}] if port_guid else []
    return {"guid": guid, "name": name, "host": name.split()[0], "kind": "hca", "node_guid": node_guid, "ports": ports}


def link(a: str, pa: int, b: str, pb: int, width: str = "4X", speed: str = "HDR", state: str | None = None) -> dict:
    return {"a": {"guid": a, "port": pa}, "b": {"guid": b, "port": pb}, "width": width, "speed": speed, "state": state}


def fabric(links: list[dict], switches=None, cas=None) -> dict:
    """SYNTHETIC: leaf1 (0x1) and leaf2 (0x2) under spine1 (0x3); adapters n1..n4 (0xa..0xd)."""
    switches = switches if switches is not None else [sw("0x1", "leaf1"), sw("0x2", "leaf2"), sw("0x3", "spine1")]
    cas = cas if cas is not None else [ca(f"0x{c}", f"n{i} mlx5_0") for i, c in enumerate("abcd", 1)]
    return {"switches": switches, "cas": cas, "links": links, "warnings": []}


BASE = [link("0x1", 1, "0xa", 1), link("0x1", 2, "0xb", 1), link("0x2", 1, "0xc", 1), link("0x2", 2, "0xd", 1),
        link("0x1", 10, "0x3", 1), link("0x1", 11, "0x3", 2), link("0x2", 10, "0x3", 3)]


def test_two_adapters_swapping_leaf_ports_are_two_moves_not_four():
    swapped = [link("0x1", 2, "0xa", 1), link("0x1", 1, "0xb", 1)] + BASE[2:]
    diff = compare_fabrics(build_fabric(fabric(BASE)), build_fabric(fabric(swapped)))
    assert diff["summary"] == ["n1 mlx5_0 moved from leaf1 port 1 to leaf1 port 2",
                               "n2 mlx5_0 moved from leaf1 port 2 to leaf1 port 1"]
    assert diff["links_down"] == diff["links_up"] == []


def test_an_adapter_moved_to_another_leaf_and_an_uplink_recabled():
    """
    before: n1 on leaf1:1; leaf1:11 - spine1:2       after: n1 on leaf2:5; leaf1:11 - spine1:7
    """
    after = [link("0x2", 5, "0xa", 1)] + BASE[1:5] + [link("0x1", 11, "0x3", 7), BASE[6]]
    diff = compare_fabrics(build_fabric(fabric(BASE)), build_fabric(fabric(after)))
    assert diff["summary"] == ["n1 mlx5_0 moved from leaf1 port 1 to leaf2 port 5",
                               "leaf1 port 11 moved from spine1 port 2 to spine1 port 7"]


def test_a_switch_gone_is_one_sentence_with_its_link_count():
    switches = [sw("0x1", "leaf1"), sw("0x2", "leaf2")]
    diff = compare_fabrics(build_fabric(fabric(BASE)), build_fabric(fabric(BASE[:4], switches=switches)))
    assert diff["summary"] == ["switch spine1 (spine) is gone from the discovery: its 3 links went down"]
    assert diff["counts"]["links_down"] == 3 and [s["name"] for s in diff["switches_removed"]] == ["spine1"]
    back = compare_fabrics(build_fabric(fabric(BASE[:4], switches=switches)), build_fabric(fabric(BASE)))
    assert back["summary"] == ["new switch spine1 (spine) with 3 links"]


def test_states_and_renames_are_reported_and_names_never_match_nodes():
    before = fabric([link("0x1", 1, "0xa", 1, state="Active")] + BASE[1:])
    after = fabric([link("0x1", 1, "0xa", 1, state="Initializing")] + BASE[1:],
                   switches=[sw("0x1", "leaf1-renamed"), sw("0x2", "leaf2"), sw("0x3", "spine1")])
    diff = compare_fabrics(build_fabric(before), build_fabric(after))
    assert diff["summary"] == ["leaf1-renamed port 1 to n1 mlx5_0: Active -> Initializing",
                               "leaf1 is now named leaf1-renamed"]


def test_an_iblinkinfo_version_matches_an_ibnetdiscover_one_by_port_guid():
    """ibnetdiscover names a CA by its node GUID, iblinkinfo by its port GUID: the same adapter."""
    by_node = fabric([link("0x1", 1, "0xa0", 1)], switches=[sw("0x1", "leaf1")],
                     cas=[ca("0xa0", "n1 mlx5_0", port_guid="0xa1", node_guid="0xa0")])
    by_port = fabric([link("0x1", 1, "0xa1", 1, width="1X")], switches=[sw("0x1", "leaf1")],
                     cas=[ca("0xa1", "n1 mlx5_0", port_guid="0xa1")])
    diff = compare_fabrics(build_fabric(by_node), build_fabric(by_port))
    assert diff["summary"] == ["leaf1 port 1 to n1 mlx5_0: 4X HDR (25 GB/s) -> 1X HDR (6.25 GB/s)"]
    assert diff["cas_added"] == diff["cas_removed"] == []


def test_describe_end_names_an_adapters_port_only_past_the_first():
    assert describe_end({"name": "n1 mlx5_0", "type": "ca", "port": 1}) == "n1 mlx5_0"
    assert describe_end({"name": "n1 mlx4_0", "type": "ca", "port": 2}) == "n1 mlx4_0 port 2"
    assert describe_end({"name": "leaf1", "type": "switch", "port": 1}) == "leaf1 port 1"
