"""The dashboard lists conversations newest first, paged without a gap or a repeat (issue
#38); the API keeps its documented order, oldest first (docs/decisions.md)."""

from __future__ import annotations

import html
import re

import pytest

from parley.web.pages import CONVERSATIONS_PAGE
from tests.types import MakeAgent, Tenant
from tests.web.helpers import Browser

pytestmark = pytest.mark.anyio

LINK = re.compile(r'<a href="/dashboard/conversations/([^"?]+)">')
OLDER = re.compile(r'<a href="(/dashboard/conversations\?cursor=[^"]+)">Older</a>')


async def test_dashboard_lists_conversations_newest_first_across_pages(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    made = [f"conv-{index:03d}" for index in range(CONVERSATIONS_PAGE + 3)]
    for conversation_id in made:
        response = await tenant.client.post(
            "/v1/conversations", json={"agent": agent["name"], "id": conversation_id}
        )
        assert response.status_code == 201, response.text
    assert (await browser.sign_in(tenant.api_key)).status_code == 303

    first = await browser.http.get("/dashboard/conversations")
    assert first.status_code == 200, first.text
    older = OLDER.search(first.text)
    assert older is not None
    second = await browser.http.get(html.unescape(older.group(1)))
    assert second.status_code == 200, second.text
    assert OLDER.search(second.text) is None

    shown = LINK.findall(first.text) + LINK.findall(second.text)
    assert len(LINK.findall(first.text)) == CONVERSATIONS_PAGE
    assert shown == list(reversed(made))
    api = await tenant.client.get("/v1/conversations", params={"limit": 3})
    assert [c["id"] for c in api.json()["conversations"]] == made[:3]  # the API: oldest first


async def test_dashboard_conversations_bad_cursor_refused_400(
    tenant: Tenant, browser: Browser
) -> None:
    assert (await browser.sign_in(tenant.api_key)).status_code == 303
    response = await browser.http.get("/dashboard/conversations", params={"cursor": "nope"})
    assert response.status_code == 400
    assert "invalid_cursor" in response.text
