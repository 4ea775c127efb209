"""perftest parser: facts read by eye off the real captures (fixtures/perftest), the synthetic ones
(files named synthetic_*, written for these tests: CUDA DMA-BUF client with a BW min column, a cut UD
server run, a failed connection), unit conversion, errors, detection, fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, perftest
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "perftest"


def load(name: str) -> perftest.PerftestResult:
    return perftest.parse((FIX / name).read_bytes().decode("utf-8"))


def test_mb_per_sec_is_mebibytes_converted_to_gbit():
    r = load("cx4lx_roce_mlx5_1_ib_send_bw_client_sweep_10g_link.txt")
    assert (r.unit, r.test, r.side, r.device, r.link_type, r.gid_index, r.mtu_bytes) == (
        "MB/sec", "ib_send_bw", "client", "mlx5_1", "Ethernet", 3, 1024)
    last = r.rows[-1]
    assert (last.bytes, last.iterations) == (8388608, 1000)
    assert last.bw_avg_gbit == pytest.approx(1100.71 * 1048576 * 8 / 1e9, abs=1e-4)  # 9.23 Gb/s: a 10 GbE link
    assert r.max_bw_avg_gbit == pytest.approx(1102.76 * 1048576 * 8 / 1e9, abs=1e-4) and r.max_bw_avg_bytes == 16384
    assert (r.local.ip, r.remote.ip, r.local.qpns) == ("10.10.10.26", "10.10.10.27", (0x0187,))


def test_hdr_client_and_server_of_one_send_sweep():
    client = load("cx6_hdr_ib_mlx5_2_ib_send_bw_client_sweep_mbsec.txt")
    server = load("cx6_hdr_ib_mlx5_2_ib_send_bw_server_sweep_mbsec.txt")
    assert (client.side, server.side) == ("client", "server")
    assert (client.tx_depth, client.rx_depth, server.tx_depth, server.rx_depth) == (128, None, None, 512)
    assert (client.local.lid, client.remote.lid, server.local.lid) == (0x6E, 0x74, 0x74)
    assert client.gid_index is None and client.link_type == "IB" and client.local.gid is None
    assert client.rows[12].bytes == 8192
    assert client.rows[12].bw_avg_gbit == pytest.approx(16674.65 * 0.008388608, abs=1e-4)
    assert all(row.bw_peak_gbit is None for row in server.rows)  # the server prints BW peak 0.00
    assert server.rows[-1].bw_avg_gbit == pytest.approx(23426.81 * 0.008388608, abs=1e-4)
    assert any("BW peak printed as 0.00" in w for w in server.warnings)


def test_dc_transport_two_qps_gbit_sweep():
    r = load("roce100_mlx5_1_dc_transport_ib_write_bw_client_sweep_2b_8mb.txt")
    assert (r.test, r.connection, r.qps, r.use_srq, r.unit) == ("ib_write_bw", "DC", 2, True, "Gb/sec")
    assert len(r.rows) == 23 and r.rows[0].bw_peak_gbit == 0.089888 and r.rows[-1].bw_avg_gbit == 97.56
    assert r.local.qpns == (0x902F, 0x9030) and r.remote.ip == "10.22.116.221"


def test_cuda_server_with_16_qps_rdma_cm_and_warnings_before_the_banner():
    r = load("ocp_a40_cx_roce_ib_write_bw_server_q16_cuda_dmabuf_tos41.txt")
    assert (r.side, r.qps, r.rdma_cm, r.data_exchange, r.tos, r.mtu_bytes) == ("server", 16, True, "rdma_cm", 41, 1024)
    assert r.cuda and (r.gpu.index, r.gpu.name, r.gpu.pci, r.gpu.bdf) == (0, "NVIDIA A40", "61:00", "0000:61:00.0")
    assert r.gpu.dmabuf is False  # the output never says DMA-BUF (the command line is not in the capture)
    assert len(r.local.qpns) == 16 and r.local.ip == "10.6.145.32" and r.remote.ip == "10.6.145.33"
    row = r.rows[0]
    assert (row.bytes, row.iterations, row.bw_peak_gbit, row.bw_avg_gbit, row.msg_rate_mpps) == (
        65536, 10384867, None, 181.46, 0.3461)
    assert r.other_fields == {"Lock-free": "OFF", "ibv_wr* API": "ON", "Using DDP": "OFF"}
    assert [w.split(": ", 2)[-1] for w in r.warnings[:4]] == [
        "WARNING: BW peak won't be measured in this run.",
        "Perftest doesn't supports CUDA tests with inline messages: inline size set to 0",
        "Requested mtu is higher than active mtu", "Changing to active mtu - 3"]


def test_read_bw_outstanding_reads_and_tabs():
    r = load("ib_edr_mlx5_0_ib_read_bw_client_mbsec_out16.txt")
    assert (r.test, r.outstanding_reads, r.rdma_cm, r.local.lid, r.remote.lid) == ("ib_read_bw", 16, False, 0x15, 0x0A)
    assert r.rows[0].bw_avg_gbit == pytest.approx(11708.31 * 0.008388608, abs=1e-4)  # 98.2 Gb/s: EDR


def test_bidirectional_rst_indented_doc():
    r = load("amd_rocm_docs_ib_write_bw_bidirectional_use_rocm_loopback_rst_indent.txt")
    assert (r.banner, r.bidirectional, r.side, r.device, r.pcie_relax_order) == (
        "RDMA_Write Bidirectional BW Test", True, None, "<RDMA-NIC-2>", True)
    assert r.rows[0].bw_peak_gbit == 0.142947 and r.rows[-1].bw_avg_gbit == 204.59


def test_cpu_frequency_warning_inside_the_table_and_md_indent():
    r = load("koordinator_k8s_cx5_vf_mlx5_2_roce_ib_write_bw_mbsec_md_indent.txt")
    assert len(r.rows) == 1 and r.rows[0].bw_avg_gbit == pytest.approx(2758.38 * 0.008388608, abs=1e-4)
    assert r.warnings == ("line 23: perftest: Conflicting CPU frequency values detected: 800.000000 != 2000.000000. "
                          "CPU Frequency is not max.",)
    q4 = load("dgx_spark_gb10_cx7_qsfp_rocep1s0f1_ib_write_bw_q4_rdma_cm.txt")
    assert (q4.device, q4.qps, q4.rdma_cm, q4.rows[0].bw_avg_gbit, q4.rows[0].iterations) == (
        "rocep1s0f1", 4, True, 111.71, 20000)


def test_synthetic_cuda_dmabuf_client_with_bw_min_column():
    """synthetic_*: written for these tests after perftest's CUDA DMA-BUF messages and its BW min column."""
    r = load("synthetic_ib_write_bw_client_cuda_dmabuf_bw_min_gbits.txt")
    assert r.cuda and (r.gpu.index, r.gpu.pci, r.gpu.bdf, r.gpu.dmabuf, r.gpu.name) == (
        1, "8F:00", "0000:8f:00.0", True, "NVIDIA H200")
    assert [(x.bytes, x.bw_min_gbit) for x in r.rows] == [(65536, 387.12), (1048576, 390.44)]
    assert r.other_fields["CQE Poll Batch"] == "16" and r.side == "client"


def test_synthetic_ud_server_run_cut_mid_row():
    """synthetic_*: a UD send server whose last row was cut."""
    r = load("synthetic_ib_send_bw_ud_server_two_qps_run_cut.txt")
    assert (r.connection, r.side, r.qps, len(r.rows)) == ("UD", "server", 2, 3)
    assert any("line 34: result row has 3 fields" in w for w in r.warnings)


@pytest.mark.parametrize("text,line_no,reason", [
    ("", 0, "empty"),
    ("just some text\n", 1, "not perftest output"),
    ("                    RDMA_Write Latency Test\n", 1, "latency test"),
    (" #bytes     #iterations    BW peak[KB/sec]    BW average[KB/sec]   MsgRate[Mpps]\n", 1, "unknown bandwidth unit"),
    (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
     " 65536      5000             97.5x              97.52              0.186003\n", 2, "is not a number"),
    ("Couldn't connect to 10.0.0.2:18515\n", 1, "perftest failed before printing results"),
])
def test_bad_input_names_the_line(text: str, line_no: int, reason: str):
    with pytest.raises(ParseError) as info:
        perftest.parse(text)
    assert (info.value.kind, info.value.line_no) == ("perftest", line_no)
    assert reason in info.value.reason


def test_detection():
    for path in FIX.glob("*.txt"):
        if not path.with_name(path.stem + ".error.json").exists():
            assert detect_kind(path.read_text()) == "perftest", path.name
    assert perftest.detect("# nThread 1 nGpus 1\n") == 0


test_fuzz_any_text_parses_or_raises_parse_error, test_fuzz_mutated_real_lines = safety_tests(
    perftest.parse, "perftest", mutated_lines(fixture_lines("perftest"), max_size=30), detect=perftest.detect)
