"""The answer at the top of a page: per-GPU NIC, GPUDirect RDMA / PXN and effective GB/s, the compute
ports that are down, the expected bus bandwidth, the top fix; and whether the sources disagree on
the NICs so that advice built on the NIC classification must wait. Pure functions of a snapshot
document (``apps/domain/analysis.py``) and the user's NIC roles (``Snapshot.nic_roles``).

One GDR/PXN model (:func:`gdr_pxn`), the one every page reads: NCCL sends through the PXN relay
when the document names one (``pxn_via``; ``paths.cc`` L812-842 at v2.30.7-1) and receives on the
GPU's own path (``apps.domain.cluster`` legs 1 and 3), so a GPU has a *send* and a *receive* side:

* send: GPUDirect RDMA of the relay (``pxn_gdr``) when PXN is used, else the GPU's own ``gdr``;
* receive: the GPU's own ``gdr`` (off: the NIC writes into host memory, then it is copied).

Per-GPU effective GB/s (:func:`gpu_rows`): the smaller of the send and receive paths' figures
(``bandwidth_gbs``, ``pxn_bandwidth_gbs``: the host-memory copy is one of their hops when GDR is
off) and the NIC port's expected GB/s (``bandwidth.ib_port``) divided by the GPUs that take that
NIC on channel 0 (``nic_share``): a NIC shared by 3 GPUs gives each a third when all send at once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from apps.domain.bandwidth import ib_port
from apps.domain.findings.base import SEVERITY_RANK
from apps.domain.names import natural_key, natural_sorted

__all__ = ["ROLES", "NON_COMPUTE", "NIC_CLASS_RULES", "NIC_CLASS_SETTINGS", "check_roles", "gdr_pxn", "gpu_rows",
           "ports_down", "busbw", "nic_conflict", "split_advice", "top_fix", "host_verdict", "path_sentence",
           "compare_sentence", "numa_words", "nic_rates_words", "nic_models"]

ROLES = ("compute", "storage", "management")
NON_COMPUTE = ("storage", "management")
# findings and settings that rest on which NICs carry GPU traffic (Ctx.is_compute / compute_nics)
NIC_CLASS_RULES = frozenset({"F04", "F07", "G01", "G05", "G06"})
NIC_CLASS_SETTINGS = frozenset({"NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_CROSS_NIC"})
HELD_WORDS = "held back: the sources disagree on the NICs"


def check_roles(roles: Any, nic_names: list[str] | None = None) -> dict[str, str]:
    """``{"mlx5_4": "storage", ...}`` from a request body; raises ValueError naming the field.
    A value of None or "" means "clear this NIC's override" and is kept as None."""
    if not isinstance(roles, Mapping) or not roles:
        raise ValueError('body: expected an object {"<nic>": "compute"|"storage"|"management"|null}')
    out: dict[str, Any] = {}
    for nic, role in roles.items():
        if nic_names is not None and nic not in nic_names:
            raise ValueError(f"{nic}: no such NIC in this snapshot (NICs: {', '.join(nic_names) or 'none'})")
        if role in (None, ""):
            out[str(nic)] = None
        elif role in ROLES:
            out[str(nic)] = role
        else:
            raise ValueError(f"{nic}: role must be one of {', '.join(ROLES)} or null, not {role!r}")
    return out


# -------------------------------------------------------------------------------- GDR / PXN


def _find(items: list, key: str, value: str) -> dict | None:
    return next((x for x in items or [] if x.get(key) == value), None)


def gdr_pxn(entry: Mapping | None) -> dict | None:
    """The GDR/PXN words of one ``gpu_nic`` entry: {"state": "on"|"pxn"|"off", "send_gdr",
    "recv_gdr", "pxn_via", "send", "receive", "words"}; None when the GPU has no NIC."""
    if not entry:
        return None
    own = bool(entry.get("gdr"))
    via = entry.get("pxn_via") if entry.get("pxn_hops") or entry.get("pxn_via") else None
    send_gdr = bool(entry.get("pxn_gdr")) if via else own
    if via:
        send = f"PXN via {via} (GDR {'on' if send_gdr else 'off'} at {via})"
    else:
        send = "GDR on" if own else "GDR off, staged in host memory"
    receive = "GDR on" if own else "GDR off, staged in host memory"
    if via:
        words = f"sends: {send}; receives: {receive}"
        state = "pxn"
    else:
        words = send
        state = "on" if own else "off"
    return {"state": state, "send_gdr": send_gdr, "recv_gdr": own, "pxn_via": via, "send": send,
            "receive": receive, "words": words}


def gpu_gdr(doc: Mapping, gpu: str) -> dict | None:
    """:func:`gdr_pxn` of ``gpu`` in ``doc``, with its NIC, path class and the reason."""
    e = _find(doc.get("gpu_nic") or [], "gpu", gpu)
    g = gdr_pxn(e)
    if g is None:
        return None
    return {**g, "nic": e.get("nic"), "path_class": e.get("path_class"), "reason": e.get("reason")}


def _nic_port_gbs(doc: Mapping, nic: str | None) -> float | None:
    n = _find(doc.get("nics") or [], "name", nic) if nic else None
    return ib_port((n or {}).get("rate_gbps")).expected_gbs if n else None


def gpu_rows(doc: Mapping) -> list[dict]:
    """Per GPU with a NIC: {"gpu", "nic", "nics", "also", "share", "gdr" (gdr_pxn), "path_gbs",
    "port_gbs", "share_gbs", "effective_gbs", "limited_by", "limit"} in GPU order; ``share_gbs``
    the GPU's share of its NIC port (port / share); ``effective_gbs`` the smaller of that and the
    path (rounded to 0.01); ``limited_by`` which of the two sets it ("nic", "path" or None) and
    ``limit`` in words; ``also``: the other NICs the GPU's channels use (``nics`` without ``nic``,
    which channel 0 uses)."""
    rows = []
    for e in sorted(doc.get("gpu_nic") or [], key=lambda x: natural_key(x["gpu"])):
        g = gdr_pxn(e)
        paths = [v for v in (e.get("bandwidth_gbs"), e.get("pxn_bandwidth_gbs") if g["pxn_via"] else None)
                 if v is not None]
        path = min(paths) if paths else None
        share = max(int(e.get("nic_share") or 1), 1)
        port = _nic_port_gbs(doc, e.get("nic"))
        each = port / share if port is not None else None
        candidates = [(v, w) for v, w in ((path, "path"), (each, "nic")) if v is not None]
        eff, limit = min(candidates) if candidates else (None, None)
        if limit == "nic":
            words = (f"{e['nic']} shared by {share} GPUs" if share > 1 else f"{e['nic']} port rate")
        elif limit == "path":
            words = "host-memory staging (GDR off)" if g["state"] == "off" or not g["recv_gdr"] else "PCIe path"
        else:
            words = "rate unknown"
        nics = list(e.get("nics") or [e.get("nic")])
        rows.append({"gpu": e["gpu"], "nic": e.get("nic"), "nics": nics, "also": [n for n in nics if n != e.get("nic")],
                     "share": share, "gdr": g, "path_gbs": path, "port_gbs": port, "share_gbs": each,
                     "effective_gbs": round(eff, 2) if eff is not None else None, "limited_by": limit,
                     "limit": words})
    return rows


def gpus_without_nic(doc: Mapping) -> list[str]:
    have = {e["gpu"] for e in doc.get("gpu_nic") or []}
    return [g["name"] for g in doc.get("gpus") or [] if g["name"] not in have]


# -------------------------------------------------------------------------------- ports, busbw


def ports_down(doc: Mapping) -> list[dict]:
    """Compute NIC ports reported not Active: {"nic", "state", "rate_gbps"}."""
    return [{"nic": n["name"], "state": n.get("state") or "not Active", "rate_gbps": n.get("rate_gbps")}
            for n in natural_sorted_nics(doc.get("nics") or []) if n.get("compute") and n.get("active") is False]


def natural_sorted_nics(nics: list[dict]) -> list[dict]:
    return sorted(nics, key=lambda n: natural_key(str(n.get("name"))))


def busbw(doc: Mapping) -> dict:
    """{"one": point|None, "multi": point|None, "notes"}: the estimate's 1-node point and its
    largest multi-node point (``estimate.points``: busbw, NCCL's algorithm and protocol, limit)."""
    est = doc.get("estimate") or {}
    points = [p for p in est.get("points") or [] if isinstance(p, Mapping)]
    one = next((p for p in points if p.get("nodes") == 1), None)
    multi = max((p for p in points if (p.get("nodes") or 0) > 1), key=lambda p: p["nodes"], default=None)
    return {"one": one, "multi": multi, "notes": list(est.get("notes") or [])}


# -------------------------------------------------------------------------------- consistency


def _nic_names(doc: Mapping) -> set[str]:
    out = set()
    for n in doc.get("nics") or []:
        out.add(str(n.get("name")))
        if n.get("label"):
            out.add(str(n["label"]))
    return out


def nic_conflict(doc: Mapping, nic_roles: Mapping | None = None) -> dict | None:
    """The sources' disagreement on the NICs, or None: {"sources", "nics", "messages", "message",
    "resolved", "roles"}. Resolved when the user set a role for every NIC it names
    (``Snapshot.nic_roles``)."""
    names = _nic_names(doc)
    items = [d for d in (doc.get("graph") or {}).get("disagreements") or []
             if str(d.get("subject")) in names]
    if not items:
        return None
    sources = list(dict.fromkeys(s for d in items for s in d.get("sources") or []))
    nics = natural_sorted({str(d["subject"]) for d in items})
    roles = {k: v for k, v in (nic_roles or {}).items() if isinstance(v, Mapping) and v.get("role")}
    total = len(doc.get("nics") or [])
    resolved = all(n in roles for n in nics)
    message = (f"The sources disagree on the NICs ({', '.join(sources)}): {len(nics)} of the {total} NIC ports "
               f"({', '.join(nics)}) are not in every source; " + "; ".join(d["message"] for d in items[:3]) +
               ("; ..." if len(items) > 3 else "") + ".")
    return {"sources": sources, "nics": nics, "messages": [d["message"] for d in items], "message": message,
            "resolved": resolved, "roles": {n: roles[n] for n in nics if n in roles}}


def _held_finding(f: Mapping, conflict_nics: set[str]) -> bool:
    if f.get("rule") in NIC_CLASS_RULES:
        return True
    return f.get("rule") == "F01" and bool(set(f.get("devices") or []) & conflict_nics)


def split_advice(doc: Mapping, conflict: Mapping | None) -> dict:
    """{"findings", "settings", "held_findings", "held_settings"}: while ``conflict`` is unresolved,
    the NCCL settings and findings that rest on the NIC classification are held back."""
    findings = list(doc.get("findings") or [])
    settings = list(doc.get("nccl_settings") or [])
    if not conflict or conflict.get("resolved"):
        return {"findings": findings, "settings": settings, "held_findings": [], "held_settings": []}
    nics = set(conflict.get("nics") or [])
    return {"findings": [f for f in findings if not _held_finding(f, nics)],
            "settings": [s for s in settings if s.get("name") not in NIC_CLASS_SETTINGS],
            "held_findings": [f for f in findings if _held_finding(f, nics)],
            "held_settings": [s for s in settings if s.get("name") in NIC_CLASS_SETTINGS]}


def top_fix(findings: list[Mapping]) -> dict | None:
    """The highest-severity finding that has a fix worth doing (not INFO, not "Nothing to change")."""
    ranked = sorted((f for f in findings if f.get("fix") and f.get("severity") != "INFO"
                     and not str(f.get("fix")).startswith("Nothing to change")),
                    key=lambda f: SEVERITY_RANK.get(f.get("severity"), 9))
    if not ranked:
        return None
    f = ranked[0]
    return {"rule": f.get("rule"), "severity": f.get("severity"), "title": f.get("title"), "fix": f.get("fix"),
            "devices": list(f.get("devices") or [])}


def host_verdict(doc: Mapping, nic_roles: Mapping | None = None) -> dict:
    """Everything the verdict box shows: {"gpus", "no_nic", "ports_down", "busbw", "top_fix",
    "conflict", "advice", "roles", "sentence"}."""
    conflict = nic_conflict(doc, nic_roles)
    advice = split_advice(doc, conflict)
    rows = gpu_rows(doc)
    bw = busbw(doc)
    fix = top_fix(advice["findings"])
    down = ports_down(doc)
    parts = []
    if rows:
        low = min((r for r in rows if r["effective_gbs"] is not None), key=lambda r: r["effective_gbs"], default=None)
        if low:
            parts.append(f"the slowest GPU to the network is {low['gpu']} at {low['effective_gbs']:g} GB/s "
                         f"({low['limit']})")
    if down:
        parts.append(f"{len(down)} compute port{'s' if len(down) != 1 else ''} down ({', '.join(d['nic'] for d in down)})")
    if bw["multi"]:
        p = bw["multi"]
        parts.append(f"{p['nodes']} nodes: {p['busbw_gbs']:g} GB/s busbw ({p['algorithm']})")
    sentence = ("; ".join(parts) + ".").capitalize() if parts else None
    return {"gpus": rows, "no_nic": gpus_without_nic(doc), "ports_down": down, "busbw": bw, "top_fix": fix,
            "conflict": conflict, "advice": advice, "held_words": HELD_WORDS, "sentence": sentence,
            "roles": {k: v for k, v in (nic_roles or {}).items() if isinstance(v, Mapping) and v.get("role")}}


# -------------------------------------------------------------------------------- other pages


_CHANGE = {
    "host_memory_copy": "turn GPUDirect RDMA on (load nvidia_peermem / use DMA-BUF) or use a NIC under the GPU's "
                        "PCIe switch",
    "inter_socket": "use a NIC on the GPU's own socket (NCCL_IB_HCA), or pin the job to the GPU's NUMA node",
    "pcie": "check the PCIe link (reseat the card if it trained below its width or generation)",
    "fabric": "check the fabric between the two leaves (cables, rails)",
    "fabric_link": "check the fabric between the two leaves (cables, rails)",
    "nvlink": "nothing: NVLink is the fastest path there is",
    "nvswitch": "nothing: NVLink is the fastest path there is",
    "c2c": "nothing: NVLink-C2C is the fastest path there is",
    "cpu_link": "use a NIC on the GPU's own socket",
}


def path_sentence(result: Mapping) -> str | None:
    """One sentence for the path page: what limits this path (the bottleneck hop, the flows that
    share it counted) and what to change."""
    hops = result.get("hops") or []
    idx = result.get("bottleneck")
    gbs = result.get("bottleneck_gbs")
    if not isinstance(idx, int) or not (0 <= idx < len(hops)) or gbs is None:
        return result.get("explanation") or None
    h = hops[idx]
    flows = int(h.get("flows") or 1)
    kind = h.get("kind") or ""
    where = f"{h.get('from')} -> {h.get('to')}" + (f" on {h['host']}" if h.get("host") else "")
    noun = kind.replace("_", " ")
    text = f"Limited by the {noun}{'' if noun.endswith('link') else ' link'} {where} at {gbs:g} GB/s per direction"
    if flows > 1:
        text += f", which {flows} flows share ({gbs / flows:.1f} GB/s each when all run at once)"
    change = _CHANGE.get(kind, "nothing obvious: the path runs at its narrowest link")
    fabric = [i for i, x in enumerate(hops) if x.get("kind") in ("fabric", "fabric_link")]
    if fabric and idx in (fabric[0], fabric[-1]):  # a NIC's own port, not a link between switches
        change = ("nothing between the switches: a GPU's traffic to another node runs at its NIC port's line rate; "
                  "more needs more NIC ports or faster ones (a port trained below its rate is F02 on the host page)")
    if not result.get("same_host") and kind != "host_memory_copy":
        off = [f"{result.get(end) or end} ({words})" for end, flag, words in
               (("src", "gdr_src", "sending"), ("dst", "gdr_dst", "receiving")) if result.get(flag) is False]
        if off:
            change += f"; GPUDirect RDMA is off at {' and '.join(off)}: its data is staged in host memory (see below)"
    return f"{text}. To change: {change}."


def compare_sentence(doc_a: Mapping, doc_b: Mapping) -> str | None:
    """"Expected 8-node busbw 180 -> 120 GB/s (RING); slowest GPU to the network 46.5 -> 8.3 GB/s"."""
    parts = []
    a, b = busbw(doc_a)["multi"], busbw(doc_b)["multi"]
    if a or b:
        def _p(p):
            return f"{p['busbw_gbs']:g}" if p else "none"
        n = (b or a)["nodes"]
        algo = (b or a)["algorithm"]
        parts.append(f"expected {n}-node busbw {_p(a)} -> {_p(b)} GB/s ({algo})")
    one_a, one_b = busbw(doc_a)["one"], busbw(doc_b)["one"]
    if one_a and one_b and one_a["busbw_gbs"] != one_b["busbw_gbs"]:
        parts.append(f"1 node {one_a['busbw_gbs']:g} -> {one_b['busbw_gbs']:g} GB/s")

    def _low(doc):
        vals = [r["effective_gbs"] for r in gpu_rows(doc) if r["effective_gbs"] is not None]
        return min(vals) if vals else None
    la, lb = _low(doc_a), _low(doc_b)
    if la is not None or lb is not None:
        if la != lb:
            parts.append(f"slowest GPU to the network {la if la is not None else 'none'} -> "
                         f"{lb if lb is not None else 'none'} GB/s")
    da, db = len(ports_down(doc_a)), len(ports_down(doc_b))
    if da != db:
        parts.append(f"compute ports down {da} -> {db}")
    if not parts:
        return None
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def numa_words(summary: Mapping | None) -> str:
    """The header's NUMA/socket fact, from the summary's ``numa_nodes`` and ``socket_count``
    (sockets only when a source says: NUMA nodes are not sockets)."""
    s = summary or {}
    numa = int(s.get("numa_nodes") or s.get("sockets") or 0)
    text = f"{numa} NUMA node{'s' if numa != 1 else ''}" if numa else "NUMA nodes unknown"
    if s.get("socket_count"):
        text += f", {s['socket_count']} socket{'s' if s['socket_count'] != 1 else ''}"
    return text


def nic_models(doc: Mapping, *, names: bool = False) -> str:
    """The NICs NCCL may use (``compute`` not False) by rate and link layer, most first, with the
    ports reported not Active counted: "8x 400 Gb/s IB (1 down)"; "NIC" where no rate is reported.
    ``names``: the ports that are down named ("(1 down: mlx5_3)"). What the snapshot stores as
    ``nic_models`` (at most 200 characters) and the host page shows.

    >>> nic_models({"nics": [{"name": "mlx5_0", "rate_gbps": 400, "link_layer": "InfiniBand", "active": False},
    ...                      {"name": "mlx5_1", "rate_gbps": 400, "link_layer": "InfiniBand", "active": True}]},
    ...            names=True)
    '2x 400 Gb/s IB (1 down: mlx5_0)'
    """
    groups: Counter = Counter()
    down: dict[str, list[str]] = {}
    for nic in natural_sorted_nics(list(doc.get("nics") or [])):
        if nic.get("compute") is False:
            continue
        rate = nic.get("rate_gbps")
        layer = {"InfiniBand": "IB", "Ethernet": "Eth"}.get(nic.get("link_layer") or "", "")
        label = (f"{rate:g} Gb/s" if isinstance(rate, (int, float)) else "NIC") + (f" {layer}" if layer else "")
        groups[label] += 1
        if nic.get("active") is False:
            down.setdefault(label, []).append(str(nic.get("name")))
    parts = []
    for label, n in groups.most_common():
        off = down.get(label)
        tail = f" ({len(off)} down{': ' + ', '.join(off) if names else ''})" if off else ""
        parts.append(f"{n}x {label}{tail}")
    return ", ".join(parts)[:200]


def nic_rates_words(doc: Mapping, stored: str) -> str:
    """The NIC summary of the host page: ``nic_models`` with the ports that are down named (the
    ``stored`` summary when the document lists no NIC)."""
    return nic_models(doc, names=True) or stored