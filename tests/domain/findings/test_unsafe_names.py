"""Rule X02 (device name unsafe in a shell) and the settings and fixes that leave such names out."""

from __future__ import annotations

from pathlib import Path

from apps.domain.analysis import analyze_host
from apps.domain.estimate import suggest_nccl_settings
from apps.domain.findings import evaluate, rule_ids
from apps.domain.findings.fabric import ib_hca_value
from tests.domain.findings.docs import host, nic

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
IBSTAT = FIXTURES / "ibstat" / "mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt"
TOPO = FIXTURES / "nvidia_smi_topo" / "mooncake_issue_8xnv18_12nic_cpuset_list.txt"
PAYLOAD = "mlx5_0;touch${IFS}PWNED;"


def hostile_report(*, legend: bool = True) -> dict[str, str]:
    """SYNTHETIC: the real mooncake ibstat (12 CAs) and topo -m with CA mlx5_0 renamed to a shell
    command; ``legend`` renames it in the topo -m NIC legend too, as a node with that name would."""
    ibstat = IBSTAT.read_text().replace("CA 'mlx5_0'", f"CA '{PAYLOAD}'")
    topo = TOPO.read_text()
    if legend:
        topo = topo.replace("NIC0: mlx5_0", f"NIC0: {PAYLOAD}")
    assert PAYLOAD in ibstat and (PAYLOAD in topo) == legend
    return {"nvidia_smi_topo": topo, "ibstat": ibstat}


def settings_of(doc: dict) -> dict[str, dict]:
    return {s["name"]: s for s in doc["nccl_settings"]}


def test_x02_names_the_hca_and_keeps_it_raw_out_of_ib_hca():
    doc = analyze_host(hostile_report(), "hostile").to_dict()
    [x02] = [f for f in doc["findings"] if f["rule"] == "X02"]
    assert x02["devices"] == [PAYLOAD] and x02["severity"] == "HIGH"
    assert f"NIC '{PAYLOAD}'" in x02["message"] and "out of the suggested NCCL settings" in x02["message"]
    assert "what produced the report" in x02["fix"]
    assert PAYLOAD in [n["name"] for n in doc["nics"]]  # kept as reported, not rewritten or dropped
    s = settings_of(doc)
    hca = s["NCCL_IB_HCA"]["value"]
    assert "touch" not in hca and ";" not in hca and "$" not in hca
    assert hca == "=mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11"  # the other Active IB ports
    assert "1 HCA whose name has characters unsafe in a shell (X02)" in s["NCCL_IB_HCA"]["reason"]
    assert all(PAYLOAD not in x["value"] and PAYLOAD not in x["reason"] for x in doc["nccl_settings"])
    for f in doc["findings"]:  # fixes are copied too (F04's NCCL_IB_HCA list)
        assert PAYLOAD not in f["fix"], f["rule"]


def test_x02_when_only_ibstat_carries_the_name():
    doc = analyze_host(hostile_report(legend=False), "hostile").to_dict()
    assert [f["devices"] for f in doc["findings"] if f["rule"] == "X02"] == [[PAYLOAD]]
    assert PAYLOAD in [n["name"] for n in doc["nics"]]
    assert all(PAYLOAD not in x["value"] for x in doc["nccl_settings"])


def test_no_x02_on_the_real_capture():
    doc = analyze_host({"nvidia_smi_topo": TOPO.read_text(), "ibstat": IBSTAT.read_text()}, "real").to_dict()
    assert not [f for f in doc["findings"] if f["rule"] == "X02"]


def test_no_ib_hca_setting_when_every_name_is_unsafe():
    """Two Active IB ports, both named with shell characters: no NCCL_IB_HCA (never a bare '=')."""
    doc = host(2, nics=[nic("mlx5_0`id`"), nic("mlx5_1 $(id)")])
    assert ib_hca_value(doc["nics"]) == ""
    assert "NCCL_IB_HCA" not in settings_of({"nccl_settings": suggest_nccl_settings(doc)})
    assert all(x["value"] not in ("", "=") for x in suggest_nccl_settings(doc))
    assert sorted(f["devices"][0] for f in evaluate(doc, {}, strict=True) if f["rule"] == "X02") == [
        "mlx5_0`id`", "mlx5_1 $(id)"]


def test_socket_ifname_leaves_unsafe_netdevs_out():
    """mlx5_0 has netdevs ib0 and 'ib1;reboot'; mlx5_1 has only '$(id)'."""
    doc = host(2, nics=[nic("mlx5_0"), nic("mlx5_1")])
    doc["nics"][0]["netdevs"] = ["ib0", "ib1;reboot"]
    doc["nics"][1]["netdevs"] = ["$(id)"]
    s = settings_of({"nccl_settings": suggest_nccl_settings(doc)})
    assert s["NCCL_IB_HCA"]["value"] == "=mlx5_0,mlx5_1"
    assert s["NCCL_SOCKET_IFNAME"]["value"] == "=ib0"
    assert "2 interfaces whose names have characters unsafe in a shell (X02)" in s["NCCL_SOCKET_IFNAME"]["reason"]
    doc["nics"][0]["netdevs"] = ["ib1;reboot"]
    assert "NCCL_SOCKET_IFNAME" not in settings_of({"nccl_settings": suggest_nccl_settings(doc)})
    found = {f["devices"][0]: f for f in evaluate(doc, {}, strict=True) if f["rule"] == "X02"}
    assert set(found) == {"ib1;reboot", "$(id)"}
    assert found["$(id)"]["message"].startswith("network interface '$(id)' has characters")


def test_x02_gpu_names_and_host_info_netdevs():
    doc = host(["GPU0", "GPU1\n"])
    results = {"host_info": {"netdevs": {"eth0": "up", "eth1`x`": "up"}, "default_route_netdev": "eth1`x`",
                             "nccl_env": {"NCCL_SOCKET_IFNAME": "=eth0"}}}
    found = {f["devices"][0]: f for f in evaluate(doc, results, strict=True) if f["rule"] == "X02"}
    assert set(found) == {"GPU1\n", "eth1`x`"}
    assert "GPU 'GPU1\\n'" in found["GPU1\n"]["message"]  # shown escaped on one line
    [h05] = [f for f in evaluate(doc, results, strict=True) if f["rule"] == "H05"]
    assert "eth1`x`" not in h05["fix"]  # the fix does not suggest NCCL_SOCKET_IFNAME==<unsafe name>


def test_x02_is_a_listed_rule():
    assert "X02" in rule_ids()
