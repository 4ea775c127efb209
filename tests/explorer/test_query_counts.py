"""The pages' cost must not grow with the fleet: the same number of queries for 3 hosts as for 30.

The larger fleets are SYNTHETIC copies of snapshots built from real captures, stored under other
host names (the rows are copied; nothing is re-analysed).
"""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.domain import platforms
from apps.ingest import layouts
from apps.ingest.models import Host, Snapshot, Upload
from tests.explorer import helpers as h

pytestmark = pytest.mark.django_db

MAX_QUERIES = 12  # session, user, and the page's own few
# the cluster page: session, user, cluster, the layout check, totals, layouts (2), the page's count,
# hosts, facts, fleet state (2), runs (2), hosts without a snapshot, the lines brought up to date
CLUSTER_MAX_QUERIES = 20  # and, once after the norm changed, the documents of the rows to compare again


def clone(src: Snapshot, hostname: str) -> Snapshot:
    """SYNTHETIC: a copy of ``src`` (snapshot and upload rows) as host ``hostname`` of its cluster."""
    host = Host.objects.create(cluster=src.host.cluster, hostname=hostname)
    up = Upload.objects.get(pk=src.upload_id)
    up.pk, up.host, up.content_hash = None, host, hashlib.sha256(hostname.encode()).hexdigest()
    up.save()
    snap = Snapshot.objects.get(pk=src.pk)
    snap.pk, snap.host, snap.upload = None, host, up
    snap.save()
    layouts.host_changed(host.pk)  # what ingest does after storing a snapshot
    return snap


@pytest.fixture
def fleet_of_three():
    c = h.cluster()
    norm = h.standard_host(c, "node-a")
    h.standard_host(c, "node-b")
    odd = h.snapshot(c, "node-c", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_3")})
    return c, norm, odd


def grow(norm: Snapshot, odd: Snapshot, n: int = 24, odd_every: int = 4) -> None:
    for i in range(n):
        clone(odd if i % odd_every == 0 else norm, f"copy-{i:03d}")


def queries(client, url: str, cold: bool = True) -> tuple[int, str]:
    if cold:
        platforms.clear_cache()
    with CaptureQueriesContext(connection) as ctx:
        resp = client.get(url)
    assert resp.status_code == 200, url
    return len(ctx.captured_queries), resp.content.decode()


def test_cluster_page_queries_do_not_grow_with_hosts_or_odd_ones(signed_in, fleet_of_three):
    c, norm, odd = fleet_of_three
    url = reverse("explorer:cluster", args=[c.name])
    small, body = queries(signed_in, url)
    assert body.count('class="odd-one"') == 1 and small <= CLUSTER_MAX_QUERIES
    grow(norm, odd)
    large, body = queries(signed_in, url)
    assert body.count('class="odd-one"') == 1 + 6 and body.count("mlx5_3") >= 7
    # the norm's first host is now copy-000: the odd rows on show are compared again, once
    assert large <= CLUSTER_MAX_QUERIES
    with CaptureQueriesContext(connection) as ctx:
        assert signed_in.get(url).status_code == 200
    assert len(ctx.captured_queries) <= small  # nothing left to compare: no document is read
    assert not any('"ingest_snapshot"."document" AS "document"' in q["sql"] for q in ctx.captured_queries)


def test_cluster_page_odd_rows_name_their_own_difference(signed_in, fleet_of_three):
    """Hosts of one odd layout are each compared with the norm, never given another host's words."""
    c, norm, _ = fleet_of_three
    other = h.snapshot(c, "node-d", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_5")})
    clone(norm, "node-e")
    body = signed_in.get(reverse("explorer:cluster", args=[c.name])).content.decode()
    rows = {name: body[body.index(f'data-v="{name}"'):] for name in ("node-c", "node-d")}
    rows = {name: row[:row.index("</tr>")] for name, row in rows.items()}
    assert "mlx5_3" in rows["node-c"] and "mlx5_5" not in rows["node-c"]
    assert "mlx5_5" in rows["node-d"] and "mlx5_3" not in rows["node-d"]
    assert other.fingerprint == Snapshot.objects.get(host__hostname="node-c").fingerprint  # one layout


@pytest.mark.parametrize("page", ["path", "path-source", "capacity", "host"])
def test_other_pages_queries_do_not_grow_with_the_fleet(signed_in, fleet_of_three, page):
    c, norm, odd = fleet_of_three
    urls = {"path": f"/path/?src={c.name}/node-a/GPU0&dst={c.name}/node-c/GPU1",
            "path-source": f"/path/?src={norm.pk}/GPU2",
            "capacity": f"/capacity/?a={norm.pk}&b={odd.pk}",
            "host": reverse("explorer:host", args=[c.name, "node-a"])}
    small, _ = queries(signed_in, urls[page])
    grow(norm, odd)
    large, body = queries(signed_in, urls[page])
    assert large == small <= MAX_QUERIES
    if page.startswith("path"):
        assert "copy-023" in body  # every host is offered in the selectors


def test_path_page_sends_gpu_names_only_for_the_hosts_on_show(signed_in, fleet_of_three):
    import json
    import re

    c, norm, odd = fleet_of_three
    grow(norm, odd, n=6)
    body = signed_in.get(f"/path/?src={norm.pk}/GPU1&dst={odd.pk}/GPU2").content.decode()
    data = json.loads(re.search(r'<script id="path-pickers" type="application/json">(.*?)</script>', body, re.S)[1])
    assert len(data["options"]) == 9 and all(len(o) == 3 for o in data["options"])
    assert set(data["gpus"]) == {str(norm.pk), str(odd.pk)}
    assert data["gpus"][str(norm.pk)] == [f"GPU{i}" for i in range(8)]


def test_gpu_names_of_one_snapshot(signed_in, fleet_of_three):
    _, norm, _ = fleet_of_three
    resp = signed_in.get(reverse("explorer:path-gpus", args=[norm.pk]))
    assert resp.status_code == 200 and resp.json()["gpus"] == [g["name"] for g in norm.document["gpus"]]
    assert signed_in.get(reverse("explorer:path-gpus", args=[norm.pk + 999])).status_code == 404
