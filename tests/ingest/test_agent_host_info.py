"""The node agent's ``host_info`` section: hardware and driver facts only, read from fake /proc, /sys
and /etc trees (``--proc-root``, ``--sysfs-root``, ``--etc-root``) and checked with the server's parser.

Every fake file here is synthetic (no real capture of /proc/cmdline, /proc/cpuinfo or
/proc/driver/nvidia/version is in /work/shared/realdata); the driver version lines follow the two
layouts the NVIDIA kernel module prints (open: ``... Open Kernel Module for x86_64  V  Release
Build ...``, proprietary: ``... UNIX x86_64 Kernel Module  V  <date>``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from apps.domain.parsers import KINDS
from tests.ingest.test_agent import AGENT, TOPO, make_fake_sysfs, run_agent

GPU, HCA = "0000:19:00.0", "0000:1a:00.0"
SECRETS = ("hunter2", "s3cr3t-token", "AKIAFAKEKEYFORTESTS", "root=UUID", "BOOT_IMAGE", "quiet_secret_word",
           "nccl-conf-other-secret", "leaked-from-quote")
CMDLINE = ('BOOT_IMAGE=/vmlinuz-6.8.0-45-generic root=UUID=0f0e0d0c-aaaa-bbbb-cccc-000000000000 ro '
           'intel_iommu=on iommu=pt password=hunter2 api_token=s3cr3t-token '
           'dyndbg="iommu=leaked-from-quote file x" quiet_secret_word\n')
CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 0
flags\t\t: fpu vme de pse tsc msr sse sse2 avx512f

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
physical id\t: 1
flags\t\t: fpu vme de pse tsc msr sse sse2 avx512f
"""
OPEN_DRIVER = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.20  Release Build  "
               "(builder@host-7)  Tue Mar  4 12:00:00 UTC 2025\nGCC version:  gcc version 12.3.0\n")
PROPRIETARY_DRIVER = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
ROUTE = ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
         "eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
         "eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n")
ENV = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO", "AWS_SECRET_ACCESS_KEY": "AKIAFAKEKEYFORTESTS",
       "MY_PASSWORD": "hunter2", "NCCLX_NOT_NCCL": "s3cr3t-token"}

# Every key the agent may send without --include-nccl-env, and the ones the opt-in adds.
DEFAULT_KEYS = {"cpu_vendor", "cpu_family", "cpu_model", "cpu_model_name", "sockets", "numa_nodes", "kernel",
                "driver_version", "driver_flavor", "cmdline", "iommu_group_type", "virtualized", "peermem",
                "dmabuf", "netdev", "netdev_scope"}
OPT_IN_KEYS = {"nccl_env", "default_route_netdev"}


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_fake_host(tmp_path: Path) -> dict[str, Path]:
    """Fake /sys (GPU + HCA, 2 NUMA nodes, 2 packages, peermem, IOMMU groups), /proc and /etc."""
    sysfs, proc, etc = tmp_path / "sys", tmp_path / "proc", tmp_path / "etc"
    make_fake_sysfs(sysfs)
    devices = sysfs / "bus" / "pci" / "devices"
    write(devices / GPU / "iommu_group" / "type", "DMA-FQ\n")
    write(devices / HCA / "iommu_group" / "type", "identity\n")
    write(devices / "0000:17:01.0" / "iommu_group" / "type", "DMA\n")  # a bridge: not a GPU/NIC function
    write(devices / HCA / "net" / "ibp26s0" / "operstate", "up\n")
    for n in ("node0", "node1"):
        (sysfs / "devices" / "system" / "node" / n).mkdir(parents=True)
    (sysfs / "devices" / "system" / "node" / "possible").write_text("0-1\n")
    for cpu, package in (("cpu0", "0"), ("cpu1", "0"), ("cpu2", "1"), ("cpu3", "1")):
        write(sysfs / "devices" / "system" / "cpu" / cpu / "topology" / "physical_package_id", package + "\n")
    (sysfs / "module" / "nvidia_peermem").mkdir(parents=True)
    for name, state in (("eth0", "up"), ("docker0", "down")):
        write(sysfs / "class" / "net" / name / "operstate", state + "\n")
    (sysfs / "class" / "net" / "ibp26s0").symlink_to(devices / HCA / "net" / "ibp26s0")
    write(proc / "cpuinfo", CPUINFO)
    write(proc / "cmdline", CMDLINE)
    write(proc / "driver" / "nvidia" / "version", OPEN_DRIVER)
    write(proc / "sys" / "kernel" / "osrelease", "6.8.0-45-generic\n")
    write(proc / "net" / "route", ROUTE)
    write(proc / "self" / "environ", "\0".join(f"{k}={v}" for k, v in ENV.items()))  # never to be read
    write(etc / "nccl.conf", "# site defaults\nNCCL_IB_HCA=mlx5_0\nNCCL_DEBUG=WARN\n"
                             "OTHER_SECRET=nccl-conf-other-secret\n")
    write(etc / "shadow", "root:hunter2:19000:0:99999:7:::\n")
    return {"sys": sysfs, "proc": proc, "etc": etc}


def agent_env(**extra: str) -> dict[str, str]:
    """This process's environment without any NCCL_* variable of the machine running the tests."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_") and k != "TOPOWEB_TOKEN"}
    return {**base, "PATH": "/nonexistent", **extra}


def run_on_fake_host(roots: dict[str, Path], *extra: str, env: dict | None = None):
    result = subprocess.run([sys.executable, str(AGENT), "--dry-run", "--hostname", "node-7",
                             "--sysfs-root", str(roots["sys"]), "--proc-root", str(roots["proc"]),
                             "--etc-root", str(roots["etc"]), *extra],
                            capture_output=True, text=True, timeout=60, env=agent_env(**ENV) if env is None else env)
    assert result.returncode == 0, result.stderr
    return result.stdout, json.loads(result.stdout)


def keys_of(text: str) -> set[str]:
    return {line.split("\t", 1)[0] for line in text.splitlines() if line.strip() and not line.startswith("#")}


@pytest.fixture
def fake_host(tmp_path):
    return make_fake_host(tmp_path)


def test_default_host_info_has_hardware_facts_only(fake_host):
    stdout, report = run_on_fake_host(fake_host)
    text = report["sections"]["host_info"]
    assert keys_of(text) == DEFAULT_KEYS
    h = KINDS["host_info"].parse(text)
    assert not h.warnings and not h.extra
    assert (h.cpu_vendor, h.cpu_family, h.cpu_model) == ("GenuineIntel", 6, 143)
    assert h.cpu_model_name == "Intel(R) Xeon(R) Platinum 8480+"
    assert (h.sockets, h.numa_nodes, h.kernel) == (2, 2, "6.8.0-45-generic")
    assert (h.driver_version, h.driver_flavor, h.dmabuf, h.peermem) == ("570.133.20", "open", True, "nvidia_peermem")
    assert h.gdr_module is True and h.virtualized is False
    assert h.cmdline == "intel_iommu=on iommu=pt" and h.iommu_cmdline == "intel_iommu=on iommu=pt"
    assert h.iommu_groups == {GPU: "DMA-FQ", HCA: "identity"} and h.iommu_translated == (GPU,)
    assert h.netdevs == {"ibp26s0": "up"}  # the RDMA-capable interface only
    assert h.netdev_scope == "rdma"  # so H05 never claims NCCL_SOCKET_IFNAME matches nothing
    assert h.nccl_env == {} and h.default_route_netdev is None
    assert report["meta"]["nccl_env_included"] is False
    # Nothing of the environment, the rest of the command line, nccl.conf or other files anywhere.
    for secret in SECRETS + ("NCCL_", "eth0", "docker0", "builder@"):
        assert secret not in stdout, secret
    assert "mlx5_0" not in text  # NCCL_IB_HCA of nccl.conf


def test_opt_in_adds_nccl_settings_and_network_names_only(fake_host):
    stdout, report = run_on_fake_host(fake_host, "--include-nccl-env")
    text = report["sections"]["host_info"]
    assert keys_of(text) == DEFAULT_KEYS | OPT_IN_KEYS
    h = KINDS["host_info"].parse(text)
    assert not h.warnings
    # /etc/nccl.conf, then the environment (which wins); no other variable of either.
    assert h.nccl_env == {"NCCL_IB_HCA": "mlx5_0", "NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0"}
    assert h.default_route_netdev == "eth0"
    assert h.netdevs == {"eth0": "up", "docker0": "down", "ibp26s0": "up"}
    assert h.cmdline == "intel_iommu=on iommu=pt"  # still the IOMMU arguments only
    assert report["meta"]["nccl_env_included"] is True
    for secret in SECRETS + ("AWS_SECRET", "MY_PASSWORD", "NCCLX", "OTHER_SECRET"):
        assert secret not in stdout, secret


def test_opt_in_without_nccl_settings_sends_no_nccl_env(fake_host):
    (fake_host["etc"] / "nccl.conf").unlink()
    _, report = run_on_fake_host(fake_host, "--include-nccl-env", env=agent_env(MY_PASSWORD="hunter2"))
    keys = keys_of(report["sections"]["host_info"])
    assert "nccl_env" not in keys and "default_route_netdev" in keys


def test_other_platforms_parse(tmp_path):
    """ARM cpuinfo (no vendor_id, no x86 flags), proprietary driver on an old kernel, nv_mem, no IOMMU args."""
    roots = make_fake_host(tmp_path)
    write(roots["proc"] / "cpuinfo", "processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm\n"
                                     "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd4f\n")
    write(roots["proc"] / "cmdline", "root=/dev/sda1 ro console=ttyS0\n")
    write(roots["proc"] / "driver" / "nvidia" / "version", PROPRIETARY_DRIVER)
    write(roots["proc"] / "sys" / "kernel" / "osrelease", "5.4.0-150-generic\n")
    (roots["sys"] / "module" / "nvidia_peermem").rmdir()
    write(roots["sys"] / "kernel" / "mm" / "memory_peers" / "nv_mem" / "version", "1.0\n")
    shutil.rmtree(roots["sys"] / "devices" / "system" / "cpu")
    _, report = run_on_fake_host(roots)
    h = KINDS["host_info"].parse(report["sections"]["host_info"])
    assert h.cpu_vendor == "ARM" and h.cpu_model is None and h.sockets is None and h.virtualized is None
    assert (h.driver_version, h.driver_flavor, h.dmabuf, h.peermem) == ("535.104.05", "proprietary", False, "nv_mem")
    assert h.cmdline is None and h.iommu_cmdline is None and h.kernel == "5.4.0-150-generic"
    assert "cmdline" not in keys_of(report["sections"]["host_info"])


def test_no_nvidia_driver_and_a_virtual_machine(tmp_path):
    roots = make_fake_host(tmp_path)
    (roots["proc"] / "driver" / "nvidia" / "version").unlink()
    (roots["sys"] / "module" / "nvidia_peermem").rmdir()
    write(roots["proc"] / "cpuinfo", CPUINFO.replace("avx512f", "avx512f hypervisor"))
    _, report = run_on_fake_host(roots)
    h = KINDS["host_info"].parse(report["sections"]["host_info"])
    assert h.driver_version is None and h.driver_flavor is None and h.dmabuf is None
    assert h.peermem == "none" and h.gdr_module is None and h.virtualized is True


def load_agent():
    spec = importlib.util.spec_from_file_location("topoweb_agent_under_test", AGENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("cmdline, words", [
    ("ro intel_iommu=on iommu=pt quiet", ["intel_iommu=on", "iommu=pt"]),
    ("amd_iommu=on iommu.passthrough=1 arm-smmu.disable_bypass=0", ["amd_iommu=on", "iommu.passthrough=1"]),
    ("intel-iommu=on,sm_off iommu=\"pt\"", ["intel_iommu=on,sm_off", "iommu=pt"]),
    ('opt="a iommu=inside quotes" iommu=off', ["iommu=off"]),
    ("iommu=$(cat /etc/shadow) intel_iommu= password=x iommu", []),
    ("myiommu=on xiommu=pt iommu_extra=1", []),
    ("intel_iommu=on -- iommu=pt --init-flag", ["intel_iommu=on"]),  # after "--": init's arguments
    ("", []),
])
def test_iommu_args_keep_only_iommu_words(cmdline, words):
    assert load_agent().iommu_args(cmdline) == words


def test_host_info_alone_is_nothing_to_report(tmp_path):
    captures = tmp_path / "cap"
    captures.mkdir()
    (captures / "host_info.txt").write_text("cpu_vendor\tGenuineIntel\nkernel\t6.8.0\n")
    alone = run_agent("--from-dir", str(captures), "--dry-run")
    assert alone.returncode == 5 and "only host_info" in alone.stderr
    shutil.copy(TOPO, captures / "nvidia_smi_topo.txt")
    both = run_agent("--from-dir", str(captures), "--dry-run")
    assert both.returncode == 0, both.stderr
    assert set(json.loads(both.stdout)["sections"]) == {"host_info", "nvidia_smi_topo"}
