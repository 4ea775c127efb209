"""The fabric page in a real browser at 1366x768: the sentence on top, the figure drawn by group,
a click on a group expands it, a click on a leaf's hosts draws them, a click on a host opens its
page; the real SuperPOD and the 2,000-switch synthetic fabric (screenshots)."""

from __future__ import annotations

import pytest

from apps.domain import fabric
from apps.domain.parsers import ibnetdiscover
from apps.explorer import fabric_figures
from apps.ingest import fabrics
from bench.fabric_synth import synthetic_ibnetdiscover
from tests.browser.conftest import shot
from tests.browser.test_ui import wait_plots
from tests.domain.test_fabric_compare import SUPERPOD
from tests.explorer import helpers as h

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LEAF_04_04 = "ib:0x2c5eab0300b87b40"  # "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", hosts a08-p1-dgx-04-c01..c17 on ports 1-17


@pytest.fixture(autouse=True)
def _fresh_caches():
    fabrics.clear_caches()
    yield
    fabrics.clear_caches()


def click_target(page, target: str) -> None:
    """Click the marker of the fabric figure whose customdata target is ``target``."""
    page.locator("#fig-fabric").scroll_into_view_if_needed()
    x, y = page.evaluate(
        """(target) => {
            const gd = document.getElementById('fig-fabric');
            for (const t of gd.data) {
                const i = (t.customdata || []).findIndex((c) => c[1] === target);
                if (i < 0) continue;
                const fl = gd._fullLayout, box = gd.getBoundingClientRect();
                return [box.left + fl._size.l + fl.xaxis.d2p(t.x[i]), box.top + fl._size.t + fl.yaxis.d2p(t.y[i])];
            }
            throw new Error('no marker for ' + target);
        }""", target)
    page.mouse.move(x, y)
    page.wait_for_timeout(150)
    page.mouse.click(x, y)


def figure_facts(page) -> dict:
    return page.evaluate("""() => {
        const gd = document.getElementById('fig-fabric');
        const marks = gd.data.filter((d) => ['switch', 'group', 'host', 'hosts', 'ca'].includes(d.meta));
        return {markers: marks.reduce((n, d) => n + d.x.length, 0), names: gd.data.map((d) => d.name),
                drawn: gd.querySelectorAll('.scatterlayer .point').length,
                buttons: Array.from(document.querySelectorAll('#fig-fabric .modebar-btn')).map((b) => b.dataset.title)};
    }""")


def test_superpod_page_expands_a_group_then_a_leaf_and_opens_a_host(page, live_server):
    c = h.cluster()
    h.standard_host(c, "a08-p1-dgx-04-c01")  # joins "a08-p1-dgx-04-c01 mlx5_5" by its node description
    fabrics.submit_fabric(cluster=c, text=SUPERPOD.read_text(), via="web", collected_at="2025-08-06T16:11:23Z",
                          source_name=SUPERPOD.name)
    page.goto(f"{live_server.url}/c/lab/fabric/")
    wait_plots(page)
    sentence = page.locator("#fabric-sentence")
    assert sentence.inner_text().startswith("40 switches in 2 tiers, 542 HCAs;")
    assert sentence.bounding_box()["y"] < 200  # what the fabric is and what is wrong: at the top
    facts = figure_facts(page)
    assert 10 < facts["markers"] <= 150 and facts["drawn"] >= facts["markers"]
    assert "NDR 4X 50 GB/s" in facts["names"]
    assert not [b for b in facts["buttons"] if "Chart Studio" in (b or "") or "Share" in (b or "")]
    box = page.locator("#fig-fabric").bounding_box()
    assert box["width"] > 800 and box["y"] < 300  # the figure is on the first screen, beside its tables
    assert page.locator("#degraded").bounding_box()["x"] > box["x"] + box["width"] - 10
    shot(page, "30_fabric_superpod", full_page=False)

    G = fabric.build_fabric(ibnetdiscover.parse(SUPERPOD.read_text()))
    group = fabric_figures.fabric_drawing(G).groups
    gid = next(g for g, members in group.items() if LEAF_04_04 in members)
    click_target(page, gid)
    page.wait_for_url(f"**expand={gid}**")
    wait_plots(page)
    assert f"group {gid}" in page.locator("#fabric-caption").inner_text()
    shot(page, "31_fabric_superpod_group_expanded", full_page=False)
    host_url = "/c/lab/h/a08-p1-dgx-04-c01/"
    if not page.evaluate("(u) => document.getElementById('fig-fabric').data.some((d) => "
                         "(d.customdata || []).some((c) => c[1] === u))", host_url):
        click_target(page, LEAF_04_04)  # the group's hosts are too many: open this leaf's
        page.wait_for_url("**expand=ib%3A0x2c5eab0300b87b40**")
        wait_plots(page)
    shot(page, "32_fabric_superpod_leaf_hosts", full_page=False)
    click_target(page, host_url)
    page.wait_for_url(f"**{host_url}")
    assert page.locator("h1").inner_text() == "a08-p1-dgx-04-c01"


def test_synthetic_2000_switch_fabric_is_drawn_by_group(page, live_server, settings):
    settings.MAX_REPORT_BYTES = 16 << 20  # the SYNTHETIC ibnetdiscover of 2,000 switches is 8.7 MB
    c = h.cluster()
    row, _ = fabrics.submit_fabric(cluster=c, text=synthetic_ibnetdiscover(), via="web",
                                   source_name="synthetic_fabric_2000_switches.txt")
    assert row.status == "ok" and row.summary["switches"] == 2000
    page.goto(f"{live_server.url}/c/lab/fabric/")
    wait_plots(page)
    assert page.locator("#fabric-sentence").inner_text().startswith("2,000 switches in 3 tiers, 16,000 HCAs;")
    facts = figure_facts(page)
    assert facts["markers"] == 121  # 40 leaf groups, 40 spine groups, the core group, 40 hosts of the groups
    shot(page, "33_fabric_synthetic_2000", full_page=False)
    click_target(page, "leaf-2")
    page.wait_for_url("**expand=leaf-2**")
    wait_plots(page)
    assert figure_facts(page)["markers"] == 121 - 2 + 25 + 50  # its 25 leaves and their 50 hosts, one by one
    shot(page, "34_fabric_synthetic_2000_expanded", full_page=False)


def test_a_small_real_fabric_is_drawn_switch_by_switch_and_a_host_opens(page, live_server):
    c = h.cluster()
    h.standard_host(c, "teaker-4")  # joins "teaker-4 HCA-1" by its node description
    teaker = SUPERPOD.parents[1] / "iblinkinfo" / "qdr_infiniscale_iv_18port_teaker_8hosts_one_dual_port_ca.txt"
    fabrics.submit_fabric(cluster=c, text=teaker.read_text(), via="web", source_name=teaker.name)
    page.goto(f"{live_server.url}/c/lab/fabric/")
    wait_plots(page)
    assert page.locator("#fabric-sentence").inner_text() == (
        "1 switch in 1 tier, 8 HCAs; every link at its capability, no port down that leads anywhere; "
        "7 HCAs no host claims.")
    assert "9 ports down with nothing attached" in page.locator("#idle-ports summary").inner_text()
    assert figure_facts(page)["markers"] == 9  # the switch and teaker-4 ... teaker-11
    shot(page, "35_fabric_small_real", full_page=False)
    click_target(page, "/c/lab/h/teaker-4/")
    page.wait_for_url("**/c/lab/h/teaker-4/")
    assert page.locator("h1").inner_text() == "teaker-4"


def test_the_demo_pod_draws_every_switch_with_the_hosts_of_each_leaf(page, live_server):
    import io

    from django.core.management import call_command
    call_command("load_demo", stdout=io.StringIO(), stderr=io.StringIO())
    page.goto(f"{live_server.url}/c/demo/fabric/")
    wait_plots(page)
    assert "1 link trained below capability" in page.locator("#fabric-sentence").inner_text()
    assert figure_facts(page)["markers"] == 18  # 8 rail leaves, 2 spines, the hosts of each leaf
    shot(page, "36_fabric_demo_pod", full_page=False)
