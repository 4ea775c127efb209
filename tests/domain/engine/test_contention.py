"""Contention under "every GPU talks to its NIC" and "every GPU pair at once" on tiny graphs."""

from __future__ import annotations

from apps.domain import contention
from apps.domain.bandwidth import ib_port, inter_socket, pcie_link
from tests.domain.engine.test_paths import cube_fragment, eight_nic_board, two_socket_pcie_box

GEN3 = pcie_link(3, 16)
GEN4 = pcie_link(4, 16)


def rows(G, scenario):
    return {r["element"]: r for r in contention.contention(G) if r["scenario"] == scenario}


def test_far_nic_flows_share_the_switch_uplink_and_the_socket_link() -> None:
    """
        cpu0 ====== cpu1
         |           |
        sw0         sw1
       /   \\       /    \\
    GPU0  GPU1   GPU2   mlx5_0 (100 Gb/s)
    GPU0 and GPU1 send to mlx5_0 through host memory and the inter-socket link.
    """
    G = two_socket_pcie_box()
    got = rows(G, "gpu_to_nic")
    up = got["sw0"]
    assert up["kind"] == "switch_uplink" and up["flows"] == 2
    assert up["devices"] == ["GPU0", "GPU1", "mlx5_0"]
    share = ib_port(100).expected_gbs / 3  # three GPUs share the one NIC
    assert abs(up["demand_gbs"] - 2 * min(GEN3.expected_gbs, share)) < 1e-3
    assert up["capacity_gbs"] == GEN3.expected_gbs
    sock = got["cpu0-cpu1"]
    assert sock["kind"] == "inter_socket" and sock["flows"] == 2
    assert sock["capacity_gbs"] == inter_socket("intel").expected_gbs
    # sw1's uplink carries the two staged flows coming down to the NIC
    assert got["sw1"]["flows"] == 2


def test_all_pairs_counts_pcie_pairs_leaving_a_switch() -> None:
    G = two_socket_pcie_box()
    got = rows(G, "all_pairs")
    # GPU0-GPU2 and GPU1-GPU2 leave sw0 (GPU0-GPU1 stays inside the switch)
    assert got["sw0"]["flows"] == 2
    assert got["cpu0-cpu1"]["flows"] == 2
    per_flow = GEN3.expected_gbs / 2  # a GPU splits its link over its 2 peers
    assert abs(got["sw0"]["demand_gbs"] - 2 * per_flow) < 1e-3
    assert abs(got["sw0"]["ratio"] - got["sw0"]["demand_gbs"] / GEN3.expected_gbs) < 1e-3


def test_gdr_local_nics_leave_the_shared_uplink_idle() -> None:
    """Each GPU has a NIC on its own switch: nothing crosses swA/swB uplinks toward the NICs."""
    G = eight_nic_board()
    got = rows(G, "gpu_to_nic")
    assert "swA" not in got and "swB" not in got


def test_nvlink_pairs_do_not_load_pcie() -> None:
    G = cube_fragment()
    got = rows(G, "all_pairs")
    # only GPU3 pairs use PCIe, all inside sw0: no shared uplink is crossed
    assert got == {}
