"""Settings come from TOPOWEB_* variables; a bad value stops start-up with a message naming it.

With no environment at all the server refuses to start (debug is off and there is no secret
key): the only way to debug mode is asking for it (``TOPOWEB_DEBUG=1``, which ``make run`` sets).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOOD_KEY = "tests-only-production-like-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz"
PRODUCTION = {"TOPOWEB_DEBUG": "false", "TOPOWEB_SECRET_KEY": GOOD_KEY, "TOPOWEB_ALLOWED_HOSTS": "topoweb.example.org",
              "TOPOWEB_BROKER_URL": "redis://127.0.0.1:6379/0"}
# The production settings README.md documents for a site behind a TLS proxy.
DEPLOY = {**PRODUCTION, "TOPOWEB_SECURE_COOKIES": "1", "TOPOWEB_HSTS_SECONDS": "31536000",
          "TOPOWEB_PROXY_SSL_HEADER": "X-Forwarded-Proto", "TOPOWEB_SSL_REDIRECT": "1",
          "TOPOWEB_HSTS_PRELOAD": "1"}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    # a fresh process as a deployment starts it: none of our variables, nor the browser tests'
    # DJANGO_ALLOW_ASYNC_UNSAFE (set in this process for Playwright)
    full = {k: v for k, v in os.environ.items() if not k.startswith("TOPOWEB_") and k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    full.update(env)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=120)


def check(**env: str) -> subprocess.CompletedProcess:
    return manage("check", **env)


@pytest.mark.parametrize(
    "env,named",
    [
        ({"TOPOWEB_DEBUG": "maybe"}, "TOPOWEB_DEBUG"),
        ({"TOPOWEB_DEBUG": "0"}, "TOPOWEB_SECRET_KEY"),  # required when debug is off
        ({"TOPOWEB_DEBUG": "1", "TOPOWEB_DATABASE_URL": "nosuchdb://x"}, "TOPOWEB_DATABASE_URL"),
        ({"TOPOWEB_DEBUG": "1", "TOPOWEB_MAX_REPORT_BYTES": "5MB"}, "TOPOWEB_MAX_REPORT_BYTES"),
        ({"TOPOWEB_DEBUG": "1", "TOPOWEB_DB_CONN_MAX_AGE": "-1"}, "TOPOWEB_DB_CONN_MAX_AGE"),
        ({"TOPOWEB_DEBUG": "1", "TOPOWEB_ALLOWED_HOSTS": " , "}, "TOPOWEB_ALLOWED_HOSTS"),
        ({"TOPOWEB_DEBUG": "1", "TOPOWEB_SHARE_LINK_MAX_AGE_DAYS": "two"}, "TOPOWEB_SHARE_LINK_MAX_AGE_DAYS"),
        ({"TOPOWEB_DEBUG": "1", "TOPOWEB_HSTS_SECONDS": "a year"}, "TOPOWEB_HSTS_SECONDS"),
        ({"TOPOWEB_DEBUG": "1", "TOPOWEB_SECURE_COOKIES": "sure"}, "TOPOWEB_SECURE_COOKIES"),
        ({"TOPOWEB_DEBUG": "1", "TOPOWEB_PROXY_SSL_HEADER": "X-Forwarded-Proto: https"}, "TOPOWEB_PROXY_SSL_HEADER"),
    ],
)
def test_bad_setting_is_named(env: dict, named: str) -> None:
    proc = check(**env)
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr
    assert named in proc.stderr.strip().splitlines()[-1]


def test_no_environment_refuses_to_start() -> None:
    """Debug is off by default, so a missing secret key stops start-up with a way forward."""
    proc = check()
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "TOPOWEB_SECRET_KEY must be set" in last and "make run" in last


@pytest.mark.parametrize("key", ["topoweb-insecure-development-key-change-me", "short-key", "ab" * 40])
def test_default_or_short_secret_is_refused_outside_debug(key: str) -> None:
    proc = check(**{**PRODUCTION, "TOPOWEB_SECRET_KEY": key})
    assert proc.returncode != 0
    assert "TOPOWEB_SECRET_KEY" in proc.stderr.strip().splitlines()[-1]


def test_debug_is_only_on_when_asked_for() -> None:
    code = "from django.conf import settings; print(settings.DEBUG)"
    off = manage("shell", "-v", "0", "-c", code, TOPOWEB_SECRET_KEY=GOOD_KEY)
    on = manage("shell", "-v", "0", "-c", code, TOPOWEB_DEBUG="1")
    assert off.stdout.strip() == "False", off.stderr
    assert on.stdout.strip() == "True", on.stderr
    assert "TOPOWEB_SECRET_KEY is not set" in on.stderr  # debug with the development key says so


def test_production_settings_start() -> None:
    proc = check(**PRODUCTION)
    assert proc.returncode == 0, proc.stderr
    assert "TOPOWEB_SECRET_KEY" not in proc.stderr


def test_check_deploy_is_clean_with_documented_settings() -> None:
    """``manage.py check --deploy`` with README's production settings reports no issue at all."""
    proc = manage("check", "--deploy", "--fail-level", "WARNING", **DEPLOY)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues" in proc.stdout, proc.stdout


def test_security_settings_are_read() -> None:
    code = ("from django.conf import settings as s; print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
            "s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER, s.SECURE_SSL_REDIRECT)")
    proc = manage("shell", "-v", "0", "-c", code, **DEPLOY)
    assert proc.stdout.split() == ["True", "True", "31536000", "('HTTP_X_FORWARDED_PROTO',", "'https')", "True"], \
        proc.stderr
