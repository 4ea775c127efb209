"""The path page through the demo's SYNTHETIC fabric in a real browser at 1366x768: the switch hops by
name (leaf DEMO-IBLEAF-R0, a spine, leaf DEMO-IBLEAF-R3), "2 equal-cost routes", the bottleneck boxed;
and the job form on the fabric page (screenshots)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from apps.ingest import fabrics
from tests.browser.conftest import shot
from tests.browser.test_ui import wait_plots

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _fresh_caches():
    fabrics.clear_caches()
    yield
    fabrics.clear_caches()


def test_path_page_draws_the_fabric_hops_by_name(page, live_server):
    call_command("load_demo", stdout=io.StringIO(), stderr=io.StringIO())
    page.goto(f"{live_server.url}/path/?src=demo/h100-n01/GPU0&dst=demo/h100-n09/GPU3")
    wait_plots(page)
    texts = page.evaluate("""() => document.getElementById('fig-path').data
        .filter((t) => t.mode === 'markers+text').flatMap((t) => t.text)""")
    assert "DEMO-IBLEAF-R0" in texts and "DEMO-IBLEAF-R3" in texts and any("DEMO-IBSPINE" in t for t in texts)
    assert page.locator("#fig-path .shapelayer path, #fig-path .layer-above path").count() > 0  # boxes drawn
    assert "2 equal-cost routes" in page.locator("#fabric-line").inner_text()
    assert page.locator("#fabric-hops tr.bottleneck").count() == 1
    shot(page, "path_through_fabric")
    page.goto(f"{live_server.url}/c/demo/fabric/?job=h100-n0*&algorithm=ring")
    assert page.locator("#job-verdict").inner_text().startswith("9 hosts: ring traffic stays on 8 leaves")
    shot(page, "fabric_job")
