"""Measured against expected: a run (nccl-tests, an NCCL log, perftest, a P2P test) checked against the
layouts of the hosts it touched, with a verdict and the evidence that explains the gap.

A **run** is what people measure when they validate a cluster (domain.md section 7): ``ib_write_bw``
between two nodes, ``all_reduce_perf`` across nodes, the ``NCCL_DEBUG=INFO`` log of a slow job.
Its parsers are the ``run`` family of ``apps.domain.parsers``. This module reads the parser's
result (``to_jsonable`` form, as stored), works out what the hardware should give from the
snapshot documents (``apps/domain/analysis.py``) of the hosts it ran on, and says how far apart
they are and why.

``read_run(text, kind=None) -> (kind, parsed)``
    detect (family ``run``) and parse; raises ``ParseError`` (``FILE:LINE: reason``) or
    ``UnknownKindError``.
``run_hosts(kind, parsed) -> [{"host", "gpus", "nics"}]``
    the hosts the run names, with the GPUs (rank, CUDA device, bus id) and NICs it used there;
    ``host`` is None when the output names none (perftest, P2P tests, table-only nccl-tests):
    the caller then says which host it ran on.
``check_run(kind, parsed, docs_by_host, *, raw_lines=None, name=None, baseline=None) -> dict``
    ``docs_by_host`` maps the run's host names (or the hosts the caller gave) to snapshot
    documents; hosts it leaves out, or maps to None, are unknown to topoweb. ``raw_lines`` (the text as sent, split
    in lines) lets evidence quote each line verbatim and lets an nccl-tests output's interleaved
    NCCL log lines be read too. ``baseline``: the result of a host-memory perftest on the same
    NIC, for a ``--use_cuda`` run (R04).

Result (the ``manage.py check_run --format json`` document; bandwidths GB/s per direction, perftest
line rates Gb/s, as the tools print them)::

    {"schema": 1, "kind": str, "name": str|null,
     "measured": {"value": float, "unit": "GB/s"|"Gb/s", "metric": "busbw"|"bw_average"|"p2p_copy",
                  "size_bytes": int|null, "line": int|null, "what": str, ...kind-specific keys}|null,
     "expected": {"value": float|null, "unit", "size_bytes", "plateau": float|null, "limit": str,
                  "host": the run's host whose layout bounds the run|null, "layout_host": that layout's
                  hostname|null, "assumed": bool,
                  "notes": [str], ...}|null,             # null: nothing to compare with
     "efficiency": measured / expected at the same message size|null,
     "verdict": "healthy"|"below_expected"|"broken"|"not_comparable",
     "reason": one sentence (the run page's headline),
     "evidence": [{"line": int|null, "text": str, "means": str, "cause": rule id, "file": str|null}],
     "findings": [{"rule", "severity", "title", "message", "fix", "hosts": [..],
                   "layout": [{"host", "rule", "severity", "title"}],   # the layouts' findings it ties to
                   "evidence": [indexes into evidence]}],
     "points": [{"size_bytes", "measured_busbw_gbs", "expected_busbw_gbs", "measured_in_place_busbw_gbs",
                 "line"}],                               # nccl-tests and perftest (GB/s); p2p: []
     "pairs": [{"a", "b", "measured_gbs", "expected_gbs", "efficiency", "line"}],   # P2P tests
     "hosts": [{"host", "known": bool, "layout_host": str|null, "gpus": [{"rank", "device", "bdf",
                "gpu"}], "nics": [str], "expected_gbs": float|null, "limit": str|null}],
     "slow_pair": {"src": "host/GPU3", "dst": "host2/GPU3", "why": str}|null,
     "warnings": [str]}                                  # the parser's, then the check's

Verdicts: ``broken`` for wrong values, failed tests and errors, or below 50 % of expected;
``not_comparable`` (``reason`` says which) for one rank, processes that each ran alone (every
"Using devices" line ``Rank 0`` with ``nGpus 1``: nccl-tests built without MPI), hosts topoweb does
not know, a layout that cannot give a figure, or sizes that never leave the latency regime;
else ``healthy`` at or above 85 % of expected at large messages (perftest: 90 % of the line rate,
the field guide's bar) and ``below_expected`` between. The diagnoses are ``apps.domain.run_causes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apps.domain import bandwidth
from apps.domain.estimate import curve, estimate
from apps.domain.parsers import ALL_KINDS, detect_kind, kinds_of, to_jsonable
from apps.domain.run_causes import RunFacts, diagnose, size_text

__all__ = ["RUN_KINDS", "read_run", "run_hosts", "check_run", "layout_for_gpus", "HEALTHY_AT", "BROKEN_BELOW",
           "PERFTEST_HEALTHY_AT", "VERDICTS"]

RUN_KINDS = tuple(kinds_of("run"))
VERDICTS = ("healthy", "below_expected", "broken", "not_comparable")
HEALTHY_AT = 0.85  # of expected at large messages (the bar; ETA already in the estimate)
PERFTEST_HEALTHY_AT = 0.90  # of the line rate: RDMA write reaches ~95 % (domain.md 7, T1 below 90 %)
BROKEN_BELOW = 0.50
LATENCY_BOUND = 0.70  # the largest size's expected busbw under 70 % of the plateau: still latency-bound
GIB = 1 << 30
PLATEAU_SIZE = 16 * GIB  # where the expected curve stands for "large messages"
SCHEMA = 1


# --------------------------------------------------------------------------------------------- reading


def read_run(text: str, kind: str | None = None) -> tuple[str, dict]:
    """``(kind, parsed)`` of a run's text: ``kind`` detected among the run kinds when not given,
    ``parsed`` the parser's result as plain JSON data. Raises ``UnknownKindError`` (not a run, or a
    kind outside the run family) or ``ParseError`` naming the line."""
    from apps.domain.errors import UnknownKindError

    if kind in (None, "", "auto"):
        kind = detect_kind(text, family="run")
    if kind not in RUN_KINDS:
        raise UnknownKindError(f"{kind!r} is not a run kind; run kinds: {', '.join(RUN_KINDS)}")
    return kind, to_jsonable(ALL_KINDS[kind].parse(text))


def _gpu_entry(rank: Any, device: Any, bdf: Any, bus_id: Any = None, pci_bus: Any = None, model: Any = None) -> dict:
    return {"rank": rank, "device": device, "bdf": bdf, "bus_id": bus_id, "pci_bus": pci_bus, "model": model}


def run_hosts(kind: str, parsed: Mapping) -> list[dict]:
    """The hosts a run names and what it used on each: ``[{"host": name|None, "gpus": [{"rank",
    "device", "bdf", "bus_id", "pci_bus", "model"}], "nics": [names]}]`` in order of appearance.
    One entry with ``host`` None when the output names no host (perftest, P2P tests, nccl-tests
    printed without the "Using devices" list)."""
    if kind == "nccl_tests":
        return _nccl_tests_hosts(parsed)
    if kind == "nccl_log":
        return _nccl_log_hosts(parsed)
    if kind == "perftest":
        gpu = parsed.get("gpu") or {}
        gpus = [_gpu_entry(None, gpu.get("index"), gpu.get("bdf"), gpu.get("pci"), None, gpu.get("name"))] \
            if parsed.get("cuda") else []
        return [{"host": None, "gpus": gpus, "nics": [parsed["device"]] if parsed.get("device") else []}]
    if kind == "p2p_bandwidth":
        return [{"host": None, "nics": [], "gpus": [_gpu_entry(None, d.get("index"), d.get("bdf"), d.get("bus_id"),
                                                               None, d.get("name"))
                                                    for d in parsed.get("devices") or []]}]
    return [{"host": None, "gpus": [], "nics": []}]


def _nccl_tests_hosts(parsed: Mapping) -> list[dict]:
    hosts: dict[str, dict] = {}
    for r in parsed.get("ranks") or []:
        entry = hosts.setdefault(r["host"], {"host": r["host"], "gpus": [], "nics": []})
        entry["gpus"].append(_gpu_entry(r["rank"], r["device"], r.get("bdf"), r.get("bus_id"), r.get("pci_bus"),
                                        r.get("model")))
    return list(hosts.values()) or [{"host": None, "gpus": [], "nics": []}]


def _nccl_log_hosts(parsed: Mapping) -> list[dict]:
    hosts: dict[str, dict] = {h: {"host": h, "gpus": [], "nics": []} for h in parsed.get("hosts") or [] if h}
    seen: set[tuple] = set()
    for c in parsed.get("comms") or []:
        if c.get("host") in hosts and (c["host"], c.get("cuda_dev")) not in seen:
            seen.add((c["host"], c.get("cuda_dev")))
            hosts[c["host"]]["gpus"].append(_gpu_entry(c.get("rank"), c.get("cuda_dev"), c.get("bus_id")))
    for c in parsed.get("connections") or []:
        if c.get("host") in hosts and c.get("device") is not None and (c["host"], c["device"]) not in seen:
            seen.add((c["host"], c["device"]))
            hosts[c["host"]]["gpus"].append(_gpu_entry(None, c["device"], None))
    for n in parsed.get("nics") or []:
        if n.get("host") in hosts and n.get("plugin") != "Socket" and n["name"] not in hosts[n["host"]]["nics"]:
            hosts[n["host"]]["nics"].append(n["name"])
    return list(hosts.values()) or [{"host": None, "gpus": [], "nics": []}]


# --------------------------------------------------------------------------------------------- layouts


def _bus_of(bdf: Any) -> int | None:
    try:
        return int(str(bdf).split(":")[-2], 16)
    except (ValueError, IndexError):
        return None


def match_gpu(doc: Mapping, gpu: Mapping) -> str | None:
    """The layout's GPU name (``GPU3``) for a GPU a run names: by PCI address, then by bus number
    (old nccl-tests print the bus byte only), then by CUDA device index; None when none fits."""
    gpus = [g for g in doc.get("gpus") or [] if isinstance(g, Mapping)]
    bdf = str(gpu.get("bdf") or "").lower()
    if bdf:
        for g in gpus:
            if str(g.get("bdf") or "").lower() == bdf:
                return g.get("name")
    bus = gpu.get("pci_bus") if gpu.get("pci_bus") is not None else (_bus_of(bdf) if bdf else None)
    if bus is not None:
        hits = [g for g in gpus if g.get("bdf") and _bus_of(g["bdf"]) == bus]
        if len(hits) == 1:
            return hits[0].get("name")
    if gpu.get("device") is not None:
        for g in gpus:
            if g.get("index") == gpu["device"]:
                return g.get("name")
    return None


def layout_for_gpus(doc: Mapping, gpu_names: list[str]) -> dict:
    """The snapshot document cut down to ``gpu_names`` and the NICs those GPUs use (``gpu_nic``):
    what a run with fewer ranks than the host has GPUs can reach. The document is not changed.

    >>> doc = {"gpus": [{"name": "GPU0"}, {"name": "GPU1"}], "gpu_pairs": [{"a": "GPU0", "b": "GPU1"}],
    ...        "gpu_nic": [{"gpu": "GPU0", "nic": "mlx5_0"}, {"gpu": "GPU1", "nic": "mlx5_1"}],
    ...        "gpu_nic_matrix": [], "nics": [{"name": "mlx5_0", "compute": True},
    ...        {"name": "mlx5_1", "compute": True}], "summary": {"gpu_count": 2}}
    >>> sub = layout_for_gpus(doc, ["GPU0"])
    >>> [g["name"] for g in sub["gpus"]], [n["name"] for n in sub["nics"]], sub["gpu_pairs"]
    (['GPU0'], ['mlx5_0'], [])
    """
    keep = set(gpu_names)
    sub = dict(doc)
    sub["gpus"] = [g for g in doc.get("gpus") or [] if g.get("name") in keep]
    sub["gpu_pairs"] = [p for p in doc.get("gpu_pairs") or [] if p.get("a") in keep and p.get("b") in keep]
    sub["gpu_nic"] = [e for e in doc.get("gpu_nic") or [] if e.get("gpu") in keep]
    sub["gpu_nic_matrix"] = [c for c in doc.get("gpu_nic_matrix") or [] if c.get("gpu") in keep]
    used = {e.get("nic") for e in sub["gpu_nic"]}
    if used:
        sub["nics"] = [n for n in doc.get("nics") or [] if n.get("name") in used or n.get("compute") is False]
    sub["summary"] = {**(doc.get("summary") or {}), "gpu_count": len(sub["gpus"])}
    return sub


# --------------------------------------------------------------------------------------------- nccl-tests


def _busbw(side: Any) -> float | None:
    return side.get("busbw_gbs") if isinstance(side, Mapping) else None


def measure_nccl_tests(parsed: Mapping) -> tuple[dict | None, list[dict]]:
    """(measured, points): the out-of-place busbw at large messages -- the highest over sizes >= 1
    GiB (domain.md 5.4: never the average), else over the largest size printed -- and one point
    per message size (the best row of each size, as ``--datatype all`` prints several)."""
    by_size: dict[int, dict] = {}
    for r in parsed.get("rows") or []:
        oop, inp = _busbw(r.get("out_of_place")), _busbw(r.get("in_place"))
        if oop is None and inp is None:
            continue
        p = by_size.setdefault(r["size_bytes"], {"size_bytes": r["size_bytes"], "measured_busbw_gbs": None,
                                                 "measured_in_place_busbw_gbs": None, "line": r["line_no"]})
        if oop is not None and (p["measured_busbw_gbs"] is None or oop > p["measured_busbw_gbs"]):
            p["measured_busbw_gbs"], p["line"] = oop, r["line_no"]
        if inp is not None and (p["measured_in_place_busbw_gbs"] is None or inp > p["measured_in_place_busbw_gbs"]):
            p["measured_in_place_busbw_gbs"] = inp
    points = [by_size[s] for s in sorted(by_size)]
    measurable = [p for p in points if p["measured_busbw_gbs"] is not None]
    if not measurable:
        return None, points
    largest = measurable[-1]["size_bytes"]
    floor = min(GIB, largest)
    best = max((p for p in measurable if p["size_bytes"] >= floor), key=lambda p: p["measured_busbw_gbs"])
    collective = parsed.get("collective")
    measured = {"value": best["measured_busbw_gbs"], "unit": "GB/s", "metric": "busbw",
                "size_bytes": best["size_bytes"], "line": best["line"], "collective": collective,
                "largest_size_bytes": largest, "plateau": best["size_bytes"] >= GIB,
                "avg_busbw_gbs": parsed.get("avg_busbw_gbs"),
                "what": f"{collective or 'collective'} out-of-place busbw at {size_text(best['size_bytes'])}"}
    return measured, points


def _shape_nccl_tests(parsed: Mapping, hosts: list[dict], docs: Mapping[str, Mapping]) -> tuple[int | None, int | None,
                                                                                                 list[str]]:
    """(nodes, ranks per node, notes) of an nccl-tests run."""
    notes: list[str] = []
    named = [h for h in hosts if h["host"]]
    if named:
        counts = [len(h["gpus"]) for h in named]
        if len(set(counts)) > 1:
            notes.append(f"uneven ranks per host ({', '.join(map(str, counts))}); the most is used")
        return len(named), max(counts), notes
    nodes = len(docs) or None
    ngpus = parsed.get("ngpus_per_process")
    if nodes == 1 and ngpus:
        return 1, ngpus, notes
    layout_gpus = [len(d.get("gpus") or []) for d in docs.values() if d]
    if nodes and layout_gpus and max(layout_gpus):
        notes.append("the output has no 'Using devices' list: every GPU of the layout is assumed to run a rank")
        return nodes, max(layout_gpus), notes
    return nodes, ngpus, notes


def _estimate_nodes(est: Mapping, nodes: int) -> int | None:
    """The node count of the estimate's points to use for ``nodes``: itself, else the next one up
    (the estimate gives 1, 2, 4 ... 64; a larger count's tree figure is the more conservative)."""
    have = sorted(p["nodes"] for p in est.get("points") or [])
    return next((n for n in have if n >= nodes), None)


def expect_host(doc: Mapping, gpu_names: list[str], nodes: int, sizes: list[int], collective: str | None) -> dict:
    """What one host's layout gives a run of ``nodes`` nodes using ``gpu_names`` on it, at each
    message size: ``{"plateau", "ring", "curve": {size: GB/s}, "limit", "notes", "assumed",
    "b_node_gbs", "estimated_nodes", "algorithm"}`` (``plateau`` None when the layout cannot say).

    Only ``estimate(doc)`` and ``curve(doc, nodes, sizes)`` are read, and of their points only
    ``busbw_gbs`` (and ``ring_busbw_gbs`` where the estimate gives it)."""
    all_gpus = [g.get("name") for g in doc.get("gpus") or []]
    notes: list[str] = []
    layout = doc
    if gpu_names and set(gpu_names) != set(all_gpus):
        layout = layout_for_gpus(doc, gpu_names)
        notes.append(f"{len(gpu_names)} of the host's {len(all_gpus)} GPUs ran ranks ({', '.join(gpu_names)}): "
                     "the estimate is of those GPUs and the NICs they use")
    est = estimate(layout)
    count = _estimate_nodes(est, nodes)
    out = {"plateau": None, "ring": None, "curve": {}, "limit": est.get("limiting_link"), "notes": notes,
           "assumed": bool(doc.get("assumptions")), "b_node_gbs": est.get("b_node_gbs"), "estimated_nodes": count,
           "algorithm": None}
    if count is None:
        out["notes"] = notes + list(est.get("notes") or []) + [f"the layout gives no figure for {nodes} node(s)"]
        return out
    if count != nodes:
        notes.append(f"estimated for {count} nodes, the nearest node count the estimate gives above {nodes}")
        out["assumed"] = True
    point = next(p for p in est["points"] if p["nodes"] == count)
    ring = point.get("ring_busbw_gbs", point["busbw_gbs"])
    values = curve(layout, count, [*sizes, PLATEAU_SIZE])
    if not values:
        out["notes"] = notes + list(est.get("notes") or [])
        return out
    if collective not in (None, "all_reduce"):
        # busbw is normalised by nccl-tests' factor for each collective (domain.md 5.1), so the
        # ring's bottleneck bounds it the same way; the tree and NVLS figures are all-reduce only
        values = [{**v, "busbw_gbs": min(v["busbw_gbs"], ring)} for v in values]
        notes.append(f"the estimate models all-reduce; for {collective} the ring bound is used with nccl-tests' "
                     "busbw factor, an assumption")
        out["assumed"] = True
    out.update(plateau=values[-1]["busbw_gbs"], ring=ring, limit=point.get("limit") or out["limit"],
               curve={int(s): v["busbw_gbs"] for s, v in zip(sizes, values)},
               algorithm=values[-1].get("algorithm") or values[-1].get("algo"))
    if doc.get("assumptions"):
        notes.append("the layout rests on assumed figures (see the host page's assumptions)")
    return out


def _matched_hosts(hosts: list[dict], docs: Mapping[str, Mapping]) -> list[dict]:
    """The result's ``hosts`` entries: each run host with its layout and the layout's GPU names."""
    out = []
    for h in hosts:
        doc = docs.get(h["host"]) if h["host"] else None
        gpus = [{"rank": g["rank"], "device": g["device"], "bdf": g["bdf"],
                 "gpu": match_gpu(doc, g) if doc else None} for g in h["gpus"]]
        out.append({"host": h["host"], "known": doc is not None,
                    "layout_host": doc.get("hostname") if doc else None, "gpus": gpus, "nics": list(h["nics"]),
                    "expected_gbs": None, "limit": None})
    return out


def expect_nccl_tests(facts: RunFacts, sizes: list[int]) -> dict | None:
    """The expected busbw curve of an nccl-tests run: each known host's layout, the slowest bounding."""
    if not facts.nodes or not facts.ranks_per_node:
        return None
    per_host: dict[str, dict] = {}
    cache: dict[tuple, dict] = {}
    for h in facts.hosts:
        if not h["known"]:
            continue
        doc = facts.docs[h["host"]]
        names = [g["gpu"] for g in h["gpus"] if g["gpu"]]
        if h["gpus"] and len(names) < len(h["gpus"]):
            names = []  # some GPUs could not be placed: the whole layout stands in
            facts.notes.append(f"{h['host']}: not every GPU of the run was found in its layout; the whole layout "
                               "is used")
        if not names and facts.ranks_per_node < len(doc.get("gpus") or []) and not h["gpus"]:
            names = [g.get("name") for g in (doc.get("gpus") or [])][:facts.ranks_per_node]
        key = ((doc.get("summary") or {}).get("fingerprint") or id(doc), tuple(sorted(names)))
        if key not in cache:  # hosts of one layout share one estimate (64 ranks on 8 identical hosts: one)
            cache[key] = expect_host(doc, names, facts.nodes, sizes, facts.collective)
        per_host[h["host"]] = cache[key]
        h["expected_gbs"], h["limit"] = per_host[h["host"]]["plateau"], per_host[h["host"]]["limit"]
    facts.per_host = per_host
    known = {k: v for k, v in per_host.items() if v["plateau"] is not None}
    if not known:
        return None if not per_host else {"value": None, "unit": "GB/s", "notes": _notes(per_host.values()),
                                          "limit": None, "host": None, "plateau": None, "assumed": True}
    host = min(known, key=lambda k: known[k]["plateau"])
    e = known[host]
    unknown = [h["host"] for h in facts.hosts if not h["known"]]
    notes = list(e["notes"]) + ([f"hosts unknown to topoweb ({', '.join(unknown)}) are assumed to match {host}"]
                                if unknown else [])
    if len({v["plateau"] for v in known.values()}) > 1:
        notes.append(f"the slowest of the {len(known)} layouts bounds the run: {host}")
    return {"value": None, "unit": "GB/s", "size_bytes": None, "plateau": e["plateau"], "ring": e["ring"],
            "limit": e["limit"], "host": host, "layout_host": facts.docs[host].get("hostname"),
            "assumed": bool(e["assumed"] or unknown), "notes": notes + facts.notes,
            "curve": e["curve"], "b_node_gbs": e["b_node_gbs"], "nodes": facts.nodes,
            "ranks_per_node": facts.ranks_per_node, "estimated_nodes": e["estimated_nodes"],
            "algorithm": e["algorithm"]}


def _notes(entries) -> list[str]:
    out: list[str] = []
    for e in entries:
        out += [n for n in e.get("notes") or [] if n not in out]
    return out


# --------------------------------------------------------------------------------------------- perftest


def measure_perftest(parsed: Mapping) -> tuple[dict | None, list[dict]]:
    """(measured, points) of a perftest run: the best average bandwidth (Gb/s) and one point per size."""
    rows = parsed.get("rows") or []
    points = [{"size_bytes": r["bytes"], "measured_gbit": r["bw_avg_gbit"],
               "measured_busbw_gbs": round(r["bw_avg_gbit"] / 8, 3), "peak_gbit": r.get("bw_peak_gbit"),
               "line": r["line_no"]} for r in rows]
    if not rows:
        return None, points
    best = max(rows, key=lambda r: r["bw_avg_gbit"])
    what = f"{parsed.get('test') or 'perftest'} average bandwidth at {size_text(best['bytes'])}"
    if parsed.get("bidirectional"):
        what += " (both directions added)"
    return {"value": best["bw_avg_gbit"], "unit": "Gb/s", "metric": "bw_average", "size_bytes": best["bytes"],
            "line": best["line_no"], "what": what, "device": parsed.get("device"), "cuda": bool(parsed.get("cuda")),
            "link_type": parsed.get("link_type"), "bidirectional": bool(parsed.get("bidirectional"))}, points


def _nic_of(doc: Mapping, device: str | None) -> dict | None:
    for n in doc.get("nics") or []:
        if device and device in (n.get("name"), n.get("label")):
            return n
    return None


def _uplink_gbs(doc: Mapping, node_id: str | None) -> tuple[float | None, dict | None]:
    """Spec GB/s of a device's PCIe uplink in the layout graph, and the edge."""
    for e in (doc.get("graph") or {}).get("edges") or []:
        if node_id and e.get("target") == node_id and e.get("kind") == "pcie":
            return e.get("spec_gbs"), e
    return None, None


def expect_perftest(facts: RunFacts) -> dict | None:
    """What the NIC should carry: its line rate (``bandwidth.ib_port``), capped by its PCIe link,
    and with ``--use_cuda`` by the layout's GPU -> NIC path (GPUDirect RDMA, or the bounce through
    host memory when the path has no GDR). Gb/s; doubled for a bidirectional test."""
    parsed = facts.parsed
    for h in facts.hosts:
        if not h["known"]:
            continue
        doc = facts.docs[h["host"]]
        nic = _nic_of(doc, parsed.get("device"))
        if nic is None:
            facts.notes.append(f"{h['host']}'s layout has no NIC named {parsed.get('device')!r}")
            continue
        port = bandwidth.ib_port(nic.get("rate_gbps"))
        if port.spec_gbs is None:
            return {"value": None, "unit": "Gb/s", "host": h["host"], "plateau": None, "assumed": True, "limit": None,
                    "notes": [f"{nic.get('name')}: no line rate in the layout (send ibstat)"]}
        limit_gbs, limit = port.spec_gbs, f"{nic.get('name')} line rate {nic.get('rate_gbps'):g} Gb/s"
        link_gbs, edge = _uplink_gbs(doc, nic.get("node"))
        if link_gbs and link_gbs < limit_gbs:
            limit_gbs = link_gbs
            limit = (f"{nic.get('name')}'s PCIe link Gen{edge.get('gen')} x{edge.get('width')} "
                     f"({link_gbs * 8:.0f} Gb/s) below its {nic.get('rate_gbps'):g} Gb/s line rate")
        path = None
        if parsed.get("cuda"):
            path = _cuda_path(doc, facts, h, nic)
            if path and path.get("bandwidth_gbs") and path["bandwidth_gbs"] < limit_gbs:
                limit_gbs = path["bandwidth_gbs"]
                how = "GPUDirect RDMA path" if path.get("gdr") else "path through host memory (no GPUDirect RDMA)"
                limit = f"{path['gpu']} -> {nic.get('name')} {how}, {path.get('path_class')}"
        factor = 2 if parsed.get("bidirectional") else 1
        value = round(limit_gbs * 8 * factor, 2)
        h["expected_gbs"], h["limit"] = round(limit_gbs * factor, 2), limit
        return {"value": value, "plateau": value, "unit": "Gb/s", "size_bytes": None, "limit": limit,
                "host": h["host"], "layout_host": doc.get("hostname"), "assumed": bool(nic.get("rate_gbps") is None),
                "notes": list(facts.notes),
                "line_rate_gbit": nic.get("rate_gbps"), "nic": nic.get("name"), "link_layer": nic.get("link_layer"),
                "gpu_path": path}
    return None


def _cuda_path(doc: Mapping, facts: RunFacts, h: dict, nic: Mapping) -> dict | None:
    """The layout's GPU x NIC cell for the GPU a ``--use_cuda`` perftest used."""
    gpu = next((g["gpu"] for g in h["gpus"] if g["gpu"]), None)
    if gpu is None:
        facts.notes.append("the GPU perftest used is not named or not in the layout: GPU0 is assumed")
        gpu = "GPU0"
    for c in doc.get("gpu_nic_matrix") or []:
        if c.get("gpu") == gpu and c.get("nic") == nic.get("name"):
            return {**c, "gpu": gpu}
    return None


# --------------------------------------------------------------------------------------------- P2P tests


def _copy_matrix(parsed: Mapping) -> dict | None:
    """The GPU -> GPU unidirectional copy matrix: P2P=Enabled (p2pBandwidthLatencyTest) or the
    device-to-device memcpy (nvbandwidth)."""
    cands = [m for m in parsed.get("matrices") or [] if m.get("measure") == "bandwidth" and not m.get("bidirectional")
             and m.get("row_kind") == "GPU" and m.get("col_kind") == "GPU" and m.get("direction") in ("->", None)]
    enabled = [m for m in cands if m.get("p2p") is True] or [m for m in cands if m.get("p2p") is None]
    return (enabled or cands or [None])[0]


def _pair_expected(doc: Mapping, a: str, b: str) -> float | None:
    for p in doc.get("gpu_pairs") or []:
        if {p.get("a"), p.get("b")} == {a, b}:
            hops, bn = p.get("hops") or [], p.get("bottleneck")
            if isinstance(bn, int) and 0 <= bn < len(hops) and hops[bn].get("expected_gbs"):
                return hops[bn]["expected_gbs"]
            return p.get("bottleneck_gbs")
    return None


def check_pairs(facts: RunFacts) -> tuple[dict | None, dict | None, list[dict]]:
    """(measured, expected, pairs) of a P2P test: every GPU pair's copy bandwidth against the
    layout's pair bottleneck; measured and expected are the pair furthest below its figure."""
    m = _copy_matrix(facts.parsed)
    if m is None:
        return None, None, []
    h = next((x for x in facts.hosts if x["known"]), None)
    doc = facts.docs[h["host"]] if h else None
    names = {g["device"]: g["gpu"] for g in h["gpus"]} if h else {}
    pairs = []
    for i, src in enumerate(m.get("row_ids") or []):
        for j, dst in enumerate(m.get("col_ids") or []):
            row = m["values"][i] if i < len(m["values"]) else []
            value = row[j] if j < len(row) else None
            if src == dst or value is None:
                continue
            a, b = names.get(src) or f"GPU{src}", names.get(dst) or f"GPU{dst}"
            exp = _pair_expected(doc, a, b) if doc else None
            pairs.append({"a": a, "b": b, "measured_gbs": value, "expected_gbs": exp,
                          "efficiency": round(value / exp, 3) if exp else None, "line": m["line_no"] + 2 + i})
    if not pairs:
        return None, None, []
    rated = [p for p in pairs if p["efficiency"] is not None]
    worst = min(rated, key=lambda p: p["efficiency"]) if rated else min(pairs, key=lambda p: p["measured_gbs"])
    measured = {"value": worst["measured_gbs"], "unit": "GB/s", "metric": "p2p_copy", "size_bytes": None,
                "line": worst["line"], "what": f"{worst['a']} -> {worst['b']} copy bandwidth ({m.get('title')})",
                "pair": [worst["a"], worst["b"]], "matrix": m.get("title")}
    expected = None
    if worst.get("expected_gbs"):
        expected = {"value": worst["expected_gbs"], "plateau": worst["expected_gbs"], "unit": "GB/s",
                    "size_bytes": None, "host": h["host"], "assumed": bool(doc.get("assumptions")), "notes": [],
                    "limit": f"the layout's {worst['a']}-{worst['b']} bottleneck"}
    return measured, expected, pairs


# --------------------------------------------------------------------------------------------- verdict


def _nccl_tests_not_comparable(facts: RunFacts) -> str | None:
    """Why an nccl-tests result cannot be compared with a layout, or None."""
    parsed = facts.parsed
    alone = facts.rank_zero_lines()
    if alone and (parsed.get("ngpus_per_process") in (None, 1)):
        return (f"every process printed itself as Rank 0 with nGpus 1 ({len(alone) + 1} processes): nccl-tests was "
                "built without MPI (make MPI=1), so each process ran alone on one GPU and the figures are not a "
                f"{len(alone) + 1}-rank collective")
    if parsed.get("nranks") == 1 or (facts.nodes == 1 and facts.ranks_per_node == 1):
        return ("one rank: a single GPU moves no data between GPUs, so busbw (and a single-GPU reduce's in-place "
                "figure) means nothing; run one rank per GPU (-g N, or mpirun -np N)")
    if facts.measured is None:
        return "no result rows: the output was cut before the table (see the warnings)"
    if not any(h["known"] for h in facts.hosts):
        names = [h["host"] for h in facts.hosts if h["host"]]
        return ((f"hosts unknown to topoweb ({', '.join(names)})" if names else "the output names no host") +
                ": send their reports (the agent, or paste nvidia-smi topo -m and ibstat) so their layout is known")
    return None


def _latency_bound(facts: RunFacts) -> str | None:
    e = facts.expected or {}
    largest = (facts.measured or {}).get("largest_size_bytes")
    at = (e.get("curve") or {}).get(largest)
    if at is not None and e.get("plateau") and at < LATENCY_BOUND * e["plateau"]:
        return (f"sizes too small: the largest message ({size_text(largest)}) is still latency-bound (expected "
                f"{at:.1f} GB/s there, {at / e['plateau']:.0%} of the {e['plateau']:.1f} GB/s plateau); run up to "
                "at least 1 GiB (-e 8G)")
    return None


def _efficiency(facts: RunFacts) -> float | None:
    m, e = facts.measured, facts.expected
    if not m or not e:
        return None
    at = (e.get("curve") or {}).get(m.get("size_bytes"))
    value = at if at is not None else e.get("plateau")
    if not value:
        return None
    e["value"], e["size_bytes"] = value, m.get("size_bytes")
    return round(m["value"] / value, 3)


def _verdict(facts: RunFacts, findings: list[dict]) -> tuple[str, str]:
    """(verdict, reason sentence)."""
    broken = [f for f in findings if f.get("breaks")]
    if broken:
        return "broken", broken[0]["message"]
    if facts.kind == "nccl_tests":
        why = _nccl_tests_not_comparable(facts)
        if why:
            return "not_comparable", why[0].upper() + why[1:] + "."
    if facts.kind == "nccl_log":
        return _log_verdict(facts, findings)
    if facts.measured is None:
        return "not_comparable", "Nothing was measured: the output holds no result rows (see the warnings)."
    if facts.expected is None or facts.efficiency is None:
        names = [h["host"] for h in facts.hosts if h["host"]]
        if not any(h["known"] for h in facts.hosts):
            what = f"the hosts ({', '.join(names)}) are unknown to topoweb" if names else \
                "the host it ran on was not given (say which host, or attach it with the agent)"
            return "not_comparable", f"Not comparable: {what}, so there is no layout to compare with."
        notes = (facts.expected or {}).get("notes") or facts.notes
        return "not_comparable", ("Not comparable: the layout gives no expected figure" +
                                  (f" ({notes[-1]})" if notes else "") + ".")
    too_small = _latency_bound(facts) if facts.kind == "nccl_tests" else None
    if too_small:
        return "not_comparable", too_small[0].upper() + too_small[1:] + "."
    bar = PERFTEST_HEALTHY_AT if facts.kind == "perftest" else HEALTHY_AT
    eff = facts.efficiency
    verdict = "healthy" if eff >= bar else "broken" if eff < BROKEN_BELOW else "below_expected"
    return verdict, _numbers_sentence(facts, verdict, findings)


def _log_verdict(facts: RunFacts, findings: list[dict]) -> tuple[str, str]:
    capping = [f for f in findings if f["severity"] in ("CRIT", "HIGH")]
    if capping:
        return "below_expected", (f"The log shows what keeps the job below its layout: {capping[0]['title']} "
                                  f"({capping[0]['rule']}).")
    if not any(h["known"] for h in facts.hosts):
        return "not_comparable", ("Not comparable: the hosts in this log are unknown to topoweb; the evidence below "
                                  "reads the log alone.")
    e = facts.expected or {}
    allows = (f"; the layout allows {e['plateau']:.1f} GB/s busbw for {facts.nodes} node(s) (limit: {e.get('limit')})"
              if e.get("plateau") else "")
    return "healthy", ("NCCL's connections use what the layout offers (transports, GPUDirect RDMA and NICs)" + allows +
                       "; an NCCL log holds no bandwidth figure, so attach the nccl-tests output to compare numbers.")


def _numbers_sentence(facts: RunFacts, verdict: str, findings: list[dict]) -> str:
    m, e = facts.measured, facts.expected
    unit = m["unit"]
    shape = ""
    if facts.kind == "nccl_tests":
        shape = f" for {facts.nodes} node{'s' if facts.nodes != 1 else ''} x {facts.ranks_per_node} GPUs"
    bound = ""
    if e.get("host"):
        who = e.get("layout_host") or e["host"]
        bound = f" of {who}" + (f" ({e['host']} in the run)" if who != e["host"] else "")
    text = (f"{m['value']:.1f} {unit} ({m['what']}) is {facts.efficiency:.0%} of the {e['value']:.1f} {unit} "
            f"expected{shape} from the layout{bound} (limit: {e.get('limit') or 'unknown'})")
    words = {"healthy": "healthy", "below_expected": "below expected", "broken": "broken"}[verdict]
    causes = [f for f in findings if f["severity"] in ("CRIT", "HIGH", "MED")]
    if verdict == "healthy":
        note = next((f for f in findings if f["rule"] in ("T9", "R07")), None)
        return f"{text}: {words}" + (f"; {note['title']} ({note['rule']})." if note else ".")
    if causes:
        title = causes[0]["title"]
        if title[1:2].islower():  # "TCP sockets" and "RoCE ..." keep their capitals
            title = title[0].lower() + title[1:]
        return f"{text}: {words}; most likely {title} ({causes[0]['rule']})."
    hint = ("send the NCCL_DEBUG=INFO log of the same run" if facts.kind == "nccl_tests" else
            "check the switch port and the NIC's counters")
    return f"{text}: {words}; nothing in the output says why ({hint})."


# --------------------------------------------------------------------------------------------- entry


def _lines(raw_lines: list[str] | None) -> list[str] | None:
    return None if raw_lines is None else [ln.rstrip("\r\n") for ln in raw_lines]


def _expected_points(points: list[dict], expected: dict | None, kind: str) -> None:
    """Fill each point's expected figure: the curve (nccl-tests) or the line rate (perftest, GB/s)."""
    for p in points:
        if kind == "nccl_tests":
            p["expected_busbw_gbs"] = ((expected or {}).get("curve") or {}).get(p["size_bytes"])
        elif kind == "perftest":
            value = (expected or {}).get("value")
            p["expected_gbit"] = value
            p["expected_busbw_gbs"] = round(value / 8, 3) if value else None


def check_run(kind: str, parsed: Any, docs_by_host: Mapping[str, Mapping], *, raw_lines: list[str] | None = None,
              name: str | None = None, baseline: Mapping | None = None) -> dict:
    """Measured against expected for one run; see the module docstring for the result.

    >>> check_run("perftest", {"rows": []}, {})["verdict"]
    'not_comparable'
    """
    if kind not in RUN_KINDS:
        raise ValueError(f"{kind!r} is not a run kind; run kinds: {', '.join(RUN_KINDS)}")
    parsed = parsed if isinstance(parsed, Mapping) else to_jsonable(parsed)
    hosts = run_hosts(kind, parsed)
    if not any(h["host"] for h in hosts):  # the output names no host: the caller's hosts are its hosts
        template = hosts[0]
        hosts = [{**template, "host": k} for k in docs_by_host] or hosts
    docs = {k: v for k, v in docs_by_host.items() if v}
    facts = RunFacts(kind=kind, parsed=parsed, docs=docs, raw_lines=_lines(raw_lines), name=name,
                     hosts=_matched_hosts(hosts, docs), baseline=baseline)
    points: list[dict] = []
    pairs: list[dict] = []
    if kind == "nccl_tests":
        facts.measured, points = measure_nccl_tests(parsed)
        facts.nodes, facts.ranks_per_node, facts.notes = _shape_nccl_tests(parsed, hosts, docs_by_host)
        facts.collective = parsed.get("collective")
        facts.expected = expect_nccl_tests(facts, [p["size_bytes"] for p in points])
    elif kind == "perftest":
        facts.measured, points = measure_perftest(parsed)
        facts.expected = expect_perftest(facts)
    elif kind == "p2p_bandwidth":
        facts.measured, facts.expected, pairs = check_pairs(facts)
        facts.pairs = pairs
    else:  # an NCCL log: no figure of its own; what its job could reach is still worth saying
        facts.nodes = parsed.get("nnodes") or len([h for h in hosts if h["host"]]) or None
        if (facts.nodes or 1) < 2 and any(c.get("transport") == "NET" for c in parsed.get("connections") or []):
            facts.nodes = 2  # the log shows one host, but its NET connections cross to another node
            facts.notes.append("the log shows one host; its NET connections show the job spans at least 2 nodes")
        counts = [len(h["gpus"]) for h in hosts if h["host"]]
        facts.ranks_per_node = max(counts) if counts and max(counts) else None
        facts.expected = expect_nccl_tests(facts, []) if facts.nodes else None
    facts.efficiency = _efficiency(facts)
    _expected_points(points, facts.expected, kind)
    evidence, findings = diagnose(facts)
    verdict, reason = _verdict(facts, findings)
    for f in findings:
        f.pop("breaks", None)
    expected = {k: v for k, v in (facts.expected or {}).items() if k != "curve"} if facts.expected else None
    return {"schema": SCHEMA, "kind": kind, "name": name, "measured": facts.measured, "expected": expected,
            "efficiency": facts.efficiency, "verdict": verdict, "reason": reason, "evidence": evidence,
            "findings": findings, "points": points, "pairs": pairs, "hosts": facts.hosts,
            "slow_pair": facts.slow_pair(), "warnings": list(parsed.get("warnings") or []) + _dedupe(facts.notes)}


def _dedupe(items: list[str]) -> list[str]:
    out: list[str] = []
    for x in items:
        if x not in out:
            out.append(x)
    return out
