"""nvidia-smi nvlink -e parser. No real capture of ``nvlink -e`` is in realdata: the fixtures are ``synthetic_*``
(their SOURCES rows say which real layout each follows); the real ``nvlink -s`` captures are rejected naming the
command."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, nvidia_smi_nvlink, nvidia_smi_nvlink_errors
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def parse(name: str):
    return nvidia_smi_nvlink_errors.parse((FIX / "nvidia_smi_nvlink_errors" / name).read_text())


def test_h100_eighteen_links_all_zero_with_blank_lines():
    r = parse("synthetic_h100_2gpu_18links_no_errors.txt")
    assert [(g.index, g.name, len(g.links)) for g in r.gpus] == [(0, "NVIDIA H100 80GB HBM3", 18),
                                                                  (1, "NVIDIA H100 80GB HBM3", 18)]
    for g in r.gpus:
        assert {(lk.replay_errors, lk.recovery_errors, lk.crc_errors, lk.inactive) for lk in g.links} == {
            (0, 0, 0, False)}
        assert [lk.link for lk in g.links] == list(range(18))
    assert r.gpus[0].links[0].counters == {"replay_errors": 0, "recovery_errors": 0, "crc_errors": 0}


def test_a100_tab_indent_one_bad_link():
    r = parse("synthetic_a100_4gpu_gpu2_link7_crc_recovery.txt")
    bad = [(g.index, lk.link, lk.replay_errors, lk.recovery_errors, lk.crc_errors) for g in r.gpus for lk in g.links
           if lk.replay_errors or lk.recovery_errors or lk.crc_errors]
    assert bad == [(2, 7, 214, 3, 1532), (3, 0, 0, 0, 2)]
    assert r.gpus[2].uuid == "GPU-5e1f0000-1111-4222-8333-000000000002" and r.warnings == ()


def test_split_crc_counters_na_inactive_links_and_messages():
    text = ("$ nvidia-smi nvlink -e\nGPU 0: Tesla V100-SXM2-32GB (UUID: GPU-1)\n"
            "\t Link 0: Replay Errors: 5\n\t Link 0: CRC FLIT Errors: 2\n\t Link 0: CRC Data Errors: 1\n"
            "\t Link 1: <inactive>\n\t Link 2: Replay Errors: N/A\n"
            "GPU 1: NVIDIA A10 (UUID: GPU-2)\n\t NVML: Unable to retrieve NVLink information as all links are inActive\n")
    r = nvidia_smi_nvlink_errors.parse(text)
    g0, g1 = r.gpus
    l0, l1, l2 = g0.links
    assert (l0.replay_errors, l0.crc_errors, l0.counters["crc_flit_errors"]) == (5, 3, 2)
    assert (l1.inactive, l1.counters) == (True, {}) and l2.replay_errors is None
    assert g1.links == ()
    assert r.warnings == ("line 1: skipped command line '$ nvidia-smi nvlink -e'",
                          "GPU 1: NVML: Unable to retrieve NVLink information as all links are inActive")


@pytest.mark.parametrize("text,line_no,reason", [
    ("", 0, "empty"),
    ("\t Link 0: Replay Errors: 0\n", 1, "before any 'GPU N:"),
    ("GPU 0: NVIDIA A100 (UUID: GPU-1)\n\t Link 0: Replay Errors: many\n", 2, "is not a number"),
    ("GPU 0: NVIDIA A100 (UUID: GPU-1)\nsomething else\n", 2, "unrecognised line under GPU 0"),
    ("==============NVSMI LOG==============\n", 1, "nvidia-smi -q"),
    ("hello\n", 1, "expected 'GPU N:"),
])
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        nvidia_smi_nvlink_errors.parse(text)
    assert (info.value.kind, info.value.line_no) == ("nvidia_smi_nvlink_errors", line_no)
    assert reason in info.value.reason


def test_real_nvlink_status_captures_are_refused_by_name_both_ways():
    for path in sorted((FIX / "nvidia_smi_nvlink").glob("*.txt")):
        if "capabilities" in path.name or path.name.startswith("synthetic_"):
            continue
        with pytest.raises(ParseError) as info:
            nvidia_smi_nvlink_errors.parse(path.read_text())
        assert "nvidia-smi nvlink -s" in info.value.reason, path
    with pytest.raises(ParseError) as info:  # and the -s parser names -e output
        nvidia_smi_nvlink.parse((FIX / "nvidia_smi_nvlink_errors" / "synthetic_h100_2gpu_18links_no_errors.txt").read_text())
    assert "nvidia-smi nvlink -e" in info.value.reason and info.value.line_no == 2


def test_detect():
    for path in sorted((FIX / "nvidia_smi_nvlink_errors").glob("*.txt")):
        assert nvidia_smi_nvlink_errors.detect(path.read_text()) == 90
        assert detect_kind(path.read_text()) == "nvidia_smi_nvlink_errors"
    for path in sorted((FIX / "nvidia_smi_nvlink").glob("*.txt")):
        assert nvidia_smi_nvlink_errors.detect(path.read_text()) == 0, path


test_fuzz_any_text, test_fuzz_mutated_real_lines = safety_tests(
    nvidia_smi_nvlink_errors.parse, "nvidia_smi_nvlink_errors",
    mutated_lines(fixture_lines("nvidia_smi_nvlink_errors"), max_size=25), detect=nvidia_smi_nvlink_errors.detect)
