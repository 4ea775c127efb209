"""The cluster page pages, filters and sorts its hosts in the database, and reads the layout groups
kept at ingest (apps/ingest/layouts.py): a new snapshot moves a host between groups; the backfill
rebuilds what hosts stored before the groups existed lack."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from apps.explorer import cluster_page
from apps.ingest import layouts
from apps.ingest.models import Host, LayoutGroup
from tests.explorer import helpers as h

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab():
    c = h.cluster()
    h.standard_host(c, "node-a")
    h.standard_host(c, "node-b")
    h.snapshot(c, "node-c", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_3")})
    return c


def hosts_on_page(client, c, query: str = "") -> list[str]:
    body = client.get(reverse("explorer:cluster", args=[c.name]) + query).content.decode()
    table = body[body.index('id="hosts"'):]
    table = table[:table.index("</table>")]
    rows = table.split("<tr")[2:]  # after the head row: each row's first host link is its host
    return [re.search(r'href="/c/lab/h/([^/"]+)/"', r).group(1) for r in rows]


def test_filters_and_sorts_are_the_databases(signed_in, lab):
    assert hosts_on_page(signed_in, lab) == ["node-a", "node-b", "node-c"]
    assert hosts_on_page(signed_in, lab, "?q=node-b") == ["node-b"]
    assert hosts_on_page(signed_in, lab, "?odd=1") == ["node-c"]
    assert hosts_on_page(signed_in, lab, "?sort=-hostname") == ["node-c", "node-b", "node-a"]
    odd_layout = Host.objects.get(cluster=lab, hostname="node-c").layout.position
    assert hosts_on_page(signed_in, lab, f"?layout={odd_layout}") == ["node-c"]
    assert hosts_on_page(signed_in, lab, "?sort=nonsense&severity=bogus") == ["node-a", "node-b", "node-c"]


def test_hosts_come_a_page_at_a_time(signed_in, lab, monkeypatch):
    monkeypatch.setattr(cluster_page, "PER_PAGE", 2)
    assert hosts_on_page(signed_in, lab) == ["node-a", "node-b"]
    assert hosts_on_page(signed_in, lab, "?page=2") == ["node-c"]


def test_a_new_snapshot_moves_its_host_to_the_layout_it_now_has(lab):
    a, c = (Host.objects.get(cluster=lab, hostname=n) for n in ("node-a", "node-c"))
    assert c.layout_id != a.layout_id and c.layout.status == "odd" and a.layout.status == "norm"
    # SYNTHETIC: node-c reports again with the port back up: the layout of node-a and node-b
    later = h.snapshot(lab, "node-c", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.read(h.IBSTAT)},
                       collected_at="2030-01-01T00:00:00Z")
    c.refresh_from_db()
    assert c.latest_snapshot_id == later.pk and c.layout_id == a.layout_id
    assert LayoutGroup.objects.get(pk=a.layout_id).host_count == 3
    assert not LayoutGroup.objects.filter(cluster=lab, host_count__gt=0, status="odd").exists()


def test_the_backfill_rebuilds_groups_for_hosts_stored_before_them(lab):
    before = {x.hostname: (x.latest_snapshot_id, x.layout.fingerprint) for x in Host.objects.filter(cluster=lab)}
    Host.objects.filter(cluster=lab).update(latest_snapshot=None, layout=None, layout_lines=None)
    LayoutGroup.objects.filter(cluster=lab).delete()
    assert layouts.needs_refresh(lab)
    out = io.StringIO()
    call_command("refresh_layouts", "--cluster", "lab", stdout=out)
    assert "lab: 3 host(s) placed in 2 layout group(s)" in out.getvalue()
    after = {x.hostname: (x.latest_snapshot_id, x.layout.fingerprint) for x in Host.objects.filter(cluster=lab)}
    assert after == before and not layouts.needs_refresh(lab)
    with pytest.raises(CommandError):
        call_command("refresh_layouts", "--cluster", "nope")


def test_the_nic_cell_counts_a_port_that_is_down(signed_in, lab):
    """Read off the capture's ibstat: 8 ports at 400, two at 40 (mlx5_1, mlx5_2: State Down) and two
    at 100; node-c's has mlx5_3 (400) down too: each row counts its ports down beside their rate."""
    body = signed_in.get(reverse("explorer:cluster", args=[lab.name])).content.decode()
    table = body[body.index('id="hosts"'):body.index("</table>", body.index('id="hosts"'))]
    rows = {re.search(r'href="/c/lab/h/([^/"]+)/"', r).group(1): r for r in table.split("<tr")[2:]}
    for host in ("node-a", "node-b"):
        assert "8x 400 Gb/s IB, 2x 40 Gb/s Eth (2 down), 2x 100 Gb/s Eth<" in rows[host]
    assert "8x 400 Gb/s IB (1 down), 2x 40 Gb/s Eth (2 down), 2x 100 Gb/s Eth<" in rows["node-c"]
    snap = Host.objects.get(cluster=lab, hostname="node-c").latest_snapshot
    assert snap.nic_models.startswith("8x 400 Gb/s IB (1 down)") and snap.active_nic_count == snap.nic_count - 3


def _firmware_update(text: str) -> str:
    # SYNTHETIC: the same ports after a firmware update (a new snapshot of the same layout)
    return re.sub(r"Firmware version: \S+", "Firmware version: 28.99.9999", text)


def test_a_new_snapshot_of_the_same_layout_recounts_nothing(lab):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    b = Host.objects.get(cluster=lab, hostname="node-b")
    groups = {g.pk: (g.host_count, g.status, g.position, g.reference_id) for g in LayoutGroup.objects.filter(cluster=lab)}
    with CaptureQueriesContext(connection) as seen:
        later = h.snapshot(lab, "node-b", {"nvidia_smi_topo": h.read(h.TOPO),
                                           "ibstat": _firmware_update(h.read(h.IBSTAT))},
                           collected_at="2030-01-01T00:00:00Z")
    b.refresh_from_db()
    assert later.upload.same_as_id is None and b.latest_snapshot_id == later.pk  # a snapshot of its own
    assert later.fingerprint == Host.objects.get(cluster=lab, hostname="node-a").latest_snapshot.fingerprint
    assert not [q for q in seen.captured_queries if q["sql"].startswith('UPDATE "ingest_layoutgroup"')]
    assert {g.pk: (g.host_count, g.status, g.position, g.reference_id)
            for g in LayoutGroup.objects.filter(cluster=lab)} == groups


def test_a_new_snapshot_of_the_reference_host_moves_the_reference(lab):
    a, c = (Host.objects.get(cluster=lab, hostname=n) for n in ("node-a", "node-c"))
    assert c.layout.reference_id == a.latest_snapshot_id  # the norm's first host by name
    later = h.snapshot(lab, "node-a", {"nvidia_smi_topo": h.read(h.TOPO),
                                       "ibstat": _firmware_update(h.read(h.IBSTAT))},
                       collected_at="2030-01-01T00:00:00Z")
    c.refresh_from_db()
    assert later.fingerprint == a.latest_snapshot.fingerprint and c.layout.reference_id == later.pk
    # what a recount from scratch gives
    placed = {g.pk: (g.host_count, g.status, g.position, g.reference_id) for g in LayoutGroup.objects.filter(cluster=lab)}
    layouts.refresh_cluster(lab)
    assert {g.pk: (g.host_count, g.status, g.position, g.reference_id)
            for g in LayoutGroup.objects.filter(cluster=lab)} == placed
