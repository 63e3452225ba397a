"""The work after a call (API.md section 16): `analyse_after_call` runs the summary, then the
agent's extraction schemas and evaluation prompts in its order, each failure alone, and
never raises; against the scripted chat server, on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from parley.config import Settings
from parley.services import Context
from parley.services.after_call import AfterCall, analyse_after_call
from parley.services.conversations import get_conversation
from tests.api.analysis_helpers import APPOINTMENT, create_prompt, create_schema, spoken
from tests.llm_server import ChatServer, Round, json_round, running_chat_server
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio
SUMMARY = "The user booked a table for four."
GOOD = {"Date": "9 Apr 2025", "Guests": 4, "Copay": 12.5, "Confirmed as booked": True}


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def settings(settings_factory: Any, chat: ChatServer) -> Settings:
    built: Settings = settings_factory(
        llm_base_url=chat.base_url, llm_model="m", llm_timeout_seconds=10
    )
    return built


async def agent_with_analysis(tenant: Tenant, make_agent: MakeAgent) -> dict[str, Any]:
    """An agent running two schemas and one prompt after its calls."""
    await create_schema(tenant)
    await create_schema(
        tenant, {**APPOINTMENT, "name": "Mood", "fields": [{"name": "happy", "type": "bool"}]}
    )
    await create_prompt(tenant)
    return await make_agent(
        tenant,
        extraction_schemas=["Mood", "Appointment details"],
        eval_prompts=["used_chocolate"],
    )


async def test_after_call_summary_extractions_and_evaluations_in_the_agents_order(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await agent_with_analysis(tenant, make_agent)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    chat.script.rounds.extend(
        [
            Round(text=[SUMMARY]),
            json_round({"happy": True}),
            json_round(GOOD),
            json_round({"result": "unsuccessful"}),
        ]
    )
    done = await analyse_after_call(ctx, tenant.org.id, conversation)
    assert done.summary == SUMMARY
    assert [e["schema"]["name"] for e in done.extractions] == ["Mood", "Appointment details"]
    assert [e["result"] for e in done.extractions] == [{"happy": True}, GOOD]
    assert [e["result"] for e in done.evaluations] == ["unsuccessful"]
    listed = await tenant.client.get(f"/v1/conversations/{conversation}/extractions")
    assert listed.json()["extractions"] == list(done.extractions)
    evals = await tenant.client.get(f"/v1/conversations/{conversation}/evals")
    assert evals.json()["evals"] == list(done.evaluations)


async def test_after_call_event_data_holds_the_conversation_with_its_summary(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    chat.script.rounds.append(Round(text=[SUMMARY]))
    done = await analyse_after_call(ctx, tenant.org.id, conversation)
    record = await get_conversation(ctx, org_id=tenant.org.id, conversation_id=conversation)
    data = done.event_data(dataclasses.replace(record, summary=None))
    assert set(data) == {"conversation", "extractions", "evaluations"}
    assert data["conversation"]["summary"] == SUMMARY
    assert data["conversation"]["id"] == conversation
    assert (data["extractions"], data["evaluations"]) == ([], [])
    shown = (await tenant.client.get(f"/v1/conversations/{conversation}")).json()
    assert data["conversation"] == shown["conversation"]


async def test_after_call_one_failure_isolated_the_rest_still_runs(
    tenant: Tenant,
    ctx: Context,
    make_agent: MakeAgent,
    chat: ChatServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = await agent_with_analysis(tenant, make_agent)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    chat.script.rounds.extend(
        [
            Round(text=[SUMMARY]),
            json_round("no"),
            json_round("still no"),  # Mood: two bad answers, left out
            json_round(GOOD),
            json_round("?"),
            json_round("?"),  # the evaluation: kept, as error
        ]
    )
    with caplog.at_level(logging.WARNING, logger="parley.services.after_call"):
        done = await analyse_after_call(ctx, tenant.org.id, conversation)
    assert done.summary == SUMMARY
    assert [e["schema"]["name"] for e in done.extractions] == ["Appointment details"]
    assert [e["result"] for e in done.evaluations] == ["error"]
    assert "extraction_failed" in caplog.text


async def test_after_call_model_down_never_raises(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await agent_with_analysis(tenant, make_agent)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    chat.script.status = 500
    assert await analyse_after_call(ctx, tenant.org.id, conversation) == AfterCall()
    assert len(chat.requests) == 4  # each piece asked once: none retried on a 5xx


async def test_after_call_without_a_language_model_empty(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await agent_with_analysis(tenant, make_agent)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    without = dataclasses.replace(ctx, language_model=None)
    assert await analyse_after_call(without, tenant.org.id, conversation) == AfterCall()
    assert chat.requests == []


async def test_after_call_zero_retention_nothing_asked(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    await create_prompt(tenant)
    agent = await make_agent(
        tenant, eval_prompts=["used_chocolate"], data_retention_policy={"zero_data_retention": True}
    )
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    assert await analyse_after_call(ctx, tenant.org.id, conversation) == AfterCall()
    assert chat.requests == []


async def test_after_call_unknown_conversation_empty(ctx: Context, tenant: Tenant) -> None:
    assert await analyse_after_call(ctx, tenant.org.id, "nope") == AfterCall()


async def test_after_call_agent_deleted_summary_only(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await agent_with_analysis(tenant, make_agent)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    assert (await tenant.client.delete(f"/v1/agents/{agent['id']}")).status_code == 200
    chat.script.rounds.append(Round(text=[SUMMARY]))
    done = await analyse_after_call(ctx, tenant.org.id, conversation)
    assert done == AfterCall(summary=SUMMARY)
