"""A replay run in the background (api/replays.py): a replay whose conversation cannot go
live leaves it ended, never `pending`."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from tests.types import MakeAgent, Tenant

from parley.api.replays import run_replay
from parley.records import Principal
from parley.services import Context, conversations
from parley.services.conversation_replays import ReplayPlan
from parley.services.live.codec import Configure

pytestmark = pytest.mark.anyio


async def test_replay_agent_disabled_before_it_ran_conversation_ended_error(
    app: FastAPI, ctx: Context, tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    made = await conversations.create_conversation(
        ctx,
        org_id=tenant.org.id,
        agent=agent["name"],
        project=None,
        conversation_id=None,
        replay_of="conv_replayed",
    )
    disabled = await tenant.client.post(f"/v1/agents/{agent['name']}/disable")
    assert disabled.status_code == 200
    configure = Configure(agent=None, input_format="pcm_16000", output_format="pcm_16000")
    plan = ReplayPlan(tenant.org.id, made.id, "conv_replayed", configure, bytes(6_400), 16_000)
    principal = Principal(kind="api_key", org_id=tenant.org.id, credential_id="key_test")

    await run_replay(ctx, app.state.engine_factory, principal, plan)

    found = await tenant.client.get(f"/v1/conversations/{made.id}")
    conversation = found.json()["conversation"]
    assert (conversation["status"], conversation["ended_by"]) == ("ended", "error")
    assert (conversation["origin"], conversation["replay_of"]) == ("replay", "conv_replayed")
