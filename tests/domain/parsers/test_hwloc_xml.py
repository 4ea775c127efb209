"""hwloc XML parser: hwloc 1.x, 2.x and 3.x files, AMD and NVIDIA hosts, distances, error paths."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind
from apps.domain.parsers.hwloc_xml import detect, parse
from tests.domain.parsers.properties import edited_document, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"
HW = FIX / "hwloc_xml"
REALDATA_HWLOC = Path("/work/shared/realdata/hwloc")


def load(name: str) -> str:
    return (HW / name).read_bytes().decode("utf-8", errors="replace")


def by_bdf(result):
    return {p.bdf: p for p in result.pci_devices}


def test_dgx2_sixteen_v100_six_nvswitch_links_each_and_nvlink_matrix() -> None:
    r = parse(load("hwloc_test_nvidiaDGX2.xml"))
    assert (r.version, r.format_major, r.product, r.architecture) == ("3.0", 3, "NVIDIA DGX-2H", "x86_64")
    gpus = [p for p in r.pci_devices if p.kind == "gpu"]
    assert len(gpus) == 16
    assert {g.gpu_model for g in gpus} == {"Tesla V100-SXM3-32GB-H"}
    assert {(g.vendor_id, g.device_id, g.class_code) for g in gpus} == {("0x10de", "0x1db8", "0x0302")}
    assert [o.name for g in gpus for o in g.os_devices] == [f"nvml{i}" for i in range(16)]
    nvml0 = gpus[0].os_devices[0]
    assert (nvml0.type, nvml0.types) == ("gpu", ("gpu", "coproc"))  # osdev_type 12 in a v3 file
    assert Counter(g.package_os_index for g in gpus) == {0: 8, 1: 8}
    assert len([p for p in r.pci_devices if p.kind == "nvswitch"]) == 12
    assert by_bdf(r)["0000:66:00.0"].kind == "nvswitch"  # class zeroed in the file, subtype NVSwitch
    g0 = by_bdf(r)["0000:34:00.0"]
    assert (g0.parent_bdf, g0.depth, g0.host_bridge, g0.link_speed_gbs) == ("0000:33:00.0", 5, "0000:[2b-3b]", 15.753846)
    assert by_bdf(r)["0000:2c:00.0"].vendor_id == "0x10b5"  # PLX switch
    nv = next(d for d in r.distances if d.name == "NVLinkBandwidth")
    assert (nv.meaning, nv.unit, len(nv.objects)) == ("bandwidth", "MB/s", 28)
    assert nv.objects[:16] == tuple(f"nvml{i}" for i in range(16))
    links = {nv.objects[j]: v for j, v in enumerate(nv.values[0]) if v}
    assert len(links) == 6 and set(links.values()) == {25000}
    assert all(by_bdf(r)[bdf].kind == "nvswitch" for bdf in links)
    numa = next(d for d in r.distances if d.name == "NUMALatency")
    assert numa.objects == ("NUMANode P#0", "NUMANode P#1") and numa.values == ((10, 21), (21, 10))
    assert [p.os_index for p in r.packages] == [0, 1]
    assert r.packages[0].numa_nodes[0].local_memory_bytes == 810234351616
    assert r.warnings == ()


def test_hwloc1_file_numa_contains_package_and_gpu_memory_nodes() -> None:
    r = parse(load("llnl_mpibind_coral-butte-hwloc1.xml"))
    assert (r.version, r.format_major) == ("1.x", 1)
    assert [(p.os_index, [n.os_index for n in p.numa_nodes]) for p in r.packages] == [(0, [0]), (8, [8])]
    assert [(n.os_index, n.package_os_index) for n in r.numa_nodes] == [
        (0, 0), (8, 8), (252, None), (253, None), (254, None), (255, None)]
    gpus = [p for p in r.pci_devices if p.kind == "gpu"]
    assert [(g.bdf, g.numa_os_index) for g in gpus] == [
        ("0004:04:00.0", 0), ("0004:05:00.0", 0), ("0035:03:00.0", 8), ("0035:04:00.0", 8)]
    ib = [(o.name, o.type) for p in r.pci_devices for o in p.os_devices if o.type == "openfabrics"]
    assert ib == [("mlx5_0", "openfabrics"), ("mlx5_1", "openfabrics"), ("mlx5_2", "openfabrics"), ("mlx5_3", "openfabrics")]
    assert by_bdf(r)["0002:02:00.0"].kind == "other"  # ASPEED BMC VGA, DRM card only
    assert all(p.link_speed_gbs is None for p in r.pci_devices)  # hwloc wrote 0.000000
    lat = r.distances[0]
    assert lat.objects[:2] == ("NUMANode P#0", "NUMANode P#8")
    assert lat.values[0] == (10.0, 40.0, 80.0, 80.0, 80.0, 80.0)
    assert any("did not know the PCIe link speed" in w for w in r.warnings)


def test_tioga_amd_mi250x_gcds_are_gpus_with_rsmi_and_xgmi_matrix() -> None:
    r = parse(load("llnl_mpibind_eas-tioga_mi250x.xml"))
    gpus = [p for p in r.pci_devices if p.kind == "gpu"]
    assert len(gpus) == 8
    assert {(g.class_code, g.vendor_id) for g in gpus} == {("0x0380", "0x1002")}
    assert sorted(g.os_devices[0].name for g in gpus) == [f"rsmi{i}" for i in range(8)]
    assert {g.gpu_model for g in gpus} == {"AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2"}
    assert Counter(g.numa_os_index for g in gpus) == {0: 2, 1: 2, 2: 2, 3: 2}
    assert {g.package_os_index for g in gpus} == {0}
    assert [(n.os_index, n.package_os_index) for n in r.numa_nodes] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    hsi = {o.name: p.numa_os_index for p in r.pci_devices for o in p.os_devices if o.name.startswith("hsi")}
    assert hsi == {"hsi0": 3, "hsi1": 1, "hsi2": 0, "hsi3": 2}
    xgmi = next(d for d in r.distances if d.name == "XGMIBandwidth")
    assert xgmi.objects == tuple(f"rsmi{i}" for i in range(8)) and xgmi.values[0][1] == 100000
    assert [o.name for o in r.host_os_devices] == ["sdb", "sda"]


def test_g4dn_hwloc2_t4_gpus_with_three_os_devices_each() -> None:
    r = parse(load("llnl_mpibind_g4dnmetal.xml"))
    assert (r.version, r.product) == ("2.0", "g4dn.metal")
    gpus = [p for p in r.pci_devices if p.kind == "gpu"]
    assert len(gpus) == 8 and {g.device_name for g in gpus} == {"TU104GL [Tesla T4]"}
    assert [(o.name, o.type, o.subtype) for o in gpus[0].os_devices] == [
        ("cuda0", "coproc", "CUDA"), ("opencl0d0", "coproc", "OpenCL"), ("nvml0", "gpu", "NVML")]
    efa = by_bdf(r)["0000:c5:00.0"]
    assert (efa.kind, efa.device_name, efa.numa_os_index, efa.depth) == ("nic", "Elastic Fabric Adapter (EFA)", 1, 3)
    assert efa.os_devices[0].types == ("network", "openfabrics")


def test_v3_osdev_bitmask_and_amd_vga_with_opencl_and_duplicate_address() -> None:
    r = parse(load("hwloc_test_x9drg_3x_tesla_m2075.xml"))
    radeon = by_bdf(r)["0000:84:00.1"]
    assert (radeon.class_code, radeon.vendor_id, radeon.kind) == ("0x0300", "0x1002", "gpu")
    assert by_bdf(r)["0000:05:03.0"].kind == "other"  # Matrox BMC VGA
    dma = [o for o in by_bdf(r)["0000:84:00.2"].os_devices]
    assert [(o.name, o.type) for o in dma] == [("dma2chan0", "dma"), ("dma2chan1", "dma")]
    assert any("0000:04:00.0 appears more than once" in w for w in r.warnings)


def test_proliant_mlx4_infiniband_class_is_a_nic_and_ati_bmc_vga_is_not_a_gpu() -> None:
    r = parse(load("hwloc_test_proliant_sl390s_mlx4.xml"))
    mlx4 = by_bdf(r)["0000:05:00.0"]
    assert (mlx4.class_code, mlx4.kind) == ("0x0c06", "nic")
    assert [(o.name, o.type) for o in mlx4.os_devices] == [("eth2", "network"), ("ib0", "network"), ("mlx4_0", "openfabrics")]
    assert by_bdf(r)["0000:01:03.0"].kind == "other"  # ATI ES1000
    assert len([p for p in r.pci_devices if p.kind == "gpu"]) == 3


def test_power8_nvlink_distances_to_packages() -> None:
    r = parse(load("hwloc_test_power8_minsky_p100.xml"))
    nv = next(d for d in r.distances if d.name == "NVLinkBandwidth")
    assert nv.objects == ("nvml0", "nvml1", "nvml2", "nvml3", "Package P#0", "Package P#1")
    assert nv.values[0] == (1000000, 40000, 0, 0, 40000, 0)


def test_no_io_topology_warns() -> None:
    r = parse(load("hwloc_test_nvidia_dgx_spark_gb10.xml"))
    assert r.pci_devices == () and r.architecture == "aarch64"
    assert [(p.os_index, [n.os_index for n in p.numa_nodes]) for p in r.packages] == [(36, [0])]
    assert any("no PCI devices" in w for w in r.warnings)


# -- errors -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,line_no,reason", [
    ("", 0, "empty"),
    ("Machine (251GB total)\n  Package L#0\n", 1, "not an XML document"),
    ('<?xml version="1.0"?>\n<topology version="2.0">\n  <object type="Machine">\n  </info>\n</topology>\n', 4, "mismatched"),
    ('<system version="1">\n</system>\n', 1, "NCCL topology"),
    ('<?xml version="1.0"?>\n<graphs/>\n', 2, "expected the hwloc root element"),
    ('<topology version="two">\n</topology>\n', 1, "unknown hwloc XML version"),
])
def test_errors_name_the_line(text: str, line_no: int, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.kind == "hwloc_xml"
    assert info.value.line_no == line_no
    assert reason in info.value.reason


def test_entity_expansion_is_refused() -> None:
    bomb = ('<?xml version="1.0"?>\n<!DOCTYPE topology [\n <!ENTITY a "aaaaaaaaaa">\n'
            ' <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">\n]>\n<topology>&b;</topology>\n')
    with pytest.raises(ParseError) as info:
        parse(bomb)
    assert info.value.line_no == 3 and "refused" in info.value.reason


def test_truncated_file_is_recovered_with_the_stop_line() -> None:
    lines = load("llnl_mpibind_cts1-pascal.xml").splitlines()
    stop = next(i for i, line in enumerate(lines) if 'name="mlx5_0"' in line) + 1
    r = parse("\n".join(lines[:stop]))
    assert r.warnings[0].startswith(f"the document is truncated: it stops at line {stop}")
    assert [p.bdf for p in r.pci_devices if p.kind == "gpu"] == ["0000:04:00.0", "0000:07:00.0"]
    assert by_bdf(r)["0000:08:00.0"].os_devices[-1].name == "mlx5_0"


def test_malformed_distances_are_skipped_with_a_warning() -> None:
    text = ('<topology version="2.0">\n <object type="Machine" os_index="0">\n'
            '  <object type="NUMANode" os_index="0" gp_index="2"/>\n </object>\n'
            ' <distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="os">\n'
            '  <indexes length="4">0 1 </indexes>\n  <u64values length="6">10 21 </u64values>\n'
            ' </distances2>\n</topology>\n')
    r = parse(text)
    assert r.distances == ()
    assert any(w.startswith("line 5:") and "2 values for 2 objects" in w for w in r.warnings)


# -- detection --------------------------------------------------------------------------------------

def test_detect_on_own_fixtures_console_text_and_others() -> None:
    for path in HW.glob("*.xml"):
        text = path.read_text(errors="replace")
        assert detect(text) >= 90, path.name
        assert detect_kind(text) == "hwloc_xml"
    for path in (FIX / "nccl_topo_xml").glob("*.xml"):
        assert detect(path.read_text(errors="replace")) == 0
    for kind_dir in FIX.iterdir():
        if kind_dir.is_dir() and kind_dir.name not in ("nccl_topo_xml", "hwloc_xml"):
            for path in kind_dir.glob("*.txt"):
                assert detect(path.read_text(errors="replace")) == 0, path
    console = list(REALDATA_HWLOC.glob("*console*")) if REALDATA_HWLOC.is_dir() else []
    for path in console:  # lstopo text output is not this kind
        assert detect(path.read_text(errors="replace")) == 0, path.name
    assert detect("Machine (251GB total)\n  Package L#0\n    NUMANode L#0 (P#0 125GB)\n") == 0


# -- robustness -------------------------------------------------------------------------------------

_SMALL = ["hwloc_test_power8_minsky_p100.xml", "hwloc_test_proliant_sl390s_mlx4.xml", "hwloc_test_nvidiaDGX2.xml"]

test_any_text_parses_or_raises_parse_error, test_mutated_fixtures_parse_or_raise_parse_error = safety_tests(
    parse, "hwloc_xml", edited_document([load(name) for name in _SMALL]), detect=detect)
