"""Run causes of the transport: wrong values (R06), transport errors and timeouts (T3), TCP sockets
instead of RDMA (T2), GPUDirect RDMA not used (T4), ``NCCL_IB_HCA`` leaving out NICs (T7) and too
few channels (R02). Each rule takes the run's :class:`~apps.domain.run_facts.RunFacts` and returns
its findings (see ``apps.domain.run_causes`` for the whole table)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping

from apps.domain.findings.base import hca_selected, parse_ib_hca
from apps.domain.run_facts import RunFacts, finding, multi_node, setting_lines

__all__ = ["rule_r06", "rule_t3", "rule_t2", "rule_t4", "rule_t7", "rule_r02", "usable_nics"]


_FAILURE_RE = re.compile(r"^line (\d+): .*\b(?:Test (?:NCCL |CUDA )?failure|NCCL failure)\b", re.I)
_TIMEOUT_RE = re.compile(r"timeout|timed out|ibv_poll_cq|completion .*error|error 12\b|watchdog|retry", re.I)
_NO_IB_RE = re.compile(r"NET/IB\s*:\s*No device found", re.I)


def rule_r06(facts: RunFacts) -> list[dict]:
    """Wrong values (``#wrong`` > 0, out-of-bounds values) or a failed test: the run is broken."""
    if facts.kind != "nccl_tests":
        return []
    p = facts.parsed
    bad = [r for r in p.get("rows") or [] if any((s or {}).get("wrong") for s in (r.get("out_of_place"),
                                                                                  r.get("in_place")))]
    ev = [facts.cite(r["line_no"], "#wrong > 0: the collective returned wrong data at this size", "R06")
          for r in bad[:3]]
    oob = facts.find_lines(r"Out of bounds values\s*:\s*[1-9]", limit=1) if p.get("out_of_bounds") else []
    ev += [facts.cite(n, f"nccl-tests found {p.get('out_of_bounds')} out-of-bounds values", "R06") for n in oob]
    fails = [int(m.group(1)) for w in p.get("warnings") or [] if (m := _FAILURE_RE.match(w))]
    ev += [facts.cite(n, "the test itself failed", "R06") for n in fails[:2]]
    if not ev:
        return []
    what = (f"{len(bad)} row(s) report wrong values (#wrong > 0, first at line {bad[0]['line_no']})" if bad else
            "the test reported a failure or out-of-bounds values")
    return [finding("R06", "CRIT", "Wrong values: the results are invalid",
                    f"Broken: {what}; a collective that returns wrong data is broken whatever its bandwidth.",
                    "Rerun with -c 1 (validation) on each node alone to find the GPU or host that corrupts data; "
                    "check dmesg for Xid errors and the NCCL log for WARN lines.", ev, breaks=True)]


def rule_t3(facts: RunFacts) -> list[dict]:
    """Transport errors and timeouts (``NCCL_IB_TIMEOUT``, completion errors, watchdog timeouts)."""
    log = facts.log
    if not log:
        return []
    errors = [e for e in log.get("errors") or [] if _TIMEOUT_RE.search(e.get("text") or "")]
    if not errors:
        return []
    ev = [facts.cite(e["line_no"], "the transport failed or timed out here", "T3", e.get("text", ""))
          for e in errors[:4]]
    timeout = (log.get("settings") or {}).get("NCCL_IB_TIMEOUT")
    if timeout is not None:
        ev += [facts.cite(n, f"NCCL_IB_TIMEOUT={timeout}: the IB retransmit timeout (4.096 us x 2^{timeout})", "T3")
               for n in setting_lines(facts, "NCCL_IB_TIMEOUT")]
    hosts = sorted({e.get("host") for e in errors if e.get("host")})
    return [finding("T3", "CRIT", "Transport errors and timeouts",
                    f"{len(errors)} line(s) report transport errors or timeouts"
                    + (f" (NCCL_IB_TIMEOUT={timeout})" if timeout is not None else "") +
                    ": a lossy link retransmits until NCCL gives up, and the job hangs or fails.",
                    "Fix the lossy link first (ibstat/port counters, RoCE PFC); then set NCCL_IB_TIMEOUT sensibly "
                    "(22 is a common value) and NCCL_IB_RETRY_CNT=7.", ev, hosts=hosts,
                    breaks=facts.kind == "nccl_log")]


def rule_t2(facts: RunFacts) -> list[dict]:
    """TCP sockets (or nothing) where RDMA was expected."""
    log = facts.log
    ev: list[int] = []
    hosts: set[str] = set()
    if log:
        sock = [c for c in facts.net_connections() if (c.get("plugin") or "").lower() == "socket"]
        ev += [facts.cite(c["line_no"], "this channel crosses nodes over TCP sockets, not RDMA", "T2") for c in sock[:2]]
        hosts |= {c.get("host") for c in sock}
        for n in [n for n in log.get("nics") or [] if n.get("plugin") == "Socket"][:1]:
            ev.append(facts.cite(n["line_no"], f"NCCL's network is NET/Socket on {n.get('name')}", "T2"))
        for e in [e for e in log.get("errors") or [] if _NO_IB_RE.search(e.get("text") or "")][:1]:
            ev.append(facts.cite(e["line_no"], "NCCL found no usable RDMA device on this host", "T2", e["text"]))
            hosts.add(e.get("host"))
        if (log.get("settings") or {}).get("NCCL_IB_DISABLE") == "1":
            ev += [facts.cite(n, "NCCL_IB_DISABLE=1: RDMA turned off by the environment", "T2")
                   for n in setting_lines(facts, "NCCL_IB_DISABLE")]
        if not ev and log.get("plugin") == "Socket" and multi_node(facts):
            ev += [facts.cite(n, "NCCL uses its socket transport", "T2") for n in facts.find_lines(r"NET/Socket", 1)]
    suspected = False
    if (not ev and facts.kind == "nccl_tests" and (facts.nodes or 0) > 1 and facts.efficiency is not None
            and facts.efficiency < 0.15 and not log):
        suspected = True
        ev.append(facts.cite(facts.measured.get("line"), f"{facts.measured['value']:.1f} GB/s across nodes is the "
                             "speed of TCP sockets (a few GB/s), not of RDMA", "T2"))
    if not ev:
        return []
    layout = []
    usable: list[str] = []
    for h in facts.known():
        doc = facts.doc(h["host"])
        net = doc.get("network") or {}
        if net.get("state") == "all_down":
            layout += facts.layout_findings(h["host"], ("F01", "H04"))
        prefix = f"{h['host']}:" if len(facts.known()) > 1 else ""
        usable += [f"{prefix}{n}" for n in net.get("usable") or []]
    where = (f" The layouts have {len(usable)} usable RDMA port(s) ({', '.join(usable[:4])}"
             f"{', ...' if len(usable) > 4 else ''}) that NCCL did not use." if usable else
             " The layouts report no usable RDMA port: bring the ports up (H04)." if layout else "")
    title = "TCP sockets suspected instead of RDMA" if suspected else "TCP sockets instead of RDMA"
    message = ("The figure is what TCP sockets give across nodes; send the NCCL_DEBUG=INFO log to confirm."
               if suspected else "NCCL moves inter-node data over TCP sockets: more GPUs train slower than one.")
    return [finding("T2", "CRIT" if multi_node(facts) else "MED", title, message + where,
                    "Enable RDMA (NCCL_IB_DISABLE=0, the RDMA plugin and libibverbs in the container), bring the "
                    "ports up, give NCCL_IB_HCA the exact HCA list; check NCCL_DEBUG=INFO says NET/IB afterwards.",
                    ev, hosts=sorted(h for h in hosts if h), layout=layout)]


def rule_t4(facts: RunFacts) -> list[dict]:
    """NET connections without GPUDirect RDMA, tied to why: the peer-memory module, or the NIC's place."""
    log = facts.log
    conns = [c for c in facts.net_connections() if c.get("gdr") is False and (c.get("plugin") or "").lower() != "socket"]
    if not conns:
        return []
    out = []
    by_host: dict[str | None, list[dict]] = defaultdict(list)
    for c in conns:
        by_host[c.get("host")].append(c)
    for host, rows in by_host.items():
        doc = facts.doc(host)
        gpus = {facts.gpu_of(host, c.get("device")) for c in rows} - {None}
        cells = {e.get("gpu"): e for e in doc.get("gpu_nic") or []}
        possible = sorted(g for g in gpus if (cells.get(g) or {}).get("gdr"))
        far = sorted(g for g in gpus if g in cells and not cells[g].get("gdr"))
        ev = [facts.cite(c["line_no"], "a NET connection without GDRDMA: data is staged in host memory", "T4")
              for c in rows[:2]]
        off = [r for r in log.get("ring_connects") or [] if r.get("host") == host and r.get("gdr") == 0][:1]
        ev += [facts.cite(r["line_no"], "NCCL reports GPUDirect RDMA off for its rings (GDR 0)", "T4") for r in off]
        module = (doc.get("graph") or {}).get("gdr_module")
        if possible:
            cause = ("the peer-memory module is missing (nvidia_peermem / DMA-BUF, G02)" if module is False else
                     "the layout allows it, so the peer-memory module (nvidia_peermem or DMA-BUF) is the likely "
                     "cause, or NCCL_NET_GDR_LEVEL / NCCL_NET_GDR_READ turn it off")
            out.append(finding("T4", "HIGH", "GPUDirect RDMA possible but not used",
                               f"{host or 'A host'}: {', '.join(possible)} could use GPUDirect RDMA to their NIC, but "
                               f"NCCL's connections run without it: {cause}.",
                               "Load nvidia_peermem (modprobe nvidia-peermem, and at boot) or use DMA-BUF (open GPU "
                               "kernel modules, kernel >= 5.12); check the log says GDRDMA afterwards.", ev,
                               hosts=[host], layout=facts.layout_findings(host, ("G02", "H01"))))
        elif far or not doc:
            out.append(finding("T4", "MED", "GPUDirect RDMA off: data staged in host memory",
                               f"{host or 'A host'}: NCCL's network traffic goes through host memory"
                               + (f"; the layout puts the NIC too far from {', '.join(far)} for GPUDirect RDMA "
                                   "(G01), so this is what the layout gives" if far else "") + ".",
                               "Put the NIC on the GPU's PCIe switch; with NVLink rely on PXN; high CPU and idle "
                               "GPUs come from this staging (T4).", ev, hosts=[host],
                               layout=facts.layout_findings(host, ("G01", "H02"))))
    return out


def usable_nics(doc: Mapping) -> list[dict]:
    usable = set((doc.get("network") or {}).get("usable") or [])
    return [n for n in doc.get("nics") or [] if n.get("compute") and (n.get("name") in usable or not usable)
            and n.get("active") is not False]


def rule_t7(facts: RunFacts) -> list[dict]:
    """``NCCL_IB_HCA`` leaving out NICs the layout has, or every connection of a host on one NIC."""
    log = facts.log
    out = []
    value = ((log or {}).get("settings") or {}).get("NCCL_IB_HCA")
    if value:
        mode, entries = parse_ib_hca(value)
        for h in facts.known():
            nics = usable_nics(facts.doc(h["host"]))
            left = [n["name"] for n in nics if not hca_selected(n["name"], n.get("port"), mode, entries)]
            if left and nics:
                ev = [facts.cite(n, f"NCCL_IB_HCA={value} selects {len(nics) - len(left)} of the {len(nics)} usable "
                                 "HCAs", "T7") for n in setting_lines(facts, "NCCL_IB_HCA")]
                out.append(finding("T7", "HIGH", "NCCL_IB_HCA leaves out NICs",
                                   f"{h['host']}: NCCL_IB_HCA={value} leaves out {', '.join(left)}; the node's "
                                   "inter-node bandwidth shrinks to the NICs it names.",
                                   "Give the exact list with a leading '=' (the host page's NCCL settings), or leave "
                                   "NCCL_IB_HCA unset and let NCCL choose (F07).", ev, hosts=[h["host"]],
                                   layout=facts.layout_findings(h["host"], ("F07",))))
    by_host: dict[str | None, set] = defaultdict(set)
    senders: dict[str | None, set] = defaultdict(set)
    lines: dict[str | None, list[int]] = defaultdict(list)
    for c in facts.net_connections():
        if c.get("net_dev") is not None and (c.get("plugin") or "").lower() != "socket":
            by_host[c.get("host")].add(c["net_dev"])
            senders[c.get("host")].add(c.get("device"))
            lines[c.get("host")].append(c["line_no"])
    for host, devs in by_host.items():
        nics = usable_nics(facts.doc(host))
        # one GPU's connections on one NIC is NCCL's normal choice; several GPUs' are not
        if len(devs) == 1 and len(nics) >= 2 and len(senders[host] - {None}) >= 2 and not out:
            pcie_only = facts.layout_findings(host, ("P11",))
            ev = [facts.cite(n, f"NET device {next(iter(devs))} again: every NET connection of {host} uses one NIC",
                             "T7") for n in lines[host][:2]]
            out.append(finding("T7", "LOW" if pcie_only else "HIGH", "One NIC carries every connection",
                               f"{host}: all {len(lines[host])} NET connections use NET device {next(iter(devs))} while "
                               f"the layout has {len(nics)} usable NICs ({', '.join(n['name'] for n in nics[:4])})" +
                               ("; on this PCIe-only node NCCL aggregates NICs only through NVLink (P11), so one "
                                 "NIC per ring is what the layout gives" if pcie_only else
                                 "; the others stay idle (half the expected inter-node bandwidth)") + ".",
                               "Check NCCL_IB_HCA and NCCL_CROSS_NIC; with one GPU per NIC, run one rank per GPU so "
                               "each GPU uses its own NIC (F07/F08).", ev, hosts=[host], layout=pcie_only))
    return out


def rule_r02(facts: RunFacts) -> list[dict]:
    """Fewer channels than the layout's NICs need: ``NCCL_MAX_NCHANNELS`` set low, or channels seen."""
    log = facts.log
    if not log:
        return []
    settings = log.get("settings") or {}
    ev: list[int] = []
    limit = None
    for name in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_NRINGS", "NCCL_NCHANNELS_PER_NET_PEER"):
        if str(settings.get(name, "")).isdigit():
            limit = min(limit or 10 ** 6, int(settings[name]))
            ev += [facts.cite(n, f"{name}={settings[name]} caps the channels NCCL opens", "R02")
                   for n in setting_lines(facts, name)]
    nics = max((len(usable_nics(facts.doc(h["host"]))) for h in facts.known()), default=0)
    nvlink = any((facts.doc(h["host"]).get("summary") or {}).get("nvlink") for h in facts.known())
    need = max(2 * nics, 8 if nvlink else 2)
    if limit is not None and limit < need:
        return [finding("R02", "HIGH", "Fewer channels than the layout allows",
                        f"NCCL is held to {limit} channel(s); this layout needs at least {need} (two per NIC"
                        + (", and NVLink boards use many more" if nvlink else "") + ").",
                        "Remove NCCL_MAX_NCHANNELS / NCCL_MIN_NCHANNELS (tuning leftovers) and measure again.", ev)]
    net = facts.net_connections()
    channels = {c.get("channel") for c in net}
    senders = {(c.get("host"), c.get("device")) for c in net}
    if net and nics and len(channels) < nics and len(senders) >= 2 and multi_node(facts):
        ev = [facts.cite(c["line_no"], f"only channels {', '.join(str(x) for x in sorted(channels))} cross the "
                         "network", "R02") for c in net[:1]]
        return [finding("R02", "MED", "Fewer channels than the layout's NICs",
                        f"{len(channels)} network channel(s) for {nics} usable NICs per node: some NICs carry no "
                        "channel.", "Check NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS and NCCL_IB_HCA; NCCL opens two "
                        "channels per NIC by default.", ev)]
    return []
