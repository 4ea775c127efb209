"""What one report costs the database at ingest: a new host's report of a known platform takes at
most 17 statements (21 before: the layout bookkeeping read back the document it had just written,
the host and its newest snapshot took two reads, the NIC roles two, and a host compared with no
reference re-read itself, its group and their snapshots), and the document written is never read
back."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.ingest import processing, services
from apps.ingest.models import Host, LayoutGroup, Snapshot
from tests.ingest.helpers import DEMO, IBSTAT_DOWN, TOPO_12NIC, report

NEW_HOST_STATEMENTS = 17
IBSTAT_UP = DEMO / "ibstat" / "gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt"


def _store(cluster, hostname: str, ibstat=IBSTAT_UP, collected_at: str = "2025-02-01T00:00:00Z"):
    """The real topo -m and ibstat of an 8-GPU, 12-NIC node, reported as ``hostname``."""
    data = report(hostname, topo=TOPO_12NIC, collected_at=collected_at)
    data["sections"]["ibstat"] = ibstat.read_text()
    data.pop("unavailable")
    return services.submit_report(cluster=cluster, report=data, via="agent")[0]


def _process(upload) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        assert processing.process_upload(upload.pk) == "done"
    return [q["sql"] for q in queries]


def test_a_new_host_of_a_known_platform_costs_at_most_17_statements(cluster_with_token, monkeypatch):
    cluster, _ = cluster_with_token
    monkeypatch.setattr(services, "enqueue_upload", lambda upload_id: True)  # processed below, one by one
    first, second = _store(cluster, "node-01"), _store(cluster, "node-02")
    _process(first)
    sql = _process(second)
    assert len(sql) <= NEW_HOST_STATEMENTS, "\n".join(sql)
    # the platform is named from the document in hand, not read back out of the row just written
    assert not [s for s in sql if s.startswith("SELECT") and '"ingest_snapshot"."document"' in s], "\n".join(sql)
    # and the bookkeeping is still whole: both hosts in one layout group that counts them
    group = LayoutGroup.objects.get(cluster=cluster)
    assert group.host_count == 2 and group.platform_size == 2
    assert set(Host.objects.filter(cluster=cluster).values_list("layout_id", flat=True)) == {group.pk}
    assert {h.latest_snapshot_id for h in Host.objects.filter(cluster=cluster)} == \
        set(Snapshot.objects.values_list("pk", flat=True))


def test_a_changed_layout_moves_the_host_to_a_new_group(cluster_with_token, monkeypatch):
    cluster, _ = cluster_with_token
    monkeypatch.setattr(services, "enqueue_upload", lambda upload_id: True)
    for name in ("node-01", "node-02", "node-03"):
        _process(_store(cluster, name))
    # node-03 reports again with three ports down (the real ibstat of that state): an odd one out
    _process(_store(cluster, "node-03", ibstat=IBSTAT_DOWN, collected_at="2025-03-01T00:00:00Z"))
    groups = {g.host_count: g for g in LayoutGroup.objects.filter(cluster=cluster)}
    assert sorted(groups) == [1, 2] and groups[2].status == "norm" and groups[1].status == "odd"
    assert groups[1].reference_id is not None and all(g.platform_size == 3 for g in groups.values())
    assert Host.objects.get(hostname="node-03").layout_id == groups[1].pk


def test_document_facts_are_what_the_row_gives(cluster_with_token, monkeypatch):
    """``document_facts`` (the document in hand) and ``snapshot_facts`` (read from the row) agree,
    the NVLink class included where the GPU model is unknown (a topo -m without model names)."""
    from apps.ingest import layouts
    from tests.ingest.helpers import TOPO_H100

    cluster, _ = cluster_with_token
    monkeypatch.setattr(services, "enqueue_upload", lambda upload_id: True)
    _process(_store(cluster, "node-01"))
    upload, _ = services.submit_report(cluster=cluster, report=report("node-02", topo=TOPO_H100), via="agent")
    _process(upload)
    for snap in Snapshot.objects.all():
        assert layouts.document_facts(snap.document) == layouts.snapshot_facts([snap.pk])[snap.pk]
    unnamed = Snapshot.objects.get(host__hostname="node-02").document
    unnamed["summary"].update(gpu_model=None, gpu_model_assumed=None)
    unnamed["graph"]["assumed_gpu_model"] = None
    facts = layouts.document_facts(unnamed)
    assert facts["summary"]["nvlink"] and facts["nvlink_class"] == "NV18"
