"""sysfs_pci (topoweb agent listing) parser: synthetic fixtures, the agent reference code, errors, fuzzing."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from hypothesis import strategies as st

from apps.domain.errors import ParseError
from apps.domain.parsers import sysfs_pci
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"
HEAD = "# topoweb sysfs_pci v1\n# columns: " + " ".join(sysfs_pci.V1_COLUMNS) + "\n"


def load(name: str) -> str:
    return (FIX / "sysfs_pci" / name).read_text()


def devs(name: str):
    r = sysfs_pci.parse(load(name))
    return r, {d.bdf: d for d in r.devices}


def row(path, *values):
    vals = list(values) + ["-"] * (len(sysfs_pci.V1_COLUMNS) - 1 - len(values))
    return "\t".join([path] + vals) + "\n"


def test_hgx_h100_layout_ancestry_numa_links():
    r, d = devs("synthetic_dell_xe9680_hgx_h100_8gpu.txt")
    assert r.warnings == () and len(r.devices) == 102
    gpus = [x for x in r.devices if x.class_code == "0302"]
    assert [g.bdf for g in gpus] == [f"0000:{b}:00.0" for b in ("19", "3b", "4c", "5d", "9b", "bb", "cb", "db")]
    g = d["0000:3b:00.0"]
    assert g.ancestry == ("0000:37:01.0", "0000:38:00.0", "0000:39:01.0") and g.root_complex == "pci0000:37"
    assert (g.vendor_id, g.device_id, g.prog_if, g.numa_node, g.driver) == ("10de", "2330", "00", 0, "nvidia")
    assert (g.current_link_speed_gts, g.current_link_width, g.max_link_speed_gts, g.max_link_width) == (32.0, 16, 32.0, 16)
    assert g.local_cpulist == "0-55,112-167"
    assert [x.numa_node for x in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    # GPU and its rail NIC share the PEX890xx switch (same upstream port)
    assert d["0000:3c:00.0"].ancestry[:2] == g.ancestry[:2]
    nvsw = d["0000:84:00.0"]
    assert nvsw.ancestry == ("0000:80:01.0", "0000:81:00.0", "0000:82:01.0") and nvsw.max_link_width == 2
    root = d["0000:15:01.0"]
    assert root.ancestry == () and root.root_complex == "pci0000:15"


def test_downtrained_gpu_is_visible():
    r, d = devs("synthetic_hgx_h100_socket0_gpu_downtrained_x8.txt")
    narrow = [x.bdf for x in r.devices if x.class_code == "0302" and x.current_link_width < x.max_link_width]
    assert narrow == ["0000:3b:00.0"]
    assert (d["0000:3b:00.0"].current_link_width, d["0000:3b:00.0"].max_link_width) == (8, 16)
    assert {x.numa_node for x in r.devices} == {0}


def test_old_kernel_spelling_unknown_and_missing():
    r, d = devs("synthetic_broadwell_4x_titanx_pex8747_kernel54.txt")
    assert r.warnings == ()
    gpu = d["0000:08:00.0"]
    assert gpu.ancestry == ("0000:00:03.0", "0000:06:00.0", "0000:07:08.0")
    assert (gpu.current_link_speed_gts, gpu.max_link_speed_gts, gpu.numa_node) == (2.5, 8.0, None)
    empty = d["0000:00:01.0"]
    assert (empty.current_link_speed_gts, empty.current_link_width, empty.max_link_speed_gts) == (None, 0, 8.0)
    host = d["0000:00:00.0"]
    assert (host.class_code, host.current_link_speed_gts, host.max_link_width, host.driver) == ("0600", None, None, None)


def test_width_255_unknown_vmd_and_azure_paths():
    text = HEAD + row(
        "/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0",
        "0x010802", "0x144d", "0xa80a", "0", "Unknown", "255", "16.0 GT/s PCIe", "Unknown",
    ) + row(
        "/sys/devices/LNXSYSTM:00/LNXSYBUS:00/PNP0A03:00/device:07/VMBUS:01/47505500-0001-0000-3130-444531303244/pci0001:00/0001:00:00.0",
        "0x030200", "0x10de", "0x20b5", "-1",
    )
    r = sysfs_pci.parse(text)
    nvme, gpu = r.devices
    assert (nvme.bdf, nvme.ancestry, nvme.root_complex) == ("10000:e1:00.0", ("10000:e0:06.0",), "pci10000:e0")
    assert (nvme.current_link_speed_gts, nvme.current_link_width, nvme.max_link_width) == (None, None, None)
    assert (gpu.bdf, gpu.root_complex, gpu.ancestry, gpu.numa_node) == ("0001:00:00.0", "pci0001:00", (), None)
    assert r.warnings == ()


def test_columns_by_name_and_missing_header():
    text = "# topoweb sysfs_pci v1\n# columns: path numa_node vendor extra\n/sys/devices/pci0000:00/0000:00:01.0\t1\t0x8086\tz\n"
    d = sysfs_pci.parse(text).devices[0]
    assert (d.numa_node, d.vendor_id, d.class_code, d.current_link_width) == (1, "8086", None, None)
    r = sysfs_pci.parse(row("/sys/devices/pci0000:00/0000:00:01.0", "0x060400"))
    assert r.devices[0].class_code == "0604"
    assert r.warnings[0].startswith("no '# topoweb sysfs_pci v1' first line") and "no '# columns:' header" in r.warnings[1]


def test_unreadable_values_and_duplicates_warn():
    text = HEAD + row("/sys/devices/pci0000:00/0000:00:01.0", "class?", "0x8086", "0x6f02", "zero", "fast")
    text += row("/sys/devices/pci0000:00/0000:00:01.0")
    r = sysfs_pci.parse(text)
    d = r.devices[0]
    assert (d.class_code, d.numa_node, d.current_link_speed_gts) == (None, None, None)
    assert [w.split(": ", 2)[2][:22] for w in r.warnings[:3]] == ["cannot read class 'cla", "cannot read numa_node ", "cannot read current_li"]
    assert "already listed at line 3" in r.warnings[3] and len(r.devices) == 1


@pytest.mark.parametrize(
    "text,line_no,reason",
    [
        ("", 0, "empty"),
        (HEAD, 0, "no device lines"),
        (HEAD + "/sys/devices/pci0000:00/0000:00:01.0\t0x060400\n", 3, "expected 11 tab-separated fields"),
        (HEAD + row("sys/devices/pci0000:00/0000:00:01.0"), 3, "absolute sysfs path"),
        (HEAD + row("/sys/devices/pci0000:00/not-a-device"), 3, "must end in a PCI address"),
        ("# topoweb sysfs_pci v1\n# columns: class vendor\n", 2, "'path' column"),
        ("# topoweb sysfs_pci v1\n# columns: path path\n", 2, "names a column twice"),
    ],
)
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        sysfs_pci.parse(text)
    assert info.value.kind == "sysfs_pci"
    assert info.value.line_no == line_no
    assert reason in info.value.reason


def _reference_agent_code() -> str:
    doc = sysfs_pci.__doc__
    start = doc.index("Reference agent code (Python 3.6 stdlib)::") + len("Reference agent code (Python 3.6 stdlib)::")
    end = doc.index("Example line")
    return textwrap.dedent(doc[start:end])


def test_reference_agent_code_in_docstring_produces_parseable_listing(tmp_path):
    """The agent is written from the module docstring: its snippet must produce what parse() reads."""
    devices = tmp_path / "sys" / "devices" / "pci0000:17"
    gpu = devices / "0000:17:00.0" / "0000:18:00.0" / "0000:19:00.0"
    gpu.mkdir(parents=True)
    attrs = {
        "class": "0x030200\n", "vendor": "0x10de\n", "device": "0x2330\n", "numa_node": "0\n",
        "current_link_speed": "32.0 GT/s PCIe\n", "current_link_width": "16\n",
        "max_link_speed": "32.0 GT/s PCIe\n", "max_link_width": "16\n", "local_cpulist": "0-55,112-167\n",
    }
    for name, value in attrs.items():
        (gpu / name).write_text(value)
    drivers = tmp_path / "sys" / "bus" / "pci" / "drivers" / "nvidia"
    drivers.mkdir(parents=True)
    os.symlink(drivers, gpu / "driver")
    bridge = devices / "0000:17:00.0"
    (bridge / "class").write_text("0x060400\n")  # nothing else readable: every other column is '-'
    by_bdf = tmp_path / "sys" / "bus" / "pci" / "devices"
    by_bdf.mkdir(parents=True)
    os.symlink(gpu, by_bdf / "0000:19:00.0")
    os.symlink(bridge, by_bdf / "0000:17:00.0")
    scope: dict = {}
    exec(compile(_reference_agent_code(), "sysfs_pci reference agent", "exec"), scope)
    listing = scope["sysfs_pci_listing"](str(by_bdf))
    r = sysfs_pci.parse(listing)
    assert r.warnings == ()
    br, g = r.devices
    assert (br.bdf, br.class_code, br.vendor_id, br.driver, br.root_complex) == ("0000:17:00.0", "0604", None, None, "pci0000:17")
    assert g.bdf == "0000:19:00.0" and g.ancestry == ("0000:17:00.0", "0000:18:00.0")
    assert (g.class_code, g.device_id, g.numa_node, g.current_link_speed_gts, g.max_link_width) == ("0302", "2330", 0, 32.0, 16)
    assert (g.local_cpulist, g.driver) == ("0-55,112-167", "nvidia")


def test_detect():
    for path in sorted((FIX / "sysfs_pci").glob("*.txt")):
        assert sysfs_pci.detect(path.read_text()) == 100
    bare = "/sys/devices/pci0000:00/0000:00:01.0\t0x060400\t0x8086\n"
    assert sysfs_pci.detect(bare) == 80
    assert sysfs_pci.detect((FIX / "lspci_tree" / "stelline_asus_esc8000a_e12.txt").read_text()) == 0
    assert sysfs_pci.detect("0000:19:00.0 3D controller: NVIDIA Corporation Device 2330\n") == 0


test_fuzz_any_text, test_fuzz_mutated_real_lines = safety_tests(
    sysfs_pci.parse, "sysfs_pci",
    mutated_lines(fixture_lines("sysfs_pci"), max_size=10, replacement=st.sampled_from(["\t", "-", "/", ":", "x", ""])),
    detect=sysfs_pci.detect)
