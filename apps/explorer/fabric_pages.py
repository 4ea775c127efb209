"""The fabric page of a cluster: ``/c/<cluster>/fabric/`` (URL name ``fabric``).

It reads the fabric in force through ``apps.ingest.fabrics.cluster_fabric`` (the newest readable
``ibnetdiscover``/``iblinkinfo`` of the cluster with its hosts joined by GUID, else by name) and
shows, top down: one sentence saying what the fabric is and what is wrong, the figure
(``fabric_figures``; ``?expand=<group id>`` draws one group member by member), the problem
tables (links trained below capability, ports down, HCAs no host claims, hosts not found in the
fabric), the fabric findings (``apps.domain.fabric_rules``, L01-L08, on the hosts' snapshots in
force), what changed since the previous discovery, and every fabric upload of the cluster with
its raw text through the API. Without a discovery it says how to send one instead of an empty
chart. Access is the cluster pages' own: a cluster the person may not view is a 404.

The page's facts are pure functions of the graph and the join (:func:`fabric_problems`,
:func:`fabric_sentence`), testable without a database; the health lists of a graph are computed
once per graph object (the graphs are shared and never changed, ``fabrics.fabric_graph``).
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter, OrderedDict
from collections.abc import Mapping

import networkx as nx
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from apps.domain import fabric as fabric_graphs
from apps.domain.fabric_health import degraded_links, down_ports
from apps.domain.fabric_compare import compare_fabrics
from apps.domain.fabric_rules import fabric_findings
from apps.domain.fleet_rules import evaluate_fleet
from apps.domain.names import natural_key
from apps.explorer import fabric_figures
from apps.explorer import selectors as ex
from apps.explorer.views import SEVERITIES, cluster_or_404
from apps.ingest import fabrics
from apps.ingest.models import Cluster, Fabric, Host, Snapshot

TABLE_ROWS = 200  # rows shown per problem table (the rest are counted)
VERSIONS_SHOWN = 30
CHANGES_SHOWN = 12
FINDINGS_SHOWN = 50
FINDINGS_CACHE_SIZE = 16  # fabric findings kept per (discovery, snapshots in force)

_HEALTH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FINDINGS: OrderedDict = OrderedDict()  # (fabric id, content hash, snapshot ids) -> (attachments, findings)
_HEALTH_LOCK = threading.Lock()


def fabric_health(G: nx.Graph) -> tuple[list[dict], list[dict]]:
    """``(degraded_links(G), down_ports(G))`` (``apps.domain.fabric_health``), computed once per graph object."""
    with _HEALTH_LOCK:
        cached = _HEALTH.get(G)
    if cached is None:
        cached = (degraded_links(G), down_ports(G))
        with _HEALTH_LOCK:
            _HEALTH[G] = cached
    return cached


def _host_nics(cluster: Cluster) -> tuple[tuple[int, ...], dict[str, dict]]:
    """The snapshot ids in force and ``{host: {"hostname", "nics"}}``: the part of each host's document
    the fabric rules read (the NICs), in one query, never the whole documents."""
    snaps = ex.cluster_snapshots(cluster)
    nics = dict(Snapshot.objects.filter(pk__in=[s.pk for s in snaps]).values_list("pk", "document__nics"))
    return (tuple(sorted(s.pk for s in snaps)),
            {s.host.hostname: {"hostname": s.host.hostname, "nics": nics.get(s.pk) or []} for s in snaps})


def cluster_findings(cluster: Cluster, cf: fabrics.ClusterFabric) -> list[dict]:
    """The fabric rules L01-L08 (``fabric_rules.fabric_findings``) of the discovery in force with the
    hosts' documents in force; kept per discovery and set of snapshots (a 2,000-switch fabric takes
    seconds). No job is given, so L04 and L08 (a job's rules) find nothing here."""
    ids, docs = _host_nics(cluster)
    key = (cf.fabric.pk, cf.fabric.content_hash, ids)
    with _HEALTH_LOCK:
        kept = _FINDINGS.get(key)
    if kept is not None and kept[0] is cf.attachments:
        return kept[1]
    found = fabric_findings(fabrics.fabric_view(cf), docs)
    with _HEALTH_LOCK:
        _FINDINGS[key] = (cf.attachments, found)
        _FINDINGS.move_to_end(key)
        while len(_FINDINGS) > FINDINGS_CACHE_SIZE:
            _FINDINGS.popitem(last=False)
    return found


def fleet_findings(cluster: Cluster) -> dict:
    """The rules that compare hosts (``fleet_rules.evaluate_fleet``: H08, and F08 when a discovery is in
    force, deferring to L03) over the hosts' documents in force, read in one query as the parts those
    rules use (hostname, summary, NICs). ``{"findings": [...], "unknowns": [...]}``."""
    snaps = ex.cluster_snapshots(cluster)
    rows = Snapshot.objects.filter(pk__in=[s.pk for s in snaps]).values_list("pk", "document__summary", "document__nics")
    parts = {pk: (summary, nics) for pk, summary, nics in rows}
    docs = [{"hostname": s.host.hostname, "summary": parts.get(s.pk, ({}, []))[0] or {},
             "nics": parts.get(s.pk, ({}, []))[1] or []} for s in snaps]
    cf = fabrics.cluster_fabric(cluster)
    if cf is None:
        return evaluate_fleet(docs)
    return evaluate_fleet(docs, cf.graph, host_ports=cf.host_ports, fabric_findings=cluster_findings(cluster, cf))


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def fabric_problems(G: nx.Graph, *, unclaimed: list[dict] = (), unmatched_hosts: list[dict] = (),
                    degraded: list[dict] | None = None, down: list[dict] | None = None) -> dict:
    """What is wrong with a fabric, as the page's tables list it.

    Returns
    -------
    dict
        ``degraded`` (``fabric_health.degraded_links``), ``down`` (ports down that lead somewhere, each with
        ``peer_name`` and ``to_host``), ``idle`` (per node: ports down with nothing attached,
        ``{"name", "ports"}``), ``to_host`` (how many of ``down`` face a host adapter),
        ``unclaimed`` (from ``fabrics.cluster_fabric``), ``unmatched_hosts`` (its hosts not found in
        the fabric that report InfiniBand port GUIDs) and ``without_ib`` (those that report none).
    """
    if degraded is None or down is None:
        degraded, down = fabric_health(G)
    leads, idle = fabric_figures.problem_ports(G, down)
    listed = {(p["node"], p["port"]) for p in leads}
    for p in leads:
        peer = p.get("peer")
        p["peer_name"] = G.nodes[peer].get("name") if peer in G else None
        p["peer_port"] = (G.nodes[p["node"]]["ports"].get(p["port"]) or {}).get("peer_port")
        if p["type"] == "ca":  # a host adapter's own port: counted here when its switch's end is not listed
            p["to_host"] = G.nodes[p["node"]].get("kind") == "hca" and (peer, p["peer_port"]) not in listed
        else:
            p["to_host"] = peer in G and G.nodes[peer]["type"] == "ca" and G.nodes[peer].get("kind") == "hca"
    by_node: dict[str, list] = {}
    for p in idle:
        by_node.setdefault(p["node"], []).append(p["port"])
    idle_rows = sorted(({"name": G.nodes[n].get("name") or n, "ports": sorted(ports, key=str)}
                        for n, ports in by_node.items()), key=lambda r: natural_key(r["name"]))
    # a host that reports no InfiniBand port GUID (RoCE, Ethernet, no ibstat sent) is not missing from the fabric
    missing = [r for r in unmatched_hosts if r.get("port_guids")]
    return {"degraded": degraded, "down": leads, "to_host": sum(1 for p in leads if p["to_host"]),
            "other_down": sum(1 for p in leads if p["type"] != "ca" and not p["to_host"]),
            "idle": idle_rows, "idle_count": len(idle), "unclaimed": list(unclaimed),
            "unmatched_hosts": missing, "without_ib": [r for r in unmatched_hosts if not r.get("port_guids")]}


def fabric_sentence(summary: Mapping, problems: Mapping) -> str:
    """The page's first sentence: what the fabric is, then what is wrong.

    >>> s = fabric_sentence({"switches": 312, "tiers": {"leaf": 256, "spine": 48, "core": 8}, "host_adapters": 2048},
    ...                     {"degraded": [{}] * 3, "down": [{}], "to_host": 1, "other_down": 0,
    ...                      "unclaimed": [{}] * 14, "unmatched_hosts": []})
    >>> s == ("312 switches in 3 tiers, 2,048 HCAs; 3 links trained below capability, 1 port to a host down; "
    ...       "14 HCAs no host claims.")
    True
    """
    tiers = [t for t, n in (summary.get("tiers") or {}).items() if n and t not in ("unattached",)]
    switches = summary.get("switches") or 0
    what = (f"{_plural(switches, 'switch', 'switches')} in {_plural(len(tiers), 'tier')}" if switches and tiers else
            _plural(switches, "switch", "switches") + " no host is cabled to" if switches else
            "No switch (adapters cabled back to back)")
    what += f", {_plural(summary.get('host_adapters') or 0, 'HCA')}"
    wrong = []
    if problems["degraded"]:
        wrong.append(f"{_plural(len(problems['degraded']), 'link')} trained below capability")
    if problems["to_host"]:
        wrong.append(f"{_plural(problems['to_host'], 'port')} to a host down")
    other = problems.get("other_down", 0)
    if other:
        wrong.append(f"{_plural(other, 'switch-to-switch port')} down")
    parts = [what, ", ".join(wrong) if wrong else "every link at its capability, no port down that leads anywhere"]
    joins = []
    if problems["unclaimed"]:
        joins.append(f"{_plural(len(problems['unclaimed']), 'HCA')} no host claims")
    if problems["unmatched_hosts"]:
        joins.append(f"{_plural(len(problems['unmatched_hosts']), 'host')} not found in the fabric")
    if joins:
        parts.append(", ".join(joins))
    return "; ".join(parts) + "."


def host_urls(cluster: Cluster) -> dict[str, str]:
    """``{host name: page}`` for every host of the cluster, by its name and by its short name
    (a fabric's node descriptions often carry ``node17`` for ``node17.cluster``)."""
    names = list(Host.objects.filter(cluster=cluster).values_list("hostname", flat=True))
    out: dict[str, str] = {}
    shorts = Counter(n.split(".")[0].lower() for n in names)
    for name in names:
        url = reverse("explorer:host", args=[cluster.name, name])
        out[name] = url
        short = name.split(".")[0].lower()
        if shorts[short] == 1:
            out.setdefault(short, url)
    return out


def _link(urls: Mapping[str, str], name: str | None) -> str | None:
    if not name:
        return None
    return urls.get(name) or urls.get(name.split(".")[0].lower())


def _version_rows(cluster: Cluster, in_force: Fabric | None) -> list[dict]:
    rows = []
    for f in fabrics.fabric_versions(cluster)[:VERSIONS_SHOWN]:
        rows.append({"f": f, "in_force": in_force is not None and f.pk == in_force.pk,
                     "raw_url": reverse("api:fabric-raw", args=[f.pk]), "json_url": reverse("api:fabric", args=[f.pk]),
                     "error_text": fabrics.fabric_error_text(f) if f.status == Fabric.Status.FAILED else ""})
    return rows


def _changes(fabric: Fabric, G: nx.Graph) -> dict | None:
    """What changed since the discovery in force before this one (``fabric_compare``), or None."""
    before = fabrics.previous_fabric(fabric)
    if before is None:
        return None
    result = compare_fabrics(fabrics.fabric_graph(before), G)
    return {"before": before, "summary": result["summary"][:CHANGES_SHOWN],
            "more": max(len(result["summary"]) - CHANGES_SHOWN, 0), "changed": result["changed"],
            "url": reverse("api:cluster-fabric-compare", args=[fabric.cluster.name])
            + f"?from={before.pk}&to={fabric.pk}"}


def _tables(problems: dict, urls: Mapping[str, str]) -> dict:
    """The problem tables, each cut at ``TABLE_ROWS`` with the count of the rest."""
    short = fabric_figures.short_name
    unclaimed = [{**r, "url": _link(urls, r.get("described_host")), "leaf_short": short(r.get("leaf_name"))}
                 for r in problems["unclaimed"][:TABLE_ROWS]]
    unmatched = [{**r, "url": _link(urls, r.get("host"))} for r in problems["unmatched_hosts"][:TABLE_ROWS]]
    without_ib = [{**r, "url": _link(urls, r.get("host"))} for r in problems["without_ib"][:TABLE_ROWS]]
    degraded = [{**r, "a_short": short(r["a_name"]), "b_short": short(r["b_name"])}
                for r in problems["degraded"][:TABLE_ROWS]]
    down = [{**r, "short": short(r["name"]), "peer_short": short(r["peer_name"]) if r.get("peer_name") else None}
            for r in problems["down"][:TABLE_ROWS]]
    return {"degraded": degraded, "down": down, "unclaimed": unclaimed, "unmatched": unmatched,
            "without_ib": without_ib, "more": {k: max(len(problems[k]) - TABLE_ROWS, 0)
                                               for k in ("degraded", "down", "unclaimed", "unmatched_hosts",
                                                         "without_ib")}}


def fabric_facts(summary: Mapping) -> list[str]:
    """The facts line under the sentence: switches per tier (leaf first), cables, hosts the adapters name."""
    order = {"leaf": 0, "spine": 1, "core": 2, "unattached": 99}
    tiers = sorted((summary.get("tiers") or {}).items(), key=lambda kv: (order.get(kv[0], 3), natural_key(kv[0])))
    out = [", ".join(f"{n:,} {t}" for t, n in tiers) or "no switch",
           f"{_plural(summary.get('links') or 0, 'cable')}, {_plural(summary.get('hosts') or 0, 'host')} named by the "
           "adapters"]
    if summary.get("other_cas"):
        out.append(f"{_plural(summary['other_cas'], 'SHARP aggregation node')} or routers (not drawn)")
    return out


JOB_ROWS = 64  # leaves listed in the job table (worst demand first; the rest counted)


def job_context(cluster: Cluster, spec: str, algorithm: str) -> dict:
    """The job form's state and, when hosts are given, ``fabrics.job_on_fabric``'s answer as the page
    shows it: ``job_spec``, ``job_algorithm``, ``job`` (None without hosts), ``job_error``,
    ``job_rows`` (leaves with flows or job adapters, each with its rail) and ``job_more``."""
    spec = (spec or "").strip()
    out: dict = {"job_spec": spec, "job_algorithm": algorithm if algorithm in ("ring", "tree") else "ring",
                 "job": None, "job_error": None, "job_rows": [], "job_more": 0,
                 "job_api": reverse("api:cluster-fabric-job", args=[cluster.name])}
    if not spec:
        return out
    try:
        job = fabrics.job_on_fabric(cluster, spec, algorithm)
    except ValueError as exc:
        out["job_error"] = str(exc)
        return out
    if job is None:
        return out
    rails = job["leaf_rails"]
    rows = [{**r, "short": fabric_figures.short_name(r["name"]), "rail": rails.get(r["name"]),
             "off_rail": [o for o in job["contention"]["off_rail"] if o["leaf"] == r["leaf"]]}
            for r in job["contention"]["leaves"]]
    out.update(job=job, job_rows=rows[:JOB_ROWS], job_more=max(len(rows) - JOB_ROWS, 0))
    return out


@login_required
@require_GET
def fabric(request: HttpRequest, cluster: str) -> HttpResponse:
    c = cluster_or_404(request, cluster)
    cf = fabrics.cluster_fabric(c)
    ctx: dict = {"cluster": c, "versions": _version_rows(c, cf.fabric if cf else None), "cf": cf,
                 "budget": fabric_figures.BUDGET,
                 "base_url": request.build_absolute_uri("/").rstrip("/")}
    if cf is None:
        return render(request, "explorer/fabric.html", ctx)
    G = cf.graph
    degraded, down = fabric_health(G)
    problems = fabric_problems(G, unclaimed=cf.unclaimed, unmatched_hosts=cf.unmatched_hosts, degraded=degraded,
                               down=down)
    urls = host_urls(c)
    drawing = fabric_figures.fabric_drawing(G, host_of_ca=cf.host_of_ca, host_urls=urls, degraded=degraded,
                                            down=down, expand=request.GET.get("expand") or None)
    summary = cf.fabric.summary or fabric_graphs.summary(G)  # stored with the upload: fabric.summary of this graph
    findings = cluster_findings(c, cf)
    ctx.update(job_context(c, request.GET.get("job", ""), request.GET.get("algorithm") or "ring"))
    ctx.update(summary=summary, facts=fabric_facts(summary), sentence=fabric_sentence(summary, problems),
               problems=problems,
               tables=_tables(problems, urls), drawing=drawing, expanded_label=drawing.expanded_label()
               if drawing.expanded else "", fig=fabric_figures.fabric_figure_json(drawing, G),
               changes=_changes(cf.fabric, G), warnings=list(G.graph.get("warnings") or [])[:20],
               findings=findings[:FINDINGS_SHOWN], findings_more=max(len(findings) - FINDINGS_SHOWN, 0),
               finding_counts=[(sev, n) for sev in SEVERITIES if (n := sum(1 for f in findings
                                                                             if f["severity"] == sev))])
    return render(request, "explorer/fabric.html", ctx)
