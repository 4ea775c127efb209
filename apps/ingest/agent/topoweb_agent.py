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
lspci_tree           lspci -D -tv
lspci_verbose        lspci -D -vvv
sysfs_pci            /sys/bus/pci/devices/* (ancestry, class, ids, NUMA, CPUs, link speed/width)
sysfs_ib             /sys/class/infiniband/* (GUIDs, firmware, ports, rates, GIDs, netdevs)
ibstat               ibstat (or ibv_devinfo -v where ibstat is missing)
meta                 hostname, kernel release, NVIDIA driver version, whether run as root
===================  ==========================================================================

A tool that is missing or fails is listed under ``unavailable`` (kind -> reason); that is not an
error. The report (``topoweb.report/1``)::

    {"schema": "topoweb.report/1", "hostname": str, "collected_at": "2025-01-31T12:00:00Z",
     "agent_version": str, "meta": {"kernel": str, "driver": str|null, "root": bool, ...},
     "sections": {kind: raw text}, "unavailable": {kind: reason}}

Options: ``--dry-run`` prints the report instead of sending it; ``--output FILE`` saves it (for an
air-gapped node: upload the file later through the web form); ``--from-dir DIR`` sends captures
made earlier (files ``<kind>.txt`` named after the sections above, plus ``hostname.txt``).
Connection errors and server errors (5xx, 429) are retried with exponential backoff.

Exit codes: 0 sent (or saved / printed; a report the server already had counts as sent),
1 unexpected internal error, 2 usage error, 3 rejected by the server (4xx: bad or revoked
token, invalid report, too large), 4 server unreachable or failing after all retries,
5 nothing to report (no section could be collected or read), 6 local file error
(``--from-dir`` unreadable, ``--output`` not writable).
"""

import argparse
import datetime
import json
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

AGENT_VERSION = "1.0.0"
SCHEMA = "topoweb.report/1"

# The section kinds the server knows (apps.domain.parsers.KINDS); --from-dir reads <kind>.txt.
KINDS = (
    "nvidia_smi_topo", "nvidia_smi_topo_pci", "nvidia_smi_p2p", "nvidia_smi_gpus", "nvidia_smi_nvlink",
    "lspci_tree", "lspci_verbose", "ibstat", "ibstatus", "ibv_devinfo", "sysfs_pci", "sysfs_ib",
    "nccl_topo_xml", "hwloc_xml", "host_info",
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

    def __init__(self, timeout, sysfs_root):
        self.timeout = timeout
        self.sysfs_root = sysfs_root.rstrip("/") or "/"
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
            for kind in ("nvidia_smi_gpus", "nvidia_smi_topo", "nvidia_smi_p2p", "nvidia_smi_nvlink"):
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
            for kind in ("nvidia_smi_topo", "nvidia_smi_p2p", "nvidia_smi_nvlink"):
                self.unavailable[kind] = "nvidia-smi found no GPUs"
            return
        self.command("nvidia_smi_topo", [smi, "topo", "-m"])
        self.command("nvidia_smi_p2p", [smi, "topo", "-p2p", "r"])
        self.command("nvidia_smi_nvlink", [smi, "nvlink", "-s"])

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


# ------------------------------------------------------------------------------------------------
# Building the report


def utc_now():
    return datetime.datetime.utcnow().replace(microsecond=0).isoformat() + "Z"


def is_root():
    try:
        return os.geteuid() == 0
    except AttributeError:  # not POSIX
        return False


def collect(hostname, timeout, sysfs_root):
    root = is_root()
    c = Collector(timeout, sysfs_root)
    c.nvidia()
    c.lspci(root)
    c.sysfs()
    c.infiniband()
    meta = {
        "kernel": platform.release(),
        "driver": c.driver_version(),
        "root": root,
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


def send(server, token, report, retries, retry_wait, http_timeout):
    url = server.rstrip("/") + "/api/v1/reports"
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
                value = exc.headers.get("Retry-After") if exc.headers else None
                retry_after = float(value) if value and value.isdigit() else None
            else:
                hint = ""
                if exc.code == 401:
                    hint = " (check --token / TOPOWEB_TOKEN; ask for a new token if it was revoked)"
                fail(EXIT_REJECTED, "server rejected the report with %s: %s%s" % (exc.code, server_message(exc), hint))
        except (urllib.error.URLError, socket.timeout, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            problem = "cannot reach %s: %s" % (url, reason)
        else:
            if payload is None or "upload_id" not in payload:
                problem = "unexpected answer from %s (status %s); is --server the topoweb address?" % (url, status)
            else:
                if payload.get("duplicate"):
                    say("the server already had this report: upload %s (%s)" % (payload["upload_id"],
                                                                                 payload.get("status_url", "")))
                else:
                    say("sent: upload %s, status %s; follow it at %s" % (
                        payload["upload_id"], payload.get("status"), payload.get("status_url", "")))
                return payload
        if attempt >= retries:
            fail(EXIT_UNREACHABLE, "%s (gave up after %d attempts)" % (problem, attempt + 1))
        delay = retry_after if retry_after is not None else min(60.0, retry_wait * (2 ** attempt))
        delay = delay * (0.8 + 0.4 * random.random())  # jitter: 500 nodes must not retry in lockstep
        say("%s; retrying in %.1fs (%d of %d)" % (problem, delay, attempt + 1, retries))
        time.sleep(delay)
        attempt += 1


# ------------------------------------------------------------------------------------------------
# Command line


def build_parser():
    p = argparse.ArgumentParser(
        prog="topoweb_agent.py",
        description="Collect this node's GPU/PCIe/InfiniBand topology and send it to a topoweb server.",
        epilog="Exit codes: 0 ok, 1 internal error, 2 usage, 3 rejected by the server (4xx), "
               "4 server unreachable after retries, 5 nothing to report, 6 local file error.",
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
    p.add_argument("--retries", type=int, default=5, help="retries on connection errors and 5xx (default 5)")
    p.add_argument("--retry-wait", type=float, default=2.0,
                   help="first retry delay in seconds, doubled each time up to 60 (default 2)")
    p.add_argument("--http-timeout", type=float, default=30.0, help="seconds to wait for the server (default 30)")
    p.add_argument("--quiet", action="store_true", help="print errors only")
    p.add_argument("--version", action="version", version="topoweb-agent " + AGENT_VERSION)
    # For tests: read sysfs under another root (a fake tree) instead of /sys.
    p.add_argument("--sysfs-root", default="/sys", help=argparse.SUPPRESS)
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
    if args.timeout <= 0 or args.retries < 0 or args.retry_wait < 0:
        parser.error("--timeout must be positive, --retries and --retry-wait not negative")

    if args.from_dir:
        report = report_from_dir(args.from_dir, args.hostname)
    else:
        report = collect(args.hostname or socket.gethostname(), args.timeout, args.sysfs_root)

    if not report["sections"]:
        why = "; ".join("%s: %s" % kv for kv in sorted(report["unavailable"].items())) or "no capture files"
        fail(EXIT_NOTHING, "nothing to report (%s)" % why)
    say("%s: %d sections (%s)%s" % (
        report["hostname"], len(report["sections"]), ", ".join(sorted(report["sections"])),
        "; unavailable: " + ", ".join(sorted(report["unavailable"])) if report["unavailable"] else ""))

    if args.dry_run:
        sys.stdout.write(json.dumps(report, indent=2, sort_keys=True) + "\n")
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
            return EXIT_OK
    send(args.server, args.token, report, args.retries, args.retry_wait, args.http_timeout)
    return EXIT_OK


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
