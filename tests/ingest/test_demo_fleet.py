"""The demo fleet generator (apps/ingest/demo/fleet.py, fleet_fabric.py), without a database.

Facts asserted are read off the real captures the fleet follows (/work/shared/realdata, reached as
../shared/realdata from the repository), not off the generator's output.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from apps.domain import fabric as fabric_graphs
from apps.domain import fabric_health
from apps.domain.analysis import analyze_host
from apps.domain.compare import compare_docs
from apps.domain.parsers import ALL_KINDS, detect_kind, nvidia_smi_topo
from apps.ingest.demo import fleet, fleet_fabric

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "apps" / "ingest" / "demo"
REALDATA = ROOT.parent / "shared" / "realdata"

HOSTS = fleet.fleet_hosts()
BY_NAME = {h.hostname: h for h in HOSTS}


def _latest(hostname: str) -> dict[str, str]:
    return BY_NAME[hostname].snapshots[-1].sections


def _doc(hostname: str, snapshot: int = -1) -> dict:
    return analyze_host(BY_NAME[hostname].snapshots[snapshot].sections, hostname).doc


def _real(rel: str) -> str:
    return (REALDATA / rel).read_bytes().decode("utf-8")


def test_the_fleet_is_the_same_on_every_run():
    again = fleet.fleet_hosts()
    assert [(h.hostname, h.description, h.snapshots) for h in again] == \
           [(h.hostname, h.description, h.snapshots) for h in HOSTS]


def test_at_least_24_hosts_on_three_platforms_each_labelled_synthetic_with_what_it_follows():
    counts = {p: sum(1 for h in HOSTS if h.platform == p) for p in ("h100", "a100", "l40s")}
    assert counts == {"h100": 24, "a100": 20, "l40s": 12} and len(HOSTS) >= 24
    follows = {"h100": "sglang issue #30401", "a100": "DGX A100 ash6-hpccdgx-node0009", "l40s": "ESC8000A-E12"}
    for h in HOSTS:
        assert h.description.startswith("SYNTHETIC"), h.hostname
        assert follows[h.platform] in h.description, h.hostname
        kinds = set(h.snapshots[-1].sections)
        assert {"nvidia_smi_topo", "nvidia_smi_gpus", "ibstat", "host_info"} <= kinds, h.hostname
        assert ("nvidia_smi_nvlink" in kinds) == (h.platform != "l40s"), h.hostname
        assert h.snapshots[-1].sections["host_info"].startswith("# SYNTHETIC"), h.hostname


def test_clean_h100_hosts_send_the_real_topo_capture_byte_for_byte():
    real = _real("topo/sglang_30401_8xh100_hbm3_8nic.txt")
    assert _latest("h100-n01")["nvidia_smi_topo"] == real
    assert _latest(fleet.NIC_MOVE_HOST)["nvidia_smi_topo"] == real  # after the move: the capture's layout
    assert _latest("h100-n09")["nvidia_smi_topo"] != real  # the NVLink odd one out: NV16 rows
    assert _latest("l40s-n01")["nvidia_smi_topo"] == _real("topo/stelline_asus_esc8000a_e12_4x_rtx6000ada.txt")


def _real_bus_ids() -> dict[str, list[str]]:
    """GPU bus numbers as the real captures print them, in order."""
    xe9680 = re.findall(r"^([0-9a-f]{2}):00\.0 3D controller: NVIDIA",
                        _real("lspci_vvv/gpud_dell_xe9680_hgx_h100_8gpu_full_lspci_vvv.txt"), re.M)
    dgx = re.findall(r"\[0x([0-9a-f]{2})\] NVIDIA A100",
                     _real("nccl_tests/dgx_a100_40gb_1node_allreduce_1m_1g_test_fixture_capture.txt"))
    esc = re.findall(r"-\[([0-9a-f]{2})\]--\+-00\.0  NVIDIA Corporation AD102GL",
                     _real("lspci_tree/stelline_asus_esc8000a_e12.txt"))
    return {"h100": xe9680, "a100": dgx, "l40s": esc}


def test_every_host_s_sections_agree_with_each_other_and_with_the_real_captures():
    real = _real_bus_ids()
    assert real["h100"] == ["19", "3b", "4c", "5d", "9b", "bb", "cb", "db"]
    assert real["a100"] == ["07", "0f", "47", "4e", "87", "90", "b7", "bd"]
    assert real["l40s"] == ["01", "41", "c1", "e1"]
    for h in HOSTS:
        for snap in h.snapshots:
            s = snap.sections
            topo = ALL_KINDS["nvidia_smi_topo"].parse(s["nvidia_smi_topo"])
            gpus = ALL_KINDS["nvidia_smi_gpus"].parse(s["nvidia_smi_gpus"]).gpus
            cas = ALL_KINDS["ibstat"].parse(s["ibstat"]).cas
            assert [g.index for g in gpus] == [g.index for g in topo.gpus], h.hostname
            assert [g.bdf for g in gpus] == [f"0000:{b}:00.0" for b in real[h.platform]], h.hostname
            assert sorted(c.name for c in cas) == sorted(n.device for n in topo.nics), h.hostname
            if "nvidia_smi_nvlink" in s:
                nv = ALL_KINDS["nvidia_smi_nvlink"].parse(s["nvidia_smi_nvlink"]).gpus
                assert [(g.index, g.uuid) for g in nv] == [(g.index, g.uuid) for g in gpus], h.hostname
            info = ALL_KINDS["host_info"].parse(s["host_info"])
            numa = {g.numa_affinity for g in topo.gpus}
            assert info.numa_nodes == {"h100": 2, "a100": 8, "l40s": 2}[h.platform] and info.gdr_module is True
            assert numa == {"h100": {"0", "1"}, "a100": {"1", "3", "5", "7"}, "l40s": {"0", "1"}}[h.platform]


def test_a100_hosts_keep_one_nic_per_pcie_switch_of_the_real_dgx_a100():
    real = ALL_KINDS["nvidia_smi_topo"].parse(_real("topo/dgx_a100_ash6_mlx5_0-11_headers_nps4.txt"))
    topo = ALL_KINDS["nvidia_smi_topo"].parse(_latest("a100-n01")["nvidia_smi_topo"])
    assert [n.device for n in topo.nics] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    for new, old in zip(["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"], ["mlx5_0", "mlx5_2", "mlx5_6", "mlx5_8"]):
        assert {g: topo.matrix[g][new] for g in topo.matrix if g.startswith("GPU")} == \
               {g: real.matrix[g][old] for g in real.matrix if g.startswith("GPU")}
    assert topo.matrix["GPU2"]["mlx5_1"] == real.matrix["GPU2"]["mlx5_2"] == "PXB"


@pytest.mark.parametrize("hostname, rule, device", [
    ("h100-n03", "P06", "GPU5"),      # PCIe link at x8
    ("h100-n06", "F01", "mlx5_4"),    # compute port Down
    ("h100-n09", "N01", "GPU2"),      # NVLinks inactive
    ("h100-n15", "F02", "mlx5_2"),    # 200 Gb/s on a 400G fabric
    ("a100-n05", "G04", "GPU2"),      # its NIC on the other socket: PXN relays GPU2 (and GPU3)
])
def test_each_odd_one_out_shows_its_finding_and_the_platform_s_clean_host_does_not(hostname, rule, device):
    found = [f for f in _doc(hostname)["findings"] if f["rule"] == rule]
    assert found and any(device in f["devices"] for f in found), (hostname, rule)
    clean = BY_NAME[hostname].platform + "-n01"
    assert not [f for f in _doc(clean)["findings"] if f["rule"] == rule]


def test_the_odd_ones_out_say_what_is_odd_in_their_sections():
    gpus = ALL_KINDS["nvidia_smi_gpus"].parse(_latest("h100-n03")["nvidia_smi_gpus"]).gpus
    assert [(g.index, g.link_width_current, g.link_width_max) for g in gpus if g.link_width_current != 16] == \
           [(5, 8, 16)]
    ports = {c.name: c.ports[0] for c in ALL_KINDS["ibstat"].parse(_latest("h100-n06")["ibstat"]).cas}
    assert (ports["mlx5_4"].state, ports["mlx5_4"].phys_state) == ("Down", "Polling")
    assert [n for n, p in ports.items() if p.state != "Active"] == ["mlx5_4"]
    nv = ALL_KINDS["nvidia_smi_nvlink"].parse(_latest("h100-n09")["nvidia_smi_nvlink"]).gpus
    assert [(g.index, [k.link for k in g.links if not k.active]) for g in nv if not all(k.active for k in g.links)] \
        == [(2, [4, 5])]
    topo = ALL_KINDS["nvidia_smi_topo"].parse(_latest("a100-n05")["nvidia_smi_topo"])
    assert [topo.matrix[g]["mlx5_1"] for g in ("GPU2", "GPU3", "GPU4", "GPU5")] == ["SYS", "SYS", "NODE", "NODE"]
    pxn = {r["gpu"]: r["pxn_via"] for r in _doc("a100-n05")["gpu_nic"] if r["pxn_via"]}
    assert pxn == {"GPU2": "GPU0", "GPU3": "GPU4"}


def test_the_nic_move_host_has_mlx5_3_off_gpu3_s_switch_a_week_before_and_on_it_after():
    host = BY_NAME[fleet.NIC_MOVE_HOST]
    assert [s.collected_at for s in host.snapshots] == ["2025-02-24T08:12:00Z", "2025-03-03T08:12:00Z"]
    real = ALL_KINDS["nvidia_smi_topo"].parse(_real("topo/sglang_30401_8xh100_hbm3_8nic.txt"))
    before = ALL_KINDS["nvidia_smi_topo"].parse(host.snapshots[0].sections["nvidia_smi_topo"])
    assert real.matrix["GPU3"]["NIC3"] == "PIX" and real.matrix["GPU4"]["NIC3"] == "SYS"
    assert before.matrix["GPU3"]["NIC3"] == "SYS" and before.matrix["GPU4"]["NIC3"] == "NODE"
    # nothing else of the matrix moved
    assert {(r, c) for r in real.matrix for c in real.matrix[r] if real.matrix[r][c] != before.matrix[r][c]} == \
           {(r, c) for r in real.matrix for c in real.matrix[r] if "NIC3" in (r, c) and r != c and
            real.matrix[r][c] != before.matrix[r][c]}
    a, b = _doc(fleet.NIC_MOVE_HOST, 0), _doc(fleet.NIC_MOVE_HOST, 1)
    diff = compare_docs(a, b)
    assert [(r["gpu"], r["before"]["nic"], r["before"]["pxn_via"], r["after"]["nic"], r["after"]["path_class"],
             r["after"]["gdr"]) for r in diff["gpu_nic"]] == [("GPU3", "mlx5_0", "GPU0", "mlx5_3", "PIX", True)]
    assert any("GPU3 -> mlx5_3" in line for line in diff["summary"])
    busbw = [{p["nodes"]: p["busbw_gbs"] for p in d["estimate"]["points"]} for d in (a, b)]
    assert busbw[0][1] == busbw[1][1]  # inside one node nothing changed
    assert all(busbw[0][n] < busbw[1][n] for n in (2, 8, 64))  # across nodes the moved NIC counts again


def test_the_fabric_joins_every_linked_h100_port_by_guid_and_shows_the_one_slow_cable():
    text = fleet_fabric.fabric_text(HOSTS)
    assert text.startswith("#\n# SYNTHETIC") and detect_kind(text, family="fabric") == "ibnetdiscover"
    G = fabric_graphs.build_fabric(ALL_KINDS["ibnetdiscover"].parse(text))
    summary = fabric_graphs.summary(G)
    assert summary["tiers"] == {"leaf": 8, "spine": 2} and summary["host_adapters"] == 24 * 8 - 1
    ports = {h.hostname: ALL_KINDS["ibstat"].parse(h.snapshots[-1].sections["ibstat"])
             for h in HOSTS if h.platform == "h100"}
    attached = fabric_graphs.attach_hosts(G, fabric_graphs.host_ports_from_ib(ports))
    assert len(attached["hosts"]) == 24
    assert {r["match"] for rows in attached["hosts"].values() for r in rows} == {"port_guid"}
    assert [(u["host"], u["nic"]) for u in attached["unmatched"]] == [("h100-n06", "mlx5_4")]  # its port is Down
    # every host's NIC k is on the leaf of rail k
    for host, rows in attached["hosts"].items():
        assert all(r["leaf_name"] == f"MF0;DEMO-IBLEAF-R{r['nic'][-1]}:MQM9700/U1" for r in rows), host
    degraded = fabric_health.degraded_links(G)
    assert [(d["b_name"], d["width"], d["speed"]) for d in degraded] == [("h100-n15 mlx5_2", "4X", "HDR")]


def test_every_copied_capture_is_byte_for_byte_its_realdata_file():
    rows = [line.split("\t") for line in (DEMO / "SOURCES.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    listed = {r[0] for r in rows}
    assert {str(p.relative_to(DEMO)) for p in (DEMO / "captures").rglob("*") if p.is_file()} == listed
    for demo_file, real_path, _source, sha in rows:
        data = (DEMO / demo_file).read_bytes()
        assert hashlib.sha256(data).hexdigest() == sha == hashlib.sha256((REALDATA / real_path).read_bytes()).hexdigest()


def test_a_derived_topo_reads_back_as_the_matrix_it_was_written_from():
    topo = ALL_KINDS["nvidia_smi_topo"].parse(_latest("a100-n05")["nvidia_smi_topo"])
    again = nvidia_smi_topo.parse(nvidia_smi_topo.render(topo))
    assert again.matrix == topo.matrix and not topo.warnings
