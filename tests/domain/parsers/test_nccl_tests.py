"""nccl-tests parser: facts read by eye off the real captures (fixtures/nccl_tests), the synthetic
variants (files named synthetic_*, written for these tests), errors, detection, fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, nccl_tests
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tests"
GIB = 1 << 30


def load(name: str) -> nccl_tests.NcclTestsResult:
    return nccl_tests.parse((FIX / name).read_bytes().decode("utf-8"))


def test_64_rank_allreduce_peaks_at_391_gbs_at_8_gib_and_names_every_gpu():
    r = load("h100_ib400_8node_allreduce_min_ctas24_qps2_391gbs_nccl_tests_issue_309.txt")
    assert (r.nranks, len(r.hosts), r.ngpus_per_process) == (64, 8, 1)
    assert r.hosts[0] == "0666a154" and r.hosts[-1] == "b3a57cc9"
    by = {x.rank: x for x in r.ranks}
    assert (by[3].host, by[3].device, by[3].bus_id, by[3].bdf) == ("0666a154", 3, "0000:4e:00", "0000:4e:00.0")
    assert (by[12].host, by[12].bdf, by[12].model) == ("b749a9b0", "0001:1b:00.0", "NVIDIA H100 80GB HBM3")
    assert (by[63].host, by[63].device, by[63].bdf, by[63].pid) == ("b3a57cc9", 7, "0001:4e:00.0", 122625)
    assert (r.peak_busbw_gbs, r.peak_size_bytes, r.plateau_busbw_gbs) == (391.37, 8 * GIB, 391.37)
    assert r.avg_busbw_gbs == 192.573 and r.out_of_bounds == 0
    assert [x.size_bytes for x in r.rows][:2] == [1048576, 2097152] and len(r.rows) == 14
    four = next(x for x in r.rows if x.size_bytes == 4 * GIB)
    assert (four.out_of_place.time_us, four.in_place.busbw_gbs, four.in_place.wrong) == (21882.0, 390.63, 0)
    assert (r.collective, r.collective_source) == ("all_reduce", "inferred")  # busbw/algbw = 1.97 = 2*63/64
    assert r.params.min_bytes == 1048576 and r.params.step_factor == 2 and r.params.agg_iters == 1
    assert r.warnings == ()


def test_newest_header_all_dtypes_and_reduced_max_bytes():
    r = load("dell_h200_2node_bf3_roce400_ocp_allreduce_all_dtypes_10g_48g.txt")
    assert (r.version, r.nccl_headers, r.nccl_library, r.nccl_version) == ("2.18.3", 23004, 23004, "2.30.4+cuda13.2")
    assert (r.collective, r.collective_source, r.params.unalign, r.params.ngpus) == ("all_reduce", "header", 0, 8)
    assert len(r.rows) == 36
    assert list(dict.fromkeys(x.type for x in r.rows)) == [
        "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3",
        "f8e5m2"]
    assert (r.peak_busbw_gbs, r.peak_size_bytes) == (487.34, 20 * GIB)  # float at 21474836480
    assert r.rows[0].count == 10737418240 and r.rows[0].out_of_place.busbw_gbs == 389.40
    assert r.avg_busbw_gbs == 433.477
    assert any("reduced maxBytes to 48247057066" in w for w in r.warnings)


def test_old_format_without_root_and_with_error_column():
    r = load("abci_node_a_a100_40gb_2node_ib_sharp_collnet_allreduce_old_format_partial.txt")
    assert r.layout == "no_root" and r.params.agg_iters is None and r.params.graph is None
    assert r.params.iters == 50 and r.params.warmup_iters == 50
    first = r.rows[0]
    assert (first.size_bytes, first.root, first.out_of_place.time_us) == (8, None, 22.54)
    assert first.out_of_place.error == 4e-07
    assert first.out_of_place.wrong is None and first.in_place.error == 4e-07
    assert r.rows[1].in_place.error == 1e-07
    rank8 = r.ranks[8]
    assert (rank8.host, rank8.group, rank8.bus_id, rank8.bdf, rank8.pci_bus) == ("a0001", None, "0x27", None, 0x27)
    assert (r.peak_busbw_gbs, r.peak_size_bytes, r.avg_busbw_gbs) == (105.46, 2 * GIB, 29.0317)
    assert any("--(snip)--" in w for w in r.warnings)


def test_all_gather_with_zero_size_rows_and_alltoall_without_in_place_check():
    ag = load("autodl_2x_rtx2080ti_pcie_no_p2p_allgather.txt")
    assert [x.size_bytes for x in ag.rows[:3]] == [0, 0, 32]
    assert ag.nranks == 2 and ag.ranks[1].bdf == "0000:b5:00.0" and ag.ranks[1].model == "NVIDIA GeForce RTX 2080 Ti"
    last = ag.rows[-1]
    assert (last.out_of_place.algbw_gbs, last.out_of_place.busbw_gbs) == (7.58, 3.79)  # busbw = algbw * (n-1)/n
    assert (ag.collective, ag.peak_busbw_gbs, ag.avg_busbw_gbs) == ("all_gather", 3.79, 1.6651)
    a2a = load("autodl_2x_rtx2080ti_pcie_no_p2p_alltoall.txt")
    assert all(x.in_place.wrong is None and x.out_of_place.wrong == 0 for x in a2a.rows)
    assert (a2a.collective, a2a.peak_busbw_gbs) == ("alltoall", 4.61)


def test_sendrecv_table_only_is_inferred_from_unit_ratio_and_missing_in_place_check():
    r = load("a100_8gpu_nvlink_sendrecv_table_only_partial.txt")
    assert (r.collective, r.collective_source) == ("sendrecv", "inferred")
    assert (r.peak_busbw_gbs, r.nranks, r.avg_busbw_gbs) == (195.10, None, None)
    assert any("no 'Avg bus bandwidth'" in w for w in r.warnings)


def test_srun_prefix_with_validation_off_and_prompt_line():
    r = load("gcp_a3mega_h100_2node_tcpxo_allgather_srun_l_prefix_partial.txt")
    assert len(r.rows) == 11 and r.rows[0].size_bytes == 8388608
    assert all(x.out_of_place.wrong is None and x.in_place.wrong is None for x in r.rows)  # -c 0: N/A
    assert (r.peak_busbw_gbs, r.peak_size_bytes, r.avg_busbw_gbs) == (188.88, 8 * GIB, 128.817)
    assert r.collective is None  # redop none, nothing checked: all_gather or alltoall, not guessed
    assert any("srun -l prefixes removed" in w for w in r.warnings)


def test_aws_p5_srun_rows_only():
    r = load("aws_2x_p5_48xlarge_efa_allreduce_srun_prefix_table_only_partial.txt")
    assert len(r.rows) == 32 and (r.peak_busbw_gbs, r.peak_size_bytes) == (487.09, 16 * GIB)
    assert r.rows[0].out_of_place.time_us == 69.12


def test_mpich_rank_tags_inside_the_line_are_removed():
    r = load("h100_3node_cross_rack_vm_cx7_2x200g_allreduce_rank_tag_prefix_slow_nccl_issue_1453_partial.txt")
    by = {x.size_bytes: x for x in r.rows}
    assert len(r.rows) == 10
    assert (by[33554432].out_of_place.busbw_gbs, by[67108864].out_of_place.busbw_gbs) == (29.50, 5.27)
    assert by[2097152].in_place.time_us == 416.7 and by[1048576].root == -1
    assert (r.peak_busbw_gbs, r.plateau_busbw_gbs) == (29.50, None)  # nothing >= 1 GiB in the excerpt
    assert any("no column header" in w for w in r.warnings)


def test_markdown_indented_capture_and_interleaved_nccl_lines():
    md = load("hgx_h100_2node_8nic_bond_allreduce_256m_8g_md_indent_dedented_rows.txt")
    assert (len(md.rows), md.nranks, md.peak_busbw_gbs, md.avg_busbw_gbs) == (6, 16, 467.97, 443.007)
    assert md.ranks[5].bus_id == "0xc3" and md.ranks[5].host == "host1"
    k = load("koordinator_k8s_cx5_vf_roce_2node_1gpu_allreduce_slow_partial.txt")
    assert (len(k.rows), k.peak_busbw_gbs, k.avg_busbw_gbs, k.nccl_version) == (11, 2.84, 2.61937, "2.21.5+cuda12.4")


def test_doc_capture_cut_by_its_author():
    r = load("aws_p4d_24xlarge_2node_efa_allreduce_doc_truncated_partial.txt")
    assert r.ranks[0].bus_id == r.ranks[1].bus_id == "0x10"  # p4d prints the bus byte only: two GPUs share it
    assert (len(r.rows), r.peak_busbw_gbs, r.avg_busbw_gbs, r.nccl_version) == (28, 76.21, 15.5514, "2.23.4+cuda12.5")
    assert sum("output cut here" in w for w in r.warnings) == 4


def test_large_times_and_step_in_bytes():
    r = load("ocp_dell_r760xa_l40s_2node_1gpu_socket_over_sriov_net1_allreduce.txt")
    assert r.rows[-1].out_of_place.time_us == 1059765.0 and r.peak_busbw_gbs == 8.11
    oke = load("oci_oke_a100_40gb_2node_sriov_rdma_allreduce_1g_10g.txt")
    assert (oke.params.step_bytes, oke.params.step_factor, oke.nccl_version) == (9663676416, None, "2.14.3+cuda11.7")
    assert oke.ranks[2].bus_id == "0x50" and oke.peak_busbw_gbs == 180.06
    bad = load("h100nvl_2gpu_2node_slingshot_allreduce_1mb_sweep_bad_nccl_issue_2441.txt")
    assert bad.params.step_bytes == 100000 and bad.rows[5].out_of_place.busbw_gbs == 4.37
    assert bad.rows[6].out_of_place.busbw_gbs == 10.79 and bad.hosts == ("gpu-0001", "gpu-0003")


def test_truncated_capture_with_only_the_average():
    r = load("gke_a4_b200_4pods_x4gpu_2node_allgather_misaligned_truncated_partial.txt")
    assert (r.rows, r.avg_busbw_gbs, r.nranks, len(r.hosts)) == ((), 11.2291, 16, 4)
    assert r.peak_busbw_gbs is None and r.ranks[15].bdf == "0000:c4:00.0"
    assert "no result rows (the table was cut or left out)" in r.warnings


def test_synthetic_mpirun_tag_output_duplicated_header_and_cut_row():
    """synthetic_*: written for these tests (mpirun --tag-output, broadcast with root 0)."""
    r = load("synthetic_mpirun_tag_output_broadcast_root0_truncated.txt")
    assert (r.collective, r.collective_source, r.root, r.nranks) == ("broadcast", "command", 0, 4)
    assert r.command.startswith("mpirun -np 4")
    assert [x.size_bytes for x in r.rows] == [1048576, 4194304, 16777216, 67108864, 268435456]
    assert r.rows[-1].in_place is None and r.rows[-1].out_of_place.busbw_gbs == 44.83
    text = "\n".join(r.warnings)
    for part in ("column header printed again", "repeated verbatim", "NCCL WARN: NET/IB : Got async event",
                 "in-place columns missing", "mpirun --tag-output prefixes removed", "no 'Avg bus bandwidth'"):
        assert part in text


def test_synthetic_wrong_values_and_failed_bounds_check():
    """synthetic_*: written for these tests."""
    r = load("synthetic_reduce_scatter_wrong_values_oob_failed.txt")
    assert (r.collective, r.out_of_bounds, r.avg_busbw_gbs) == ("reduce_scatter", 12, 238.221)
    assert any("2 row(s) report #wrong > 0" in w for w in r.warnings)
    assert any("12 out-of-bounds values (FAILED)" in w for w in r.warnings)


@pytest.mark.parametrize("text,line_no,reason", [
    ("", 0, "empty"),
    ("hello\nworld\n", 1, "not nccl-tests output"),
    ("#  size  count  type  redop  root  time  algbw  busbw #wrong  time  algbw  busbw #wrong\n"
     "     8      2  float    sum    -1 1x.21   0.00   0.00      0 10.02   0.00   0.00      0\n",
     2, "time '1x.21' is not a number"),
    ("#  size count type redop root time algbw busbw #wrong time algbw\n", 1, "out-of-place and in-place"),
    ("# Avg bus bandwidth    : fast\n", 1, "is not a number"),
])
def test_bad_input_names_the_line(text: str, line_no: int, reason: str):
    with pytest.raises(ParseError) as info:
        nccl_tests.parse(text)
    assert (info.value.kind, info.value.line_no) == ("nccl_tests", line_no)
    assert reason in info.value.reason


def test_detection_prefers_nccl_tests_over_its_interleaved_nccl_log_lines():
    text = (FIX / "koordinator_k8s_cx5_vf_roce_2node_1gpu_allreduce_slow_partial.txt").read_text()
    assert detect_kind(text) == "nccl_tests"
    log_only = "\n".join(line for line in text.splitlines() if " NCCL INFO " in line)
    assert detect_kind(log_only) == "nccl_log"
    assert nccl_tests.detect("Device: 0, NVIDIA H100\nP2P=Enabled Latency Matrix (us)\n") == 0


def test_a_table_after_thousands_of_log_lines_is_still_detected():
    table = (FIX / "nebius_h100_ib_vm_docker_allreduce_table_only_partial.txt").read_text()
    log = "node1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n" * 3000
    assert detect_kind(log + table) == "nccl_tests"


test_fuzz_any_text_parses_or_raises_parse_error, test_fuzz_mutated_real_lines = safety_tests(
    nccl_tests.parse, "nccl_tests", mutated_lines(fixture_lines("nccl_tests"), max_size=30),
    detect=nccl_tests.detect)
