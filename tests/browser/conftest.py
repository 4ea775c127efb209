"""Browser tests: Playwright drives Debian's chromium (never a downloaded browser) against live_server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in the test thread; Django's ORM calls there are fine.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make browser)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM,
                              args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield b
        b.close()


@pytest.fixture
def page(browser, live_server, django_user_model):
    django_user_model.objects.create_superuser("ada", password="pw-not-secret")  # a site admin
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.goto(f"{live_server.url}/accounts/login/")
    pg.fill("input[name=username]", "ada")
    pg.fill("input[name=password]", "pw-not-secret")
    pg.click("button[type=submit], input[type=submit]")
    pg.wait_for_load_state()
    pg.js_errors = errors
    yield pg
    context.close()
    assert not errors, f"JavaScript errors: {errors}"


def shot(page, name: str, full_page: bool = True) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


def shot_element(page, selector: str, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(selector).screenshot(path=str(SHOTS / f"{name}.png"))
