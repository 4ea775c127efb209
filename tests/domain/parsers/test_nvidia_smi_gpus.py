"""GPU query CSV parser (``nvidia-smi --query-gpu=index,uuid,pci.bus_id,... --format=csv``).

There is no real capture of this query in realdata: every fixture under fixtures/nvidia_smi_gpus is
SYNTHETIC (``synthetic_*.txt``), written for topoweb in the formats of domain.md 4.1/4.3 (header with
units, noheader, the old driver's ``pcie.link.gen.current`` name, ``[N/A]`` cells). UUIDs are invented.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, nvidia_smi_gpus
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures"
HEADER = ("index, uuid, pci.bus_id, name, compute_cap, pstate, pcie.link.gen.gpucurrent, pcie.link.gen.max, "
          "pcie.link.gen.gpumax, pcie.link.gen.hostmax, pcie.link.width.current, pcie.link.width.max")


def load(name: str) -> str:
    return (FIX / "nvidia_smi_gpus" / name).read_text()


def test_header_with_units_eight_h100_and_one_narrow_link():
    r = nvidia_smi_gpus.parse(load("synthetic_8x_h100_header_units.txt"))
    assert r.header is True
    assert [g.index for g in r.gpus] == list(range(8))
    assert [g.bdf for g in r.gpus] == ["0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
                                       "0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"]
    g6 = r.gpus[6]
    assert (g6.link_width_current, g6.link_width_max, g6.link_gen_current, g6.link_gen_host_max) == (8, 16, 5, 5)
    assert {g.name for g in r.gpus} == {"NVIDIA H100 80GB HBM3"} and {g.compute_cap for g in r.gpus} == {"9.0"}
    assert r.columns[-1] == "memory.total" and r.warnings == ("column 'memory.total' is not used",)


def test_noheader_assumes_the_documented_order():
    r = nvidia_smi_gpus.parse(load("synthetic_8x_h100_noheader_nounits.txt"))
    assert r.header is False and r.columns == nvidia_smi_gpus.QUERY_FIELDS
    g3 = r.gpus[3]
    assert (g3.pstate, g3.link_gen_current, g3.link_gen_max, g3.link_gen_gpu_max) == ("P8", 1, 5, 5)
    same = nvidia_smi_gpus.parse(load("synthetic_8x_h100_header_units.txt"))
    assert [g.uuid for g in r.gpus] == [g.uuid for g in same.gpus]


def test_noheader_with_fewer_columns():
    r = nvidia_smi_gpus.parse(load("synthetic_8x_h100_noheader_three_columns.txt"))
    assert r.columns == ("index", "uuid", "pci.bus_id")
    assert r.gpus[7].bdf == "0000:df:00.0" and r.gpus[7].name is None and r.gpus[7].link_gen_max is None


def test_old_driver_column_name_and_missing_columns():
    r = nvidia_smi_gpus.parse(load("synthetic_4x_a100_old_driver_gen_current.txt"))
    assert "pcie.link.gen.current" in r.columns
    assert [(g.bdf, g.link_gen_current, g.link_gen_max) for g in r.gpus] == [
        ("0000:17:00.0", 4, 4), ("0000:65:00.0", 4, 4), ("0000:ca:00.0", 4, 4), ("0000:e3:00.0", 4, 4)]
    assert all(g.compute_cap is None and g.link_gen_gpu_max is None for g in r.gpus)
    assert r.warnings == ()


def test_not_available_cells_are_null_without_warning():
    r = nvidia_smi_gpus.parse(load("synthetic_2x_a10g_vm_na_cells.txt"))
    g0, g1 = r.gpus
    assert g0.link_gen_host_max is None and g0.link_gen_current == 4
    assert (g1.pstate, g1.link_gen_current, g1.link_gen_host_max, g1.link_gen_max) == (None, None, None, 4)
    assert r.warnings == ()


def test_units_in_cells_bracketed_header_units_and_reordered_columns():
    text = ("pci.bus_id, index, pcie.link.width.current [lanes], name\n"
            "00000000:3B:00.0, 1, 16 lanes, NVIDIA L40S\n00000000:1A:00.0, 0, 16, NVIDIA L40S\n")
    r = nvidia_smi_gpus.parse(text)
    assert [(g.index, g.bdf, g.link_width_current) for g in r.gpus] == [(1, "0000:3b:00.0", 16), (0, "0000:1a:00.0", 16)]
    assert r.columns == ("pci.bus_id", "index", "pcie.link.width.current", "name")


@pytest.mark.parametrize(
    "text,line_no,reason",
    [
        ("", 0, "empty"),
        ('Field "pcie.link.gen.gpumax" is not a valid field to query.\n', 1, "nvidia-smi refused the query"),
        ("index, uuid, name\n0, GPU-1, A100\n", 1, "'index' and 'pci.bus_id'"),
        (HEADER + "\n0, GPU-1, 00000000:1B:00.0\n", 2, "row has 3 fields but the header names 12"),
        ("index, pci.bus_id\nzero, 00000000:1B:00.0\n", 2, "GPU index 'zero' is not a number"),
        ("index, pci.bus_id\n0, 1B:00\n", 2, "is not a PCI address"),
        ("index, pci.bus_id\n0, [N/A]\n", 2, "without a pci.bus_id"),
        ("index, pci.bus_id, pcie.link.width.max\n0, 00000000:1B:00.0, wide\n", 2, "is not a number"),
        ("0, GPU-1, 00000000:1B:00.0, a, b, c, 1, 2, 3, 4, 5, 6, 7\n", 1, "12-column order"),
        ("0, GPU-1\n", 1, "at least index, uuid, pci.bus_id"),
        ("0, GPU-1, 00000000:1B:00.0\n1, GPU-2, 00000000:43:00.0, H100\n", 2, "the first row has 3"),
        ("index, pci.bus_id\n", 1, "no GPU rows"),
        ("index, index, pci.bus_id\n", 1, "appears twice"),
    ],
)
def test_errors_name_the_line(text, line_no, reason):
    with pytest.raises(ParseError) as info:
        nvidia_smi_gpus.parse(text)
    assert (info.value.kind, info.value.line_no) == ("nvidia_smi_gpus", line_no)
    assert reason in info.value.reason


def test_detect():
    for path in sorted((FIX / "nvidia_smi_gpus").glob("*.txt")):
        assert nvidia_smi_gpus.detect(path.read_text()) >= 85
        assert detect_kind(path.read_text()) == "nvidia_smi_gpus"
    for kind in ("ibstat", "ibv_devinfo", "nvidia_smi_nvlink", "sysfs_ib", "nvidia_smi_topo"):
        for path in sorted((FIX / kind).glob("*.txt")):
            assert nvidia_smi_gpus.detect(path.read_text(errors="replace")) == 0, path


test_fuzz_any_text, test_fuzz_mutated_lines = safety_tests(
    nvidia_smi_gpus.parse, "nvidia_smi_gpus", mutated_lines(fixture_lines("nvidia_smi_gpus"), max_size=10), detect=nvidia_smi_gpus.detect)
