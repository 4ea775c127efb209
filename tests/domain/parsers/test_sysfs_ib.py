"""sysfs_ib parser (the agent's /sys/class/infiniband listing).

The fixtures under fixtures/sysfs_ib are SYNTHETIC (``synthetic_*.txt``): listings in topoweb's own
format with values modelled on the real ibstat capture gpud_h100_8x_cx7_ndr_ib_plus_bluefield3_eth.txt
and invented PCI paths. The reference producers in the module docstring (Python and shell) are run
here against a fake sysfs tree, so the documented contract and the parser cannot drift apart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, ibstat, sysfs_ib
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def load(name: str) -> str:
    return (FIX / "sysfs_ib" / name).read_text()


def test_eight_ndr_rails_and_bluefield_bond_with_pci_and_netdevs():
    r = sysfs_ib.parse(load("synthetic_h100_8x_cx7_ndr_ib_plus_bf3_eth_bond.txt"))
    assert r.source == "sysfs_ib" and r.warnings == ()
    by = {c.name: c for c in r.cas}
    c0 = by["mlx5_0"]
    assert c0.device_path == "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0"
    assert c0.bdf == "0000:18:00.0"
    assert c0.pci_path == ("0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0")
    assert c0.netdevs == ("ibp24s0",) and c0.num_ports == 1
    p = c0.ports[0]
    assert (p.state, p.phys_state, p.rate_gbps, p.width, p.speed_name) == ("Active", "LinkUp", 400, "4X", "NDR")
    assert (p.base_lid, p.sm_lid, p.lmc, p.link_layer) == (0x80, 1, 0, "InfiniBand")
    assert (c0.ca_type, c0.firmware_version, c0.board_id) == ("MT4129", "28.41.1000", "MT_0000000838")
    bond = by["mlx5_bond_0"]
    assert (bond.bdf, bond.netdevs, bond.ports[0].rate_gbps, bond.ports[0].speed_name) == (
        "0000:aa:00.0", ("enp170s0f0np0",), 200, "HDR")
    v2 = [(g.index, g.gid, g.ndev) for g in bond.ports[0].gids if g.type == "RoCE v2"]
    assert v2 == [(1, "fe80:0000:0000:0000:201d:97ff:fe00:56cf", "bond0"),
                  (3, "0000:0000:0000:0000:0000:ffff:0a0a:0105", "bond0")]


def test_same_records_as_ibstat_of_the_node_it_was_modelled_on():
    listing = sysfs_ib.parse(load("synthetic_h100_8x_cx7_ndr_ib_plus_bf3_eth_bond.txt"))
    real = ibstat.parse((FIX / "ibstat" / "gpud_h100_8x_cx7_ndr_ib_plus_bluefield3_eth.txt").read_text())
    assert listing.port_guids == real.port_guids
    for a, b in zip(listing.cas, real.cas):
        pa, pb = a.ports[0], b.ports[0]
        assert (a.name, a.node_guid, a.ca_type, a.firmware_version) == (b.name, b.node_guid, b.ca_type, b.firmware_version)
        assert (pa.state, pa.phys_state, pa.rate_gbps, pa.base_lid, pa.sm_lid, pa.capability_mask, pa.link_layer) == (
            pb.state, pb.phys_state, pb.rate_gbps, pb.base_lid, pb.sm_lid, pb.capability_mask, pb.link_layer)


def test_one_rail_down_polling():
    r = sysfs_ib.parse(load("synthetic_h100_8x_cx7_mlx5_5_down_polling.txt"))
    down = [(c.name, c.ports[0]) for c in r.cas if c.ports[0].state != "Active"]
    assert [n for n, _ in down] == ["mlx5_5"]
    p = down[0][1]
    assert (p.state_raw, p.phys_state_raw, p.rate_gbps, p.speed_name, p.base_lid, p.sm_lid) == (
        "1: DOWN", "2: Polling", 10, "SDR", 0xFFFF, 0)


def test_cut_listing_is_read_and_flagged():
    r = sysfs_ib.parse(load("synthetic_h100_listing_cut_short.txt"))
    assert [c.name for c in r.cas][-1] == "mlx5_6" and r.cas[-1].ports[0].rate_gbps is None
    assert r.warnings == ("no closing 'end' line: the listing may be cut short",)


def test_empty_node_unknown_keys_and_versions():
    assert sysfs_ib.parse("# topoweb sysfs_ib v1\nend\n").cas == ()
    r = sysfs_ib.parse("# topoweb sysfs_ib v2\nca rxe0\nnode_type 1: CA\nfuture_key 1\nport 1 speed_x 9\n"
                       "port 1 gid_type 5 RoCE v2\nend\n")
    (c,) = r.cas
    assert c.bdf is None and c.pci_path == () and c.ports[0].gids == ()
    assert r.warnings == ("line 1: listing format v2; read as v1", "line 4: unknown key 'future_key' skipped",
                          "line 5: unknown port attribute 'speed_x' skipped",
                          "port 1 of CA 'rxe0': gid_type/gid_ndev for GID 5 without a 'gid 5' line; ignored",
                          "port 1 of CA 'rxe0' lists no attributes (listing cut?)")


def test_device_path_without_pci_address_is_flagged():
    r = sysfs_ib.parse("# topoweb sysfs_ib v1\nca siw0\ndevice /sys/devices/virtual/infiniband/siw0\nend\n")
    assert r.cas[0].bdf is None and r.cas[0].device_path == "/sys/devices/virtual/infiniband/siw0"
    assert r.warnings == ("CA 'siw0': device path '/sys/devices/virtual/infiniband/siw0' holds no PCI address",)


@pytest.mark.parametrize(
    "text,line_no,reason",
    [
        ("", 0, "empty"),
        ("# topoweb sysfs_ib v1\nport 1 state 4: ACTIVE\n", 2, "'ca <name>' before any other line"),
        ("ca mlx5_0\nport one state 4: ACTIVE\n", 2, "expected 'port <number> <attribute> <value>'"),
        ("ca mlx5_0\nport 1 state\n", 2, "expected 'port <number>"),
        ("ca mlx5_0\nport 1 gid x fe80::1\n", 2, "expected 'port 1 gid <index> <value>'"),
        ("ca mlx5_0\nca mlx5_0\n", 2, "listed twice"),
        ("ca mlx5_0\nend\nca mlx5_1\n", 3, "after the 'end' line"),
        ("ca mlx5_0\nport 1 lid 12g\n", 2, "'lid' of port 1 of CA 'mlx5_0' is not a hex number"),
        ("ca mlx5_0\nport 1 rate fast\n", 2, "'rate' of port 1"),
        ("ca mlx5_0\nnode_guid 12\n", 2, "not a GUID"),
        ("ca mlx5_0\nfw_ver\n", 2, "without a value"),
        ("ca two names\n", 1, "one CA name"),
    ],
)
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        sysfs_ib.parse(text)
    assert (info.value.kind, info.value.line_no) == ("sysfs_ib", line_no)
    assert reason in info.value.reason


def test_detect():
    for path in sorted((FIX / "sysfs_ib").glob("*.txt")):
        assert sysfs_ib.detect(path.read_text()) == 100
        assert detect_kind(path.read_text()) == "sysfs_ib"
    assert sysfs_ib.detect("ca mlx5_0\nport 1 state 4: ACTIVE\n") == 70
    for kind in ("ibstat", "ibstatus", "ibv_devinfo", "nvidia_smi_nvlink"):
        for path in sorted((FIX / kind).glob("*.txt")):
            assert sysfs_ib.detect(path.read_text()) == 0, path


# --- the documented producers, run against a fake /sys -------------------------------------------


def _snippet(start: str, end: str) -> str:
    doc = sysfs_ib.__doc__
    body = doc[doc.index(start) + len(start): doc.index(end)]
    return textwrap.dedent(body.split("::", 1)[1] if "::" in body.split("\n", 1)[0] else body)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _fake_sysfs(tmp: Path) -> Path:
    root = tmp / "class" / "infiniband"
    dev = tmp / "devices" / "pci0000:15" / "0000:15:01.0" / "0000:16:00.0" / "0000:17:00.0" / "0000:18:00.0"
    (dev / "net" / "ibp24s0").mkdir(parents=True)
    ca = root / "mlx5_0"
    ca.mkdir(parents=True)
    os.symlink(dev, ca / "device")
    for name, value in [("node_guid", "58a2:e103:00a7:820e"), ("sys_image_guid", "58a2:e103:00a7:820e"),
                        ("fw_ver", "28.41.1000"), ("hw_rev", "0"), ("hca_type", "MT4129"),
                        ("board_id", "MT_0000000838"), ("node_type", "1: CA"), ("node_desc", "")]:
        _write(ca / name, value)
    port = ca / "ports" / "1"
    for name, value in [("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"), ("rate", "400 Gb/sec (4X NDR)"),
                        ("link_layer", "InfiniBand"), ("lid", "0x80"), ("lid_mask_count", "0"), ("sm_lid", "0x1"),
                        ("sm_sl", "0"), ("cap_mask", "0xa751e848")]:
        _write(port / name, value)
    _write(port / "gids" / "0", "fe80:0000:0000:0000:58a2:e103:00a7:820e")
    for i in (1, 2, 10):
        _write(port / "gids" / str(i), "0000:0000:0000:0000:0000:0000:0000:0000")
    _write(port / "gid_attrs" / "types" / "0", "IB/RoCE v1")
    # soft-RoCE device: no PCI device link, GIDs with netdevs, unsorted-looking GID indexes
    rxe = root / "rxe0" / "ports" / "1"
    for name, value in [("state", "1: DOWN"), ("phys_state", "3: Disabled"), ("rate", "2.5 Gb/sec (1X SDR)"),
                        ("link_layer", "Ethernet"), ("lid", "0x0"), ("sm_lid", "0x0")]:
        _write(rxe / name, value)
    for i, gid, typ in [(0, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "IB/RoCE v1"),
                        (1, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "RoCE v2"),
                        (10, "0000:0000:0000:0000:0000:ffff:c0a8:0102", "RoCE v2")]:
        _write(rxe / "gids" / str(i), gid)
        _write(rxe / "gid_attrs" / "types" / str(i), typ)
        _write(rxe / "gid_attrs" / "ndevs" / str(i), "eth0")
    return root


def _check(result) -> None:
    assert [c.name for c in result.cas] == ["mlx5_0", "rxe0"]
    mlx, rxe = result.cas
    assert mlx.bdf == "0000:18:00.0" and mlx.netdevs == ("ibp24s0",)
    assert mlx.pci_path == ("0000:15:01.0", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0")
    assert mlx.ports[0].port_guid == "0x58a2e10300a7820e" and len(mlx.ports[0].gids) == 1
    assert (mlx.ports[0].rate_gbps, mlx.ports[0].base_lid, mlx.ports[0].sm_lid) == (400, 128, 1)
    assert rxe.bdf is None
    assert [(g.index, g.type, g.ndev) for g in rxe.ports[0].gids] == [
        (0, "IB/RoCE v1", "eth0"), (1, "RoCE v2", "eth0"), (10, "RoCE v2", "eth0")]
    assert (rxe.ports[0].state, rxe.ports[0].phys_state, rxe.ports[0].rate_gbps) == ("Down", "Disabled", 2.5)


def test_documented_python_producer_round_trips(tmp_path):
    root = _fake_sysfs(tmp_path)
    code = _snippet("Reference producer (Python 3.6+", "The same, line by line, in shell")
    namespace: dict = {}
    exec(compile(code, "sysfs_ib_reference_producer", "exec"), namespace)  # noqa: S102 - our own docstring
    listing = namespace["sysfs_ib"](str(root))
    assert listing.startswith(sysfs_ib.HEADER + "\n") and listing.endswith("end\n")
    result = sysfs_ib.parse(listing)
    _check(result)
    assert result.warnings == ()  # rxe0 has no device link at all, so no device line and nothing to flag


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_documented_shell_producer_gives_the_same_listing(tmp_path):
    root = _fake_sysfs(tmp_path)
    code = _snippet("The same, line by line, in shell", "Result\n======")
    script = code.replace("/sys/class/infiniband", str(root))
    shell = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, timeout=60).stdout
    namespace: dict = {}
    exec(compile(_snippet("Reference producer (Python 3.6+", "The same, line by line, in shell"), "p", "exec"),
         namespace)  # noqa: S102
    assert shell == namespace["sysfs_ib"](str(root))
    _check(sysfs_ib.parse(shell))


test_fuzz_any_text, test_fuzz_mutated_lines = safety_tests(
    sysfs_ib.parse, "sysfs_ib", mutated_lines(fixture_lines("sysfs_ib"), max_size=25), detect=sysfs_ib.detect)
