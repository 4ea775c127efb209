"""The cluster page at any fleet size: one page of hosts, filtered and sorted in the database.

Layout groups, odd ones out and each host's newest snapshot are kept at ingest
(``apps.ingest.layouts``); this module reads them: the layouts table (one row per group), the
totals (one aggregate query), and ``PER_PAGE`` hosts (``selectors.cluster_hosts``). Only the hosts
on show have what their layout differs in brought up to date (``layouts.refresh_lines``), and only
one summary per layout on show is read for the GPU model and NIC cells. The findings across hosts
("Across hosts": H08, F08) read every host's summary and NICs, so they are cached, keyed by what
they depend on (``selectors.cluster_state``: the newest snapshots and the fabric uploads).

Query parameters (each kept by the pager and the column heads): ``q`` (part of a host name),
``layout`` (a layout's number), ``severity`` (``CRIT``/``HIGH``/``MED``/``LOW``: a finding of that
severity or worse), ``odd=1`` (odd ones out only), ``sort`` (``hostname``, ``severity``, ``seen``,
``layout``; ``-`` in front for descending), ``page``.
"""

from __future__ import annotations

import hashlib
from urllib.parse import urlencode

from django.core.cache import cache
from django.core.paginator import Paginator

from apps.domain import labels
from apps.explorer import tables
from apps.explorer import selectors as ex
from apps.ingest import layouts
from apps.ingest.models import Cluster, Host

PER_PAGE = 100
FLEET_CACHE_SECONDS = 24 * 3600
SEVERITIES = ("CRIT", "HIGH", "MED", "LOW", "INFO")
SORT_DEFAULT_DESC = {"severity", "seen"}  # a first click on these heads shows the worst / newest first


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def host_query(get) -> dict:
    """The filters and sort of a request's query string, cleaned (unknown values are ignored)."""
    sort = str(get.get("sort") or "hostname")
    descending = sort.startswith("-")
    sort = sort.lstrip("-")
    if sort not in ex.HOST_SORTS:
        sort, descending = "hostname", False
    severity = str(get.get("severity") or "").upper()
    return {"q": str(get.get("q") or "").strip()[:253], "layout": _int(get.get("layout")),
            "severity": severity if severity in ex.SEVERITY_FILTERS else "",
            "odd": str(get.get("odd") or "") in ("1", "on", "true"), "sort": sort, "descending": descending}


def _query_string(query: dict, **change) -> str:
    q = {**query, **change}
    params = {"q": q["q"], "layout": q["layout"] if q["layout"] is not None else "", "severity": q["severity"],
              "odd": "1" if q["odd"] else "", "sort": ("-" if q["descending"] else "") + q["sort"],
              "page": q.get("page") or ""}
    if params["sort"] == "hostname":
        params["sort"] = ""
    return urlencode({k: v for k, v in params.items() if v not in ("", None)})


def sort_links(query: dict) -> dict:
    """Column -> (query string of a click on its head, arrow shown now)."""
    out = {}
    for key in ex.HOST_SORTS:
        if query["sort"] == key:
            desc, arrow = not query["descending"], " \u25bc" if query["descending"] else " \u25b2"
        else:
            desc, arrow = key in SORT_DEFAULT_DESC, ""
        out[key] = ("?" + _query_string(query, sort=key, descending=desc, page=None), arrow)
    return out


def host_rows(hosts: list[Host]) -> list[dict]:
    """The host table's rows (``tables.host_rows_html``) of the hosts on show."""
    layouts.refresh_lines(hosts)
    rep: dict[int, int] = {}
    for h in hosts:
        rep.setdefault(h.layout_id or -h.pk, h.latest_snapshot_id)
    facts = ex.snapshot_facts(sorted(set(rep.values())))
    rows = []
    for h in hosts:
        s = h.latest_snapshot
        s.host = h  # the row already holds it
        g = h.layout
        summary = (facts.get(rep[h.layout_id or -h.pk]) or {}).get("summary") or {}
        status = g.status if g else None
        ref = g.reference if g else None
        lines = h.layout_lines or []
        rows.append({"s": s, "group": g.position if g else 0, "status": status, "platform": g.platform if g else "",
                     "platform_size": g.platform_size if g else 1,
                     "odd": (lines or ["layout differs in detail (see compare)"]) if status == layouts.ODD else None,
                     "differs": lines if status == layouts.NO_MAJORITY else None,
                     "norm_host": ref.host.hostname if ref is not None else None,
                     "gpu_model": labels.gpu_model(summary, s.gpu_model),
                     "nics": labels.nic_cell(summary, s.nic_count, s.active_nic_count),
                     "nic_rates": labels.nic_rates(s.nic_models),
                     "score": s.crit_count * 1000 + s.high_count * 100 + s.med_count * 10 + s.low_count})
    return rows


def fleet_findings_cached(cluster: Cluster) -> dict:
    """``fabric_pages.fleet_findings`` of ``cluster``, computed once per state of its snapshots and
    fabric uploads (``selectors.cluster_state``)."""
    from apps.explorer.fabric_pages import fleet_findings  # that module builds on the selectors

    key = "cluster-fleet:" + hashlib.sha256(repr(ex.cluster_state(cluster)).encode()).hexdigest()
    found = cache.get(key)
    if found is None:
        found = fleet_findings(cluster)
        cache.set(key, found, FLEET_CACHE_SECONDS)
    return found


def context(cluster: Cluster, get) -> dict:
    """Everything ``explorer/cluster.html`` shows of ``cluster`` for the query string ``get``."""
    if layouts.needs_refresh(cluster):  # hosts stored before layout groups were kept at ingest
        layouts.refresh_cluster(cluster)
    query = host_query(get)
    totals = ex.cluster_totals(cluster)
    groups = ex.cluster_layouts(cluster)
    filtered = ex.cluster_hosts(cluster, **query)
    pager = Paginator(filtered, PER_PAGE)
    page = pager.get_page(get.get("page"))
    rows = host_rows(list(page.object_list))
    pages = {"number": page.number, "count": pager.num_pages, "total": pager.count,
             "first": page.start_index(), "last": page.end_index()}
    if page.has_previous():
        pages["previous"] = "?" + _query_string(query, page=page.previous_page_number())
    if page.has_next():
        pages["next"] = "?" + _query_string(query, page=page.next_page_number())
    hosts_without = Host.objects.filter(cluster=cluster, latest_snapshot__isnull=True).order_by("hostname")[:500]
    return {
        "fleet": fleet_findings_cached(cluster) if totals["hosts"] else {"findings": [], "unknowns": []},
        "cluster": cluster, "rows": rows, "host_rows": tables.host_rows_html(rows, cluster.name), "groups": groups,
        "host_total": totals["hosts"], "odd_count": totals["odd"], "totals": totals["severities"],
        "severities": SEVERITIES, "severity_filters": ex.SEVERITY_FILTERS, "hosts_without": hosts_without,
        "query": query, "pages": pages, "sorts": sort_links(query),
        "filtered": bool(query["q"] or query["layout"] is not None or query["severity"] or query["odd"]),
    }
