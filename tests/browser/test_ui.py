"""The journeys in a real browser: cluster, host, path across hosts, compare, paste."""

from __future__ import annotations

import pytest

from apps.ingest.models import Snapshot
from tests.browser.conftest import shot, shot_element
from tests.explorer import helpers as h

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def wait_plots(page) -> None:
    page.wait_for_function("document.body.dataset.plotsReady === '1'", timeout=15000)


def marker_point(page, element_id: str, kind: str, name: str) -> tuple[float, float]:
    """Page coordinates of a device marker, read from Plotly's own data and axes."""
    return page.evaluate(
        """([id, kind, name]) => {
            const gd = document.getElementById(id);
            const t = gd.data.find((d) => d.meta === kind);
            const i = t.customdata.findIndex((c) => c[1] === name);
            const fl = gd._fullLayout;
            const box = gd.getBoundingClientRect();
            return [box.left + window.scrollX + fl._size.l + fl.xaxis.d2p(t.x[i]),
                    box.top + window.scrollY + fl._size.t + fl.yaxis.d2p(t.y[i])];
        }""", [element_id, kind, name])


def click_marker(page, element_id: str, kind: str, name: str) -> None:
    page.locator(f"#{element_id}").scroll_into_view_if_needed()
    x, y = page.evaluate(
        """([id, kind, name]) => {
            const gd = document.getElementById(id);
            const t = gd.data.find((d) => d.meta === kind);
            const i = t.customdata.findIndex((c) => c[1] === name);
            const fl = gd._fullLayout;
            const box = gd.getBoundingClientRect();
            return [box.left + fl._size.l + fl.xaxis.d2p(t.x[i]), box.top + fl._size.t + fl.yaxis.d2p(t.y[i])];
        }""", [element_id, kind, name])
    page.mouse.move(x, y)
    page.wait_for_timeout(150)
    page.mouse.click(x, y)


def test_cluster_host_path_journey(page, live_server):
    c = h.cluster()
    h.standard_host(c, "node-a")
    h.standard_host(c, "node-b")
    h.snapshot(c, "node-c", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_3")})

    page.goto(f"{live_server.url}/")
    shot(page, "01_clusters")
    page.click("text=lab")
    page.wait_for_selector("#hosts")
    assert page.locator("tr.odd-one").count() == 1
    page.fill("#host-filter", "node-c")  # filtered by the server: Enter submits the query
    with page.expect_navigation():
        page.press("#host-filter", "Enter")
    assert "q=node-c" in page.url and page.locator("#hosts tbody tr").count() == 1
    page.fill("#host-filter", "")
    with page.expect_navigation():
        page.press("#host-filter", "Enter")
    assert page.locator("#hosts tbody tr").count() == 3
    shot(page, "02_cluster")

    page.click("#hosts >> text=node-a")
    wait_plots(page)
    counts = page.evaluate("""() => {
        const gd = document.getElementById('fig-host');
        const n = (k) => gd.data.filter((d) => d.meta === k).reduce((a, d) => a + d.x.length, 0);
        return {gpu: n('gpu'), nic: n('nic'), svg: gd.querySelectorAll('.scatterlayer .point').length};
    }""")
    assert counts["gpu"] == 8 and counts["nic"] == 12 and counts["svg"] > 20
    shot(page, "03_host")
    shot_element(page, "#fig-host", "03b_host_drawing")
    shot_element(page, "#fig-nic", "03c_host_nic_matrix")

    click_marker(page, "fig-host", "gpu", "GPU5")
    page.wait_for_url("**/path/?src=*")
    wait_plots(page)
    shot(page, "04_path_pick")
    click_marker(page, "fig-right", "gpu", "GPU5")
    page.wait_for_url("**dst=*")
    wait_plots(page)
    panel = page.locator("#path-panel")
    assert panel.locator("#hop-table tbody tr").count() >= 3
    assert panel.locator("tr.bottleneck").count() == 1
    assert "node-a/GPU5" in panel.inner_text() and "node-b/GPU5" in panel.inner_text()
    shot(page, "05_path")
    shot_element(page, "#fig-path", "05b_path_chain")


def test_compare_shows_the_change(page, live_server):
    c = h.cluster()
    old = h.standard_host(c, "node-a", collected_at="2025-01-01T00:00:00Z")
    new = h.snapshot(c, "node-a", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_0")},
                     collected_at="2025-02-01T00:00:00Z")
    page.goto(f"{live_server.url}/c/lab/h/node-a/compare/?a={old.pk}&b={new.pk}")
    wait_plots(page)
    assert "mlx5_0" in page.locator("#diff-summary").inner_text()
    ringed = page.evaluate("() => document.getElementById('fig-b').data.filter("
                           "(d) => (d.meta || '').startsWith('highlight')).length")
    assert ringed >= 1
    shot(page, "06_compare")


def test_paste_a_real_capture_lands_on_its_host_page(page, live_server):
    h.cluster()
    page.goto(f"{live_server.url}/paste/")
    page.fill("textarea[name=text]", h.read(h.TOPO) + "\n" + h.read(h.IBSTAT))
    page.wait_for_selector(".det-ok >> nth=1", timeout=5000)
    assert "ibstat" in page.locator("#detected").inner_text()
    page.fill("input[name=hostname]", "pasted-node")
    shot(page, "07_paste")
    page.click("button.primary")
    page.wait_for_url("**/h/pasted-node/**")
    wait_plots(page)
    assert Snapshot.objects.filter(host__hostname="pasted-node").exists()
    assert page.locator("#fig-host .scatterlayer .trace").count() > 3
    shot(page, "08_pasted_host")


def test_capacity_page(page, live_server):
    c = h.cluster()
    a = h.standard_host(c, "node-a")
    b = h.snapshot(c, "della", {"nvidia_smi_topo": h.read(h.TOPO_DELLA)})
    page.goto(f"{live_server.url}/capacity/?a={a.pk}&b={b.pk}")
    wait_plots(page)
    assert page.evaluate("() => document.getElementById('fig-capacity').data.length") == 2
    shot(page, "09_capacity")


def test_selectors_show_the_view_of_the_address(page, live_server):
    """A path or capacity address naming hosts ("cluster/host/GPU5") shows those hosts and GPUs in the
    selectors, and "Show path" keeps them."""
    c = h.cluster()
    a = h.standard_host(c, "node-a")
    b = h.snapshot(c, "della", {"nvidia_smi_topo": h.read(h.TOPO_DELLA)})
    page.goto(f"{live_server.url}/path/?src=lab/della/GPU5&dst=lab/node-a/GPU6")
    wait_plots(page)
    assert page.input_value("#src-host") == str(b.pk) and page.input_value("#src-gpu") == "GPU5"
    assert page.input_value("#dst-host") == str(a.pk) and page.input_value("#dst-gpu") == "GPU6"
    page.click("#path-form button.primary")
    page.wait_for_load_state()
    wait_plots(page)
    assert "GPU5" in page.locator("#path-panel h2").inner_text() and "GPU6" in page.locator("#path-panel h2").inner_text()
    shot(page, "10_path_by_host_names")
    page.goto(f"{live_server.url}/capacity/?a=lab/node-a&b=lab/della")
    wait_plots(page)
    assert page.input_value("select[name=a]") == str(a.pk) and page.input_value("select[name=b]") == str(b.pk)
