"""p2pBandwidthLatencyTest / nvbandwidth parser.

No real capture of either tool is in ../shared/realdata, so every fixture here is synthetic
(``synthetic_*``, written for these tests). They follow the published output of the tools: the
``printf`` formats of cuda-samples' p2pBandwidthLatencyTest.cu (device lines, ``Device=i CAN|CANNOT
Access Peer Device=j``, the connectivity matrix, the four bandwidth matrices, latency matrices with
GPU and CPU blocks; the older layout with ``P2P Cliques:`` and titles without ``(P2P Writes)``) and
nvbandwidth's testcase output (version block, ``Device i: name (bus)``, ``Running X.``, ``memcpy CE
CPU(row) -> GPU(column) bandwidth (GB/s)`` matrices with ``N/A`` diagonals, ``SUM`` and
``COEFFICIENT_OF_VARIATION`` lines, ``Waived:``). The figures are invented.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, p2p_bandwidth
from tests.domain.parsers.properties import edited_document, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "p2p_bandwidth"


def load(name: str) -> p2p_bandwidth.P2pBandwidth:
    return p2p_bandwidth.parse((FIX / name).read_text())


def titled(result: p2p_bandwidth.P2pBandwidth, start: str, block: str | None = None) -> p2p_bandwidth.Matrix:
    return next(m for m in result.matrices if m.title.startswith(start) and m.block == block)


def test_pcie_pair_without_p2p():
    r = load("synthetic_p2pbandwidthlatencytest_2x_pcie_no_p2p.txt")
    assert r.tool == "p2pBandwidthLatencyTest"
    assert [(d.index, d.name, d.bdf) for d in r.devices] == [(0, "NVIDIA GeForce RTX 4090", "0000:01:00.0"),
                                                             (1, "NVIDIA GeForce RTX 4090", "0000:81:00.0")]
    assert [(a.src, a.dst, a.can_access) for a in r.peer_access] == [(0, 1, False), (1, 0, False)]
    assert r.connectivity.values == ((1.0, 0.0), (0.0, 1.0))
    uni = titled(r, "Unidirectional P2P=Enabled")
    assert (uni.p2p, uni.bidirectional, uni.p2p_mode, uni.unit) == (True, False, "writes", "GB/s")
    assert uni.values[0][1] == 21.91
    bi = titled(r, "Bidirectional P2P=Disabled")
    assert (bi.p2p, bi.bidirectional, bi.values[1][0]) == (False, True, 29.61)
    gpu = titled(r, "P2P=Disabled Latency", "GPU")
    cpu = titled(r, "P2P=Disabled Latency", "CPU")
    assert (gpu.measure, gpu.unit, gpu.values[0][1], cpu.values[0][1]) == ("latency", "us", 13.07, 6.12)
    assert len(r.matrices) == 8 and r.warnings == ()


def test_nvlink_quad_p2p_writes():
    r = load("synthetic_p2pbandwidthlatencytest_4x_h100_nvlink_p2p_writes.txt")
    assert len(r.peer_access) == 12 and all(a.can_access for a in r.peer_access)
    assert r.devices[3].bdf == "0000:5d:00.0"
    m = titled(r, "Bidirectional P2P=Enabled")
    assert (m.row_ids, m.col_ids, m.values[2][3]) == ((0, 1, 2, 3), (0, 1, 2, 3), 740.12)
    assert titled(r, "P2P=Enabled Latency", "CPU").values[0][1] == 2.11


def test_old_layout_with_cliques_nan_and_a_cut_row():
    r = load("synthetic_p2pbandwidthlatencytest_old_cliques_3x_v100_row_cut.txt")
    assert r.cliques == ((0, 1), (2,)) and r.connectivity is None
    uni = titled(r, "Unidirectional P2P=Enabled")
    assert (uni.p2p_mode, uni.values[0][1], uni.values[2][2]) == (None, 48.35, None)  # nan: not measured
    assert titled(r, "Bidirectional P2P=Enabled").values[2] == (18.64, 18.58, None)
    assert titled(r, "P2P=Enabled Latency").block is None
    assert any("line 23: cell 'nan'" in w for w in r.warnings)
    assert any("line 33: matrix row cut short" in w for w in r.warnings)


def test_nvbandwidth_testcases_sums_and_waivers():
    r = load("synthetic_nvbandwidth_v0_5_4x_h100_one_slow_h2d.txt")
    assert (r.tool, r.version, r.cuda_runtime_version, r.cuda_driver_version, r.driver_version) == (
        "nvbandwidth", "v0.5", "12040", "12040", "550.54.15")
    assert [(d.index, d.bus_id, d.bdf) for d in r.devices][3] == (3, "00000000:61:00", "0000:61:00.0")
    h2d = r.matrices[0]
    assert (h2d.testcase, h2d.engine, h2d.row_kind, h2d.direction, h2d.col_kind) == (
        "host_to_device_memcpy_ce", "CE", "CPU", "->", "GPU")
    assert (h2d.row_ids, h2d.values[0][3], h2d.sum) == ((0,), 41.02, 207.93)
    d2d = r.matrices[2]
    assert (d2d.testcase, d2d.values[0][0], d2d.values[1][0], d2d.sum) == (
        "device_to_device_memcpy_read_ce", None, 392.41, 4711.96)
    assert r.matrices[3].bidirectional and r.matrices[3].direction == "<->"
    sm = r.matrices[4]
    assert (sm.engine, sm.direction, sm.coefficient_of_variation) == ("SM", "<-", 0.01)
    assert r.waived == ("",) and any("waived" in w for w in r.warnings)


def test_matrix_row_wider_than_header_is_an_error():
    with pytest.raises(ParseError) as info:
        load("synthetic_matrix_row_wider_than_header.txt")
    assert (info.value.kind, info.value.line_no) == ("p2p_bandwidth", 3)


@pytest.mark.parametrize("text,line_no,reason", [
    ("", 0, "empty"),
    ("hello\n", 1, "neither p2pBandwidthLatencyTest nor nvbandwidth"),
    ("P2P=Disabled Latency Matrix (us)\n   GPU     0\n     0   fast\n", 3, "is not a number"),
])
def test_bad_input_names_the_line(text: str, line_no: int, reason: str):
    with pytest.raises(ParseError) as info:
        p2p_bandwidth.parse(text)
    assert info.value.line_no == line_no and reason in info.value.reason


def test_detection_beats_the_topo_p2p_matrix():
    for path in FIX.glob("synthetic_*.txt"):
        assert detect_kind(path.read_text()) == "p2p_bandwidth", path.name


_TEXTS = [p.read_text() for p in sorted(FIX.glob("*.txt"))]
test_fuzz_any_text_parses_or_raises_parse_error, test_fuzz_edited_documents = safety_tests(
    p2p_bandwidth.parse, "p2p_bandwidth",
    edited_document(_TEXTS, ops=("drop", "dup", "swap", "cut", "insert", "tabs", "char", "merge")),
    detect=p2p_bandwidth.detect)
