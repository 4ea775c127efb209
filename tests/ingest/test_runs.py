"""Runs stored and checked (apps/ingest/runs.py) and their API: POST /api/v1/runs,
GET /api/v1/runs/{id}, /runs/{id}/raw and /clusters/{c}/runs; runs in bulk imports."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from apps.ingest import access, imports, processing, runs, services
from apps.ingest.models import Run, RunHost
from apps.ingest.reports import REPORT_SCHEMA, ReportRejected

pytestmark = pytest.mark.django_db

FIX = Path(__file__).resolve().parents[1] / "fixtures"
DEMO = Path(__file__).resolve().parents[2] / "apps" / "ingest" / "demo" / "captures"
A100_TOPO = DEMO / "topo" / "dgx_a100_ash6_mlx5_0-11_headers_nps4.txt"
A100_RUN = FIX / "nccl_tests" / "oci_bm_gpu4_8_a100_40gb_1node_allreduce_10g.txt"  # host a4bae1424041
ROCE_IBSTAT = FIX / "ibstat" / "gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt"
ROCE_PERFTEST = FIX / "perftest" / "koordinator_k8s_cx5_vf_mlx5_2_roce_ib_write_bw_mbsec_md_indent.txt"
BAD_PERFTEST = FIX / "perftest" / "synthetic_ib_write_bw_client_connect_failed.txt"


def host_report(cluster, hostname: str, collected_at: str = "2025-03-01T00:00:00Z", **sections: Path):
    report = {"schema": REPORT_SCHEMA, "hostname": hostname, "collected_at": collected_at,
              "sections": {kind: path.read_text() for kind, path in sections.items()}}
    upload, _ = services.submit_report(cluster=cluster, report=report, via="web")
    processing.process_upload(upload.pk)
    return upload


def post_run(client: Client, **body) -> object:
    return client.post("/api/v1/runs", data=json.dumps(body), content_type="application/json")


def test_a_run_is_stored_verbatim_matched_by_the_hint_and_checked(cluster_with_token):
    cluster, _ = cluster_with_token
    host_report(cluster, "dgx-a100-01", nvidia_smi_topo=A100_TOPO)
    text = A100_RUN.read_text()
    run, created = runs.submit_run(cluster=cluster, text=text, via="web", hosts={"a4bae1424041": "dgx-a100-01"},
                                   collected_at="2025-03-02T00:00:00Z", source_name="a100.txt")
    assert created and run.raw == text and run.kind == "nccl_tests" and run.status == "done"
    assert run.verdict == "healthy" and 0.85 <= run.efficiency <= 1.1 and run.unit == "GB/s"
    link = RunHost.objects.get(run=run)
    assert link.hostname == "a4bae1424041" and link.host.hostname == "dgx-a100-01" and link.snapshot is not None
    assert [g["bdf"] for g in link.gpus][:2] == ["0000:0f:00.0", "0000:15:00.0"]  # from "Using devices"
    again, created = runs.submit_run(cluster=cluster, text=text, via="web")
    assert not created and again.pk == run.pk and Run.objects.count() == 1


def test_hosts_match_by_short_name_and_snapshot_in_force_at_the_run(cluster_with_token):
    cluster, _ = cluster_with_token
    first = host_report(cluster, "roce-01.lab.example", "2025-03-01T00:00:00Z", ibstat=ROCE_IBSTAT)
    run, _ = runs.submit_run(cluster=cluster, text=ROCE_PERFTEST.read_text(), via="web", hosts=["ROCE-01"],
                             collected_at="2025-03-05T00:00:00Z")
    assert run.verdict == "broken" and run.result["expected"]["nic"] == "mlx5_2"
    assert "T1" in {f["rule"] for f in run.result["findings"]}
    assert RunHost.objects.get(run=run).snapshot.upload_id == first.pk


def test_a_run_sent_before_its_host_is_checked_again_when_the_host_reports(cluster_with_token):
    cluster, _ = cluster_with_token
    run, _ = runs.submit_run(cluster=cluster, text=ROCE_PERFTEST.read_text(), via="web", hosts=["roce-02"],
                             collected_at="2025-01-01T00:00:00Z")
    assert run.verdict == "not_comparable" and "unknown to topoweb" in run.reason
    assert RunHost.objects.get(run=run).host is None
    host_report(cluster, "roce-02", ibstat=ROCE_IBSTAT)  # processing re-checks the waiting run
    run.refresh_from_db()
    assert run.verdict == "broken" and RunHost.objects.get(run=run).host.hostname == "roce-02"
    assert any("reported after this run was measured" in w for w in run.result["warnings"])


def test_unreadable_text_is_kept_and_names_its_line(cluster_with_token):
    cluster, _ = cluster_with_token
    run, created = runs.submit_run(cluster=cluster, text=BAD_PERFTEST.read_text(), via="web", source_name="bw.txt")
    assert created and run.status == "failed" and run.raw == BAD_PERFTEST.read_text()
    assert runs.run_error_text(run).startswith("bw.txt:14: perftest failed before printing results")
    with pytest.raises(ReportRejected) as err:
        runs.submit_run(cluster=cluster, text="   ", via="web")
    assert err.value.code == "invalid_field"
    with pytest.raises(ReportRejected):
        runs.submit_run(cluster=cluster, text="x", via="web", kind="ibstat")  # a host kind, not a run kind
    assert Run.objects.count() == 1


def test_api_token_posts_a_run_and_reads_only_its_own(agent_client, cluster_with_token, logged_in_client):
    cluster, _ = cluster_with_token
    r = post_run(agent_client, text=A100_RUN.read_text(), name="a100.txt")
    assert r.status_code == 201, r.content
    out = r.json()
    assert out["kind"] == "nccl_tests" and out["verdict"] == "not_comparable" and not out["duplicate"]
    assert out["page"].endswith(f"/c/alpha/runs/{out['run_id']}/")
    again = post_run(agent_client, text=A100_RUN.read_text())
    assert again.status_code == 200 and again.json()["duplicate"] is True
    got = agent_client.get(f"/api/v1/runs/{out['run_id']}").json()
    assert got["result"]["measured"]["value"] == 232.04 and got["hosts"][0]["hostname"] == "a4bae1424041"
    _, other = services.issue_token(cluster=cluster)
    assert Client(HTTP_AUTHORIZATION=f"Bearer {other}").get(f"/api/v1/runs/{out['run_id']}").status_code == 404
    assert logged_in_client.get(f"/api/v1/runs/{out['run_id']}/raw").content.decode() == A100_RUN.read_text()
    listing = logged_in_client.get("/api/v1/clusters/alpha/runs").json()
    assert [x["run_id"] for x in listing] == [out["run_id"]] and listing[0]["verdict"] == "not_comparable"
    assert logged_in_client.get("/api/v1/clusters/alpha/runs?verdict=odd").status_code == 400


def test_api_unreadable_run_is_400_with_the_line_and_kept(agent_client):
    r = post_run(agent_client, text=BAD_PERFTEST.read_text(), name="bw.txt")
    assert r.status_code == 400
    out = r.json()
    assert out["code"] == "unreadable_run" and out["error"].startswith("bw.txt:14: ")
    assert out["line"].strip() == "Couldn't connect to 10.20.0.12:18515"
    assert Run.objects.get(pk=out["run_id"]).raw == BAD_PERFTEST.read_text()


def test_api_with_a_login_needs_the_editor_role(cluster_with_token, django_user_model):
    cluster, _ = cluster_with_token
    viewer = django_user_model.objects.create_user("vic", password="x")
    editor = django_user_model.objects.create_user("eve", password="x")
    outsider = django_user_model.objects.create_user("otto", password="x")
    access.grant(cluster=cluster, role=access.VIEWER, username="vic")
    access.grant(cluster=cluster, role=access.EDITOR, username="eve")
    body = {"text": ROCE_PERFTEST.read_text(), "cluster": "alpha", "hosts": ["roce-01"]}
    for user, status in ((viewer, 403), (outsider, 404), (editor, 201)):
        c = Client()
        c.force_login(user)
        assert post_run(c, **body).status_code == status, user
    assert Run.objects.get().user == editor and Run.objects.get().via == "web"
    anonymous = post_run(Client(), **body)
    assert anonymous.status_code == 401
    c = Client()
    c.force_login(editor)
    assert post_run(c, text="x").status_code == 400  # no cluster named


def test_api_refuses_bad_bodies_without_storing(agent_client):
    assert agent_client.post("/api/v1/runs", data=b"{", content_type="application/json").json()["code"] == "not_json"
    assert post_run(agent_client, text="").json()["code"] == "invalid_field"
    assert post_run(agent_client, text="x", kind="nope").json()["code"] == "unknown_kind"
    assert post_run(agent_client, text="x", hosts=[1, 2]).json()["field"] == "hosts"
    assert post_run(agent_client, text="x", collected_at="yesterday").json()["field"] == "collected_at"
    assert post_run(agent_client, text="x", cluster="other").json()["field"] == "cluster"
    assert Run.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_import_reports_imports_runs_next_to_captures(tmp_path):
    host = tmp_path / "fleet" / "roce-03"
    (host / "runs").mkdir(parents=True)
    (host / "ibstat.txt").write_text(ROCE_IBSTAT.read_text())
    (host / "runs" / "write_bw.txt").write_text(ROCE_PERFTEST.read_text())
    (tmp_path / "fleet" / "connect_failed.log").write_text(BAD_PERFTEST.read_text())
    out = io.StringIO()
    with pytest.raises(SystemExit) as exc:
        call_command("import_reports", str(tmp_path / "fleet"), "--cluster", "lab", "--no-progress", stdout=out,
                     stderr=io.StringIO())
    assert exc.value.code == 1  # the unreadable run is rejected (and kept)
    text = out.getvalue()
    assert "runs: 1 new, 0 already stored, 1 unreadable" in text
    assert "connect_failed.log:14: perftest failed" in text
    run = Run.objects.get(status="done")
    assert run.via == "import" and run.verdict == "broken"  # checked against roce-03's layout (hint: its folder)
    assert RunHost.objects.get(run=run).host.hostname == "roce-03"
    assert Run.objects.filter(status="failed").count() == 1


def test_import_reads_runs_from_an_archive(tmp_path, cluster_with_token):
    cluster, _ = cluster_with_token
    tree = tmp_path / "t" / "roce-04"
    (tree / "runs").mkdir(parents=True)
    (tree / "ibstat.txt").write_text(ROCE_IBSTAT.read_text())
    (tree / "runs" / "bw.out").write_text(ROCE_PERFTEST.read_text())
    archive = tmp_path / "fleet.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "t", arcname="fleet")
    summary = imports.import_reports(cluster=cluster, path=archive)
    assert summary.created == 1 and summary.runs_created == 1
    run = Run.objects.get()
    assert run.source_name == "fleet/roce-04/runs/bw.out" and run.hosts_hint == ["roce-04"]


def test_the_openapi_page_documents_the_run_endpoints(logged_in_client):
    paths = logged_in_client.get("/api/v1/openapi.json").json()["paths"]
    assert {"/api/v1/runs", "/api/v1/runs/{run_id}", "/api/v1/runs/{run_id}/raw",
            "/api/v1/clusters/{cluster}/runs"} <= set(paths)
