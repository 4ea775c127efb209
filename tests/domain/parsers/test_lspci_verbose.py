"""lspci -vvv parser: real captures (fixtures/lspci_verbose), PCIe helpers, errors, detect, fuzzing."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import lspci_verbose
from apps.domain.parsers._pcie import parse_link_speed, parse_link_width, pcie_generation
from tests.domain.parsers.properties import fixture_lines, lstrip, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"
DELL = "gpud_dell_xe9680_hgx_h100_8gpu_full_lspci_vvv.txt"


def load(name: str) -> str:
    return (FIX / "lspci_verbose" / name).read_text()


def devices(name: str):
    r = lspci_verbose.parse(load(name))
    return r, {d.bdf: d for d in r.devices}


@pytest.fixture(scope="module")
def dell():
    return devices(DELL)


def test_dell_h100s_are_gen5_x16_by_numa_node(dell):
    r, devs = dell
    assert len(r.devices) == 517 and r.warnings == ()
    gpus = [d for d in r.devices if d.device_id == "2330"]
    assert [g.bdf[5:7] for g in gpus] == ["19", "3b", "4c", "5d", "9b", "bb", "cb", "db"]
    for g in gpus:
        assert g.class_name == "3D controller" and g.vendor_name == "NVIDIA Corporation" and g.device_name is None
        assert (g.port_type, g.cap_speed_gts, g.cap_width) == ("Endpoint", 32.0, 16)
        assert pcie_generation(g.cap_speed_gts) == 5
        assert (g.sta_speed_gts, g.sta_width, g.speed_downgraded, g.width_downgraded) == (32.0, 16, False, False)
        assert g.driver == "nvidia" and g.kernel_modules == ("nvidiafb", "nouveau", "nvidia_drm", "nvidia")
    assert Counter(g.numa_node for g in gpus) == {0: 4, 1: 4}


def test_dell_downgraded_annotations_as_printed(dell):
    r, devs = dell
    sw = devs["0000:17:00.0"]  # PEX890xx downstream port to the NVMe, Gen5 x4 capable, at Gen4
    assert (sw.port_type, sw.slot, sw.cap_speed_gts, sw.cap_width) == ("Downstream Port", True, 32.0, 4)
    assert (sw.sta_speed_gts, sw.sta_speed_note, sw.speed_downgraded, sw.width_downgraded) == (16.0, "downgraded", True, False)
    assert (sw.bus_primary, sw.bus_secondary, sw.bus_subordinate) == ("17", "18", "18")
    assert sum(d.speed_downgraded is True for d in r.devices) == 12
    assert sum(d.width_downgraded is True for d in r.devices) == 4
    rp = devs["0000:80:01.0"]  # root port to the PMC-Sierra switch: x16 capable, trained x2
    assert (rp.port_type, rp.cap_width, rp.sta_width, rp.width_downgraded) == ("Root Port", 16, 2, True)


def test_dell_acs_ats_nvswitch(dell):
    r, devs = dell
    acs = devs["0000:82:00.0"].acs_ctl
    assert (acs.src_valid, acs.trans_blk, acs.req_redir, acs.cmplt_redir, acs.upstream_fwd) == (True, False, True, True, True)
    assert devs["0000:82:00.0"].acs_cap.direct_trans is True
    assert devs["0000:17:01.0"].acs_ctl.req_redir is False
    assert devs["0000:00:0c.0"].acs_ctl.src_valid is True
    assert [d.bdf for d in r.devices if d.ats] == ["0000:6a:01.0", "0000:e7:01.0"]
    assert devs["0000:6a:01.0"].ats_enabled is False
    nvsw = [d for d in r.devices if d.device_id == "22a3"]
    assert [d.physical_slot for d in nvsw] == ["1", "2", "3", "4"]
    assert all(d.driver == "nvidia-nvswitch" and d.numa_node == 1 and d.cap_width == 2 for d in nvsw)
    assert devs["0000:19:00.0"].supported_speeds_gts == (2.5, 5.0, 8.0, 16.0, 32.0)
    assert devs["0000:19:00.0"].target_speed_gts == 32.0
    assert devs["0000:19:00.0"].equalization_complete is True


def test_nonroot_capabilities_denied_single_warning_and_nn_ids():
    r, devs = devices("hgx_h100_nvswitch_pmc_sierra_nonroot_fixture.txt")
    assert all(d.capabilities_denied for d in r.devices)
    assert all(d.cap_speed_gts is None and d.port_type is None and d.acs_ctl is None for d in r.devices)
    assert len(r.warnings) == 2 and "access denied" in r.warnings[1] and "5 device(s)" in r.warnings[1]
    assert r.warnings[0].startswith("line 69: a second 'IOMMU group' line for 0000:bf:00.0 says 468")
    br = devs["0000:bc:02.0"]
    assert (br.class_code, br.vendor_id, br.device_id, br.device_name) == ("0604", "11f8", "4128", None)
    assert (br.subsystem, br.subsystem_vendor_id, br.subsystem_device_id) == ("NVIDIA Corporation Device", "10de", "1643")
    assert (br.bus_secondary, br.iommu_group, br.numa_node) == ("bf", 82, 1)
    nvs = devs["0000:bd:00.0"]
    assert (nvs.class_name, nvs.class_code, nvs.device_name, nvs.rev) == ("Bridge", "0680", "GH100 [H100 NVSwitch]", "a1")
    assert nvs.physical_slot == "1-1"
    assert devs["0000:bf:00.0"].iommu_group == 82  # the first IOMMU group line wins over the trailing one


def test_bluefield_aarch64_single_device():
    r, devs = devices("bluefield2_dpu_aarch64_host_lspci_vvv_s_01_00_0.txt")
    d = devs["0000:01:00.0"]
    assert (d.port_type, d.express_version, d.cap_speed_gts, d.cap_width) == ("Endpoint", 2, 16.0, 16)
    assert (d.sta_speed_gts, d.sta_width, d.speed_downgraded, d.width_downgraded) == (16.0, 16, False, False)
    assert d.supported_speeds_gts == (2.5, 5.0, 8.0, 16.0)
    assert d.acs_ctl == lspci_verbose.AcsFlags(False, False, False, False, False, False, False)
    assert (d.numa_node, d.driver, d.rev, d.vendor_name) == (0, "mlx5_core", "01", "Mellanox Technologies")
    assert r.warnings == ()


def test_old_pciutils_format_has_no_annotations():
    r, devs = devices("desktop_gt730_gk208_old_lspci_format_billauer_partial.txt")
    d = devs["0000:17:00.0"]
    assert (d.port_type, d.cap_speed_gts, d.cap_width, d.sta_speed_gts, d.sta_width) == ("Legacy Endpoint", 5.0, 8, 2.5, 8)
    assert (d.sta_speed_note, d.speed_downgraded, d.width_downgraded) == (None, None, None)
    assert r.warnings == ("line(s) 3, 16: lines were elided ('[ ... ]'); fields there are missing",)


def test_concatenated_s_runs_new_pciutils_annotations():
    r, devs = devices("stelline_asus_esc8000a_e12_gpus_cx7_raid.txt")
    assert len(r.devices) == 8 and r.warnings == ()
    gpu = devs["0000:01:00.0"]
    assert (gpu.sta_speed_gts, gpu.speed_downgraded, gpu.width_downgraded, gpu.physical_slot) == (2.5, True, None, "3")
    cx7 = devs["0000:81:00.0"]
    assert (cx7.cap_speed_gts, cx7.sta_speed_gts, cx7.speed_downgraded, cx7.numa_node) == (32.0, 32.0, None, 1)
    raid = devs["0000:71:00.0"]
    assert (raid.cap_width, raid.sta_width, raid.width_downgraded) == (2, 1, True)


def test_grep_filtered_orphans_do_not_overwrite_headers():
    r, devs = devices("lenovo_genoa_grep_bridge_lnkcap_filtered_partial.txt")
    assert len(r.devices) == 14
    assert devs["0000:02:02.0"].cap_port == 3  # line 19's orphan 'Port #0' is not this bridge's
    assert devs["0000:00:05.1"].supported_speeds_gts == (2.5,)
    assert r.warnings == (
        "12 link/status line(s) (19-20, 27-34, 50-51) have no device header of their own (the output was filtered "
        "with grep?); they are ignored",
    )


def test_cut_capture_warns_and_keeps_plx_acs():
    r, devs = devices("broadwell_pex8747_downstream_and_titanx_partial.txt")
    assert devs["0000:03:08.0"].acs_cap.egress_ctrl is True and devs["0000:03:08.0"].acs_ctl.egress_ctrl is False
    assert devs["0000:04:00.0"].port_type == "Legacy Endpoint"
    assert len(r.warnings) == 1 and r.warnings[0].startswith("line 142:") and "cut short" in r.warnings[0]


def test_header_less_grep_output_is_an_error():
    with pytest.raises(ParseError) as info:
        lspci_verbose.parse(load("amd_mi350x_8gpu_lspci_d_1002_75a0_grep_devsta_lnksta_partial.txt"))
    assert (info.value.kind, info.value.line_no) == ("lspci_verbose", 1)
    assert "filtered with grep" in info.value.reason


def test_plain_nn_listing_with_domain():
    text = (
        "0000:19:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)\n"
        "0000:1a:00.0 Ethernet controller [0200]: Mellanox Technologies MT2910 Family [ConnectX-7] [15b3:1021]\n"
        "pcilib: sysfs_read_vpd: read failed: No such device\n"
    )
    r = lspci_verbose.parse(text)
    a, b = r.devices
    assert (a.bdf, a.class_code, a.vendor_id, a.device_id, a.device_name) == ("0000:19:00.0", "0302", "10de", "2330", "GH100 [H100 SXM5 80GB]")
    assert (b.device_id, b.rev, b.cap_speed_gts) == ("1021", None, None)
    assert "line(s) 3" in r.warnings[0]


def test_duplicate_block_and_unknown_speed():
    text = (
        "01:00.0 Ethernet controller: X\n\tLnkCap:\tPort #0, Speed unknown, Width x16\n"
        "\tLnkSta:\tSpeed unknown (downgraded), Width x0 (downgraded)\n\n01:00.0 Ethernet controller: X\n"
    )
    r = lspci_verbose.parse(text)
    d = r.devices[0]
    assert (d.cap_speed_gts, d.cap_width, d.sta_speed_gts, d.sta_width, d.width_downgraded) == (None, 16, None, 0, True)
    assert len(r.devices) == 1 and "already listed at line 1" in r.warnings[0]


def test_a_numa_node_that_is_not_a_number_is_left_unknown_with_the_line_named():
    # SYNTHETIC: a mangled "NUMA node: --1" (a hand-edited paste) and the kernel's "-1" (no affinity)
    text = ("01:00.0 3D controller: NVIDIA Corporation Device 2330\n\tNUMA node: --1\n\tIOMMU group: 7\n\n"
            "02:00.0 3D controller: NVIDIA Corporation Device 2330\n\tNUMA node: -1\n")
    r = lspci_verbose.parse(text)
    assert [(d.numa_node, d.iommu_group) for d in r.devices] == [(None, 7), (None, None)]
    assert list(r.warnings) == ["line 2: 'NUMA node: --1' of 0000:01:00.0 is not a number; left unknown"]


@pytest.mark.parametrize(
    "text,line_no,reason",
    [
        ("", 0, "empty"),
        ("\n \n", 0, "empty"),
        ("01:00.0 VGA compatible controller: X\nthis is not a detail line\n", 2, "expected a device header"),
        ("\tControl: I/O+ Mem+\n\tStatus: Cap+\n", 1, "not lspci -vv"),
        ("\n\t\tLnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)\n", 2, "filtered with grep"),
    ],
)
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        lspci_verbose.parse(text)
    assert info.value.kind == "lspci_verbose"
    assert info.value.line_no == line_no
    assert reason in info.value.reason


def test_pcie_helpers():
    assert [pcie_generation(s) for s in (2.5, 5, 8, 16, 32, 64)] == [1, 2, 3, 4, 5, 6]
    with pytest.raises(ValueError):
        pcie_generation(10)
    assert parse_link_speed("8 GT/s") == parse_link_speed("8.0 GT/s PCIe") == parse_link_speed("8GT/s") == 8.0
    assert parse_link_speed("Unknown") is None and parse_link_speed("Unknown speed") is None
    assert parse_link_width("x16") == 16 and parse_link_width("255") is None and parse_link_width("Unknown") is None


def test_detect():
    for path in sorted((FIX / "lspci_verbose").glob("*.txt")):
        assert lspci_verbose.detect(path.read_text()) >= 30, path.name
    assert lspci_verbose.detect(load(DELL)) == 95
    assert lspci_verbose.detect("0000:19:00.0 3D controller [0302]: NVIDIA Corporation Device [10de:2330]\n") == 70
    tree = (FIX / "lspci_tree" / "stelline_asus_esc8000a_e12.txt").read_text()
    assert lspci_verbose.detect(tree) == 0
    assert lspci_verbose.detect("CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n") == 0


MUTATION_SOURCES = (
    "bluefield2_dpu_aarch64_host_lspci_vvv_s_01_00_0.txt",
    "hgx_h100_nvswitch_pmc_sierra_nonroot_fixture.txt",
    "lenovo_genoa_grep_bridge_lnkcap_filtered_partial.txt",
    "desktop_gt730_gk208_old_lspci_format_billauer_partial.txt",
)

test_fuzz_any_text, test_fuzz_mutated_real_lines = safety_tests(
    lspci_verbose.parse, "lspci_verbose",
    mutated_lines(fixture_lines("lspci_verbose", MUTATION_SOURCES), max_size=20, reindent=lstrip),
    detect=lspci_verbose.detect)


def test_parsed_functions_are_whole_dataclasses():
    # parse() builds PciFunction records without __init__: every field must be set, and the
    # records must compare and hash like ones built the normal way
    fields = lspci_verbose._new_device("0000:00:00.0", 1)
    assert set(fields) == set(lspci_verbose.PciFunction.__dataclass_fields__)
    fast = lspci_verbose._function(dict(fields))
    normal = lspci_verbose.PciFunction(**fields)
    assert fast == normal and hash(fast) == hash(normal) and repr(fast) == repr(normal)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.bdf = "0000:00:01.0"


def test_dell_uncore_blocks_are_read_as_headers_only(dell):
    # the XE9680's 517 functions: 364 of its 367 "System peripheral" (two Intel DSA/IAX with ATS
    # and one more with a link are read whole), 20 "Generic system peripheral", 16 "Performance
    # counters" and five chipset functions are passed over after their header line
    r, devs = dell
    assert len(r.header_only) == 405
    assert Counter(devs[b].class_name for b in r.header_only) == {
        "System peripheral": 364, "Generic system peripheral": 20, "Performance counters": 16, "USB controller": 1,
        "RAM memory": 1, "Communication controller": 1, "SMBus": 1, "Serial bus controller": 1}
    first = devs["0000:00:00.0"]  # line 1: "00:00.0 System peripheral: Intel Corporation Device 09a2 (rev 20)"
    assert (first.line_no, first.name, first.vendor_name, first.device_id, first.rev) == (
        1, "Intel Corporation Device 09a2", "Intel Corporation", "09a2", "20")
    assert (first.numa_node, first.port_type, first.subsystem) == (None, None, None)  # detail lines not read
    # line 8570: a PMC-Sierra "Memory controller" function of the NVSwitch board, with a link: read whole
    mc = devs["0000:81:00.1"]
    assert mc.bdf not in r.header_only and mc.numa_node == 1 and mc.subsystem == "NVIDIA Corporation Device 1643"
    # every device after 7f:0a.5 (line 7231) keeps its own line number
    assert devs["0000:7f:0a.5"].line_no == 7231 and devs["0000:17:00.0"].line_no == 980


def test_header_only_classes_are_none_the_graph_keeps(dell):
    from apps.domain.assemble import assemble

    r, devs = dell
    facts = assemble({"lspci_verbose": r}, "xe9680")
    kept = {p.bdf for p in facts.pci}
    assert len(kept) == 108 and not kept & set(r.header_only)
    # the whole-machine analysis: 8 H100s, 12 NICs, the two LOW P06 findings (01:00.0 at x1 of
    # x2; 81:00.1, the "Memory controller" read whole for its link, at x2 of x16), and the same
    # layout fingerprint as when every line was read
    from apps.domain.analysis import analyze_host

    doc = analyze_host({"lspci_verbose": load(DELL)}, "xe9680").doc
    assert (len(doc["gpus"]), len(doc["nics"])) == (8, 12)
    assert [(f["rule"], f["severity"]) for f in doc["findings"]] == [("P06", "LOW"), ("P06", "LOW")]
    assert [f["message"][:12] for f in doc["findings"]] == ["0000:01:00.0", "0000:81:00.1"]
    assert doc["summary"]["fingerprint"] == "27ac7409659df896"


def test_header_only_block_keeps_noise_warnings_and_a_cut_last_block():
    # SYNTHETIC: a uncore function, a pcilib message inside its block, then a GPU cut short in AER
    text = (
        "00:00.0 System peripheral: Intel Corporation Device 09a2 (rev 20)\n\tNUMA node: 0\n"
        "pcilib: sysfs_read_vpd: read failed: No such device\n\tNUMA node: 1\n"
        "00:0b.0 Performance counters: Intel Corporation Device 3251\n"
        "\tCapabilities: [100 v1] Advanced Error Reporting\n"
    )
    r = lspci_verbose.parse(text)
    assert r.header_only == ("0000:00:00.0",) and r.devices[0].numa_node is None
    assert r.devices[1].line_no == 5
    assert r.warnings[0].startswith("line 6: the Advanced Error Reporting capability of 0000:00:0b.0")
    assert r.warnings[1] == "line(s) 3: skipped lines that are not lspci output (prompt or pcilib message)"


@pytest.mark.parametrize("name", sorted(p.name for p in (FIX / "lspci_verbose").glob("*.txt")
                                        if not p.name.endswith("_partial.txt") or "grep" not in p.name))
def test_the_plain_form_is_the_field_by_field_one(name):
    # to_jsonable of a function is one dict copy (register_plain): the same values, lists for
    # the tuples and plain dicts for the ACS flags, as the generic conversion gives
    from apps.domain.parsers import text

    try:
        r = lspci_verbose.parse(load(name))
    except ParseError:
        pytest.skip("not readable as a whole (its error is tested above)")
    for d in r.devices:
        plain, generic = text.to_jsonable(d), text.fields_jsonable(d)
        assert plain == generic and list(plain) == list(generic)
        assert {k: type(v) for k, v in plain.items()} == {k: type(v) for k, v in generic.items()}
    assert any(d.acs_ctl is not None for d in r.devices) or name != DELL
