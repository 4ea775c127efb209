"""manage.py export FORMAT on real bundles, fabric captures and stored snapshots; errors exit 2."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.domain.parsers import nccl_topo_xml

FIX = Path(__file__).resolve().parent / "fixtures"
BUNDLES = FIX / "bundles"
DELL = BUNDLES / "dell_xe9680_lspci"
SUPERPOD = FIX / "ibnetdiscover" / "nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.txt"


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("export", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def exit_code(*args: str) -> tuple[int, str]:
    with pytest.raises((CommandError, SystemExit)) as caught:
        run(*args)
    exc = caught.value
    return (exc.returncode if isinstance(exc, CommandError) else exc.code), str(exc)


def test_nccl_xml_of_a_bundle_goes_to_stdout() -> None:
    out, _ = run("nccl_xml", "--bundle", str(DELL))
    assert out.startswith("<!-- NCCL topology of dell-xe9680") and out.endswith("</system>\n")
    assert len(nccl_topo_xml.parse(out).gpus) == 8


def test_nccl_xml_from_capture_files() -> None:
    out, _ = run("nccl_xml", "--lspci-verbose", str(DELL / "lspci_verbose.txt"), "--hostname", "x1")
    assert "NCCL topology of x1" in out


def test_graph_json_and_graphml_of_a_bundle() -> None:
    data = json.loads(run("graph_json", "--bundle", str(DELL))[0])
    assert {"nodes", "edges", "graph"} <= set(data) and data["graph"]["hostname"] == "dell-xe9680"
    assert run("graphml", "--bundle", str(DELL))[0].startswith("<graphml")


def test_slurm_topology_tree_and_block_from_ibnetdiscover() -> None:
    tree, _ = run("slurm_topology", "--ibnetdiscover", str(SUPERPOD))
    assert "SwitchName=A09-P1-IBLEAF-04-04 Nodes=a08-p1-dgx-04-c[01-17]" in tree
    block, _ = run("slurm_topology", "--ibnetdiscover", str(SUPERPOD), "--form", "block")
    assert "BlockName=block05 Nodes=a08-p1-dgx-04-c[01-17]" in block and "BlockSizes=" in block


def test_k8s_labels_of_several_bundles_with_a_fabric() -> None:
    out, _ = run("k8s_labels", "--bundle", str(BUNDLES / "paddle_8xp40"), "--bundle",
                 str(BUNDLES / "stelline_esc8000a"), "--ibnetdiscover", str(SUPERPOD))
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(out) if d]
    assert names == ["paddle-8xp40", "stelline-esc8000a-e12"]


def test_errors_exit_2_naming_the_problem(tmp_path: Path) -> None:
    code, msg = exit_code("nccl_xml", "--bundle", str(BUNDLES / "paddle_8xp40"))
    assert code == 2 and "no GPU has a PCI address" in msg
    code, msg = exit_code("nccl_xml")
    assert code == 2 and "--bundle DIR" in msg
    code, msg = exit_code("nccl_xml", "--bundle", str(DELL), "--bundle", str(BUNDLES / "paddle_8xp40"))
    assert code == 2 and "give one host" in msg
    code, msg = exit_code("slurm_topology")
    assert code == 2 and "--ibnetdiscover FILE" in msg
    code, msg = exit_code("slurm_topology", "--ibnetdiscover", str(tmp_path / "missing.txt"))
    assert code == 2 and "no such file" in msg
    bad = tmp_path / "ibnet.txt"
    bad.write_text("not a topology\n")
    code, msg = exit_code("slurm_topology", "--ibnetdiscover", str(bad))
    assert code == 2 and str(bad) in msg


@pytest.fixture
def stored(cluster_with_token, django_capture_on_commit_callbacks):
    """A cluster with two hosts' snapshots, stored by the ingest pipeline from real bundles."""
    from apps.domain.bundle import read_bundle
    from apps.ingest import services
    from apps.ingest.models import Snapshot

    cluster, _ = cluster_with_token
    for bundle in ("dell_xe9680_lspci", "paths_deepep_8xa100_8nic_roce"):
        hostname, sections = read_bundle(BUNDLES / bundle)
        report = {"schema": "topoweb.report/1", "hostname": hostname, "collected_at": "2025-01-31T12:00:00Z",
                  "agent_version": "test", "sections": sections}
        with django_capture_on_commit_callbacks(execute=True):
            services.submit_report(cluster=cluster, report=report, via="web")
    return cluster, {s.host.hostname: s.pk for s in Snapshot.objects.select_related("host")}


@pytest.mark.django_db
def test_snapshot_and_cluster_read_the_database(stored) -> None:
    cluster, snapshots = stored
    out, _ = run("nccl_xml", "--snapshot", str(snapshots["dell-xe9680"]))
    assert "NCCL topology of dell-xe9680" in out
    out, _ = run("k8s_labels", "--cluster", cluster.name)
    assert [d["metadata"]["name"] for d in yaml.safe_load_all(out) if d] == ["deepep-a100-node", "dell-xe9680"]
    code, msg = exit_code("nccl_xml", "--snapshot", "999999")
    assert code == 2 and "no snapshot 999999" in msg


@pytest.mark.django_db
def test_cluster_without_a_discovery_says_so(stored) -> None:
    cluster, _ = stored
    code, msg = exit_code("slurm_topology", "--cluster", cluster.name)
    assert code == 2 and msg == (f"cluster {cluster.name} has no readable fabric discovery stored (send one: agent "
                                 "--fabric, or POST /api/v1/fabric); or use --ibnetdiscover FILE")
    code, msg = exit_code("slurm_topology", "--cluster", "nope")
    assert code == 2 and "no cluster named 'nope'" in msg
    out, err = run("k8s_labels", "--cluster", cluster.name)  # labels without leaves, and it says so
    assert "topoweb.io/leaf" not in out and "no topoweb.io/leaf labels" in err


@pytest.mark.django_db
def test_cluster_fabric_in_force_is_exported(stored) -> None:
    """The real SuperPOD ibnetdiscover stored for the cluster: topology.conf from the discovery in force,
    the same text as from the file. A person reads off the capture: leaf B09-P1-IBLEAF-04-08 has
    b08-p1-dgx-08-c01's HCA-5 on port 1."""
    from apps.ingest import fabrics

    cluster, _ = stored
    capture = Path("/work/shared/realdata/ibnetdiscover/nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.out")
    fabrics.submit_fabric(cluster=cluster, text=capture.read_text(), via="web", source_name=capture.name)
    from_db, _ = run("slurm_topology", "--cluster", cluster.name)
    from_file, _ = run("slurm_topology", "--ibnetdiscover", str(capture))
    assert from_db == from_file
    leaf = next(line for line in from_db.splitlines() if line.startswith("SwitchName=B09-P1-IBLEAF-04-08 "))
    assert "b08-p1-dgx-08-c[01," in leaf  # hostlist form: c01 is among them
    out, err = run("k8s_labels", "--cluster", cluster.name)
    assert "no topoweb.io/leaf labels" not in err
