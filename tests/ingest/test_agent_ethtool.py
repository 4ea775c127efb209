"""The agent's ethtool_stats section: ``ethtool -S`` of each RoCE netdev of an RDMA device, on the fake sysfs tree
of test_agent.py turned into a RoCE port (synthetic), with a fake ethtool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apps.domain.parsers import KINDS
from tests.ingest.test_agent import AGENT_PYTHONS, fake_bin, make_fake_sysfs, run_agent, write_script  # noqa: F401

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ethtool_stats"
# SYNTHETIC: what `ethtool -S` prints for an mlx5 port (counter names of the kernel's mlx5 counters.rst)
ETHTOOL_OUT = ("NIC statistics:\n     rx_packets: 1733425\n     rx_pause_ctrl_phy: 0\n     tx_pause_ctrl_phy: 0\n"
               "     rx_discards_phy: 4211\n     rx_prio3_pause: 918211\n     tx_pause_storm_warning_events: 3\n")


def roce_sysfs(root: Path) -> None:
    """The fake tree with mlx5_0 port 1 on Ethernet: netdev ens26np0 (dev_port 0) and a VF-like ens26v0 without stats."""
    make_fake_sysfs(root)
    hca = (root / "class" / "infiniband" / "mlx5_0" / "device").resolve()
    (hca / "net" / "ibp26s0").rmdir()
    for name in ("ens26np0", "ens26v0"):
        (hca / "net" / name).mkdir()
        (hca / "net" / name / "dev_port").write_text("0\n")
    (root / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "link_layer").write_text("Ethernet\n")


@pytest.mark.parametrize("python", AGENT_PYTHONS)
def test_ethtool_s_of_each_roce_netdev_is_one_section(tmp_path, fake_bin, python):  # noqa: F811
    bin_dir, _ = fake_bin
    out = tmp_path / "ethtool.out"
    out.write_text(ETHTOOL_OUT)
    write_script(bin_dir / "ethtool", f"""case "$2" in
  ens26np0) cat {out};;
  *) echo "no stats available" >&2; exit 94;;
esac
""")
    sysfs = tmp_path / "sys"
    roce_sysfs(sysfs)
    result = run_agent("--dry-run", "--sysfs-root", str(sysfs), env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, python=python)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    text = report["sections"]["ethtool_stats"]
    assert text.splitlines()[:3] == ["# topoweb ethtool_stats v1", "interface ens26np0 ca mlx5_0 port 1",
                                     "NIC statistics:"]
    parsed = KINDS["ethtool_stats"].parse(text)
    (iface,) = parsed.interfaces
    assert (iface.name, iface.ca, iface.port) == ("ens26np0", "mlx5_0", 1)
    assert iface.discards["rx_discards_phy"] == 4211 and iface.pause["per_priority"] == {"3": {"rx": 918211, "tx": None}}
    assert parsed.unavailable == {"ens26v0": "ethtool exited with status 94: no stats available"}
    assert report["meta"]["collector"]["ethtool_stats"]["command"] == "ethtool -S <RoCE netdev>"


def test_no_ethtool_or_no_roce_port_is_unavailable_with_the_reason(tmp_path, fake_bin):  # noqa: F811
    bin_dir, _ = fake_bin
    sysfs = tmp_path / "sys"
    roce_sysfs(sysfs)
    report = json.loads(run_agent("--dry-run", "--sysfs-root", str(sysfs), env={"PATH": str(bin_dir)}).stdout)
    assert report["unavailable"]["ethtool_stats"] == "ethtool not found on PATH (install ethtool)"
    ib_only = tmp_path / "ib"
    make_fake_sysfs(ib_only)  # mlx5_0 port 1 is InfiniBand: its IPoIB netdev is not a RoCE port
    report = json.loads(run_agent("--dry-run", "--sysfs-root", str(ib_only), env={"PATH": str(bin_dir)}).stdout)
    assert report["unavailable"]["ethtool_stats"].startswith("no Ethernet (RoCE) port of an RDMA device under /sys/")
    assert "ethtool_stats" not in report["sections"]
