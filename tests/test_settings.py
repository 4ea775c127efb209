"""Settings come from TOPOWEB_* variables; a bad value stops start-up with a message naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def check(**env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("TOPOWEB_")}
    full.update(env)
    return subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "env,named",
    [
        ({"TOPOWEB_DEBUG": "maybe"}, "TOPOWEB_DEBUG"),
        ({"TOPOWEB_DEBUG": "0"}, "TOPOWEB_SECRET_KEY"),  # required when debug is off
        ({"TOPOWEB_DATABASE_URL": "nosuchdb://x"}, "TOPOWEB_DATABASE_URL"),
        ({"TOPOWEB_MAX_REPORT_BYTES": "5MB"}, "TOPOWEB_MAX_REPORT_BYTES"),
        ({"TOPOWEB_DB_CONN_MAX_AGE": "-1"}, "TOPOWEB_DB_CONN_MAX_AGE"),
        ({"TOPOWEB_ALLOWED_HOSTS": " , "}, "TOPOWEB_ALLOWED_HOSTS"),
        ({"TOPOWEB_SHARE_LINK_MAX_AGE_DAYS": "two"}, "TOPOWEB_SHARE_LINK_MAX_AGE_DAYS"),
    ],
)
def test_bad_setting_is_named(env: dict, named: str) -> None:
    proc = check(**env)
    assert proc.returncode != 0
    assert "ImproperlyConfigured" in proc.stderr
    assert named in proc.stderr.strip().splitlines()[-1]


def test_dev_defaults_start_with_a_warning() -> None:
    proc = check()
    assert proc.returncode == 0, proc.stderr
    assert "TOPOWEB_SECRET_KEY is not set" in proc.stderr


def test_production_settings_start() -> None:
    proc = check(TOPOWEB_DEBUG="false", TOPOWEB_SECRET_KEY="s" * 50, TOPOWEB_ALLOWED_HOSTS="topoweb.example.org",
                 TOPOWEB_BROKER_URL="redis://127.0.0.1:6379/0")
    assert proc.returncode == 0, proc.stderr
    assert "TOPOWEB_SECRET_KEY" not in proc.stderr
