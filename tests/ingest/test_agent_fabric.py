"""The agent's --fabric (runs ibnetdiscover), --fabric-file FILE and --fabric-only: the fabric sent as the
cluster's fabric upload, alone or after the host report, against a live server."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from apps.ingest.models import Fabric, Upload
from tests.domain.test_fabric_compare import SUPERPOD
from tests.ingest.test_agent import AGENT_PYTHONS, run_agent, write_script


FIX = Path(__file__).resolve().parents[1] / "fixtures"
IBSTAT = FIX / "ibstat" / "gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt"
IBM_2NODE = SUPERPOD.parent / "ibm_pcm_2node_mt43132_8port_switch_sdr_2009.txt"
LLDP_TEXT = FIX / "lldpcli_neighbors" / "synthetic_roce_gpu_node_4nics_two_leaves.txt"


def _captures(tmp_path: Path) -> Path:
    captures = tmp_path / "sm-01"
    captures.mkdir(parents=True)
    shutil.copy(IBSTAT, captures / "ibstat.txt")
    return captures


def _fake_ibnetdiscover(tmp_path: Path, body: str | None = None) -> dict:
    """PATH with an ``ibnetdiscover`` that prints the real 2009 capture (or runs ``body``)."""
    b = tmp_path / "bin"
    b.mkdir(exist_ok=True)
    write_script(b / "ibnetdiscover", body or f"cat {IBM_2NODE}\n")
    return {"PATH": f"{b}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("python", AGENT_PYTHONS)
def test_fabric_runs_ibnetdiscover_and_sends_it_after_the_report(live_server, tmp_path, python):
    from apps.ingest import services

    cluster = services.create_cluster(name="live")
    token, secret = services.issue_token(cluster=cluster)
    result = run_agent("--from-dir", str(_captures(tmp_path)), "--server", live_server.url, "--token", secret,
                       "--fabric", env=_fake_ibnetdiscover(tmp_path), python=python)
    assert result.returncode == 0, result.stderr
    assert Upload.objects.get(cluster=cluster).host.hostname == "sm-01"
    row = Fabric.objects.get(cluster=cluster)
    assert row.raw == IBM_2NODE.read_text() and row.kind == "ibnetdiscover" and row.via == "agent"
    assert row.token_id == token.pk and row.host is None and row.source_name == "ibnetdiscover"
    assert f"fabric {row.pk}: ibnetdiscover ok (1 switches, 2 host adapters, 2 links)" in result.stderr
    assert "/c/live/fabric/" in result.stderr
    again = run_agent("--from-dir", str(_captures(tmp_path / "again")), "--hostname", "sm-01", "--server",
                      live_server.url, "--token", secret, "--fabric", env=_fake_ibnetdiscover(tmp_path), python=python)
    assert again.returncode == 0 and "(already sent)" in again.stderr and Fabric.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_fabric_file_alone_and_a_per_host_file_filed_under_this_host(live_server, tmp_path):
    from apps.ingest import services

    cluster = services.create_cluster(name="live")
    _, secret = services.issue_token(cluster=cluster)
    alone = run_agent("--fabric-only", "--fabric-file", str(SUPERPOD), "--server", live_server.url, "--token", secret)
    assert alone.returncode == 0, alone.stderr
    assert not Upload.objects.exists() and Fabric.objects.get().summary["switches"] == 40
    lldp = run_agent("--fabric-only", "--fabric-file", str(LLDP_TEXT), "--hostname", "gpu-r01", "--server",
                     live_server.url, "--token", secret)
    assert lldp.returncode == 0, lldp.stderr
    assert Fabric.objects.get(kind="lldpcli_neighbors").host.hostname == "gpu-r01"
    bad = tmp_path / "broken.txt"
    bad.write_text("Switch 8 \"S-000b8cffff0053ee\"\n[1] garbage\n")
    refused = run_agent("--fabric-only", "--fabric-file", str(bad), "--server", live_server.url, "--token", secret)
    assert refused.returncode == 3 and "fabric broken.txt: server refused it with 400: broken.txt:" in refused.stderr
    assert Fabric.objects.get(source_name="broken.txt").status == "failed"  # kept all the same


@pytest.mark.django_db(transaction=True)
def test_a_node_with_nothing_else_to_report_sends_the_fabric_alone(live_server, tmp_path):
    from apps.ingest import services

    cluster = services.create_cluster(name="live")
    _, secret = services.issue_token(cluster=cluster)
    empty = tmp_path / "sm-02"
    empty.mkdir()
    result = run_agent("--from-dir", str(empty), "--server", live_server.url, "--token", secret, "--fabric",
                       env=_fake_ibnetdiscover(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "sending the fabric alone" in result.stderr and not Upload.objects.exists() and Fabric.objects.count() == 1


def test_fabric_problems_are_found_before_anything_is_sent(tmp_path):
    captures = _captures(tmp_path)
    nowhere = ("--server", "http://127.0.0.1:9", "--token", "t")
    missing = run_agent("--from-dir", str(captures), *nowhere, "--fabric", env={"PATH": str(tmp_path / "none")})
    assert missing.returncode == 5 and "ibnetdiscover not found on PATH" in missing.stderr
    assert "cannot reach" not in missing.stderr
    failing = run_agent("--from-dir", str(captures), *nowhere, "--fabric",
                        env=_fake_ibnetdiscover(tmp_path, "echo 'ibwarn: [1] mad_rpc_open_port: cannot open UMAD port' >&2\n"
                                                          "exit 255\n"))
    assert failing.returncode == 5 and "exited with status 255: ibwarn" in failing.stderr
    unreadable = run_agent("--from-dir", str(captures), *nowhere, "--fabric-file", str(tmp_path / "nope.txt"))
    assert unreadable.returncode == 6 and "--fabric-file" in unreadable.stderr
    both = run_agent("--from-dir", str(captures), *nowhere, "--fabric", "--fabric-file", str(SUPERPOD))
    assert both.returncode == 2 and "choose one" in both.stderr
    only = run_agent("--from-dir", str(captures), *nowhere, "--fabric-only")
    assert only.returncode == 2 and "--fabric-only needs --fabric or --fabric-file" in only.stderr
    dry = run_agent("--from-dir", str(captures), "--dry-run", "--fabric-file", str(SUPERPOD))
    assert dry.returncode == 0 and f"would send the fabric {SUPERPOD.name}" in dry.stderr
