#!/usr/bin/env python3
"""topoweb node agent: collect this host's GPU / PCIe / InfiniBand topology and send it to topoweb.

One file, Python 3.6+ standard library only. Typical use, on each node::

    curl -fsS http://SERVER/agent.py | python3 - --server http://SERVER --token TOKEN

(``TOPOWEB_TOKEN`` in the environment may replace ``--token``, keeping the token out of ``ps``.)
Run as root for the PCIe link and ACS details of ``lspci -vvv``; without root the report says so.

What it collects, each command with a timeout (``--timeout``), and nothing else:

===================  ==========================================================================
section              source
===================  ==========================================================================
nvidia_smi_gpus      nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,compute_cap,pstate,
                     pcie.link.gen.gpucurrent,pcie.link.gen.max,pcie.link.gen.gpumax,
                     pcie.link.gen.hostmax,pcie.link.width.current,pcie.link.width.max --format=csv
                     (older field names when the driver rejects these)
nvidia_smi_topo      nvidia-smi topo -m
nvidia_smi_p2p       nvidia-smi topo -p2p r
nvidia_smi_nvlink    nvidia-smi nvlink -s
nvidia_smi_nvlink_errors  nvidia-smi nvlink -e (per-link replay, recovery and CRC error counters)
nvidia_smi_q         nvidia-smi -q (fabric state, PCIe link and replay counters, minor numbers), its
                     Processes section (programs using the GPUs) left out
lspci_tree           lspci -D -tv
lspci_verbose        lspci -D -vvv
sysfs_pci            /sys/bus/pci/devices/* (ancestry, class, ids, NUMA, CPUs, link speed/width)
sysfs_ib             /sys/class/infiniband/* (GUIDs, firmware, ports, rates, GIDs, netdevs)
ib_counters          /sys/class/infiniband/*/ports/*/counters/* and hw_counters/* (error counters) and
                     the seconds since boot (/proc/uptime)
show_gids            show_gids (the RoCE GID table), when installed (MLNX_OFED / mlnx-tools)
ethtool_stats        ethtool -S <netdev> for each Ethernet network interface of an RDMA device
                     (/sys/class/infiniband/*/device/net/* of ports with link_layer Ethernet: RoCE
                     pause, PFC and discard counters), when ethtool is installed
ibstat               ibstat (or ibv_devinfo -v where ibstat is missing)
host_info            hardware and driver facts, ``key<TAB>value`` (apps/domain/parsers/host_info.py):
                     CPU vendor/family/model/model name and hypervisor flag (/proc/cpuinfo),
                     sockets and NUMA nodes (/sys/devices/system), kernel release, NVIDIA driver
                     version and open/proprietary flavour (/proc/driver/nvidia/version), DMA-BUF,
                     peermem modules (/sys/module/nvidia_peermem, /sys/kernel/mm/memory_peers),
                     the IOMMU arguments of /proc/cmdline only (intel_iommu=, amd_iommu=, iommu=,
                     iommu.passthrough=; never the rest of the command line), IOMMU group types
                     of GPU and NIC functions, names and states of RDMA-capable interfaces.
                     With --include-nccl-env only: NCCL_* variables of the agent's environment and
                     /etc/nccl.conf (no other variable, ever), the default route's interface and
                     the names and states of all interfaces
meta                 hostname, kernel release, NVIDIA driver version, whether run as root
===================  ==========================================================================

A tool that is missing or fails is listed under ``unavailable`` (kind -> reason); that is not an
error. The report (``topoweb.report/1``)::

    {"schema": "topoweb.report/1", "hostname": str, "collected_at": "2025-01-31T12:00:00Z",
     "agent_version": str, "meta": {"kernel": str, "driver": str|null, "root": bool, ...},
     "sections": {kind: raw text}, "unavailable": {kind: reason}}

Options: ``--dry-run`` prints the report instead of sending it; ``--output FILE`` saves it (for an
air-gapped node: upload the file later through the web form); ``--from-dir DIR`` sends captures
made earlier (files ``<kind>.txt`` named after the sections above, plus ``hostname.txt``);
``--include-nccl-env`` adds the NCCL configuration to ``host_info`` (see above; off by default).
``--attach FILE`` (repeatable) sends FILE after the report as a measurement run on this host
(``POST /api/v1/runs``: nccl-tests, perftest, a P2P test or an NCCL log; the server detects
which and checks it against this host's layout).
``--fabric`` runs ``ibnetdiscover`` (infiniband-diags; usually root, for /dev/infiniband/umad*) and
sends its output as the cluster's fabric (``POST /api/v1/fabric``), after the report; ``--fabric-file
FILE`` sends a saved fabric output instead (ibnetdiscover, iblinkinfo, ibswitches/ibhosts/ibnodes,
``lldpctl -f json``, ``lldpcli show neighbors`` or ibdev2netdev: the server detects which; per-host
outputs are filed under this host). With ``--fabric-only`` no host report is collected or sent; a
node without GPUs or NICs to report (a subnet manager or login node) sends the fabric alone too.
Connection errors and server errors (5xx, 429) are retried with exponential backoff; a 429 or
503 answer's ``Retry-After`` is honoured (at most 300 s a wait; each wait uses one of ``--retries``).

Exit codes: 0 sent (or saved / printed; a report the server already had counts as sent),
1 unexpected internal error, 2 usage error, 3 rejected by the server (4xx: bad or revoked
token, invalid report, too large; or an ``--attach`` file it could not read, the report itself
sent), 4 server unreachable or failing after all retries, 5 nothing to report (no topology
section could be collected or read: host_info alone is not a report), 6 local file error
(``--from-dir``, an ``--attach`` or the ``--fabric-file`` file unreadable, ``--output`` not writable); with
``--fabric``, an ``ibnetdiscover`` that is missing, fails or prints nothing is exit 5 and nothing is sent.
"""

import argparse
import datetime
import email.utils
import glob
import json
import os
import platform
import random
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

AGENT_VERSION = "1.1.0"
SCHEMA = "topoweb.report/1"

# The section kinds the server knows (apps.domain.parsers.KINDS); --from-dir reads <kind>.txt.
KINDS = (
    "nvidia_smi_topo", "nvidia_smi_topo_pci", "nvidia_smi_p2p", "nvidia_smi_gpus", "nvidia_smi_nvlink",
    "lspci_tree", "lspci_verbose", "ibstat", "ibstatus", "ibv_devinfo", "sysfs_pci", "sysfs_ib",
    "nccl_topo_xml", "hwloc_xml", "host_info", "nvidia_smi_q", "nvidia_smi_nvlink_errors", "show_gids", "ib_counters",
    "ethtool_stats",
)

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_REJECTED = 3
EXIT_UNREACHABLE = 4
EXIT_NOTHING = 5
EXIT_LOCAL_FILE = 6

# GPU query field lists, newest first: drivers before ~510 reject gpucurrent/gpumax/hostmax.
GPU_QUERIES = (
    "index,uuid,pci.bus_id,name,compute_cap,pstate,pcie.link.gen.gpucurrent,pcie.link.gen.max,"
    "pcie.link.gen.gpumax,pcie.link.gen.hostmax,pcie.link.width.current,pcie.link.width.max",
    "index,uuid,pci.bus_id,name,compute_cap,pstate,pcie.link.gen.current,pcie.link.gen.max,"
    "pcie.link.width.current,pcie.link.width.max",
    "index,uuid,pci.bus_id,name,pstate,pcie.link.gen.current,pcie.link.gen.max,"
    "pcie.link.width.current,pcie.link.width.max",
    "index,uuid,pci.bus_id,name",
)

# The nvidia-smi sections, the GPU query first (the others are skipped when it finds no GPU).
NVIDIA_KINDS = ("nvidia_smi_gpus", "nvidia_smi_topo", "nvidia_smi_p2p", "nvidia_smi_nvlink", "nvidia_smi_nvlink_errors",
                "nvidia_smi_q")

QUIET = False


def say(message):
    if not QUIET:
        sys.stderr.write("topoweb-agent: %s\n" % message)


def fail(code, message):
    sys.stderr.write("topoweb-agent: error: %s\n" % message)
    sys.exit(code)


# ------------------------------------------------------------------------------------------------
# Running commands


class CommandResult(object):
    def __init__(self, rc, out, err, seconds, reason=None):
        self.rc = rc
        self.out = out
        self.err = err
        self.seconds = seconds
        self.reason = reason  # set when the command could not run or timed out

    def first_message(self):
        for text in (self.err, self.out):
            for line in text.splitlines():
                if line.strip():
                    return line.strip()[:300]
        return "no output"


def run(argv, timeout):
    """Run a command with a timeout; never raises. Output is decoded as UTF-8 (bad bytes replaced)."""
    env = dict(os.environ)
    env["LC_ALL"] = "C"  # the parsers read the English output
    env["LANG"] = "C"
    started = time.time()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=env)
    except OSError as exc:
        return CommandResult(None, "", "", 0.0, "cannot run %s: %s" % (argv[0], exc.strerror or exc))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return CommandResult(None, "", "", time.time() - started, "timed out after %ss" % timeout)
    return CommandResult(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                         time.time() - started)


class Collector(object):
    """Gathers sections, the unavailable map and meta for one report."""

    def __init__(self, timeout, sysfs_root, proc_root="/proc", etc_root="/etc"):
        self.timeout = timeout
        self.sysfs_root = sysfs_root.rstrip("/") or "/"
        self.proc_root = proc_root.rstrip("/") or "/"
        self.etc_root = etc_root.rstrip("/") or "/"
        self.sections = {}
        self.unavailable = {}
        self.commands = {}

    def command(self, kind, argv, tool_missing=None):
        """Run ``argv`` and keep its output as section ``kind``; record why not otherwise."""
        if tool_missing:
            self.unavailable[kind] = tool_missing
            return None
        result = run(argv, self.timeout)
        self.commands[kind] = {"command": " ".join(argv), "seconds": round(result.seconds, 3)}
        if result.reason:
            self.unavailable[kind] = result.reason
            return None
        if result.rc != 0:
            self.unavailable[kind] = "%s exited with status %s: %s" % (argv[0], result.rc, result.first_message())
            return result
        if not result.out.strip():
            self.unavailable[kind] = "%s printed nothing" % " ".join(argv)
            return result
        self.sections[kind] = result.out
        return result

    # -- nvidia-smi ---------------------------------------------------------------------------

    def nvidia(self):
        smi = shutil.which("nvidia-smi")
        missing = None if smi else "nvidia-smi not found on PATH (no NVIDIA driver installed?)"
        if missing:
            for kind in NVIDIA_KINDS:
                self.unavailable[kind] = missing
            return
        for fields in GPU_QUERIES:
            self.unavailable.pop("nvidia_smi_gpus", None)
            result = self.command("nvidia_smi_gpus", [smi, "--query-gpu=" + fields, "--format=csv"])
            if result is None or result.rc == 0:
                break
            if "not a valid field" not in (result.out + result.err).lower():
                break  # a real failure (no devices, driver mismatch), not an old driver
        if "nvidia_smi_gpus" in self.unavailable and "No devices were found" in self.unavailable["nvidia_smi_gpus"]:
            for kind in NVIDIA_KINDS[1:]:
                self.unavailable[kind] = "nvidia-smi found no GPUs"
            return
        self.command("nvidia_smi_topo", [smi, "topo", "-m"])
        self.command("nvidia_smi_p2p", [smi, "topo", "-p2p", "r"])
        self.command("nvidia_smi_nvlink", [smi, "nvlink", "-s"])
        self.command("nvidia_smi_nvlink_errors", [smi, "nvlink", "-e"])
        self.command("nvidia_smi_q", [smi, "-q"])
        if "nvidia_smi_q" in self.sections:
            self.sections["nvidia_smi_q"] = without_processes(self.sections["nvidia_smi_q"])

    def driver_version(self):
        version = first_line(os.path.join(self.sysfs_root, "module", "nvidia", "version"))
        if version:
            return version
        smi = shutil.which("nvidia-smi")
        if smi:
            result = run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], self.timeout)
            if result.rc == 0 and result.out.strip():
                return result.out.strip().splitlines()[0].strip()
        return None

    # -- lspci --------------------------------------------------------------------------------

    def lspci(self, is_root):
        tool = shutil.which("lspci")
        missing = None if tool else "lspci not found on PATH (install pciutils)"
        self.command("lspci_tree", [tool or "lspci", "-D", "-tv"], missing)
        self.command("lspci_verbose", [tool or "lspci", "-D", "-vvv"], missing)

    # -- InfiniBand tools ----------------------------------------------------------------------

    def infiniband(self):
        ibstat = shutil.which("ibstat")
        if ibstat:
            self.command("ibstat", [ibstat])
            return
        devinfo = shutil.which("ibv_devinfo")
        if devinfo:
            self.unavailable["ibstat"] = "ibstat not found on PATH (infiniband-diags); sent ibv_devinfo -v instead"
            self.command("ibv_devinfo", [devinfo, "-v"])
            return
        self.unavailable["ibstat"] = "neither ibstat (infiniband-diags) nor ibv_devinfo (ibverbs-utils) is installed"

    def gids(self):
        """show_gids, when installed: it only reads sysfs (the sysfs_ib listing has the same GIDs)."""
        tool = shutil.which("show_gids")
        missing = None if tool else "show_gids not found on PATH (MLNX_OFED / mlnx-tools); sysfs_ib lists the GIDs"
        self.command("show_gids", [tool or "show_gids"], missing)

    def ethtool_stats(self):
        """ethtool -S of each RoCE network interface (apps/domain/parsers/ethtool_stats.py format)."""
        started = time.time()
        ib = os.path.join(self.sysfs_root, "class", "infiniband")
        ports = roce_netdevs(ib)
        tool = shutil.which("ethtool")
        if not ports:
            self.unavailable["ethtool_stats"] = "no Ethernet (RoCE) port of an RDMA device under %s" % self.shown_path(ib)
        elif not tool:
            self.unavailable["ethtool_stats"] = "ethtool not found on PATH (install ethtool)"
        else:
            out, failed = ["# topoweb ethtool_stats v1"], []
            for ifname, ca, port in ports:
                result = run([tool, "-S", ifname], self.timeout)
                why = result.reason or (None if result.rc == 0 and result.out.strip() else
                                        "ethtool exited with status %s: %s" % (result.rc, result.first_message()))
                if why:
                    failed.append("%s: %s" % (ifname, why))
                    out.append("unavailable %s %s" % (ifname, why))
                    continue
                out.append("interface %s ca %s" % (ifname, ca) + (" port %s" % port if port else ""))
                out.extend(result.out.rstrip("\n").split("\n"))
            out.append("end")
            if len(failed) < len(ports):
                self.sections["ethtool_stats"] = "\n".join(out) + "\n"
            else:
                self.unavailable["ethtool_stats"] = "; ".join(failed)
        self.commands["ethtool_stats"] = {"command": "ethtool -S <RoCE netdev>", "seconds": round(time.time() - started, 3)}

    # -- sysfs ---------------------------------------------------------------------------------

    def shown_path(self, path):
        """A resolved sysfs path as the node shows it (``/sys/...``), also under --sysfs-root."""
        if self.sysfs_root != "/sys" and path.startswith(self.sysfs_root + "/"):
            return "/sys" + path[len(self.sysfs_root):]
        return path

    def sysfs(self):
        started = time.time()
        devices = os.path.join(self.sysfs_root, "bus", "pci", "devices")
        if os.path.isdir(devices):
            try:
                self.sections["sysfs_pci"] = sysfs_pci_listing(devices, self.shown_path)
            except OSError as exc:
                self.unavailable["sysfs_pci"] = "cannot list %s: %s" % (devices, exc)
        else:
            self.unavailable["sysfs_pci"] = "%s does not exist" % devices
        self.commands["sysfs_pci"] = {"command": "read " + devices, "seconds": round(time.time() - started, 3)}
        started = time.time()
        ib = os.path.join(self.sysfs_root, "class", "infiniband")
        if os.path.isdir(ib) and os.listdir(ib):
            try:
                self.sections["sysfs_ib"] = sysfs_ib_listing(ib, self.shown_path)
            except OSError as exc:
                self.unavailable["sysfs_ib"] = "cannot list %s: %s" % (ib, exc)
        else:
            self.unavailable["sysfs_ib"] = "no RDMA devices (%s is absent or empty)" % ib
        self.commands["sysfs_ib"] = {"command": "read " + ib, "seconds": round(time.time() - started, 3)}
        started = time.time()
        if "sysfs_ib" in self.sections:
            try:
                listing = ib_counters_listing(ib, os.path.join(self.proc_root, "uptime"))
            except OSError as exc:
                self.unavailable["ib_counters"] = "cannot list %s counters: %s" % (ib, exc)
            else:
                if " counter " in listing:
                    self.sections["ib_counters"] = listing
                else:
                    self.unavailable["ib_counters"] = "no readable counters under %s/*/ports/*/" % ib
        else:
            self.unavailable["ib_counters"] = self.unavailable.get("sysfs_ib", "no RDMA devices")
        self.commands["ib_counters"] = {"command": "read %s/*/ports/*/counters, hw_counters" % ib,
                                        "seconds": round(time.time() - started, 3)}

    def host_info(self, include_nccl_env):
        """Section ``host_info``: hardware and driver facts; NCCL settings only when asked."""
        started = time.time()
        try:
            facts = host_info_facts(self.sysfs_root, self.proc_root, self.etc_root, include_nccl_env, os.environ)
        except OSError as exc:
            self.unavailable["host_info"] = "cannot read host facts: %s" % exc
            facts = []
        if facts:
            self.sections["host_info"] = host_info_text(facts)
        self.commands["host_info"] = {"command": "read /proc, /sys" + (", NCCL_* settings" if include_nccl_env else ""),
                                      "seconds": round(time.time() - started, 3)}


# ------------------------------------------------------------------------------------------------
# sysfs listings: the exact formats of apps/domain/parsers/sysfs_pci.py and sysfs_ib.py (v1)

PCI_COLUMNS = ("class", "vendor", "device", "numa_node", "current_link_speed", "current_link_width",
               "max_link_speed", "max_link_width", "local_cpulist")


def read_attr(d, name):
    try:
        with open(os.path.join(d, name)) as f:
            return " ".join(f.read().split()) or "-"
    except (OSError, UnicodeDecodeError):
        return "-"


def sysfs_pci_listing(root, shown_path):
    out = ["# topoweb sysfs_pci v1", "# columns: path " + " ".join(PCI_COLUMNS) + " driver"]
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        try:
            driver = os.path.basename(os.readlink(os.path.join(d, "driver")))
        except OSError:
            driver = "-"
        out.append("\t".join([shown_path(os.path.realpath(d))] + [read_attr(d, c) for c in PCI_COLUMNS] + [driver]))
    return "\n".join(out) + "\n"


def first_line(path):
    try:
        with open(path) as f:
            return f.readline().strip()
    except (OSError, UnicodeDecodeError):  # EINVAL on unused gid_attrs entries, etc.
        return None


def numeric(names):
    return sorted(names, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n))


CA_FILES = ("node_guid", "sys_image_guid", "fw_ver", "hw_rev", "hca_type", "board_id", "node_type", "node_desc")
PORT_FILES = ("state", "phys_state", "rate", "link_layer", "lid", "lid_mask_count", "sm_lid", "sm_sl", "cap_mask")
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def sysfs_ib_listing(root, shown_path):
    out = ["# topoweb sysfs_ib v1"]
    names = sorted(os.listdir(root)) if os.path.isdir(root) else []
    for ca in names:
        d = os.path.join(root, ca)
        out.append("ca " + ca)
        if os.path.exists(os.path.join(d, "device")):
            out.append("device " + shown_path(os.path.realpath(os.path.join(d, "device"))))
        for name in CA_FILES:
            v = first_line(os.path.join(d, name))
            if v:
                out.append("%s %s" % (name, v))
        net = os.path.join(d, "device", "net")
        for ifname in (sorted(os.listdir(net)) if os.path.isdir(net) else []):
            out.append("netdev " + ifname)
        ports = os.path.join(d, "ports")
        for p in numeric(os.listdir(ports) if os.path.isdir(ports) else []):
            pd = os.path.join(ports, p)
            for name in PORT_FILES:
                v = first_line(os.path.join(pd, name))
                if v:
                    out.append("port %s %s %s" % (p, name, v))
            gids = os.path.join(pd, "gids")
            for i in numeric(os.listdir(gids) if os.path.isdir(gids) else []):
                g = first_line(os.path.join(gids, i))
                if not g or g == ZERO_GID:
                    continue
                out.append("port %s gid %s %s" % (p, i, g))
                t = first_line(os.path.join(pd, "gid_attrs", "types", i))
                if t:
                    out.append("port %s gid_type %s %s" % (p, i, t))
                n = first_line(os.path.join(pd, "gid_attrs", "ndevs", i))
                if n:
                    out.append("port %s gid_ndev %s %s" % (p, i, n))
    out.append("end")
    return "\n".join(out) + "\n"


def ib_counters_listing(root, uptime_path):
    """The ``topoweb ib_counters v1`` listing (apps/domain/parsers/ib_counters.py): every readable
    counter and hw_counter of every port, and the seconds since boot."""
    out = ["# topoweb ib_counters v1"]
    up = first_line(uptime_path)
    if up and re.match(r"^\d+(\.\d+)?$", up.split()[0]):
        out.append("uptime_s " + up.split()[0])
    for ca in (sorted(os.listdir(root)) if os.path.isdir(root) else []):
        out.append("ca " + ca)
        ports = os.path.join(root, ca, "ports")
        for p in numeric(os.listdir(ports) if os.path.isdir(ports) else []):
            pd = os.path.join(ports, p)
            for name in ("link_layer", "state"):
                v = first_line(os.path.join(pd, name))
                if v:
                    out.append("port %s %s %s" % (p, name, v))
            for sub, word in (("counters", "counter"), ("hw_counters", "hw_counter")):
                d = os.path.join(pd, sub)
                for c in (sorted(os.listdir(d)) if os.path.isdir(d) else []):
                    v = first_line(os.path.join(d, c))
                    if v and v.isdigit() and TOKEN.match(c):
                        out.append("port %s %s %s %s" % (p, word, c, v))
    out.append("end")
    return "\n".join(out) + "\n"


def roce_netdevs(root):
    """``[(netdev, RDMA device, port or None)]``: the network interfaces of RDMA devices with an
    Ethernet (RoCE) port, from ``<root>/<ca>/device/net/*`` (port: ``dev_port`` + 1 when it names one)."""
    out, seen = [], set()
    for ca in (sorted(os.listdir(root)) if os.path.isdir(root) else []):
        ports = os.path.join(root, ca, "ports")
        eth = [p for p in numeric(os.listdir(ports) if os.path.isdir(ports) else [])
               if (first_line(os.path.join(ports, p, "link_layer")) or "").lower() == "ethernet"]
        net = os.path.join(root, ca, "device", "net")
        for ifname in (sorted(os.listdir(net)) if eth and os.path.isdir(net) else []):
            if ifname in seen or not TOKEN.match(ifname):
                continue
            seen.add(ifname)
            dev_port = first_line(os.path.join(net, ifname, "dev_port")) or ""
            port = str(int(dev_port) + 1) if dev_port.isdigit() else None
            out.append((ifname, ca, port if port in eth else (eth[0] if len(eth) == 1 else None)))
    return out


def without_processes(text):
    """``nvidia-smi -q`` output without the content of its ``Processes`` sections (the programs using
    each GPU, with their PIDs and command names): the report carries hardware facts only."""
    out, skip = [], None
    for line in text.splitlines(True):
        indent = len(line) - len(line.lstrip(" "))
        if skip is not None and line.strip():
            if indent > skip:
                continue
            skip = None
        out.append(line)
        if indent > 0 and line.strip() == "Processes":
            skip = indent
    return "".join(out)


# ------------------------------------------------------------------------------------------------
# host_info: the format of apps/domain/parsers/host_info.py (key<TAB>value), hardware facts only.
#
# Sent by default: CPU vendor/family/model/model name, sockets, NUMA nodes, virtualized (the CPU's
# hypervisor flag), kernel release, NVIDIA driver version and flavour, DMA-BUF, peermem modules,
# the IOMMU arguments of the kernel command line (never the rest of it), IOMMU group types of
# GPU/NIC functions, names and states of RDMA-capable interfaces. Only with --include-nccl-env:
# NCCL_* variables (this process's environment and /etc/nccl.conf), the default route's interface
# and the names and states of all interfaces (NCCL_SOCKET_IFNAME is checked against them). No other
# environment variable and no other file is ever read for it.

IOMMU_ARGS = ("intel_iommu", "amd_iommu", "iommu", "iommu.passthrough")
SAFE_ARG_VALUE = re.compile(r"^[A-Za-z0-9_.,:+-]{1,64}$")
NCCL_NAME = re.compile(r"^NCCL_[A-Za-z0-9_]+$")
BDF = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
TOKEN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except (OSError, IOError):
        return None


def kernel_args(cmdline):
    """Split a kernel command line as the kernel does: spaces inside double quotes do not split."""
    args, current, quoted, started = [], [], False, False
    for ch in cmdline:
        if ch == '"':
            quoted = not quoted
            current.append(ch)
            started = True
        elif ch.isspace() and not quoted:
            if started:
                if current == ["-", "-"]:
                    return args  # what follows "--" is for init, not the kernel
                args.append("".join(current))
            current, started = [], False
        else:
            current.append(ch)
            started = True
    if started and current != ["-", "-"]:
        args.append("".join(current))
    return args


def iommu_args(cmdline):
    """The IOMMU arguments of a kernel command line (``intel_iommu=on iommu=pt``), nothing else.

    A value that is not a plain word (letters, digits, ``_.,:+-``) is dropped rather than sent."""
    out = []
    for arg in kernel_args(cmdline or ""):
        name, eq, value = arg.partition("=")
        name = name.replace("-", "_")  # the kernel treats - and _ alike in parameter names
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if eq and name in IOMMU_ARGS and SAFE_ARG_VALUE.match(value):
            out.append(name + "=" + value)
    return out


def cpuinfo_facts(text):
    """(key, value) pairs from /proc/cpuinfo: vendor, family, model, model name, sockets, virtualized."""
    first = {}
    ids = set()
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if not sep:
            continue
        k, v = k.strip(), v.strip()
        first.setdefault(k, v)
        if k == "physical id" and v.isdigit():
            ids.add(v)
    out = []
    vendor = first.get("vendor_id") or ("ARM" if first.get("CPU implementer") else None)
    if vendor:
        out.append(("cpu_vendor", vendor))
    for key, src in (("cpu_family", "cpu family"), ("cpu_model", "model")):
        if first.get(src, "").isdigit():
            out.append((key, first[src]))
    if first.get("model name"):
        out.append(("cpu_model_name", first["model name"]))
    flags = first.get("flags")
    if flags is not None:
        out.append(("virtualized", "yes" if "hypervisor" in flags.split() else "no"))
    elif text.strip():
        out.append(("virtualized", "unknown"))  # aarch64 and others: no x86 hypervisor flag
    return out, ids


def count_sockets(sysfs_root, cpuinfo_ids):
    """Distinct physical package ids (sysfs), else distinct ``physical id`` of /proc/cpuinfo."""
    ids = set()
    for path in glob.glob(os.path.join(sysfs_root, "devices", "system", "cpu", "cpu[0-9]*", "topology",
                                       "physical_package_id")):
        v = first_line(path)
        if v and v.isdigit():
            ids.add(v)
    ids = ids or cpuinfo_ids
    return len(ids) if ids else None


def nvidia_driver(proc_root):
    """(version, flavour) from /proc/driver/nvidia/version; (None, None) without the driver."""
    text = read_text(os.path.join(proc_root, "driver", "nvidia", "version")) or ""
    for line in text.splitlines():
        if "Kernel Module" in line:
            m = re.search(r"\s(\d+\.\d+(?:\.\d+)?)\s", line + " ")
            if m:
                return m.group(1), ("open" if "Open Kernel Module" in line else "proprietary")
    return None, None


def kernel_release(proc_root):
    return first_line(os.path.join(proc_root, "sys", "kernel", "osrelease")) or platform.release()


def iommu_group_types(sysfs_root):
    """``<BDF> <type>`` of NVIDIA display/3D functions and network functions (NICs, HCAs)."""
    devices = os.path.join(sysfs_root, "bus", "pci", "devices")
    out = []
    for name in (sorted(os.listdir(devices)) if os.path.isdir(devices) else []):
        d = os.path.join(devices, name)
        vendor, cls = first_line(os.path.join(d, "vendor")) or "", first_line(os.path.join(d, "class")) or ""
        if not BDF.match(name) or not ((vendor == "0x10de" and cls.startswith("0x03")) or cls.startswith("0x02")):
            continue
        t = first_line(os.path.join(d, "iommu_group", "type"))
        if t and TOKEN.match(t):
            out.append(name + " " + t)
    return out


def peermem(sysfs_root):
    if os.path.exists(os.path.join(sysfs_root, "module", "nvidia_peermem")):
        return "nvidia_peermem"
    if glob.glob(os.path.join(sysfs_root, "kernel", "mm", "memory_peers", "nv_mem*")):
        return "nv_mem"
    return "none"


def dmabuf(flavor, kernel):
    if flavor is None:
        return "unknown"
    release = tuple(int(x) for x in re.findall(r"\d+", kernel or "")[:2])
    return "yes" if flavor == "open" and len(release) == 2 and release >= (5, 12) else "no"


def netdev_states(sysfs_root, rdma_only):
    """name -> operstate: interfaces of RDMA devices (/sys/class/infiniband/*/device/net), or all."""
    dirs = {}
    if rdma_only:
        for path in glob.glob(os.path.join(sysfs_root, "class", "infiniband", "*", "device", "net", "*")):
            dirs[os.path.basename(path)] = path
    else:
        for path in glob.glob(os.path.join(sysfs_root, "class", "net", "*")):
            dirs[os.path.basename(path)] = path
    return [(name, first_line(os.path.join(path, "operstate")) or "unknown")
            for name, path in sorted(dirs.items()) if TOKEN.match(name)]


def nccl_settings(etc_root, environ):
    """NCCL_* of /etc/nccl.conf, then of the environment (which wins); no other variable is read."""
    env = {}
    for line in (read_text(os.path.join(etc_root, "nccl.conf")) or "").splitlines():
        k, eq, v = line.strip().partition("=")
        if eq and NCCL_NAME.match(k.strip()):
            env[k.strip()] = v.strip()
    for k in environ:
        if NCCL_NAME.match(k):
            env[k] = environ[k]
    return sorted(env.items())


def default_route_netdev(proc_root):
    for line in (read_text(os.path.join(proc_root, "net", "route")) or "").splitlines()[1:]:
        f = line.split()
        if len(f) > 2 and f[1] == "00000000" and TOKEN.match(f[0]):
            return f[0]
    return None


def host_info_facts(sysfs_root, proc_root, etc_root, include_nccl_env, environ):
    """The ``host_info`` facts as (key, value) pairs, in the order of the contract."""
    cpu, cpu_ids = cpuinfo_facts(read_text(os.path.join(proc_root, "cpuinfo")) or "")
    out = [kv for kv in cpu if kv[0] != "virtualized"]
    sockets = count_sockets(sysfs_root, cpu_ids)
    if sockets:
        out.append(("sockets", str(sockets)))
    nodes = os.path.join(sysfs_root, "devices", "system", "node")
    if os.path.isdir(nodes):
        out.append(("numa_nodes", str(len(glob.glob(os.path.join(nodes, "node[0-9]*"))))))
    kernel = kernel_release(proc_root)
    out.append(("kernel", kernel))
    version, flavor = nvidia_driver(proc_root)
    if version:
        out += [("driver_version", version), ("driver_flavor", flavor)]
    words = iommu_args(read_text(os.path.join(proc_root, "cmdline")))
    if words:
        out.append(("cmdline", " ".join(words)))  # the IOMMU arguments only
    out += [("iommu_group_type", v) for v in iommu_group_types(sysfs_root)]
    out += [kv for kv in cpu if kv[0] == "virtualized"]
    out.append(("peermem", peermem(sysfs_root)))
    out.append(("dmabuf", dmabuf(flavor, kernel)))
    if include_nccl_env:
        out += [("nccl_env", k + "=" + v) for k, v in nccl_settings(etc_root, environ)]
        route = default_route_netdev(proc_root)
        if route:
            out.append(("default_route_netdev", route))
    out.append(("netdev_scope", "all" if include_nccl_env else "rdma"))
    out += [("netdev", name + " " + state) for name, state in netdev_states(sysfs_root, not include_nccl_env)]
    return out


def host_info_text(facts):
    return "".join(k + "\t" + " ".join(v.split()) + "\n" for k, v in facts)


# ------------------------------------------------------------------------------------------------
# Building the report


def utc_now():
    return datetime.datetime.utcnow().replace(microsecond=0).isoformat() + "Z"


def is_root():
    try:
        return os.geteuid() == 0
    except AttributeError:  # not POSIX
        return False


def collect(hostname, timeout, sysfs_root, proc_root="/proc", etc_root="/etc", include_nccl_env=False):
    root = is_root()
    c = Collector(timeout, sysfs_root, proc_root, etc_root)
    c.nvidia()
    c.lspci(root)
    c.sysfs()
    c.infiniband()
    c.gids()
    c.ethtool_stats()
    c.host_info(include_nccl_env)
    meta = {
        "kernel": platform.release(),
        "driver": c.driver_version(),
        "root": root,
        "nccl_env_included": bool(include_nccl_env),
        "collector": c.commands,
    }
    if not root and "lspci_verbose" in c.sections:
        meta["lspci_verbose_note"] = ("collected without root: lspci shows 'Capabilities: <access denied>', "
                                      "so PCIe link (LnkCap/LnkSta) and ACS detail are missing; run as root for them")
    return {
        "schema": SCHEMA,
        "hostname": hostname,
        "collected_at": utc_now(),
        "agent_version": AGENT_VERSION,
        "meta": meta,
        "sections": c.sections,
        "unavailable": c.unavailable,
    }


def report_from_dir(directory, hostname=None):
    """A report from captures saved earlier: ``<kind>.txt`` files and ``hostname.txt``."""
    if not os.path.isdir(directory):
        fail(EXIT_LOCAL_FILE, "--from-dir %s: not a directory" % directory)
    sections = {}
    try:
        names = sorted(os.listdir(directory))
        for name in names:
            path = os.path.join(directory, name)
            if not os.path.isfile(path) or name == "hostname.txt":
                continue
            kind = name[:-4] if name.endswith(".txt") else None
            if kind not in KINDS:
                say("ignoring %s (not <kind>.txt for a known kind: %s)" % (name, ", ".join(KINDS)))
                continue
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            if text.strip():
                sections[kind] = text
            else:
                say("ignoring %s: empty" % name)
        if hostname is None and "hostname.txt" in names:
            with open(os.path.join(directory, "hostname.txt"), "rb") as f:
                hostname = f.read().decode("utf-8", "replace").strip() or None
    except OSError as exc:
        fail(EXIT_LOCAL_FILE, "--from-dir %s: %s" % (directory, exc))
    if hostname is None:
        hostname = os.path.basename(os.path.abspath(directory))
        say("no hostname.txt in %s; using the folder name %r as the host name" % (directory, hostname))
    return {
        "schema": SCHEMA,
        "hostname": hostname,
        "collected_at": utc_now(),
        "agent_version": AGENT_VERSION,
        "meta": {"source": "from-dir", "kernel": None, "driver": None, "root": None},
        "sections": sections,
        "unavailable": {},
    }


# ------------------------------------------------------------------------------------------------
# Sending


class Rejected(Exception):
    pass


def post_once(url, token, body, http_timeout):
    """POST the body; returns (status, decoded JSON or None). Raises urllib errors as they come."""
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json",
        "Authorization": "Bearer " + token,
        "User-Agent": "topoweb-agent/" + AGENT_VERSION,
    })
    response = urllib.request.urlopen(request, timeout=http_timeout)
    try:
        payload = response.read()
    finally:
        response.close()
    try:
        return response.status, json.loads(payload.decode("utf-8"))
    except ValueError:
        return response.status, None


def server_message(exc):
    try:
        data = json.loads(exc.read().decode("utf-8"))
        return data.get("error") or json.dumps(data)
    except Exception:
        return exc.reason if hasattr(exc, "reason") else str(exc)


RETRY_AFTER_CAP = 300.0  # the longest wait a server's Retry-After may ask of the agent, in seconds


def retry_after_seconds(value, now=None):
    """The seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date; a date in
    the past is 0), or None when there is no usable value. ``now``: an aware datetime (tests)."""
    value = (value or "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return max(0.0, (when - now).total_seconds())


def retry_delay(attempt, retry_wait, retry_after):
    """Seconds to wait before retry number ``attempt + 1``: what the server asked for (capped at
    RETRY_AFTER_CAP) plus a random 0..retry_wait, so a throttled fleet does not come back in the same
    second; else exponential backoff from retry_wait (capped at 60 s) with +-20 % jitter."""
    if retry_after is not None:
        return min(RETRY_AFTER_CAP, retry_after) + random.uniform(0, retry_wait)
    delay = min(60.0, retry_wait * (2 ** attempt))
    return delay * (0.8 + 0.4 * random.random())  # jitter: 500 nodes must not retry in lockstep


def send(server, token, report, retries, retry_wait, http_timeout, path="/api/v1/reports"):
    """POST ``report`` (a dict) to ``server + path`` with retries; the server's answer. A 4xx answer
    raises Rejected with the server's message; giving up after the retries exits 4."""
    url = server.rstrip("/") + path
    body = json.dumps(report).encode("utf-8")
    attempt = 0
    while True:
        problem = None
        retry_after = None
        try:
            status, payload = post_once(url, token, body, http_timeout)
        except urllib.error.HTTPError as exc:
            if exc.code >= 500 or exc.code == 429:
                problem = "server answered %s: %s" % (exc.code, server_message(exc))
                if exc.code in (429, 503) and exc.headers:
                    retry_after = retry_after_seconds(exc.headers.get("Retry-After"))
            else:
                hint = ""
                if exc.code == 401:
                    hint = " (check --token / TOPOWEB_TOKEN; ask for a new token if it was revoked)"
                raise Rejected("%s: %s%s" % (exc.code, server_message(exc), hint))
        except (urllib.error.URLError, socket.timeout, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            problem = "cannot reach %s: %s" % (url, reason)
        else:
            if payload is None or not ("upload_id" in payload or "run_id" in payload or "fabric_id" in payload):
                problem = "unexpected answer from %s (status %s); is --server the topoweb address?" % (url, status)
            else:
                return payload
        if attempt >= retries:
            fail(EXIT_UNREACHABLE, "%s (gave up after %d attempts)" % (problem, attempt + 1))
        delay = retry_delay(attempt, retry_wait, retry_after)
        if retry_after is not None:
            asked = "Retry-After %g s" % retry_after
            if retry_after > RETRY_AFTER_CAP:
                asked += ", waiting at most %g" % RETRY_AFTER_CAP
            say("%s; retrying in %.1fs as the server asked (%s; %d of %d)" % (
                problem, delay, asked, attempt + 1, retries))
        else:
            say("%s; retrying in %.1fs (%d of %d)" % (problem, delay, attempt + 1, retries))
        time.sleep(delay)
        attempt += 1


def send_report(args, report):
    """Send the node report; exit 3 when the server rejects it."""
    try:
        payload = send(args.server, args.token, report, args.retries, args.retry_wait, args.http_timeout)
    except Rejected as exc:
        fail(EXIT_REJECTED, "server rejected the report with %s" % exc)
    if payload.get("duplicate"):
        say("the server already had this report: upload %s (%s)" % (payload["upload_id"], payload.get("status_url", "")))
    else:
        say("sent: upload %s, status %s; follow it at %s" % (
            payload["upload_id"], payload.get("status"), payload.get("status_url", "")))
    return payload


# ------------------------------------------------------------------------------------------------
# Attached runs (--attach FILE): measurements sent after the report, each checked against this host


def read_attachments(paths):
    """``[(path, text)]`` of the --attach files, read before anything is sent; exit 6 when one
    cannot be read."""
    out = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            fail(EXIT_LOCAL_FILE, "--attach %s: %s" % (path, exc))
        out.append((path, data.decode("utf-8", "replace")))
    return out


def run_payload(path, text, hostname, collected_at):
    """The ``POST /api/v1/runs`` body of one attached file: the kind is left to the server to detect."""
    return {"text": text, "name": os.path.basename(path), "hosts": [hostname], "collected_at": collected_at}


def send_attachments(args, attachments, hostname, collected_at):
    """Send each attached run; the number the server could not read or refused (each said on stderr)."""
    refused = 0
    for path, text in attachments:
        try:
            payload = send(args.server, args.token, run_payload(path, text, hostname, collected_at), args.retries,
                           args.retry_wait, args.http_timeout, path="/api/v1/runs")
        except Rejected as exc:
            refused += 1
            sys.stderr.write("topoweb-agent: error: --attach %s: server refused it with %s\n" % (path, exc))
            continue
        say("run %s from %s: %s%s; %s" % (payload["run_id"], path, payload.get("verdict") or payload.get("status"),
                                          " (already sent)" if payload.get("duplicate") else "",
                                          payload.get("page", "")))
    return refused


# ------------------------------------------------------------------------------------------------
# The fabric (--fabric runs ibnetdiscover, --fabric-file FILE): sent as the cluster's fabric


def discover_fabric(timeout):
    """``(name, text, kind)`` of ``ibnetdiscover`` run here; exit 5 when it is missing, fails or prints nothing."""
    tool = shutil.which("ibnetdiscover")
    if not tool:
        fail(EXIT_NOTHING, "--fabric: ibnetdiscover not found on PATH (install infiniband-diags)")
    result = run([tool], timeout)
    if result.reason:
        fail(EXIT_NOTHING, "--fabric: %s" % result.reason)
    if result.rc != 0 or not result.out.strip():
        fail(EXIT_NOTHING, "--fabric: ibnetdiscover exited with status %s: %s (run as root for /dev/infiniband/umad*)"
             % (result.rc, result.first_message()))
    return "ibnetdiscover", result.out, "ibnetdiscover"


def read_fabric_file(path):
    """``(file name, text, None)`` of --fabric-file (its kind is the server's to detect), read before anything
    is sent; exit 6 when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return os.path.basename(path), f.read().decode("utf-8", "replace"), None
    except OSError as exc:
        fail(EXIT_LOCAL_FILE, "--fabric-file %s: %s" % (path, exc))


def fabric_payload(fabric, hostname, collected_at):
    """The ``POST /api/v1/fabric`` body; a kind of None is the server's to detect (``host`` is used for
    per-host outputs only)."""
    name, text, kind = fabric
    return {"text": text, "kind": kind, "source_name": name, "host": hostname, "collected_at": collected_at}


def send_fabric(args, fabric, hostname, collected_at):
    """Send the fabric output; 1 when the server refused or could not read it (said on stderr), else 0."""
    name = fabric[0]
    try:
        payload = send(args.server, args.token, fabric_payload(fabric, hostname, collected_at), args.retries,
                       args.retry_wait, args.http_timeout, path="/api/v1/fabric")
    except Rejected as exc:
        sys.stderr.write("topoweb-agent: error: fabric %s: server refused it with %s\n" % (name, exc))
        return 1
    summary = payload.get("summary") or {}
    counts = (" (%s switches, %s host adapters, %s links)" % (summary.get("switches"), summary.get("host_adapters"),
                                                              summary.get("links")) if summary else "")
    say("fabric %s: %s %s%s%s; %s" % (payload["fabric_id"], payload.get("kind"), payload.get("status"), counts,
                                      " (already sent)" if payload.get("duplicate") else "", payload.get("page", "")))
    for warning in payload.get("warnings") or []:
        say("fabric %s: %s" % (payload["fabric_id"], warning))
    return 0


# ------------------------------------------------------------------------------------------------
# Command line


def build_parser():
    p = argparse.ArgumentParser(
        prog="topoweb_agent.py",
        description="Collect this node's GPU/PCIe/InfiniBand topology and send it to a topoweb server.",
        epilog="Exit codes: 0 ok, 1 internal error, 2 usage, 3 rejected by the server (4xx; also an --attach file "
               "it could not read), 4 server unreachable after retries, 5 nothing to report, 6 local file error.",
    )
    p.add_argument("--server", help="topoweb base URL, e.g. http://topoweb.example:8000")
    p.add_argument("--token", default=os.environ.get("TOPOWEB_TOKEN"),
                   help="agent token (default: $TOPOWEB_TOKEN)")
    p.add_argument("--dry-run", action="store_true", help="print the report JSON and send nothing")
    p.add_argument("--output", metavar="FILE",
                   help="save the report JSON to FILE (upload it later through the web form); "
                        "with --server it is also sent")
    p.add_argument("--from-dir", metavar="DIR",
                   help="send captures made earlier: DIR/<kind>.txt files and DIR/hostname.txt")
    p.add_argument("--hostname", help="host name to report (default: this machine's, or DIR/hostname.txt)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per command (default 60)")
    p.add_argument("--retries", type=int, default=5,
                   help="retries on connection errors, 5xx and 429 (default 5); a 429 or 503 answer's "
                        "Retry-After is waited for (at most 300 s), plus a random 0..--retry-wait")
    p.add_argument("--retry-wait", type=float, default=2.0,
                   help="first retry delay in seconds, doubled each time up to 60 (default 2)")
    p.add_argument("--http-timeout", type=float, default=30.0, help="seconds to wait for the server (default 30)")
    p.add_argument("--splay", type=float, default=0.0, metavar="SECONDS",
                   help="wait a random 0..SECONDS after collecting, before sending (default 0): when a whole "
                        "fleet runs the agent from cron at the same minute, its reports then arrive spread out")
    p.add_argument("--quiet", action="store_true", help="print errors only")
    p.add_argument("--version", action="version", version="topoweb-agent " + AGENT_VERSION)
    p.add_argument("--attach", action="append", default=[], metavar="FILE",
                   help="after the report, send FILE as a measurement (nccl-tests, perftest, a P2P test, an "
                        "NCCL_DEBUG=INFO log) run on this host; repeat for several files")
    p.add_argument("--fabric", action="store_true",
                   help="also run ibnetdiscover here and send it as the cluster's fabric (a node with fabric "
                        "access; usually root)")
    p.add_argument("--fabric-file", metavar="FILE",
                   help="send FILE as a fabric output (ibnetdiscover, iblinkinfo, ibswitches/ibhosts/ibnodes, "
                        "lldpctl -f json, lldpcli show neighbors, ibdev2netdev) instead of running ibnetdiscover")
    p.add_argument("--fabric-only", action="store_true",
                   help="with --fabric or --fabric-file: send the fabric alone, no host report")
    p.add_argument("--include-nccl-env", action="store_true",
                   help="also send NCCL configuration (NCCL_* variables of this environment and /etc/nccl.conf), "
                        "the default route's interface and all interface names and states, for diagnosis "
                        "(default: hardware and driver facts only)")
    # For tests: read sysfs, /proc and /etc (nccl.conf) under other roots (fake trees).
    p.add_argument("--sysfs-root", default="/sys", help=argparse.SUPPRESS)
    p.add_argument("--proc-root", default="/proc", help=argparse.SUPPRESS)
    p.add_argument("--etc-root", default="/etc", help=argparse.SUPPRESS)
    return p


def main(argv=None):
    global QUIET
    parser = build_parser()
    args = parser.parse_args(argv)
    QUIET = args.quiet
    sending = not args.dry_run and (args.server or not args.output)
    if sending:
        if not args.server:
            parser.error("--server is required (or use --dry-run / --output FILE to keep the report locally)")
        if not (args.server.startswith("http://") or args.server.startswith("https://")):
            parser.error("--server must start with http:// or https://, got %r" % args.server)
        if not args.token:
            parser.error("--token (or TOPOWEB_TOKEN) is required to send a report")
    if args.timeout <= 0 or args.retries < 0 or args.retry_wait < 0 or not 0 <= args.splay <= 86400:
        parser.error("--timeout must be positive, --retries and --retry-wait not negative, "
                     "--splay between 0 and 86400 seconds")

    if args.fabric and args.fabric_file:
        parser.error("--fabric runs ibnetdiscover and --fabric-file sends a saved output: choose one")
    if args.fabric_only and not (args.fabric or args.fabric_file):
        parser.error("--fabric-only needs --fabric or --fabric-file")

    attachments = read_attachments(args.attach)
    fabric = read_fabric_file(args.fabric_file) if args.fabric_file else None
    if args.fabric:
        fabric = discover_fabric(args.timeout)
    report = None
    if not args.fabric_only:
        report = main_report(args, fabric is not None)
    hostname = report["hostname"] if report else (args.hostname or socket.gethostname())
    collected_at = report.get("collected_at") if report else utc_now()
    if report is None:
        return send_fabric_alone(args, fabric, attachments, hostname, collected_at)

    if args.dry_run:
        sys.stdout.write(json.dumps(report, indent=2, sort_keys=True) + "\n")
        for path, text in attachments:
            say("would attach %s (%d bytes) as a run on %s" % (path, len(text.encode("utf-8")), report["hostname"]))
        if fabric:
            say("would send the fabric %s (%d bytes)" % (fabric[0], len(fabric[1].encode("utf-8"))))
        return EXIT_OK
    if args.output:
        try:
            with open(args.output, "w") as f:
                json.dump(report, f, indent=2, sort_keys=True)
                f.write("\n")
        except OSError as exc:
            fail(EXIT_LOCAL_FILE, "--output %s: %s" % (args.output, exc))
        say("saved the report to %s" % args.output)
        if not args.server:
            if fabric:
                say("the fabric is not saved with --output; send a saved discovery later with --fabric-file")
            return EXIT_OK
    if args.splay > 0:
        delay = random.uniform(0, args.splay)
        say("waiting %.1fs before sending (--splay %g)" % (delay, args.splay))
        time.sleep(delay)
    send_report(args, report)
    refused = send_fabric(args, fabric, hostname, collected_at) if fabric else 0
    if send_attachments(args, attachments, report["hostname"], report.get("collected_at")) or refused:
        return EXIT_REJECTED
    return EXIT_OK


def main_report(args, have_fabric):
    """The host report (collected, or read with --from-dir); None when there is nothing to report but a
    fabric to send (a node without GPUs or NICs), else exit 5 when there is nothing to report."""
    if args.from_dir:
        report = report_from_dir(args.from_dir, args.hostname)
    else:
        report = collect(args.hostname or socket.gethostname(), args.timeout, args.sysfs_root, args.proc_root,
                         args.etc_root, args.include_nccl_env)

    if not [kind for kind in report["sections"] if kind != "host_info"]:  # host facts alone are no topology
        why = "; ".join("%s: %s" % kv for kv in sorted(report["unavailable"].items())) or "no capture files"
        if "host_info" in report["sections"]:
            why = "only host_info, no topology section; " + why
        if have_fabric:
            say("no host topology to report (%s); sending the fabric alone" % why)
            return None
        fail(EXIT_NOTHING, "nothing to report (%s)" % why)
    say("%s: %d sections (%s)%s" % (
        report["hostname"], len(report["sections"]), ", ".join(sorted(report["sections"])),
        "; unavailable: " + ", ".join(sorted(report["unavailable"])) if report["unavailable"] else ""))
    return report


def send_fabric_alone(args, fabric, attachments, hostname, collected_at):
    """--fabric-only, or nothing but the fabric to send: say so (--dry-run) or send it, then the attached runs."""
    if args.dry_run or (args.output and not args.server):
        say("would send the fabric %s (%d bytes); no host report" % (fabric[0], len(fabric[1].encode("utf-8"))))
        return EXIT_OK
    if args.splay > 0:
        delay = random.uniform(0, args.splay)
        say("waiting %.1fs before sending (--splay %g)" % (delay, args.splay))
        time.sleep(delay)
    refused = send_fabric(args, fabric, hostname, collected_at)
    return EXIT_REJECTED if send_attachments(args, attachments, hostname, collected_at) or refused else EXIT_OK


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except SystemExit:
        raise
    except Exception as exc:  # report, do not dump a traceback on an operator
        sys.stderr.write("topoweb-agent: internal error: %s: %s\n" % (type(exc).__name__, exc))
        sys.exit(EXIT_INTERNAL)
