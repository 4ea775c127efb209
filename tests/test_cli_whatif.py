"""manage.py whatif on real captures: JSON before/after/changes, text, stored snapshots; errors exit 2."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.domain.engine.test_estimate import ibstat

FIX = Path(__file__).resolve().parent / "fixtures"
DELLA = FIX / "bundles" / "paths_della_8xh100_6nic"


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("whatif", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def exit_code(*args: str) -> tuple[int, str]:
    with pytest.raises((CommandError, SystemExit)) as caught:
        run(*args)
    exc = caught.value
    return (exc.returncode if isinstance(exc, CommandError) else exc.code), str(exc)


def edits_file(tmp_path: Path, edits) -> str:
    path = tmp_path / "edits.json"
    path.write_text(json.dumps(edits) if not isinstance(edits, str) else edits)
    return str(path)


def test_whatif_of_a_bundle_prints_before_after_and_changes(tmp_path: Path) -> None:
    edits = edits_file(tmp_path, [{"op": "add_nic", "name": "mlx5_6", "near": "GPU1", "rate_gbit": 200,
                                   "link_layer": "InfiniBand"}])
    data = json.loads(run("--bundle", str(DELLA), "--edits", edits)[0])
    assert set(data) == {"before", "after", "changes"}
    assert len(data["after"]["nics"]) == len(data["before"]["nics"]) + 1
    gpu1 = next(e for e in data["after"]["gpu_nic"] if e["gpu"] == "GPU1")
    assert (gpu1["nic"], gpu1["path_class"], gpu1["gdr"]) == ("mlx5_6", "PIX", True)
    assert "mlx5_6 added" in data["changes"]["summary"]


def test_whatif_from_capture_files_as_text(tmp_path: Path) -> None:
    ib = tmp_path / "ibstat.txt"
    ib.write_text(ibstat([f"mlx5_{i}" for i in range(6)], 200))
    edits = edits_file(tmp_path, [{"op": "set_nic", "name": f"mlx5_{i}", "rate_gbit": 400} for i in range(6)])
    out, _ = run("--topo", str(DELLA / "nvidia_smi_topo.txt"), "--ibstat", str(ib), "--edits", edits,
                 "--format", "text", "--hostname", "della-k17g3")
    assert out.startswith("Plan (what-if, not reported):")
    assert "Expected all-reduce busbw, GB/s (before -> after):" in out
    assert "host della-k17g3: 8 GPUs" in out


def test_a_bad_edit_exits_2_naming_the_edit_and_field(tmp_path: Path) -> None:
    edits = edits_file(tmp_path, [{"op": "set_nic", "name": "mlx5_0", "rate_gbit": "fast"}])
    code, message = exit_code("--bundle", str(DELLA), "--edits", edits)
    assert code == 2 and "edit 0 (set_nic): field 'rate_gbit': must be a number" in message


def test_an_unknown_device_and_unreadable_json_exit_2(tmp_path: Path) -> None:
    code, message = exit_code("--bundle", str(DELLA), "--edits",
                              edits_file(tmp_path, [{"op": "remove", "name": "mlx5_42"}]))
    assert code == 2 and "field 'name': no NIC 'mlx5_42'" in message
    code, message = exit_code("--bundle", str(DELLA), "--edits", edits_file(tmp_path, "[{"))
    assert code == 2 and "not JSON" in message
    code, message = exit_code("--edits", edits_file(tmp_path, []))
    assert code == 2 and "give the host one way" in message


@pytest.mark.django_db
def test_whatif_of_a_stored_snapshot(tmp_path: Path) -> None:
    from tests.explorer.helpers import cluster, read, snapshot

    snap = snapshot(cluster("lab"), "della-1", {"nvidia_smi_topo": read(DELLA / "nvidia_smi_topo.txt"),
                                                "ibstat": ibstat([f"mlx5_{i}" for i in range(6)], 200)})
    edits = edits_file(tmp_path, [{"op": "set_env", "name": "NCCL_NVLS_ENABLE", "value": "0"}])
    data = json.loads(run("--snapshot", str(snap.pk), "--edits", edits)[0])
    one = [next(p for p in data[k]["estimate"]["points"] if p["nodes"] == 1)["algorithm"] for k in ("before", "after")]
    assert one == ["NVLS", "RING"]
    assert data["changes"]["summary"][0] == "NCCL_NVLS_ENABLE: unset -> 0"
    assert exit_code("--snapshot", "999999", "--edits", edits) == (2, "no snapshot 999999")
