"""The agent form's silence settings (web/agent_forms.py rule 5; API.md section 15)."""

from __future__ import annotations

import pytest

from tests.types import MakeAgent, Tenant
from tests.web.helpers import Browser, form_values, text_of
from tests.web.test_agent_tools_form import signed_in

pytestmark = pytest.mark.anyio


async def test_create_agent_form_sets_silence_empty_is_off(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)
    page = await browser.http.get("/dashboard/agents")
    shown = form_values(page.text, "create-agent")
    assert (shown["no_input_poke_sec"], shown["no_input_end_conversation_sec"]) == ("", "")

    response = await browser.post(
        "/dashboard/agents",
        {"name": "patient", "no_input_poke_sec": "8", "no_input_poke_text": "",
         "no_input_end_conversation_sec": ""},
    )  # fmt: skip

    assert response.status_code == 303, response.text
    [agent] = (await tenant.client.get("/v1/agents")).json()["agents"]
    assert agent["no_input_poke_sec"] == 8
    assert agent["no_input_poke_text"] == "Are you still there?"
    assert agent["no_input_end_conversation_sec"] is None


async def test_edit_agent_form_shows_and_saves_silence(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(
        tenant, no_input_poke_sec=5, no_input_poke_text="Hello?", no_input_end_conversation_sec=60
    )
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/agents/{agent['id']}")
    shown = form_values(page.text, "edit-agent")
    assert (
        shown["no_input_poke_sec"],
        shown["no_input_poke_text"],
        shown["no_input_end_conversation_sec"],
    ) == ("5", "Hello?", "60")

    response = await browser.post(
        f"/dashboard/agents/{agent['id']}",
        {**shown, "variable_name": [], "variable_default": [], "no_input_poke_sec": ""},
    )

    assert response.status_code == 303, response.text
    after = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert (after["no_input_poke_sec"], after["no_input_end_conversation_sec"]) == (None, 60)


@pytest.mark.parametrize("value", ["0", "601", "ten"])
async def test_create_agent_form_bad_poke_seconds_400_beside_the_field(
    tenant: Tenant, browser: Browser, value: str
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/agents", {"name": "x", "no_input_poke_sec": value})

    assert response.status_code == 400
    assert text_of(response.text, "create-agent-no_input_poke_sec-error")
    assert form_values(response.text, "create-agent")["no_input_poke_sec"] == value
    assert (await tenant.client.get("/v1/agents")).json()["agents"] == []
