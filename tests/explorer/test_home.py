"""The fleet home page: clusters with hosts, GPUs, layouts, odd ones out and worst problem, and the
fleet's problems ranked by what they cost, each linking to its hosts."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from apps.explorer import home
from apps.ingest import access
from tests.explorer import helpers as h

pytestmark = pytest.mark.django_db


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&gt;", ">")


def table(html: str, element_id: str) -> str:
    start = html.index(f'id="{element_id}"')
    return html[start:html.index("</table>", start)]


@pytest.fixture(autouse=True)
def fresh_cache():
    home.clear_cache()
    yield
    home.clear_cache()


def test_home_ranks_problems_by_cost_and_links_their_hosts(signed_in):
    c = h.cluster()
    for name in ("node-a", "node-b"):
        h.standard_host(c, name)
    h.snapshot(c, "node-c", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_3")})
    body = signed_in.get("/").content.decode()
    problems = table(body, "problem-table")
    rows = problems.split('<tr class="problem">')[1:]
    assert rows, problems
    ports = [r for r in rows if "<b>F01</b>" in r]
    assert len(ports) == 2  # the healthy layout's own ports down (2 hosts) and node-c's worse case
    worse = next(r for r in ports if "node-c" in r)
    assert "/c/lab/h/node-c/" in worse and "mlx5_3" in worse
    assert "compute ports Down" in text(worse) and "of inter-node bandwidth" in text(worse)
    common = next(r for r in ports if "node-c" not in r)
    assert "2 hosts:" in text(common) and "/c/lab/h/node-a/" in common and "/c/lab/h/node-b/" in common
    costs = [float(text(r).split()[-1]) for r in rows]
    assert costs == sorted(costs, reverse=True)

    clusters = text(table(body, "cluster-table"))
    # lab: 3 hosts, 24 GPUs, 2 layouts, node-c the odd one out
    assert re.search(r"lab 3 24 2 1 ", clusters), clusters


def test_home_shows_only_the_clusters_a_user_may_see(client, django_user_model):
    red, blue = h.cluster("red"), h.cluster("blue")
    h.snapshot(red, "red-01", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_3")})
    h.snapshot(blue, "blue-01", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_3")})
    viewer = django_user_model.objects.create_user("viewer", password="pw")
    access.grant(cluster=red, role=access.VIEWER, username="viewer")
    client.force_login(viewer)
    body = client.get(reverse("explorer:clusters")).content.decode()
    assert "red-01" in body and "blue-01" not in body and "/c/blue/" not in body


def test_a_healthy_fleet_says_so(signed_in):
    c = h.cluster()
    h.snapshot(c, "della", {"nvidia_smi_topo": h.read(h.TOPO_DELLA)})
    body = signed_in.get("/").content.decode()
    if 'id="problem-table"' in body:  # della's layout has findings of its own: they are ranked
        assert "/c/lab/h/della/" in table(body, "problem-table")
    else:
        assert 'id="no-problems"' in body


def test_problems_are_read_once_per_snapshot_build(signed_in, monkeypatch):
    c = h.cluster()
    h.snapshot(c, "node-c", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_3")})
    first = signed_in.get("/").content.decode()
    from apps.ingest.models import Snapshot

    reads = []
    real = Snapshot.objects.filter

    def counting(*args, **kwargs):
        reads.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(Snapshot.objects, "filter", counting)
    again = signed_in.get("/").content.decode()
    monkeypatch.undo()
    assert not [k for k in reads if "pk__in" in k], reads  # no document read the second time
    assert table(first, "problem-table") == table(again, "problem-table")
