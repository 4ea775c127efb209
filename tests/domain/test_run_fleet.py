"""The same shape on several host sets (apps/domain/run_fleet.py), over the results of real captures.

The figures are real (nccl-tests #309: 466.73 GB/s at 8 GiB on 2 H100 nodes, line 37; the k8s MPIJob: 196.52 GB/s
at 8 GiB on 2 H100 nodes, line 28; both all_reduce, 2 nodes x 8 GPUs); which hosts each run is given here is
SYNTHETIC, to build the host sets a cluster would have."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from apps.domain.run_fleet import add_fleet_findings, fleet_findings, run_summary
from apps.domain.runs import check_run, read_run

FIX = Path(__file__).resolve().parents[1] / "fixtures"
FAST = "nccl_tests/h100_ib400_2of8node_allreduce_default_466gbs_nccl_tests_issue_309.txt"
SLOW = "nccl_tests/k8s_mpijob_h100_2node_allreduce_512m_8g_196gbs.txt"
FOUR_NODES = "nccl_tests/h100_ib400_4of8node_allreduce_default_325gbs_nccl_tests_issue_309.txt"


@lru_cache(maxsize=None)
def result(rel: str) -> dict:
    text = (FIX / rel).read_text()
    kind, parsed = read_run(text)
    return check_run(kind, parsed, {}, raw_lines=text.split("\n"), name=Path(rel).name)


def summary(run_id: int, rel: str, hosts: list[str]) -> dict:
    return run_summary(run_id, result(rel), hosts, name=f"run{run_id}.txt")


def test_one_host_in_every_slow_run_and_no_fast_one_is_t10_quoting_each_runs_line():
    current = summary(3, SLOW, ["node-c", "node-d"])
    others = [summary(1, FAST, ["node-a", "node-b"]), summary(2, SLOW, ["node-b", "node-c"]),
              summary(4, FOUR_NODES, ["node-a", "node-c", "node-e", "node-f"])]  # another shape: ignored
    evidence, findings = fleet_findings(current, others)
    (t10,) = findings
    assert (t10["rule"], t10["severity"], t10["hosts"]) == ("T10", "HIGH", ["node-c"])
    assert "2 run(s) of all_reduce on 2 node(s) x 8 GPUs" in t10["message"]
    assert [(e["run"], e["line"]) for e in evidence] == [(3, 28), (2, 28), (1, 37)]
    assert evidence[0]["text"].startswith("8589934592") and "196.52" in evidence[0]["text"]
    assert "42% of the best run" in evidence[0]["means"] and evidence[2]["means"].endswith("fast, without node-c")


def test_slow_and_fast_runs_without_a_common_host_are_t6():
    current = summary(3, SLOW, ["node-c", "node-d"])
    _, findings = fleet_findings(current, [summary(1, FAST, ["node-a", "node-b"]), summary(2, SLOW, ["node-e", "node-f"])])
    assert [(f["rule"], f["severity"]) for f in findings] == [("T6", "MED")]
    assert "from 196.5 to 466.7 GB/s" in findings[0]["message"]


def test_a_fast_run_or_one_host_set_gives_nothing():
    assert fleet_findings(summary(1, FAST, ["a", "b"]), [summary(2, SLOW, ["b", "c"])]) == ([], [])
    assert fleet_findings(summary(1, SLOW, ["a", "b"]), [summary(2, FAST, ["a", "b"])]) == ([], [])


def test_added_to_a_result_the_reason_names_the_host_and_indexes_shift():
    base = result(SLOW)
    assert "nothing in the output says why" not in base["reason"]  # no layout: not comparable
    r = {**base, "reason": "196.5 GB/s ...: broken; nothing in the output says why (send the NCCL_DEBUG=INFO log).",
         "evidence": list(base["evidence"]), "findings": list(base["findings"])}
    own = len(r["evidence"])
    out = add_fleet_findings(r, summary(3, SLOW, ["node-c"]), [summary(1, FAST, ["node-a"]), summary(2, SLOW, ["node-c"])])
    t10 = next(f for f in out["findings"] if f.get("fleet"))
    assert t10["evidence"] == [own, own + 1, own + 2] and out["evidence"][own]["run"] == 3
    assert out["reason"].endswith("most likely node-c, in every slow run of this test (T10).")
