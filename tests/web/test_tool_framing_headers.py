"""The dashboard's tool forms refuse framing and routing headers in `endpoint_headers`
(API.md section 12), beside the field, on creation and on edit, as the REST API does."""

from __future__ import annotations

import pytest

from tests.types import Tenant
from tests.web.helpers import Browser, form_values, text_of
from tests.web.test_tools_pages import make_tool, signed_in, tool_names, webhook_form

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("name", ["Transfer-Encoding", "keep-alive", "HOST"])
async def test_create_tool_form_framing_header_refused_beside_headers(
    tenant: Tenant, browser: Browser, name: str
) -> None:
    await signed_in(browser, tenant)
    typed = webhook_form(endpoint_headers='{"X-Api-Key": "k1", "' + name + '": "chunked"}')

    response = await browser.post("/dashboard/tools", typed)

    assert response.status_code == 400
    assert name in text_of(response.text, "create-tool-endpoint_headers-error")
    assert await tool_names(tenant) == []


async def test_edit_tool_form_framing_header_refused_tool_unchanged(
    tenant: Tenant, browser: Browser
) -> None:
    tool = await make_tool(tenant)
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/tools/{tool['id']}")
    typed = {**form_values(page.text, "edit-tool"), "endpoint_headers": '{"Connection": "close"}'}

    response = await browser.post(f"/dashboard/tools/{tool['id']}", typed)

    assert response.status_code == 400
    assert "Connection" in text_of(response.text, "edit-tool-endpoint_headers-error")
    assert (await tenant.client.get(f"/v1/tools/{tool['id']}")).json()["tool"] == tool
