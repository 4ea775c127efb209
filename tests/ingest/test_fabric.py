"""The fabric stored per cluster (apps/ingest/fabrics.py) and its API: POST /api/v1/fabric, GET
/api/v1/fabric/{id}, /fabric/{id}/raw, /clusters/{c}/fabric and /clusters/{c}/fabric/compare; versions,
the fabric in force, and the hosts joined to it by GUID and by name."""

from __future__ import annotations

import io
import json
import tarfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from apps.ingest import access, fabrics, imports, processing, services
from apps.ingest.models import Fabric, Host
from apps.ingest.reports import REPORT_SCHEMA, ReportRejected
from tests.domain.test_fabric_compare import LEAF, SUPERPOD, superpod_next_day

pytestmark = pytest.mark.django_db

FIX = Path(__file__).resolve().parents[1] / "fixtures"  # real captures copied from ../shared/realdata
IBM_2NODE = FIX / "ibnetdiscover" / "ibm_pcm_2node_mt43132_8port_switch_sdr_2009.txt"
IBNODES = FIX / "ibnodes" / "ibnodes_qdr_infiniscale_iv_4hosts_1switch.txt"
TEAKER = FIX / "iblinkinfo" / "qdr_infiniscale_iv_18port_teaker_8hosts_one_dual_port_ca.txt"
ARCHWIKI_IBSTAT = FIX / "ibstat" / "archwiki_connectx_mt25418_ddr.txt"  # mlx4_0, node GUID 0x0002c90300002f78
LLDP_JSON = FIX / "lldpctl_json" / "synthetic_roce_gpu_node_4nics_two_leaves.txt"


@pytest.fixture(autouse=True)
def _fresh_caches():
    fabrics.clear_caches()
    yield
    fabrics.clear_caches()


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def post_fabric(client: Client, **body) -> object:
    return client.post("/api/v1/fabric", data=json.dumps(body), content_type="application/json")


def host_report(cluster, hostname: str, sections: dict[str, str], collected_at: str = "2025-03-01T00:00:00Z"):
    report = {"schema": REPORT_SCHEMA, "hostname": hostname, "collected_at": collected_at, "sections": sections}
    upload, _ = services.submit_report(cluster=cluster, report=report, via="web")
    processing.process_upload(upload.pk)
    return upload


def ibstat_of_compute_00_01() -> str:
    """DERIVED IN THIS TEST from the real ArchWiki ibstat (mlx4_0, a dual-port DDR ConnectX): its node
    and port-1 GUIDs replaced by those the real 2009 ibnetdiscover gives "compute-00-01 HCA-1"
    (caguid 0x2c902002789ac, port GUID 2c902002789ad), as if ibstat had been run on that host."""
    text = ARCHWIKI_IBSTAT.read_text()
    text = text.replace("Node GUID: 0x0002c90300002f78", "Node GUID: 0x0002c902002789ac")
    return text.replace("Port GUID: 0x0002c90300002f79", "Port GUID: 0x0002c902002789ad")


# ------------------------------------------------------------------------------------------ storing


def test_a_discovery_is_stored_verbatim_summarised_and_a_resend_is_a_duplicate(cluster_with_token):
    cluster, _ = cluster_with_token
    text = SUPERPOD.read_text()
    row, created = fabrics.submit_fabric(cluster=cluster, text=text, via="web", source_name="pod.out")
    assert created and row.raw == text and row.kind == "ibnetdiscover" and row.status == "ok" and row.host is None
    # 40 "Switch" blocks, 582 "Ca" blocks of which 40 are "Mellanox Technologies Aggregation Node" (SHARP)
    assert row.summary["switches"] == 40 and row.summary["other_cas"] == 40 and row.summary["host_adapters"] == 542
    assert row.document["source"] == "ibnetdiscover" and len(row.document["switches"]) == 40
    again, created = fabrics.submit_fabric(cluster=cluster, text=text, via="agent")
    assert not created and again.pk == row.pk and Fabric.objects.count() == 1
    assert fabrics.latest_fabric(cluster).pk == row.pk


def test_unreadable_text_is_kept_and_names_its_line(cluster_with_token):
    cluster, _ = cluster_with_token
    lines = IBM_2NODE.read_text().split("\n")
    lines[10] = '[1]     "H-0002c902002789ac[1](2c902002789ad)          # "compute-00-01 HCA-1" lid 1 4xSDR'  # quote cut
    text = "\n".join(lines)
    row, created = fabrics.submit_fabric(cluster=cluster, text=text, via="web", kind="ibnetdiscover", source_name="t.txt")
    assert created and row.status == "failed" and row.raw == text and row.summary is None
    assert row.error["line_no"] == 11 and row.error["line"] == lines[10]
    assert fabrics.fabric_error_text(row).startswith("t.txt:11: port line not like")
    assert fabrics.latest_fabric(cluster) is None  # a failed upload is never in force
    unknown, _ = fabrics.submit_fabric(cluster=cluster, text="hello\n", via="web")
    assert unknown.status == "failed" and unknown.kind == "" and "cannot tell which command" in unknown.error["reason"]


def test_what_cannot_be_stored_at_all_is_refused_naming_the_field(cluster_with_token, settings):
    cluster, _ = cluster_with_token
    for kwargs, field in (({"text": "  "}, "text"), ({"text": "a\x00b"}, "text"), ({"text": 3}, "text"),
                          ({"text": "x", "kind": "ibstat"}, "kind"), ({"text": "x", "host": "bad name!"}, "host"),
                          ({"text": "x", "collected_at": "yesterday"}, "collected_at"),
                          ({"text": LLDP_JSON.read_text()}, "host")):  # a per-host kind needs its host
        with pytest.raises(ReportRejected) as err:
            fabrics.submit_fabric(cluster=cluster, via="web", **kwargs)
        assert err.value.details.get("field") == field, kwargs
    settings.MAX_FABRIC_BYTES = 1024
    with pytest.raises(ReportRejected) as err:
        fabrics.submit_fabric(cluster=cluster, text=SUPERPOD.read_text(), via="web")
    assert err.value.status == 413
    assert Fabric.objects.count() == 0


def test_per_host_outputs_belong_to_their_host_and_identical_texts_of_two_hosts_are_two_rows(cluster_with_token):
    cluster, _ = cluster_with_token
    host_report(cluster, "gpu-r01.lab", {"ibstat": ARCHWIKI_IBSTAT.read_text()})
    text = LLDP_JSON.read_text()
    row, created = fabrics.submit_fabric(cluster=cluster, text=text, via="web", host="GPU-R01")
    assert created and row.kind == "lldpctl_json" and row.host.hostname == "gpu-r01.lab"  # short name, any case
    other, created = fabrics.submit_fabric(cluster=cluster, text=text, via="web", host="gpu-r02")
    assert created and other.pk != row.pk and Host.objects.get(pk=other.host_id).hostname == "gpu-r02"
    assert fabrics.submit_fabric(cluster=cluster, text=text, via="web", host="gpu-r01.lab")[1] is False
    discovery, _ = fabrics.submit_fabric(cluster=cluster, text=IBM_2NODE.read_text(), via="web", host="gpu-r01.lab")
    assert discovery.host is None  # a discovery describes the whole fabric


def test_versions_and_the_fabric_in_force_at_a_moment(cluster_with_token):
    cluster, _ = cluster_with_token
    old, _ = fabrics.submit_fabric(cluster=cluster, text=SUPERPOD.read_text(), via="web",
                                   collected_at="2025-03-01T00:00:00Z")
    new, _ = fabrics.submit_fabric(cluster=cluster, text=superpod_next_day(SUPERPOD.read_text()), via="web",
                                   collected_at="2025-03-02T00:00:00Z")
    nodes, _ = fabrics.submit_fabric(cluster=cluster, text=IBNODES.read_text(), via="web",
                                     collected_at="2025-03-03T00:00:00Z")
    assert nodes.kind == "ibnodes" and nodes.summary["switches"] == 1  # a node list: summarised, never in force
    assert fabrics.latest_fabric(cluster).pk == new.pk
    assert fabrics.latest_fabric(cluster, at=utc(2025, 3, 1, 12)
                                 ).pk == old.pk
    assert fabrics.latest_fabric(cluster, at=utc(2025, 2, 1)) is None
    assert [f.pk for f in fabrics.fabric_versions(cluster)] == [nodes.pk, new.pk, old.pk]
    assert fabrics.previous_fabric(new).pk == old.pk and fabrics.previous_fabric(old) is None
    future, _ = fabrics.submit_fabric(cluster=cluster, text=TEAKER.read_text(), via="web",
                                      collected_at="2999-01-01T00:00:00Z")
    assert future.collected_at is None and "ahead of the server's clock" in future.warnings[0]


def test_the_graph_is_built_once_per_fabric_and_rebuilt_from_the_stored_json(cluster_with_token):
    cluster, _ = cluster_with_token
    row, _ = fabrics.submit_fabric(cluster=cluster, text=SUPERPOD.read_text(), via="web")
    first = fabrics.fabric_graph(row)
    assert fabrics.fabric_graph(Fabric.objects.get(pk=row.pk)) is first  # the submit's graph, kept
    fabrics.clear_caches()
    rebuilt = fabrics.fabric_graph(row)
    assert rebuilt is not first and rebuilt.number_of_nodes() == first.number_of_nodes() == 622  # 40 + 582
    with pytest.raises(ValueError):
        fabrics.fabric_graph(fabrics.submit_fabric(cluster=cluster, text="hello\n", via="web")[0])


def test_a_document_too_large_to_keep_is_read_again_from_the_raw_text(cluster_with_token, monkeypatch):
    cluster, _ = cluster_with_token
    monkeypatch.setattr(fabrics, "DOCUMENT_KEEP_BYTES", 1000)
    row, _ = fabrics.submit_fabric(cluster=cluster, text=SUPERPOD.read_text(), via="web")
    assert Fabric.objects.get(pk=row.pk).document is None and row.summary["switches"] == 40
    fabrics.clear_caches()
    assert fabrics.fabric_graph(row).number_of_nodes() == 622


# ------------------------------------------------------------------------------------------ hosts


def test_hosts_join_by_guid_else_by_name_and_the_leftovers_are_listed(cluster_with_token):
    """Real 2009 fabric: one 8-port switch, compute-00-01 on port 1, compute-00-00 on port 2."""
    cluster, _ = cluster_with_token
    host_report(cluster, "compute-00-01", {"ibstat": ibstat_of_compute_00_01()})
    host_report(cluster, "compute-00-00.cluster", {"ibstat": (FIX / "ibstat" / "cx6_hdr_active_after_sm.txt").read_text()})
    host_report(cluster, "archwiki", {"ibstat": ARCHWIKI_IBSTAT.read_text()})  # GUIDs of another fabric
    fabrics.submit_fabric(cluster=cluster, text=IBM_2NODE.read_text(), via="web")
    joined = fabrics.cluster_fabric(cluster)
    hosts = joined.attachments["hosts"]
    exact = hosts["compute-00-01"]
    assert [(r["nic"], r["port"], r["match"], r["leaf_name"], r["leaf_port"]) for r in exact] == [
        ("mlx4_0", 1, "port_guid", "MT43132 Mellanox Technologies", 1),
        ("mlx4_0", 2, "node_guid", None, None)]  # port 2 is Down (Polling): not cabled in the discovery
    by_name = hosts["compute-00-00.cluster"]  # "compute-00-00 HCA-1": the short name joins
    assert [(r["match"], r["leaf_port"]) for r in by_name] == [("name", 2)]
    assert joined.host_of_ca == {"ib:0x0002c902002789ac": "compute-00-01", "ib:0x0002c9030002847c": "compute-00-00.cluster"}
    assert [(h["host"], h["reason"]) for h in joined.unmatched_hosts] == [
        ("archwiki", "its port GUIDs are not in this discovery")]
    assert {r["port_guid"] for r in joined.attachments["unmatched"] if r["host"] == "archwiki"} == {
        "0x0002c90300002f79", "0x0002c90300002f7a"}
    assert joined.unclaimed == []
    assert fabrics.cluster_fabric(cluster) is not joined  # a new result, the join itself cached
    assert fabrics.cluster_fabric(cluster).attachments is joined.attachments


def test_adapters_no_host_claims_are_listed_and_lldp_rides_along(cluster_with_token):
    cluster, _ = cluster_with_token
    fabrics.submit_fabric(cluster=cluster, text=TEAKER.read_text(), via="web")  # 8 teaker hosts, none reporting
    host_report(cluster, "teaker-4", {"ibstat": ARCHWIKI_IBSTAT.read_text()})
    fabrics.submit_fabric(cluster=cluster, text=LLDP_JSON.read_text(), via="web", host="teaker-4")
    synthetic_ibdev2netdev = "mlx5_0 port 1 ==> ens1f0np0 (Up)\n"  # SYNTHETIC: names the LLDP capture's first NIC
    fabrics.submit_fabric(cluster=cluster, text=synthetic_ibdev2netdev, via="web", host="teaker-4",
                          kind="ibdev2netdev")
    joined = fabrics.cluster_fabric(cluster)
    assert [r["match"] for r in joined.attachments["hosts"]["teaker-4"]] == ["name"]
    unclaimed = {u["described_host"] for u in joined.unclaimed}
    assert unclaimed == {f"teaker-{i}" for i in range(5, 12)}  # teaker-5 .. teaker-11 have not reported
    lldp = joined.attachments["lldp"]["teaker-4"]
    assert (lldp[0]["interface"], lldp[0]["nic"], lldp[0]["switch"], lldp[0]["switch_port"]) == (
        "ens1f0np0", "mlx5_0", "leaf-a01", "Ethernet0")


def test_the_hosts_in_force_at_a_moment_join_the_discovery_of_then(cluster_with_token):
    cluster, _ = cluster_with_token
    host_report(cluster, "compute-00-01", {"ibstat": ARCHWIKI_IBSTAT.read_text()}, "2025-03-01T00:00:00Z")
    host_report(cluster, "compute-00-01", {"ibstat": ibstat_of_compute_00_01()}, "2025-03-05T00:00:00Z")
    fabrics.submit_fabric(cluster=cluster, text=IBM_2NODE.read_text(), via="web", collected_at="2025-02-01T00:00:00Z")
    then = fabrics.cluster_fabric(cluster, at=utc(2025, 3, 2))
    now = fabrics.cluster_fabric(cluster)
    assert then.fabric.pk == now.fabric.pk
    assert [r["match"] for r in then.attachments["hosts"]["compute-00-01"]] == ["name"]
    assert [r["match"] for r in now.attachments["hosts"]["compute-00-01"]] == ["port_guid", "node_guid"]
    assert fabrics.cluster_fabric(cluster, at=utc(2025, 1, 1)) is None


# ------------------------------------------------------------------------------------------ API


def test_api_token_posts_a_discovery_and_reads_only_its_own(agent_client, cluster_with_token, logged_in_client):
    cluster, _ = cluster_with_token
    r = post_fabric(agent_client, text=SUPERPOD.read_text(), source_name="pod.out", collected_at="2025-03-01T00:00:00Z")
    assert r.status_code == 201, r.content
    out = r.json()
    assert out["kind"] == "ibnetdiscover" and out["status"] == "ok" and out["in_force"] is True
    assert out["summary"]["switches"] == 40 and not out["duplicate"] and out["warnings"] == []
    assert out["url"].endswith(f"/api/v1/fabric/{out['fabric_id']}") and out["page"].endswith("/c/alpha/fabric/")
    again = post_fabric(agent_client, text=SUPERPOD.read_text())
    assert again.status_code == 200 and again.json()["duplicate"] is True
    got = agent_client.get(f"/api/v1/fabric/{out['fabric_id']}").json()
    assert got["document"]["switches"][0]["name"] == LEAF and got["hosts"]["unmatched_hosts"] == []
    assert len(got["hosts"]["unclaimed"]) == 542  # no host of alpha has reported yet
    _, other = services.issue_token(cluster=cluster)
    assert Client(HTTP_AUTHORIZATION=f"Bearer {other}").get(f"/api/v1/fabric/{out['fabric_id']}").status_code == 404
    raw = logged_in_client.get(f"/api/v1/fabric/{out['fabric_id']}/raw")
    assert raw.content.decode() == SUPERPOD.read_text() and raw["Content-Type"].startswith("text/plain")
    listing = logged_in_client.get("/api/v1/clusters/alpha/fabric").json()
    assert listing["in_force"] == out["fabric_id"] and [v["fabric_id"] for v in listing["versions"]] == [out["fabric_id"]]
    assert logged_in_client.get("/api/v1/clusters/alpha/fabric?kind=odd").status_code == 400


def test_api_unreadable_fabric_is_400_with_the_line_and_kept(agent_client):
    r = post_fabric(agent_client, text="Switch 8 \"S-000b8cffff0053ee\"\n[1] garbage\n", kind="ibnetdiscover",
                    source_name="f.txt")
    assert r.status_code == 400
    out = r.json()
    assert out["code"] == "unreadable_fabric" and out["error"].startswith("f.txt:") and out["line_no"] >= 1
    assert Fabric.objects.get(pk=out["fabric_id"]).status == "failed"


def test_api_refuses_bad_bodies_without_storing(agent_client, settings):
    assert agent_client.post("/api/v1/fabric", data=b"{", content_type="application/json").json()["code"] == "not_json"
    assert post_fabric(agent_client, text="").json()["field"] == "text"
    assert post_fabric(agent_client, text="x", kind="nope").json()["code"] == "unknown_kind"
    assert post_fabric(agent_client, text=LLDP_JSON.read_text()).json()["field"] == "host"
    assert post_fabric(agent_client, text="x", collected_at="yesterday").json()["field"] == "collected_at"
    assert post_fabric(agent_client, text="x", cluster="other").json()["field"] == "cluster"
    settings.MAX_FABRIC_BYTES = 1024
    big = post_fabric(agent_client, text=SUPERPOD.read_text())
    assert big.status_code == 413 and big.json()["code"] == "too_large"
    assert Fabric.objects.count() == 0


def test_api_with_a_login_needs_the_editor_role(cluster_with_token, django_user_model):
    cluster, _ = cluster_with_token
    viewer = django_user_model.objects.create_user("vic", password="x")
    editor = django_user_model.objects.create_user("eve", password="x")
    access.grant(cluster=cluster, role=access.VIEWER, username="vic")
    access.grant(cluster=cluster, role=access.EDITOR, username="eve")
    body = {"text": IBM_2NODE.read_text(), "cluster": "alpha"}
    for user, status in ((viewer, 403), (editor, 201)):
        c = Client()
        c.force_login(user)
        assert post_fabric(c, **body).status_code == status, user
    row = Fabric.objects.get()
    assert row.user == editor and row.via == "web"
    assert post_fabric(Client(), **body).status_code == 401
    c = Client()
    c.force_login(editor)
    assert post_fabric(c, text="x").json()["field"] == "cluster"


def test_api_compares_two_discoveries_in_sentences(cluster_with_token, logged_in_client):
    cluster, _ = cluster_with_token
    old, _ = fabrics.submit_fabric(cluster=cluster, text=SUPERPOD.read_text(), via="web",
                                   collected_at="2025-03-01T00:00:00Z")
    new, _ = fabrics.submit_fabric(cluster=cluster, text=superpod_next_day(SUPERPOD.read_text()), via="web",
                                   collected_at="2025-03-02T00:00:00Z")
    lldp, _ = fabrics.submit_fabric(cluster=cluster, text=LLDP_JSON.read_text(), via="web", host="n1")
    out = logged_in_client.get("/api/v1/clusters/alpha/fabric/compare").json()  # the one in force and the one before
    assert out["from"]["fabric_id"] == old.pk and out["to"]["fabric_id"] == new.pk
    assert out["summary"][1] == f"a08-p1-dgx-04-c02 mlx5_5 moved from {LEAF} port 2 to {LEAF} port 18"
    back = logged_in_client.get(f"/api/v1/clusters/alpha/fabric/compare?from={new.pk}&to={old.pk}").json()
    assert back["counts"]["links_up"] == 1 and back["counts"]["cas_added"] == 1
    for query, status, field in ((f"from={lldp.pk}", 400, "from"), ("to=999999", 404, None), ("from=x", 400, "from"),
                                 (f"to={old.pk}", 400, "from")):  # nothing before the first discovery
        r = logged_in_client.get(f"/api/v1/clusters/alpha/fabric/compare?{query}")
        assert r.status_code == status and r.json().get("field") == field, query


def test_the_openapi_page_documents_the_fabric_endpoints(logged_in_client):
    paths = logged_in_client.get("/api/v1/openapi.json").json()["paths"]
    assert {"/api/v1/fabric", "/api/v1/fabric/{fabric_id}", "/api/v1/fabric/{fabric_id}/raw",
            "/api/v1/clusters/{cluster}/fabric", "/api/v1/clusters/{cluster}/fabric/compare"} <= set(paths)


# ------------------------------------------------------------------------------------------ imports


@pytest.mark.django_db(transaction=True)
def test_import_reports_stores_fabric_files_as_fabric_uploads(tmp_path):
    fleet = tmp_path / "fleet"
    (fleet / "fabric").mkdir(parents=True)
    (fleet / "fabric" / SUPERPOD.name).write_text(SUPERPOD.read_text())  # *.out, yet a fabric: under fabric/
    (fleet / "fabric" / "broken.txt").write_text("Switch 8 \"S-000b8cffff0053ee\"\n[1] garbage\n")
    host = fleet / "gpu-r01"
    (host / "fabric").mkdir(parents=True)
    (host / "ibstat.txt").write_text(ARCHWIKI_IBSTAT.read_text())
    (host / "hostname.txt").write_text("gpu-r01.lab\n")
    (host / "fabric" / "neighbours.json").write_text(LLDP_JSON.read_text())
    (fleet / "teaker").mkdir()
    (fleet / "teaker" / "iblinkinfo.txt").write_text(TEAKER.read_text())  # named after its kind
    out = io.StringIO()
    with pytest.raises(SystemExit) as exc:
        call_command("import_reports", str(fleet), "--cluster", "lab", "--no-progress", stdout=out,
                     stderr=io.StringIO())
    assert exc.value.code == 1  # the broken discovery is rejected (and kept)
    text = out.getvalue()
    assert "1 reports in" in text and "fabric: 3 new, 0 already stored, 1 unreadable or refused" in text
    assert "fabric/broken.txt:2: " in text
    rows = {f.source_name: f for f in Fabric.objects.all()}
    assert rows[f"fabric/{SUPERPOD.name}"].kind == "ibnetdiscover" and rows[f"fabric/{SUPERPOD.name}"].via == "import"
    lldp = rows["gpu-r01/fabric/neighbours.json"]
    assert lldp.kind == "lldpctl_json" and lldp.host.hostname == "gpu-r01.lab"  # the folder's hostname.txt
    assert rows["teaker/iblinkinfo.txt"].kind == "iblinkinfo" and rows["teaker/iblinkinfo.txt"].host is None
    assert rows["fabric/broken.txt"].status == "failed"


def test_import_reads_fabric_files_from_an_archive(tmp_path, cluster_with_token):
    cluster, _ = cluster_with_token
    tree = tmp_path / "t" / "gpu-r02"
    tree.mkdir(parents=True)
    (tree / "ibstat.txt").write_text(ARCHWIKI_IBSTAT.read_text())
    (tree / "lldpcli_neighbors.txt").write_text((FIX / "lldpcli_neighbors" /
                                                 "synthetic_roce_gpu_node_4nics_two_leaves.txt").read_text())
    (tmp_path / "t" / "ibnetdiscover.txt").write_text(IBM_2NODE.read_text())
    archive = tmp_path / "fleet.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "t", arcname="fleet")
    summary = imports.import_reports(cluster=cluster, path=archive)
    assert summary.created == 1 and summary.fabrics_created == 2 and summary.status == "done"
    lldp = Fabric.objects.get(kind="lldpcli_neighbors")
    assert lldp.source_name == "fleet/gpu-r02/lldpcli_neighbors.txt" and lldp.host.hostname == "gpu-r02"
    assert Fabric.objects.get(kind="ibnetdiscover").source_name == "fleet/ibnetdiscover.txt"


def test_admin_lists_fabrics_read_only(cluster_with_token, logged_in_client):
    cluster, _ = cluster_with_token
    row, _ = fabrics.submit_fabric(cluster=cluster, text=IBM_2NODE.read_text(), via="web", source_name="ibm.txt")
    listing = logged_in_client.get("/admin/ingest/fabric/?kind=ibnetdiscover").content.decode()
    assert f"/admin/ingest/fabric/{row.pk}/change/" in listing and "alpha" in listing
    assert logged_in_client.get("/admin/ingest/fabric/add/").status_code == 403
    page = logged_in_client.get(f"/admin/ingest/fabric/{row.pk}/change/").content.decode()
    assert 'name="raw"' not in page  # shown, never editable


def test_a_fabric_has_its_own_size_limit_larger_than_a_reports(cluster_with_token, settings):
    cluster, _ = cluster_with_token
    settings.MAX_REPORT_BYTES, settings.MAX_FABRIC_BYTES = 1024, 1 << 20
    text = SUPERPOD.read_text()[: 200_000].rsplit("\n\n", 1)[0] + "\n"  # SYNTHETIC cut: whole blocks only
    row, created = fabrics.submit_fabric(cluster=cluster, text=text, via="web")  # 200 KB: over a report's limit
    assert created and row.status == "ok"
    settings.MAX_FABRIC_BYTES = 4096
    with pytest.raises(ReportRejected) as exc:
        fabrics.submit_fabric(cluster=cluster, text=text, via="web")
    assert exc.value.status == 413 and "TOPOWEB_MAX_FABRIC_BYTES" in exc.value.message


def test_lldp_neighbours_name_each_hosts_switch_without_any_discovery(cluster_with_token):
    """A RoCE cluster with no ibnetdiscover: the hosts' LLDP uploads still name their switches (the LLDP
    capture and the ibdev2netdev line are SYNTHETIC)."""
    cluster, _ = cluster_with_token
    fabrics.submit_fabric(cluster=cluster, text=LLDP_JSON.read_text(), via="web", host="roce-01")
    fabrics.submit_fabric(cluster=cluster, text="mlx5_0 port 1 ==> ens1f0np0 (Up)\n", via="web", host="roce-01",
                          kind="ibdev2netdev")
    assert fabrics.latest_fabric(cluster) is None
    seen = fabrics.lldp_neighbors(cluster, ["roce-01", "roce-02"])
    assert seen["roce-01"]["mlx5_0"] == {"switch": "leaf-a01", "switch_port": "Ethernet0"}
    assert "roce-02" not in seen
    others = set(seen["roce-01"]) - {"mlx5_0"}
    assert others and all(not name.startswith("mlx5") for name in others)  # no ibdev2netdev line: interface names


def test_a_path_between_roce_hosts_reads_the_switches_their_lldp_names(cluster_with_token, django_user_model):
    """Through the stored path query: both hosts' LLDP (SYNTHETIC capture and ibdev2netdev line) name
    the switch their mlx5_0 is cabled to; with one host's LLDP missing the path stays on the rail model."""
    from apps.ingest import selectors

    cluster, _ = cluster_with_token
    demo = Path(__file__).resolve().parents[2] / "apps" / "ingest" / "demo" / "captures"
    sections = {"nvidia_smi_topo": (demo / "topo" / "tpgds_aihub0007_8xh_nv18_12nic_numa_off_clean.txt").read_text(),
                "ibstat": (demo / "ibstat" / "gpud_h100_8x_cx7_roce400_4x_cx6dx_100_eth_all_active.txt").read_text()}
    for name in ("roce-01", "roce-02", "roce-03"):
        host_report(cluster, name, sections)
    for name in ("roce-01", "roce-02"):
        fabrics.submit_fabric(cluster=cluster, text=LLDP_JSON.read_text(), via="web", host=name)
        fabrics.submit_fabric(cluster=cluster, text="mlx5_0 port 1 ==> ens1f0np0 (Up)\n", via="web", host=name,
                              kind="ibdev2netdev")
    admin = django_user_model.objects.create_superuser("root", "root@example.org", "pw")

    def fabric_hops(dst: str) -> list[tuple[str, str]]:
        out = selectors.path_between_refs("alpha/roce-01/GPU0", f"alpha/{dst}/GPU0", admin)
        assert out["fabric_reason"].startswith("no discovery stored for cluster alpha")
        return [(h["from"], h["to"]) for h in out["hops"] if h["kind"] == "fabric"]

    assert fabric_hops("roce-02") == [("mlx5_0", "leaf-a01"), ("leaf-a01", "mlx5_0")]
    assert fabric_hops("roce-03") == [("mlx5_0", "Ethernet rail 0 switch"), ("Ethernet rail 0 switch", "mlx5_0")]
