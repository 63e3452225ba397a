"""How the dashboard looks, in headless Chromium (issue #21, item 12): no request of a page
answers 404 (a favicon is served); the JWT settings labels stay on one or two lines; the
token checker shows code as code (no literal backticks) and its statuses in words (`not
run`, not `not_run`); long IDs on the activity page stay on one line. Each page is saved as
a screenshot (into docs/images/ with PARLEY_DOCS_SCREENSHOTS=1) for a person to look at."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from playwright.async_api import Browser, Page, Response

from tests.e2e.conftest import Server
from tests.e2e.test_dashboard_browser import app, chromium, database_url, sign_in
from tests.factories import make_org

__all__ = ["app", "chromium", "database_url"]  # the fixtures of the dashboard's story

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
TOKEN = (  # well formed, with an issuer no organization registered: step 2 fails
    "eyJhbGciOiJFZERTQSIsImtpZCI6ImsxIiwidHlwIjoiSldUIn0."
    "eyJpc3MiOiJodHRwczovL25vYm9keS5leGFtcGxlIiwiYXVkIjoiMTI3LjAuMC4xIiwic3ViIjoidSIsImV4cCI6MX0."
    "AAAA"
)


async def shot(page: Page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"dashboard-{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    if os.environ.get("PARLEY_DOCS_SCREENSHOTS") == "1":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        (DOCS_IMAGES / path.name).write_bytes(path.read_bytes())
    return path


@pytest.mark.timeout(120)
async def test_dashboard_pages_no_404_tidy_labels_code_and_ids(
    app: FastAPI, server: Server, chromium: Browser, tmp_path: Path
) -> None:
    created = await make_org(app.state.context, "acme")
    headers = {"Authorization": f"Bearer {created.api_key.secret}"}
    async with httpx.AsyncClient(base_url=server.http, headers=headers) as api:
        for name in ("support", "billing-and-invoices-escalations"):
            assert (await api.post("/v1/agents", json={"name": name})).status_code == 201
    context = await chromium.new_context(viewport={"width": 1100, "height": 800})
    page = await context.new_page()
    missing: list[str] = []

    def on_response(response: Response) -> None:
        if response.status == 404:
            missing.append(response.url)

    page.on("response", on_response)
    await sign_in(page, server, created.api_key.secret)

    await page.goto(f"{server.http}/dashboard/jwt")
    await shot(page, tmp_path, "jwt-settings")
    # A label's caption sits above its control: at most two lines between their tops.
    for label in await page.query_selector_all("#jwt-settings label:not(.check)"):
        caption_lines = await label.evaluate(
            "e => { const c = e.querySelector('input, textarea, select');"
            " return c ? (c.getBoundingClientRect().top - e.getBoundingClientRect().top)"
            " / parseFloat(getComputedStyle(e).lineHeight) : 0; }"
        )
        assert caption_lines <= 2.5, (await label.inner_text(), caption_lines)
    await page.fill("textarea[name=token]", TOKEN)
    await page.click("#token-check button[type=submit]")
    await page.wait_for_selector("#check-steps")
    steps = await page.inner_text("#check-steps")
    assert "`" not in steps
    assert "not_run" not in steps
    assert "not run" in steps
    assert await page.locator("#check-steps td code").count() > 0
    await shot(page, tmp_path, "jwt-cosmetics")

    await page.goto(f"{server.http}/dashboard/activity")
    codes = page.locator("#activity td code")
    assert await codes.count() >= 2
    for index in range(await codes.count()):
        lines = await codes.nth(index).evaluate("e => e.getClientRects().length")
        assert lines == 1, await codes.nth(index).inner_text()
    await shot(page, tmp_path, "activity-cosmetics")

    assert missing == []
    async with httpx.AsyncClient() as client:
        favicon = await client.get(f"{server.http}/favicon.ico")
    assert favicon.status_code == 200
    assert favicon.headers["content-type"].startswith("image/")
    await context.close()
