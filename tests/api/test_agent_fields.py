"""The agent fields of API.md sections 4 and 12: project object, tools, template variables,
boosted keywords; and the conversation members of section 5."""

from __future__ import annotations

from typing import Any

import pytest
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio


async def test_create_agent_answers_agent_with_sdk_id_and_name(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/agents", json={"name": "support"})

    assert response.status_code == 201, response.text
    body = response.json()
    assert set(body) == {"agent", "id", "name"}
    assert (body["id"], body["name"]) == (body["agent"]["id"], "support")


async def test_agent_project_is_an_object_everywhere(tenant: Tenant, make_agent: MakeAgent) -> None:
    project = (await tenant.client.post("/v1/projects", json={"name": "sales"})).json()["project"]
    agent = await make_agent(tenant, project="sales")
    expected = {"id": project["id"], "name": "sales"}

    listed = (await tenant.client.get("/v1/agents", params={"project": "sales"})).json()["agents"]
    got = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]

    assert agent["project"] == got["project"] == listed[0]["project"] == expected


async def test_agent_new_fields_default_empty(make_agent: MakeAgent, tenant: Tenant) -> None:
    agent = await make_agent(tenant)
    assert (agent["tools"], agent["template_variables"], agent["boosted_keywords"]) == ([], {}, [])


async def test_agent_fields_round_trip_on_create_and_patch(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    variables = {"name": {"default_value": "there"}, "shop": {"default_value": ""}}
    agent = await make_agent(
        tenant,
        system_prompt="You help {{ name }} at {{shop}}.",
        welcome_message="Hi {{name}}!",
        template_variables=variables,
        boosted_keywords=["Parley", "Ada Lovelace"],
        tools=["natural_conversation_ending"],
    )
    assert agent["template_variables"] == variables
    assert agent["boosted_keywords"] == ["Parley", "Ada Lovelace"]
    assert agent["tools"] == ["natural_conversation_ending"]

    response = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"boosted_keywords": ["Babbage"], "tools": []}
    )

    assert response.status_code == 200, response.text
    patched = response.json()["agent"]
    assert (patched["boosted_keywords"], patched["tools"]) == (["Babbage"], [])
    assert patched["template_variables"] == variables


@pytest.mark.parametrize(
    "fields",
    [
        {"system_prompt": "Hello {{name}}"},
        {"welcome_message": "Hi {{ name }}"},
        {"system_prompt": "{{a}}", "template_variables": {"b": {"default_value": ""}}},
    ],
    ids=["prompt", "welcome", "other-declared"],
)
async def test_create_agent_undeclared_template_variable_400(
    tenant: Tenant, fields: dict[str, Any]
) -> None:
    response = await tenant.client.post("/v1/agents", json={"name": "a", **fields})
    body = assert_error(response, 400, "undeclared_template_variable")
    assert set(body["param_errors"]) <= {"system_prompt", "welcome_message"}


async def test_patch_agent_checks_the_merged_template_variables(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(
        tenant, system_prompt="Hi {{name}}", template_variables={"name": {"default_value": "x"}}
    )
    url = f"/v1/agents/{agent['id']}"

    dropped = await tenant.client.patch(url, json={"template_variables": {}})
    body = assert_error(dropped, 400, "undeclared_template_variable")
    assert "system_prompt" in body["param_errors"]

    new_use = await tenant.client.patch(url, json={"welcome_message": "{{ shop }}"})
    assert_error(new_use, 400, "undeclared_template_variable")

    together = await tenant.client.patch(
        url,
        json={
            "welcome_message": "{{ shop }}",
            "template_variables": {"name": {"default_value": "x"}, "shop": {"default_value": "y"}},
        },
    )
    assert together.status_code == 200, together.text


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"template_variables": {"1bad": {"default_value": ""}}}, "template_variables"),
        ({"template_variables": {"a": {}}}, "template_variables.a.default_value"),
        ({"template_variables": {"a": {"default_value": 1}}}, "template_variables.a.default_value"),
        ({"template_variables": {"a": "x"}}, "template_variables.a"),
        ({"boosted_keywords": ["k"] * 101}, "boosted_keywords"),
        ({"boosted_keywords": ["k" * 65]}, "boosted_keywords.0"),
        ({"boosted_keywords": [""]}, "boosted_keywords.0"),
        ({"tools": ["a", "a"]}, "tools"),
        ({"tools": "natural_conversation_ending"}, "tools"),
    ],
    ids=[
        "variable-name",
        "variable-without-default",
        "variable-default-not-string",
        "variable-not-object",
        "too-many-keywords",
        "keyword-too-long",
        "keyword-empty",
        "tool-repeated",
        "tools-not-list",
    ],
)
async def test_create_agent_bad_new_field_400(
    tenant: Tenant, fields: dict[str, Any], field: str
) -> None:
    response = await tenant.client.post("/v1/agents", json={"name": "a", **fields})
    errors = assert_error(response, 400, "validation_error")["param_errors"]
    assert field in errors, errors


async def test_patch_agent_null_new_field_400(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)
    response = await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"tools": None})
    body = assert_error(response, 400, "validation_error")
    assert body["param_errors"] == {"tools": "may not be null"}


async def test_conversation_shows_section_5_members(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)

    created = await tenant.client.post("/v1/conversations", json={"agent": agent["id"]})
    conversation = created.json()["conversation"]
    got = (await tenant.client.get(f"/v1/conversations/{conversation['id']}")).json()

    assert got["conversation"] == conversation
    assert conversation["project"] == agent["project"]
    assert conversation["ended_by"] is None
    assert conversation["duration_ms"] is None
    assert conversation["call_info"] is None
    assert conversation["template_variables"] == {}
    # Section 5's members, and the official SDK's `ConversationAnalysis.id` (section 17).
    assert conversation["analysis"] == {
        "id": conversation["id"],
        "latencies_ms": [],
        "interruptions_count": 0,
        "turns": [],
    }
    listed = (await tenant.client.get("/v1/conversations")).json()["conversations"]
    assert listed == [conversation]
