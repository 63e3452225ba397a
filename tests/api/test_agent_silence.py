"""The agents' silence settings (API.md section 15): off by default, in range or 400
naming the field, null turns them off again."""

from __future__ import annotations

import pytest
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio

OFF = {
    "no_input_poke_sec": None,
    "no_input_poke_text": "Are you still there?",
    "no_input_end_conversation_sec": None,
}


def silence_of(agent: dict[str, object]) -> dict[str, object]:
    return {name: agent[name] for name in OFF}


async def test_agent_silence_off_by_default(tenant: Tenant, make_agent: MakeAgent) -> None:
    assert silence_of(await make_agent(tenant)) == OFF


async def test_agent_silence_round_trips_and_null_turns_it_off(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    chosen = {
        "no_input_poke_sec": 600,
        "no_input_poke_text": "Hello, are you there?",
        "no_input_end_conversation_sec": 3600,
    }
    agent = await make_agent(tenant, **chosen)
    assert silence_of(agent) == chosen
    got = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert silence_of(got) == chosen

    response = await tenant.client.patch(
        f"/v1/agents/{agent['id']}",
        json={"no_input_poke_sec": None, "no_input_end_conversation_sec": 1},
    )
    assert response.status_code == 200, response.text
    assert silence_of(response.json()["agent"]) == {
        **chosen,
        "no_input_poke_sec": None,
        "no_input_end_conversation_sec": 1,
    }


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("no_input_poke_sec", 0),
        ("no_input_poke_sec", 601),
        ("no_input_poke_sec", "10"),
        ("no_input_end_conversation_sec", 0),
        ("no_input_end_conversation_sec", 3601),
        ("no_input_poke_text", ""),
    ],
)
async def test_agent_silence_out_of_range_400_naming_the_field(
    tenant: Tenant, make_agent: MakeAgent, field: str, value: object
) -> None:
    created = await tenant.client.post("/v1/agents", json={"name": "quiet", field: value})
    assert field in str(assert_error(created, 400, "validation_error").get("param_errors"))
    agent = await make_agent(tenant)
    patched = await tenant.client.patch(f"/v1/agents/{agent['id']}", json={field: value})
    assert field in str(assert_error(patched, 400, "validation_error").get("param_errors"))


async def test_agent_poke_text_null_refused(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)
    patched = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"no_input_poke_text": None}
    )
    body = assert_error(patched, 400, "validation_error")
    assert "no_input_poke_text" in str(body.get("param_errors"))
