"""A run in a real browser: the verdict on top, measured over expected on a log-2 size axis, the
evidence lines, the hosts and the slow pair's path; the runs on the other pages (screenshots)."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.ingest import runs
from tests.browser.conftest import shot, shot_element
from tests.browser.test_ui import wait_plots
from tests.explorer import helpers as h

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIX = Path(__file__).resolve().parents[1] / "fixtures"
RUN_466 = FIX / "nccl_tests" / "h100_ib400_2of8node_allreduce_default_466gbs_nccl_tests_issue_309.txt"
RUN_196 = FIX / "nccl_tests" / "k8s_mpijob_h100_2node_allreduce_512m_8g_196gbs.txt"
SOCKET_LOG = FIX / "nccl_log" / "korean_eks_llama3_shm_socket_cumem_partial.txt"


def test_run_page_draws_measured_over_expected_and_quotes_the_evidence(page, live_server):
    c = h.cluster()
    before = h.snapshot(c, "node-a", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_0")},
                        collected_at="2025-03-01T00:00:00Z")
    h.standard_host(c, "node-b", collected_at="2025-03-01T00:00:00Z")
    slow, _ = runs.submit_run(cluster=c, text=h.read(RUN_196), via="web", source_name="allreduce_before.txt",
                              hosts={"nccl-tests-h100-worker-0": "node-a", "nccl-tests-h100-worker-1": "node-b"},
                              collected_at="2025-03-02T00:00:00Z")
    after = h.standard_host(c, "node-a", collected_at="2025-03-10T00:00:00Z")
    fast, _ = runs.submit_run(cluster=c, text=h.read(RUN_466), via="web", source_name="allreduce_after.txt",
                              hosts={"0666a154": "node-a", "b749a9b0": "node-b"}, collected_at="2025-03-11T00:00:00Z")

    page.goto(f"{live_server.url}/c/lab/runs/{slow.pk}/")
    wait_plots(page)
    head = page.locator("#verdict")
    assert head.locator(".verdict").inner_text() in ("below expected", "broken")  # 196.5 GB/s: about half
    assert "196.5 GB/s" in head.inner_text() and "% of the" in head.inner_text()
    assert head.bounding_box()["y"] < 260  # the verdict sentence is at the top of the page
    fig = page.evaluate("""() => {
        const gd = document.getElementById('fig-run');
        return {names: gd.data.map((d) => d.name), axis: gd._fullLayout.xaxis.type,
                ticks: gd._fullLayout.xaxis.ticktext, points: gd.querySelectorAll('.scatterlayer .point').length,
                buttons: Array.from(document.querySelectorAll('#fig-run .modebar-btn')).map((b) => b.dataset.title)};
    }""")
    assert fig["axis"] == "log" and fig["ticks"][:2] == ["512 MiB", "1 GiB"]
    assert fig["names"][0] == "measured busbw (out-of-place)" and fig["names"][-1].startswith("expected from the layout")
    assert fig["points"] >= 5
    assert not [b for b in fig["buttons"] if "Chart Studio" in (b or "") or "Share" in (b or "") or "cloud" in (b or "")]
    shot(page, "20_run_below_expected")
    shot_element(page, "#fig-run", "20b_run_figure")

    page.goto(f"{live_server.url}/c/lab/runs/{fast.pk}/")
    wait_plots(page)
    assert page.locator("#verdict .verdict").inner_text() == "healthy"
    diagnosis = page.locator("#diagnosis")
    assert "T9" in diagnosis.inner_text() and "line 37" in diagnosis.inner_text()
    assert "8589934592" in diagnosis.locator(".evidence code").first.inner_text()
    shot(page, "21_run_healthy_t9")
    page.click("#slow-pair")
    page.wait_for_url("**/path/**")
    wait_plots(page)
    assert "node-a/GPU0" in page.locator("#path-panel").inner_text()

    page.goto(f"{live_server.url}/c/lab/h/node-a/compare/?a={before.pk}&b={after.pk}")
    wait_plots(page)
    assert "196.5 -> 466.7 GB/s" in page.locator("#runs-before-after").inner_text()
    page.locator("#runs-before-after").scroll_into_view_if_needed()
    shot(page, "22_compare_runs")
    page.goto(f"{live_server.url}/capacity/?a={after.pk}")
    wait_plots(page)
    assert page.evaluate("() => document.getElementById('fig-capacity').data.some((d) => d.mode === 'markers')")
    shot(page, "23_capacity_measured")
    page.goto(f"{live_server.url}/c/lab/")
    shot(page, "24_cluster_runs")
    page.goto(f"{live_server.url}/c/lab/h/node-a/")
    wait_plots(page)
    page.locator("#runs").scroll_into_view_if_needed()
    shot(page, "25_host_runs", full_page=False)


def test_paste_a_log_and_read_why(page, live_server):
    c = h.cluster()
    h.standard_host(c, "llama-3-8b-node-0-0")
    page.goto(f"{live_server.url}/runs/paste/")
    page.fill("textarea[name=text]", h.read(SOCKET_LOG))
    shot(page, "26_run_paste")
    page.click("button.primary")
    page.wait_for_url("**/runs/*/")
    assert page.locator("#verdict .verdict").inner_text() == "below expected"
    assert "TCP sockets instead of RDMA" in page.locator("#diagnosis").inner_text()
    assert "via NET/Socket/0" in page.locator("#diagnosis .evidence").first.inner_text()
    shot(page, "27_run_log_sockets")
