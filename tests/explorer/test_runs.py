"""The run pages and runs on the host, cluster, compare and capacity pages; run_figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from apps.explorer import run_figures
from apps.ingest import runs
from apps.ingest.models import Run
from tests.explorer.helpers import IBSTAT, TOPO, cluster, read, snapshot, standard_host

pytestmark = pytest.mark.django_db

FIX = Path(__file__).resolve().parents[1] / "fixtures"
RUN_466 = FIX / "nccl_tests" / "h100_ib400_2of8node_allreduce_default_466gbs_nccl_tests_issue_309.txt"  # 0666a154, b749a9b0
RUN_196 = FIX / "nccl_tests" / "k8s_mpijob_h100_2node_allreduce_512m_8g_196gbs.txt"
SOCKET_LOG = FIX / "nccl_log" / "korean_eks_llama3_shm_socket_cumem_partial.txt"


def _figure(html: str, element: str) -> dict:
    m = re.search(rf'<script id="{element}" type="application/json" data-figure="[^"]*">(.*?)</script>', html, re.S)
    assert m, element
    return json.loads(m.group(1))


@pytest.fixture
def lab():
    """Two H100 nodes of one layout (the mooncake capture) and a run of 2 nodes on them."""
    c = cluster()
    a = standard_host(c, "node-a", collected_at="2025-03-01T00:00:00Z")
    b = standard_host(c, "node-b", collected_at="2025-03-01T00:00:00Z")
    run, _ = runs.submit_run(cluster=c, text=read(RUN_466), via="web", source_name="allreduce.txt",
                             hosts={"0666a154": "node-a", "b749a9b0": "node-b"}, collected_at="2025-03-02T00:00:00Z")
    return c, a, b, run


def test_run_page_says_the_verdict_draws_the_curves_and_links_hosts_and_the_slow_pair(signed_in, lab):
    c, a, b, run = lab
    r = signed_in.get(f"/c/lab/runs/{run.pk}/")
    assert r.status_code == 200
    html = r.content.decode()
    assert 'class="verdict verdict-healthy"' in html and run.reason in html.replace("&#x27;", "'")
    assert "T9" in html and "line 37" in html  # the 8 GiB row that is above the NIC sum
    assert f'href="/c/lab/h/node-a/?snapshot={a.pk}"' in html and f'href="/c/lab/h/node-b/?snapshot={b.pk}"' in html
    link = re.search(r'<a href="([^"]+)" id="slow-pair">', html).group(1).replace("&amp;", "&")
    assert link == f"/path/?src={a.pk}/GPU0&dst={b.pk}/GPU0"
    fig = _figure(html, "fig-run-data")
    names = [t["name"] for t in fig["data"]]
    assert names[0] == "measured busbw (out-of-place)" and names[-1].startswith("expected from the layout")
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["layout"]["xaxis"]["ticktext"][0] == "1 MiB"
    assert signed_in.get(link).status_code == 200
    assert signed_in.get(f"/c/other/runs/{run.pk}/").status_code == 404


def test_host_and_cluster_pages_list_runs_with_verdicts(signed_in, lab):
    c, a, b, run = lab
    for url in ("/c/lab/h/node-a/", "/c/lab/"):
        html = signed_in.get(url).content.decode()
        section = html[html.index('id="runs"'):]
        assert f'href="/c/lab/runs/{run.pk}/"' in section and "verdict-healthy" in section, url
        assert "466.7 GB/s" in section


def test_capacity_draws_measured_points_over_the_expected_line(signed_in, lab):
    c, a, b, run = lab
    html = signed_in.get(f"/capacity/?a={a.pk}").content.decode()
    fig = _figure(html, "fig-capacity-data")
    measured = [t for t in fig["data"] if t.get("mode") == "markers"]
    assert measured and measured[0]["x"] == [2] and measured[0]["y"] == [466.73]


def test_compare_shows_runs_before_and_after_the_change(signed_in):
    """SYNTHETIC before/after: the mooncake ibstat with mlx5_0 Down, then the real one, and one
    2-node run on each (two real nccl-tests outputs)."""
    from tests.explorer.helpers import ibstat_port_down

    c = cluster()
    before = snapshot(c, "node-a", {"nvidia_smi_topo": read(TOPO), "ibstat": ibstat_port_down("mlx5_0")},
                      collected_at="2025-03-01T00:00:00Z")
    after = snapshot(c, "node-a", {"nvidia_smi_topo": read(TOPO), "ibstat": read(IBSTAT)},
                     collected_at="2025-03-10T00:00:00Z")
    hosts_196 = {"nccl-tests-h100-worker-0": "node-a", "nccl-tests-h100-worker-1": "node-a"}
    slow, _ = runs.submit_run(cluster=c, text=read(RUN_196), via="web", hosts=hosts_196,
                              collected_at="2025-03-05T00:00:00Z")
    fast, _ = runs.submit_run(cluster=c, text=read(RUN_466), via="web",
                              hosts={"0666a154": "node-a", "b749a9b0": "node-a"}, collected_at="2025-03-12T00:00:00Z")
    html = signed_in.get(f"/c/lab/h/node-a/compare/?a={before.pk}&b={after.pk}").content.decode()
    section = html[html.index('id="runs-before-after"'):]
    assert "all_reduce on 2 node(s): 196.5 -&gt; 466.7 GB/s, expected" in section
    assert section.index(f"/runs/{slow.pk}/") < section.index(f"/runs/{fast.pk}/")


def test_run_paste_stores_and_opens_the_run_and_keeps_the_host_paste(signed_in, lab):
    c, *_ = lab
    page = signed_in.get("/paste/").content.decode()
    assert 'href="/runs/paste/"' in page and 'name="hostname"' in page  # the host paste is unchanged
    r = signed_in.post("/runs/paste/", {"cluster": "lab", "text": read(SOCKET_LOG), "hosts": "node-a"})
    run = Run.objects.get(kind="nccl_log")
    assert r.status_code == 302 and r["Location"] == f"/c/lab/runs/{run.pk}/"
    html = signed_in.get(r["Location"]).content.decode()
    assert "TCP sockets instead of RDMA" in html and "via NET/Socket/0" in html and "line 5" in html
    bad = signed_in.post("/runs/paste/", {"cluster": "lab", "text": read(FIX / "perftest" /
                                                                           "synthetic_ib_write_bw_client_connect_failed.txt")})
    failed = Run.objects.get(status="failed")
    html = signed_in.get(bad["Location"]).content.decode()
    assert "paste:14: perftest failed before printing results" in html and "unreadable" in html
    assert signed_in.post("/runs/paste/", {"cluster": "lab", "text": " "}).status_code == 400
    assert failed.raw.startswith(read(FIX / "perftest" / "synthetic_ib_write_bw_client_connect_failed.txt")[:40])


def test_run_figures_for_perftest_and_p2p_tests():
    result = {"kind": "perftest", "expected": {"value": 100, "unit": "Gb/s"},
              "points": [{"size_bytes": 2 ** k, "measured_gbit": 10.0 * k, "expected_gbit": 100} for k in range(1, 24)]}
    fig = run_figures.run_figure(result)
    assert fig.layout.xaxis.type == "log" and fig.data[1].y[0] == 100 and "Gb/s" in fig.layout.yaxis.title.text
    pairs = {"kind": "p2p_bandwidth", "pairs": [{"a": "GPU0", "b": "GPU1", "measured_gbs": 20, "expected_gbs": 24}]}
    assert run_figures.run_figure(pairs).data[0].type == "bar"
    assert run_figures.run_figure({"kind": "nccl_log", "points": []}) is None
