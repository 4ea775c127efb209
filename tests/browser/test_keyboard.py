"""GPUs chosen by keyboard: Tab reaches each GPU's button beside the host drawing, Enter (or Space)
opens its path, exactly as a click on the GPU in the drawing does; the focus is visible."""

from __future__ import annotations

import pytest

from tests.browser.conftest import shot
from tests.explorer import helpers as h

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def tab_to(page, selector: str, limit: int = 80) -> None:
    """Press Tab until the element matching ``selector`` has the focus."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("(s) => document.activeElement && document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"Tab never reached {selector}")


def test_tab_to_a_gpu_and_press_enter_opens_its_path(page, live_server):
    snap = h.standard_host(h.cluster(), "node-a")
    page.goto(f"{live_server.url}/c/lab/h/node-a/")
    page.wait_for_function("document.body.dataset.plotsReady === '1'", timeout=15000)
    tab_to(page, "button.gpu-key[data-gpu='GPU3']")
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none")  # the focus is visible
    shot(page, "keyboard_gpu_focus", full_page=False)
    page.keyboard.press("Enter")
    page.wait_for_url("**/path/?src=*")
    assert page.url.endswith(f"/path/?src={snap.pk}%2FGPU3")
    page.wait_for_function("document.body.dataset.plotsReady === '1'", timeout=15000)
    assert page.locator("#src-gpu").input_value() == "GPU3"


def test_space_on_a_gpu_button_works_too(page, live_server):
    snap = h.standard_host(h.cluster(), "node-a")
    page.goto(f"{live_server.url}/c/lab/h/node-a/")
    tab_to(page, "button.gpu-key[data-gpu='GPU6']")
    page.keyboard.press("Space")
    page.wait_for_url("**/path/?src=*")
    assert page.url.endswith(f"/path/?src={snap.pk}%2FGPU6")
