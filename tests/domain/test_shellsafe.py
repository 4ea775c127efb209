"""apps.domain.shellsafe: which device names are safe, and export lines that bash reads back exactly."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.domain.shellsafe import export_block, export_line, is_safe_name, printable

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")

NASTY = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "mlx5_0;touch${IFS}PWNED;",
    "it's",
    "'",
    "''",
    '"$HOME"',
    "a\nb",
    "line\ntouch PWNED\n",
    "; touch PWNED #",
    "a && touch PWNED || touch PWNED",
    "\\",
    "tab\there",
    " leading and trailing ",
    "$IFS${IFS}$((1+1))",
    "!$ !! !-1",
    "*",
    "~root",
    "=mlx5_0,mlx5_1",
    "^=mlx5_2:1",
    "",
    "ünï€ødé",
    "\x1b[31mred",
]


def read_back(tmp_path: Path, values: list[str]) -> tuple[list[str], subprocess.CompletedProcess]:
    """Assign each value with ``export_line`` in one bash script, print them NUL-separated."""
    lines = [export_line(f"NCCL_V{i}", v) for i, v in enumerate(values)]
    lines += [f'printf "%s\\0" "$NCCL_V{i}"' for i in range(len(values))]
    proc = subprocess.run([BASH, "-c", "\n".join(lines)], cwd=tmp_path, capture_output=True, timeout=30)
    got = proc.stdout.decode("utf-8").split("\0")[:-1] if proc.stdout else []
    return got, proc


@needs_bash
@pytest.mark.parametrize("value", NASTY)
def test_export_line_round_trips_through_bash(tmp_path: Path, value: str) -> None:
    script = export_line("NCCL_TEST", value) + '\nprintf %s "$NCCL_TEST"'
    proc = subprocess.run([BASH, "-c", script], cwd=tmp_path, capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode("utf-8") == value
    assert list(tmp_path.iterdir()) == []  # nothing ran: no PWNED file


@needs_bash
@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40),
                min_size=1, max_size=8))
def test_any_values_round_trip_in_one_script(tmp_path_factory, values: list[str]) -> None:
    tmp_path = tmp_path_factory.mktemp("bash")
    got, proc = read_back(tmp_path, values)
    assert proc.returncode == 0, proc.stderr
    assert got == values
    assert list(tmp_path.iterdir()) == []


def test_export_line_shape() -> None:
    assert export_line("NCCL_IB_HCA", "=mlx5_0,mlx5_1") == "export NCCL_IB_HCA==mlx5_0,mlx5_1"
    assert export_line("NCCL_CROSS_NIC", 2, export=False) == "NCCL_CROSS_NIC=2"
    assert export_line("NCCL_X", "a;b") == "export NCCL_X='a;b'"
    assert export_line("NCCL_X", "v", comment="two\nlines") == "export NCCL_X=v  # two lines"


@pytest.mark.parametrize("name", ["PATH", "nccl_ib_hca", "NCCL_IB_HCA;id", "NCCL_X Y", "NCCL_", "NCCL_X\n", None, ""])
def test_export_line_refuses_other_variable_names(name) -> None:
    with pytest.raises(ValueError):
        export_line(name, "x")


def test_export_line_refuses_a_nul_byte() -> None:
    with pytest.raises(ValueError):
        export_line("NCCL_X", "a\x00b")


def test_export_block_skips_what_it_cannot_write_safely() -> None:
    settings_ = [{"name": "NCCL_IB_HCA", "value": "=mlx5_0;id;", "reason": "r"},
                 {"name": "LD_PRELOAD", "value": "/tmp/x.so", "reason": "r"},
                 {"name": "NCCL_X", "value": "a\x00b", "reason": "r"},
                 {"name": "NCCL_CROSS_NIC", "value": "2", "reason": "keep\nthe default"}]
    assert export_block(settings_) == ["export NCCL_IB_HCA='=mlx5_0;id;'", "export NCCL_CROSS_NIC=2"]
    assert export_block(settings_, comments=True, export=False)[1] == "NCCL_CROSS_NIC=2  # keep the default"


@pytest.mark.parametrize("name", ["mlx5_0", "GPU0", "ens1f0np0", "ib0", "mlx5_bond_0", "0000:1a:00.0", "eth0.100",
                                  "enP1s3", "a/b-c"])
def test_safe_names(name: str) -> None:
    assert is_safe_name(name)


@pytest.mark.parametrize("name", ["mlx5_0;touch${IFS}PWNED;", "$(id)", "`id`", "a b", "a'b", 'a"b', "mlx5_0\n",
                                  "", "ünï", "a\tb", None, 5])
def test_unsafe_names(name) -> None:
    assert not is_safe_name(name)


def test_printable_escapes_control_characters_only() -> None:
    assert printable("mlx5_0;touch${IFS}PWNED;") == "mlx5_0;touch${IFS}PWNED;"
    assert printable("a\nb\x1b[0m\x00") == "a\\nb\\x1b[0m\\x00"
    assert printable("ünï") == "ünï"
