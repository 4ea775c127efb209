"""Rules fed by the agent's host_info section: G02, P05, H05, and H03/H04/H07/F07 through its
nccl_env mapping (run on real bundles with synthetic host_info sections)."""

from __future__ import annotations

from pathlib import Path

from apps.domain.analysis import analyze_host
from apps.domain.bundle import read_bundle

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
A100 = ROOT / "bundles" / "paths_deepep_8xa100_8nic_roce"  # 8 GPUs, 8 Active RoCE ports, NIC per switch
P40 = ROOT / "bundles" / "paddle_8xp40"


def run(bundle: Path, info: str) -> dict:
    host, sections = read_bundle(bundle)
    return analyze_host({**sections, "host_info": info}, host).doc


def rules(doc: dict) -> dict[str, dict]:
    return {f["rule"]: f for f in doc["findings"]}


BROKEN = (ROOT / "host_info" / "synthetic_gdr_missing_iommu_env.txt").read_text()
READY = (ROOT / "host_info" / "synthetic_hgx_h100_ready.txt").read_text()


def test_broken_host_fires_every_host_rule() -> None:
    got = rules(run(A100, BROKEN))
    assert {"G02", "P05", "H03", "H04", "H05", "H07", "F07"} <= set(got)
    assert "peermem none" in got["G02"]["message"] and "GPU5" in got["G02"]["devices"]
    assert "amd_iommu=on without iommu=pt" in got["P05"]["message"]
    assert "NCCL_P2P_DISABLE=1" in got["H03"]["message"]
    assert "eth1" in got["H05"]["message"] and got["H05"]["severity"] == "HIGH"
    assert "NCCL_ALGO=Ring" in got["H07"]["message"]
    assert "single HCA" in got["F07"]["message"]


def test_ready_host_has_none_of_them() -> None:
    got = rules(run(A100, READY))
    assert not {"G02", "P05", "H03", "H04", "H05", "H07"} & set(got)


def test_gdr_module_missing_turns_gdr_off_with_the_reason() -> None:
    doc = run(A100, "peermem\tnone\ndmabuf\tno\n")
    assert doc["graph"]["gdr_module"] is False
    for e in doc["gpu_nic"]:
        assert e["gdr"] is False and "nvidia_peermem" in e["reason"]
        assert any(h["kind"] == "host_memory_copy" for h in e["hops"])
    assert "G01" not in rules(doc)  # the NICs are close; the module is what is missing


def test_g02_needs_a_close_nic() -> None:
    # the P40 box has no NIC on any GPU's switch: GDR would be off anyway (G01), no G02
    assert "G02" not in rules(run(P40, "peermem\tnone\ndmabuf\tno\n"))


def test_p05_quiet_in_a_vm_or_with_identity_domains() -> None:
    vm = "virtualized\tyes\niommu_group_type\t0000:41:00.0 DMA\n"
    ident = "virtualized\tno\niommu_group_type\t0000:41:00.0 identity\n"
    assert "P05" not in rules(run(A100, vm)) and "P05" not in rules(run(A100, ident))


def test_f07_prefix_match_from_host_info_env() -> None:
    # mlx5_1 also matches mlx5_10..: the A100 box has mlx5_0..7 only, so build a 12-port name list
    info = "nccl_env\tNCCL_IB_HCA=mlx5_\n"
    got = rules(run(A100, info))
    assert "F07" in got and "prefix" in got["F07"]["message"]


def test_h05_hint_when_ifname_is_not_the_default_route() -> None:
    info = "nccl_env\tNCCL_SOCKET_IFNAME=ib\ndefault_route_netdev\teth0\nnetdev\teth0 up\nnetdev\tib0 up\n"
    f = rules(run(A100, info))["H05"]
    assert f["severity"] == "LOW" and "ib0" in f["message"] and "eth0" in f["fix"]
    ok = "nccl_env\tNCCL_SOCKET_IFNAME==eth0\ndefault_route_netdev\teth0\nnetdev\teth0 up\n"
    assert "H05" not in rules(run(A100, ok))


def test_h05_stays_quiet_when_only_rdma_interfaces_are_listed() -> None:
    """Without the agent's --include-nccl-env the listing covers RDMA interfaces only
    (netdev_scope rdma): NCCL_SOCKET_IFNAME=eth0 may well exist, so no HIGH 'matches none'."""
    from apps.domain.findings import evaluate

    host = {"nccl_env": {"NCCL_SOCKET_IFNAME": "eth0"}, "netdevs": {"ib0": "up"}, "netdev_scope": "rdma"}
    doc = {"gpus": [], "nics": [], "gpu_pairs": [], "gpu_nic": [], "graph": {"nodes": [], "edges": []}}
    assert not [f for f in evaluate(doc, {"host_info": host}) if f["rule"] == "H05"]
    host["netdev_scope"] = "all"
    assert [f["severity"] for f in evaluate(doc, {"host_info": host}) if f["rule"] == "H05"] == ["HIGH"]
