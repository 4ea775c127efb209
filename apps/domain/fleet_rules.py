"""Rules that compare several nodes: F08 (rail / cross-NIC mismatch) and H08 (NIC count mismatch).

One node report sees one host; these two rules of domain.md section 1 need the nodes of a cluster
(or of a job): the hosts' snapshot documents (``apps/domain/analysis.py``) and, for F08, the
fabric's own account of its cabling, an ``ibnetdiscover`` or ``iblinkinfo`` result (which leaf
switch each host adapter is cabled to, ``apps/domain/fabric.py``). Like the per-host rules they
are pure functions returning findings, ``{"rule", "severity", "title", "devices", "message", "fix",
"source", "hosts"}`` (devices are ``host/NIC``), for the cluster page to list.

What the inputs cannot tell is said, never guessed: ``evaluate_fleet`` returns ``unknowns``, one
sentence per check it could not make (hosts whose port states were not reported, adapters the
fabric names without a host, F08 without a fabric).

>>> from apps.domain.fleet_rules import evaluate_fleet
>>> doc = lambda h, active: {"hostname": h, "summary": {"gpu_count": 0, "gpu_model": None}, "gpus": [],
...     "nics": [{"name": f"mlx5_{i}", "state": "Active" if i < active else "Down", "active": i < active,
...               "compute": True, "link_layer": "InfiniBand", "rate_gbps": 400} for i in range(8)]}
>>> report = evaluate_fleet([doc("a", 8), doc("b", 8), doc("c", 7)])
>>> [(f["rule"], f["hosts"]) for f in report["findings"]]
[('H08', ['c'])]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import networkx as nx

from apps.domain.fabric import attach_hosts, build_fabric
from apps.domain.findings.base import SEVERITY_RANK, Ctx, Rule, finding, gpu_sort_key, join

__all__ = ["F08", "H08", "FLEET_RULE_IDS", "evaluate_fleet", "rule_f08", "rule_h08", "defer_to_l03"]

F08 = Rule("F08", "Rail/cross-NIC mismatch", "MED",
           "Fix the cabling so that every node's NIC k reaches the leaf of rail k; on a fabric that is not "
           "rail-optimized set NCCL_CROSS_NIC=1, and keep NCCL_CROSS_NIC=0 for strict rails only.",
           "env NCCL_CROSS_NIC, NCCL_IGNORE_NET_MISMATCH [S12]; NCCL #1600 [S48]")
H08 = Rule("H08", "Multi-NIC per node mismatch across nodes", "MED",
           "Repair the odd node's ports (cable, transceiver, switch port, subnet manager), or leave the node out of "
           "jobs with the others until it has as many Active NICs.",
           "env NCCL_IGNORE_NET_MISMATCH [S12]")
FLEET_RULE_IDS = ("F08", "H08")

# a leaf belongs to a rail when most of the adapters cabled to it carry one NIC name
_RAIL_SHARE = 0.5
# a fabric is rail-optimized when this share of the adapters sits on the leaf of its own rail
_RAIL_FABRIC = 0.8


def _fleet_finding(rule: Rule, hosts: Iterable[str], devices: Iterable[str], message: str, **kw: Any) -> dict:
    out = finding(rule, devices, message, **kw)
    out["hosts"] = sorted(set(hosts), key=gpu_sort_key)
    return out


# ------------------------------------------------------------------------------------------------
# H08


def _layout(doc: Mapping) -> tuple:
    s = doc.get("summary") or {}
    return (s.get("gpu_count") or 0, s.get("gpu_model"))


def _layout_words(key: tuple) -> str:
    count, model = key
    if not count:
        return "nodes without GPUs in their report"
    return f"{count}x {model}" if model else f"{count}-GPU nodes"


def _active_ports(doc: Mapping, layer: str) -> list[str]:
    ctx = Ctx(doc)
    return sorted({str(n.get("name")) for n in ctx.compute_nics(active_only=False)
                   if ctx.nic_active(n) and str(n.get("link_layer") or "") == layer}, key=gpu_sort_key)


def _main_layer(doc: Mapping) -> str:
    from apps.domain.findings.fabric import preferred_layer
    return preferred_layer(Ctx(doc))[0]


def rule_h08(docs: Iterable[Mapping], unknowns: list[str] | None = None) -> list[dict]:
    """H08 Multi-NIC per node mismatch across nodes.

    Condition: among nodes of one layout (GPU count and model), the number of Active compute NIC
    ports on the fleet's main link layer differs from the most common number. MED: NCCL 2.30
    ignores net-device count mismatches by default (``NCCL_IGNORE_NET_MISMATCH=1``), so the job runs
    and the node with fewer NICs bounds the rings. Nodes whose port states were not reported are not
    counted (``unknowns`` says which). Source: env NCCL_IGNORE_NET_MISMATCH [S12].
    """
    groups: dict[tuple, list[Mapping]] = {}
    for d in docs:
        if d.get("hostname"):
            groups.setdefault(_layout(d), []).append(d)
    out = []
    for key, members in sorted(groups.items(), key=lambda kv: str(kv[0])):
        known, blind = [], []
        for d in members:
            ctx = Ctx(d)
            states = [n for n in ctx.nics if n.get("state") is not None or n.get("active") is not None]
            (known if states else blind).append(d)
        if blind and unknowns is not None and len(members) > 1:
            unknowns.append(f"H08: {join(sorted((d['hostname'] for d in blind), key=gpu_sort_key))} reported no "
                            "NIC port state (send ibstat or the agent's sysfs_ib listing), so their Active NICs were "
                            "not counted.")
        if len(known) < 2:
            continue
        layers = Counter(_main_layer(d) for d in known)
        layer = max(layers, key=lambda k: (layers[k], k == "InfiniBand")) if layers else ""
        ports = {d["hostname"]: _active_ports(d, layer) for d in known}
        counts = Counter(len(v) for v in ports.values())
        norm = max(counts, key=lambda n: (counts[n], n))
        odd = sorted((h for h, v in ports.items() if len(v) != norm), key=gpu_sort_key)
        if not odd:
            continue
        usual = len(known) - len(odd)
        where = _layout_words(key)
        texts = []
        for h in odd:
            names = ports[h]
            texts.append(f"{h} has {len(names)} Active compute {layer or 'NIC'} port(s)"
                         + (f" ({join(names)})" if names else ""))
        fewer = [h for h in odd if len(ports[h]) < norm]
        msg = (f"{'; '.join(texts)}, where {usual} other node(s) of this layout ({where}) have {norm}. NCCL ignores "
               "a NIC-count mismatch between nodes by default (NCCL_IGNORE_NET_MISMATCH=1): the job runs, and "
               + (f"{join(fewer)} bound{'s' if len(fewer) == 1 else ''} every ring with less network bandwidth."
                  if fewer else "the nodes with fewer NICs bound every ring."))
        devices = [f"{h}/{n}" for h in odd for n in ports[h]] or odd
        out.append(_fleet_finding(H08, odd, devices, msg))
    return out


# ------------------------------------------------------------------------------------------------
# F08


def _as_fabric(fabric: Any) -> nx.Graph | None:
    if fabric is None:
        return None
    return fabric if isinstance(fabric, nx.Graph) else build_fabric(fabric)


def rule_f08(fabric: Any, *, host_ports: Mapping[str, Iterable[Mapping]] | None = None,
             env: Mapping[str, Mapping[str, str]] | None = None, unknowns: list[str] | None = None) -> list[dict]:
    """F08 Rail/cross-NIC mismatch.

    Condition, from the fabric's cabling (hosts joined to adapters by port GUID when ``host_ports``
    gives them, else by the host name in each adapter's node description): on a rail-optimized
    fabric (most adapters sit on a leaf that carries one NIC name, their rail), a host of the usual
    adapter count whose NIC is cabled to the leaf of another rail: MED, one finding per host, two
    NICs on each other's leaves named as swapped. On a fabric that is not rail-optimized:
    ``NCCL_CROSS_NIC=0`` in a host's environment (``env``: {host: {name: value}}) is the mismatch:
    MED. Hosts showing half the usual adapters or fewer, or more (management, storage), are not
    compared. Source: env NCCL_CROSS_NIC [S12]; NCCL #1600 [S48].
    """
    G = _as_fabric(fabric)
    if G is None:
        return []
    attached = attach_hosts(G, host_ports)["hosts"]
    per_host: dict[str, dict[str, dict]] = {}
    for host, rows in attached.items():
        for r in rows:
            if r.get("leaf") and r.get("nic"):
                per_host.setdefault(host, {})[str(r["nic"])] = r
    nameless = [n for n in G if G.nodes[n].get("type") == "ca" and G.nodes[n].get("kind") == "hca"
                and not G.nodes[n].get("host")]
    claimed = {r["ca"] for rows in attached.values() for r in rows}
    nameless = [n for n in nameless if n not in claimed]
    if nameless and unknowns is not None:
        shown = sorted({str(G.nodes[n].get("name") or n) for n in nameless})[:2]
        unknowns.append(f"F08: {len(nameless)} host adapter(s) have no host name in their node description "
                        f"({'; '.join(repr(s) for s in shown)}): their rails were not checked (send those hosts' "
                        "ibstat to join them by port GUID).")
    if len(per_host) < 2:
        return []
    sizes = Counter(len(v) for v in per_host.values())
    usual = max(sizes, key=lambda n: (sizes[n], n))
    checked = {h: v for h, v in per_host.items() if len(v) == usual}
    # a host showing more than half of the usual adapters (the rest unnamed on the fabric) is checked
    # for those; fewer (a management or storage node on a spare leaf port) or more: not compared
    partial = {h: v for h, v in per_host.items() if usual / 2 < len(v) < usual}
    other = sorted((h for h in per_host if h not in checked and h not in partial), key=gpu_sort_key)
    if other and unknowns is not None:
        unknowns.append(f"F08: {join(other)} show another number of adapters on the fabric than the {usual} of most "
                        "hosts (management or storage nodes, or adapters without a host name): not compared with "
                        "the rails.")
    on_leaf: dict[str, Counter] = {}
    leaf_name: dict[str, str] = {}
    for rows in checked.values():
        for nic, r in rows.items():
            on_leaf.setdefault(r["leaf"], Counter())[nic] += 1
            leaf_name[r["leaf"]] = str(r.get("leaf_name") or r["leaf"])
    rail: dict[str, tuple[str, int]] = {}
    for leaf, names in on_leaf.items():
        name, n = max(names.items(), key=lambda kv: (kv[1], kv[0]))
        if n >= 2 and n > _RAIL_SHARE * sum(names.values()):
            rail[leaf] = (name, n)
    total = sum(len(v) for v in checked.values())
    on_own = sum(1 for rows in checked.values() for nic, r in rows.items() if rail.get(r["leaf"], ("",))[0] == nic)
    rails = {name for name, _ in rail.values()}
    out = []
    if len(rails) < 2 or on_own < _RAIL_FABRIC * total:
        crossed = sorted((h for h, e in (env or {}).items() if str(e.get("NCCL_CROSS_NIC", "")).strip() == "0"),
                         key=gpu_sort_key)
        if crossed:
            msg = (f"NCCL_CROSS_NIC=0 is set on {join(crossed)}, but this fabric is not rail-optimized: only "
                   f"{on_own} of {total} host adapters sit on a leaf that carries a single NIC name. With "
                   "NCCL_CROSS_NIC=0 NCCL insists on the same NIC index at both ends, which such a fabric gives no "
                   "advantage for and which can leave rings on worse routes.")
            out.append(_fleet_finding(F08, crossed, crossed, msg,
                                      fix="Set NCCL_CROSS_NIC=1 (or leave the default 2) on this fabric."))
        return out
    for host in sorted({**checked, **partial}, key=gpu_sort_key):
        rows = checked.get(host) or partial[host]
        wrong = [(nic, r) for nic, r in sorted(rows.items(), key=lambda kv: gpu_sort_key(kv[0]))
                 if r["leaf"] in rail and rail[r["leaf"]][0] != nic]
        if not wrong:
            continue
        texts, names = [], {nic for nic, _ in wrong}
        for nic, r in wrong:
            other_nic, n = rail[r["leaf"]]
            port = f" port {r['leaf_port']}" if r.get("leaf_port") is not None else ""
            texts.append(f"{nic} is cabled to {leaf_name[r['leaf']]}{port}, the leaf {n} other host(s) use for "
                         f"{other_nic}")
        swapped = sorted({nic for nic, r in wrong if rail[r["leaf"]][0] in names}, key=gpu_sort_key)
        msg = (f"{host}: {'; '.join(texts)}"
               + (f": its {join(swapped)} cables are swapped." if len(swapped) >= 2 else ".")
               + " NCCL pairs the same NIC index on both ends (rail-optimized assumption), so traffic between this "
               "host and the others on these rails crosses the spine instead of staying on one leaf.")
        out.append(_fleet_finding(F08, [host], [f"{host}/{nic}" for nic, _ in wrong], msg,
                                  fix="Swap the cables back so that each NIC reaches the leaf of its rail (the "
                                      "other hosts show which); until then traffic on these rails crosses the spine."
                                  if len(swapped) >= 2 else None))
    return out


# ------------------------------------------------------------------------------------------------


def defer_to_l03(f08: Iterable[dict], fabric_findings: Iterable[Mapping]) -> tuple[list[dict], list[str]]:
    """F08 findings less those of hosts an L03 finding (``fabric_rules``) already names, and the
    hosts dropped. Both read one swap from the same discovery; L03 names the switch ports, so when
    the fabric rules run (the fabric page) a swap is reported once, as L03. F08's other case
    (``NCCL_CROSS_NIC=0`` on a fabric that is not rail-optimized) never meets an L03 finding: L03
    fires on rail-optimized fabrics only."""
    l03 = {h for f in fabric_findings if f.get("rule") == "L03" for h in f.get("hosts") or ()}
    kept, dropped = [], []
    for f in f08:
        if f["rule"] == "F08" and f["hosts"] and set(f["hosts"]) <= l03:
            dropped += f["hosts"]
        else:
            kept.append(f)
    return kept, sorted(set(dropped), key=gpu_sort_key)


def evaluate_fleet(docs: Iterable[Mapping], fabric: Any = None, *,
                   host_ports: Mapping[str, Iterable[Mapping]] | None = None,
                   env: Mapping[str, Mapping[str, str]] | None = None,
                   fabric_findings: Iterable[Mapping] | None = None) -> dict:
    """The cluster-level findings of several nodes.

    Parameters
    ----------
    docs : iterable of mapping
        Snapshot documents, one per host (``apps/domain/analysis.py``).
    fabric : optional
        An ``ibnetdiscover``/``iblinkinfo`` result (or its JSON) or a graph from
        :func:`apps.domain.fabric.build_fabric`; F08 needs it.
    host_ports : mapping, optional
        ``{host: [{"nic", "port", "port_guid", "node_guid"}]}`` (``fabric.host_ports_from_ib``) to join
        hosts to the fabric by GUID rather than by node description.
    env : mapping, optional
        ``{host: {NCCL variable: value}}`` (the hosts' ``host_info`` ``nccl_env``), for NCCL_CROSS_NIC.
    fabric_findings : iterable of mapping, optional
        The fabric rules' findings of the same discovery (``fabric_rules.fabric_findings``), when the
        caller shows them too: a swap L03 reports is then not reported again as F08
        (:func:`defer_to_l03`; ``unknowns`` says which hosts).

    Returns
    -------
    dict
        ``{"findings": [finding + "hosts"], "unknowns": [sentences]}``, findings sorted by severity,
        rule, hosts.
    """
    docs = list(docs)
    unknowns: list[str] = []
    findings = rule_h08(docs, unknowns)
    if fabric is None:
        if len(docs) > 1:
            unknowns.append("F08: the rail cabling needs the fabric's view (ibnetdiscover or iblinkinfo): not "
                            "checked.")
    else:
        f08 = rule_f08(fabric, host_ports=host_ports, env=env, unknowns=unknowns)
        if fabric_findings is not None:
            f08, deferred = defer_to_l03(f08, fabric_findings)
            if deferred:
                unknowns.append(f"F08: the rail cabling of {join(deferred)} is reported once, as L03 (the fabric "
                                "rule, which names the switch ports).")
        findings += f08
    findings.sort(key=lambda f: (SEVERITY_RANK[f["severity"]], f["rule"], [gpu_sort_key(h) for h in f["hosts"]]))
    return {"findings": findings, "unknowns": unknowns}
