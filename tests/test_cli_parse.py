"""`manage.py parse`: JSON/text output on real captures, FILE:LINE: reason and exit 2 on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)  # with the test-only secret key of tests/conftest.py: no warning on stderr
    return subprocess.run([sys.executable, "manage.py", "parse", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=120, env=env)


def test_topo_json_has_documented_fields() -> None:
    proc = run("nvidia_smi_topo", str(FIXTURES / "nvidia_smi_topo" / "sglang_30401_8xh100_hbm3_8nic.txt"))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [g["index"] for g in data["gpus"]] == list(range(8))
    assert data["gpus"][0]["name"] == "GPU0"
    assert data["nics"][0] == {"name": "NIC0", "device": "mlx5_0"}
    assert data["matrix"]["GPU0"]["GPU1"] == "NV18"
    assert data["matrix"]["GPU0"]["GPU0"] == "X"
    assert isinstance(data["warnings"], list)


def test_auto_detects_and_text_format() -> None:
    proc = run("auto", str(FIXTURES / "ibstat" / "cx6_hdr_active_after_sm.txt"), "--format", "text")
    assert proc.returncode == 0, proc.stderr
    assert "detected kind ibstat" in proc.stderr
    assert "Active" in proc.stdout and "{" not in proc.stdout.splitlines()[0]


def test_bad_input_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "topo.txt"
    bad.write_text("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV2\t0-7\nGPU1\tBOGUS\t X \t0-7\n")
    proc = run("nvidia_smi_topo", str(bad))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"{bad}:3: ")


def test_undetectable_text_exits_2(tmp_path: Path) -> None:
    f = tmp_path / "x.txt"
    f.write_text("nothing to see here\n")
    proc = run("auto", str(f))
    assert proc.returncode == 2
    assert f"{f}:0:" in proc.stderr


def test_stdin_and_unknown_kind() -> None:
    proc = run("nvidia_smi_topo", "-", stdin="")
    assert proc.returncode == 2
    assert proc.stderr.startswith("-:0: ")
    proc = run("no_such_kind", "-", stdin="x")
    assert proc.returncode == 2
    assert "unknown kind" in proc.stderr
