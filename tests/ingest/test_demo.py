"""manage.py load_demo: the real hosts, the generated fleet, its runs and its fabric, loaded once."""

from __future__ import annotations

import io
from collections import Counter

import pytest
from django.core.management import call_command

from apps.ingest import fabrics
from apps.ingest.models import Cluster, Fabric, Run, RunHost, Snapshot, Upload

pytestmark = pytest.mark.django_db

REAL_HOSTS = {"h100-a01", "dgx-a100-01", "dgx1-v100-01", "p40-pcie-01", "ndv4-a100-01", "esc8000-01", "igx-orin-01",
              "h100-b01"}


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _latest_snapshots(cluster: Cluster) -> dict[str, Snapshot]:
    latest = {}
    for snap in Snapshot.objects.filter(host__cluster=cluster).select_related("host").order_by("collected_at", "id"):
        latest[snap.host.hostname] = snap
    return latest


def test_load_demo_loads_real_hosts_fleet_runs_and_fabric_once(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        out = run("load_demo")
    # 9 snapshots of the 8 real hosts + 56 generated hosts, one of them (the NIC move) twice
    assert "66 new reports" in out and "64 hosts" in out and "demo runs: 3 new" in out and "demo fabric: new" in out
    assert Upload.objects.filter(status="done").count() == 66
    out = run("load_demo")
    assert "0 new reports, 66 already loaded" in out and "demo runs: 0 new, 3 already loaded" in out
    assert "demo fabric: already loaded" in out and Fabric.objects.count() == 1 and Run.objects.count() == 3

    cluster = Cluster.objects.get(name="demo")
    hosts = {h.hostname: h for h in cluster.hosts.all()}
    assert REAL_HOSTS <= set(hosts) and len(hosts) == 64
    assert all(h.description.startswith("SYNTHETIC") for name, h in hosts.items() if name not in REAL_HOSTS)
    assert "SYNTHETIC" in hosts["h100-b01"].description

    # the real host reported twice: three RoCE ports down, then every port Active
    before, after = Snapshot.objects.filter(host__hostname="h100-b01").order_by("collected_at")
    assert before.active_nic_count < after.active_nic_count

    # the demo's GPU models: at most one host in ten unknown (only the real captures that name none)
    latest = _latest_snapshots(cluster)
    unknown = sorted(name for name, snap in latest.items() if not snap.gpu_model)
    assert unknown == sorted(REAL_HOSTS - {"esc8000-01", "igx-orin-01"})  # topo -m or NCCL XML alone
    assert len(unknown) * 10 <= len(latest)
    models = Counter(snap.gpu_model for name, snap in latest.items() if name not in REAL_HOSTS)
    assert models == {"NVIDIA H100 80GB HBM3": 24, "NVIDIA A100-SXM4-40GB": 20, "NVIDIA L40S": 12}

    # the odd ones out, as their stored snapshots say
    assert latest["h100-n06"].active_nic_count == 7 and latest["h100-n01"].active_nic_count == 8
    assert latest["h100-n03"].high_count == 1 and latest["h100-n01"].high_count == 0

    # the NIC move: two snapshots a week apart, the run taken after it checked against the second
    move_before, move_after = Snapshot.objects.filter(host__hostname="h100-n12").order_by("collected_at")
    assert (move_after.collected_at - move_before.collected_at).days == 7
    h100_run = Run.objects.get(source_name="demo/h100_ib400_2of8node_allreduce_default_466gbs_nccl_tests_issue_309.txt")
    assert h100_run.measured == 466.73 and "SYNTHETIC pairing" in h100_run.description
    assert RunHost.objects.get(run=h100_run, host__hostname="h100-n12").snapshot == move_after
    assert RunHost.objects.get(run=h100_run, host__hostname="h100-n13").snapshot is not None

    # the real runs, each checked against the demo host whose hardware matches
    a100 = Run.objects.get(source_name="demo/oci_bm_gpu4_8_a100_40gb_1node_allreduce_10g.txt")
    assert a100.verdict == "healthy" and a100.measured == 232.04 and "SYNTHETIC pairing" in a100.description
    assert RunHost.objects.get(run=a100).host.hostname == "dgx-a100-01"
    log = Run.objects.get(kind="nccl_log")
    assert RunHost.objects.get(run=log).snapshot == after  # the all-Active snapshot in force on 2025-03-02

    # the fabric: the H100 pod, every adapter joined to its host by port GUID
    fabric = fabrics.cluster_fabric(cluster)
    assert fabric is not None and fabric.fabric.kind == "ibnetdiscover" and fabric.fabric.status == "ok"
    joined = fabric.attachments["hosts"]
    assert sorted(joined) == [f"h100-n{i:02d}" for i in range(1, 25)]
    assert {row["match"] for rows in joined.values() for row in rows} == {"port_guid"}
    assert sum(len(rows) for rows in joined.values()) == 24 * 8 - 1  # h100-n06's mlx5_4 is Down: not discovered
    assert not fabric.unclaimed
