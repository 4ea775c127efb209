"""The container image and compose.yaml: the Dockerfile's instructions, the compose services
(postgres, redis, migrate, web, worker, beat, nginx) and how they fit together, and the health
checks the containers run (against a real gunicorn here). No image is built."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.deploy.helpers import (COMPOSE, COMPOSE_NGINX, DOCKER, DOCKERFILE, GUNICORN_CONF, HEALTHCHECK, MAKE_ENV,
                                  ROOT, SERVER_ENV, dockerfile_instructions, exec_form, read_env_file, wait_for)

APP_SERVICES = ("migrate", "web", "worker", "beat")


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def services() -> dict[str, dict]:
    return compose()["services"]


def command_words(service: dict) -> list[str]:
    command = service["command"]
    return shlex.split(command) if isinstance(command, str) else list(command)


# -------------------------------------------------------------------------------- Dockerfile


def test_dockerfile_parses_and_starts_from_python_slim():
    instructions = dockerfile_instructions()
    known = {"FROM", "ENV", "RUN", "WORKDIR", "COPY", "USER", "EXPOSE", "CMD", "ENTRYPOINT", "ARG", "LABEL",
             "HEALTHCHECK"}
    assert {k for k, _ in instructions} <= known
    assert instructions[0] == ("FROM", "python:3.11-slim")
    assert [k for k, _ in instructions].count("FROM") == 1


def test_dockerfile_runs_as_a_non_root_user():
    instructions = dockerfile_instructions()
    users = [(i, arg) for i, (k, arg) in enumerate(instructions) if k == "USER"]
    assert users, "no USER: the server would run as root"
    last_index, user = users[-1]
    assert user.split(":")[0] not in ("root", "0")
    created = " ".join(arg for k, arg in instructions if k == "RUN")
    assert re.search(rf"useradd\b[^&]*\b{re.escape(user)}\b", created), "the USER is created in the image"
    cmd_index = max(i for i, (k, _) in enumerate(instructions) if k in ("CMD", "ENTRYPOINT"))
    assert last_index < cmd_index


def test_dockerfile_default_command_is_gunicorn_with_the_shipped_config():
    instructions = dict((k, a) for k, a in dockerfile_instructions() if k in ("CMD", "ENTRYPOINT", "EXPOSE", "WORKDIR"))
    assert "ENTRYPOINT" not in instructions  # compose's services give their own commands
    cmd = exec_form(instructions["CMD"])
    assert cmd[0] == "gunicorn" and cmd[-1] == "topoweb.wsgi:application"
    config = cmd[cmd.index("--config") + 1]
    assert (ROOT / config).resolve() == GUNICORN_CONF.resolve()
    port = cmd[cmd.index("--bind") + 1].rsplit(":", 1)[1]
    assert instructions["EXPOSE"] == port == "8000"
    assert instructions["WORKDIR"] == "/app"


def test_dockerfile_downloads_nothing_but_the_pinned_requirements():
    instructions = dockerfile_instructions()
    assert not [a for k, a in instructions if k == "ADD"], "ADD may fetch URLs: COPY only"
    runs = [a for k, a in instructions if k == "RUN"]
    for run in runs:
        assert not re.search(r"\b(curl|wget|git\s+clone|apt-get|apk|npm|pipx)\b", run), run
        assert not re.search(r"\|\s*(ba|z|da)?sh\b", run), run
        for pip in re.findall(r"pip\s+install\s+[^&;]*", run):
            words = pip.split()[2:]
            assert words == ["-r", "/app/requirements.txt"], pip  # nothing unpinned, no URL, no index
    requirements = (ROOT / "requirements.txt").read_text().splitlines()
    pinned = [r for r in requirements if r.strip() and not r.startswith("#")]
    assert all("==" in r for r in pinned), pinned
    # requirements first: a code change does not reinstall the dependencies
    copies = [a for k, a in instructions if k == "COPY"]
    assert copies[0].startswith("requirements.txt") and copies[-1].startswith(". ")


def test_dockerfile_collects_static_files_at_build_with_a_generated_key():
    runs = " ".join(a for k, a in dockerfile_instructions() if k == "RUN")
    assert "manage.py collectstatic --noinput" in runs
    assert re.search(r"TOPOWEB_SECRET_KEY=\"\$\(python -c '[^']*secrets\.token_urlsafe", runs), \
        "the build-time key is generated, never written in the Dockerfile"
    assert not [a for k, a in dockerfile_instructions() if k in ("ENV", "ARG") and "SECRET" in a]
    for folder in ("/app/var/imports", "/app/var/beat", "/srv/static"):
        assert folder in runs  # created, and owned by the server's user
    assert re.search(r"chown -R topoweb:topoweb /app/var /srv/static", runs)


def test_dockerignore_keeps_local_state_and_secrets_out_of_the_image():
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text().split()
    for entry in (".git", ".venv", "var", "static_collected", "deploy/docker/topoweb.env", "deploy/docker/db_password",
                  "deploy/docker/tls"):
        assert entry in ignore, entry


# ------------------------------------------------------------------------------ compose.yaml


def test_compose_has_the_services():
    assert {"postgres", "redis", "web", "worker", "beat", "migrate", "nginx"} == set(services())


def test_app_services_share_image_build_and_settings():
    s = services()
    web = s["web"]
    for name in APP_SERVICES:
        for key in ("image", "build", "env_file"):
            assert s[name][key] == web[key], (name, key)
        assert s[name].get("environment") == web.get("environment"), name
    build = web["build"]
    assert (COMPOSE.parent / build["context"]).resolve() == ROOT
    assert (ROOT / build["dockerfile"]).resolve() == DOCKERFILE.resolve()
    assert web["env_file"] == ["topoweb.env"]


def test_app_services_start_after_migrate_and_healthy_services():
    s = services()
    for name in ("web", "worker", "beat"):
        deps = s[name]["depends_on"]
        assert deps["migrate"]["condition"] == "service_completed_successfully", name
        assert deps["postgres"]["condition"] == deps["redis"]["condition"] == "service_healthy", name
    assert s["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert s["migrate"]["restart"] == "no"
    words = " ".join(command_words(s["migrate"]))
    assert "manage.py migrate --noinput" in words
    assert s["nginx"]["depends_on"]["web"]["condition"] == "service_healthy"


def test_commands():
    s = services()
    web = command_words(s["web"])
    assert web[0] == "gunicorn" and web[-1] == "topoweb.wsgi:application"
    assert (ROOT / web[web.index("--config") + 1]).resolve() == GUNICORN_CONF.resolve()
    worker = " ".join(command_words(s["worker"]))
    assert "celery -A topoweb worker" in worker and "--pool" not in worker and " -P " not in worker
    beat = command_words(s["beat"])
    assert beat[:4] == ["celery", "-A", "topoweb", "beat"]
    assert beat[beat.index("--schedule") + 1].startswith("/app/var/beat/")  # made and chowned by the Dockerfile
    assert "replicas" not in str(s["beat"].get("deploy", {}))  # exactly one beat


def test_healthchecks():
    s = services()
    for name in ("postgres", "redis", "web", "worker", "beat"):
        check = s[name]["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL") and len(check["test"]) >= 2, name
        assert check["interval"] and check["retries"] >= 1, name
    assert "pg_isready" in " ".join(s["postgres"]["healthcheck"]["test"])
    assert s["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert "inspect ping" in " ".join(s["worker"]["healthcheck"]["test"])
    for name, mode in (("web", "web"), ("beat", "beat")):
        test = s[name]["healthcheck"]["test"]
        assert test[1:] == ["python", str(HEALTHCHECK.relative_to(ROOT)), mode]


def test_volumes_and_ports():
    c = compose()
    s = c["services"]
    assert set(c["volumes"]) >= {"postgres", "imports", "static"}
    assert "postgres:/var/lib/postgresql/data" in s["postgres"]["volumes"]
    # Web-uploaded import archives: the web server writes them, a worker reads them.
    for name in ("web", "worker"):
        assert "imports:/app/var/imports" in s[name]["volumes"], name
    assert "static:/srv/static" in s["migrate"]["volumes"] and "static:/srv/static:ro" in s["nginx"]["volumes"]
    # Only nginx is published; gunicorn trusts X-Forwarded-Proto and must not be reachable directly.
    assert [n for n in s if s[n].get("ports")] == ["nginx"]
    assert sorted(s["nginx"]["ports"]) == ["443:443", "80:80"]
    config = next(v for v in s["nginx"]["volumes"] if v.endswith(":/etc/nginx/conf.d/default.conf:ro"))
    assert (COMPOSE.parent / config.split(":")[0]).resolve() == COMPOSE_NGINX.resolve()


def test_database_password_is_a_compose_secret_not_in_the_file():
    c = compose()
    pg = c["services"]["postgres"]
    assert pg["environment"]["POSTGRES_PASSWORD_FILE"] == "/run/secrets/db_password"
    assert "POSTGRES_PASSWORD" not in pg["environment"]
    assert c["secrets"]["db_password"]["file"] == "./db_password"
    assert "env_file" not in pg  # the server's secret key stays out of the database container


def test_make_env_compose_output_fits_the_compose_file(tmp_path):
    out = tmp_path / "topoweb.env"
    subprocess.run(["bash", str(MAKE_ENV), "--compose", str(out)], check=True, capture_output=True, timeout=60)
    env = read_env_file(out)
    s = services()
    pg_env = s["postgres"]["environment"]
    match = re.fullmatch(r"postgres://(\w+):([\w-]+)@postgres:5432/(\w+)", env["TOPOWEB_DATABASE_URL"])
    assert match and match.group(1) == pg_env["POSTGRES_USER"] and match.group(3) == pg_env["POSTGRES_DB"]
    assert (tmp_path / "db_password").read_text().strip() == match.group(2)
    assert env["TOPOWEB_BROKER_URL"] == "redis://redis:6379/0" and env["TOPOWEB_CACHE_URL"] == "redis://redis:6379/1"
    assert env["TOPOWEB_PROXY_SSL_HEADER"] == "X-Forwarded-Proto"
    gitignore = (DOCKER / ".gitignore").read_text().split()
    assert {"topoweb.env", "db_password", "tls/"} <= set(gitignore)


@pytest.mark.skipif(not (shutil.which("docker") and subprocess.run(["docker", "compose", "version"],
                                                                    capture_output=True).returncode == 0),
                    reason="`docker compose` (the compose plugin) is not installed here")
def test_docker_compose_config(tmp_path):
    """compose's own validation of the file (no image is built or pulled)."""
    work = tmp_path / "docker"
    shutil.copytree(DOCKER, work, ignore=shutil.ignore_patterns("topoweb.env", "db_password", "tls"))
    subprocess.run(["bash", str(MAKE_ENV), "--compose", str(work / "topoweb.env")], check=True, capture_output=True)
    proc = subprocess.run(["docker", "compose", "-f", str(work / "compose.yaml"), "config", "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


# ----------------------------------------------------------------------------- health checks


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def gunicorn(tmp_path):
    """gunicorn with the shipped config and production settings (SQLite: /agent.py needs no database)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOWEB_") and k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update({k: v for k, v in read_env_file(SERVER_ENV).items() if k.startswith("TOPOWEB_")})
    env.update({"TOPOWEB_SECRET_KEY": "x" * 10 + "tests-only-gunicorn-key-0123456789abcdefghijklmnop",
                "TOPOWEB_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "TOPOWEB_CACHE_URL": "locmem://",
                "TOPOWEB_BROKER_URL": "", "WEB_CONCURRENCY": "1"})
    gunicorn_bin = Path(sys.executable).with_name("gunicorn")
    log = tmp_path / "gunicorn.log"
    proc = subprocess.Popen([str(gunicorn_bin), "--config", str(GUNICORN_CONF), "--bind", f"127.0.0.1:{port}",
                             "topoweb.wsgi:application"], cwd=ROOT, env=env, stdout=log.open("w"),
                            stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: "Booting worker" in log.read_text() or proc.poll() is not None, timeout=30)
        assert proc.poll() is None, log.read_text()
        yield port, env, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_web_healthcheck_against_gunicorn(gunicorn):
    port, env, log = gunicorn
    check = lambda: subprocess.run([sys.executable, str(HEALTHCHECK), "web", str(port)], env=env,
                                   capture_output=True, text=True, timeout=30)
    assert wait_for(lambda: check().returncode == 0, timeout=30), check().stdout + log.read_text()
    # It passes only because it speaks as nginx does: plain HTTP without the proxy header is
    # redirected to HTTPS (TOPOWEB_SSL_REDIRECT), another host name is refused (TOPOWEB_ALLOWED_HOSTS).
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/agent.py", headers={"Host": "topoweb.example.org"})
    response = conn.getresponse()
    assert response.status == 301 and response.getheader("Location").startswith("https://topoweb.example.org/")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/agent.py", headers={"Host": "elsewhere.example", "X-Forwarded-Proto": "https"})
    assert conn.getresponse().status == 400
    # With nothing listening the check fails.
    closed = subprocess.run([sys.executable, str(HEALTHCHECK), "web", str(free_port())], env=env, capture_output=True,
                            text=True, timeout=30)
    assert closed.returncode == 1 and "ConnectionRefusedError" in closed.stdout


def test_beat_healthcheck_follows_the_schedule_file(tmp_path):
    schedule = tmp_path / "celerybeat-schedule"
    run = lambda: subprocess.run([sys.executable, str(HEALTHCHECK), "beat", str(schedule)], capture_output=True,
                                 text=True, timeout=30).returncode
    assert run() == 1  # no file: beat never started
    schedule.write_text("")
    assert run() == 0
    old = time.time() - 3600
    os.utime(schedule, (old, old))
    assert run() == 1  # beat stopped writing it: stopped sending the sweeper task
