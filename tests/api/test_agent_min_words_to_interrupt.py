"""`min_words_to_interrupt` (API.md section 18): an agent member from 1 to 10, default 1,
through create, PATCH, the upsert and the official SDK; out of range a 400 naming it."""

from __future__ import annotations

import pytest
from phonic import AsyncPhonic
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]


async def test_min_words_to_interrupt_default_1_set_patched_read_back(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    plain = await make_agent(tenant)
    assert plain["min_words_to_interrupt"] == 1
    agent = await make_agent(tenant, name="patient", min_words_to_interrupt=3)
    assert agent["min_words_to_interrupt"] == 3
    patched = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"min_words_to_interrupt": 10}
    )
    assert patched.status_code == 200, patched.text
    read = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert read["min_words_to_interrupt"] == 10
    other = await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"audio_speed": 1.5})
    assert other.json()["agent"]["min_words_to_interrupt"] == 10  # not given: unchanged


@pytest.mark.parametrize("value", [0, 11, -1, 2.5, "3", True], ids=repr)
async def test_min_words_to_interrupt_out_of_range_400_param_errors(
    tenant: Tenant, make_agent: MakeAgent, value: object
) -> None:
    agent = await make_agent(tenant)
    body = {"name": "eager", "min_words_to_interrupt": value}
    for response in (
        await tenant.client.post("/v1/agents", json=body),
        await tenant.client.patch(
            f"/v1/agents/{agent['id']}", json={"min_words_to_interrupt": value}
        ),
        await tenant.client.put("/v1/agents/upsert", json=body),
    ):
        errors = assert_error(response, 400, "validation_error")["param_errors"]
        assert list(errors) == ["min_words_to_interrupt"], errors
    read = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert read["min_words_to_interrupt"] == 1


async def test_min_words_to_interrupt_patch_null_400(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)
    refused = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"min_words_to_interrupt": None}
    )
    body = assert_error(refused, 400, "validation_error")
    assert body["param_errors"] == {"min_words_to_interrupt": "may not be null"}


async def test_min_words_to_interrupt_sdk_upsert_and_update(sdk: AsyncPhonic) -> None:
    first = await sdk.agents.upsert(name="desk", project="main", min_words_to_interrupt=2)
    assert first.agent.min_words_to_interrupt == 2
    await sdk.agents.update("desk", min_words_to_interrupt=4)
    assert (await sdk.agents.get("desk")).agent.min_words_to_interrupt == 4
    second = await sdk.agents.upsert(name="desk", project="main")
    assert second.agent.min_words_to_interrupt == 1  # an upsert replaces: the default again
