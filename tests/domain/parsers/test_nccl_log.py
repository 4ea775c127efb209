"""NCCL debug-log parser: facts read by eye off the real excerpts (fixtures/nccl_log, and the NCCL lines of
two nccl-tests captures), the synthetic logs (files named synthetic_*, written for these tests: launcher
prefixes, versions, NICs, errors, old NCCL forms), errors, detection, fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import detect_kind, nccl_log
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FIX = FIXTURES / "nccl_log"


def load(name: str, folder: Path = FIX) -> nccl_log.NcclLog:
    return nccl_log.parse((folder / name).read_bytes().decode("utf-8"))


def test_pxn_net_ib_with_proxy_rank_and_gdrdma():
    r = load("tpgds_aihub0008_pxn_net_ib_0_8_partial.txt")
    send = next(c for c in r.connections if c.line_no == 7)
    assert (send.channel, send.src_rank, send.dst_rank, send.src_dev, send.dst_dev) == (0, 9, 0, 1, 0)
    assert (send.direction, send.transport, send.plugin, send.net_dev, send.proxy_rank, send.gdr) == (
        "send", "NET", "IB", 0, 8, True)
    recv = next(c for c in r.connections if c.line_no == 8)
    assert (recv.direction, recv.src_rank, recv.dst_rank, recv.proxy_rank, recv.gdr) == ("receive", 1, 8, None, True)
    ipc = r.connections[0]
    assert (ipc.host, ipc.device, ipc.transport, ipc.mechanism, ipc.read, ipc.gdr) == (
        "tpgds-aihub0008", 6, "P2P", "IPC", False, None)
    assert len(r.connections) == 14 and r.plugin == "IB" and r.errors == ()


def test_rank_8_to_15_log_settings_and_ring_gdr():
    r = load("tpgds_aihub0008_rank8-15_p2pipc_ib_gdrdma_partial.txt")
    assert r.settings == {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "106"}
    net = [c for c in r.connections if c.transport == "NET"]
    assert [(c.line_no, c.channel, c.src_rank, c.dst_rank, c.gdr) for c in net] == [
        (14, 7, 8, 7, True), (15, 15, 8, 7, True)]
    assert len(r.ring_connects) == 8 and {(x.pxn, x.gdr) for x in r.ring_connects} == {(0, 1)}
    assert r.ring_connects[0].line_no == 38 and r.ring_connects[1].line_no == 40


def test_roce_2397_shm_within_node_and_net_ib_without_gdr():
    r = load("a100pcie_2node_roce_nccl2.30_channels_nccl_issue_2397_partial.txt")
    assert r.hosts == ("ubuntu2", "ubuntu4")
    shm = [c for c in r.connections if c.transport == "SHM"]
    assert [(c.line_no, c.conn_index, c.src_rank, c.dst_rank) for c in shm][:2] == [(5, None, 0, 1), (11, None, 0, 1)]
    assert all(c.mechanism == "direct" for c in shm)
    net = [c for c in r.connections if c.transport == "NET"]
    assert len(net) == 8 and {(c.plugin, c.net_dev, c.gdr) for c in net} == {("IB", 2, False)}
    assert r.settings == {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "162"}
    assert {(x.pxn, x.gdr) for x in r.ring_connects} == {(0, 0)}


def test_rank_device_offset_rings_and_trees():
    r = load("alibaba_pai_dsw_4gpu_p2p_cumem_rank_dev_offset_partial.txt")
    c = next(c for c in r.connections if c.line_no == 16)
    assert (c.src_rank, c.src_dev, c.dst_rank, c.dst_dev, c.mechanism, c.read) == (3, 4, 0, 1, "CUMEM", True)
    assert [(x.channel, x.nchannels, x.ranks) for x in r.rings] == [(1, 2, (0, 1, 2, 3))]
    trees = {(t.channel, t.rank): t for t in r.trees}
    assert (trees[(0, 0)].up, trees[(0, 0)].down) == (None, (1,))
    assert (trees[(0, 3)].up, trees[(0, 3)].down) == (2, ())
    assert (trees[(1, 1)].up, trees[(1, 1)].down) == (0, (2,))
    assert r.settings == {"NCCL_MIN_NCHANNELS": "2", "NCCL_MAX_NCHANNELS": "2"} and r.nranks == 4


def test_aws_ofi_log_init_lines_name_each_rank_gpu():
    r = load("aws_p4d_24xlarge_ofi_tuner_p2p_cumem_partial.txt")
    assert r.plugin == "OFI" and r.nranks == 4
    assert [(c.rank, c.cuda_dev, c.bus_id, c.line_no) for c in r.comms] == [
        (1, 1, "0000:10:1d.0", 1), (2, 2, "0000:20:1c.0", 3)]  # busId 101d0 / 201c0
    assert len(r.connections) == 12 and all(c.via == "P2P/CUMEM/read" for c in r.connections)


def test_shm_socket_and_cumem_mixed_excerpt():
    r = load("korean_eks_llama3_shm_socket_cumem_partial.txt")
    sock = [c for c in r.connections if c.transport == "NET"]
    assert [(c.line_no, c.direction, c.plugin, c.net_dev, c.gdr) for c in sock] == [
        (5, "send", "Socket", 0, False), (6, "receive", "Socket", 0, False), (7, "send", "Socket", 0, False)]
    assert r.plugin == "Socket"
    four = load("four_gpu_nv12_nv10_shm_direct_p2p_cumem_excerpt_partial.txt")
    assert [c.transport for c in four.connections] == ["SHM", "SHM", "P2P", "P2P", "P2P"]


def test_nccl_lines_inside_nccl_tests_captures():
    r = load("koordinator_k8s_cx5_vf_roce_2node_1gpu_allreduce_slow_partial.txt", FIXTURES / "nccl_tests")
    assert (r.version, r.cuda_version) == ("2.21.5", "12.4")  # the bare "NCCL version" line nccl-tests prints
    assert r.plugin == "IBext_v8" and r.plugin_path == "/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so"
    assert [(n.host, n.name, n.port, n.link_layer, n.relaxed_ordering) for n in r.nics] == [
        ("pod-vf08", "mlx5_2", 1, "RoCE", True), ("pod-vf07", "mlx5_2", 1, "RoCE", True)]
    assert r.settings == {"NCCL_SOCKET_IFNAME": "eth0"}
    assert [(c.host, c.rank, c.nranks, c.bus_id) for c in r.comms] == [("pod-vf02", 0, 2, "0000:57:00.0")]
    aws = load("aws_p4d_24xlarge_2node_efa_allreduce_doc_truncated_partial.txt", FIXTURES / "nccl_tests")
    assert aws.plugin == "OFI" and aws.version == "2.23.4"
    assert aws.settings["NCCL_TOPO_FILE"] == "/opt/amazon/ofi-nccl/share/aws-ofi-nccl/xml/p4d-24xl-topo.xml"
    assert aws.settings["NCCL_NVLS_CHUNKSIZE"] == "512KiB"


def test_synthetic_torchrun_prefixes_version_nics_rings_and_conflicting_setting():
    """synthetic_*: written for these tests ([default0]: torchrun prefixes, two hosts, NCCL 2.21)."""
    r = load("synthetic_torchrun_2node_ib_gdr_version_rings_trees.txt")
    assert (r.version, r.cuda_version, r.plugin, r.nranks, r.nnodes) == ("2.21.5", "12.4", "IB", 4, 2)
    assert r.hosts == ("gpu-n01", "gpu-n02")
    assert [(n.host, n.name) for n in r.nics] == [("gpu-n01", "mlx5_0"), ("gpu-n01", "mlx5_3"),
                                                  ("gpu-n02", "mlx5_0"), ("gpu-n02", "mlx5_3")]
    assert r.settings["NCCL_IB_HCA"] == "mlx5_0,mlx5_3" and r.settings["NCCL_IB_GID_INDEX"] == "3"
    assert any("NCCL_IB_GID_INDEX is '5'" in w for w in r.warnings)
    shared = next(c for c in r.connections if c.line_no == 23)
    assert (shared.via, shared.gdr, shared.net_dev) == ("NET/IB/0/GDRDMA/Shared", True, 0)
    assert next(c for c in r.connections if c.line_no == 24).proxy_rank == 0
    assert [(c.rank, c.bus_id) for c in r.comms] == [(0, "0000:18:00.0"), (1, "0000:3b:00.0")]
    assert r.nvls is False  # "NVLS multicast support is not available"


def test_synthetic_ray_errors_keep_their_line_numbers():
    """synthetic_*: written for these tests (Ray prefixes, ibv_modify_qp failure, watchdog timeout)."""
    r = load("synthetic_ray_ibv_modify_qp_failed_timeout.txt")
    assert (r.plugin, r.version, r.settings) == ("IBext_v8", "2.20.5", {"NCCL_IB_TIMEOUT": "14"})
    assert [(e.line_no, e.level) for e in r.errors] == [(7, "WARN"), (8, "INFO"), (9, "INFO"), (10, "WARN"),
                                                        (11, None), (12, None)]
    assert "ibv_modify_qp failed" in r.errors[0].text and r.errors[0].host == "gpu-r11"
    assert "Watchdog caught collective operation timeout" in r.errors[4].text
    assert r.connections[0].plugin == "IBext_v8" and r.connections[0].gdr is False


def test_synthetic_old_nccl_bus_ids_in_brackets_and_socket_fallback():
    """synthetic_*: NCCL 2.7-style lines (``0[1b000]``) with IB disabled."""
    r = load("synthetic_nccl2_7_busid_brackets_socket_no_ib.txt")
    assert (r.version, r.plugin) == ("2.7.8", "Socket")
    assert [(n.name, n.address) for n in r.nics] == [("eth0", "192.168.1.7"), ("eth1", "10.1.0.7")]
    c = r.connections[0]
    assert (c.src_dev, c.src_bus_id, c.dst_bus_id, c.conn_index) == (None, "0000:1b:00.0", "0000:3d:00.0", None)
    assert r.settings == {"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1"}
    assert [(e.line_no, e.text) for e in r.errors] == [(5, "NET/IB : No device found.")]
    old = load("synthetic_nccl2_4_ring_lines_direct_shared_memory.txt")
    assert [(c.transport, c.mechanism) for c in old.connections] == [("P2P", "IPC"), ("SHM", "direct")]
    assert old.plugin == "IB" and old.rings[0].ranks == (0, 1) and old.comms[0].bus_id is None


@pytest.mark.parametrize("text,line_no", [("", 0), ("\n\nnot a log\n", 3), ("NCCL is great\n", 1)])
def test_text_without_nccl_lines_is_refused(text: str, line_no: int):
    with pytest.raises(ParseError) as info:
        nccl_log.parse(text)
    assert (info.value.kind, info.value.line_no) == ("nccl_log", line_no)


def test_detects_a_log_but_not_nccl_tests_output():
    assert detect_kind((FIX / "korean_eks_llama3_shm_socket_cumem_partial.txt").read_text()) == "nccl_log"
    assert nccl_log.detect("# nThread 1 nGpus 8\n") == 0


test_fuzz_any_text_parses_or_raises_parse_error, test_fuzz_mutated_real_lines = safety_tests(
    nccl_log.parse, "nccl_log", mutated_lines(fixture_lines("nccl_log"), max_size=30), detect=nccl_log.detect)
