"""GPU memory -> remote GPU memory across hosts, from snapshot documents alone.

A cross-host path is the join of three precomputed pieces, so a query never rebuilds a graph
(the web app holds the snapshot documents of ``apps/domain/analysis.py``):

1. the source host's send leg: its ``gpu_nic`` entry for the GPU (through the PXN relay when
   NCCL would use one: PXN is only used in the GPU->NIC direction), including the host-memory
   bounce when GPUDirect RDMA is off;
2. the fabric, **discovered** when a :class:`apps.domain.fabric_paths.FabricView` is given and
   both NICs are in it: NIC -> leaf -> spine(s) -> leaf -> NIC through the real switches, every
   cable bundle a hop with its width, speed and GB/s, and the switch-to-switch hops standing for
   all their equal-cost bundles (subnet managers and adaptive routing spread routes over them, so
   the capacity between two leaves is the narrowest cut of the equal-cost routes, not one cable:
   ``fabric_paths`` module docstring). Otherwise **assumed** (the rail model): one non-blocking
   switch per link layer and rail (NICs with the same rail index, i.e. the same position in each
   host's compute-NIC order, form a rail), different rails joined by an assumed spine. NICs on
   different link layers (InfiniBand vs Ethernet/RoCE) never connect;
3. the destination host's receive leg: its ``gpu_nic`` entry's own path, reversed (NCCL
   receives locally).

Every hop keeps the document's hop keys plus ``host`` (None for fabric hops). ``flows`` is the
number of flows sharing the link when every GPU talks to its NIC at once. Fabric hops also carry
``name``, ``tier``, ``width``, ``speed``, ``gbs`` (the cable bundle, GB/s per direction) and
``state``; a discovered one has kind ``fabric_link``, its ``from_id``/``to_id`` the fabric node ids,
``links`` (cables in the bundle) and ``equal_cost`` (the bundles its stage spreads over; its
``spec_gbs``/``expected_gbs`` are theirs together). Assumed ones keep kind ``fabric``.

Cross-host results add (same-host and unroutable ones carry them too, as None or empty):

* ``fabric``: ``"discovered"`` or ``"assumed"``; ``fabric_reason``: why it is assumed although a
  fabric was given (a NIC not in it, not cabled...), else None;
* ``equal_cost_paths`` / ``equal_cost_port_paths``: the minimum-hop routes between the two NICs as
  switch sequences / counting parallel cables (None when assumed);
* ``fabric_hops``: the fabric part as the page draws it, links and switches in turn:
  ``{"kind": "fabric_link", "name", "from", "to", "from_id", "to_id", "from_port", "to_port",
  "tier", "width", "speed", "gbs", "expected_gbs", "stage_gbs", "stage_expected_gbs", "links",
  "equal_cost", "state", "assumed"}`` (``gbs``/``stage_gbs`` spec, ``expected_gbs``/``stage_expected_gbs``
  what the page shows, as the host hops: this bundle / every equal-cost bundle at its stage) and ``{"kind": "switch", "name", "node", "tier", "choices", "width": None, "speed":
  None, "gbs": None, "state": None, "assumed"}`` (``choices``: equal-cost switches at that place);
* ``fabric_cut``: ``{"gbs", "expected_gbs", "where" ("fabric" | "host link"), "leaf_cut_gbs",
  "leaf_cut_expected_gbs", "bundles" [[from, to]], "stage"}`` (discovered only, else None): the
  narrowest cut between the two NICs. ``bottleneck`` stays the index of the hop where it lies (a
  switch-to-switch hop when the fabric is narrower than the NIC ports) and ``bottleneck_gbs`` is
  the cut's expected GB/s whenever it is the narrowest place;
* ``leaf_src`` / ``leaf_dst``: the leaves' names (discovered), else None.

``path_between(doc_a, gpu_a, doc_b, gpu_b, fabric=None)`` answers one query; :class:`ClusterIndex`
keeps many documents by hostname (and the fabric view) and answers ``"host/GPU3"`` queries.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from apps.domain.bandwidth import ib_port
from apps.domain.names import natural_sorted

if TYPE_CHECKING:  # for annotations only: a view is passed in, never built here
    from apps.domain.fabric_paths import FabricView

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


_NO_FABRIC = {"fabric": None, "fabric_reason": None, "equal_cost_paths": None, "equal_cost_port_paths": None,
              "fabric_hops": [], "fabric_cut": None, "leaf_src": None, "leaf_dst": None}


def _same_host(doc: Mapping, a: str, b: str) -> dict:
    host = doc.get("hostname")
    src, dst = f"{host}/{a}", f"{host}/{b}"
    pair = next((p for p in doc.get("gpu_pairs", []) if {p["a"], p["b"]} == {a, b}), None)
    if a == b or pair is None:
        why = "source and destination are the same GPU" if a == b else f"{host} has no GPU pair {a}-{b}"
        return {"src": src, "dst": dst, "same_host": True, "mechanism": "none", "hops": [], "bottleneck": None,
                "bottleneck_gbs": None, "gdr_src": None, "gdr_dst": None, "explanation": why, **_NO_FABRIC}
    hops = pair["hops"] if pair["a"] == a else _reversed(pair["hops"])
    hops = _with_host(hops, host)
    idx, gbs = _bottleneck(hops)
    text = f"{a} -> {b} on {host}: {pair['reason']}."
    if idx is not None:
        h = hops[idx]
        text += f" Slowest hop: {h['from']} -> {h['to']} ({h['kind']}), {_fmt(gbs)} GB/s."
    return {"src": src, "dst": dst, "same_host": True, "mechanism": pair["mechanism"], "hops": hops,
            "bottleneck": idx, "bottleneck_gbs": gbs, "gdr_src": None, "gdr_dst": None, "explanation": text,
            **_NO_FABRIC}


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
            "explanation": why, **_NO_FABRIC, **{k: v for k, v in flags.items() if k in _NO_FABRIC}}


class _Ends:
    """What both halves of a cross-host path need: the two hosts, GPUs, gpu_nic entries, NIC records."""

    def __init__(self, doc_a: Mapping, gpu_a: str, ea: Mapping, doc_b: Mapping, gpu_b: str, eb: Mapping) -> None:
        self.ha, self.hb = doc_a.get("hostname"), doc_b.get("hostname")
        self.gpu_a, self.gpu_b, self.ea, self.eb = gpu_a, gpu_b, ea, eb
        self.na = _find(doc_a.get("nics", []), "name", ea["nic"]) or {}
        self.nb = _find(doc_b.get("nics", []), "name", eb["nic"]) or {}
        self.ra, self.rb = rails(doc_a).get(ea["nic"]), rails(doc_b).get(eb["nic"])
        self.fa = int(ea.get("nic_share") or 1)
        self.fb = int(eb.get("nic_share") or 1)
        self.layer = self.na.get("link_layer") or self.nb.get("link_layer") or "fabric"


def path_between(doc_a: Mapping, gpu_a: str, doc_b: Mapping, gpu_b: str,
                 fabric: FabricView | None = None, neighbors: Mapping | None = None) -> dict:
    """Hops from ``gpu_a``'s memory on ``doc_a``'s host to ``gpu_b``'s memory on ``doc_b``'s host.

    Returns {"src", "dst", "same_host", "mechanism" ("net" across hosts, else the pair's
    mechanism, "none" without a route), "hops" (document hops + "host"), "bottleneck" (index),
    "bottleneck_gbs", "gdr_src", "gdr_dst", "rail_src", "rail_dst", "explanation"} and the fabric
    keys of the module docstring. ``fabric``: a :class:`apps.domain.fabric_paths.FabricView`;
    the two NICs' route then goes through its switches when both are in it. ``neighbors``: LLDP's
    ``{host: {nic: {"switch", "switch_port"}}}`` (RoCE/Ethernet ports a discovery does not see): with
    the rail model, a NIC's switch is then named (and two NICs on one switch meet there), only the
    switches between two different ones stay assumed.

    Examples
    --------
    >>> hop = {"from": "GPU0", "to": "mlx5_0", "kind": "pcie", "spec_gbs": 31.5, "expected_gbs": 27.72,
    ...        "flows": 1, "note": None}
    >>> doc = lambda h: {"hostname": h, "gpu_pairs": [], "nics": [{"name": "mlx5_0", "rate_gbps": 200,
    ...     "link_layer": "InfiniBand", "compute": True}], "gpu_nic": [{"gpu": "GPU0", "nic": "mlx5_0",
    ...     "path_class": "PIX", "gdr": True, "reason": "", "pxn_via": None, "hops": [hop]}]}
    >>> p = path_between(doc("a"), "GPU0", doc("b"), "GPU0")
    >>> [h["kind"] for h in p["hops"]], p["bottleneck_gbs"], p["fabric"]
    (['pcie', 'fabric', 'fabric', 'pcie'], 23.25, 'assumed')
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
    ends = _Ends(doc_a, gpu_a, ea, doc_b, gpu_b, eb)
    pxn = bool(ea.get("pxn_via") and ea.get("pxn_hops"))
    send = ea["pxn_hops"] if pxn else ea["hops"]
    gdr_src = bool(ea.get("pxn_gdr")) if pxn else bool(ea["gdr"])
    gdr_dst = bool(eb["gdr"])
    leg_a = _with_host(send, ha)
    leg_b = _with_host(_reversed(eb["hops"]), hb)
    lla, llb = ends.na.get("link_layer"), ends.nb.get("link_layer")
    if lla and llb and lla != llb:
        why = (f"No route: {ha}/{ea['nic']} is {lla} and {hb}/{eb['nic']} is {llb}; NICs on different link "
               "layers never connect (NCCL refuses to pair them).")
        return _no_route(src, dst, why, leg_a + leg_b, gdr_src=gdr_src, gdr_dst=gdr_dst)
    route = None
    if fabric is not None:
        route = fabric.route(ha, ea["nic"], hb, eb["nic"], port_a=ends.na.get("port"), port_b=ends.nb.get("port"))
    if route is not None and route["fabric"] == "discovered":
        if not route["reachable"]:
            why = f"No route through the fabric: {route['reason']}."
            return _no_route(src, dst, why, leg_a + leg_b, gdr_src=gdr_src, gdr_dst=gdr_dst, fabric="discovered",
                             fabric_reason=route["reason"], equal_cost_paths=0, equal_cost_port_paths=0,
                             leaf_src=(route["src"] or {}).get("leaf_name"),
                             leaf_dst=(route["dst"] or {}).get("leaf_name"))
        middle, extra, words = _discovered(ends, route)
    else:
        middle, extra, words = _assumed(ends, route["reason"] if route else None, neighbors)
    hops = leg_a + middle + leg_b
    idx, gbs = _bottleneck(hops)
    cut = extra["fabric_cut"]
    if cut and cut["expected_gbs"] is not None and (gbs is None or cut["expected_gbs"] < gbs - 1e-9):
        idx, gbs = len(leg_a) + (cut["stage"] if cut["stage"] is not None else 0), cut["expected_gbs"]
    text = [_leg_words(ha, gpu_a, ea, True), *words, _leg_words(hb, gpu_b, eb, False)]
    text += _bottleneck_words(hops, idx, gbs, _port_ideal(ends, middle, route))
    return {"src": src, "dst": dst, "same_host": False, "mechanism": "net", "hops": hops, "bottleneck": idx,
            "bottleneck_gbs": gbs, "gdr_src": gdr_src, "gdr_dst": gdr_dst, "rail_src": ends.ra,
            "rail_dst": ends.rb, "explanation": " ".join(text), **extra}


def _port_ideal(ends: _Ends, middle: list[dict], route: Mapping | None) -> float | None:
    """What the NIC ports could carry (GB/s per direction, expected): the fabric's cables when
    discovered, else the ports' reported rates."""
    if route is not None and route["fabric"] == "discovered":
        vals = [middle[0].get("expected_gbs"), middle[-1].get("expected_gbs")]
    else:
        vals = [ib_port(ends.na.get("rate_gbps")).expected_gbs, ib_port(ends.nb.get("rate_gbps")).expected_gbs]
    return min((v for v in vals if v is not None), default=None)


def _bottleneck_words(hops: list[dict], idx: int | None, gbs: float | None, ideal: float | None) -> list[str]:
    words = []
    if idx is not None:
        h = hops[idx]
        where = f"{h['host']}: " if h.get("host") else ""
        text = f"Slowest hop: {where}{h['from']} -> {h['to']} ({h['kind']}), {_fmt(gbs)} GB/s"
        if (h.get("equal_cost") or 1) > 1:
            text += f" over its {h['equal_cost']} equal-cost bundles together (the narrowest cut between the leaves)"
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
    return words


# --- the rail model (no fabric, or a NIC the fabric does not have) --------------------------------


def _neighbor(neighbors: Mapping | None, host: str, nic: str) -> Mapping | None:
    row = ((neighbors or {}).get(host) or {}).get(nic)
    return row if row and row.get("switch") else None


def _assumed(ends: _Ends, reason: str | None,
             neighbors: Mapping | None = None) -> tuple[list[dict], dict, list[str]]:
    ea, eb, ha, hb, ra, rb = ends.ea, ends.eb, ends.ha, ends.hb, ends.ra, ends.rb
    pa, pb = ib_port(ends.na.get("rate_gbps")), ib_port(ends.nb.get("rate_gbps"))
    sw_a = f"{ends.layer} rail {ra if ra is not None else '?'} switch"
    sw_b = f"{ends.layer} rail {rb if rb is not None else '?'} switch"
    la, lb = _neighbor(neighbors, ha, ea["nic"]), _neighbor(neighbors, hb, eb["nic"])
    if la and lb:  # LLDP names both switches: they meet on one, or the switches between stay assumed
        sw_a, sw_b = la["switch"], lb["switch"]
        ra, rb = (0, 0) if sw_a == sw_b else (0, 1)
    hops = [{"from": ea["nic"], "to": sw_a, "from_id": ea["nic"], "to_id": None, "kind": "fabric",
             "spec_gbs": pa.spec_gbs, "expected_gbs": pa.expected_gbs, "flows": ends.fa,
             "note": _port_note(ha, ea["nic"], ends.na), "host": None, "assumed": False,
             **_assumed_fields(f"{ha}/{ea['nic']} -> {sw_a}", pa.spec_gbs, ends.na)}]
    if ra != rb:
        hops.append({"from": sw_a, "to": sw_b, "from_id": None, "to_id": None, "kind": "fabric",
                     "spec_gbs": None, "expected_gbs": None, "flows": 1, "host": None, "assumed": False,
                     "note": ("LLDP names both switches; a non-blocking path between them is assumed (no "
                              "discovery of the switches above them)" if la and lb else
                              "different rails: a non-blocking spine between rail switches is assumed"),
                     **_assumed_fields(f"{sw_a} -> {sw_b}", None, {})})
    hops.append({"from": sw_b, "to": eb["nic"], "from_id": None, "to_id": eb["nic"], "kind": "fabric",
                 "spec_gbs": pb.spec_gbs, "expected_gbs": pb.expected_gbs, "flows": ends.fb,
                 "note": _port_note(hb, eb["nic"], ends.nb), "host": None, "assumed": False,
                 **_assumed_fields(f"{sw_b} -> {hb}/{eb['nic']}", pb.spec_gbs, ends.nb)})
    switches = [sw_a] if ra == rb else [sw_a, sw_b]
    named = bool(la and lb)  # the switches are LLDP's: named, not assumed
    ports = [(None, la["switch_port"] if named else None)] + ([(None, None)] if ra != rb else []) + [
        (lb["switch_port"] if named else None, None)]
    fabric_hops = []
    for i, h in enumerate(hops):
        fabric_hops.append(_link_entry(h, {"from_name": h["from"], "to_name": h["to"], "from_port": ports[i][0],
                                           "to_port": ports[i][1], "expected_gbs": h["expected_gbs"]},
                                       not named or i not in (0, len(hops) - 1)))
        if i < len(switches):
            fabric_hops.append({"kind": "switch", "name": switches[i], "node": None, "tier": "leaf" if named else None,
                                "choices": None, "width": None, "speed": None, "gbs": None, "state": None,
                                "assumed": not named})
    words = []
    if reason:
        words.append(f"The fabric capture cannot place this route ({reason}), so the rail model is assumed.")
    if named:
        where = (f"both on {sw_a} (ports {la['switch_port']} and {lb['switch_port']}, LLDP)" if sw_a == sw_b else
                 f"on {sw_a} port {la['switch_port']} and {sw_b} port {lb['switch_port']} (LLDP); the switches "
                 "between them are not discovered, a non-blocking path is assumed")
        words.append(f"{ha}/{ea['nic']} and {hb}/{eb['nic']} are cabled {where}.")
    elif ra == rb:
        words.append(f"{ha}/{ea['nic']} and {hb}/{eb['nic']} are both on rail {ra} "
                     f"({ends.layer}; one non-blocking switch per rail assumed).")
    else:
        words.append(f"{ha}/{ea['nic']} is on rail {ra} and {hb}/{eb['nic']} on rail {rb}: the traffic "
                     "crosses rails (a spine is assumed).")
    extra = {**_NO_FABRIC, "fabric": "assumed", "fabric_reason": reason, "fabric_hops": fabric_hops}
    return hops, extra, words


def _assumed_fields(name: str, gbs: float | None, nic: Mapping) -> dict:
    return {"name": name, "tier": None, "width": None, "speed": None, "gbs": gbs, "state": nic.get("state")}


def _link_entry(h: Mapping, lk: Mapping, assumed: bool) -> dict:
    """A ``fabric_hops`` link from its path hop ``h`` and the fabric's link record ``lk``."""
    return {"kind": "fabric_link", "name": h["name"], "from": lk["from_name"], "to": lk["to_name"],
            "from_id": h.get("from_id"), "to_id": h.get("to_id"), "from_port": lk["from_port"],
            "to_port": lk["to_port"], "tier": h["tier"], "width": h["width"], "speed": h["speed"], "gbs": h["gbs"],
            "expected_gbs": lk["expected_gbs"], "stage_gbs": h["spec_gbs"], "stage_expected_gbs": h["expected_gbs"],
            "links": h.get("links"),
            "equal_cost": h.get("equal_cost"), "state": h["state"], "assumed": assumed}


# --- the discovered fabric ------------------------------------------------------------------------


def _discovered(ends: _Ends, route: Mapping) -> tuple[list[dict], dict, list[str]]:
    links, switches = route["links"], route["switches"]
    ea, eb, ha, hb = ends.ea, ends.eb, ends.ha, ends.hb
    hops = []
    for i, lk in enumerate(links):
        first, last = i == 0, i == len(links) - 1
        frm = ea["nic"] if first else lk["from_name"]
        to = eb["nic"] if last else lk["to_name"]
        if first or last:
            host, nic, row = (ha, ea["nic"], route["src"]) if first else (hb, eb["nic"], route["dst"])
            note = (f"{host}/{nic} ({row['ca_name']} port {row['port']}) is cabled to {row['leaf_name']} port "
                    f"{row['leaf_port']}: {_rate_words(lk)}" if row.get("leaf") else
                    f"{host}/{nic} is cabled straight to the other adapter: {_rate_words(lk)}")
        elif lk["stage_bundles"] > 1:
            note = (f"one of {lk['stage_bundles']} equal-cost bundles between the {lk['tier'].replace('-', ' and ')} "
                    f"tiers on these routes ({lk['stage_links']} cables, {_fmt(lk['stage_gbs'])} GB/s together; "
                    f"this one {lk['links']} x {_rate_words(lk)}): the fabric spreads routes over all of them")
        else:
            note = f"the only bundle at this place on these routes: {lk['links']} x {_rate_words(lk)}"
        hops.append({"from": frm, "to": to, "from_id": ea["nic"] if first else lk["from"],
                     "to_id": eb["nic"] if last else lk["to"], "kind": "fabric_link",
                     "spec_gbs": lk["stage_gbs"], "expected_gbs": lk["stage_expected_gbs"],
                     "flows": ends.fa if first else ends.fb if last else 1, "note": note, "host": None,
                     "assumed": False, "name": f"{lk['from_name']} -> {lk['to_name']}", "tier": lk["tier"],
                     "width": lk["width"], "speed": lk["speed"], "gbs": lk["gbs"], "state": lk["state"],
                     "links": lk["links"], "equal_cost": lk["stage_bundles"]})
    fabric_hops = []
    for i, (h, lk) in enumerate(zip(hops, links)):
        fabric_hops.append(_link_entry(h, lk, False))
        if i < len(switches):
            sw = switches[i]
            fabric_hops.append({"kind": "switch", "name": sw["name"], "node": sw["node"], "tier": sw["tier"],
                                "choices": sw["choices"], "width": None, "speed": None, "gbs": None, "state": None,
                                "assumed": False})
    extra = {"fabric": "discovered", "fabric_reason": None, "equal_cost_paths": route["equal_cost_paths"],
             "equal_cost_port_paths": route["equal_cost_port_paths"], "fabric_hops": fabric_hops,
             "fabric_cut": route["cut"], "leaf_src": route["src"].get("leaf_name"),
             "leaf_dst": route["dst"].get("leaf_name")}
    return hops, extra, [_route_words(ends, route)]


def _rate_words(lk: Mapping) -> str:
    rate = " ".join(x for x in (lk.get("width"), lk.get("speed")) if x) or "rate not printed"
    gbs = f", {_fmt(lk['gbs'])} GB/s" if lk.get("gbs") is not None else ""
    state = f", {lk['state']}" if lk.get("state") else ""
    return f"{rate}{gbs}{state}"


def _route_words(ends: _Ends, route: Mapping) -> str:
    a, b, cut, switches = route["src"], route["dst"], route["cut"] or {}, route["switches"]
    ea, eb = f"{ends.ha}/{ends.ea['nic']}", f"{ends.hb}/{ends.eb['nic']}"
    if not switches:
        return f"{ea} and {eb} are cabled to each other, with no switch between them."
    if len(switches) == 1:
        return (f"{ea} and {eb} are cabled to the same leaf, {a['leaf_name']} (ports {a['leaf_port']} and "
                f"{b['leaf_port']}), so the traffic turns there.")
    inner = switches[1:-1]
    if not inner:
        return (f"{ea} is cabled to {a['leaf_name']} port {a['leaf_port']} and {eb} to {b['leaf_name']} port "
                f"{b['leaf_port']}; the two leaves are cabled to each other ({_fmt(cut.get('leaf_cut_gbs'))} GB/s "
                "per direction between them).")
    middle = " / ".join(f"{s['choices']} {s['tier']}" for s in inner)
    one = len(inner) == 1 and inner[0]["choices"] == 1
    n = route["equal_cost_paths"]
    text = (f"{ea} is cabled to {a['leaf_name']} port {a['leaf_port']} and {eb} to {b['leaf_name']} port "
            f"{b['leaf_port']}; between the two leaves the fabric has {n} equal-cost route{'s' if n != 1 else ''} "
            f"through {middle} switch{'' if one else 'es'} ({len(switches) - 1} switch hops)")
    carried = cut.get("leaf_cut_expected_gbs")
    carried = cut.get("leaf_cut_gbs") if carried is None else carried
    if carried is not None:  # expected GB/s, as every other figure of the path
        text += f", whose narrowest cut carries {_fmt(carried)} GB/s per direction"
        text += (": less than the NIC ports, so the fabric is the bottleneck" if cut.get("where") == "fabric"
                 else ", more than the NIC ports need")
    return text + "."


def _port_note(host: str, nic: str, rec: Mapping) -> str:
    rate = rec.get("rate_gbps")
    if rate:
        return f"{host}/{nic} port at {rate:g} Gb/s"
    return f"{host}/{nic} port rate not reported (send ibstat to know)"


SAME_HOST_KEYS = ("hostname", "gpus", "gpu_pairs")
CROSS_HOST_KEYS = ("hostname", "gpus", "gpu_nic", "nics", "network")
PATH_KEYS = ("hostname", "gpus", "gpu_nic", "nics", "network", "gpu_pairs")
"""The keys of a snapshot document that ``path_between`` reads (its legs): the GPU pairs for a path
on one host (``SAME_HOST_KEYS``); each GPU's way to its NIC, the NICs and what the network section
says for a path between two (``CROSS_HOST_KEYS``). A path needs nothing else."""


def legs(doc: Mapping) -> dict:
    """The part of ``doc`` that ``path_between`` reads (``PATH_KEYS``): about half of an 8-GPU
    document's JSON, without the graph, estimate and findings.

    >>> sorted(legs({"hostname": "a", "graph": {}, "gpu_nic": []}))
    ['gpu_nic', 'hostname']
    """
    return {k: doc[k] for k in PATH_KEYS if k in doc}


class ClusterIndex:
    """The legs (``legs``) of snapshot documents by hostname, answering ``"host/GPU<i>"`` path
    queries (through ``fabric``, a :class:`apps.domain.fabric_paths.FabricView`, when given).

    Each host's legs are kept as compressed JSON (about 5 KB for an 8-GPU host, against some 100 KB
    as Python objects) and read back for the two hosts of a query (well under a millisecond), so a
    document read to fill the index is freed and 16,384 hosts fit in some 100 MB.

    >>> idx = ClusterIndex([{"hostname": "a", "gpu_pairs": [], "gpu_nic": []}])
    >>> idx.path("a/GPU0", "b/GPU1")["explanation"]
    'unknown host b'
    """

    def __init__(self, docs: Iterable[Mapping] = (), fabric: FabricView | None = None) -> None:
        self._legs: dict[str, bytes] = {}
        self.fabric = fabric
        for d in docs:
            self.add(d)

    def add(self, doc: Mapping) -> None:
        self._legs[doc["hostname"]] = zlib.compress(json.dumps(legs(doc), separators=(",", ":")).encode(), 1)

    def __len__(self) -> int:
        return len(self._legs)

    def __contains__(self, hostname: str) -> bool:
        return hostname in self._legs

    def legs_of(self, hostname: str) -> dict:
        """The legs kept for ``hostname`` (a new dict each call); KeyError when it is not indexed."""
        return json.loads(zlib.decompress(self._legs[hostname]))

    def path(self, src: str, dst: str) -> dict:
        (ha, ga), (hb, gb) = _split(src), _split(dst)
        for h in (ha, hb):
            if h not in self._legs:
                return _no_route(src, dst, f"unknown host {h}")
        doc_a = self.legs_of(ha)
        return path_between(doc_a, ga, doc_a if hb == ha else self.legs_of(hb), gb, fabric=self.fabric)


def _split(endpoint: str) -> tuple[str, str]:
    host, _, gpu = endpoint.rpartition("/")
    if not host or not gpu:
        raise ValueError(f"expected HOST/GPU<i>, got {endpoint!r}")
    return host, gpu
