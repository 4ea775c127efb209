"""Contention under "every GPU talks to its NIC" and "every GPU pair at once" on tiny graphs."""

from __future__ import annotations

from pathlib import Path

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
    assert up["devices"] == ["GPU0", "GPU1"]  # the devices below sw0; mlx5_0, the far end, is under sw1
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


# -- one row per shared element ----------------------------------------------------------------

_SYNTHETIC_PXB = (  # synthetic topo -m (written for this test): GPU pair and dual-port NIC under one PXB tree
    "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tPIX\tPXB\tPXB\t0-7\t0\n"
    "GPU1\tPIX\t X \tPXB\tPXB\t0-7\t0\n"
    "NIC0\tPXB\tPXB\t X \tPIX\n"
    "NIC1\tPXB\tPXB\tPIX\t X \n"
    "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"
)


# synthetic ibstatus (written for this test): both ports Active at 200 Gb/s, so the flows toward
# them have a known demand
_SYNTHETIC_IBSTATUS = "".join(
    f"Infiniband device 'mlx5_{i}' port 1 status:\n\tdefault gid:\t fe80:0000:0000:0000:0000:0000:0000:000{i}\n"
    "\tbase lid:\t 0x1\n\tsm lid:\t\t 0x1\n\tstate:\t\t 4: ACTIVE\n\tphys state:\t 5: LinkUp\n"
    "\trate:\t\t 200 Gb/sec (4X HDR)\n\tlink_layer:\t InfiniBand\n\n" for i in (0, 1))


def test_flows_toward_nics_of_unknown_rate_have_no_demand():
    """topo -m alone says nothing of the NICs' rates: no gpu_to_nic row is sized from a guess."""
    from apps.domain.analysis import analyze_host

    doc = analyze_host({"nvidia_smi_topo": _SYNTHETIC_PXB}, "synthetic").doc
    assert [c for c in doc["contention"] if c["scenario"] == "gpu_to_nic"] == []
    assert doc["gpu_nic"] and all(n["rate_gbps"] is None for n in doc["nics"])


def test_nested_inferred_switches_give_one_row_per_shared_element():
    from apps.domain.analysis import analyze_host

    doc = analyze_host({"nvidia_smi_topo": _SYNTHETIC_PXB, "ibstatus": _SYNTHETIC_IBSTATUS}, "synthetic").doc
    assert [n["rate_gbps"] for n in doc["nics"]] == [200, 200]
    rows = [c for c in doc["contention"] if c["scenario"] == "gpu_to_nic"]
    assert len(rows) == 1, rows  # GPU-side and NIC-side sub-switch uplinks carry the same two flows
    assert rows[0]["flows"] == 2 and rows[0]["also"]
    keys = [(c["scenario"], c["element"]) for c in doc["contention"]]
    assert len(keys) == len(set(keys))


def test_real_bundles_list_no_flow_set_twice():
    from apps.domain.analysis import analyze_host
    from apps.domain.bundle import read_bundle

    bundles = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"
    for name in ("paths_deepep_8xa100_8nic_roce", "paddle_8xp40", "synthetic_hgx_h100_gpu_x8", "stelline_esc8000a"):
        host, sections = read_bundle(bundles / name)
        doc = analyze_host(sections, host).doc
        seen = {}
        for c in doc["contention"]:
            if c["kind"] == "inter_socket":
                continue
            key = (c["scenario"], tuple(c["devices"]), c["flows"], c["demand_gbs"], c["capacity_gbs"])
            nodes = {n["id"]: n for n in doc["graph"]["nodes"]}
            # same flows on two links of one chain would be one element listed twice
            for other in seen.get(key, []):
                chain = set()
                cur = other
                while cur in nodes:
                    chain.add(cur)
                    cur = nodes[cur]["parent"]
                assert c["element"] not in chain, (name, c["element"], other)
            seen.setdefault(key, []).append(c["element"])
        # a single device's own link is not a shared element
        assert all(sum(1 for d in c["devices"] if d.startswith("GPU")) >= 2 or c["kind"] == "inter_socket"
                   for c in doc["contention"] if c["scenario"] == "all_pairs"), name
