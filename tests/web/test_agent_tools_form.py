"""The agent form's tools, template variables and boosted keywords (web/agent_forms.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.types import MakeAgent, Tenant
from tests.web.helpers import Browser, form_values, text_of

pytestmark = pytest.mark.anyio


async def signed_in(browser: Browser, tenant: Tenant) -> Browser:
    response = await browser.sign_in(tenant.api_key)
    assert response.status_code == 303, response.text
    return browser


async def make_tool(tenant: Tenant, name: str, project: str | None = None) -> None:
    body: dict[str, Any] = {"name": name, "type": "custom_websocket"}
    if project:
        body["project"] = project
    response = await tenant.client.post("/v1/tools", json=body)
    assert response.status_code == 201, response.text


async def test_create_agent_with_tools_variables_and_keywords(
    tenant: Tenant, browser: Browser
) -> None:
    await make_tool(tenant, "show_map")
    await signed_in(browser, tenant)
    page = await browser.http.get("/dashboard/agents")
    assert 'name="tools" value="show_map"' in page.text
    assert 'name="tools" value="natural_conversation_ending"' in page.text

    response = await browser.post(
        "/dashboard/agents",
        {
            "name": "support",
            "system_prompt": "Help {{customer_name}} with {{ topic }}.",
            "tools": ["show_map", "natural_conversation_ending"],
            "variable_name": ["customer_name", "topic", ""],
            "variable_default": ["there", "orders, returns", ""],
            "boosted_keywords": "Acme, Inc.\nParley\n",
        },
    )

    assert response.status_code == 303, response.text
    [agent] = (await tenant.client.get("/v1/agents")).json()["agents"]
    assert agent["tools"] == ["show_map", "natural_conversation_ending"]
    assert agent["template_variables"] == {
        "customer_name": {"default_value": "there"},
        "topic": {"default_value": "orders, returns"},
    }
    assert agent["boosted_keywords"] == ["Acme, Inc.", "Parley"]


async def test_edit_agent_form_shows_and_saves_tools_variables_keywords(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    await make_tool(tenant, "show_map")
    await make_tool(tenant, "lookup_order")
    await tenant.client.post("/v1/projects", json={"name": "other"})
    await make_tool(tenant, "elsewhere", project="other")
    agent = await make_agent(
        tenant, tools=["show_map"], template_variables={"who": {"default_value": "friend"}},
        boosted_keywords=["Acme"], system_prompt="Hi {{who}}.",
    )  # fmt: skip
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/agents/{agent['id']}")
    shown = form_values(page.text, "edit-agent")
    assert shown["tools"] == "show_map"
    assert shown["variable_name"].startswith("who,")
    assert shown["variable_default"].startswith("friend,")
    assert shown["boosted_keywords"] == "Acme"
    assert 'value="lookup_order"' in page.text
    assert 'value="elsewhere"' not in page.text  # only the agent's project's tools

    response = await browser.post(
        f"/dashboard/agents/{agent['id']}",
        {
            **shown,
            "tools": ["lookup_order"],
            "variable_name": ["who", "place"],
            "variable_default": ["friend", "Berlin"],
            "boosted_keywords": "Acme\nZed",
        },
    )

    assert response.status_code == 303, response.text
    after = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert after["tools"] == ["lookup_order"]
    assert after["template_variables"] == {
        "who": {"default_value": "friend"},
        "place": {"default_value": "Berlin"},
    }
    assert after["boosted_keywords"] == ["Acme", "Zed"]


async def test_create_agent_tool_of_other_project_400_unknown_tool_form_kept(
    tenant: Tenant, browser: Browser
) -> None:
    await tenant.client.post("/v1/projects", json={"name": "other"})
    await make_tool(tenant, "elsewhere", project="other")
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/agents", {"name": "support", "tools": ["elsewhere"]})

    assert response.status_code == 400
    assert "unknown_tool" in text_of(response.text, "create-agent-error")
    assert "elsewhere" in text_of(response.text, "create-agent-tools")
    assert form_values(response.text, "create-agent")["tools"] == "elsewhere"  # still ticked
    assert (await tenant.client.get("/v1/agents")).json()["agents"] == []


async def test_create_agent_bad_variable_name_error_beside_rows_rows_kept(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post(
        "/dashboard/agents",
        {"name": "support", "variable_name": ["ok", "two words"],
         "variable_default": ["1", "2"]},
    )  # fmt: skip

    assert response.status_code == 400
    assert "'two words'" in text_of(response.text, "create-agent-variable_name-error")
    kept = form_values(response.text, "create-agent")
    assert kept["variable_name"].startswith("ok,two words,")
    assert kept["variable_default"].startswith("1,2,")
    assert (await tenant.client.get("/v1/agents")).json()["agents"] == []


async def test_create_agent_undeclared_placeholder_error_beside_prompt(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post(
        "/dashboard/agents", {"name": "support", "system_prompt": "Hello {{customer_name}}."}
    )

    assert response.status_code == 400
    assert "undeclared_template_variable" in text_of(response.text, "create-agent-error")
    assert "customer_name" in text_of(response.text, "create-agent-system_prompt-error")


async def test_edit_agent_keyword_too_long_error_beside_keywords(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/agents/{agent['id']}")

    rows = {"variable_name": ["", ""], "variable_default": ["", ""]}  # the blank rows, as rows
    posted: dict[str, str | list[str]] = {**form_values(page.text, "edit-agent"), **rows}

    response = await browser.post(
        f"/dashboard/agents/{agent['id']}", {**posted, "boosted_keywords": "k" * 65}
    )

    assert response.status_code == 400
    assert "64" in text_of(response.text, "edit-agent-boosted_keywords-error")
