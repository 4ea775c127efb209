"""lspci -tv / -t tree parser: real captures (fixtures/lspci_tree), error paths, detect, fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import lspci_tree
from tests.domain.parsers.properties import add_spaces, fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def load(name: str) -> str:
    return (FIX / "lspci_tree" / name).read_text()


def tree(name: str):
    return lspci_tree.parse(load(name))


def by_bdf(result):
    return {d.bdf: d for d in result.devices}


def chain(result, bdf: str) -> list[str]:
    devs = by_bdf(result)
    out = []
    cur = devs[bdf].parent_bdf
    while cur is not None:
        out.append(cur)
        cur = devs[cur].parent_bdf
    return out


def test_genoa_multi_root_and_gpu_parent_chain():
    r = tree("stelline_asus_esc8000a_e12.txt")
    assert [x.id for x in r.roots] == [f"0000:{b}" for b in ("00", "20", "40", "60", "80", "a0", "c0", "e0")]
    devs = by_bdf(r)
    gpus = [d.bdf for d in r.devices if d.name and "RTX 6000 Ada" in d.name]
    assert gpus == ["0000:01:00.0", "0000:41:00.0", "0000:c1:00.0", "0000:e1:00.0"]
    gpu = devs["0000:c1:00.0"]
    assert (gpu.parent_bdf, gpu.root, gpu.depth) == ("0000:c0:01.1", "0000:c0", 1)
    assert devs["0000:c0:01.1"].secondary_bus_range == "c1"
    # NVMe behind two switch levels of the HighPoint card: bus from each bridge's range
    assert chain(r, "0000:65:00.0") == ["0000:64:10.0", "0000:63:00.0", "0000:62:00.0", "0000:61:00.0", "0000:60:01.1"]
    assert devs["0000:65:00.0"].depth == 5
    assert devs["0000:61:00.0"].secondary_bus_range == "62-73"
    # multi-function CX-7 on one root port
    assert devs["0000:21:00.1"].parent_bdf == "0000:20:03.1"
    assert "0000:20:03.1" in r.roots[1].children and "0000:21:00.0" not in r.roots[1].children
    assert r.warnings == ()


def test_single_root_desktop_chipset_daisy_chain():
    r = tree("desktop_am5_rtx3090_rtx5060ti.txt")
    assert [x.id for x in r.roots] == ["0000:00"]
    devs = by_bdf(r)
    assert devs["0000:01:00.0"].name == "NVIDIA Corporation GA102 [GeForce RTX 3090]"
    assert devs["0000:03:00.0"].name == "NVIDIA Corporation GB206 [GeForce RTX 5060 Ti]"
    assert chain(r, "0000:13:00.0") == ["0000:0c:0c.0", "0000:0b:00.0", "0000:05:08.0", "0000:04:00.0", "0000:00:02.1"]
    assert devs["0000:05:00.0"].secondary_bus_range == "06"  # an empty chipset downstream port
    assert r.warnings == ()


def test_aws_snippet_indented_partial_with_empty_bridges():
    r = tree("aws_p5en_h200_efa_snippet_partial.txt")
    assert [x.id for x in r.roots] == ["0000:44"]
    devs = by_bdf(r)
    h200 = [d.bdf for d in r.devices if d.name and "H200" in d.name]
    assert h200 == ["0000:59:00.0", "0000:5a:00.0"]
    assert chain(r, "0000:59:00.0") == ["0000:46:02.2", "0000:45:00.0", "0000:44:00.0"]
    assert devs["0000:46:00.4"].secondary_bus_range == "4b"
    assert not any(d.parent_bdf == "0000:46:00.4" for d in r.devices)
    assert any("cut short" in w for w in r.warnings)


def test_broadwell_elided_lines_warn_and_plx_switch_resolves():
    r = tree("broadwell_4x_titanx_2x_pex8747_partial.txt")
    assert [x.id for x in r.roots] == ["0000:ff", "0000:00"]
    titans = [d.bdf for d in r.devices if d.name == "NVIDIA Corporation GP102 [TITAN X]"]
    assert titans == ["0000:04:00.0", "0000:05:00.0", "0000:08:00.0", "0000:09:00.0"]
    assert chain(r, "0000:09:00.0") == ["0000:07:10.0", "0000:06:00.0", "0000:00:03.0"]
    elided = [w for w in r.warnings if "elided" in w]
    assert [w.split(":")[0] for w in elided] == ["line 2", "line 14"]


def test_igx_orin_arm_domains_and_lost_leading_space():
    r = tree("holohub_igx_orin_a6000_cx7.txt")
    assert [x.id for x in r.roots] == ["0007:00", "0005:00", "0004:00", "0001:00", "0000:00"]
    assert r.roots[-1].children == ()
    devs = by_bdf(r)
    a6000 = devs["0005:09:00.0"]
    assert a6000.name == "NVIDIA Corporation GA102GL [RTX A6000]"
    assert chain(r, "0005:09:00.0") == ["0005:08:00.0", "0005:07:00.0", "0005:02:02.0", "0005:01:00.0", "0005:00:00.0"]
    assert devs["0005:03:00.1"].parent_bdf == "0005:02:00.0"
    assert any("one column off" in w and "2, 7-8, 14" in w for w in r.warnings)


def test_fragments_without_root_keep_resolvable_devices_and_skip_the_unknown_top():
    r = tree("host_2x_converged_a100x_bf2_dpu_fragments_kata_vra_partial.txt")
    assert r.roots == ()
    devs = by_bdf(r)
    assert devs["0000:de:00.0"].name == "NVIDIA Corporation GA100 [A100X]"
    assert chain(r, "0000:de:00.0") == ["0000:dd:08.0", "0000:dc:00.0", "0000:d9:01.0", "0000:d8:00.0"]
    assert devs["0000:d8:00.0"].parent_bdf is None and devs["0000:d8:00.0"].root is None
    unknown = [w for w in r.warnings if "bus number is unknown" in w]
    assert [w.split(":")[0] for w in unknown] == ["line 1", "line 6"]
    assert "0000:00:00.0" not in devs  # never guessed


def test_kata_vm_leading_space_and_empty_root_ports():
    r = tree("kata_vm_q35_root_ports_2x_a100x_2x_bf2.txt")
    devs = by_bdf(r)
    assert devs["0000:03:00.0"].name == "NVIDIA Corporation Device 20b8"
    assert devs["0000:03:00.0"].parent_bdf == "0000:00:06.0"
    assert [devs[f"0000:00:{d}.0"].secondary_bus_range for d in ("08", "09", "0a", "0b")] == ["05", "06", "07", "08"]
    assert len(r.roots[0].children) == 17
    assert sum("one column off" in w for w in r.warnings) == 1


def test_lspci_t_without_names_descending_roots():
    r = tree("qemu_q35_pxb_pcie_2numa_vfio_lspci_t.txt")
    assert [x.id for x in r.roots] == ["0000:80", "0000:02", "0000:00"]
    assert all(d.name is None for d in r.devices)
    assert by_bdf(r)["0000:82:00.0"].parent_bdf == "0000:80:01.0"
    assert r.warnings == ()


def test_qemu_pxb_partial_unnamed_h200():
    r = tree("qemu_vm_pxb_pcie_8xh200_cx7_partial.txt")
    gpus = [d for d in r.devices if d.name == "NVIDIA Corporation Device 2335"]
    assert len(gpus) == 8
    assert chain(r, "0000:cc:00.0") == ["0000:ca:01.0", "0000:c9:00.0", "0000:c8:00.0"]
    assert any("line(s) 17" in w and "cut short" in w for w in r.warnings)


def test_l2fwd_partial_gpu_and_nic_share_plx_switch():
    r = tree("nvidia_l2fwd_nv_gigabyte_e251_cx6dx_v100_pex8747_partial.txt")
    devs = by_bdf(r)
    assert devs["0000:b6:00.0"].name == "NVIDIA Corporation GV100GL [Tesla V100 PCIe 32GB]"
    assert chain(r, "0000:b6:00.0")[1:] == chain(r, "0000:b5:00.1")[1:] == ["0000:b3:00.0", "0000:b2:00.0"]


def test_prompt_line_is_skipped_with_warning():
    r = lspci_tree.parse("$ lspci -tv\n-[0000:00]-+-00.0  Host bridge\n           \\-01.0-[01]----00.0  GPU\n")
    assert [d.bdf for d in r.devices] == ["0000:00:00.0", "0000:00:01.0", "0000:01:00.0"]
    assert r.warnings[0].startswith("line 1: skipped")


def test_wide_vmd_domain_keeps_its_digits():
    r = lspci_tree.parse("-[10000:e0]-+-06.0-[e1]----00.0  NVMe\n")
    assert [d.bdf for d in r.devices] == ["10000:e0:06.0", "10000:e1:00.0"]


@pytest.mark.parametrize(
    "text,line_no,reason",
    [
        ("", 0, "empty"),
        ("  \n\n", 0, "empty"),
        ("-[0000:00]-+-00.0  A\nhello world\n", 2, "expected lspci -t tree art"),
        ("-[0000:00]-+-zz.0  A\n", 1, "device address"),
        ("-[0000:00]-+-00.0-[01]--x\n", 1, "after the bus"),
        ("-[0000:00]-+-00.0xyz\n", 1, "unexpected text after device address"),
        ("-[0000:00]-+-00.0  A\n           +-[zz]-\n", 2, "malformed root bus tag"),
        ("$ lspci -tv\n", 0, "no tree lines"),
    ],
)
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        lspci_tree.parse(text)
    assert info.value.kind == "lspci_tree"
    assert info.value.line_no == line_no
    assert reason in info.value.reason


def test_detect():
    for path in sorted((FIX / "lspci_tree").glob("*.txt")):
        assert lspci_tree.detect(path.read_text()) >= 60, path.name
    assert lspci_tree.detect(load("stelline_asus_esc8000a_e12.txt")) == 95
    vvv = (FIX / "lspci_verbose" / "bluefield2_dpu_aarch64_host_lspci_vvv_s_01_00_0.txt").read_text()
    assert lspci_tree.detect(vvv) == 0
    assert lspci_tree.detect("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-55\n") == 0
    assert lspci_tree.detect("# topoweb sysfs_pci v1\n/sys/devices/pci0000:00/0000:00:01.0\t-\n") == 0


test_fuzz_any_text, test_fuzz_mutated_real_lines = safety_tests(
    lspci_tree.parse, "lspci_tree", mutated_lines(fixture_lines("lspci_tree"), max_size=12, reindent=add_spaces(3)), detect=lspci_tree.detect)
