"""Fabric rules L01-L08: what the fabric's own account (``ibnetdiscover``/``iblinkinfo``), joined to
the hosts, shows wrong.

Entry point: ``fabric_findings(view, docs=None, job_hosts=None, *, ib_reports=None) -> list[dict]``
with ``view`` a :class:`apps.domain.fabric_paths.FabricView`, ``docs`` the hosts' snapshot
documents (``apps/domain/analysis.py``), ``job_hosts`` a job's hosts in rank order (L04 and L08
need one; L07 then also checks the job) and ``ib_reports`` ``{host: {section kind: parser result}}``
(``HostAnalysis.results``; L01 reads the adapters' CA type from it).

======  =======================================================  ========  ==========================================
ID      Title                                                    Severity  Condition
======  =======================================================  ========  ==========================================
L01     Link trained below its capability                        HIGH      iblinkinfo ``Could be`` (both ends support
                                                                           more); a link below the usual width/speed
                                                                           of its kind, fabric-wide or on its switch
                                                                           (``fabric_health.degraded_links``); the host's
                                                                           ibstat rate and the fabric's for one link
                                                                           differ; an adapter whose CA type can do
                                                                           a faster speed (EDR-capable at SDR) on a
                                                                           leaf that runs other ports at it
L02     Switch port to a host not Active                         HIGH      a switch port cabled to a host adapter is
                                                                           Down, Initialize or Armed (iblinkinfo);
                                                                           or the host's ibstat says Down while the
                                                                           capture shows the link
L03     NIC on the wrong rail's leaf                             MED       on a rail-optimized fabric, a NIC cabled to
                                                                           the leaf of another rail
                                                                           (``fabric_jobs.rail_leaves``)
L04     Leaf uplinks oversubscribed beyond the design for a job  MED/HIGH  the job's adapters on a leaf have more
                                                                           bandwidth than its uplinks beyond the ratio
                                                                           most leaves are built with; HIGH when the
                                                                           job's ring or tree all-reduce flows alone
                                                                           exceed the uplinks
L05     HCA seen by the host but absent from the fabric          HIGH      an InfiniBand compute NIC of a host's
                                                                           document that no adapter of the fabric is
                                                                           (by port GUID, node GUID or description)
L06     Duplicate node descriptions                              LOW/MED   two or more nodes with one description
                                                                           (MED when it names a host: joins by name
                                                                           then merge two machines)
L07     Islands joined by fewer links than hosts need            MED/HIGH  parts of the fabric (pods under a core
                                                                           tier, blocks joined by same-tier links, or
                                                                           disconnected parts) whose links to the rest
                                                                           carry less than the smaller side's host
                                                                           links (islands of one shape: one finding);
                                                                           HIGH when it splits the fabric, or a job's
                                                                           adapters across the cut want more than it
                                                                           carries
L08     Mixed link speeds in one job                             MED       the job's adapters' links run at different
                                                                           widths/speeds
======  =======================================================  ========  ==========================================

A finding is the host rules' record (``findings.base.finding``: ``rule``, ``severity``, ``title``,
``devices``, ``message``, ``fix``, ``source``) plus ``hosts`` (sorted) and ``evidence``: one
``{"switch", "switch_port", "host", "nic", ...}`` per place it names (None where it has none).
Findings are sorted by severity, rule and hosts. The NCCL behaviour the rules lean on is cited
per rule from NCCL v2.30.7-1.

Here: L01-L06, L08 and the entry point. L07 and the islands it judges are in ``fabric_islands``;
the rules' records, the CA-type tables and the helpers every rule uses are in ``fabric_rule_base``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from apps.domain.bandwidth import ib_link_gbps
from apps.domain.fabric import host_key, is_host_ca, is_switch
from apps.domain.fabric_health import degraded_links, down_ports
from apps.domain.fabric_islands import rule_l07
from apps.domain.fabric_jobs import design_oversubscription, job_contention, job_nics, rail_leaves
from apps.domain.fabric_paths import FabricView
from apps.domain.fabric_rule_base import (CA_TYPE_NAME, CA_TYPE_SPEED, FABRIC_RULE_IDS, FABRIC_RULES, IB_SECTIONS, L01,
                                          L02, L03, L04, L05, L06, L07, L08, SPLIT_SKUS, docs_by_host, evidence_row,
                                          fabric_finding, is_ib, lane_rate, nic_label, owner_of)
from apps.domain.findings.base import SEVERITY_RANK, fmt_gbs, fmt_num, join
from apps.domain.names import natural_key
from apps.domain.parsers.fabric_common import host_of

__all__ = ["L01", "L02", "L03", "L04", "L05", "L06", "L07", "L08", "FABRIC_RULES", "FABRIC_RULE_IDS",
           "CA_TYPE_SPEED", "fabric_findings"]

# --- L01 --------------------------------------------------------------------------------------------


def rule_l01(view: FabricView, docs: Mapping[str, Mapping], ib_reports: Mapping[str, Mapping] | None) -> list[dict]:
    """L01 Link trained below its capability.

    Condition: (a) a link ``fabric_health.degraded_links`` reports: iblinkinfo's ``Could be`` (both ends
    support more), or below the usual width/speed of its class (host or switch links), fabric-wide
    or on its switch; (b) an Active host NIC whose ibstat rate (the document's ``rate_gbps``) differs
    from the rate the fabric shows for its link (the same link ran faster in one of the two captures:
    it retrained lower, or it flaps);
    (c) an adapter whose CA type (``ib_reports``; :data:`CA_TYPE_SPEED`) can train a faster speed
    than its link shows, on a leaf that runs another port at that speed or faster (so both ends can:
    an EDR-capable HCA at SDR); not for 4X one speed down on CA types that also make HDR100/NDR200
    adapters (the CA type cannot tell them apart). HIGH. Source: IBA PortInfo; iblinkinfo(8); ibdiagnet.
    """
    G = view.graph
    out, seen = [], set()
    for d in degraded_links(G):
        a, b = d["a"], d["b"]
        sw, sw_port, peer, peer_port = (a, d["a_port"], b, d["b_port"]) if is_switch(G, a) else (
            b, d["b_port"], a, d["a_port"])
        host = nic = None
        if is_host_ca(G, peer):
            host, nic = owner_of(view, peer)
        seen.add((peer, peer_port))
        seen.add((sw, sw_port))
        usual = " ".join(x for x in (d["usual_width"], d["usual_speed"]) if x)
        could = ib_link_gbps(d["usual_width"], d["usual_speed"])
        where = (f"{nic_label(host, nic, G.nodes[peer]['name'] or peer)} on {G.nodes[sw]['name']} port {sw_port}"
                 if is_host_ca(G, peer) else
                 f"{G.nodes[sw]['name']} port {sw_port} to {G.nodes[peer]['name']} port {peer_port}")
        msg = (f"{where}: trained at {d['width']} {d['speed']} ({fmt_gbs(d['gbs'])} per direction); "
               f"{'; '.join(d['reasons'])}."
               + (f" At {usual} it would carry {fmt_gbs(could / 8)}." if could else ""))
        ev = evidence_row(G.nodes[sw]["name"], sw_port, host, nic, peer=G.nodes[peer]["name"], peer_port=peer_port,
                 width=d["width"], speed=d["speed"], usual_width=d["usual_width"], usual_speed=d["usual_speed"])
        out.append(fabric_finding(L01, [host], [nic_label(host, nic, G.nodes[peer]["name"] or peer),
                                                 f"{G.nodes[sw]['name']}/{sw_port}"], msg, [ev]))
    for host, doc in sorted(docs.items(), key=lambda kv: natural_key(kv[0])):
        if view.host(host) is None:
            continue
        for n in doc.get("nics", []):
            row = view.attachment(host, n["name"], n.get("port"))
            lk = view.cable(row) if row else None
            if not lk or not lk.get("usable") or (row["ca"], row["port"]) in seen:
                continue
            got = ib_link_gbps(lk["width"], lk["speed"])
            msg = _host_side_l01(view, host, n, row, lk, got, ib_reports)
            if msg:
                seen.add((row["ca"], row["port"]))
                ev = evidence_row(row["leaf_name"], row["leaf_port"], host, n["name"], width=lk["width"], speed=lk["speed"],
                         host_rate_gbps=n.get("rate_gbps"))
                devices = [f"{host}/{n['name']}", f"{row['leaf_name']}/{row['leaf_port']}"]
                out.append(fabric_finding(L01, [host], devices, msg, [ev]))
    return out


def _ca_type(ib_reports: Mapping[str, Mapping] | None, host: str, nic: str) -> str | None:
    kinds = (ib_reports or {}).get(host) or {}
    for kind in IB_SECTIONS:
        for ca in (kinds.get(kind) or {}).get("cas") or ():
            if ca.get("name") == nic and ca.get("ca_type"):
                return str(ca["ca_type"]).upper()
    return None


def _host_side_l01(view: FabricView, host: str, nic: Mapping, row: Mapping, lk: Mapping, got: float | None,
                   ib_reports: Mapping[str, Mapping] | None) -> str | None:
    where = f"{host}/{nic['name']} on {row['leaf_name']} port {row['leaf_port']}"
    said = float(nic["rate_gbps"]) if nic.get("rate_gbps") else None
    if got is not None and said is not None and nic.get("active") is not False and abs(said - got) > 0.01 * got:
        if said > got:
            return (f"{where}: the host's ibstat reports {fmt_num(said)} Gb/s, but the fabric shows the link at "
                    f"{lk['width']} {lk['speed']} ({fmt_num(got)} Gb/s): it trained lower between the two captures, "
                    "or it flaps.")
        return (f"{where}: the host's ibstat reports {fmt_num(said)} Gb/s, below the {lk['width']} {lk['speed']} "
                f"({fmt_num(got)} Gb/s) the fabric's capture shows for the same link: it retrained lower since, "
                "or it flaps.")
    ca_type = _ca_type(ib_reports, host, nic["name"])
    best = CA_TYPE_SPEED.get(ca_type or "")
    have, can = lane_rate(lk["speed"]), lane_rate(best)
    if have is None or can is None or can <= have:
        return None
    if (ca_type, lk["width"], lk["speed"]) in SPLIT_SKUS:
        return None  # the HDR100 / NDR200 models of that CA type run 4X at the next speed down at most
    leaf_best = max((lane_rate(x["speed"]) or 0.0 for _m, e in view.graph.adj[row["leaf"]].items() for x in e["links"]
                     if x["usable"]), default=0.0)
    if leaf_best < can:
        return None  # the leaf runs nothing faster: it may not be able to
    return (f"{where}: a {best}-capable {CA_TYPE_NAME.get(ca_type, ca_type)} ({ca_type}) trained at {lk['width']} "
            f"{lk['speed']} ({fmt_num(got)} Gb/s), while its leaf runs other ports at {best} or faster: both ends "
            "can do more.")


# --- L02 --------------------------------------------------------------------------------------------


_STATE_WORDS = {
    "Down": "Down: no link (cable, transceiver, or the port at either end)",
    "Initialize": "Initialize: the link is up but no subnet manager has configured the port, so it carries nothing",
    "Initializing": "Initialize: the link is up but no subnet manager has configured the port, so it carries nothing",
    "Armed": "Armed: configured but not activated by the subnet manager, so it carries nothing",
}


def rule_l02(view: FabricView, docs: Mapping[str, Mapping]) -> list[dict]:
    """L02 Switch port to a host not Active.

    Condition: a switch port whose peer is a host adapter is not Active (iblinkinfo prints
    ``Down``/``Initialize``/``Armed``; the CA's own block counts when the switch's is missing); or a
    host document's NIC is Down (ibstat) while the capture shows its link up (the port went down
    after the capture). Down ports with no peer printed (unused or unplugged) are not findings.
    HIGH. Source: IBA PortInfo PortState; iblinkinfo(8); ibstat(8).
    """
    G = view.graph
    out, done = [], set()
    rows = down_ports(G)
    for p in sorted(rows, key=lambda r: (r["type"] != "switch", r["node"], r["port"])):
        n, peer = p["node"], p["peer"]
        if not peer or peer not in G:
            continue
        if p["type"] == "switch" and is_host_ca(G, peer):
            sw, sw_port, ca = n, p["port"], peer
        elif is_host_ca(G, n) and is_switch(G, peer):
            sw, sw_port, ca = peer, G.nodes[n]["ports"][p["port"]].get("peer_port"), n
        else:
            continue
        if (sw, sw_port) in done:
            continue
        done.add((sw, sw_port))
        host, nic = owner_of(view, ca)
        state = p["state"] or "?"
        phys = f"/{p['phys_state']}" if p["phys_state"] else ""
        words = _STATE_WORDS.get(state, f"{state}: not Active")
        label = nic_label(host, nic, G.nodes[ca]["name"] or ca)
        msg = f"{G.nodes[sw]['name']} port {sw_port}, cabled to {label}, is {state}{phys}. {words}."
        out.append(fabric_finding(L02, [host], [label, f"{G.nodes[sw]['name']}/{sw_port}"], msg,
                                   [evidence_row(G.nodes[sw]["name"], sw_port, host, nic, state=state,
                                        phys_state=p["phys_state"])]))
    for host, doc in sorted(docs.items(), key=lambda kv: natural_key(kv[0])):
        for n in doc.get("nics", []):
            down = n.get("active") is False or str(n.get("state") or "").lower() == "down"
            row = view.attachment(host, n["name"], n.get("port")) if down else None
            lk = view.cable(row) if row else None
            if not lk or not lk.get("usable") or (row["leaf"], row["leaf_port"]) in done:
                continue
            done.add((row["leaf"], row["leaf_port"]))
            phys = f"/{n['phys_state']}" if n.get("phys_state") else ""
            msg = (f"{host}/{n['name']} is {n.get('state') or 'Down'}{phys} on the host (ibstat), while the fabric's "
                   f"capture shows its link to {row['leaf_name']} port {row['leaf_port']} up: the port went down after "
                   "the capture (or the capture is older than the host's report).")
            out.append(fabric_finding(L02, [host], [f"{host}/{n['name']}", f"{row['leaf_name']}/{row['leaf_port']}"],
                                       msg, [evidence_row(row["leaf_name"], row["leaf_port"], host, n["name"],
                                                 state=n.get("state"), phys_state=n.get("phys_state"))]))
    return out


# --- L03 --------------------------------------------------------------------------------------------


def rule_l03(view: FabricView) -> list[dict]:
    """L03 NIC on the wrong rail's leaf.

    Condition: the fabric is rail-optimized (``fabric_jobs.rail_leaves``: each leaf carries one NIC
    name, 80 % of the adapters on their own rail's leaf) and a host's NIC is cabled to the leaf of
    another rail; two NICs on each other's leaves are named as swapped. Hosts with half the usual
    adapters or fewer (management, storage) are not compared. MED. F08 (``fleet_rules``) reads the
    same cabling from NCCL's side (``NCCL_CROSS_NIC``); this rule names the switch ports.
    Source: NCCL search.cc L601-615, L827-833.
    """
    owned = rail_leaves(view)
    if not owned["rail_optimized"]:
        return []
    leaves, skipped, out = owned["leaves"], set(owned["skipped"]), []
    on_leaf: dict[str, set[str]] = {}  # leaf -> hosts with an adapter on it
    for h in view.hosts():
        for r in view.host_nics(h).values():
            if r.get("leaf"):
                on_leaf.setdefault(r["leaf"], set()).add(h)
    for h in view.hosts():
        if h in skipped:
            continue
        wrong = [(nic, r) for nic, r in view.host_nics(h).items()
                 if nic and r.get("leaf") in leaves and leaves[r["leaf"]]["rail"] != nic]
        if not wrong:
            continue
        names = {nic for nic, _r in wrong}
        swapped = sorted((nic for nic, r in wrong if leaves[r["leaf"]]["rail"] in names), key=natural_key)
        texts, evidence = [], []
        for nic, r in wrong:
            other = leaves[r["leaf"]]["rail"]
            should = _rail_leaf_of_peers(view, h, nic, leaves, on_leaf)
            texts.append(f"{nic} is cabled to {r['leaf_name']} port {r['leaf_port']}, a leaf of rail {other}"
                         + (f" (the hosts beside it have their {nic} on {should})" if should else ""))
            evidence.append(evidence_row(r["leaf_name"], r["leaf_port"], h, nic, rail_of_leaf=other, rail_leaf=should))
        msg = (f"{h}: {'; '.join(texts)}" + (f": its {join(swapped)} cables are swapped." if len(swapped) >= 2 else ".")
               + " NCCL keeps a channel on one NIC index at both ends, so this host's traffic on these rails crosses "
               "the spines instead of staying on the rail's leaf.")
        out.append(fabric_finding(L03, [h], [f"{h}/{nic}" for nic, _r in wrong], msg, evidence))
    return out


def _rail_leaf_of_peers(view: FabricView, host: str, nic: str, leaves: Mapping[str, Mapping],
                        on_leaf: Mapping[str, set[str]]) -> str | None:
    """The leaf of rail ``nic`` that the hosts beside ``host`` (on its leaves) use: where it belongs."""
    peers = {p for r in view.host_nics(host).values() if r.get("leaf") for p in on_leaf.get(r["leaf"], ())} - {host}
    seen = Counter(r["leaf"] for p in peers for n, r in view.host_nics(p).items()
                   if n == nic and r.get("leaf") and leaves.get(r["leaf"], {}).get("rail") == nic)
    return view.name(seen.most_common(1)[0][0]) if seen else None


# --- L04 --------------------------------------------------------------------------------------------


def rule_l04(view: FabricView, docs: Mapping[str, Mapping], job_hosts: list[str]) -> list[dict]:
    """L04 Leaf uplinks oversubscribed beyond the design for the hosts of a job.

    Condition: on a leaf holding some of the job's adapters, their bandwidth over the leaf's usable
    uplinks (``job_oversubscription``) is above the design ratio (the most common host-facing over
    the most common uplink capacity of the leaves, ``fabric_jobs.design_oversubscription``) and
    above 1 (the job alone could fill the uplinks): MED; HIGH when the job's ring or tree
    all-reduce flows through those uplinks want more than they carry (``demand_ratio`` > 1).
    Source: NCCL init.cc L1291-1301, connect.cc L95-113 / L138-175, trees.cc L32-112.
    """
    design = design_oversubscription(view)
    models = {alg: job_contention(view, docs, job_hosts, alg) for alg in ("ring", "tree")}
    rows = {}
    for alg, jc in models.items():
        for r in jc["leaves"]:
            rows.setdefault(r["leaf"], {})[alg] = r
    out = []
    for leaf, by_alg in rows.items():
        r = by_alg.get("ring") or by_alg["tree"]
        ratio = r["job_oversubscription"]
        over = [alg for alg, x in by_alg.items() if (x["demand_ratio"] or 0.0) > 1.0]
        beyond = ratio is not None and ratio > 1.0 and (design is None or ratio > design + 1e-6)
        if not (beyond or over):
            continue
        msg = (f"{r['name']}: the job's {r['host_links']} adapter(s) on it ({join(r['hosts'])}) have "
               f"{fmt_gbs(r['down_gbs'])} toward the hosts and the leaf {fmt_gbs(r['up_gbs'])} of usable uplinks "
               f"({r['uplinks']} cable{'' if r['uplinks'] == 1 else 's'}): {ratio if ratio is not None else '?'}:1"
               + (f", beyond the {design}:1 most leaves are built with" if design is not None else "") + ".")
        for alg in over:
            x = by_alg[alg]
            msg += (f" Under {alg} all-reduce {fmt_num(x['flows'])} of the job's flows cross these uplinks "
                    f"({fmt_gbs(x['demand_gbs'])}, {x['demand_ratio']}x what they carry).")
        out.append(fabric_finding(L04, r["hosts"], [r["name"]], msg,
                                   [evidence_row(r["name"], None, h, None, uplinks=r["uplinks"], up_gbs=r["up_gbs"],
                                        job_oversubscription=ratio, design=design) for h in r["hosts"]],
                                   severity="HIGH" if over else None))
    return out


# --- L05 --------------------------------------------------------------------------------------------


def rule_l05(view: FabricView, docs: Mapping[str, Mapping]) -> list[dict]:
    """L05 HCA seen by the host but absent from the fabric.

    Condition: an InfiniBand compute NIC of a host's document that no adapter of the fabric is
    (not joined by port GUID, node GUID or description), while the fabric knows the host's other
    adapters or the host's GUIDs are among the unmatched rows of the join. A host whose adapters
    the fabric knows by description only under other names (``HCA-1`` vs ``mlx5_0``) is not judged.
    The NIC's state says why: a port that is not linked is not discovered. HIGH.
    A host none of whose adapters the fabric has (its GUIDs all unmatched) is another case: a discovery
    sees one subnet, and a second island or subnet (another pod, storage) is not in it. Those hosts make
    one LOW finding naming them all, asking for the other subnet's discovery.
    Source: ibnetdiscover(8); ibstat(8).
    """
    unmatched: dict[str, list[dict]] = {}
    for row in view.attachments.get("unmatched") or ():
        unmatched.setdefault(host_key(str(row.get("host"))), []).append(row)
    out, elsewhere = [], []
    for host, doc in sorted(docs.items(), key=lambda kv: natural_key(kv[0])):
        ib = [n for n in doc.get("nics", []) if is_ib(n) and n.get("compute", True)]
        if not ib:
            continue
        known = {nic: r for nic, r in view.host_nics(host).items() if nic}
        gone = [n for n in ib if view.attachment(host, n["name"], n.get("port")) is None]
        guids = {str(r.get("nic")): r.get("port_guid") for r in unmatched.get(host_key(host), [])}
        if not gone or (not known and not guids):
            continue
        if not known:
            elsewhere.append((host, gone))
            continue
        by_name = all(r.get("match") == "name" for r in known.values())
        if known and by_name and not set(known) & {n["name"] for n in ib}:
            continue  # the fabric names this host's adapters otherwise: no join, no verdict
        texts = []
        for n in gone:
            state = n.get("state")
            why = ("not linked, so the discovery cannot see it" if state and state.lower() != "active" else
                   "Active on the host: it is on another subnet than the discovery, or the discovery missed it"
                   if state else "its state was not reported")
            guid = f", port GUID {guids[n['name']]}" if guids.get(n["name"]) else ""
            texts.append(f"{n['name']} ({state or 'state unknown'}{guid}: {why})")
        where = (f"the fabric has {len(known)} of its adapters ({join(sorted(known, key=natural_key))})" if known
                 else "no adapter of the fabric carries its port GUIDs")
        msg = f"{host} sees {len(ib)} InfiniBand compute NIC(s) but {where}; absent: {'; '.join(texts)}."
        out.append(fabric_finding(L05, [host], [f"{host}/{n['name']}" for n in gone], msg,
                                   [evidence_row(None, None, host, n["name"], state=n.get("state"),
                                        port_guid=guids.get(n["name"])) for n in gone]))
    if elsewhere:
        hosts = [h for h, _ in elsewhere]
        msg = (f"{len(hosts)} host(s) report InfiniBand ports of which the discovery has none ({join(hosts)}): they are "
               "on another subnet or island than the one discovered, or the discovery did not reach them. Send the "
               "ibnetdiscover of their subnet to see their switches; their paths use the rail model until then.")
        out.append(fabric_finding(L05, hosts, [f"{h}/{n['name']}" for h, gone in elsewhere for n in gone], msg,
                                   [evidence_row(None, None, h, n["name"], state=n.get("state")) for h, gone in elsewhere
                                    for n in gone],
                                   severity="LOW", title="Hosts whose adapters are all absent from the fabric",
                                   fix="Send the ibnetdiscover of their subnet (agent --fabric on one of them); if "
                                       "they belong on this fabric, check their cabling to its leaves and the subnet "
                                       "manager's partitions."))
    return out


# --- L06 --------------------------------------------------------------------------------------------


def rule_l06(view: FabricView) -> list[dict]:
    """L06 Duplicate node descriptions.

    Condition: two or more switches, or two or more host adapters, share one node description
    (SHARP aggregation nodes, which every Quantum switch carries under one name, are not counted).
    LOW for descriptions that name no host (default ones: the adapters cannot be told apart by
    name); MED when the description names a host (``node17 HCA-1`` twice: joins by name merge two
    machines). Source: IBA NodeDescription; rdma-ndd(8); ibnetdiscover(8).
    """
    G = view.graph
    groups: dict[tuple[str, str], list[str]] = {}
    for n, d in G.nodes(data=True):
        if d.get("name") and (d["type"] == "switch" or is_host_ca(G, n)):
            groups.setdefault((d["type"], d["name"]), []).append(n)
    out = []
    for (kind, name), nodes in sorted(groups.items(), key=lambda kv: (kv[0][0], natural_key(kv[0][1]))):
        if len(nodes) < 2:
            continue
        evidence = []
        for n in sorted(nodes):
            port = next((p for _k, p in sorted(G.nodes[n]["ports"].items(), key=lambda kv: str(kv[0]))
                         if p.get("peer") in G and is_switch(G, p["peer"])), None)
            guid = G.nodes[n].get("guid")
            if kind == "ca" and port:  # where the adapter is cabled, and whose it is
                sw_name = G.nodes[port["peer"]]["name"]
                evidence.append(evidence_row(sw_name, port["peer_port"], *owner_of(view, n), node=n, guid=guid))
            elif kind == "ca":
                evidence.append(evidence_row(None, None, *owner_of(view, n), node=n, guid=guid))
            else:
                evidence.append(evidence_row(name, None, None, None, node=n, guid=guid))
        shown = ", ".join(f"{e['guid']}" + (f" on {e['switch']} port {e['switch_port']}" if kind == "ca" and e["switch"]
                                            else "") for e in evidence[:4])
        shown += f" and {len(evidence) - 4} more" if len(evidence) > 4 else ""
        named = kind == "ca" and host_of(name) is not None
        what = "switches" if kind == "switch" else "host adapters"
        msg = (f"{len(nodes)} {what} share the node description {name!r} ({shown}). "
               + ("It names a host, so joining adapters to hosts by name puts two machines' adapters under one host."
                  if named else "Only their GUIDs tell them apart: the fabric page, an exported Slurm topology and "
                                "joins to hosts by name cannot."))
        out.append(fabric_finding(L06, [e["host"] for e in evidence if named], [name], msg, evidence,
                                   severity="MED" if named else None))
    return out


# --- L08 --------------------------------------------------------------------------------------------


def rule_l08(view: FabricView, docs: Mapping[str, Mapping], job_hosts: list[str]) -> list[dict]:
    """L08 Mixed link speeds where one job spans them.

    Condition: the job's adapters' links (to their leaves, as the capture shows them) run at more
    than one width x speed. MED: NCCL aligns every channel to the slowest rank's bandwidth
    (init.cc L1436-1443), so the job runs at the slowest links' rate. Source: NCCL init.cc.
    """
    groups: dict[tuple[str, str], list[dict]] = {}
    for h in job_hosts:
        for nic, r in job_nics(view, docs, h):
            lk = view.cable(r) if r else None
            if not lk or not lk.get("usable") or ib_link_gbps(lk["width"], lk["speed"]) is None:
                continue
            groups.setdefault((lk["width"], lk["speed"]), []).append(
                evidence_row(r["leaf_name"], r["leaf_port"], h, nic, width=lk["width"], speed=lk["speed"]))
    if len(groups) < 2:
        return []
    order = sorted(groups, key=lambda k: (-(ib_link_gbps(*k) or 0.0), -len(groups[k])))
    parts = []
    for key in order:
        evs = groups[key]
        names = [f"{e['host']}/{e['nic']}" for e in evs]
        parts.append(f"{key[0]} {key[1]} ({fmt_num(ib_link_gbps(*key))} Gb/s): {len(evs)} link(s)"
                     + (f", {join(names[:4])}" + (f" and {len(names) - 4} more" if len(names) > 4 else "")))
    slow = order[-1]
    msg = (f"The job's adapters run at {len(groups)} link rates: {'; '.join(parts)}. NCCL gives every channel the "
           f"slowest rank's bandwidth, so the job runs as if every link were {slow[0]} {slow[1]}.")
    evidence = [e for key in order[1:] for e in groups[key]]
    return [fabric_finding(L08, [e["host"] for e in evidence], [f"{e['host']}/{e['nic']}" for e in evidence], msg,
                            evidence)]


# --- entry point ------------------------------------------------------------------------------------


def fabric_findings(view: FabricView, docs: Iterable[Mapping] | Mapping[str, Mapping] | None = None,
                    job_hosts: Iterable[str] | None = None, *,
                    ib_reports: Mapping[str, Mapping] | None = None) -> list[dict]:
    """Every L01-L08 finding of the fabric (and of a job: ``job_hosts`` in rank order), sorted by
    severity, rule and hosts. Rules that need what was not given (documents for L05, a job for L04
    and L08) find nothing."""
    by_host = docs_by_host(docs)
    job = list(dict.fromkeys(job_hosts)) if job_hosts else []
    out = rule_l01(view, by_host, ib_reports) + rule_l02(view, by_host) + rule_l03(view)
    if job:
        out += rule_l04(view, by_host, job)
    out += rule_l05(view, by_host) + rule_l06(view) + rule_l07(view, by_host, job or None)
    if job:
        out += rule_l08(view, by_host, job)
    out.sort(key=lambda f: (SEVERITY_RANK[f["severity"]], f["rule"], [natural_key(h) for h in f["hosts"]]))
    return out
