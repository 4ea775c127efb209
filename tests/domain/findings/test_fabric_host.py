"""NIC/fabric rules F01-F04, F07, host rules H01-H04, H07, X01, and evaluate() ordering."""

from __future__ import annotations

from apps.domain.findings import SEVERITIES, evaluate, rule_ids
from tests.domain.findings.docs import host, ib_results, nic


def fired(doc, results=None, rule=None):
    return [f for f in evaluate(doc, results or {}, strict=True) if rule is None or f["rule"] == rule]


def test_f01_down_ports_high_crit_when_none_left():
    """
    mlx5_0 Active   mlx5_1 Down/Polling (cable)   mlx5_2 Down/Disabled (storage, non-compute)
    """
    doc = host(2, nics=[nic("mlx5_0"), nic("mlx5_1", state="Down", phys="Polling"),
                        nic("mlx5_2", state="Down", phys="Disabled", compute=False)])
    found = {f["devices"][0]: (f["severity"], f["message"]) for f in fired(doc, rule="F01")}
    assert set(found) == {"mlx5_1", "mlx5_2"}
    assert found["mlx5_1"][0] == "HIGH" and "no physical link" in found["mlx5_1"][1]
    assert found["mlx5_2"][0] == "LOW"
    only = host(1, nics=[nic("mlx5_0", state="Initializing", phys="LinkUp")])
    [f] = fired(only, rule="F01")
    assert f["severity"] == "CRIT" and "subnet manager" in f["message"]


def test_f02_one_rail_slower():
    """8 NDR rails: mlx5_3 trained at 200 Gb/s; near miss: all 8 at 200 (a design, not a fault)."""
    nics = [nic(f"mlx5_{i}", rate=200 if i == 3 else 400) for i in range(8)]
    [f] = fired(host(8, nics=nics), rule="F02")
    assert f["devices"] == ["mlx5_3"] and "400 Gb/s" in f["message"]
    assert fired(host(8, nics=[nic(f"mlx5_{i}", rate=200) for i in range(8)]), rule="F02") == []


def test_f02_near_miss_other_adapter_model_at_lower_rate():
    """8 CX-7 (MT4129) RoCE 400 + 2 CX-6 Dx (MT4125) RoCE 100: different adapters, not a slow rail."""
    nics = [nic(f"mlx5_{i}", layer="Ethernet") for i in range(8)] + [
        nic("mlx5_8", rate=100, layer="Ethernet"), nic("mlx5_9", rate=100, layer="Ethernet")]
    ports = [{"ca": f"mlx5_{i}", "ca_type": "MT4129" if i < 8 else "MT4125", "number": 1, "state": "Active",
              "phys_state": "LinkUp", "rate_gbps": 400 if i < 8 else 100, "link_layer": "Ethernet",
              "base_lid": 0, "sm_lid": 0} for i in range(10)]
    assert fired(host(8, nics=nics), ib_results(*ports), rule="F02") == []
    ports[3]["rate_gbps"] = 200
    nics[3]["rate_gbps"] = 200
    assert [f["devices"] for f in fired(host(8, nics=nics), ib_results(*ports), rule="F02")] == [["mlx5_3"]]


def test_f03_ib_port_without_lid_but_not_roce():
    """
    mlx5_0 IB  Initializing/LinkUp  Base lid 65535 SM lid 0   -> F03
    mlx5_1 ETH Active/LinkUp        Base lid 0     SM lid 0   -> normal for RoCE
    mlx5_2 IB  Down/Polling         Base lid 0                -> F01 only (no link at all)
    """
    doc = host(2, nics=[nic("mlx5_0", state="Initializing"), nic("mlx5_1", layer="Ethernet", rate=100),
                        nic("mlx5_2", state="Down", phys="Polling")])
    res = ib_results(
        {"ca": "mlx5_0", "number": 1, "state": "Initializing", "phys_state": "LinkUp", "rate_gbps": 400,
         "link_layer": "InfiniBand", "base_lid": 65535, "sm_lid": 0},
        {"ca": "mlx5_1", "number": 1, "state": "Active", "phys_state": "LinkUp", "rate_gbps": 100,
         "link_layer": "Ethernet", "base_lid": 0, "sm_lid": 0},
        {"ca": "mlx5_2", "number": 1, "state": "Down", "phys_state": "Polling", "rate_gbps": 10,
         "link_layer": "InfiniBand", "base_lid": 0, "sm_lid": 0})
    [f] = fired(doc, res, rule="F03")
    assert f["devices"] == ["mlx5_0"] and f["severity"] == "CRIT" and "65535" in f["message"]


def test_f04_mixed_layers_and_exact_fix():
    """8x CX-7 IB 400 + 2x CX-6 Dx RoCE 100, all Active, NCCL_IB_HCA unset -> HIGH; set to both -> CRIT."""
    nics = [nic(f"mlx5_{i}") for i in range(8)] + [nic("mlx5_8", layer="Ethernet", rate=100),
                                                   nic("mlx5_9", layer="Ethernet", rate=100)]
    doc = host(8, nics=nics)
    [f] = fired(doc, rule="F04")
    assert f["severity"] == "HIGH"
    assert "NCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7" in f["fix"]
    [f] = fired(doc, {"nccl_env": {"NCCL_IB_HCA": "mlx5"}}, rule="F04")
    assert f["severity"] == "CRIT"
    assert fired(doc, {"nccl_env": {"NCCL_IB_HCA": "=mlx5_0,mlx5_1"}}, rule="F04") == []


def test_f07_prefix_single_and_down():
    """12 HCAs mlx5_0..mlx5_11 (mlx5_11 Down); NCCL_IB_HCA=mlx5_1 matches mlx5_1, mlx5_10, mlx5_11."""
    nics = [nic(f"mlx5_{i}") for i in range(11)] + [nic("mlx5_11", state="Down", phys="Polling")]
    doc = host(8, nics=nics)
    [f] = fired(doc, {"nccl_env": {"NCCL_IB_HCA": "mlx5_1"}}, rule="F07")
    assert "prefix" in f["message"] and {"mlx5_10", "mlx5_11"} <= set(f["devices"])
    [f] = fired(doc, {"nccl_env": {"NCCL_IB_HCA": "=mlx5_0"}}, rule="F07")
    assert "single HCA" in f["message"]
    good = "=" + ",".join(f"mlx5_{i}" for i in range(11))
    assert fired(doc, {"nccl_env": {"NCCL_IB_HCA": good}}, rule="F07") == []
    assert fired(doc, {}, rule="F07") == []


def test_h01_empty_affinity_for_some_gpus():
    doc = host(2, affinity={"GPU0": "0-15", "GPU1": ""})
    [f] = fired(doc, rule="H01")
    assert f["devices"] == ["GPU1"] and f["severity"] == "MED"
    assert fired(host(2), rule="H01") == []


def test_h02_nic_on_other_numa():
    """GPU0 (NUMA 0) -> mlx5_0 (NUMA 0) fine; GPU1 (NUMA 1) -> mlx5_0: crosses sockets."""
    doc = host(2, default_pair="SYS", gpu_numa={"GPU1": 1}, nics=[nic("mlx5_0", numa=0)],
               gpu_nic={"GPU0": ("mlx5_0", "PIX"), "GPU1": ("mlx5_0", "SYS")})
    [f] = fired(doc, rule="H02")
    assert f["devices"] == ["GPU1", "mlx5_0"] and "NUMA 1" in f["message"]


def test_h03_h04_h07_env():
    doc = host(2, nics=[nic("mlx5_0")])
    env = {"nccl_env": {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1", "NCCL_ALGO": "Ring"}}
    rules = {f["rule"]: f for f in fired(doc, env)}
    assert rules["H03"]["severity"] == "HIGH" and "NVLink" in rules["H03"]["message"]
    assert rules["H04"]["devices"] == ["mlx5_0"]
    assert "NCCL_ALGO=Ring" in rules["H07"]["message"] and rules["H07"]["severity"] == "LOW"
    quiet = {f["rule"] for f in fired(doc, {"nccl_env": {"NCCL_DEBUG": "INFO"}})}
    assert not quiet & {"H03", "H04", "H07"}


def test_x01_source_disagreement_warning():
    doc = host(2, default_pair="PIX",
               warnings=["sources disagree: topo -m says GPU0-GPU1 PIX but lspci places them under separate "
                         "root ports", "NIC row has no affinity"])
    [f] = fired(doc, rule="X01")
    assert f["severity"] == "MED" and f["devices"] == ["GPU0", "GPU1"]


def test_x01_structured_disagreements():
    """graph.disagreements as the engine records them: subject, message, sources."""
    doc = host(2, default_pair="PIX", nics=[nic("mlx5_0")])
    doc["graph"]["disagreements"] = [
        {"subject": "GPU0-GPU1", "message": "topo -m says PIX, the PCI tree puts them under separate root ports",
         "sources": ["nvidia_smi_topo", "lspci_tree"]},
        {"subject": "mlx5_0", "message": "mlx5_0 is in the HCA listing but not in topo -m",
         "sources": ["nvidia_smi_topo"]}]
    found = {tuple(f["devices"]): f for f in fired(doc, rule="X01")}
    assert set(found) == {("GPU0", "GPU1"), ("mlx5_0",)}
    assert "lspci_tree" in found[("GPU0", "GPU1")]["message"]
    assert fired(host(2), rule="X01") == []


def test_evaluate_sorted_and_shaped():
    nics = [nic("mlx5_0", state="Down", phys="Polling"), nic("mlx5_1")]
    doc = host(2, default_pair="SYS", nics=nics, gpu_nic={"GPU0": ("mlx5_1", "PIX"), "GPU1": ("mlx5_1", "SYS")})
    out = evaluate(doc, {}, strict=True)
    ranks = [SEVERITIES.index(f["severity"]) for f in out]
    assert ranks == sorted(ranks) and len(out) >= 3
    for f in out:
        assert set(f) == {"rule", "severity", "title", "devices", "message", "fix", "source"}
        assert all(isinstance(d, str) for d in f["devices"]) and f["message"] and f["fix"] and f["source"]
        assert "[" not in f["message"] and "{" not in f["message"]
    assert len(rule_ids()) >= 24


def test_evaluate_is_total_on_missing_sections():
    assert evaluate({}, {}) == []
    assert evaluate({"gpus": None, "nics": None, "graph": None}, {"ibstat": None, "lspci_verbose": {}}) == []
