"""manage.py analyze / path on real bundles (tests/fixtures/bundles)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

BUNDLES = Path(__file__).resolve().parent / "fixtures" / "bundles"
A100 = BUNDLES / "paths_deepep_8xa100_8nic_roce"
P40 = BUNDLES / "paddle_8xp40"


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_analyze_bundle_prints_the_snapshot_document_as_json() -> None:
    out, _ = run("analyze", "--bundle", str(A100))
    doc = json.loads(out)
    assert doc["hostname"] == "deepep-a100-node"
    pair = doc["gpu_pairs"][0]
    assert {"a", "b", "mechanism", "p2p", "bottleneck_gbs"} <= set(pair)
    assert (pair["a"], pair["b"], pair["mechanism"]) == ("GPU0", "GPU1", "nvswitch")
    gn = {e["gpu"]: e for e in doc["gpu_nic"]}
    assert (gn["GPU3"]["nic"], gn["GPU3"]["path_class"], gn["GPU3"]["gdr"]) == ("mlx5_3", "PXB", True)
    # every GPU has a NIC of its own on its switch, all ports up: nothing to report
    assert doc["findings"] == []
    assert "estimate" in doc


def test_analyze_individual_files_in_text_format() -> None:
    out, _ = run("analyze", "--topo", str(P40 / "nvidia_smi_topo.txt"), "--hostname", "p40", "--format", "text")
    assert out.startswith("host p40: 8 GPU")
    assert "GPU pairs" in out and "GPU -> NIC" in out and "Findings" in out
    row = next(line for line in out.splitlines() if line.startswith("GPU5  mlx5_0"))
    assert " SYS " in row and " no " in row
    assert "fix:" in out  # G01 fires on this layout


def test_analyze_parse_error_prints_file_and_line_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "topo.txt"
    bad.write_text("")
    err = io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("analyze", "--topo", str(bad), stdout=io.StringIO(), stderr=err)
    assert exit_.value.code == 2
    assert err.getvalue().startswith(f"{bad}:0: ")


def test_analyze_bundle_with_unknown_file_is_refused(tmp_path: Path) -> None:
    shutil.copy(P40 / "nvidia_smi_topo.txt", tmp_path / "nvidia_smi_topo.txt")
    (tmp_path / "dmesg.txt").write_text("x")
    with pytest.raises(CommandError, match="dmesg.txt"):
        call_command("analyze", "--bundle", str(tmp_path), stdout=io.StringIO(), stderr=io.StringIO())


def test_path_marks_the_bottleneck_and_explains() -> None:
    out, _ = run("path", "--bundle", str(P40), "--bundle", str(A100), "--src", "paddle-8xp40/GPU5",
                 "--dst", "deepep-a100-node/GPU5")
    lines = out.splitlines()
    assert lines[0] == "paddle-8xp40/GPU5 -> deepep-a100-node/GPU5 (net; GB/s per direction)"
    marked = [line for line in lines if line.endswith("<== bottleneck")]
    # journey 1: no NIC on GPU5's switch, so host memory and the inter-socket link (assumed
    # NCCL SKL class, 10 GB/s) are the slowest part, slower than the 100 Gb/s port
    assert len(marked) == 1 and "[inter socket]" in marked[0] and "assumed" in marked[0]
    assert "has no NIC behind its PCIe switch" in out
    assert "[host memory copy]" in out


def test_path_json_between_two_hosts() -> None:
    out, _ = run("path", "--bundle", str(A100), "--bundle", str(P40), "--src", "deepep-a100-node/GPU0",
                 "--dst", "paddle-8xp40/GPU0", "--format", "json")
    p = json.loads(out)
    assert p["gdr_src"] is True and p["gdr_dst"] is False


def test_text_says_what_is_unknown_and_what_was_assumed() -> None:
    out, _ = run("analyze", "--topo", str(P40 / "nvidia_smi_topo.txt"), "--hostname", "p40", "--format", "text")
    head = out.splitlines()[0]
    assert "1 NIC port (state unknown: send ibstat)" in head and "0 active" not in head
    assert "model unknown" in head
    assert "13.9*" in out  # assumed Gen3 x16 figures are starred ...
    assert "\nAssumptions (* in the tables):\n" in out  # ... and explained once
    assert "SKL_QPI_BW" in out and "lspci -vvv" in out
    assert "{" not in out and "None" not in out  # no Python reprs


def test_text_names_the_assumed_gpu_class() -> None:
    out, _ = run("analyze", "--bundle", str(BUNDLES / "dgx_a100_ash6"), "--format", "text")
    assert "(model unknown; assumed A100-class, NVLink3, 12 links per GPU)" in out.splitlines()[0]


def test_json_keeps_the_documented_keys_and_adds_assumptions() -> None:
    from apps.domain.analysis import DOC_KEYS

    doc = json.loads(run("analyze", "--bundle", str(P40))[0])
    assert set(DOC_KEYS) <= set(doc) and isinstance(doc["assumptions"], list) and doc["assumptions"]
    assert all("assumed" in e for e in doc["graph"]["edges"])


def test_every_section_kind_has_a_file_option() -> None:
    """`analyze` takes any registry kind as a per-file option, so nothing needs a bundle folder."""
    from apps.domain.parsers import KINDS
    from apps.topology.management.commands.analyze import FILE_OPTIONS

    assert set(FILE_OPTIONS.values()) == set(KINDS)


PAYLOAD = "mlx5_0;touch${IFS}PWNED;"


def settings_section(out: str) -> list[str]:
    """The lines under "NCCL settings:" in the text output."""
    lines = out.splitlines()
    start = lines.index("NCCL settings:") + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("  ")), len(lines))
    return lines[start:end]


def assert_runs_nothing(lines: list[str], cwd: Path) -> None:
    """Run the settings lines in bash in an empty folder: exit 0 and no file created."""
    cwd.mkdir(exist_ok=True)
    proc = subprocess.run(["bash", "-c", "\n".join(lines)], cwd=cwd, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert list(cwd.iterdir()) == []


def test_text_settings_leave_out_a_hostile_hca_name_and_run_nothing_in_bash(tmp_path: Path) -> None:
    fixtures = BUNDLES.parent
    # SYNTHETIC: the real mooncake captures with HCA mlx5_0 renamed to a shell command
    ibstat = (fixtures / "ibstat" / "mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt").read_text()
    topo = (fixtures / "nvidia_smi_topo" / "mooncake_issue_8xnv18_12nic_cpuset_list.txt").read_text()
    (tmp_path / "ibstat.txt").write_text(ibstat.replace("CA 'mlx5_0'", f"CA '{PAYLOAD}'"))
    (tmp_path / "topo.txt").write_text(topo.replace("NIC0: mlx5_0", f"NIC0: {PAYLOAD}"))
    out, _ = run("analyze", "--topo", str(tmp_path / "topo.txt"), "--ibstat", str(tmp_path / "ibstat.txt"),
                 "--format", "text")
    section = settings_section(out)
    assert section and section[0].startswith("  NCCL_IB_HCA==mlx5_3,")
    assert not any(PAYLOAD in line for line in section)
    assert f"X02 device name unsafe in a shell ({PAYLOAD})" in out  # the finding names it, as reported
    assert_runs_nothing(section, tmp_path / "run")


def test_text_settings_quote_whatever_a_document_holds(tmp_path: Path) -> None:
    """A document from before names were checked: its value is printed shell-quoted."""
    from apps.topology.management.commands.analyze import render_text

    doc = json.loads(run("analyze", "--bundle", str(A100))[0])
    doc["nccl_settings"] = [{"name": "NCCL_IB_HCA", "value": f"={PAYLOAD}$(touch PWNED2)", "reason": "a\nb"}]
    section = settings_section(render_text(doc))
    assert section == [f"  NCCL_IB_HCA='={PAYLOAD}$(touch PWNED2)'  # a b"]
    assert_runs_nothing(section, tmp_path)


@pytest.mark.parametrize("option,capture,rule,devices", [
    ("--smi-q", "nvlink/smi_q_full_gpud_8x_rtx4090_535.154.05.txt", "H06", [f"GPU{i}" for i in range(8)]),
    ("--show-gids", "show_gids/cx4lx_4ports_eth01-04_one_down_no_ipv4_12gids.txt", "F05", ["mlx5_1", "mlx5_3"]),
])
def test_analyze_reads_the_new_sections_of_real_captures(option, capture, rule, devices) -> None:
    out, _ = run("analyze", option, str(Path("/work/shared/realdata") / capture))
    [found] = [f for f in json.loads(out)["findings"] if f["rule"] == rule]
    assert found["devices"] == devices
    healthy, _ = run("analyze", "--smi-q", "/work/shared/realdata/nvlink/smi_q_full_gpud_8x_h100_80g_hbm3_535.183.01.txt")
    assert not [f for f in json.loads(healthy)["findings"] if f["rule"] in ("N03", "H06")]
