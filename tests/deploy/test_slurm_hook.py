"""The Slurm hook (Prolog / HealthCheckProgram): it returns 0 at once and prints nothing, whatever
happens, and starts the agent in the background -- at most once per interval, never two at once,
bounded by a timeout -- which really sends a report."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.deploy.helpers import AGENT, SLURM_CONF, SLURM_HOOK, wait_for

FAST = 2.0  # seconds: far below anything that would delay a job start


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def node(tmp_path):
    """A node's files: env file, state folder, a bin folder for fake tools, the marker folder."""
    n = type("Node", (), {})()
    n.root = tmp_path
    n.env_file = tmp_path / "agent.env"
    n.state = tmp_path / "state"
    n.bin = tmp_path / "bin"
    n.bin.mkdir()
    n.runs = tmp_path / "runs"
    n.runs.mkdir()
    # A closed port: the server is unreachable.
    n.env_file.write_text(f"TOPOWEB_SERVER=http://127.0.0.1:{free_port()}\nTOPOWEB_TOKEN=tw_test_token\n"
                          "TOPOWEB_SPLAY=0\n")
    n.env_file.chmod(0o600)
    return n


def fake_agent(node, seconds: float = 3.0) -> Path:
    """An agent that records how it was started, then runs `seconds` (as one retrying a server that
    does not answer would)."""
    path = node.root / "fake_agent.py"
    path.write_text(f"""import json, os, sys, time, uuid
record = {{"argv": sys.argv[1:], "token": os.environ.get("TOPOWEB_TOKEN"), "pid": os.getpid(),
          "sid": os.getsid(0), "stdin_tty": os.isatty(0)}}
path = os.path.join({str(node.runs)!r}, uuid.uuid4().hex)
with open(path + ".part", "w") as f:
    json.dump(record, f)
os.rename(path + ".part", path)
time.sleep({seconds})
""")
    return path


def run_hook(node, *args: str, env: dict | None = None,
             timeout: float = 30) -> tuple[subprocess.CompletedProcess, float]:
    full = {"PATH": f"{node.bin}:/usr/bin:/bin", "HOME": str(node.root), "TOPOWEB_ENV_FILE": str(node.env_file),
            "TOPOWEB_STATE_DIR": str(node.state), "TOPOWEB_PYTHON": sys.executable, "TOPOWEB_USE_SYSTEMD": "0",
            **(env or {})}
    started = time.monotonic()
    proc = subprocess.run(["bash", str(SLURM_HOOK), *args], env=full, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    return proc, time.monotonic() - started


def runs(node) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(node.runs.iterdir()) if p.suffix != ".part"]


def test_returns_zero_at_once_and_starts_the_agent_detached(node):
    agent = fake_agent(node, seconds=20)
    proc, took = run_hook(node, env={"TOPOWEB_AGENT": str(agent), "TOPOWEB_AGENT_TIMEOUT": "3"})
    assert proc.returncode == 0 and took < FAST, (proc, took)
    assert proc.stdout == "" and proc.stderr == ""
    started = wait_for(lambda: runs(node), timeout=10)
    assert started, (node.state / "last-run.log").read_text()
    record = started[0]
    assert record["argv"][:2] == ["--server", re.search(r"TOPOWEB_SERVER=(\S+)", node.env_file.read_text()).group(1)]
    assert "--quiet" in record["argv"] and record["argv"][record["argv"].index("--splay") + 1] == "0"
    assert record["token"] == "tw_test_token" and "tw_test_token" not in record["argv"]  # not in `ps`
    assert record["sid"] != os.getsid(0)  # a session of its own: slurmd neither waits for it nor kills it
    # The timeout stops an agent that runs too long (here 3 s of its 20).
    assert wait_for(lambda: "exited with status 124" in (node.state / "last-run.log").read_text(), timeout=15), \
        (node.state / "last-run.log").read_text()


def test_at_most_once_per_interval(node):
    agent = fake_agent(node, seconds=0)
    env = {"TOPOWEB_AGENT": str(agent), "TOPOWEB_MIN_INTERVAL": "3600"}
    for _ in range(3):
        proc, took = run_hook(node, env=env)
        assert proc.returncode == 0 and took < FAST
    time.sleep(1.5)
    assert len(runs(node)) == 1
    # Once the interval has passed (the stamp is old), the next call runs it again.
    stamp = node.state / "last-start"
    old = time.time() - 4000
    os.utime(stamp, (old, old))
    proc, _ = run_hook(node, env=env)
    assert proc.returncode == 0
    assert wait_for(lambda: len(runs(node)) == 2, timeout=10)


def test_never_two_agents_at_once(node):
    agent = fake_agent(node, seconds=6)
    env = {"TOPOWEB_AGENT": str(agent), "TOPOWEB_MIN_INTERVAL": "0"}
    proc, _ = run_hook(node, env=env)
    assert proc.returncode == 0 and wait_for(lambda: runs(node), timeout=10)
    proc, took = run_hook(node, env=env)  # while the first still runs
    assert proc.returncode == 0 and took < FAST
    time.sleep(2)
    assert len(runs(node)) == 1  # flock: the second found the lock taken


def test_unreachable_server_with_the_real_agent(node, fake_tools):
    """The real agent, a server that refuses connections: the hook returns at once; the agent
    retries in the background until the hook's timeout ends it."""
    env = {"TOPOWEB_AGENT": str(AGENT), "TOPOWEB_AGENT_TIMEOUT": "4",
           "PATH": f"{fake_tools}:{node.bin}:/usr/bin:/bin"}
    proc, took = run_hook(node, env=env)
    assert proc.returncode == 0 and took < FAST and proc.stdout == ""
    log = node.state / "last-run.log"
    done = wait_for(lambda: log.exists() and "agent exited with status" in log.read_text(), timeout=30)
    assert done, log.read_text() if log.exists() else "no log"
    assert re.search(r"agent exited with status (4|124)\b", log.read_text()), log.read_text()


@pytest.mark.parametrize("fake_curl", ["sleep 5", "exit 7"], ids=["curl-hangs", "curl-fails"])
def test_fetch_mode_never_waits_for_curl(node, fake_curl):
    curl = node.bin / "curl"
    curl.write_text(f"#!/bin/sh\necho \"$@\" >> {node.root / 'curl.log'}\n{fake_curl}\n")
    curl.chmod(0o755)
    missing = node.root / "no-agent-here.py"
    proc, took = run_hook(node, env={"TOPOWEB_AGENT": str(missing), "TOPOWEB_AGENT_FETCH": "1",
                                     "TOPOWEB_AGENT_TIMEOUT": "3"})
    assert proc.returncode == 0 and took < FAST
    assert wait_for(lambda: (node.root / "curl.log").exists(), timeout=10)
    assert "/agent.py" in (node.root / "curl.log").read_text() and "--max-time" in (node.root / "curl.log").read_text()
    if fake_curl.startswith("exit"):  # no agent, no copy of a previous fetch: said in the log, still 0
        log = node.state / "last-run.log"
        assert wait_for(lambda: log.exists() and "no agent at" in log.read_text(), timeout=10), log.read_text()


@pytest.mark.parametrize("case", ["no-env-file", "no-token", "state-dir-unwritable", "no-agent", "garbage-numbers"])
def test_anything_wrong_still_returns_zero_silently(node, case):
    env = {"TOPOWEB_AGENT": str(fake_agent(node, seconds=0))}
    if case == "no-env-file":
        env["TOPOWEB_ENV_FILE"] = str(node.root / "missing.env")
    elif case == "no-token":
        node.env_file.write_text("TOPOWEB_SERVER=http://127.0.0.1:9\n")
    elif case == "state-dir-unwritable":
        env["TOPOWEB_STATE_DIR"] = "/proc/topoweb-cannot-exist"
    elif case == "no-agent":
        env["TOPOWEB_AGENT"] = str(node.root / "missing.py")
    else:
        env.update({"TOPOWEB_MIN_INTERVAL": "soon", "TOPOWEB_AGENT_TIMEOUT": "0", "TOPOWEB_SPLAY": "x"})
    proc, took = run_hook(node, env=env)
    assert proc.returncode == 0 and took < FAST, proc
    assert proc.stdout == "" and proc.stderr == ""
    if case in ("no-env-file", "no-token", "state-dir-unwritable"):
        time.sleep(0.5)
        assert runs(node) == []
    if case == "garbage-numbers":  # bad numbers fall back to the defaults (a timeout of 0 would be none)
        started = wait_for(lambda: runs(node), timeout=10)
        assert started and started[0]["argv"][started[0]["argv"].index("--splay") + 1] == "300"
        log = node.state / "last-run.log"
        assert wait_for(lambda: "agent exited with status 0" in log.read_text(), timeout=10), log.read_text()


def test_env_file_is_read_not_executed(node):
    marker = node.root / "executed"
    node.env_file.write_text(f"TOPOWEB_SERVER=http://127.0.0.1:9\nTOPOWEB_TOKEN=tw_x\ntouch {marker}\n"
                             f"$(touch {marker})\nPATH=/nowhere\n")
    proc, _ = run_hook(node, env={"TOPOWEB_AGENT": str(fake_agent(node, seconds=0))})
    assert proc.returncode == 0
    assert wait_for(lambda: runs(node), timeout=10)
    assert not marker.exists()


def test_uses_the_systemd_unit_when_asked(node):
    systemctl = node.bin / "systemctl"
    systemctl.write_text(f"#!/bin/sh\necho \"$@\" >> {node.root / 'systemctl.log'}\n")
    systemctl.chmod(0o755)
    proc, took = run_hook(node, env={"TOPOWEB_USE_SYSTEMD": "1", "TOPOWEB_AGENT": str(fake_agent(node, 0))})
    assert proc.returncode == 0 and took < FAST
    log = node.root / "systemctl.log"
    assert wait_for(log.exists, timeout=10)
    assert log.read_text().split() == ["start", "--no-block", "topoweb-agent.service"]
    time.sleep(0.5)
    assert runs(node) == []  # the unit runs the agent, not the hook


@pytest.mark.django_db(transaction=True)
def test_the_hook_gets_a_report_to_the_server(node, live_token, fake_tools):
    from apps.ingest.models import Upload

    url, cluster, token = live_token
    node.env_file.write_text(f"TOPOWEB_SERVER={url}\nTOPOWEB_TOKEN={token}\nTOPOWEB_SPLAY=0\n")
    proc, took = run_hook(node, env={"TOPOWEB_AGENT": str(AGENT), "PATH": f"{fake_tools}:/usr/bin:/bin"})
    assert proc.returncode == 0 and took < FAST
    log = node.state / "last-run.log"
    upload = wait_for(lambda: Upload.objects.filter(cluster__name=cluster).first(), timeout=60)
    assert upload is not None, log.read_text()
    assert upload.via == "agent" and "nvidia_smi_topo" in upload.raw
    # the server answers once it has processed the report (in-process here): the test ends after the
    # agent has its answer, not while the request still writes (the flush after the test would wait
    # on those rows and deadlock)
    assert wait_for(lambda: "exited with status 0" in log.read_text(), timeout=60), log.read_text()


def test_slurm_conf_example_names_the_hook():
    text = SLURM_CONF.read_text()
    active = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert "HealthCheckProgram=/etc/slurm/topoweb-slurm.sh" in active
    interval = next(int(line.split("=", 1)[1]) for line in active if line.startswith("HealthCheckInterval="))
    assert interval >= 300
    assert "#Prolog=/etc/slurm/topoweb-slurm.sh" in text
    assert f"install -m 0755 {SLURM_HOOK.name} /etc/slurm/{SLURM_HOOK.name}" in text
