"""The host page's copyable NCCL block is data in a shell: pasted into bash it runs nothing."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.urls import reverse

from apps.ingest.models import Snapshot
from tests.explorer import helpers as h

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")]

PAYLOAD = "mlx5_0;touch${IFS}PWNED;"


def export_block(body: str) -> str:
    """The text of ``<pre id="nccl-export">`` as the Copy button takes it (HTML entities decoded)."""
    m = re.search(r'<pre[^>]*id="nccl-export"[^>]*>(.*?)</pre>', body, re.S)
    assert m, "no nccl-export block"
    return html.unescape(m.group(1))


def run_in_bash(block: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", block + "\nenv | grep ^NCCL_"], cwd=cwd, capture_output=True, text=True,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, timeout=30)


def hostile_host() -> Snapshot:
    """SYNTHETIC: the real mooncake captures with HCA mlx5_0 renamed to a shell command, in the
    ibstat CA line and the topo -m NIC legend."""
    topo = h.read(h.TOPO).replace("NIC0: mlx5_0", f"NIC0: {PAYLOAD}")
    return h.snapshot(h.cluster(), "node-x", {"nvidia_smi_topo": topo, "ibstat": h.ibstat_renamed("mlx5_0", PAYLOAD)})


def test_copied_block_runs_nothing_for_a_hostile_hca_name(signed_in, tmp_path):
    s = hostile_host()
    body = signed_in.get(reverse("explorer:host", args=["lab", "node-x"])).content.decode()
    block = export_block(body)
    proc = run_in_bash(block, tmp_path)
    assert not (tmp_path / "PWNED").exists() and list(tmp_path.iterdir()) == []
    assert proc.returncode == 0, proc.stderr
    assert block.startswith("export NCCL_IB_HCA=") and PAYLOAD not in block
    got = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    assert got == {x["name"]: x["value"] for x in s.document["nccl_settings"]}
    assert "X02" in body and "mlx5_0;touch${IFS}PWNED;" in html.unescape(body)  # the finding names it


def test_copied_block_quotes_values_of_a_stored_document(signed_in, tmp_path):
    """A document stored before names were checked holds the name inside NCCL_IB_HCA: the block
    still assigns it as a plain string."""
    s = h.standard_host(h.cluster(), "node-a")
    doc = s.document
    value = f"={PAYLOAD},mlx5_3 $(touch PWNED2) `touch PWNED3`\ntouch PWNED4"
    doc["nccl_settings"] = [{"name": "NCCL_IB_HCA", "value": value, "reason": "stored"},
                            {"name": "LD_PRELOAD;touch PWNED5", "value": "x", "reason": "not an NCCL name"}]
    Snapshot.objects.filter(pk=s.pk).update(document=doc)
    block = export_block(signed_in.get(reverse("explorer:host", args=["lab", "node-a"])).content.decode())
    proc = run_in_bash(block, tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert proc.returncode == 0, proc.stderr
    assert "LD_PRELOAD" not in block  # only NCCL_[A-Z0-9_]+ names are exported
    out = subprocess.run(["bash", "-c", block + '\nprintf %s "$NCCL_IB_HCA"'], cwd=tmp_path, capture_output=True,
                         text=True, timeout=30)
    assert out.stdout == value and list(tmp_path.iterdir()) == []
