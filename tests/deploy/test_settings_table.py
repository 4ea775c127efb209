"""Every TOPOWEB_* setting the server reads is in README's Settings table and in the production
environment example, and nothing else is: neither can drift from topoweb/settings.py."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest

from tests.deploy.helpers import MAKE_ENV, ROOT, SERVER_ENV, read_env_file

SETTINGS_FILES = [ROOT / "topoweb" / "settings.py", ROOT / "topoweb" / "env.py"]
README = ROOT / "README.md"
# The readers of topoweb/env.py; cache_from_url takes the variable's name for its messages.
READERS = {"env_str", "env_bool", "env_int", "env_list", "cache_from_url"}


def settings_read() -> set[str]:
    """Names passed to an env_*() reader (or cache_from_url) in settings.py and env.py, by AST."""
    names = set()
    for path in SETTINGS_FILES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in READERS and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    names.add(first.value)
    return names


def settings_grepped() -> set[str]:
    """The same by text: every env_*("TOPOWEB_...") call, however it is spaced or wrapped."""
    pattern = re.compile(r'\b(?:env_\w+|cache_from_url)\(\s*"(TOPOWEB_[A-Z0-9_]+)"')
    return {m for path in SETTINGS_FILES for m in pattern.findall(path.read_text())}


def settings_mentioned() -> set[str]:
    """Every TOPOWEB_* word of settings.py and env.py, error messages included."""
    return {m for path in SETTINGS_FILES for m in re.findall(r"\bTOPOWEB_[A-Z0-9_]*[A-Z0-9]\b", path.read_text())}


def readme_section(title: str) -> str:
    text = README.read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def readme_table() -> dict[str, str]:
    """The Settings table: variable -> its row."""
    rows = {}
    for line in readme_section("Settings").splitlines():
        match = re.match(r"\|\s*`(TOPOWEB_[A-Z0-9_]+)`\s*\|", line)
        if match:
            assert match.group(1) not in rows, f"{match.group(1)} has two rows"
            rows[match.group(1)] = line
    return rows


def test_the_readers_find_the_settings():
    read = settings_read()
    # The scan itself must work: these are read in three different ways.
    assert {"TOPOWEB_SECRET_KEY", "TOPOWEB_DEBUG", "TOPOWEB_ALLOWED_HOSTS", "TOPOWEB_CACHE_URL"} <= read
    assert len(read) >= 20
    assert settings_grepped() == read  # the text grep and the AST agree


def test_readme_table_lists_every_setting_read():
    missing = sorted(settings_read() - set(readme_table()))
    assert not missing, f"README.md 'Settings' table lacks: {missing}"


def test_readme_table_lists_nothing_that_is_not_read():
    stale = sorted(set(readme_table()) - settings_read())
    assert not stale, f"README.md 'Settings' table lists variables settings.py does not read: {stale}"


def test_every_variable_the_settings_mention_is_a_setting():
    """Error messages name real variables (a renamed setting leaves no stale name behind)."""
    assert settings_mentioned() - {"TOPOWEB_"} <= settings_read()


def test_each_row_has_a_default_and_a_meaning():
    for name, row in readme_table().items():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        assert len(cells) >= 3 and all(cells[:3]), f"{name}: {row}"


def test_environment_example_sets_every_setting():
    env = read_env_file(SERVER_ENV)
    settings = {k for k in env if k.startswith("TOPOWEB_")}
    assert settings == settings_read(), (sorted(settings_read() - settings), sorted(settings - settings_read()))
    assert env["TOPOWEB_SECRET_KEY"] == "", "the example must not carry a key: make-env.sh generates one"
    assert env["TOPOWEB_DEBUG"] in ("0", "false", "off", "no")


@pytest.mark.parametrize("compose", [False, True], ids=["systemd", "compose"])
def test_generated_environment_passes_check_deploy(tmp_path, compose):
    """make-env.sh's file (generated key and password) is a clean `manage.py check --deploy`."""
    out = tmp_path / "topoweb.env"
    args = ["bash", str(MAKE_ENV), *(["--compose"] if compose else []), str(out)]
    made = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    env = read_env_file(out)
    key = env["TOPOWEB_SECRET_KEY"]
    assert len(key) >= 50 and len(set(key)) >= 5
    assert "@DB_PASSWORD@" not in out.read_text()
    password = re.match(r"postgres://topoweb:([^@]+)@", env["TOPOWEB_DATABASE_URL"]).group(1)
    if compose:
        assert (tmp_path / "db_password").read_text().strip() == password
        assert "@postgres:5432/" in env["TOPOWEB_DATABASE_URL"]
        assert env["TOPOWEB_BROKER_URL"].startswith("redis://redis:6379/")
    # Twice: a second file never reuses the key, and an existing file is never overwritten.
    again = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "not overwritten" in again.stderr
    assert read_env_file(out)["TOPOWEB_SECRET_KEY"] == key
    other = tmp_path / "other" / "topoweb.env"
    other.parent.mkdir()
    subprocess.run(["bash", str(MAKE_ENV), str(other)], check=True, capture_output=True, timeout=60)
    assert read_env_file(other)["TOPOWEB_SECRET_KEY"] != key

    clean = {k: v for k, v in os.environ.items() if not k.startswith("TOPOWEB_") and k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    proc = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues" in proc.stdout


def test_readme_links_the_deployment_guide():
    section = readme_section("Running in production")
    assert "docs/deploy.md" in section and (ROOT / "docs" / "deploy.md").is_file()
    assert "deploy/" in section
