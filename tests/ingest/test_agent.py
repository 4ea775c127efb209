"""The node agent: Python 3.6 syntax, collectors on fake tools and a fake sysfs tree, exit codes,
and an end-to-end run against a live server with --from-dir on real captures."""

from __future__ import annotations

import ast
import datetime
import http.server
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from apps.domain.parsers import KINDS
from apps.ingest.models import Snapshot, Upload
from tests.ingest.helpers import DEMO

AGENT = Path(__file__).resolve().parents[2] / "apps" / "ingest" / "agent" / "topoweb_agent.py"
IBSTAT = DEMO / "ibstat" / "gpud_h100_12ca_roce_3_down_disabled.txt"
TOPO = DEMO / "topo" / "sglang_30401_8xh100_hbm3_8nic.txt"
LSPCI_TREE = DEMO / "lspci_tree" / "stelline_asus_esc8000a_e12.txt"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SMI_Q = FIXTURES / "nvidia_smi_q" / "smi_q_full_gpud_titan_v_560.35.03_gen1_idle.txt"  # real; lists an Xorg process
NVLINK_E = FIXTURES / "nvidia_smi_nvlink_errors" / "synthetic_a100_4gpu_gpu2_link7_crc_recovery.txt"
SHOW_GIDS = FIXTURES / "show_gids" / "cx4lx_4ports_eth01-04_one_down_no_ipv4_12gids.txt"


def _python36() -> str | None:
    """A Python 3.6 interpreter (the oldest the agent supports), when this machine has one."""
    found = shutil.which("python3.6")
    candidates = ([found] if found else []) + sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.6.*/bin/python3.6"))
    for path in candidates:
        try:
            out = subprocess.run([path, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                                 text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == "(3, 6)":
            return path
    return None


PYTHON36 = _python36()
# The agent runs under the suite's Python and, where one is installed, the oldest it supports.
AGENT_PYTHONS = [pytest.param(sys.executable, id="python-suite"),
                 pytest.param(PYTHON36, id="python3.6", marks=pytest.mark.skipif(
                     PYTHON36 is None, reason="no Python 3.6 interpreter on this machine (python3.6 / pyenv)"))]


def run_agent(*args: str, env: dict | None = None, timeout: int = 60, python: str | None = None
              ) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("TOPOWEB_TOKEN", None) if "TOPOWEB_TOKEN" not in (env or {}) else None
    if python and python != sys.executable:
        # another interpreter: none of the suite's virtualenv or PYTHON* settings
        full_env = {k: v for k, v in full_env.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    return subprocess.run([python or sys.executable, str(AGENT), *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout)


# ------------------------------------------------------------------------------------- syntax


def test_agent_is_python36_syntax_and_stdlib_only():
    source = AGENT.read_text()
    tree = ast.parse(source, feature_version=(3, 6))  # rejects walrus, positional-only, match, ...
    subprocess.run([sys.executable, "-W", "error", "-c", f"import ast; ast.parse(open({str(AGENT)!r}).read())"],
                   check=True)
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    assert "dataclasses" not in imported and "__future__" not in imported
    # Python 3.7+ APIs and the 3.8 f-string '=' specifier.
    for pattern in (r"capture_output\s*=", r"\btext\s*=\s*True", r"fromisoformat", r"\{[A-Za-z_][\w.]*=\}",
                    r"asyncio\.run\("):
        assert not re.search(pattern, source), pattern
    # Annotations are evaluated at definition time on 3.6: no list[str] / X | None there.
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and (n.returns or any(
        a.annotation for a in n.args.args))]


def test_agent_kinds_match_the_server_registry():
    namespace: dict = {}
    exec(compile(AGENT.read_text(), str(AGENT), "exec"), {"__name__": "agent_test", **namespace}, namespace)
    assert tuple(namespace["KINDS"]) == tuple(KINDS)


# --------------------------------------------------------------------- fake tools and fake sysfs

FAKE_QUERY_CSV = (  # synthetic: the CSV layout nvidia-smi prints for the fallback query
    "index, uuid, pci.bus_id, name, compute_cap, pstate, pcie.link.gen.current, pcie.link.gen.max, "
    "pcie.link.width.current, pcie.link.width.max\n"
    "0, GPU-11111111-2222-3333-4444-555555555555, 00000000:19:00.0, NVIDIA H100 80GB HBM3, 9.0, P0, 5, 5, 16, 16\n"
)


def write_script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.fixture
def fake_bin(tmp_path):
    """nvidia-smi (an old driver: rejects gpucurrent), lspci and ibstat printing real captures."""
    b = tmp_path / "bin"
    b.mkdir()
    log = tmp_path / "calls.log"
    q = tmp_path / "query.csv"
    q.write_text(FAKE_QUERY_CSV)
    write_script(b / "nvidia-smi", f"""echo "$@" >> {log}
case "$1" in
  --query-gpu=*gpucurrent*) echo 'Field "pcie.link.gen.gpucurrent" is not a valid field to query.'; exit 2;;
  --query-gpu=driver_version) echo 570.133.20;;
  --query-gpu=*) cat {q};;
  topo) if [ "$2" = "-m" ]; then cat {TOPO}; else echo 'cannot do -p2p here' >&2; exit 3; fi;;
  nvlink) if [ "$2" = "-e" ]; then cat {NVLINK_E}; fi;;
  -q) cat {SMI_Q};;
esac
""")
    write_script(b / "lspci", f"""case "$*" in
  "-D -tv") cat {LSPCI_TREE};;
  *) echo "0000:19:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)";
     echo "	Capabilities: <access denied>";;
esac
""")
    write_script(b / "ibstat", f"cat {IBSTAT}\n")
    return b, log


def make_fake_sysfs(root: Path) -> None:
    """A PCI tree root port -> switch -> GPU + HCA, with one InfiniBand port (synthetic values)."""
    chain = ["pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:01.0"]
    devices = {
        "0000:19:00.0": ("0x030200", "0x10de", "0x2330", "0", "32.0 GT/s PCIe", "16", "nvidia"),
        "0000:1a:00.0": ("0x020700", "0x15b3", "0x1021", "0", "32.0 GT/s PCIe", "16", "mlx5_core"),
    }
    (root / "bus" / "pci" / "devices").mkdir(parents=True)
    (root / "bus" / "pci" / "drivers").mkdir(parents=True)
    parent = root / "devices"
    for part in chain:
        parent = parent / part
    for depth in range(2, len(chain) + 1):  # bridges listed too
        d = root / "devices" / Path(*chain[:depth])
        d.mkdir(parents=True, exist_ok=True)
        (d / "class").write_text("0x060400\n")
        (root / "bus" / "pci" / "devices" / chain[depth - 1]).symlink_to(d)
    for bdf, (cls, ven, dev, numa, speed, width, driver) in devices.items():
        d = parent / bdf
        d.mkdir()
        for name, value in (("class", cls), ("vendor", ven), ("device", dev), ("numa_node", numa),
                            ("current_link_speed", speed), ("max_link_speed", speed),
                            ("current_link_width", width), ("max_link_width", width),
                            ("local_cpulist", "0-55,112-167")):
            (d / name).write_text(value + "\n")
        drv = root / "bus" / "pci" / "drivers" / driver
        drv.mkdir()
        (d / "driver").symlink_to(drv)
        (root / "bus" / "pci" / "devices" / bdf).symlink_to(d)
    hca = parent / "0000:1a:00.0"
    (hca / "net" / "ibp26s0").mkdir(parents=True)
    ca = root / "class" / "infiniband" / "mlx5_0"
    (ca / "ports" / "1" / "gids").mkdir(parents=True)
    (ca / "ports" / "1" / "gid_attrs" / "types").mkdir(parents=True)
    (ca / "device").symlink_to(hca)
    for name, value in (("node_guid", "946d:ae03:00cd:e72c"), ("fw_ver", "28.39.1002"), ("hca_type", "MT4129"),
                        ("board_id", "MT_0000000838"), ("node_type", "1: CA")):
        (ca / name).write_text(value + "\n")
    port = ca / "ports" / "1"
    for name, value in (("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"), ("rate", "400 Gb/sec (4X NDR)"),
                        ("link_layer", "InfiniBand"), ("lid", "0x4b"), ("sm_lid", "0x14e")):
        (port / name).write_text(value + "\n")
    (port / "gids" / "0").write_text("fe80:0000:0000:0000:946d:ae03:00cd:e72c\n")
    (port / "gids" / "1").write_text("0000:0000:0000:0000:0000:0000:0000:0000\n")
    (port / "gid_attrs" / "types" / "0").write_text("IB/RoCE v1\n")
    (port / "counters").mkdir()
    (port / "hw_counters").mkdir()
    for name, value in (("symbol_error", "0"), ("link_downed", "2"), ("link_error_recovery", "0"),
                        ("port_xmit_data", "123456789")):
        (port / "counters" / name).write_text(value + "\n")
    (port / "hw_counters" / "rnr_nak_retry_err").write_text("0\n")
    (port / "hw_counters" / "out_of_sequence").write_text("N/A\n")  # not a number: left out
    (root / "module" / "nvidia").mkdir(parents=True)
    (root / "module" / "nvidia" / "version").write_text("570.133.20\n")


@pytest.mark.parametrize("python", AGENT_PYTHONS)
def test_collectors_on_fake_tools_and_sysfs(tmp_path, fake_bin, python):
    bin_dir, log = fake_bin
    sysfs = tmp_path / "sys"
    make_fake_sysfs(sysfs)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    result = run_agent("--dry-run", "--hostname", "node-7", "--sysfs-root", str(sysfs), env=env, python=python)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["schema"] == "topoweb.report/1" and report["hostname"] == "node-7"
    assert report["collected_at"].endswith("Z") and report["agent_version"]
    assert report["meta"]["driver"] == "570.133.20" and report["meta"]["root"] is (os.geteuid() == 0)
    assert report["meta"]["kernel"]
    sections = report["sections"]
    assert set(sections) == {"nvidia_smi_gpus", "nvidia_smi_topo", "nvidia_smi_nvlink_errors", "nvidia_smi_q",
                             "lspci_tree", "lspci_verbose", "sysfs_pci", "sysfs_ib", "ib_counters", "ibstat",
                             "host_info"}
    # Old driver: the full query was rejected and the older field names were used.
    calls = log.read_text().splitlines()
    assert "gpucurrent" in calls[0] and "pcie.link.gen.current" in calls[1]
    assert sections["nvidia_smi_gpus"] == FAKE_QUERY_CSV
    assert sections["nvidia_smi_topo"] == TOPO.read_text()
    assert sections["ibstat"] == IBSTAT.read_text()
    unavailable = report["unavailable"]
    assert "exited with status 3" in unavailable["nvidia_smi_p2p"]
    assert "printed nothing" in unavailable["nvidia_smi_nvlink"]
    assert "show_gids not found" in unavailable["show_gids"]
    assert sections["nvidia_smi_nvlink_errors"] == NVLINK_E.read_text()
    # nvidia-smi -q as printed, without the programs using the GPU
    assert "Xorg" in SMI_Q.read_text() and "Xorg" not in sections["nvidia_smi_q"]
    assert "Process ID" not in sections["nvidia_smi_q"] and "    Processes\n" in sections["nvidia_smi_q"]
    smi_q = KINDS["nvidia_smi_q"].parse(sections["nvidia_smi_q"])
    assert [(g.bdf, g.name, g.link_gen_current) for g in smi_q.gpus] == [("0000:01:00.0", "NVIDIA TITAN V", 1)]
    assert smi_q.warnings == ()
    if os.geteuid() != 0:
        assert "root" in report["meta"]["lspci_verbose_note"]

    # The server's own parsers read the agent's sysfs listings.
    pci = KINDS["sysfs_pci"].parse(sections["sysfs_pci"])
    by_bdf = {d.bdf: d for d in pci.devices}
    gpu = by_bdf["0000:19:00.0"]
    assert gpu.ancestry == ("0000:15:01.0", "0000:16:00.0", "0000:17:01.0")
    assert gpu.root_complex == "pci0000:15" and gpu.driver == "nvidia" and gpu.numa_node == 0
    assert gpu.vendor_id == "10de" and gpu.current_link_width == 16 and gpu.current_link_speed_gts == 32.0
    assert not pci.warnings
    assert str(sysfs) not in sections["sysfs_pci"] and "/sys/devices/pci0000:15/" in sections["sysfs_pci"]
    ib = KINDS["sysfs_ib"].parse(sections["sysfs_ib"])
    text = json.dumps(KINDS["sysfs_ib"].parse(sections["sysfs_ib"]), default=str)
    assert "0000:1a:00.0" in text and "mlx5_0" in text and "ibp26s0" in text
    assert not getattr(ib, "warnings", ())
    counters = KINDS["ib_counters"].parse(sections["ib_counters"])
    (p,) = counters.ports
    assert (p.ca, p.port, p.link_layer, p.state) == ("mlx5_0", 1, "InfiniBand", "Active")
    assert p.counters == {"link_downed": 2, "link_error_recovery": 0, "port_xmit_data": 123456789, "symbol_error": 0}
    assert p.hw_counters == {"rnr_nak_retry_err": 0} and counters.warnings == ()


@pytest.mark.parametrize("python", AGENT_PYTHONS)
def test_show_gids_and_counter_uptime_and_dry_run(tmp_path, fake_bin, python):
    """show_gids is run where installed; ib_counters carries /proc/uptime; --dry-run shows the new sections."""
    bin_dir, _ = fake_bin
    write_script(bin_dir / "show_gids", f"cat {SHOW_GIDS}\n")
    sysfs, proc = tmp_path / "sys", tmp_path / "proc"
    make_fake_sysfs(sysfs)
    proc.mkdir()
    (proc / "uptime").write_text("864000.25 1723456.78\n")
    result = run_agent("--dry-run", "--sysfs-root", str(sysfs), "--proc-root", str(proc),
                       env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, python=python)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["sections"]["show_gids"] == SHOW_GIDS.read_text()
    assert KINDS["ib_counters"].parse(report["sections"]["ib_counters"]).uptime_s == 864000.25
    for kind in ("show_gids", "ib_counters", "nvidia_smi_q", "nvidia_smi_nvlink_errors"):
        assert kind in result.stderr.split("sections (", 1)[1].split(")", 1)[0]  # the dry-run summary line
        assert report["meta"]["collector"][kind]["seconds"] >= 0


def test_counters_without_rdma_devices_are_unavailable(tmp_path, fake_bin):
    bin_dir, _ = fake_bin
    result = run_agent("--dry-run", "--sysfs-root", str(tmp_path / "nosys"), env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    unavailable = json.loads(result.stdout)["unavailable"]
    assert "no RDMA devices" in unavailable["ib_counters"] and "ib_counters" not in json.loads(result.stdout)["sections"]


def test_ibv_devinfo_is_used_when_ibstat_is_missing(tmp_path, fake_bin):
    bin_dir, _ = fake_bin
    (bin_dir / "ibstat").unlink()
    write_script(bin_dir / "ibv_devinfo", f"cat {DEMO / 'ibv_devinfo' / 'holohub_igx_orin_cx7_eth_and_ib.txt'}\n")
    result = run_agent("--dry-run", "--sysfs-root", str(tmp_path / "nosys"), env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    report = json.loads(result.stdout)
    assert "ibv_devinfo" in report["sections"] and "ibstat" not in report["sections"]
    assert "ibv_devinfo" in report["unavailable"]["ibstat"]


def test_missing_tools_are_unavailable_and_nothing_collected_exits_5(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_agent("--dry-run", "--sysfs-root", str(tmp_path / "nosys"), env={"PATH": str(empty)})
    assert result.returncode == 5
    assert "nothing to report" in result.stderr and "nvidia-smi not found" in result.stderr


def test_command_timeout_is_recorded(tmp_path, fake_bin):
    bin_dir, _ = fake_bin
    write_script(bin_dir / "ibstat", "sleep 5\n")
    result = run_agent("--dry-run", "--timeout", "0.5", "--sysfs-root", str(tmp_path / "nosys"),
                       env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert "timed out" in json.loads(result.stdout)["unavailable"]["ibstat"]


@pytest.mark.parametrize("args", [
    [],                                            # no --server, no --dry-run/--output
    ["--server", "http://x"],                      # no token
    ["--server", "ftp://x", "--token", "t"],       # bad URL
    ["--bogus"],
    ["--dry-run", "--splay", "-1"],                # a negative splay
])
def test_usage_errors_exit_2(args):
    result = run_agent(*args)
    assert result.returncode == 2, result.stderr


def test_output_file_and_from_dir(tmp_path):
    captures = tmp_path / "cap"
    captures.mkdir()
    shutil.copy(TOPO, captures / "nvidia_smi_topo.txt")
    (captures / "hostname.txt").write_text("h100-x9\n")
    (captures / "notes.md").write_text("ignored")
    out = tmp_path / "report.json"
    result = run_agent("--from-dir", str(captures), "--output", str(out))
    assert result.returncode == 0, result.stderr
    assert "ignoring notes.md" in result.stderr
    saved = json.loads(out.read_text())
    assert saved["hostname"] == "h100-x9" and saved["sections"] == {"nvidia_smi_topo": TOPO.read_text()}
    assert run_agent("--from-dir", str(tmp_path / "missing"), "--dry-run").returncode == 6
    assert run_agent("--from-dir", str(captures), "--output", str(tmp_path / "no" / "dir" / "r.json")).returncode == 6


# --------------------------------------------------------------------------- talking to servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_server_exits_4_after_retries(tmp_path):
    captures = tmp_path / "cap"
    captures.mkdir()
    shutil.copy(TOPO, captures / "nvidia_smi_topo.txt")
    result = run_agent("--from-dir", str(captures), "--server", f"http://127.0.0.1:{free_port()}",
                       "--token", "t", "--retries", "2", "--retry-wait", "0.01")
    assert result.returncode == 4
    assert result.stderr.count("retrying") == 2 and "gave up after 3 attempts" in result.stderr


def _fake_server(answers: list, seen: list) -> http.server.HTTPServer:
    """Answers each POST with the next of ``answers``: a status, or (status, {header: value})."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append((self.headers["Authorization"], json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            answer = answers.pop(0)
            code, headers = answer if isinstance(answer, tuple) else (answer, {})
            payload = {"upload_id": 7, "status": "received", "duplicate": False, "status_url": "u"} if code == 202 \
                else {"error": "busy"}
            data = json.dumps(payload).encode()
            self.send_response(code)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_splay_waits_a_random_time_within_the_window_then_sends(tmp_path):
    seen: list = []
    server = _fake_server([202], seen)
    captures = tmp_path / "cap"
    captures.mkdir()
    shutil.copy(TOPO, captures / "nvidia_smi_topo.txt")
    try:
        result = run_agent("--from-dir", str(captures), "--server", f"http://127.0.0.1:{server.server_port}",
                           "--splay", "0.3", env={"TOPOWEB_TOKEN": "tw_secret"})
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    waited = re.search(r"waiting ([0-9.]+)s before sending \(--splay 0.3\)", result.stderr)
    assert waited and 0 <= float(waited.group(1)) <= 0.3, result.stderr
    assert len(seen) == 1 and "upload 7" in result.stderr
    # nothing is sent with --dry-run, so there is nothing to wait for
    dry = run_agent("--from-dir", str(captures), "--dry-run", "--splay", "30", timeout=20)
    assert dry.returncode == 0 and "waiting" not in dry.stderr


def test_5xx_is_retried_until_accepted(tmp_path):
    seen: list = []
    server = _fake_server([503, 500, 202], seen)
    try:
        captures = tmp_path / "cap"
        captures.mkdir()
        shutil.copy(TOPO, captures / "nvidia_smi_topo.txt")
        result = run_agent("--from-dir", str(captures), "--server", f"http://127.0.0.1:{server.server_port}",
                           "--retry-wait", "0.01", env={"TOPOWEB_TOKEN": "tw_secret"})
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    assert len(seen) == 3 and seen[0][0] == "Bearer tw_secret"
    assert "upload 7" in result.stderr


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("python", AGENT_PYTHONS)
def test_agent_end_to_end_against_live_server(live_server, tmp_path, python):
    from apps.ingest import services

    cluster = services.create_cluster(name="live")
    _, secret = services.issue_token(cluster=cluster)
    captures = tmp_path / "esc8000"
    captures.mkdir()
    for kind, rel in (("nvidia_smi_topo", "topo/stelline_asus_esc8000a_e12_4x_rtx6000ada.txt"),
                      ("lspci_tree", "lspci_tree/stelline_asus_esc8000a_e12.txt"),
                      ("lspci_verbose", "lspci_vvv/stelline_asus_esc8000a_e12_gpus_cx7_raid.txt"),
                      ("ibv_devinfo", "ibv_devinfo/stelline_asus_esc8000a_e12_cx7_eth_down.txt")):
        shutil.copy(DEMO / rel, captures / f"{kind}.txt")
    (captures / "hostname.txt").write_text("esc8000-01\n")

    result = run_agent("--from-dir", str(captures), "--server", live_server.url, "--token", secret, python=python)
    assert result.returncode == 0, result.stderr
    upload = Upload.objects.get(cluster=cluster)
    assert upload.status == "done", upload.error
    assert upload.via == "agent" and upload.host.hostname == "esc8000-01"
    assert json.loads(upload.raw)["sections"]["lspci_verbose"] == (captures / "lspci_verbose.txt").read_text()
    assert Snapshot.objects.get(upload=upload).gpu_count == 4

    again = run_agent("--from-dir", str(captures), "--server", live_server.url, "--token", secret, python=python)
    assert again.returncode == 0 and "already had this report" in again.stderr
    assert Upload.objects.filter(cluster=cluster).count() == 1

    bad = run_agent("--from-dir", str(captures), "--server", live_server.url, "--token", "tw_wrong", python=python)
    assert bad.returncode == 3 and "401" in bad.stderr

    served = tmp_path / "served_agent.py"
    import urllib.request
    served.write_bytes(urllib.request.urlopen(live_server.url + "/agent.py").read())
    assert served.read_bytes() == AGENT.read_bytes()


def _captures(tmp_path) -> Path:
    captures = tmp_path / "cap"
    captures.mkdir(parents=True)
    shutil.copy(TOPO, captures / "nvidia_smi_topo.txt")
    return captures


@pytest.mark.parametrize("python", AGENT_PYTHONS)
def test_429_waits_the_retry_after_seconds_then_sends(tmp_path, python):
    seen: list = []
    server = _fake_server([(429, {"Retry-After": "1"}), 202], seen)
    started = time.monotonic()
    try:
        result = run_agent("--from-dir", str(_captures(tmp_path)), "--server", f"http://127.0.0.1:{server.server_port}",
                           "--retry-wait", "0.01", env={"TOPOWEB_TOKEN": "tw_secret"}, python=python)
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started >= 1.0  # it waited what the server asked, not its own 0.01 s
    assert len(seen) == 2 and "upload 7" in result.stderr
    assert re.search(r"server answered 429: busy; retrying in 1\.\ds as the server asked \(Retry-After 1 s; 1 of 5\)",
                     result.stderr), result.stderr
    quiet = _fake_server([(429, {"Retry-After": "0"}), 202], [])
    try:
        hushed = run_agent("--from-dir", str(_captures(tmp_path / "q")), "--server",
                           f"http://127.0.0.1:{quiet.server_port}", "--quiet", env={"TOPOWEB_TOKEN": "t"},
                           python=python)
    finally:
        quiet.shutdown()
    assert hushed.returncode == 0 and hushed.stderr == ""


def _load_agent():
    spec = importlib.util.spec_from_file_location("topoweb_agent_under_test", AGENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def agent_module(monkeypatch):
    """The agent loaded in-process, its sleeps recorded instead of slept."""
    module = _load_agent()
    sleeps: list[float] = []
    monkeypatch.setattr(module, "time", types.SimpleNamespace(sleep=sleeps.append, time=time.time,
                                                              monotonic=time.monotonic))
    module.sleeps = sleeps
    return module


def test_retry_after_is_honoured_capped_and_counts_against_the_retries(agent_module, capsys):
    seen: list = []
    server = _fake_server([(429, {"Retry-After": "7"}), (503, {"Retry-After": "4000"}), (500, {"Retry-After": "9"}),
                           202], seen)
    try:
        payload = agent_module.send(f"http://127.0.0.1:{server.server_port}", "tw_x", {"hostname": "h"},
                                    retries=5, retry_wait=0.5, http_timeout=5)
    finally:
        server.shutdown()
    assert payload["upload_id"] == 7 and len(seen) == 4
    first, second, third = agent_module.sleeps
    assert 7.0 <= first <= 7.5  # what the server asked, plus at most --retry-wait of spread
    assert 300.0 <= second <= 300.5  # capped at 300 s
    assert 0.5 * 4 * 0.8 <= third <= 0.5 * 4 * 1.2  # a 500's Retry-After is not a promise: own backoff
    err = capsys.readouterr().err
    assert "as the server asked (Retry-After 7 s; 1 of 5)" in err
    assert "as the server asked (Retry-After 4000 s, waiting at most 300; 2 of 5)" in err

    # Each wait uses one retry: with --retries 1 the second 429 is the end (exit 4).
    server = _fake_server([(429, {"Retry-After": "30"}), (429, {"Retry-After": "30"})], [])
    agent_module.sleeps.clear()
    try:
        with pytest.raises(SystemExit) as exited:
            agent_module.send(f"http://127.0.0.1:{server.server_port}", "tw_x", {"hostname": "h"},
                              retries=1, retry_wait=0.0, http_timeout=5)
    finally:
        server.shutdown()
    assert exited.value.code == 4 and agent_module.sleeps == [30.0]
    assert "gave up after 2 attempts" in capsys.readouterr().err


def test_retry_after_header_values():
    agent = _load_agent()
    now = datetime.datetime(2025, 1, 31, 12, 0, 0, tzinfo=datetime.timezone.utc)
    assert agent.retry_after_seconds("42") == 42.0
    assert agent.retry_after_seconds(" 0 ") == 0.0
    assert agent.retry_after_seconds("Fri, 31 Jan 2025 12:01:30 GMT", now=now) == 90.0
    assert agent.retry_after_seconds("Fri, 31 Jan 2025 11:00:00 GMT", now=now) == 0.0  # already past
    for bad in (None, "", "soon", "-5", "1.5e3"):
        assert agent.retry_after_seconds(bad) is None
