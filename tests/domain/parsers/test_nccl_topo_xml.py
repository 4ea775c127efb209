"""NCCL topology XML parser: real dumps and hand-curated NCCL_TOPO_FILEs, error paths, safety."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import KINDS, detect_kind
from apps.domain.parsers.nccl_topo_xml import detect, parse
from tests.domain.parsers.properties import edited_document, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"
NCCL = FIX / "nccl_topo_xml"


def load(name: str) -> str:
    return (NCCL / name).read_bytes().decode("utf-8", errors="replace")


def by_bdf(result):
    return {p.bdf: p for p in result.pci_devices}


# -- real captures --------------------------------------------------------------------------------

def test_azure_ndv4_eight_gpus_each_under_a_virtual_switch_with_ib_nics() -> None:
    r = parse(load("azhpc_ndv4-topo.xml"))
    assert r.version == 1
    assert [c.numa_id for c in r.cpus] == [0, 1, 2, 3]
    switches = [p for p in r.pci_devices if p.kind == "bridge"]
    assert [s.bdf for s in switches] == ["ffff:ff:01.0", "ffff:ff:02.0", "ffff:ff:03.0", "ffff:ff:04.0"]
    assert all(s.virtual and s.busid_raw.startswith("ffff:ff:") for s in switches)
    assert len(r.gpus) == 8 and all(not g.declared for g in r.gpus)
    for sw in switches:
        under = [p for p in r.pci_devices if p.parent_bdf == sw.bdf]
        assert Counter(p.kind for p in under) == {"gpu": 2, "nic": 2}
        assert {p.class_code for p in under} == {"0x0302", "0x0207"}  # InfiniBand NICs
        assert all(p.depth == 1 and p.numa_id == sw.numa_id for p in under)
    # NICs are bare <pci class=0x020700> entries: no <nic>/<net> names in a hand-written file
    assert len(r.nics) == 8 and all(n.nets == () for n in r.nics)
    assert by_bdf(r)["0003:00:00.0"].parent_bdf == "ffff:ff:01.0"
    assert by_bdf(r)["0003:00:00.0"].link_speed_gts == 16.0
    assert r.warnings == ()


def test_ibm_cloud_vm_dump_nvlinks_to_nvswitch_bdfs_and_zero_link_width() -> None:
    r = parse(load("ibm_cloud_gx3d_h100_vsi_topo.xml"))
    assert len(r.gpus) == 8 and all(g.declared and g.sm == 90 and g.gdr for g in r.gpus)
    gpu0 = r.gpus[0]
    assert (gpu0.bdf, gpu0.dev, gpu0.rank) == ("0000:a4:00.0", 0, 0)
    assert [(l.target, l.count) for l in gpu0.nvlinks] == [
        ("0000:f5:00.0", 5), ("0000:f4:00.0", 5), ("0000:f3:00.0", 4), ("0000:f6:00.0", 4)]
    for gpu in r.gpus:
        assert {l.target for l in gpu.nvlinks} == {"0000:f3:00.0", "0000:f4:00.0", "0000:f5:00.0", "0000:f6:00.0"}
        assert sum(l.count for l in gpu.nvlinks) == 18  # H100: 18 NVLinks per GPU
        assert all(l.tclass == "0x068000" and l.target_kind == "nvswitch" for l in gpu.nvlinks)
    pci = by_bdf(r)
    assert pci["0000:a4:00.0"].link_width == 0 and pci["0000:a4:00.0"].link_speed_gts == 32.0
    bridge = pci["0000:a1:00.0"]
    assert (bridge.kind, bridge.vendor_id, bridge.device_id, bridge.link_speed_gts, bridge.link_width) == (
        "bridge", "0x104c", "0x8232", 2.5, 1)
    nics = {n.nets[0].name: n for n in r.nics}
    assert nics["mlx5_7"].bdf == "0000:a3:00.0" and nics["mlx5_7"].nets[0].speed_mbps == 200000
    assert nics["mlx5_0"].numa_id == 1
    assert r.cpus[0].host_hash == "0xa5f31daa95182da8" and r.cpus[0].model_id == 143
    assert any("link_width is 0 on 16" in w for w in r.warnings)


def test_truncated_baremetal_dump_is_recovered_with_a_warning() -> None:
    r = parse(load("nccl_issue_h200_baremetal_supermicro_partial.xml"))
    assert r.warnings[0].startswith("the document is truncated: it stops at line 52")
    assert [g.bdf for g in r.gpus] == ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"]
    assert [n.nets[0].name for n in r.nics if n.nets] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert r.nics[-1].bdf == "0000:5c:00.0" and r.nics[-1].nets == ()  # cut inside its <nic>
    # Broadcom PEX Gen5 switch in front of each GPU/NIC pair
    assert {(p.vendor_id, p.device_id) for p in r.pci_devices if p.kind == "bridge"} == {("0x1000", "0xc030")}
    assert [c.numa_id for c in r.cpus] == [0, 1]


def test_vm_dump_numaid_minus_one_and_placeholder_nvlink_target() -> None:
    r = parse(load("nccl_issue_h200_vm_numaid_minus1_partial.xml"))
    assert r.cpus[0].numa_id is None and r.cpus[0].affinity is None
    assert all(p.numa_id is None for p in r.pci_devices)
    link = r.gpus[0].nvlinks[0]
    assert (link.target_raw, link.target, link.count) == ("fffffff:ff:ff.0", "fffffff:ff:ff.0", 18)
    assert any("numaid=\"-1\"" in w for w in r.warnings)
    assert any("not a real PCI address" in w for w in r.warnings)


def test_nic_directly_under_cpu_and_empty_link_speed() -> None:
    r = parse(load("azhpc_ncv4-topo.xml"))
    assert len(r.nics) == 1
    nic = r.nics[0]
    assert (nic.bdf, nic.numa_id) == (None, 0)
    net = nic.nets[0]
    assert (net.name, net.speed_mbps, net.port, net.latency, net.guid, net.maxconn, net.gdr) == (
        "eth0", 100000, 0, 0.0, "0x0", 65536, False)
    assert all(p.link_speed == "" and p.link_speed_gts is None and p.link_width == 0 for p in r.pci_devices)
    assert any("link_speed is empty on 4" in w for w in r.warnings)


def test_nccl_2_30_dump_dual_port_nic() -> None:
    r = parse(load("a100pcie_2gpu_cx6dx_roce_nccl2.30_host11_nccl_issue_2397.xml"))
    assert [(n.name, n.port, n.dev) for n in r.nics[0].nets] == [("mlx5_0", 1, 0), ("mlx5_1", 2, 1)]
    assert r.nics[0].bdf == "0000:16:00.0" and by_bdf(r)["0000:16:00.0"].link_width == 8
    assert [(g.bdf, g.gdr) for g in r.gpus] == [("0000:69:00.0", True), ("0000:b1:00.0", True)]
    assert r.cpus[1].affinity == "ffff,fff00000,00ffffff,f0000000"


def test_rccl_file_amd_gpus_and_xgmi_links() -> None:
    r = parse(load("rccl_topo_expl_topo_16p1h_mi250_broadcom_sw.xml"))
    assert r.version == 2
    assert len(r.gpus) == 16
    assert all(by_bdf(r)[g.bdf].class_code == "0x0380" and by_bdf(r)[g.bdf].vendor_id == "0x1002" for g in r.gpus)
    gpu0 = r.gpus[0]
    assert gpu0.gcn == "910" and gpu0.nvlinks == ()
    assert [(l.target, l.count) for l in gpu0.xgmi_links] == [("0000:51:00.0", 4), ("0000:56:00.0", 1), ("0000:0e:00.0", 2)]
    assert max(p.depth for p in r.pci_devices) == 3


def test_minimal_file_without_classes_warns() -> None:
    r = parse(load("aws_ofi_nccl_g5.48xl-topo.xml"))
    assert len(r.pci_devices) == 9 and {p.kind for p in r.pci_devices} == {"other"}
    assert r.cpus[1].children[-1] == "0000:00:15.0"
    assert any("no class attribute" in w for w in r.warnings)


def test_graph_file_is_refused_with_a_clear_reason() -> None:
    with pytest.raises(ParseError) as info:
        parse(load("azhpc_ncv4-graph.xml"))
    assert info.value.line_no == 1 and "NCCL graph file" in info.value.reason


# -- error paths ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,line_no,reason", [
    ("", 0, "empty"),
    ("   \n\n", 0, "empty"),
    ("GPU0 GPU1\n", 1, "not an XML document"),
    ('<system version="1">\n  <cpu numaid="0">\n  </pci>\n</system>\n', 3, "mismatched closing tag"),
    ('<system version="1">\n  <cpu numaid="0" numaid="1"/>\n</system>\n', 2, "given twice"),
    ('<topology version="2.0">\n</topology>\n', 1, "hwloc XML"),
    ('<foo/>\n', 1, "expected the NCCL topology root element <system>"),
    ('<!-- only a comment -->\n', 1, "no XML element"),
])
def test_errors_name_the_line(text: str, line_no: int, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.kind == "nccl_topo_xml"
    assert info.value.line_no == line_no
    assert reason in info.value.reason


def test_entity_expansion_is_refused() -> None:
    bomb = ('<?xml version="1.0"?>\n<!DOCTYPE system [\n <!ENTITY a "aaaaaaaaaa">\n'
            ' <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">\n]>\n<system version="1">&b;</system>\n')
    with pytest.raises(ParseError) as info:
        parse(bomb)
    assert info.value.line_no == 3 and "refused" in info.value.reason


def test_external_entity_is_refused() -> None:
    xxe = '<?xml version="1.0"?>\n<!DOCTYPE system [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n<system>&x;</system>\n'
    with pytest.raises(ParseError) as info:
        parse(xxe)
    assert info.value.line_no == 2


def test_bad_attribute_values_become_warnings() -> None:
    text = ('<system version="1">\n  <cpu numaid="zero" familyid="6">\n'
            '    <pci busid="not-a-bdf" class="0x030200" link_speed="fast" link_width="x16"/>\n'
            '  </cpu>\n</system>\n')
    r = parse(text)
    assert r.cpus[0].numa_id is None and r.cpus[0].family_id == 6
    dev = r.pci_devices[0]
    assert (dev.bdf, dev.busid_raw, dev.link_speed_gts, dev.link_width, dev.kind) == (None, "not-a-bdf", None, None, "gpu")
    joined = " | ".join(r.warnings)
    assert "line 2" in joined and "line 3" in joined and "not a PCI address" in joined


def test_trailing_junk_after_system_is_ignored_with_a_note() -> None:
    r = parse('<system version="1">\n  <cpu numaid="0"/>\n</system>\n**\n')
    assert r.cpus[0].numa_id == 0
    assert any("after the closing </system>" in w for w in r.warnings)


def test_crlf_and_bom_keep_line_numbers() -> None:
    text = "\ufeff<system version=\"1\">\r\n  <cpu numaid=\"0\">\r\n  </gpu>\r\n</system>\r\n"
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.line_no == 3 and info.value.line.strip() == "</gpu>"


# -- detection --------------------------------------------------------------------------------------

def test_detect_on_own_fixtures_and_others() -> None:
    for path in NCCL.glob("*.xml"):
        score = detect(path.read_text(errors="replace"))
        if "graph" in path.name:
            assert 0 < score < 50
        else:
            assert score >= 90, path.name
            assert detect_kind(path.read_text(errors="replace")) == "nccl_topo_xml"
    for path in (FIX / "hwloc_xml").glob("*.xml"):
        assert detect(path.read_text(errors="replace")) == 0
    for kind_dir in FIX.iterdir():
        if kind_dir.is_dir() and kind_dir.name not in ("nccl_topo_xml", "hwloc_xml"):
            for path in kind_dir.glob("*.txt"):
                assert detect(path.read_text(errors="replace")) == 0, path
    assert detect("") == 0
    assert KINDS["nccl_topo_xml"].detect(load("azhpc_ndv5-topo.xml")) >= 90


def test_auto_parse_of_graph_file_reaches_the_clear_error() -> None:
    from apps.domain.parsers import parse as parse_any
    with pytest.raises(ParseError) as info:
        parse_any("auto", load("azhpc_ncv4-graph.xml"))
    assert "NCCL graph file" in info.value.reason


# -- robustness ---------------------------------------------------------------------------------------

test_any_text_parses_or_raises_parse_error, test_mutated_fixtures_parse_or_raise_parse_error = safety_tests(
    parse, "nccl_topo_xml", edited_document([load(p.name) for p in sorted(NCCL.glob("*.xml"))]),
    detect=detect)


def test_truncating_a_complete_dump_anywhere_recovers_or_fails_cleanly() -> None:
    text = load("ibm_cloud_gx3d_h100_vsi_topo.xml")
    full = parse(text)
    for end in range(1, len(text), 97):
        try:
            r = parse(text[:end])
        except ParseError:
            continue
        assert r.warnings and "truncated" in r.warnings[0]
        assert len(r.gpus) <= len(full.gpus)
