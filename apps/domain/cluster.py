"""GPU memory -> remote GPU memory across hosts, from snapshot documents alone.

A cross-host path is the join of three precomputed pieces, so a query never rebuilds a graph
(the web app holds the snapshot documents of ``apps/domain/analysis.py``):

1. the source host's send leg: its ``gpu_nic`` entry for the GPU (through the PXN relay when
   NCCL would use one: PXN is only used in the GPU->NIC direction), including the host-memory
   bounce when GPUDirect RDMA is off;
2. the fabric: until switch topology is ingested, one non-blocking switch per link layer and
   rail (NICs with the same rail index, i.e. the same position in each host's compute-NIC
   order, form a rail); different rails are assumed joined by a spine; NICs on different link
   layers (InfiniBand vs Ethernet/RoCE) never connect;
3. the destination host's receive leg: its ``gpu_nic`` entry's own path, reversed (NCCL
   receives locally).

Every hop keeps the document's hop keys plus ``host`` (None for fabric hops). ``flows`` is the
number of flows sharing the link when every GPU talks to its NIC at once.

``path_between(doc_a, gpu_a, doc_b, gpu_b)`` answers one query; :class:`ClusterIndex` keeps
many documents by hostname and answers ``"host/GPU3"`` queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from apps.domain.bandwidth import ib_port
from apps.domain.names import natural_sorted

__all__ = ["path_between", "ClusterIndex", "rails"]


def rails(doc: Mapping) -> dict[str, int]:
    """NIC name -> rail index: position among the host's compute NICs in name order."""
    have = {n["name"]: n["rail"] for n in doc.get("nics", []) if n.get("rail") is not None}
    if have:
        return have
    names = natural_sorted(n["name"] for n in doc.get("nics", []) if n.get("compute"))
    return {n: i for i, n in enumerate(names)}


def _gbs(h: Mapping) -> float | None:
    v = h.get("expected_gbs")
    return v if v is not None else h.get("spec_gbs")


def _bottleneck(hops: list[dict]) -> tuple[int | None, float | None]:
    best: tuple[int | None, float | None] = (None, None)
    for i, h in enumerate(hops):
        v = _gbs(h)
        if v is not None and (best[1] is None or v < best[1]):
            best = (i, v)
    return best


def _with_host(hops: Iterable[Mapping], host: str | None) -> list[dict]:
    return [{**h, "host": host} for h in hops]


def _reversed(hops: Iterable[Mapping]) -> list[dict]:
    out = []
    for h in reversed(list(hops)):
        out.append({**h, "from": h["to"], "to": h["from"], "from_id": h.get("to_id"), "to_id": h.get("from_id")})
    return out


def _find(items: Iterable[Mapping], key: str, value: str) -> Mapping | None:
    return next((x for x in items if x.get(key) == value), None)


def _fmt(v: float | None) -> str:
    return "?" if v is None else f"{v:.1f}"


def _same_host(doc: Mapping, a: str, b: str) -> dict:
    host = doc.get("hostname")
    src, dst = f"{host}/{a}", f"{host}/{b}"
    pair = next((p for p in doc.get("gpu_pairs", []) if {p["a"], p["b"]} == {a, b}), None)
    if a == b or pair is None:
        why = "source and destination are the same GPU" if a == b else f"{host} has no GPU pair {a}-{b}"
        return {"src": src, "dst": dst, "same_host": True, "mechanism": "none", "hops": [], "bottleneck": None,
                "bottleneck_gbs": None, "gdr_src": None, "gdr_dst": None, "explanation": why}
    hops = pair["hops"] if pair["a"] == a else _reversed(pair["hops"])
    hops = _with_host(hops, host)
    idx, gbs = _bottleneck(hops)
    text = f"{a} -> {b} on {host}: {pair['reason']}."
    if idx is not None:
        h = hops[idx]
        text += f" Slowest hop: {h['from']} -> {h['to']} ({h['kind']}), {_fmt(gbs)} GB/s."
    return {"src": src, "dst": dst, "same_host": True, "mechanism": pair["mechanism"], "hops": hops,
            "bottleneck": idx, "bottleneck_gbs": gbs, "gdr_src": None, "gdr_dst": None, "explanation": text}


def _leg_words(host: str, gpu: str, e: Mapping, sending: bool) -> str:
    nic, cls = e["nic"], e["path_class"]
    if sending and e.get("pxn_via"):
        return (f"{host}/{gpu} has no NIC close enough for GPUDirect RDMA ({nic} is {cls}); NCCL relays its data "
                f"over NVLink to {e['pxn_via']}, which sits next to {nic} (PXN).")
    if e["gdr"]:
        verb = "sends straight from GPU memory to" if sending else "receives straight into GPU memory from"
        return f"{host}/{gpu} {verb} {nic} over PCIe ({cls}, GPUDirect RDMA)."
    crosses = any(h["kind"] == "inter_socket" for h in e["hops"])
    via = "CPU memory and the inter-socket link" if crosses else "CPU memory"
    if cls in ("PHB", "NODE", "SYS"):
        lead = f"{host}/{gpu} has no NIC behind its PCIe switch (its NIC {nic} is {cls})"
    else:
        lead = f"{host}/{gpu} cannot use GPUDirect RDMA with {nic} ({e['reason']})"
    return f"{lead}; its data goes through {via}." if sending else f"{lead}; incoming data lands in {via} first."


def _no_route(src: str, dst: str, why: str, hops: list[dict] | None = None, **flags) -> dict:
    return {"src": src, "dst": dst, "same_host": False, "mechanism": "none", "hops": hops or [], "bottleneck": None,
            "bottleneck_gbs": None, "gdr_src": flags.get("gdr_src"), "gdr_dst": flags.get("gdr_dst"),
            "explanation": why}


def path_between(doc_a: Mapping, gpu_a: str, doc_b: Mapping, gpu_b: str) -> dict:
    """Hops from ``gpu_a``'s memory on ``doc_a``'s host to ``gpu_b``'s memory on ``doc_b``'s host.

    Returns {"src", "dst", "same_host", "mechanism" ("net" across hosts, else the pair's
    mechanism, "none" without a route), "hops" (document hops + "host"), "bottleneck" (index),
    "bottleneck_gbs", "gdr_src", "gdr_dst", "rail_src", "rail_dst", "explanation"}.

    Examples
    --------
    >>> hop = {"from": "GPU0", "to": "mlx5_0", "kind": "pcie", "spec_gbs": 31.5, "expected_gbs": 27.72,
    ...        "flows": 1, "note": None}
    >>> doc = lambda h: {"hostname": h, "gpu_pairs": [], "nics": [{"name": "mlx5_0", "rate_gbps": 200,
    ...     "link_layer": "InfiniBand", "compute": True}], "gpu_nic": [{"gpu": "GPU0", "nic": "mlx5_0",
    ...     "path_class": "PIX", "gdr": True, "reason": "", "pxn_via": None, "hops": [hop]}]}
    >>> p = path_between(doc("a"), "GPU0", doc("b"), "GPU0")
    >>> [h["kind"] for h in p["hops"]], p["bottleneck_gbs"]
    (['pcie', 'fabric', 'fabric', 'pcie'], 23.25)
    """
    ha, hb = doc_a.get("hostname"), doc_b.get("hostname")
    if doc_a is doc_b or ha == hb:
        return _same_host(doc_a, gpu_a, gpu_b)
    src, dst = f"{ha}/{gpu_a}", f"{hb}/{gpu_b}"
    ea = _find(doc_a.get("gpu_nic", []), "gpu", gpu_a)
    eb = _find(doc_b.get("gpu_nic", []), "gpu", gpu_b)
    for host, doc, g, e in ((ha, doc_a, gpu_a, ea), (hb, doc_b, gpu_b, eb)):
        if e is None:
            known = _find(doc.get("gpus", []), "name", g) is not None or not doc.get("gpus")
            net = doc.get("network") or {}
            why = (f"{host}/{g} has no usable NIC: {net['message']}" if known and net.get("message")
                   and net.get("state") in ("all_down", "no_rdma_nic") else
                   f"{host}/{g} has no usable NIC: no active NIC port is reachable from it"
                   if known else f"{host} has no {g}")
            return _no_route(src, dst, why)
    pxn = bool(ea.get("pxn_via") and ea.get("pxn_hops"))
    send = ea["pxn_hops"] if pxn else ea["hops"]
    gdr_src = bool(ea.get("pxn_gdr")) if pxn else bool(ea["gdr"])
    gdr_dst = bool(eb["gdr"])
    leg_a = _with_host(send, ha)
    leg_b = _with_host(_reversed(eb["hops"]), hb)
    na = _find(doc_a.get("nics", []), "name", ea["nic"]) or {}
    nb = _find(doc_b.get("nics", []), "name", eb["nic"]) or {}
    lla, llb = na.get("link_layer"), nb.get("link_layer")
    if lla and llb and lla != llb:
        why = (f"No route: {ha}/{ea['nic']} is {lla} and {hb}/{eb['nic']} is {llb}; NICs on different link "
               "layers never connect (NCCL refuses to pair them).")
        return _no_route(src, dst, why, leg_a + leg_b, gdr_src=gdr_src, gdr_dst=gdr_dst)
    layer = lla or llb or "fabric"
    ra, rb = rails(doc_a).get(ea["nic"]), rails(doc_b).get(eb["nic"])
    pa, pb = ib_port(na.get("rate_gbps")), ib_port(nb.get("rate_gbps"))
    fa = int(ea.get("nic_share") or 1)
    fb = int(eb.get("nic_share") or 1)
    sw_a = f"{layer} rail {ra if ra is not None else '?'} switch"
    sw_b = f"{layer} rail {rb if rb is not None else '?'} switch"
    fabric = [{"from": ea["nic"], "to": sw_a, "from_id": ea["nic"], "to_id": None, "kind": "fabric",
               "spec_gbs": pa.spec_gbs, "expected_gbs": pa.expected_gbs, "flows": fa,
               "note": _port_note(ha, ea["nic"], na), "host": None, "assumed": False}]
    if ra != rb:
        fabric.append({"from": sw_a, "to": sw_b, "from_id": None, "to_id": None, "kind": "fabric",
                       "spec_gbs": None, "expected_gbs": None, "flows": 1, "host": None, "assumed": False,
                       "note": "different rails: a non-blocking spine between rail switches is assumed"})
    fabric.append({"from": sw_b, "to": eb["nic"], "from_id": None, "to_id": eb["nic"], "kind": "fabric",
                   "spec_gbs": pb.spec_gbs, "expected_gbs": pb.expected_gbs, "flows": fb,
                   "note": _port_note(hb, eb["nic"], nb), "host": None, "assumed": False})
    hops = leg_a + fabric + leg_b
    idx, gbs = _bottleneck(hops)
    words = [_leg_words(ha, gpu_a, ea, True)]
    if ra == rb:
        words.append(f"{ha}/{ea['nic']} and {hb}/{eb['nic']} are both on rail {ra} "
                     f"({layer}; one non-blocking switch per rail assumed).")
    else:
        words.append(f"{ha}/{ea['nic']} is on rail {ra} and {hb}/{eb['nic']} on rail {rb}: the traffic "
                     "crosses rails (a spine is assumed).")
    words.append(_leg_words(hb, gpu_b, eb, False))
    if idx is not None:
        h = hops[idx]
        where = f"{h['host']}: " if h.get("host") else ""
        ideal = min((v for v in (pa.expected_gbs, pb.expected_gbs) if v is not None), default=None)
        text = f"Slowest hop: {where}{h['from']} -> {h['to']} ({h['kind']}), {_fmt(gbs)} GB/s"
        if ideal is not None and gbs is not None and gbs < ideal * 0.95:
            text += f" instead of the {_fmt(ideal)} GB/s the NIC port could carry"
        if h.get("assumed") and h.get("note"):
            text += f" (an assumed figure: {str(h['note']).removeprefix('assumed: ')})"
        if (h.get("flows") or 1) > 1:
            text += f"; {h['flows']} flows share it when every GPU talks to its NIC at once"
        words.append(text + ".")
    unknown = sum(1 for h in hops if _gbs(h) is None and h["kind"] not in ("host_memory_copy", "cpu_link")
                  and not str(h.get("note") or "").startswith("inside the root complex")
                  and not (h["kind"] == "fabric" and h["from_id"] is None and h["to_id"] is None))
    if unknown:
        words.append(f"{unknown} hop(s) have no known bandwidth (link generation/width or port rate not "
                     "reported), so the real bottleneck may be one of them.")
    return {"src": src, "dst": dst, "same_host": False, "mechanism": "net", "hops": hops, "bottleneck": idx,
            "bottleneck_gbs": gbs, "gdr_src": gdr_src, "gdr_dst": gdr_dst, "rail_src": ra, "rail_dst": rb,
            "explanation": " ".join(words)}


def _port_note(host: str, nic: str, rec: Mapping) -> str:
    rate = rec.get("rate_gbps")
    if rate:
        return f"{host}/{nic} port at {rate:g} Gb/s"
    return f"{host}/{nic} port rate not reported (send ibstat to know)"


class ClusterIndex:
    """Snapshot documents by hostname, answering ``"host/GPU<i>"`` path queries.

    >>> idx = ClusterIndex([{"hostname": "a", "gpu_pairs": [], "gpu_nic": []}])
    >>> idx.path("a/GPU0", "b/GPU1")["explanation"]
    'unknown host b'
    """

    def __init__(self, docs: Iterable[Mapping] = ()) -> None:
        self.docs: dict[str, Mapping] = {}
        for d in docs:
            self.add(d)

    def add(self, doc: Mapping) -> None:
        self.docs[doc["hostname"]] = doc

    def __len__(self) -> int:
        return len(self.docs)

    def path(self, src: str, dst: str) -> dict:
        (ha, ga), (hb, gb) = _split(src), _split(dst)
        for h in (ha, hb):
            if h not in self.docs:
                return _no_route(src, dst, f"unknown host {h}")
        return path_between(self.docs[ha], ga, self.docs[hb], gb)


def _split(endpoint: str) -> tuple[str, str]:
    host, _, gpu = endpoint.rpartition("/")
    if not host or not gpu:
        raise ValueError(f"expected HOST/GPU<i>, got {endpoint!r}")
    return host, gpu
