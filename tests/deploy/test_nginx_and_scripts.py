"""nginx configs (the systemd site and compose's), gunicorn's config, and every shell script of
deploy/: the headers match the settings, `nginx -t` accepts them where nginx is installed, and
`bash -n` (and shellcheck, where installed) accepts the scripts."""

from __future__ import annotations

import os
import re
import runpy
import shutil
import sys
import subprocess
from pathlib import Path

import pytest

from tests.deploy.helpers import (COMPOSE_NGINX, DEPLOY, GUNICORN_CONF, NGINX_SITE, ROOT, SERVER_ENV, read_env_file)

NGINX = shutil.which("nginx")
OPENSSL = shutil.which("openssl")
SHELLCHECK = shutil.which("shellcheck")
NGINX_CONFIGS = [NGINX_SITE, COMPOSE_NGINX]


def shell_scripts() -> list[Path]:
    """Every file under deploy/ that is a shell script: *.sh, or a bash/sh shebang."""
    found = []
    for path in sorted(DEPLOY.rglob("*")):
        if path.is_file():
            head = path.read_bytes()[:64]
            if path.suffix == ".sh" or re.match(rb"#!\s*/(usr/)?bin/(env\s+)?(ba)?sh\b", head):
                found.append(path)
    return found


def directives(text: str) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


# ------------------------------------------------------------------------------------ nginx


@pytest.mark.parametrize("path", NGINX_CONFIGS, ids=lambda p: p.relative_to(DEPLOY).as_posix())
def test_nginx_sets_the_headers_the_settings_expect(path):
    lines = directives(path.read_text())
    env = read_env_file(SERVER_ENV)
    header = env["TOPOWEB_PROXY_SSL_HEADER"]
    assert f"proxy_set_header {header} $scheme;" in lines  # replaces whatever a client sent
    assert "proxy_set_header Host $host;" in lines  # TOPOWEB_ALLOWED_HOSTS sees the real name
    assert "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;" in lines
    names = {w for line in lines if line.startswith("server_name") for w in line.rstrip(";").split()[1:]}
    assert names == set(env["TOPOWEB_ALLOWED_HOSTS"].split(","))
    # TLS on 443, plain HTTP only redirects.
    assert any(re.match(r"listen (\[::\]:)?443 ssl\b", line) for line in lines)
    assert "return 301 https://$host$request_uri;" in lines
    assert any(line.startswith("ssl_certificate ") for line in lines)
    assert "ssl_protocols TLSv1.2 TLSv1.3;" in lines
    # A report at the size limit reaches the application (which answers 413 itself above it).
    size = re.search(r"client_max_body_size (\d+)m;", path.read_text())
    largest = max(int(env["TOPOWEB_MAX_REPORT_BYTES"]), int(env["TOPOWEB_MAX_FABRIC_BYTES"]))
    assert size and int(size.group(1)) * 1024 * 1024 > largest + 1024 * 1024
    # Slower than gunicorn's timeout, so gunicorn's answer arrives first.
    read_timeout = int(re.search(r"proxy_read_timeout (\d+)s;", path.read_text()).group(1))
    assert read_timeout > runpy.run_path(str(GUNICORN_CONF))["timeout"]


def test_site_proxies_to_gunicorns_address_and_serves_collected_static_files():
    text = NGINX_SITE.read_text()
    upstream = re.search(r"upstream topoweb \{\s*server (\S+);", text).group(1)
    assert [upstream] == runpy.run_path(str(GUNICORN_CONF))["bind"]
    alias = re.search(r"location /static/ \{\s*alias (\S+);", text).group(1)
    assert alias == "/opt/topoweb/static_collected/"  # STATIC_ROOT of a checkout in /opt/topoweb
    from django.conf import settings

    assert Path(settings.STATIC_ROOT).name == "static_collected" and settings.STATIC_URL == "/static/"


def test_compose_nginx_proxies_to_the_web_service():
    text = COMPOSE_NGINX.read_text()
    assert re.search(r"set \$\w+ http://web:8000;", text) and "resolver 127.0.0.11" in text
    assert re.search(r"alias /srv/static/;", text)
    assert "/etc/nginx/tls/fullchain.pem" in text and "/etc/nginx/tls/privkey.pem" in text


def nginx_version() -> tuple[int, ...]:
    out = subprocess.run([NGINX, "-v"], capture_output=True, text=True).stderr
    return tuple(int(x) for x in re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", out).groups())


@pytest.mark.skipif(NGINX is None or OPENSSL is None, reason="nginx or openssl is not installed here")
@pytest.mark.parametrize("path", NGINX_CONFIGS, ids=lambda p: p.relative_to(DEPLOY).as_posix())
def test_nginx_t_accepts_the_config(tmp_path, path):
    text = path.read_text()
    if "http2 on;" in directives(text) and nginx_version() < (1, 25, 1):
        pytest.skip(f"`http2 on;` needs nginx 1.25.1 or later (compose runs nginx:1.27); this nginx is "
                    f"{'.'.join(map(str, nginx_version()))}")
    cert, key = tmp_path / "fullchain.pem", tmp_path / "privkey.pem"
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=topoweb.example.org", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    text = re.sub(r"ssl_certificate\s+\S+;", f"ssl_certificate {cert};", text)
    text = re.sub(r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {key};", text)
    site = tmp_path / "site.conf"
    site.write_text(text)
    main = tmp_path / "nginx.conf"
    mime = Path("/etc/nginx/mime.types")
    # Temporary folders of every module this nginx has, under tmp_path: `nginx -t` creates them,
    # and the compiled-in ones (/var/lib/nginx/...) are root's.
    built = subprocess.run([NGINX, "-V"], capture_output=True, text=True).stderr
    temp_paths = "".join(f"{module}_temp_path {tmp_path}/{module};\n"
                         for module in ("proxy", "fastcgi", "uwsgi", "scgi")
                         if f"--without-http_{module}_module" not in built)
    main.write_text(f"pid {tmp_path}/nginx.pid;\nerror_log stderr;\nevents {{}}\nhttp {{\n"
                    + (f"include {mime};\n" if mime.exists() else "")
                    + f"access_log off;\nclient_body_temp_path {tmp_path}/body;\n{temp_paths}include {site};\n}}\n")
    proc = subprocess.run([NGINX, "-t", "-p", str(tmp_path), "-c", str(main)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "syntax is ok" in proc.stderr


# --------------------------------------------------------------------------------- gunicorn


def test_gunicorn_config_matches_the_documented_production_command(monkeypatch):
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    conf = runpy.run_path(str(GUNICORN_CONF))
    assert conf["workers"] == 3 and conf["worker_class"] == "gthread" and conf["threads"] == 4
    assert conf["backlog"] == 2048 and conf["timeout"] == 60
    assert conf["bind"] == ["127.0.0.1:8000"]  # never reachable from outside but through nginx
    monkeypatch.delenv("WEB_CONCURRENCY")
    assert 1 <= runpy.run_path(str(GUNICORN_CONF))["workers"] <= 4  # small by default: the connection budget


def test_gunicorn_accepts_the_config():
    gunicorn = Path(sys.executable).with_name("gunicorn")
    env = {**os.environ, "TOPOWEB_SECRET_KEY": "tests-only-check-config-key-0123456789abcdefghijklmnop"}
    proc = subprocess.run([str(gunicorn), "--check-config", "--config", str(GUNICORN_CONF), "topoweb.wsgi:application"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------- shell scripts


def test_the_shell_scripts_are_found():
    names = {p.name for p in shell_scripts()}
    assert {"topoweb-slurm.sh", "make-env.sh", "topoweb-manage"} <= names


@pytest.mark.parametrize("path", shell_scripts(), ids=lambda p: p.relative_to(DEPLOY).as_posix())
def test_bash_n(path):
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert os.access(path, os.X_OK), f"{path} is not executable"


@pytest.mark.skipif(SHELLCHECK is None, reason="shellcheck is not installed here")
@pytest.mark.parametrize("path", shell_scripts(), ids=lambda p: p.relative_to(DEPLOY).as_posix())
def test_shellcheck(path):
    proc = subprocess.run([SHELLCHECK, "-S", "warning", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_topoweb_manage_runs_manage_py_with_the_env_file(tmp_path):
    """Here as the current user (no runuser): the env file's settings reach manage.py."""
    import getpass

    home = tmp_path / "home"
    (home / ".venv" / "bin").mkdir(parents=True)
    (home / ".venv" / "bin" / "python").write_text('#!/bin/sh\necho "python $* LOG=$TOPOWEB_LOG_LEVEL"\n')
    (home / ".venv" / "bin" / "python").chmod(0o755)
    env_file = tmp_path / "topoweb.env"
    env_file.write_text("TOPOWEB_LOG_LEVEL=WARNING\n")
    proc = subprocess.run([str(DEPLOY / "server" / "topoweb-manage"), "migrate", "--noinput"],
                          env={"PATH": "/usr/bin:/bin", "TOPOWEB_ENV_FILE": str(env_file), "TOPOWEB_HOME": str(home),
                               "TOPOWEB_USER": getpass.getuser()}, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"python {home}/manage.py migrate --noinput LOG=WARNING"
    missing = subprocess.run([str(DEPLOY / "server" / "topoweb-manage"), "check"],
                             env={"PATH": "/usr/bin:/bin", "TOPOWEB_ENV_FILE": str(tmp_path / "none.env")},
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode == 2 and "cannot read" in missing.stderr
