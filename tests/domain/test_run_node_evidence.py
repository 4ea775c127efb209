"""Causes that quote the hosts' own report sections (apps/domain/run_node.py): ethtool -S, ib_counters and
show_gids lines, with their source, tied to the layout's F05/F06/F09.

The runs and show_gids are real captures; the ethtool_stats and ib_counters sections are the synthetic fixtures
(no real capture exists, see their SOURCES files). Pairing a run with a host's report is SYNTHETIC throughout:
the run was not made on that host. Line numbers and counter values were read off the fixture files by eye."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from apps.domain.analysis import analyze_host
from apps.domain.runs import check_run, read_run, run_hosts

FIX = Path(__file__).resolve().parents[1] / "fixtures"
ETHTOOL = (FIX / "ethtool_stats" / "synthetic_h100_roce_mlx5_0_pfc_pause_storm_mlx5_2_discards_no_pfc.txt").read_text()
IB_COUNTERS = (FIX / "ib_counters" / "synthetic_h100_8x_cx7_ndr_mlx5_5_link_errors.txt").read_text()
SHOW_GIDS = (FIX / "show_gids" / "cx4lx_4ports_eth01-04_one_down_no_ipv4_12gids.txt").read_text()
ROCE_IBSTAT = "ibstat/gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt"
KOORD = "perftest/koordinator_k8s_cx5_vf_mlx5_2_roce_ib_write_bw_mbsec_md_indent.txt"  # mlx5_2, 23.1 Gb/s
K8S_196 = "nccl_tests/k8s_mpijob_h100_2node_allreduce_512m_8g_196gbs.txt"  # 196.52 GB/s at 8 GiB, line 28


@lru_cache(maxsize=None)
def layout(hostname: str, **files: str) -> dict:
    return analyze_host({kind: (FIX / rel).read_text() for kind, rel in files.items()}, hostname).to_dict()


def check(rel: str, docs: dict, host_sections: dict, text: str | None = None) -> dict:
    text = (FIX / rel).read_text() if text is None else text
    kind, parsed = read_run(text)
    return check_run(kind, parsed, docs, raw_lines=text.split("\n"), name=Path(rel).name, host_sections=host_sections)


def cause(result: dict, rule: str) -> dict:
    return next(f for f in result["findings"] if f["rule"] == rule)


def evidence(result: dict, rule: str) -> list[dict]:
    return [result["evidence"][i] for i in cause(result, rule)["evidence"]]


def test_roce_perftest_quotes_the_discards_of_its_port_from_the_hosts_ethtool_report():
    roce = layout("roce", ibstat=ROCE_IBSTAT)
    r = check(KOORD, {"roce-01": roce}, {"roce-01": [{"source": "roce-01 report 2025-03-01 00:00",
                                                     "sections": {"ethtool_stats": ETHTOOL}}]})
    t1 = evidence(r, "T1")
    assert t1[0]["line"] == 24 and t1[0]["file"] == Path(KOORD).name  # the run's own line first
    node = [e for e in t1 if e["file"] == "roce-01 report 2025-03-01 00:00: ethtool_stats"]
    assert [(e["line"], e["text"]) for e in node] == [(247, "rx_discards_phy: 18233"), (218, "rx_out_of_buffer: 77"),
                                                      (248, "tx_discards_phy: 3")]
    assert "one report" in node[0]["means"] and "ens110np0, mlx5_2" in node[0]["means"]
    assert "rx_discards_phy 18233 (ens110np0, mlx5_2)" in cause(r, "T1")["message"]
    assert not any(e["line"] == 45 for e in node)  # mlx5_0's discards: not the port the perftest used


def test_a_later_report_shows_which_counters_rose_across_the_run():
    roce = layout("roce", ibstat=ROCE_IBSTAT)
    after = ETHTOOL.replace("rx_discards_phy: 18233", "rx_discards_phy: 20055")  # SYNTHETIC later report
    r = check(KOORD, {"roce-01": roce}, {"roce-01": [{"source": "roce-01 report #1", "sections": {"ethtool_stats": ETHTOOL}},
                                                     {"source": "roce-01 report #2", "sections": {"ethtool_stats": after}}]})
    node = [e for e in evidence(r, "T1") if e["file"].startswith("roce-01 report")]
    assert [(e["file"], e["line"], e["text"]) for e in node] == [
        ("roce-01 report #2: ethtool_stats", 247, "rx_discards_phy: 20055")]  # the unchanged ones are not quoted
    assert node[0]["means"].startswith("rx_discards_phy rose by 1822 (18233 -> 20055) since roce-01 report #1")


def test_a_slow_collective_quotes_link_errors_of_one_hosts_ports_and_ties_f09():
    """196.52 GB/s on 2 H100 nodes (44 % of the layout, no cause in the output); worker-1's report has
    mlx5_5 with link_downed 3, link_error_recovery 12, symbol_error 48213 and mlx5_6 with symbol_error 7."""
    names = [h["host"] for h in run_hosts("nccl_tests", read_run((FIX / K8S_196).read_text())[1])]
    files = dict(nvidia_smi_topo="nvidia_smi_topo/mooncake_issue_8xnv18_12nic_cpuset_list.txt",
                 ibstat="ibstat/mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt")
    docs = {names[0]: layout(names[0], **files),
            names[1]: layout(names[1], **files, ib_counters="ib_counters/synthetic_h100_8x_cx7_ndr_mlx5_5_link_errors.txt")}
    r = check(K8S_196, docs, {names[1]: [{"source": f"{names[1]} report", "sections": {"ib_counters": IB_COUNTERS}}]})
    t10 = next(f for f in r["findings"] if f["title"] == f"Link errors on {names[1]}")
    quoted = [r["evidence"][i] for i in t10["evidence"]]
    assert [(e["line"], e["text"]) for e in quoted] == [(153, "port 1 counter symbol_error 48213"),
                                                        (138, "port 1 counter link_error_recovery 12"),
                                                        (196, "port 1 counter symbol_error 7"),
                                                        (137, "port 1 counter link_downed 3")]
    assert t10["severity"] == "MED" and t10["hosts"] == [names[1]]  # one report: not shown rising
    assert {(x["rule"], x["severity"]) for x in t10["layout"]} == {("F09", "HIGH"), ("F09", "LOW")}
    assert r["verdict"] == "broken" and r["reason"].endswith(f"most likely link errors on {names[1]} (T10).")


def test_show_gids_without_a_roce_v2_gid_on_the_port_nccl_used_is_t8_with_f05():
    """The Ray log's host uses mlx5_2 (RoCE) and fails ibv_modify_qp; its show_gids is the real CX-4 Lx table with
    mlx5_2's IPv4 GIDs (index 2, 3) removed (SYNTHETIC), leaving the two link-local rows at lines 9 and 10."""
    gids = "".join(ln for ln in SHOW_GIDS.splitlines(keepends=True)
                   if not (ln.startswith("mlx5_2\t") and "192.20.28.1" in ln))
    doc = analyze_host({"show_gids": gids, "sysfs_ib": _sysfs_ib_roce("mlx5_2")}, "gpu-r11").to_dict()
    assert any(f["rule"] == "F05" and "mlx5_2" in f["devices"] for f in doc["findings"])
    r = check("nccl_log/synthetic_ray_ibv_modify_qp_failed_timeout.txt", {"gpu-r11": doc},
              {"gpu-r11": [{"source": "gpu-r11 report", "sections": {"show_gids": gids}}]})
    t8 = cause(r, "T8")
    node = [e for e in evidence(r, "T8") if e["file"] == "gpu-r11 report: show_gids"]
    assert [e["line"] for e in node] == [9, 10] and node[0]["text"].startswith("mlx5_2\t1\t0\tfe80:")
    assert "no RoCE v2 IPv4 GID" in node[0]["means"] and "NCCL_IB_GID_INDEX unset" in node[0]["means"]
    assert t8["severity"] == "HIGH" and t8["hosts"] == ["gpu-r11"]  # the log's failure and the host's GIDs agree
    assert [x["rule"] for x in t8["layout"]] == ["F05"]


def test_healthy_runs_and_unreadable_sections_quote_nothing_from_the_host():
    roce = layout("roce", ibstat=ROCE_IBSTAT)
    r = check("perftest/roce100_mlx5_1_dc_transport_ib_write_bw_client_sweep_2b_8mb.txt", {"roce-01": roce},
              {"roce-01": [{"source": "roce-01 report", "sections": {"ethtool_stats": ETHTOOL, "show_gids": "DEV x\n"}}]})
    assert r["verdict"] == "healthy" and not any("report" in (e["file"] or "") for e in r["evidence"])
    assert any(w.startswith("roce-01 report: show_gids could not be read (line 1:") for w in r["warnings"])


def _sysfs_ib_roce(ca: str) -> str:
    """SYNTHETIC sysfs_ib listing: one Active RoCE port (link layer Ethernet), so F05 judges its GIDs."""
    return (f"# topoweb sysfs_ib v1\nca {ca}\nport 1 state 4: ACTIVE\nport 1 phys_state 5: LinkUp\n"
            "port 1 rate 25 Gb/sec (1X EDR)\nport 1 link_layer Ethernet\nend\n")


def test_a_pasted_ethtool_output_is_tied_to_its_rdma_device_through_show_gids():
    """SYNTHETIC: mlx5_2's block of the ethtool fixture pasted after '$ ethtool -S eth03'; the real CX-4 Lx show_gids
    says eth03 is mlx5_2's netdev, the port koordinator's perftest used."""
    lines = ETHTOOL.splitlines()
    start = lines.index("interface ens110np0 ca mlx5_2 port 1")
    block = lines[start + 1:next(i for i, ln in enumerate(lines) if ln.startswith("unavailable "))]
    pasted = "$ ethtool -S eth03\n" + "\n".join(block) + "\n"
    roce = layout("roce", ibstat=ROCE_IBSTAT)
    r = check(KOORD, {"roce-01": roce}, {"roce-01": [{"source": "roce-01 report",
                                                     "sections": {"ethtool_stats": pasted, "show_gids": SHOW_GIDS}}]})
    node = [e for e in evidence(r, "T1") if e["file"] == "roce-01 report: ethtool_stats"]
    assert node[0]["text"] == "rx_discards_phy: 18233" and node[0]["line"] == 247 - start
    assert "eth03, mlx5_2" in node[0]["means"]
