"""Readers for the files of deploy/: systemd units, environment files, the Dockerfile, the agent."""

from __future__ import annotations

import configparser
import importlib.util
import json
import re
import shlex
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
AGENT = ROOT / "apps" / "ingest" / "agent" / "topoweb_agent.py"

AGENT_UNIT = DEPLOY / "agent" / "topoweb-agent.service"
AGENT_TIMER = DEPLOY / "agent" / "topoweb-agent.timer"
AGENT_ENV = DEPLOY / "agent" / "agent.env.example"
DAEMONSET = DEPLOY / "agent" / "kubernetes" / "topoweb-agent.yaml"
SLURM_HOOK = DEPLOY / "agent" / "slurm" / "topoweb-slurm.sh"
SLURM_CONF = DEPLOY / "agent" / "slurm" / "slurm.conf.example"
SERVER = DEPLOY / "server"
SERVER_UNITS = {name: SERVER / f"topoweb-{name}.service" for name in ("web", "worker", "beat")}
SERVER_ENV = SERVER / "topoweb.env.example"
MAKE_ENV = SERVER / "make-env.sh"
GUNICORN_CONF = SERVER / "gunicorn.conf.py"
NGINX_SITE = SERVER / "nginx-topoweb.conf"
DOCKER = DEPLOY / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
COMPOSE = DOCKER / "compose.yaml"
COMPOSE_NGINX = DOCKER / "nginx.conf"
HEALTHCHECK = DOCKER / "healthcheck.py"

UNIT_FILES = [AGENT_UNIT, AGENT_TIMER, *SERVER_UNITS.values()]


def read_unit(path: Path) -> configparser.ConfigParser:
    """A unit file as configparser reads it: case-sensitive keys, no interpolation (``%H``, ``${X}``
    stay as written), a repeated key keeps its last value (see ``unit_values`` for all of them)."""
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",),
                                       comment_prefixes=("#", ";"), empty_lines_in_values=False)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(path.read_text(), source=str(path))
    return parser


def unit_values(path: Path, section: str, key: str) -> list[str]:
    """Every value of a key that may be repeated (``SystemCallFilter=``, ``Environment=``)."""
    values, current = [], None
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
        elif current == section and "=" in line and not line.startswith(("#", ";")):
            name, value = line.split("=", 1)
            if name.strip() == key:
                values.append(value.strip())
    return values


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=value lines (the subset of systemd's EnvironmentFile syntax the examples use)."""
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        assert "=" in line, f"{path}: not KEY=value: {line!r}"
        key, value = line.split("=", 1)
        assert re.fullmatch(r"[A-Z_][A-Z0-9_]*", key), f"{path}: bad name {key!r}"
        env[key] = value
    return env


def expand_systemd(command: str, env: dict[str, str]) -> list[str]:
    """An Exec*= line as systemd splits it: ``${VAR}`` is one argument, ``%%`` a literal ``%``."""
    words = shlex.split(command)
    out = []
    for word in words:
        word = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env.get(m.group(1), ""), word)
        out.append(word.replace("%%", "%"))
    return out


def load_agent():
    """The node agent as a module (standard library only)."""
    spec = importlib.util.spec_from_file_location("topoweb_agent_under_test", AGENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs: comments dropped, backslash continuations joined."""
    instructions, pending = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, rest = full.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    assert not pending, f"{path}: ends inside a continued instruction"
    return instructions


def exec_form(arguments: str) -> list[str]:
    """A CMD/ENTRYPOINT in JSON (exec) form; fails on the shell form."""
    value = json.loads(arguments)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), arguments
    return value


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.2):
    """Poll ``predicate`` until it returns something truthy (returned) or ``timeout`` passes (None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None
