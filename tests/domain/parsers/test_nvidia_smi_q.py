"""nvidia-smi -q parser: every real capture of realdata/nvlink/smi_q_* (copied to fixtures/nvidia_smi_q), the
facts read off each by eye, other nvidia-smi outputs rejected naming the line, detect, fuzzing.
``synthetic_gb200_*`` was written for topoweb (no real NVLink5 capture with a fabric that is not Completed)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, nvidia_smi_q
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"
ROOT = FIX.parents[1]
REALDATA = Path("/work/shared/realdata")


def parse(name: str):
    return nvidia_smi_q.parse((FIX / "nvidia_smi_q" / name).read_bytes().decode("utf-8"))


def test_hgx_h100_eight_gpus_fabric_completed_and_replays():
    r = parse("smi_q_full_gpud_8x_h100_80g_hbm3_535.183.01.txt")
    assert (r.driver_version, r.cuda_version, r.attached_gpus) == ("535.183.01", "12.2", 8)
    assert [g.bdf for g in r.gpus] == [f"0000:{b}:00.0" for b in ("53", "64", "75", "86", "97", "a8", "b9", "ca")]
    assert [g.index for g in r.gpus] == list(range(8)) and [g.minor_number for g in r.gpus] == list(range(8))
    assert [g.module_id for g in r.gpus] == [7, 5, 6, 8, 1, 3, 4, 2]
    assert [g.replays_since_reset for g in r.gpus] == [120, 111, 58, 60, 63, 93, 69, 78]
    for g in r.gpus:
        assert g.name == "NVIDIA H100 80GB HBM3" and g.architecture == "Hopper" and g.pstate == "P0"
        assert (g.pci_device_id, g.pci_vendor_id, g.virtualization_mode) == ("2330", "10de", "Pass-Through")
        assert (g.link_gen_current, g.link_gen_max, g.link_gen_gpu_max, g.link_gen_host_max) == (5, 5, 5, None)
        assert (g.link_width_current, g.link_width_max, g.replay_rollovers) == (16, 16, 0)
        assert (g.fabric.state, g.fabric.status, g.fabric.clique_id) == ("Completed", "Success", None)
    assert r.gpus[0].uuid == "GPU-566e6f65-c38e-b12f-4824-6944218668b9" and r.warnings == ()


def test_rtx4090_server_minor_numbers_reversed_idle_gpus_at_gen1_no_fabric():
    r = parse("smi_q_full_gpud_8x_rtx4090_535.154.05.txt")
    assert [g.minor_number for g in r.gpus] == [3, 2, 1, 0, 7, 6, 5, 4]
    assert [(g.index, g.pstate, g.link_gen_current) for g in r.gpus if g.link_gen_current == 1] == [
        (4, "P8", 1), (5, "P8", 1), (7, "P8", 1)]
    assert {(g.link_gen_max, g.link_gen_host_max, g.link_width_current) for g in r.gpus} == {(4, 4, 16)}
    assert {(g.fabric.state, g.fabric.status) for g in r.gpus} == {(None, None)}  # Fabric N/A: no NVSwitch
    assert {g.brand for g in r.gpus} == {"GeForce"} and r.gpus[0].virtualization_mode == "None"


def test_single_gpu_captures():
    (a10,) = parse("smi_q_full_gpud_a10_535.129.03.txt").gpus
    assert (a10.bdf, a10.name, a10.link_gen_current, a10.pstate, a10.virtualization_mode) == (
        "0000:07:00.0", "NVIDIA A10", 4, "P8", "Pass-Through")
    (tv,) = parse("smi_q_full_gpud_titan_v_560.35.03_gen1_idle.txt").gpus
    assert (tv.link_gen_current, tv.link_gen_gpu_max, tv.link_gen_host_max, tv.pstate) == (1, 3, 3, "P8")
    # R560 prints CliqueId, ClusterUUID and a Health section, all N/A on this workstation
    assert (tv.fabric.state, tv.fabric.clique_id, tv.fabric.cluster_uuid, tv.fabric.health) == (
        None, None, None, {"Bandwidth": None})


def test_partial_capture_of_one_gpu_of_four_has_no_index():
    r = parse("smi_q_microway_v100_pcie_410_partial.txt")
    (g,) = r.gpus
    assert (r.driver_version, r.attached_gpus, g.index, g.bdf, g.name) == (
        "410.48", 4, None, "0000:18:00.0", "Tesla V100-PCIE-32GB")
    assert (g.replays_since_reset, g.link_gen_current, g.link_gen_gpu_max, g.fabric) == (0, 3, None, None)
    assert r.warnings == ("'Attached GPUs' says 4 but the text holds 1 GPU block(s): a partial capture, so GPU "
                          "indices are unknown",)


@pytest.mark.parametrize("name,bdf,device,gens,replays", [
    ("smi_q_pci_a100_sxm4_80g_555_partial.txt", "0000:68:00.0", "20b2", (4, 4, 4, 5), 0),
    ("smi_q_pci_ad102_26ba_idle_gen1_partial.txt", "0000:12:00.0", "26ba", (1, 4, 4, 5), 0),
    ("smi_q_pci_h100_sxm_560_partial.txt", "0000:db:00.0", "2330", (5, 5, 5, 5), 6),
    ("smi_q_pci_h800_525_partial.txt", "0000:18:00.0", "2324", (5, 5, 5, 5), 0),
])
def test_pasted_pci_sections(name, bdf, device, gens, replays):
    r = parse(name)
    (g,) = r.gpus
    assert (g.bdf, g.pci_device_id, g.index, g.name) == (bdf, device, None, None)
    assert (g.link_gen_current, g.link_gen_max, g.link_gen_gpu_max, g.link_gen_host_max) == gens
    assert g.replays_since_reset == replays and g.link_width_current == 16
    assert r.warnings == ("line 1: no 'GPU <PCI address>' header: read as the section(s) of one GPU",)


def test_synthetic_gb200_fabric_in_progress_with_clique():
    r = parse("synthetic_gb200_4gpu_fabric_in_progress.txt")
    assert [g.bdf for g in r.gpus] == ["0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"]
    assert {(g.fabric.state, g.fabric.status, g.fabric.clique_id) for g in r.gpus} == {("In Progress", None, "32766")}


def test_fixtures_are_the_real_captures_byte_for_byte():
    rows = list(csv.reader((FIX / "SOURCES.nvidia_smi_q.tsv").open(), delimiter="\t"))
    assert {Path(r[0]).name for r in rows} == {p.name for p in (FIX / "nvidia_smi_q").glob("*.txt")}
    for fixture, source, _ in rows:
        if source == "-":
            assert Path(fixture).name.startswith("synthetic_")
            continue
        assert (ROOT / fixture).read_bytes() == (REALDATA.parent / source).read_bytes(), fixture


NVLINK_S = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n         Link 0: 26.562 GB/s\n"


@pytest.mark.parametrize("text,line_no,reason", [
    ("", 0, "empty"),
    ("<?xml version=\"1.0\" ?>\n<nvidia_smi_log>\n", 1, "nvidia-smi -q -x"),
    ("+-----------------------------------------------------------------------------+\n", 1, "plain 'nvidia-smi' table"),
    (NVLINK_S, 1, "nvidia-smi nvlink -s"),
    ("hello world\n", 1, "expected 'GPU <PCI address>'"),
    ("GPU 00000000:53:00.0\n    Product Name : X\nTimestamp : now\n    PCI\n", 4, "outside any"),
    ("==============NVSMI LOG==============\nDriver Version : 535\nAttached GPUs : 8\n", 0, "no 'GPU <PCI address>'"),
])
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        nvidia_smi_q.parse(text)
    assert (info.value.kind, info.value.line_no) == ("nvidia_smi_q", line_no)
    assert reason in info.value.reason


def test_no_gpu_attached_is_an_empty_result_and_processes_are_not_read():
    r = nvidia_smi_q.parse("==============NVSMI LOG==============\nAttached GPUs : 0\n")
    assert (r.attached_gpus, r.gpus) == (0, ())
    text = ("GPU 00000000:01:00.0\n    Product Name : NVIDIA TITAN V\n    Processes\n        Process ID : 1\n"
            "            Name : /usr/bin/secret-tool\n    Fabric\n        State : N/A\n")
    (g,) = nvidia_smi_q.parse(text).gpus
    assert (g.name, g.fabric.state) == ("NVIDIA TITAN V", None)


def test_detect():
    for path in sorted((FIX / "nvidia_smi_q").glob("*.txt")):
        text = path.read_text()
        assert nvidia_smi_q.detect(text) >= 80, path
        assert detect_kind(text) == "nvidia_smi_q", path
    for kind in ("nvidia_smi_nvlink", "nvidia_smi_gpus", "nvidia_smi_topo", "ibstat", "lspci_verbose"):
        for path in sorted((FIX / kind).glob("*.txt")):
            assert nvidia_smi_q.detect(path.read_text(errors="replace")) == 0, path


test_fuzz_any_text, test_fuzz_mutated_real_lines = safety_tests(
    nvidia_smi_q.parse, "nvidia_smi_q", mutated_lines(fixture_lines("nvidia_smi_q"), max_size=30),
    detect=nvidia_smi_q.detect)
