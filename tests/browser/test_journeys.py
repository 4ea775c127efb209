"""The five journeys of docs/journeys.md in headless Chromium at 1366x768, on real captures.

Each journey asserts the answer the user came for, as text on the page, and every test fails
when the page asks anything of a host other than the live server (a CDN, a font service, a
"share chart" cloud): ``offline`` routes every request and lists the outside URLs."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest

from apps.explorer import home
from tests.browser.conftest import shot
from tests.explorer import helpers as h

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PCIE_2GPU = h.FIXTURES / "nvidia_smi_topo" / "stas00_mleng_2gpu_pcie_phb.txt"


@pytest.fixture
def offline(page, live_server):
    """Every request the page makes must go to the live server; any other is aborted and recorded."""
    ours = urlparse(live_server.url).netloc
    outside: list[str] = []

    def route(r):
        u = urlparse(r.request.url)
        if u.scheme in ("http", "https", "ws", "wss") and u.netloc != ours:
            outside.append(r.request.url)
            r.abort()
        else:
            r.continue_()

    page.route("**/*", route)
    home.clear_cache()
    yield page
    assert not outside, f"requests to outside hosts: {outside}"


def wait_plots(page) -> None:
    page.wait_for_function("document.body.dataset.plotsReady === '1'", timeout=15000)


def card(page, heading: str) -> str:
    return page.locator("div.card", has=page.locator(f"h2:text-is('{heading}')")).first.inner_text()


def test_journey_1_multi_node_is_slower_than_one_node(offline, live_server):
    """Paste topo -m + ibstat of a node with a port down: which NIC each GPU uses, which port is
    Down, the NCCL settings; then the path GPU5 -> GPU5 across two nodes with its bottleneck."""
    page = offline
    c = h.cluster()
    h.standard_host(c, "node-b")
    page.goto(f"{live_server.url}/paste/")
    page.fill("textarea[name=text]", h.read(h.TOPO) + "\n" + h.ibstat_port_down("mlx5_3"))
    page.wait_for_selector(".det-ok >> nth=1", timeout=5000)
    page.fill("input[name=hostname]", "node-a")
    page.click("button.primary")
    page.wait_for_url("**/h/node-a/**")
    wait_plots(page)
    shot(page, "j1_host")
    nics = card(page, "Which NIC each GPU uses")
    assert re.search(r"GPU5\s.*mlx5_\d+", nics), nics  # GPU5's row names its NIC
    ports = card(page, "NIC ports")
    down = [line for line in ports.splitlines() if "mlx5_3" in line]
    assert down and "Down" in " ".join(down), ports
    assert "NCCL_IB_HCA" in card(page, "Suggested NCCL settings")

    page.goto(f"{live_server.url}/path/?src=lab/node-a/GPU5&dst=lab/node-b/GPU5")
    wait_plots(page)
    panel = page.locator("#path-panel")
    assert panel.locator("tr.bottleneck").count() == 1
    text = panel.inner_text()
    assert "node-a/GPU5" in text and "node-b/GPU5" in text and "GB/s" in panel.locator("tr.bottleneck").inner_text()
    shot(page, "j1_path")


def test_journey_2_why_is_this_pair_slow(offline, live_server):
    """A 2-GPU PCIe box whose pair meets at the CPU host bridge: the P2P gap, why, and the grouping."""
    page = offline
    c = h.cluster()
    h.snapshot(c, "pcie-2gpu", {"nvidia_smi_topo": h.read(PCIE_2GPU)})
    page.goto(f"{live_server.url}/c/lab/h/pcie-2gpu/")
    wait_plots(page)
    shot(page, "j2_pair")
    gaps = card(page, "P2P gaps")
    assert "GPU0" in gaps and "GPU1" in gaps and "PHB" in gaps and "SHM" in gaps, gaps
    assert "GPU groups" in page.inner_text("body")


def test_journey_3_did_the_hardware_change_help(offline, live_server):
    """The same node before and after a port came up: compare names the port and what changed."""
    page = offline
    c = h.cluster()
    before = h.snapshot(c, "node-a", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_0")},
                        collected_at="2025-01-01T00:00:00Z")
    after = h.standard_host(c, "node-a", collected_at="2025-02-01T00:00:00Z")
    page.goto(f"{live_server.url}/c/lab/h/node-a/compare/?a={before.pk}&b={after.pk}")
    wait_plots(page)
    shot(page, "j3_compare")
    summary = page.locator("#diff-summary").inner_text()
    assert "mlx5_0" in summary and re.search(r"Down.*Active|Active", summary), summary


def test_journey_4_which_servers_to_buy(offline, live_server):
    """Two layouts side by side from 1 to 64 nodes, a verdict sentence and a link to hand on."""
    page = offline
    c = h.cluster()
    a = h.standard_host(c, "hgx-8nic")
    deepep = h.FIXTURES / "bundles" / "paths_deepep_8xa100_8nic_roce"
    b = h.snapshot(c, "a100-8nic", {"nvidia_smi_topo": h.read(deepep / "nvidia_smi_topo.txt"),
                                    "ibstatus": h.read(deepep / "ibstatus.txt")})
    page.goto(f"{live_server.url}/capacity/?a={a.pk}&b={b.pk}")
    wait_plots(page)
    shot(page, "j4_capacity")
    verdict = page.locator("#capacity-verdict").inner_text()
    assert "64" in verdict and re.search(r"\d+(\.\d+)?x", verdict), verdict
    table = page.locator("#capacity-table").inner_text()
    assert "64" in table and "GB/s" in table


def test_journey_5_is_the_fleet_consistent(offline, live_server):
    """Home: the costliest problem names the odd host and links to it; the cluster page flags it."""
    page = offline
    c = h.cluster()
    for name in ("node-a", "node-b", "node-c"):
        h.standard_host(c, name)
    h.snapshot(c, "node-d", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_3")})
    page.goto(f"{live_server.url}/")
    shot(page, "j5_home")
    problems = page.locator("#problem-table").inner_text()
    assert "node-d" in problems and "compute ports Down" in problems and "inter-node bandwidth" in problems
    clusters = page.locator("#cluster-table").inner_text()
    assert re.search(r"lab\s+4\s+32\s+2\s+1\b", clusters), clusters  # 4 hosts, 32 GPUs, 2 layouts, 1 odd
    page.locator("#problem-table a", has_text="node-d").first.click()
    page.wait_for_url("**/c/lab/h/node-d/")
    page.goto(f"{live_server.url}/c/lab/")
    page.wait_for_selector("#hosts")
    odd = page.locator("tr.odd-one")
    assert odd.count() == 1 and "node-d" in odd.inner_text() and "mlx5_3" in odd.inner_text()
    shot(page, "j5_cluster")
