"""Measured and expected, per kind of run: nccl-tests (the out-of-place busbw at large messages
against the estimate's curve for that node count, ranks per node and collective), perftest (the
best average against the NIC's line rate, its PCIe link and, with ``--use_cuda``, the GPU -> NIC
path) and P2P tests (every GPU pair's copy bandwidth against the layout's pair bottleneck).

Only ``apps.domain.estimate.estimate(doc)`` and ``curve(doc, nodes, sizes)`` are read of the
engine, and of their points only ``busbw_gbs`` (and ``ring_busbw_gbs`` where given)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apps.domain import bandwidth
from apps.domain.estimate import curve, estimate
from apps.domain.run_facts import RunFacts, size_text
from apps.domain.run_layouts import layout_for_gpus

__all__ = ["GIB", "PLATEAU_SIZE", "measure_nccl_tests", "shape_nccl_tests", "expect_host", "expect_nccl_tests",
           "measure_perftest", "expect_perftest", "check_pairs"]


GIB = 1 << 30
PLATEAU_SIZE = 16 * GIB  # where the expected curve stands for "large messages"


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


def shape_nccl_tests(parsed: Mapping, hosts: list[dict], docs: Mapping[str, Mapping]) -> tuple[int | None, int | None,
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
