"""The capacity page: expected all-reduce busbw from 1 to 64 nodes for one or two layouts, its
table and CSV, the NIC roles each curve rests on, and a read-only link signed over the choice.

``/capacity/?a=REF&b=REF`` (REF = a snapshot id or ``cluster/host``), ``&format=csv`` for the table
as CSV; ``/capacity/s/<token>/`` the same page read-only without an account. The token is
``django.core.signing`` over the chosen snapshot ids (no table: it cannot be revoked one by one and
stops opening after ``TOPOWEB_SHARE_LINK_MAX_AGE_DAYS``, as path share links do).

Every figure is the document's own: the curve and table are ``estimate.points``, the NVLink figure
is the host drawing's (``nvlink_figures``), NCCL's ring plan is named as such.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone as dt_timezone

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from apps.domain.compare_attrs import name_ranges
from apps.domain.nvlink_figures import nvlink_summary
from apps.domain import labels
from apps.explorer import figures, plan_capacity, run_lists
from apps.explorer import selectors as ex
from apps.explorer import services as share
from apps.ingest import access
from apps.ingest import selectors as ingest
from apps.ingest.models import Host, Snapshot

SALT = "topoweb.capacity-share"
KEYS = ("a", "b")
TABLE_COLUMNS = (("layout", "Layout"), ("host", "Host"), ("cluster", "Cluster"), ("snapshot", "Snapshot"),
                 ("hosts", "Hosts with this layout"), ("gpus_per_node", "GPUs/node"), ("gpu_model", "GPU model"),
                 ("compute_nics", "NICs assumed compute (rates)"), ("nodes", "Nodes"), ("busbw_gbs", "busbw GB/s"),
                 ("algorithm", "NCCL algorithm"), ("limit", "Limited by"))


# -- which layouts --------------------------------------------------------------------------


def capacity_options(request: HttpRequest) -> list[dict]:
    """The layouts the pickers offer: the newest snapshot of every host the person may view."""
    return [{**r, "label": f"{r['cluster']}/{r['hostname']}"}
            for r in ex.latest_snapshot_rows(access.visible_cluster_ids(request.user))]


def capacity_default(options: list[dict], cluster_name: str | None, cluster_ids: set[int] | None) -> list[int]:
    """Two layouts worth comparing: of the cluster asked for (else the one that reported last), the
    two distinct layouts with the most data: GPUs and Active NICs known first (a NIC-less layout has
    a 1-node dot and nothing else), then the most hosts, then the highest 1-node busbw. Each layout
    (fingerprint) is read from one of its hosts, so the cost does not grow with the cluster."""
    if not options:
        return []
    if not cluster_name or not any(o["cluster"] == cluster_name for o in options):
        cluster_name = ex.cluster_reported_last(cluster_ids)
    reps: dict[str, int] = {}
    hosts: dict[int, int] = {}
    for pk, fp in ex.latest_layouts_of(cluster_name):
        rep = reps.setdefault(fp or f"snapshot-{pk}", pk)
        hosts[rep] = hosts.get(rep, 0) + 1
    known = {pk: bool(g and n) for pk, g, n in
             Snapshot.objects.filter(pk__in=list(reps.values())).values_list("pk", "gpu_count", "active_nic_count")}
    first = ex.one_node_busbw(list(reps.values()))
    best = [(not known.get(pk), -hosts[pk], -v, pk) for pk in reps.values() if (v := first.get(pk)) is not None]
    return [t[-1] for t in sorted(best)[:2]]


def resolve_ref(ref: str) -> Snapshot | None:
    """A snapshot id, or ``cluster/host`` (that host's newest snapshot)."""
    if ref.isdigit():
        return ex.snapshot_with_host(int(ref))
    if "/" in ref:
        cl, _, hn = ref.partition("/")
        h = Host.objects.filter(cluster__name=cl, hostname=hn).first()
        newest = ex.host_snapshot(h, None) if h else None
        return ex.snapshot_with_host(newest.pk) if newest else None
    return None


# -- what each layout says --------------------------------------------------------------------


def layout_hosts(snap: Snapshot) -> int:
    """Hosts of the snapshot's cluster whose newest snapshot has its layout (fingerprint)."""
    if not snap.fingerprint:
        return 1
    return (ex.latest_of_each_host().filter(host__cluster_id=snap.host.cluster_id, fingerprint=snap.fingerprint)
            .count()) or 1


def _port_words(n: Mapping) -> str:
    rate = f"{n['rate_gbps']:g} Gb/s" if isinstance(n.get("rate_gbps"), (int, float)) else "rate unknown"
    return f"{rate} {n.get('link_layer') or ''}".strip()


def nic_roles(doc: Mapping, snap: Snapshot) -> dict:
    """The NIC classification the curve rests on: ``{"compute": "8x 400 Gb/s InfiniBand (mlx5_0..mlx5_7)",
    "compute_names", "not_active", "other", "overrides": [{"nic", "role", "by", "at"}], "text"}``;
    overrides are what users set on the snapshot (``Snapshot.nic_roles``)."""
    nics = doc.get("nics") or []
    groups: dict[str, list[str]] = defaultdict(list)
    down, other = [], []
    for n in nics:
        if n.get("compute") and n.get("active") is not False:
            groups[_port_words(n)].append(n["name"])
        elif n.get("compute"):
            down.append(n["name"])
        else:
            other.append(n["name"])
    compute = "; ".join(f"{len(names)}x {words} ({name_ranges(names)})" for words, names in groups.items())
    overrides = [{"nic": nic, "role": (v or {}).get("role"), "by": (v or {}).get("by"), "at": (v or {}).get("at")}
                 for nic, v in sorted((snap.nic_roles or {}).items()) if isinstance(v, Mapping)]
    text = compute or "none"
    if down:
        text += f"; compute but not Active (not counted): {name_ranges(down)}"
    if other:
        text += f"; not counted (storage / management): {name_ranges(other)}"
    if overrides:
        text += "; set by users: " + ", ".join(f"{o['nic']} {o['role']}" + (f" (by {o['by']})" if o["by"] else "")
                                               for o in overrides)
    return {"compute": compute or "none", "compute_names": [x for names in groups.values() for x in names],
            "not_active": down, "other": other, "overrides": overrides, "text": text}


def ring_plan(doc: Mapping) -> str | None:
    """NCCL's ring plan inside one node, as the estimate found it: "12 channels x 30.0 GB/s = 360.0 GB/s"."""
    est = doc.get("estimate") or {}
    ring = ((est.get("channels") or {}).get("intra") or {}).get("RING") or {}
    if not ring.get("channels") or est.get("b_gpu_gbs") is None:
        return None
    return f"{ring['channels']} channels x {ring.get('bw_intra_gbs', 0):.1f} GB/s = {est['b_gpu_gbs']:.1f} GB/s"


def layout_entry(key: str, ref: str, snap: Snapshot, doc: dict) -> dict:
    model = labels.gpu_model(doc.get("summary"), snap.gpu_model)
    return {"key": key, "ref": ref, "snap": snap, "doc": doc, "nic_rates": labels.nic_rates(snap.nic_models),
            "model": model, "hosts": layout_hosts(snap), "roles": nic_roles(doc, snap),
            "nvlink": nvlink_summary(doc), "ring_plan": ring_plan(doc),
            "name": f"{key.upper()}: {snap.host.hostname} ({(doc.get('summary') or {}).get('gpu_count')}x GPU, "
                    f"model {model})"}


def table_rows(chosen: Sequence[Mapping]) -> list[dict]:
    """One row per layout and node count the estimate covers (one row saying "not estimated" for a
    layout without a point): the table under the chart and its CSV, column for column."""
    rows = []
    for c in chosen:
        snap, doc = c["snap"], c["doc"]
        base = {"layout": c["key"].upper(), "host": snap.host.hostname, "cluster": snap.host.cluster.name,
                "snapshot": snap.pk, "hosts": c["hosts"], "gpus_per_node": (doc.get("summary") or {}).get("gpu_count"),
                "gpu_model": c["model"], "compute_nics": c["roles"]["compute"]}
        points = sorted((doc.get("estimate") or {}).get("points") or [], key=lambda p: p["nodes"])
        if not points:
            rows.append({**base, "nodes": None, "busbw_gbs": None, "algorithm": "",
                         "limit": (doc.get("estimate") or {}).get("limiting_link") or "not estimated"})
        for p in points:
            rows.append({**base, "nodes": p["nodes"], "busbw_gbs": p.get("busbw_gbs"), "algorithm": p.get("algorithm") or "",
                         "limit": p.get("limit") or ""})
    return rows


def csv_response(rows: list[dict], filename: str) -> HttpResponse:
    """The table as CSV (header = the page's column names), a download named ``filename``."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([label for _, label in TABLE_COLUMNS])
    for r in rows:
        w.writerow(["" if r.get(k) is None else r[k] for k, _ in TABLE_COLUMNS])
    resp = HttpResponse(buf.getvalue(), content_type="text/csv; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="{filename}"'
    return resp


def verdict(chosen: list[dict]) -> str | None:
    """One sentence comparing layouts A and B at the largest node count both are estimated for,
    from the estimate points the chart draws: "A (host) is 1.9x B (host) at 64 nodes: 180.3 vs
    94.1 GB/s busbw; B is limited by ..."."""
    if len(chosen) != 2:
        return None
    pts = [{p["nodes"]: p for p in (c["doc"].get("estimate") or {}).get("points") or []} for c in chosen]
    common = set(pts[0]) & set(pts[1])
    if not common:
        return None
    n = max(common)
    (a, pa), (b, pb) = ((c, p[n]) for c, p in zip(chosen, pts))
    va, vb = pa.get("busbw_gbs"), pb.get("busbw_gbs")
    if va is None or vb is None:
        return None
    name = {id(c): f"layout {c['key'].upper()} ({c['snap'].host.hostname})" for c in chosen}
    nodes = f"{n} node{'s' if n != 1 else ''}"
    if abs(va - vb) < 0.05 * max(va, vb, 1e-9):
        return f"{name[id(a)]} and {name[id(b)]} are within 5% at {nodes}: {va:.1f} vs {vb:.1f} GB/s busbw."
    hi, lo, vh, vl, plo = (a, b, va, vb, pb) if va > vb else (b, a, vb, va, pa)
    ratio = f"{vh / vl:.1f}x" if vl > 0 else "ahead of"
    limit = str(plo.get("limit") or "").split(" (", 1)[0]
    return (f"{name[id(hi)]} is {ratio} {name[id(lo)]} at {nodes}: {vh:.1f} vs {vl:.1f} GB/s busbw"
            + (f"; {name[id(lo)]} is limited by {limit}." if limit else "."))


# -- share links --------------------------------------------------------------------------------


def share_token(chosen: Sequence[Mapping], user) -> str:
    """A signed, timestamped token of the chosen snapshots (and who shared them)."""
    return signing.dumps({"l": [[c["key"], c["snap"].pk] for c in chosen], "by": user.get_username()}, salt=SALT)


def read_share_token(token: str) -> tuple[dict | None, str]:
    """(payload, "") or (None, why it does not open): expired, or not a link topoweb signed."""
    try:
        return signing.loads(token, salt=SALT, max_age=share.max_age()), ""
    except signing.SignatureExpired:
        return None, f"This capacity link has expired (links work for {settings.SHARE_LINK_MAX_AGE_DAYS} days)."
    except signing.BadSignature:
        return None, "This capacity link is not valid (it was changed or cut short)."


def token_time(token: str) -> datetime | None:
    """When the token was signed (from its timestamp)."""
    try:
        stamp = token.rsplit(":", 2)[-2]
        return datetime.fromtimestamp(signing.b62_decode(stamp), tz=dt_timezone.utc)
    except (IndexError, ValueError):
        return None


def can_share(user, chosen: Sequence[Mapping]) -> bool:
    """Share links are for editors of every chosen layout's cluster, as path share links are."""
    return bool(chosen) and all(access.has_role(user, c["snap"].host.cluster, access.EDITOR) and not c.get("plan")
                                for c in chosen)


# -- the pages ----------------------------------------------------------------------------------


def _context(chosen: list[dict]) -> dict:
    fig = figures.capacity_figure_json([(c["name"], c["doc"]) for c in chosen],
                                       measured={k: v for k, v in run_lists.capacity_points([c["snap"] for c in chosen]).items()
                                                 if not chosen[k].get("plan")}) if chosen else None
    return {"chosen": chosen, "fig": fig, "verdict": verdict(chosen), "rows": table_rows(chosen),
            "columns": TABLE_COLUMNS}


def _filename(chosen: Sequence[Mapping]) -> str:
    return "capacity-" + "-vs-".join(c["snap"].host.hostname for c in chosen) + ".csv"


@login_required
@require_GET
def capacity(request: HttpRequest) -> HttpResponse:
    options = capacity_options(request) + plan_capacity.options(request.user)
    by_id = {o["id"]: o for o in options}
    if not any(request.GET.get(k) for k in KEYS) and options:
        picked = capacity_default(options, request.GET.get("cluster"), access.visible_cluster_ids(request.user))
        if picked:
            query = "&".join(f"{k}={pk}" for k, pk in zip(KEYS, picked))
            return redirect(f"{reverse('explorer:capacity')}?{query}")
    chosen = []
    for key in KEYS:
        ref = request.GET.get(key, "").strip()
        if not ref:
            continue
        if ref.startswith("plan:") and (planned := plan_capacity.entry(key, ref, request.user)) is not None:
            chosen.append(planned)
            continue
        snap = resolve_ref(ref)
        if snap is not None and not access.has_role(request.user, snap.host.cluster, access.VIEWER):
            snap = None  # another team's layout is answered as not found
        if snap is None:
            messages.error(request, f"Layout {key.upper()}: no snapshot {ref!r}")
            continue
        chosen.append(layout_entry(key, ref, snap, ingest.get_snapshot_doc(snap.pk)))
    ctx = _context(chosen)
    if request.GET.get("format") == "csv":
        return csv_response(ctx["rows"], _filename(chosen))
    for c in chosen:  # an older snapshot: offer it in the selectors too
        if c["snap"].pk not in by_id and not c.get("plan"):
            options = options + [{"id": c["snap"].pk, "gpus": [],
                                  "label": f"{c['snap'].host.cluster.name}/{c['snap'].host.hostname} "
                                           f"(snapshot #{c['snap'].pk})"}]
    selected = {c["key"]: c.get("option_id", c["snap"].pk) for c in chosen}
    ctx.update({"options": options, "a": selected.get("a"), "b": selected.get("b"),
                "share_days": settings.SHARE_LINK_MAX_AGE_DAYS, "can_share": can_share(request.user, chosen),
                "csv_url": request.get_full_path() + ("&" if "?" in request.get_full_path() else "?") + "format=csv"})
    if ctx["can_share"]:
        ctx["share_url"] = request.build_absolute_uri(
            reverse("explorer:capacity-shared", args=[share_token(chosen, request.user)]))
    return render(request, "explorer/capacity.html", ctx)


@require_GET
def capacity_shared(request: HttpRequest, token: str) -> HttpResponse:
    """The capacity page of a signed link, read-only, for anyone holding it (no account)."""
    payload, why = read_share_token(token)
    if payload is None:
        return render(request, "explorer/share_invalid.html", {"reason": why}, status=410)
    chosen = []
    for key, pk in payload.get("l") or []:
        snap = ex.snapshot_with_host(int(pk)) if str(pk).isdigit() else None
        if snap is None or key not in KEYS:
            return render(request, "explorer/share_invalid.html",
                          {"reason": f"The shared layout {str(key).upper()} (snapshot {pk}) no longer exists."}, status=410)
        chosen.append(layout_entry(key, str(pk), snap, ingest.get_snapshot_doc(snap.pk)))
    ctx = _context(chosen)
    if request.GET.get("format") == "csv":
        return csv_response(ctx["rows"], _filename(chosen))
    signed = token_time(token)
    ctx.update({"readonly": True, "shared_by": payload.get("by"), "signed_at": signed,
                "expires": signed + share.max_age() if signed else None,
                "csv_url": reverse("explorer:capacity-shared", args=[token]) + "?format=csv"})
    return render(request, "explorer/capacity.html", ctx)
