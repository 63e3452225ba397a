"""/docs renders in headless Chromium with every request to another host refused."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.async_api import Route, async_playwright

from tests.e2e.conftest import Server
from tests.e2e.test_browser_example import chromium_path

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.mark.timeout(90)
async def test_docs_page_renders_offline_in_chromium(server: Server) -> None:
    outside: list[str] = []

    async def only_loopback(route: Route) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            await route.continue_()
        else:
            outside.append(route.request.url)
            await route.abort()

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = await browser.new_page()
            await page.route("**/*", only_loopback)
            await page.goto(f"{server.http}/docs")
            await page.wait_for_selector(".opblock", timeout=30_000)
            operations = await page.locator(".opblock").count()
            title = await page.locator(".title").first.text_content()
        finally:
            await browser.close()
    assert outside == []
    assert operations >= 25
    assert title is not None
    assert title.startswith("Parley")
