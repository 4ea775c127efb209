"""The systemd units of deploy/: parsed key by key, run (the agent's command line, against a live
server), and checked by `systemd-analyze verify` and `security` where this machine has them."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.helpers import (AGENT, AGENT_ENV, AGENT_TIMER, AGENT_UNIT, GUNICORN_CONF, ROOT, SERVER_ENV,
                                  SERVER_UNITS, UNIT_FILES, expand_systemd, load_agent, read_env_file, read_unit,
                                  unit_values)

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed here (Debian: the systemd package)")

AGENT_INSTALLED = "/usr/local/lib/topoweb/topoweb_agent.py"
KNOWN_SECTIONS = {"Unit", "Service", "Timer", "Install"}


def unit_environment(path: Path, env_file: Path) -> dict[str, str]:
    """The environment systemd gives the unit's commands: Environment=, then the EnvironmentFile=
    (which wins)."""
    env = {}
    for assignment in unit_values(path, "Service", "Environment"):
        key, value = assignment.split("=", 1)
        env[key] = value
    env.update(read_env_file(env_file))
    return env


# ----------------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("path", UNIT_FILES, ids=lambda p: p.name)
def test_unit_parses_with_known_sections(path):
    unit = read_unit(path)
    assert set(unit.sections()) <= KNOWN_SECTIONS, unit.sections()
    assert unit["Unit"]["Description"]
    kind = path.suffix[1:]
    assert kind.capitalize() in unit.sections()
    # No key written twice by mistake (configparser would keep the last silently), but list-valued ones.
    names = [line.split("=", 1)[0].strip() for line in path.read_text().splitlines()
             if "=" in line and not line.lstrip().startswith(("#", ";"))]
    repeated = {n for n in names if names.count(n) > 1} - {"SystemCallFilter", "Environment"}
    assert not repeated, repeated


def test_agent_service_runs_the_agent_once_as_root_with_the_token_from_a_root_only_file():
    service = read_unit(AGENT_UNIT)["Service"]
    assert service["Type"] == "oneshot"
    assert service.get("User", "root") == "root"  # PCI config space, InfiniBand MADs
    assert service["EnvironmentFile"] == "/etc/topoweb/agent.env"  # no '-': a missing file is an error
    argv = expand_systemd(service["ExecStart"], {"TOPOWEB_SERVER": "https://s", "TOPOWEB_SPLAY": "300"})
    assert argv[:2] == ["/usr/bin/python3", AGENT_INSTALLED]
    assert argv[2:4] == ["--server", "https://s"]
    assert "--splay" in argv and "--quiet" in argv
    assert "--token" not in argv and "TOPOWEB_TOKEN" not in service["ExecStart"]  # never on a command line
    # Hardening that still lets it read /sys and /proc and open the GPUs and HCAs.
    assert service["ProtectSystem"] == "strict" and service["NoNewPrivileges"] == "yes"
    assert service["ProtectKernelTunables"] == "yes" and service["ProtectHome"] == "yes"
    assert service.get("PrivateDevices", "no") == "no"  # /dev/nvidia*, /dev/infiniband
    assert service.get("ProcSubset", "all") == "all"  # /proc/cpuinfo, /proc/driver/nvidia
    assert "ReadWritePaths" not in service  # it writes nothing
    assert "CAP_SYS_ADMIN" in service["CapabilityBoundingSet"].split()
    assert "AF_NETLINK" in service["RestrictAddressFamilies"].split()  # ibv_devinfo's RDMA netlink
    minutes = int(re.fullmatch(r"(\d+)min", service["TimeoutStartSec"]).group(1))
    assert minutes * 60 > int(read_env_file(AGENT_ENV)["TOPOWEB_SPLAY"]) + 600


def test_agent_command_line_is_one_the_agent_accepts():
    env = unit_environment(AGENT_UNIT, AGENT_ENV)
    argv = expand_systemd(read_unit(AGENT_UNIT)["Service"]["ExecStart"], env)
    args = load_agent().build_parser().parse_args(argv[2:])
    assert args.server == "https://topoweb.example.org" and args.splay == 300 and args.quiet


def test_agent_env_example_names_what_the_unit_uses():
    env = read_env_file(AGENT_ENV)
    assert set(env) == {"TOPOWEB_SERVER", "TOPOWEB_TOKEN", "TOPOWEB_SPLAY"}
    assert env["TOPOWEB_SERVER"].startswith("https://") and env["TOPOWEB_TOKEN"] == ""
    used = set(re.findall(r"\$\{(\w+)\}", read_unit(AGENT_UNIT)["Service"]["ExecStart"]))
    assert used <= set(env)


def test_agent_timer_is_hourly_persistent_and_spread():
    unit = read_unit(AGENT_TIMER)
    timer = unit["Timer"]
    assert timer["OnCalendar"] == "hourly"
    assert timer["Persistent"] == "true"
    spread = re.fullmatch(r"(\d+)(min|s)", timer["RandomizedDelaySec"])
    assert spread and int(spread.group(1)) > 0
    assert timer.get("Unit", "topoweb-agent.service") == AGENT_UNIT.name
    assert unit["Install"]["WantedBy"] == "timers.target"


@pytest.mark.django_db(transaction=True)
def test_agent_unit_command_sends_a_report(live_token, tmp_path, fake_tools):
    """The unit's ExecStart, expanded as systemd expands it (installed paths swapped for this
    checkout's), sends this machine's report to a live server with the token of the env file."""
    from apps.ingest.models import Upload

    url, cluster, token = live_token
    env_file = tmp_path / "agent.env"
    env_file.write_text(f"TOPOWEB_SERVER={url}\nTOPOWEB_TOKEN={token}\nTOPOWEB_SPLAY=0\n")
    env = unit_environment(AGENT_UNIT, env_file)
    argv = expand_systemd(read_unit(AGENT_UNIT)["Service"]["ExecStart"], env)
    assert argv[:2] == ["/usr/bin/python3", AGENT_INSTALLED]
    argv[:2] = [sys.executable, str(AGENT)]
    run_env = {"PATH": f"{fake_tools}:/usr/bin:/bin", "TOPOWEB_TOKEN": env["TOPOWEB_TOKEN"]}
    proc = subprocess.run(argv, env=run_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""  # --quiet
    upload = Upload.objects.get(cluster__name=cluster)
    assert upload.via == "agent" and upload.host.hostname == socket.gethostname()


# ----------------------------------------------------------------------------- server units


@pytest.mark.parametrize("name", sorted(SERVER_UNITS))
def test_server_unit_runs_as_the_service_user_with_the_shared_settings(name):
    unit = read_unit(SERVER_UNITS[name])
    service = unit["Service"]
    assert service["User"] == "topoweb" and service["Group"] == "topoweb"
    assert service["EnvironmentFile"] == "/etc/topoweb/topoweb.env"
    assert service["WorkingDirectory"] == "/opt/topoweb"
    assert service["Restart"] == "on-failure"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    assert service["ProtectSystem"] == "strict" and service["NoNewPrivileges"] == "yes"
    assert service["CapabilityBoundingSet"] == ""  # no capability at all
    argv = expand_systemd(service["ExecStart"], {"WORKER_CONCURRENCY": "2"})
    assert argv[0].startswith("/opt/topoweb/.venv/bin/")
    # What it writes: the web server and workers var/ (import archives), beat its state directory.
    if name in ("web", "worker"):
        assert service["ReadWritePaths"] == "/opt/topoweb/var"
    else:
        assert "ReadWritePaths" not in service


def test_web_unit_runs_gunicorn_with_the_shipped_config():
    service = read_unit(SERVER_UNITS["web"])["Service"]
    argv = expand_systemd(service["ExecStart"], {})
    assert argv[0] == "/opt/topoweb/.venv/bin/gunicorn" and argv[-1] == "topoweb.wsgi:application"
    config = Path(argv[argv.index("--config") + 1])
    assert config == Path("/opt/topoweb") / GUNICORN_CONF.relative_to(ROOT)
    assert service["Type"] == "notify"  # gunicorn tells systemd when it listens
    assert "HUP" in service["ExecReload"]


def test_worker_unit_runs_celery_worker_and_outlasts_the_hard_time_limit():
    service = read_unit(SERVER_UNITS["worker"])["Service"]
    argv = expand_systemd(service["ExecStart"], {"WORKER_CONCURRENCY": "2"})
    assert argv[:4] == ["/opt/topoweb/.venv/bin/celery", "-A", "topoweb", "worker"]
    assert argv[argv.index("--concurrency") + 1] == "2"
    assert "-P" not in argv and "--pool" not in argv  # prefork: it enforces the time limits
    hard_limit = int(read_env_file(SERVER_ENV)["TOPOWEB_TASK_TIME_LIMIT"])
    assert int(service["TimeoutStopSec"]) > hard_limit  # a warm shutdown may finish its tasks
    assert unit_values(SERVER_UNITS["worker"], "Service", "Environment") == ["WORKER_CONCURRENCY=2"]


def test_beat_unit_keeps_its_schedule_in_its_state_directory():
    service = read_unit(SERVER_UNITS["beat"])["Service"]
    argv = expand_systemd(service["ExecStart"], {})
    assert argv[:4] == ["/opt/topoweb/.venv/bin/celery", "-A", "topoweb", "beat"]
    schedule = Path(argv[argv.index("--schedule") + 1])
    assert schedule.parent == Path("/var/lib") / service["StateDirectory"]


# --------------------------------------------------------------------------- systemd-analyze


def systemd_root(tmp_path: Path, units: list[Path]) -> Path:
    """A file-system root for `systemd-analyze --root`: the units in /etc/systemd/system and an
    executable at every absolute path their Exec*= lines name (the real ones live on the target)."""
    root = tmp_path / "root"
    system = root / "etc" / "systemd" / "system"
    system.mkdir(parents=True)
    for unit in units:
        shutil.copy(unit, system / unit.name)
        for line in unit.read_text().splitlines():
            match = re.match(r"\s*Exec\w+=[-@:+!]*(/\S+)", line)
            if match:
                exe = root / match.group(1).lstrip("/")
                exe.parent.mkdir(parents=True, exist_ok=True)
                exe.write_text("#!/bin/sh\n")
                exe.chmod(0o755)
    return root


def analyze_verify(root: Path, names: list[str]) -> subprocess.CompletedProcess:
    files = [str(root / "etc" / "systemd" / "system" / n) for n in names]
    return subprocess.run([SYSTEMD_ANALYZE, "verify", f"--root={root}", "--man=no", "--recursive-errors=no", *files],
                          capture_output=True, text=True, timeout=120)


@needs_systemd_analyze
def test_systemd_analyze_verify(tmp_path):
    root = systemd_root(tmp_path, UNIT_FILES)
    proc = analyze_verify(root, [u.name for u in UNIT_FILES])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not [line for line in (proc.stdout + proc.stderr).splitlines() if "topoweb" in line], proc.stderr


@needs_systemd_analyze
def test_systemd_analyze_verify_can_fail(tmp_path):
    """The check above would catch a misspelled key or a bad value."""
    broken = tmp_path / "src" / AGENT_UNIT.name
    broken.parent.mkdir()
    broken.write_text(AGENT_UNIT.read_text().replace("ProtectSystem=strict", "ProtectSytem=strict"))
    proc = analyze_verify(systemd_root(tmp_path, [broken]), [broken.name])
    assert proc.returncode != 0 and "ProtectSytem" in proc.stderr


@needs_systemd_analyze
@pytest.mark.parametrize("unit,threshold", [(AGENT_UNIT, 4.0)] + [(u, 2.5) for u in SERVER_UNITS.values()],
                         ids=lambda v: v.name if isinstance(v, Path) else str(v))
def test_systemd_analyze_security_exposure(tmp_path, unit, threshold):
    """systemd's own exposure score stays low (0 best, 10 worst): the agent, root with the few
    capabilities its tools need, below 4; the server's units, unprivileged, below 2.5."""
    help_text = subprocess.run([SYSTEMD_ANALYZE, "security", "--help"], capture_output=True, text=True).stdout
    if "--offline" not in help_text:
        pytest.skip("this systemd-analyze has no `security --offline` (systemd < 250)")
    root = systemd_root(tmp_path, [unit])
    proc = subprocess.run([SYSTEMD_ANALYZE, "security", "--offline=yes", f"--root={root}",
                           f"--threshold={threshold * 10:.0f}", str(root / "etc" / "systemd" / "system" / unit.name)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "SYSTEMD_COLORS": "0"})
    score = re.search(r"Overall exposure level for \S+: (\d+\.\d)", proc.stdout)
    assert score, proc.stdout + proc.stderr
    assert float(score.group(1)) <= threshold and proc.returncode == 0, proc.stdout[-2000:]
