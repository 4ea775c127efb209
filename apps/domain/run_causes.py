"""Why a run is below its layout: the symptom -> cause -> evidence -> fix rows of domain.md section 7
(T1-T10) and the run rules topoweb adds (R01-R07), each quoting the lines of the run that show it and
tying them to the layouts' own findings.

``diagnose(facts) -> (evidence, findings)`` is called by ``apps.domain.runs.check_run`` with the
run's ``RunFacts`` (``apps.domain.run_facts``: measured, expected, hosts and layouts, and the
hosts' own report sections). ``evidence`` items are ``{"line", "text", "means", "cause", "file"}``
(``line`` 1-based in the text as sent, ``text`` that line verbatim when the text is at hand; for a
line of a host's report, ``file`` names the report and its section); each finding lists the
indexes of its evidence.

The rules live by stage: the transport (``run_causes_transport``: R06, T3, T2, T4, T7, R02), inside
a host (``run_causes_gpu``: T5, R03), one link (``run_causes_link``: T1/R01, R04, T8), across hosts
and sizes (``run_causes_hosts``: T9/R07, T10, T6, R05) and the hosts' counters
(``run_node.rule_node_counters``: T1, T10). The same shape across runs (T10/T6 from several runs)
is ``apps.domain.run_fleet``, applied where stored runs are at hand.

=====  ==========================================================================================
T1     perftest on a RoCE port under 90 % of its line rate: packet loss (PFC/ECN), the switch's QoS;
       a collective below its layout whose hosts' RoCE ports counted discards, pause storms or
       retransmissions (ethtool -S, ib_counters; F06)
T2     TCP sockets instead of RDMA (``NET/Socket``, ``NET/IB : No device found``, ``NCCL_IB_DISABLE=1``)
T3     transport errors and timeouts (``NCCL_IB_TIMEOUT``, completion errors, watchdog timeouts)
T4     GPUDirect RDMA not used: NET connections without ``GDRDMA`` (peer-memory module, NIC too far)
T5     P2P only between some GPU pairs (a P2P test's slow pairs, SHM next to P2P in one host)
T6     results that move between sizes or runs (background traffic, congestion)
T7     ``NCCL_IB_HCA`` leaving out NICs, or every connection on one NIC
T8     RoCE GID index / routing (``GID index`` 0 or 1, ``ibv_modify_qp`` failures, indexes differing,
       the host's show_gids without a RoCE v2 IPv4 GID where the run needs one; F05)
T9     a 2-node all-reduce above the NIC sum: tree / NVLS-tree algorithms move less data per node
T10    one host's layout slower than the others' (its findings: x8 links, ports at lower rates...),
       or link error counters on one host's ports (ib_counters, ethtool -S; F09)
R01    perftest on InfiniBand under 90 % of the line rate (cable, PCIe width, NUMA; the port's error
       counters in the host's report, F09)
R02    fewer channels than the layout's NICs need (``NCCL_MAX_NCHANNELS``, channels seen)
R03    GeForce GPUs: the driver disables P2P, NCCL copies through host memory (SHM)
R04    ``--use_cuda`` slower than host memory: the GPU -> NIC path crosses the CPU
R05    mixed NCCL versions (nccl-tests built against other headers, hosts on different versions)
R06    wrong values or a failed test: the results are invalid (breaks the run)
R07    above the model on other node counts: NVLS / CollNet (SHARP), or the layout is not as reported
=====  ==========================================================================================
"""

from __future__ import annotations

from typing import Callable

from apps.domain.run_causes_gpu import rule_r03, rule_t5
from apps.domain.run_causes_hosts import rule_r05, rule_t6, rule_t9_r07, rule_t10
from apps.domain.run_causes_link import rule_r04, rule_t1_r01, rule_t8
from apps.domain.run_causes_transport import rule_r02, rule_r06, rule_t2, rule_t3, rule_t4, rule_t7
from apps.domain.run_facts import SEVERITY_ORDER, RunFacts, size_text
from apps.domain.run_node import rule_node_counters

__all__ = ["RunFacts", "diagnose", "size_text", "RULES", "confirm_transport"]


RULES: tuple[Callable[[RunFacts], list[dict]], ...] = (
    rule_r06, rule_t3, rule_t2, rule_t4, rule_t7, rule_r02, rule_t10, rule_t1_r01, rule_r04, rule_t8, rule_t5,
    rule_r03, rule_t6, rule_r05, rule_t9_r07, rule_node_counters,
)


def confirm_transport(facts: RunFacts) -> None:
    """Evidence that a log's connections use what they should (cause ``ok``): the network NCCL
    chose and a NET connection with GPUDirect RDMA; quoted when no rule found anything wrong."""
    log = facts.log
    if not log:
        return
    for n in [n for n in log.get("nics") or [] if n.get("plugin") == "IB"][:1]:
        facts.cite(n["line_no"], f"NCCL uses RDMA (NET/IB) on {n.get('name')}", "ok")
    for c in [c for c in facts.net_connections() if c.get("gdr")][:1]:
        facts.cite(c["line_no"], "a NET connection with GPUDirect RDMA (GDRDMA): GPU memory straight to the NIC", "ok")
    for c in [c for c in log.get("connections") or [] if c.get("transport") in ("P2P", "NVLS")][:1]:
        facts.cite(c["line_no"], f"GPUs of one host connect peer-to-peer ({c.get('via')})", "ok")


def diagnose(facts: RunFacts) -> tuple[list[dict], list[dict]]:
    """(evidence, findings) of one run: every rule of ``RULES``, findings most severe first; a log
    in which nothing is wrong gets the lines that show it (``confirm_transport``)."""
    findings: list[dict] = []
    for rule in RULES:
        findings.extend(rule(facts))
    findings.sort(key=lambda f: (not f["breaks"], SEVERITY_ORDER[f["severity"]]))
    if not any(f["severity"] in ("CRIT", "HIGH") for f in findings):
        confirm_transport(facts)
    return facts.evidence, findings
