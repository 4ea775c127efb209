"""Only RDMA devices are NCCL NICs: network functions that no RDMA source names are endpoints of
kind "other" ("Ethernet (no RDMA)"), drawn but never chosen; when every HCA port is down the
document says NCCL falls back to sockets instead of choosing something (domain.md F01/H04)."""

from __future__ import annotations

from pathlib import Path

from apps.domain.analysis import analyze_host
from apps.domain.bundle import read_bundle

BUNDLES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"


def _doc(name: str, drop: tuple[str, ...] = ()) -> dict:
    host, sections = read_bundle(BUNDLES / name)
    return analyze_host({k: v for k, v in sections.items() if k not in drop}, host).doc


def _nodes(doc: dict) -> dict[str, dict]:
    return {n["id"]: n for n in doc["graph"]["nodes"]}


def test_x710_ethernet_is_not_a_nic_and_all_down_hcas_give_no_choice():
    doc = _doc("stelline_esc8000a")
    nodes = _nodes(doc)
    x710 = [n for n in nodes.values() if "X710" in str(n["attrs"].get("device_name"))]
    assert len(x710) == 2
    assert all(n["kind"] == "other" and n["label"] == "Ethernet (no RDMA)" for n in x710)
    assert sorted(n["name"] for n in doc["nics"]) == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert doc["summary"]["nic_count"] == 4
    # every HCA port is Down: no GPU gets a NIC, the document says why
    assert doc["gpu_nic"] == []
    assert doc["network"]["state"] == "all_down"
    assert "sockets" in doc["network"]["message"]
    rules = {(f["rule"], f["severity"]) for f in doc["findings"]}
    assert ("H04", "CRIT") in rules
    assert all(sev == "CRIT" for rule, sev in rules if rule == "F01")
    assert doc["estimate"]["b_node_gbs"] is None


def test_ports_up_pick_the_hca_never_the_ethernet_function():
    # same host without the port states: the HCAs are the only candidates
    doc = _doc("stelline_esc8000a", drop=("ibv_devinfo",))
    assert {e["nic"] for e in doc["gpu_nic"]} <= {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}
    assert len(doc["gpu_nic"]) == 4
    assert doc["network"]["state"] == "unknown"


def test_lspci_only_report_keeps_connectx_drops_management_ethernet():
    doc = _doc("dell_xe9680_lspci")
    names = {n["name"] for n in doc["nics"]}
    nodes = _nodes(doc)
    assert "pci:0000:01:00.0" not in names  # Broadcom BCM5720 (management 1 GbE)
    assert nodes["pci:0000:01:00.0"]["kind"] == "other"
    assert nodes["pci:0000:01:00.0"]["label"] == "Ethernet (no RDMA)"
    assert "pci:0000:1a:00.0" in names  # ConnectX-7: RDMA hardware, state unknown
    assert nodes["pci:0000:1a:00.0"]["attrs"]["rdma"] == "assumed"
    # the x1 management port is no longer judged as an RDMA NIC
    p06 = [f for f in doc["findings"] if f["rule"] == "P06" and "0000:01:00.0" in " ".join(f["devices"])]
    assert p06 and all(f["severity"] == "LOW" for f in p06)


def test_nccl_xml_network_functions_are_nccl_nics():
    doc = _doc("aws_p4de_xml")  # EFA devices listed by NCCL's topology file
    assert doc["summary"]["nic_count"] == 4
    assert len(doc["gpu_nic"]) == 8


def test_cross_host_path_from_a_host_whose_ports_are_all_down_says_sockets():
    from apps.domain.analysis import path_between

    a = _doc("stelline_esc8000a")
    b = _doc("paths_della_8xh100_6nic")
    p = path_between(a, "GPU0", b, "GPU5")
    assert p["hops"] == [] and "sockets" in p["explanation"] and "No HCA port is Active" in p["explanation"]
