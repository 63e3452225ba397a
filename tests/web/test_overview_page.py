"""The overview page in-process (issue #42, item 5): signed in only, the dashboard's policy
unchanged, an empty week drawn as seven empty days, and each chart an image named by its
title and described by its figures. The charts' values against the API: in Chromium,
tests/e2e/test_dashboard_overview.py."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from parley.records import EndedBy
from parley.services import Context
from parley.web.security import CSP
from tests.factories import make_conversation_at
from tests.types import MakeAgent, Tenant
from tests.web.helpers import Browser

pytestmark = pytest.mark.anyio
OVERVIEW = "/dashboard/overview"


async def test_overview_signed_out_redirects_to_sign_in(browser: Browser) -> None:
    response = await browser.http.get(OVERVIEW)
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/sign-in"


async def test_overview_empty_week_seven_zero_days_and_no_data(
    tenant: Tenant, browser: Browser
) -> None:
    assert (await browser.sign_in(tenant.api_key)).status_code == 303

    response = await browser.http.get(OVERVIEW)

    assert response.status_code == 200, response.text
    assert response.headers["content-security-policy"] == CSP
    page = response.text
    assert '<rect class="bar"' not in page
    assert "No conversations in the last 7 days." in page
    totals = re.findall(r'<td data-ending="total" data-value="(\d+)">', page)
    assert totals == ["0"] * 7
    assert page.count('class="no-data"') == 6
    assert not re.search(r'(?:src|href)="(?:https?:)?//', page)  # nothing from elsewhere
    assert "<script" not in page
    assert " style=" not in page  # the policy refuses inline styles: none is needed


async def test_overview_chart_is_an_image_with_title_and_its_figures_described(
    ctx: Context, tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    now = datetime.fromtimestamp(ctx.clock.time(), tz=UTC)
    yesterday = now - timedelta(days=1)
    await make_conversation_at(
        ctx, tenant.org.id, agent["name"], yesterday, ended_by=EndedBy.USER, latencies_ms=(410,)
    )
    assert (await browser.sign_in(tenant.api_key)).status_code == 303

    page = (await browser.http.get(OVERVIEW)).text

    assert re.search(
        r'<svg id="endings-chart" viewBox="[^"]+" role="img" '
        r'aria-labelledby="endings-title endings-desc">\s*<title id="endings-title">',
        page,
    )
    assert f"{yesterday.date().isoformat()} 1;" in page  # in the description
    assert f"{yesterday.date().isoformat()}: p50 410 ms, p95 410 ms" in page
    assert 'data-ending="user" data-value="1"' in page
    assert page.count('class="no-data"') == 5  # every stage but `total`
