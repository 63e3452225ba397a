"""The built-in tools (API.md section 15) by name: an agent may list each; no custom tool may
take one of their names; the service's list is the engine's."""

from __future__ import annotations

import pytest
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

from parley import engine
from parley.services.tools import BUILT_IN_TOOLS

pytestmark = pytest.mark.anyio

BUILT_INS = ["keypad_input", "choose_not_to_respond", "natural_conversation_ending"]


def test_builtin_tool_names_of_service_are_the_engines() -> None:
    assert frozenset(engine.BUILT_IN_TOOL_NAMES) == BUILT_IN_TOOLS == frozenset(BUILT_INS)


async def test_agent_accepts_keypad_input_and_choose_not_to_respond(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant, tools=BUILT_INS)
    assert agent["tools"] == BUILT_INS
    patched = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"tools": ["choose_not_to_respond"]}
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["agent"]["tools"] == ["choose_not_to_respond"]


@pytest.mark.parametrize("name", ["keypad_input", "choose_not_to_respond"])
async def test_custom_tool_named_like_a_builtin_400(tenant: Tenant, name: str) -> None:
    body = {
        "name": name,
        "description": "Shadows a built-in.",
        "type": "custom_websocket",
        "parameters": {"type": "object", "properties": {}},
    }
    response = await tenant.client.post("/v1/tools", json=body)
    found = assert_error(response, 400, "validation_error")
    assert "name" in found["param_errors"]


async def test_agent_unknown_tool_message_lists_every_builtin(tenant: Tenant) -> None:
    response = await tenant.client.post(
        "/v1/agents", json={"name": "builtins-unknown", "tools": ["keypad"]}
    )
    body = assert_error(response, 400, "unknown_tool")
    for name in BUILT_INS:
        assert name in body["error"]["message"]
