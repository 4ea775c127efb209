"""nvidia-smi nvlink -s parser: real captures (fixtures/nvidia_smi_nvlink; ``synthetic_*`` was written for
topoweb to cover ``<inactive>`` links, which no capture shows), other nvidia-smi outputs rejected, detect, fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, nvidia_smi_nvlink
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def load(name: str) -> str:
    return (FIX / "nvidia_smi_nvlink" / name).read_bytes().decode("utf-8")


def parse(name: str):
    return nvidia_smi_nvlink.parse(load(name))


def test_b300_seven_visible_gpus_eighteen_nvlink5_links():
    r = parse("dell_xe9780_b300_nvlink_status.txt")
    assert [g.index for g in r.gpus] == list(range(7))
    assert {g.name for g in r.gpus} == {"NVIDIA B300 SXM6 AC"}
    assert r.gpus[0].uuid == "GPU-bce5282f-d716-d136-5759-b7181a7a55df"
    for g in r.gpus:
        assert [lk.link for lk in g.links] == list(range(18))
        assert {(lk.gbps, lk.active) for lk in g.links} == {(53.125, True)}
    assert r.warnings == ()


def test_v100_tab_space_indent_six_links():
    r = parse("vastai_8xv100_sxm2_nvlink_s.txt")
    assert len(r.gpus) == 8 and all(len(g.links) == 6 for g in r.gpus)
    assert r.gpus[0].name == "Tesla V100-SXM2-32GB"
    assert r.gpus[7].links[5].gbps == 25.781 and r.gpus[7].links[5].raw == "25.781 GB/s"


def test_a100_integer_rate_and_single_gpu_selection():
    r = parse("azurehpc_nd_a100_v4_gpu7_nvlink_status_good.txt")
    (g,) = r.gpus
    assert (g.index, g.uuid, len(g.links)) == (7, "GPU-c7e253b0-c227-6f10-e860-7482c85e7ce8", 12)
    assert all(lk.gbps == 25.0 and isinstance(lk.gbps, float) and lk.raw == "25 GB/s" for lk in g.links)
    # The partial capture shows GPU 0 only; it reads exactly like "-i 0".
    assert parse("aws_p4de_a100_80g_gpu0_nvlink_s_partial.txt").gpus[0].index == 0


def test_h100_and_rtx3090_bridge_and_redacted_uuid():
    (h,) = parse("h100_gpu0_nvlink_status_i0_chinese_notes.txt").gpus
    assert len(h.links) == 18 and h.links[17].gbps == 26.562
    r = parse("ryzen5900x_2x_rtx3090_nvlink_s.txt")
    assert [(g.index, len(g.links), g.links[0].gbps) for g in r.gpus] == [(0, 4, 14.062), (1, 4, 14.062)]
    assert r.gpus[0].uuid == "GPU-\u7565-332e-08e4-72fe-\u7565"  # masked with a CJK character in the source


def test_inactive_links_and_gpu_without_nvlink():
    r = parse("synthetic_a100_two_inactive_links_and_a10_without_nvlink.txt")
    g0, g1, g2 = r.gpus
    inactive = [(lk.link, lk.gbps, lk.active, lk.raw) for lk in g0.links if not lk.active]
    assert inactive == [(2, None, False, "<inactive>"), (8, None, False, "<inactive>")]
    assert sum(lk.active for lk in g0.links) == 10 and all(lk.active for lk in g1.links)
    assert (g2.name, g2.links) == ("NVIDIA A10", ())
    assert r.warnings == ("GPU 2: NVML: Unable to retrieve NVLink information as all links are inActive",)


def test_zero_rate_is_not_active_and_prompt_is_skipped():
    r = nvidia_smi_nvlink.parse("$ nvidia-smi nvlink -s\nGPU 0: NVIDIA H100 (UUID: GPU-1)\n\t Link 0: 0 GB/s\n")
    assert r.gpus[0].links[0].active is False and r.gpus[0].links[0].gbps == 0.0
    assert r.warnings == ("line 1: skipped command line '$ nvidia-smi nvlink -s'",)


C2C = "GPU 0: NVIDIA GH200 480GB (UUID: GPU-xxxx)\n    C2C Link 0: 44.712 GB/s\n    C2C Link 1: 44.712 GB/s\n"


@pytest.mark.parametrize(
    "text,line_no,reason",
    [
        ("", 0, "empty"),
        ("\t Link 0: 25 GB/s\n", 1, "before any 'GPU N:"),
        ("GPU 0: NVIDIA A100 (UUID: GPU-1)\n\t Link 0: fast\n", 2, "link 0 of GPU 0"),
        ("GPU 0: NVIDIA A100 (UUID: GPU-1)\nsomething else\n", 2, "unrecognised line under GPU 0"),
        (C2C, 2, "nvidia-smi c2c -s"),
        ("==============NVSMI LOG==============\n\nTimestamp : x\n", 1, "nvidia-smi -q"),
        ("hello\n", 1, "expected 'GPU N:"),
    ],
)
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        nvidia_smi_nvlink.parse(text)
    assert (info.value.kind, info.value.line_no) == ("nvidia_smi_nvlink", line_no)
    assert reason in info.value.reason


def test_capabilities_output_is_rejected_at_its_first_link_line():
    with pytest.raises(ParseError) as info:
        parse("h100_gpu0_nvlink_capabilities_i0_chinese_notes.txt")
    assert info.value.line_no == 2 and "nvidia-smi nvlink --capabilities" in info.value.reason


def test_detect():
    for path in sorted((FIX / "nvidia_smi_nvlink").glob("*.txt")):
        text = path.read_text()
        if "capabilities" in path.name:
            assert nvidia_smi_nvlink.detect(text) == 0
            continue
        assert nvidia_smi_nvlink.detect(text) == 90, path
        assert detect_kind(text) == "nvidia_smi_nvlink", path
    assert nvidia_smi_nvlink.detect(C2C) == 0
    for kind in ("ibstat", "ibv_devinfo", "nvidia_smi_gpus", "nvidia_smi_topo"):
        for path in sorted((FIX / kind).glob("*.txt")):
            assert nvidia_smi_nvlink.detect(path.read_text(errors="replace")) == 0, path


test_fuzz_any_text, test_fuzz_mutated_real_lines = safety_tests(
    nvidia_smi_nvlink.parse, "nvidia_smi_nvlink", mutated_lines(fixture_lines("nvidia_smi_nvlink"), max_size=25), detect=nvidia_smi_nvlink.detect)
