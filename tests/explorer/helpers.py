"""Shared builders of the explorer tests: real captures into stored snapshots."""

from __future__ import annotations

from pathlib import Path

from apps.ingest import processing, reports, services
from apps.ingest.models import Cluster, Snapshot

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TOPO = FIXTURES / "nvidia_smi_topo" / "mooncake_issue_8xnv18_12nic_cpuset_list.txt"
IBSTAT = FIXTURES / "ibstat" / "mooncake_issue_8x_cx7_ndr_plus_cx6dx_eth.txt"
TOPO_DELLA = FIXTURES / "bundles" / "paths_della_8xh100_6nic" / "nvidia_smi_topo.txt"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def ibstat_port_down(nic: str = "mlx5_0") -> str:
    """SYNTHETIC: the real mooncake ibstat with one HCA port turned Down (for before/after tests)."""
    text = read(IBSTAT)
    head, sep, tail = text.partition(f"CA '{nic}'")
    block, nxt, rest = tail.partition("\nCA '")
    block = block.replace("State: Active", "State: Down").replace("Physical state: LinkUp", "Physical state: Disabled")
    return head + sep + block + nxt + rest


def ibstat_renamed(nic: str, new_name: str) -> str:
    """SYNTHETIC: the real mooncake ibstat with CA ``nic`` renamed ``new_name`` (hostile names)."""
    text = read(IBSTAT)
    assert f"CA '{nic}'" in text
    return text.replace(f"CA '{nic}'", f"CA '{new_name}'")


def snapshot(cluster: Cluster, hostname: str, sections: dict[str, str], collected_at: str | None = None) -> Snapshot:
    report = {"schema": reports.REPORT_SCHEMA, "hostname": hostname, "sections": sections}
    if collected_at:
        report["collected_at"] = collected_at
    upload, _ = services.submit_report(cluster=cluster, report=report, via="web")
    processing.process_upload(upload.pk)
    return Snapshot.objects.get(upload=upload)


def cluster(name: str = "lab") -> Cluster:
    return Cluster.objects.filter(name=name).first() or services.create_cluster(name=name)


def standard_host(c: Cluster, hostname: str, **kw) -> Snapshot:
    return snapshot(c, hostname, {"nvidia_smi_topo": read(TOPO), "ibstat": read(IBSTAT)}, **kw)
