"""The dashboard's tools page (API.md section 12) over the real app: list, create with the
signing secret shown once, edit, delete refused while in use, CSRF, refused forms."""

from __future__ import annotations

from typing import Any

import pytest

from tests.types import MakeAgent, Tenant
from tests.web.helpers import Browser, csrf_of, form_values, text_of

pytestmark = pytest.mark.anyio

HEADER_VALUE = "Bearer header-value-never-shown"
SCHEMA = (
    '{"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}'
)


async def signed_in(browser: Browser, tenant: Tenant) -> Browser:
    response = await browser.sign_in(tenant.api_key)
    assert response.status_code == 303, response.text
    return browser


async def make_tool(tenant: Tenant, **fields: Any) -> dict[str, Any]:
    """Create a tool through the REST API; return the tool as GET shows it."""
    body = {
        "name": "lookup_order",
        "type": "custom_webhook",
        "endpoint_url": "https://hooks.example.com/orders",
        "endpoint_headers": {"Authorization": HEADER_VALUE},
        **fields,
    }
    created = await tenant.client.post("/v1/tools", json=body)
    assert created.status_code == 201, created.text
    tool: dict[str, Any] = (await tenant.client.get(f"/v1/tools/{created.json()['id']}")).json()[
        "tool"
    ]
    return tool


async def tool_names(tenant: Tenant) -> list[str]:
    return [t["name"] for t in (await tenant.client.get("/v1/tools")).json()["tools"]]


def webhook_form(**fields: str) -> dict[str, str]:
    return {
        "project": "main",
        "name": "lookup_order",
        "description": "Find an order.",
        "type": "custom_webhook",
        "execution_mode": "sync",
        "parameters": SCHEMA,
        "endpoint_method": "POST",
        "endpoint_url": "https://hooks.example.com/orders",
        "endpoint_headers": '{"Authorization": "' + HEADER_VALUE + '"}',
        "endpoint_timeout_ms": "8000",
        **fields,
    }


# --- the list ---------------------------------------------------------------------------


async def test_tools_page_lists_endpoint_timeouts_users_and_masks_header_values(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    await make_tool(tenant)
    await make_tool(
        tenant, name="show_map", type="custom_websocket", endpoint_url=None,
        endpoint_headers=None, tool_call_output_timeout_ms=9000,
    )  # fmt: skip
    agent = await make_agent(tenant, name="support", tools=["lookup_order"])
    await signed_in(browser, tenant)

    page = await browser.http.get("/dashboard/tools")

    assert page.status_code == 200
    rows = text_of(page.text, "tools")
    assert "lookup_order" in rows
    assert "POST https://hooks.example.com/orders" in rows
    assert "client (WebSocket)" in rows
    assert "5000 ms" in rows
    assert "9000 ms" in rows
    assert "Authorization: ••••••" in rows
    assert f'href="/dashboard/agents/{agent["id"]}">support</a>' in page.text
    assert "header-value-never-shown" not in page.text
    assert "whsec_" not in page.text
    assert '<a href="/dashboard/tools">Tools</a>' in page.text  # in the nav


async def test_tools_page_without_session_redirects_to_sign_in(browser: Browser) -> None:
    response = await browser.http.get("/dashboard/tools")

    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/sign-in"


# --- create -----------------------------------------------------------------------------


async def test_create_tool_secret_shown_once_not_on_reload(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/tools", webhook_form())

    assert response.status_code == 200, response.text
    secret = text_of(response.text, "new-signing-secret")
    assert secret.startswith("whsec_")
    assert "header-value-never-shown" not in response.text
    [tool] = (await tenant.client.get("/v1/tools")).json()["tools"]
    assert (tool["name"], tool["description"], tool["endpoint_timeout_ms"]) == (
        "lookup_order",
        "Find an order.",
        8000,
    )
    assert tool["parameters"]["required"] == ["order_id"]
    assert tool["endpoint_headers"] == {"Authorization": HEADER_VALUE}
    assert tool["tool_call_output_timeout_ms"] is None
    for later in [
        await browser.http.get("/dashboard/tools"),
        await browser.http.get(f"/dashboard/tools/{tool['id']}"),
    ]:
        assert later.status_code == 200
        assert secret not in later.text
        assert "whsec_" not in later.text


async def test_create_websocket_tool_ignores_webhook_fields(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)
    form = webhook_form(
        name="show_map", type="custom_websocket", execution_mode="async",
        tool_call_output_timeout_ms="12000", require_speech_before_tool_call="on",
    )  # fmt: skip

    response = await browser.post("/dashboard/tools", form)

    assert response.status_code == 200, response.text
    [tool] = (await tenant.client.get("/v1/tools")).json()["tools"]
    assert tool["type"] == "custom_websocket"
    assert tool["execution_mode"] == "async"
    assert tool["tool_call_output_timeout_ms"] == 12000
    assert tool["require_speech_before_tool_call"] is True
    assert tool["endpoint_url"] is None
    assert tool["endpoint_headers"] is None


async def test_create_tool_flat_parameter_list_accepted(tenant: Tenant, browser: Browser) -> None:
    await signed_in(browser, tenant)
    flat = '[{"type": "string", "name": "city", "description": "The city.", "is_required": true}]'

    response = await browser.post("/dashboard/tools", webhook_form(parameters=flat))

    assert response.status_code == 200, response.text
    [tool] = (await tenant.client.get("/v1/tools")).json()["tools"]
    assert tool["parameters"][0]["name"] == "city"


async def test_create_tool_bad_parameters_json_form_kept_error_beside_parameters(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)
    typed = webhook_form(parameters='{"type": "object", "properties": {')

    response = await browser.post("/dashboard/tools", typed)

    assert response.status_code == 400
    assert "is not valid JSON" in text_of(response.text, "create-tool-parameters-error")
    assert "validation_error" in text_of(response.text, "create-tool-error")
    kept = form_values(response.text, "create-tool")
    assert kept["parameters"] == typed["parameters"]
    assert (kept["name"], kept["endpoint_url"]) == ("lookup_order", typed["endpoint_url"])
    assert kept["endpoint_headers"] == ""  # header values are never typed back
    assert "header-value-never-shown" not in response.text
    assert "<h1>Tools</h1>" in response.text
    assert await tool_names(tenant) == []


async def test_create_tool_parameters_not_a_schema_error_names_the_field(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/tools", webhook_form(parameters='"just text"'))

    assert response.status_code == 400
    assert text_of(response.text, "create-tool-parameters-error")
    assert await tool_names(tenant) == []


@pytest.mark.parametrize(
    "parameters",
    ['{"type": "object", "default": NaN}', "[" * 5000, "1" * 5000],
    ids=["nan", "deep", "huge-integer"],
)
async def test_create_tool_parameters_python_only_json_refused(
    tenant: Tenant, browser: Browser, parameters: str
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/tools", webhook_form(parameters=parameters))

    assert response.status_code == 400
    assert "is not valid JSON" in text_of(response.text, "create-tool-parameters-error")
    assert await tool_names(tenant) == []


async def test_create_tool_bad_headers_json_error_beside_headers(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post(
        "/dashboard/tools", webhook_form(endpoint_headers='{"Bad Name": "secret-in-bad"}')
    )

    assert response.status_code == 400
    assert "header name" in text_of(response.text, "create-tool-endpoint_headers-error")
    assert "secret-in-bad" not in response.text
    assert await tool_names(tenant) == []


async def test_create_tool_name_taken_409_form_kept(tenant: Tenant, browser: Browser) -> None:
    await make_tool(tenant)
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/tools", webhook_form(description="Second."))

    assert response.status_code == 409
    assert "name_taken" in text_of(response.text, "create-tool-error")
    assert form_values(response.text, "create-tool")["description"] == "Second."


async def test_create_tool_unknown_project_404_form_kept(tenant: Tenant, browser: Browser) -> None:
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/tools", webhook_form(project="mian"))

    assert response.status_code == 404
    assert "project_not_found" in text_of(response.text, "create-tool-error")
    assert form_values(response.text, "create-tool")["project"] == "mian"


async def test_create_tool_timeout_not_a_number_error_beside_field(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/tools", webhook_form(endpoint_timeout_ms="5s"))

    assert response.status_code == 400
    assert "milliseconds" in text_of(response.text, "create-tool-endpoint_timeout_ms-error")


# --- edit -------------------------------------------------------------------------------


async def test_edit_tool_saves_what_the_form_posts_and_keeps_headers(
    tenant: Tenant, browser: Browser
) -> None:
    tool = await make_tool(tenant, parameters=[])
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/tools/{tool['id']}")
    posted = form_values(page.text, "edit-tool")
    assert posted["endpoint_headers"] == ""  # the stored value is never drawn
    assert "Authorization: ••••••" in text_of(page.text, "edit-tool-stored-headers")
    assert "header-value-never-shown" not in page.text

    response = await browser.post(
        f"/dashboard/tools/{tool['id']}",
        {**posted, "name": "find_order", "description": "Edited.", "parameters": SCHEMA},
    )

    assert response.status_code == 303, response.text
    assert response.headers["location"] == f"/dashboard/tools/{tool['id']}?done=tool_updated"
    after = (await tenant.client.get(f"/v1/tools/{tool['id']}")).json()["tool"]
    assert (after["name"], after["description"]) == ("find_order", "Edited.")
    assert after["parameters"]["required"] == ["order_id"]
    assert after["endpoint_headers"] == {"Authorization": HEADER_VALUE}
    assert after["endpoint_timeout_ms"] == 5000


async def test_edit_tool_clear_headers_removes_them(tenant: Tenant, browser: Browser) -> None:
    tool = await make_tool(tenant)
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/tools/{tool['id']}")

    response = await browser.post(
        f"/dashboard/tools/{tool['id']}",
        {**form_values(page.text, "edit-tool"), "clear_headers": "on"},
    )

    assert response.status_code == 303, response.text
    after = (await tenant.client.get(f"/v1/tools/{tool['id']}")).json()["tool"]
    assert after["endpoint_headers"] is None


async def test_edit_tool_renames_it_in_the_agents_that_list_it(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    tool = await make_tool(tenant)
    agent = await make_agent(tenant, tools=["lookup_order"])
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/tools/{tool['id']}")

    await browser.post(
        f"/dashboard/tools/{tool['id']}", {**form_values(page.text, "edit-tool"), "name": "orders"}
    )

    after = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert after["tools"] == ["orders"]


async def test_edit_tool_bad_timeout_form_kept_tool_unchanged(
    tenant: Tenant, browser: Browser
) -> None:
    tool = await make_tool(tenant)
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/tools/{tool['id']}")
    typed = {**form_values(page.text, "edit-tool"), "endpoint_timeout_ms": "999999",
             "description": "Typed."}  # fmt: skip

    response = await browser.post(f"/dashboard/tools/{tool['id']}", typed)

    assert response.status_code == 400
    assert "between 1000 and 180000" in text_of(
        response.text, "edit-tool-endpoint_timeout_ms-error"
    )
    kept = form_values(response.text, "edit-tool")
    assert (kept["description"], kept["endpoint_timeout_ms"]) == ("Typed.", "999999")
    after = (await tenant.client.get(f"/v1/tools/{tool['id']}")).json()["tool"]
    assert after == tool


async def test_edit_tool_bad_parameters_json_error_beside_parameters(
    tenant: Tenant, browser: Browser
) -> None:
    tool = await make_tool(tenant)
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/tools/{tool['id']}")

    response = await browser.post(
        f"/dashboard/tools/{tool['id']}",
        {**form_values(page.text, "edit-tool"), "parameters": "[1, 2,"},
    )

    assert response.status_code == 400
    assert "is not valid JSON" in text_of(response.text, "edit-tool-parameters-error")
    assert (await tenant.client.get(f"/v1/tools/{tool['id']}")).json()["tool"] == tool


# --- delete -----------------------------------------------------------------------------


async def test_delete_tool_in_use_409_error_on_page_tool_kept(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    tool = await make_tool(tenant)
    agent = await make_agent(tenant, name="support", tools=["lookup_order"])
    await signed_in(browser, tenant)

    refused = await browser.post(f"/dashboard/tools/{tool['id']}/delete")

    assert refused.status_code == 409
    assert "tool_in_use" in text_of(refused.text, "delete-tool-error")
    assert "support" in text_of(refused.text, "delete-tool-error")
    assert "<h1>lookup_order</h1>" in refused.text  # the tool's page, not an error page
    assert await tool_names(tenant) == ["lookup_order"]

    await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"tools": []})
    deleted = await browser.post(f"/dashboard/tools/{tool['id']}/delete")

    assert deleted.status_code == 303
    assert deleted.headers["location"] == "/dashboard/tools?done=tool_deleted"
    assert await tool_names(tenant) == []


# --- attacks ----------------------------------------------------------------------------


async def test_tool_forms_without_csrf_token_refused_nothing_changed(
    tenant: Tenant, browser: Browser
) -> None:
    tool = await make_tool(tenant)
    await signed_in(browser, tenant)
    posts = [
        ("/dashboard/tools", webhook_form(name="forged")),
        (f"/dashboard/tools/{tool['id']}", webhook_form(description="forged")),
        (f"/dashboard/tools/{tool['id']}/delete", {}),
    ]

    for path, data in posts:
        for token in [None, "0" * 64]:
            sent = data if token is None else {**data, "csrf_token": token}
            response = await browser.http.post(path, data=sent)
            assert response.status_code == 403, path
            assert "csrf_failed" in response.text

    assert (await tenant.client.get(f"/v1/tools/{tool['id']}")).json()["tool"] == tool
    assert await tool_names(tenant) == ["lookup_order"]


async def test_other_org_tool_by_id_403_shows_nothing(
    tenant: Tenant, other_tenant: Tenant, browser: Browser
) -> None:
    theirs = await make_tool(other_tenant, description="their private tool")
    await signed_in(browser, tenant)
    page = await browser.http.get("/dashboard/tools")
    token = csrf_of(page.text)

    responses = [
        await browser.http.get(f"/dashboard/tools/{theirs['id']}"),
        await browser.http.post(
            f"/dashboard/tools/{theirs['id']}",
            data={"csrf_token": token, **webhook_form(description="taken over")},
        ),
        await browser.http.post(
            f"/dashboard/tools/{theirs['id']}/delete", data={"csrf_token": token}
        ),
    ]

    assert "their private tool" not in page.text
    assert [r.status_code for r in responses] == [403, 403, 403]
    for response in responses:
        assert "their private tool" not in response.text
        assert "hooks.example.com" not in response.text
    after = (await other_tenant.client.get(f"/v1/tools/{theirs['id']}")).json()["tool"]
    assert after == theirs


async def test_script_in_tool_description_and_parameters_rendered_inert(
    tenant: Tenant, browser: Browser
) -> None:
    payload = "<script>alert(1)</script>"
    tool = await make_tool(
        tenant,
        description=payload,
        parameters={
            "type": "object",
            "properties": {"x": {"type": "string", "description": payload}},
        },
    )
    await signed_in(browser, tenant)

    page = await browser.http.get(f"/dashboard/tools/{tool['id']}")

    assert "<script" not in page.text.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
