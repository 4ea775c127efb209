"""Slurm topology.conf export: the hostlist compressor (checked against Slurm's bracket expansion),
the real SuperPOD capture in both forms, and small hand-built fabrics.

    spine01 ---- leaf01 --- node01, node02
           \\--- leaf02 --- node03, node04
    spine02 ---- leaf01
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.domain.exports import ExportError, hostlist, slurm_topology
from apps.domain.exports._leaves import attachments
from apps.domain.fabric import build_fabric
from apps.domain.parsers import ibnetdiscover

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "ibnetdiscover"
SUPERPOD = FIX / "nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.txt"


def expand(text: str) -> list[str]:
    """Slurm's reading of a host list: ``pfx[lo-hi,n]`` items, each range printed at lo's width."""
    out = []
    for item in re.findall(r"[^,\[]+\[[^\]]*\]|[^,]+", text):
        m = re.fullmatch(r"(.*)\[(.*)\]", item)
        if not m:
            out.append(item)
            continue
        for part in m.group(2).split(","):
            lo, _, hi = part.partition("-")
            out += [f"{m.group(1)}{v:0{len(lo)}d}" for v in range(int(lo), int(hi or lo) + 1)]
    return out


def test_hostlist_ranges_keep_zero_padding_and_several_prefixes() -> None:
    assert hostlist(["host01", "host02", "host03", "host04", "host07"]) == "host[01-04,07]"
    assert hostlist(["gpu2", "cpu1", "gpu1", "cpu2", "gpu10"]) == "cpu[1-2],gpu[1-2,10]"
    assert hostlist(["n9", "n10", "n11"]) == "n[9-11]"
    assert hostlist(["n099", "n100", "n101"]) == "n[099-101]"
    assert hostlist(["n9", "n09"]) == "n[9,09]"  # two different hosts, never one range
    assert hostlist(["login", "node7", "node7"]) == "login,node7"
    assert hostlist(["a08-p1-dgx-04-c01", "a08-p1-dgx-04-c02"]) == "a08-p1-dgx-04-c[01-02]"


@pytest.mark.parametrize("bad", ["a,b", "n[1-2]", "two words", ""])
def test_hostlist_refuses_names_it_cannot_write(bad: str) -> None:
    with pytest.raises(ValueError):
        hostlist([bad])


names = st.builds(lambda p, n, w: f"{p}{n:0{w}d}", st.sampled_from(["node", "gpu", "a08-p1-c", "x"]),
                  st.integers(0, 120), st.integers(1, 4)) | st.sampled_from(["login", "mgmt-a", "n1x"])


@given(st.sets(names, min_size=1, max_size=40))
def test_hostlist_expands_back_to_exactly_its_hosts(hosts: set[str]) -> None:
    out = expand(hostlist(hosts))
    assert sorted(out) == sorted(hosts) and len(out) == len(set(out))


@pytest.fixture(scope="module")
def pod():
    return build_fabric(ibnetdiscover.parse(SUPERPOD.read_text()))


def _lines(text: str, key: str) -> list[tuple[str, list[str]]]:
    rows = []
    for line in text.splitlines():
        m = re.fullmatch(rf"{key}=(\S+) (Nodes|Switches)=(\S+)", line)
        if m:
            rows.append((m.group(1), expand(m.group(3)) if m.group(2) == "Nodes" else ["S:" + m.group(3)]))
    return rows


def test_superpod_tree_has_one_line_per_leaf_with_hosts(pod) -> None:
    text = slurm_topology(pod, form="tree")
    att = attachments(pod)
    leaves_with_hosts = {leaf for leaves in att.leaves.values() for leaf in leaves}
    leaf_lines = [(n, hosts) for n, hosts in _lines(text, "SwitchName") if not hosts[0].startswith("S:")]
    assert len(leaf_lines) == len(leaves_with_hosts) == 31
    for _name, hosts in leaf_lines:
        assert len(hosts) == len(set(hosts))  # every host once per leaf
    seen: dict[str, int] = {}
    for _name, hosts in leaf_lines:
        for h in hosts:
            seen[h] = seen.get(h, 0) + 1
    assert seen == {h: len(leaves) for h, leaves in att.leaves.items()}  # under each leaf it is cabled to
    assert "SwitchName=A09-P1-IBLEAF-04-04 Nodes=a08-p1-dgx-04-c[01-17]" in text
    spines = [line for line in text.splitlines() if " Switches=" in line]
    assert len(spines) == 9 and all(line.startswith("SwitchName=") and "IBSPINE" in line for line in spines)
    assert "several leaf switches (one per rail)" in text


def test_superpod_blocks_hold_every_host_exactly_once(pod) -> None:
    text = slurm_topology(pod, form="block")
    blocks = _lines(text, "BlockName")
    hosts = [h for _name, members in blocks for h in members]
    assert len(hosts) == len(set(hosts)) == len(attachments(pod).leaves) == 121
    assert len(blocks) == 8  # one per scalable unit: its hosts share the same four rail leaves
    assert "BlockName=block04 Nodes=a07-p1-dgx-03-c[01-18]" in text
    assert text.rstrip().endswith("BlockSizes=10,20,40,80")


def test_adapters_without_a_host_name_are_listed_by_guid_not_invented(pod) -> None:
    for form in ("tree", "block"):
        text = slurm_topology(pod, form=form)
        comments = [line for line in text.splitlines() if line.startswith("#")]
        listed = " ".join(line for line in text.splitlines() if not line.startswith("#"))
        # 69 default descriptions ("MT4129 ConnectX7 Mellanox Technologies") and 3 "localhost ..."
        assert any("72 host adapters have no host name" in line for line in comments)
        assert "0xe09d730300858468" in " ".join(comments) and "0xe09d730300858468" not in listed
        assert "MT4129" not in listed and "localhost" not in listed  # "localhost mlx5_0" names no host


def test_switch_names_are_made_safe_for_slurm(pod) -> None:
    text = slurm_topology(pod)
    names = re.findall(r"SwitchName=(\S+)", text)
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", n) for n in names)
    assert "MF0;" not in text and ":MQM9701" not in text


def _fabric(switches: list[tuple[str, str | None]], cas: list[tuple[str, str | None]], links: list[tuple]) -> object:
    """SYNTHETIC: switches (guid, name), host adapters (guid, node description), links (a, b)."""
    ports: dict[str, int] = {}

    def end(guid: str) -> dict:
        ports[guid] = ports.get(guid, 0) + 1
        return {"guid": guid, "port": ports[guid]}

    return build_fabric({
        "switches": [{"guid": g, "name": n} for g, n in switches],
        "cas": [{"guid": g, "name": n, "host": n.split()[0] if n else None, "kind": "hca"} for g, n in cas],
        "links": [{"a": end(a), "b": end(b), "width": "4X", "speed": "HDR"} for a, b in links]})


def test_three_tier_tree_lists_spines_then_cores() -> None:
    """
    core1 -- spine1 -- leaf1 -- n01, n02
                   \\-- leaf2 -- n03
    """
    G = _fabric([("0x1", "core1"), ("0x2", "spine1"), ("0x3", "leaf1"), ("0x4", "leaf2")],
                [("0xa", "n01 mlx5_0"), ("0xb", "n02 mlx5_0"), ("0xc", "n03 mlx5_0")],
                [("0x1", "0x2"), ("0x2", "0x3"), ("0x2", "0x4"), ("0x3", "0xa"), ("0x3", "0xb"), ("0x4", "0xc")])
    body = [line for line in slurm_topology(G).splitlines() if not line.startswith("#")]
    assert body == ["SwitchName=leaf1 Nodes=n[01-02]", "SwitchName=leaf2 Nodes=n03",
                    "SwitchName=spine1 Switches=leaf[1-2]", "SwitchName=core1 Switches=spine1"]
    blocks = [line for line in slurm_topology(G, form="block").splitlines() if not line.startswith("#")]
    assert blocks == ["BlockName=leaf1 Nodes=n[01-02]", "BlockName=leaf2 Nodes=n03", "BlockSizes=1,2"]


def test_unnamed_and_duplicate_switch_names_become_unique_safe_names() -> None:
    G = _fabric([("0x0002c90200aa0001", "MT43132 Mellanox Technologies"),
                 ("0x0002c90200bb0002", "MT43132 Mellanox Technologies"), ("0x0002c90200cc0003", None)],
                [("0xa", "n1 HCA-1"), ("0xb", "n2 HCA-1"), ("0xc", "n3 HCA-1")],
                [("0x0002c90200aa0001", "0xa"), ("0x0002c90200bb0002", "0xb"), ("0x0002c90200cc0003", "0xc")])
    names = re.findall(r"SwitchName=(\S+)", slurm_topology(G))
    assert names == ["MT43132_Mellanox_Technologies_aa0001", "MT43132_Mellanox_Technologies_bb0002",
                     "sw_0002c90200cc0003"]


def test_hostile_host_names_are_commented_not_written() -> None:
    G = _fabric([("0x1", "leaf1")], [("0xa", "n01 mlx5_0"), ("0xb", "n[02],x=y mlx5_0")],
                [("0x1", "0xa"), ("0x1", "0xb")])
    text = slurm_topology(G)
    assert "SwitchName=leaf1 Nodes=n01" in text
    bad = [line for line in text.splitlines() if "n[02]" in line]
    assert bad and all(line.startswith("# left out: host") for line in bad)


def test_a_fabric_without_named_hosts_is_refused() -> None:
    G = build_fabric(ibnetdiscover.parse((FIX / "nvidia_topograph_dgx_gb200_isolated_ca_no_links.txt").read_text()))
    with pytest.raises(ExportError, match="nothing to write"):
        slurm_topology(G)
    with pytest.raises(ExportError, match="unknown topology.conf form"):
        slurm_topology(G, form="torus")
