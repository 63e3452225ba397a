"""The dashboard's first screen at 1280 px in headless Chromium (issue #38, item 9): the
activity table fits its box (no cell sticks out, no sideways scroller), even with a
customer's 100-character conversation ID in it; "Sign out" stays on one line, on the
header's first row; conversations are listed newest first, and their table fits too.
Screenshots as in test_dashboard_cosmetics.py (into docs/images/ with PARLEY_DOCS_SCREENSHOTS=1)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from playwright.async_api import Browser

from tests.e2e.conftest import Server
from tests.e2e.test_dashboard_browser import app, chromium, database_url, sign_in
from tests.e2e.test_dashboard_cosmetics import shot
from tests.factories import make_org

__all__ = ["app", "chromium", "database_url"]  # the fixtures of the dashboard's story

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
LONG_ID = "order-" + "x" * 94

OVERFLOW = """table => {
  const box = table.parentElement.getBoundingClientRect();
  const sticking = [...table.querySelectorAll('td, th, td code')]
    .map(e => [e, e.closest('td, th') || e])
    .filter(([e, cell]) => e.getBoundingClientRect().right
                           > cell.getBoundingClientRect().right + 0.5)
    .map(([e]) => e.textContent);
  return {table: table.getBoundingClientRect().right, box: box.right,
          scrolls: table.parentElement.scrollWidth > table.parentElement.clientWidth,
          sticking};
}"""


@pytest.mark.timeout(120)
async def test_dashboard_1280px_activity_fits_sign_out_one_line_newest_conversation_first(
    app: FastAPI, server: Server, chromium: Browser, tmp_path: Path
) -> None:
    created = await make_org(app.state.context, "acme")
    headers = {"Authorization": f"Bearer {created.api_key.secret}"}
    async with httpx.AsyncClient(base_url=server.http, headers=headers) as api:
        for name in ("support", "billing-and-invoices-escalations"):
            assert (await api.post("/v1/agents", json={"name": name})).status_code == 201
        made = await api.post("/v1/api_keys", json={"name": "deploy-key-for-ci"})
        assert made.status_code == 201, made.text
        for conversation_id in ("first-call", LONG_ID, "latest-call"):
            started = await api.post(
                "/v1/conversations", json={"agent": "support", "id": conversation_id}
            )
            assert started.status_code == 201, started.text
        ended = await api.post(f"/v1/conversations/{LONG_ID}/end")
        assert ended.status_code == 200, ended.text
    context = await chromium.new_context(viewport={"width": 1280, "height": 800})
    page = await context.new_page()
    await sign_in(page, server, created.api_key.secret)

    await page.goto(f"{server.http}/dashboard/activity")
    await shot(page, tmp_path, "activity-1280")
    assert LONG_ID in await page.inner_text("#activity")
    fit = await page.eval_on_selector("#activity", OVERFLOW)
    assert fit["table"] <= fit["box"] + 0.5, fit
    assert not fit["scrolls"], fit
    assert fit["sticking"] == [], fit
    codes = page.locator("#activity td code:not(.long)")  # Parley's IDs stay on one line
    assert await codes.count() >= 10
    for index in range(await codes.count()):
        assert await codes.nth(index).evaluate("e => e.getClientRects().length") == 1

    sign_out = await page.eval_on_selector(
        "#sign-out",
        "e => { const r = e.getBoundingClientRect();"
        " const brand = document.querySelector('.brand').getBoundingClientRect();"
        " return {height: r.height, line: parseFloat(getComputedStyle(e).lineHeight),"
        " rects: e.getClientRects().length, top: r.top, brandBottom: brand.bottom}; }",
    )
    assert sign_out["height"] <= sign_out["line"] + 0.5, sign_out  # one line of text
    assert sign_out["rects"] == 1, sign_out
    assert sign_out["top"] < sign_out["brandBottom"], sign_out  # beside the brand, not below

    await page.goto(f"{server.http}/dashboard/conversations")
    await shot(page, tmp_path, "conversations-1280")
    fit = await page.eval_on_selector("#conversations", OVERFLOW)
    assert fit["table"] <= fit["box"] + 0.5, fit
    assert not fit["scrolls"], fit
    listed = await page.eval_on_selector_all(
        "#conversations td.conversation-id a", "links => links.map(a => a.innerText)"
    )
    assert listed == ["latest-call", LONG_ID, "first-call"]
    await context.close()
