"""assemble(): joins by PCI address, label <-> HCA, source precedence and disagreements."""

from __future__ import annotations

from apps.domain.assemble import assemble
from apps.domain.names import normalize_token
from apps.domain.parsers import parse

from .test_hostgraph import load_facts, topo


def test_normalize_token():
    assert [normalize_token(t) for t in (" X ", "SOC", "nv12", "PXB", "", None)] == ["X", "SYS", "NV12", "PXB", None, None]


def test_gpu_index_joins_bdf_uuid_and_topo_affinity():
    results = {
        "nvidia_smi_topo": topo({"GPU0": "X NV18", "GPU1": "NV18 X"}, affinity={"GPU0": "0", "GPU1": "1"}),
        "nvidia_smi_gpus": {"gpus": [
            {"index": 0, "uuid": "GPU-aaa", "bdf": "00000000:1B:00.0", "name": "NVIDIA H100 80GB HBM3"},
            {"index": 1, "uuid": "GPU-bbb", "bdf": "00000000:9C:00.0", "name": "NVIDIA H100 80GB HBM3"}]},
    }
    f = assemble(results, "h")
    g0, g1 = f.gpus
    assert (g0.name, g0.bdf, g0.uuid, g0.numa) == ("GPU0", "0000:1b:00.0", "GPU-aaa", 0)
    assert (g1.bdf, g1.numa) == ("0000:9c:00.0", 1)
    assert f.gpu_model == "NVIDIA H100 80GB HBM3"
    assert [(p.a, p.b, p.links) for p in f.nvlink_pairs] == [("GPU0", "GPU1", 18)]


def test_nic_legend_label_maps_to_hca_and_ib_state_merges():
    results = {
        "nvidia_smi_topo": topo({"GPU0": "X PIX", "NIC0": "PIX X"}, nics={"NIC0": "mlx5_3"}),
        "ibstat": {"cas": [{"name": "mlx5_3", "ports": [
            {"number": 1, "state": "Down", "phys_state": "Polling", "rate_gbps": 10, "link_layer": "InfiniBand"}]}]},
    }
    f = assemble(results, "h")
    (n,) = f.nics
    assert (n.name, n.label, n.device, n.state, n.phys_state) == ("mlx5_3", "NIC0", "mlx5_3", "Down", "Polling")
    assert n.active is False
    assert f.nic("NIC0") is n and f.label_of("mlx5_3") == "NIC0"


def test_second_port_of_a_dual_port_hca_is_its_own_nic():
    results = {"ibstat": {"cas": [{"name": "mlx5_0", "ports": [
        {"number": 1, "state": "Active", "rate_gbps": 200}, {"number": 2, "state": "Down", "rate_gbps": 10}]}]}}
    f = assemble(results, "h")
    assert [(n.name, n.port, n.state) for n in f.nics] == [("mlx5_0", 1, "Active"), ("mlx5_0:2", 2, "Down")]


def test_sources_that_disagree_are_recorded():
    """ibstat says Active/400, sysfs_ib says Down: the first listed source wins, the conflict is kept."""
    results = {
        "ibstat": {"cas": [{"name": "mlx5_0", "ports": [{"number": 1, "state": "Active", "rate_gbps": 400}]}]},
        "sysfs_ib": {"cas": [{"name": "mlx5_0", "bdf": "0000:18:00.0",
                              "ports": [{"number": 1, "state": "Down", "rate_gbps": 400}]}]},
    }
    f = assemble(results, "h")
    assert f.nics[0].state == "Active" and f.nics[0].bdf == "0000:18:00.0"
    assert [d.subject for d in f.disagreements] == ["mlx5_0"]
    assert "Down" in f.disagreements[0].message and set(f.disagreements[0].sources) == {"ibstat", "sysfs_ib"}


def test_topo_nic_missing_from_hca_listing_is_a_disagreement():
    results = {
        "nvidia_smi_topo": topo({"GPU0": "X PIX PIX", "mlx5_0": "PIX X PIX", "mlx5_1": "PIX PIX X"}),
        "ibstat": {"cas": [{"name": "mlx5_0", "ports": [{"number": 1, "state": "Active", "rate_gbps": 400}]}]},
    }
    f = assemble(results, "h")
    assert any(d.subject == "mlx5_1" for d in f.disagreements)


def test_nvlink_status_counts_active_links():
    text = (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n"
        "\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n\t Link 2: 25 GB/s\n"
    )
    f = assemble({"nvidia_smi_nvlink": parse("nvidia_smi_nvlink", text)}, "h")
    (g,) = f.gpus
    assert (g.nvlink_active, g.nvlink_total, g.nvlink_link_gbps) == (2, 3, (25.0, 25.0))
    assert g.model == "NVIDIA A100-SXM4-80GB"


def test_lspci_verbose_parents_come_from_bus_numbers():
    facts = load_facts("dell_xe9680_lspci")
    gpu = facts.pci_device("0000:19:00.0")
    assert gpu.kind == "gpu" and gpu.vendor_id == 0x10DE and gpu.class_code == 0x0302
    assert gpu.parent_bdf is not None
    parent = facts.pci_device(gpu.parent_bdf)
    assert parent.kind == "downstream_port" and parent.secondary_bus == 0x19
    assert [d.kind for d in facts.pci].count("nvswitch") == 4
    assert facts.gpu_model == "NVIDIA H100 80GB HBM3"  # from PCI device id 0x2330, with a warning
    assert any("device id" in w for w in facts.warnings)


def test_nccl_xml_cpu_and_nic_facts():
    facts = load_facts("azhpc_ndv4_xml")
    assert facts.cpu_vendor == "amd" and facts.cpu_model == 49 and len(facts.cpus) == 4
    assert len(facts.gpus) == 8 and all(g.bdf for g in facts.gpus)
    assert sum(d.kind == "nic" for d in facts.pci) == 8


def test_results_as_json_dicts_read_the_same_as_dataclasses():
    from apps.domain.parsers import to_jsonable

    text = (BUNDLE := __import__("pathlib").Path(__file__).resolve().parents[2]
            / "fixtures" / "bundles" / "microway_dgx1_v100" / "nvidia_smi_topo.txt").read_text()
    r = parse("nvidia_smi_topo", text)
    a = assemble({"nvidia_smi_topo": r}, "h")
    b = assemble({"nvidia_smi_topo": to_jsonable(r)}, "h")
    assert a == b and BUNDLE.exists()


def test_each_pci_source_is_read_by_the_fields_its_parser_emits():
    """One fixed schema per parser: every field assemble reads is a field of that parser's record."""
    import dataclasses

    from apps.domain.assemble import PCI_DEVICE_LIST, PCI_FIELDS
    from apps.domain.parsers import hwloc_xml, lspci_tree, lspci_verbose, nccl_topo_xml, sysfs_pci

    records = {"sysfs_pci": (sysfs_pci.SysfsPci, sysfs_pci.SysfsPciDevice),
               "lspci_verbose": (lspci_verbose.LspciVerbose, lspci_verbose.PciFunction),
               "lspci_tree": (lspci_tree.LspciTree, lspci_tree.TreeDevice),
               "nccl_topo_xml": (nccl_topo_xml.NcclTopology, nccl_topo_xml.NcclPciDevice),
               "hwloc_xml": (hwloc_xml.HwlocTopology, hwloc_xml.HwlocPciDevice)}
    assert set(records) == set(PCI_FIELDS)
    for kind, (result, device) in records.items():
        names = {f.name for f in dataclasses.fields(device)}
        assert set(PCI_FIELDS[kind].values()) <= names, kind
        assert PCI_DEVICE_LIST[kind] in {f.name for f in dataclasses.fields(result)}


def test_a_field_is_read_by_its_one_name_only():
    """``bdf`` is the GPU query's PCI address field; other spellings are not looked for."""
    f = assemble({"nvidia_smi_gpus": {"gpus": [{"index": 0, "pci_bus_id": "00000000:1B:00.0"}]}}, "h")
    assert f.gpus[0].bdf is None


def test_a_gpu_pair_is_stored_once_past_ten_gpus():
    """String order and natural order disagree from GPU10 on ("GPU10" < "GPU2"): the pair is kept
    once, under its natural-order key, whichever source names it, and the sources are compared."""
    names = [f"GPU{i}" for i in range(12)]
    matrix = {a: {b: "X" if a == b else "SYS" for b in names} for a in names}
    matrix["GPU2"]["GPU10"] = matrix["GPU10"]["GPU2"] = "NV2"
    # NCCL XML (dict form of the parser's result): GPU2 lists 4 NVLinks to GPU10 (bus 0x1a)
    xml = {"gpus": [{"dev": i, "bdf": f"0000:{16 + i:02x}:00.0",
                     "nvlinks": [{"target": "0000:1a:00.0", "count": 4, "target_kind": "gpu"}] if i == 2 else []}
                    for i in range(12)]}
    f = assemble({"nvidia_smi_topo": {"matrix": matrix}, "nccl_topo_xml": xml}, "h")
    assert [(p.a, p.b, p.links, p.source) for p in f.nvlink_pairs] == [("GPU2", "GPU10", 2, "nvidia_smi_topo")]
    assert [d.message for d in f.disagreements if d.subject == "GPU2-GPU10"] == [
        "topo -m says NV2 for GPU2-GPU10, NCCL XML says 4 links"]
