"""A job placed on a cluster's hosts: the latest snapshot of each host and the fabric in force.

``cluster_placement(cluster, *, nodes=None, gpus_per_node=None, gpus=None, seed=RANDOM_SEED) -> dict``
    ``apps.domain.placement.place`` over the latest snapshot of every host of ``cluster`` (plans
    are not snapshots and never take part) and, when a readable discovery is stored, the fabric in
    force with the hosts attached (``fabrics.cluster_fabric``/``fabric_view``). Only the fields
    placement reads (``placement.PLACE_FIELDS``) are loaded for every host; the whole document of
    one host per layout is loaded when its estimate is needed. The answer adds ``cluster`` and
    ``fabric_id`` (None without a discovery). Raises ``placement.PlacementError`` (its ``field``
    and message name the problem).

The CLI (``manage.py place``), the page (``/c/<cluster>/place/``) and the API
(``POST /api/v1/clusters/{c}/place``) call it.
"""

from __future__ import annotations

from collections.abc import Mapping

from apps.domain.placement import PLACE_FIELDS, RANDOM_SEED, PlacementError, place
from apps.ingest import fabrics, selectors
from apps.ingest.models import Cluster, Snapshot

__all__ = ["cluster_placement", "PlacementError", "RANDOM_SEED"]

BATCH = 500  # snapshots read per query


def _light_documents(snapshot_ids: list[int]) -> dict[str, dict]:
    """``{hostname: {field: value}}`` of ``PLACE_FIELDS`` (the host name from the host row)."""
    columns = [f"document__{f}" for f in PLACE_FIELDS if f != "hostname"]
    out: dict[str, dict] = {}
    for start in range(0, len(snapshot_ids), BATCH):
        rows = Snapshot.objects.filter(pk__in=snapshot_ids[start:start + BATCH]).values_list(
            "host__hostname", *columns)
        for hostname, *values in rows:
            doc = {f: v for f, v in zip((f for f in PLACE_FIELDS if f != "hostname"), values)}
            doc["hostname"] = hostname
            out[hostname] = doc
    return out


def cluster_placement(cluster: Cluster, *, nodes: int | None = None, gpus_per_node: int | None = None,
                      gpus: int | None = None, seed: int = RANDOM_SEED) -> dict:
    """Place a job on ``cluster`` (module docstring)."""
    snaps = selectors.latest_snapshots(cluster)
    ids = {s.host.hostname: s.pk for s in snaps}
    docs = _light_documents(list(ids.values()))
    whole: dict[str, Mapping] = {}

    def full(hostname: str) -> Mapping:
        if hostname not in whole:
            whole[hostname] = selectors.get_snapshot_doc(ids[hostname])
        return whole[hostname]

    cf = fabrics.cluster_fabric(cluster)
    view = fabrics.fabric_view(cf) if cf is not None else None
    if not docs:
        raise PlacementError("cluster", f"cluster {cluster.name} has no host with a snapshot: nothing to place on")
    result = place(docs.values(), nodes=nodes, gpus_per_node=gpus_per_node, gpus=gpus, view=view, seed=seed,
                   full=full)
    return {"cluster": cluster.name, "fabric_id": cf.fabric.pk if cf is not None else None, **result}
