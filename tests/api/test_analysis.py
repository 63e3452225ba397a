"""A conversation's summary and analysis (API.md section 16) against the scripted chat server,
on SQLite and PostgreSQL: `summarize`, the conversation's `summary`, and
`GET /v1/conversations/{id}/analysis`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from tests.api.analysis_helpers import spoken
from tests.api.helpers import assert_error
from tests.llm_server import ChatServer, Round, running_chat_server
from tests.types import MakeAgent, Tenant

from parley.config import Settings
from parley.records import Outcome, TurnTiming
from parley.services import Context, endings
from parley.services.summaries import summarize

pytestmark = pytest.mark.anyio
SUMMARY = "The user booked a table for four on 9 April. The agent confirmed it."


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def settings(settings_factory: Any, chat: ChatServer) -> Settings:
    built: Settings = settings_factory(
        llm_base_url=chat.base_url, llm_model="writer", llm_timeout_seconds=10
    )
    return built


async def conversation_json(tenant: Tenant, conversation: str) -> dict[str, Any]:
    response = await tenant.client.get(f"/v1/conversations/{conversation}")
    assert response.status_code == 200, response.text
    shown: dict[str, Any] = response.json()["conversation"]
    return shown


async def test_summary_null_until_written_then_shown(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    assert (await conversation_json(tenant, conversation))["summary"] is None
    chat.script.rounds.append(Round(text=[" The user booked a table", "\n for four on 9 April. "]))
    written = await summarize(ctx, tenant.org.id, conversation)
    assert written == "The user booked a table for four on 9 April."
    assert (await conversation_json(tenant, conversation))["summary"] == written


async def test_summary_request_carries_the_transcript_and_no_format(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    chat.script.rounds.append(Round(text=[SUMMARY]))
    await summarize(ctx, tenant.org.id, conversation)
    (sent,) = chat.requests
    assert "response_format" not in sent.body
    system, user = sent.body["messages"]
    assert "sentences" in system["content"]
    assert user["content"].startswith("Transcript:\n\nUser: Hi, a table for four")


async def test_summary_none_without_a_language_model(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    without = dataclasses.replace(ctx, language_model=None)
    assert await summarize(without, tenant.org.id, conversation) is None
    assert chat.requests == []


async def test_summary_none_with_zero_retention_nothing_asked(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await make_agent(tenant, data_retention_policy={"zero_data_retention": True})
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    assert await summarize(ctx, tenant.org.id, conversation) is None
    assert chat.requests == []
    assert (await conversation_json(tenant, conversation))["summary"] is None


async def test_summary_none_when_nothing_was_said(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"], lines=[])
    assert await summarize(ctx, tenant.org.id, conversation) is None
    assert chat.requests == []


async def test_summary_deleted_with_the_transcript(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    chat.script.rounds.append(Round(text=[SUMMARY]))
    assert await summarize(ctx, tenant.org.id, conversation) == SUMMARY
    assert (await tenant.client.delete(f"/v1/conversations/{conversation}")).status_code == 200
    assert (await conversation_json(tenant, conversation))["summary"] is None
    assert await summarize(ctx, tenant.org.id, conversation) is None  # nothing left to read


async def test_summary_model_unreachable_raises_503_kind(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    from parley.errors import Unavailable

    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    chat.script.status = 503
    with pytest.raises(Unavailable):
        await summarize(ctx, tenant.org.id, conversation)


async def test_analysis_in_the_sdk_shape_turns_empty(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"])
    response = await tenant.client.get(f"/v1/conversations/{conversation}/analysis")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "analysis": {
            "id": conversation,
            "latencies_ms": [],
            "interruptions_count": 0,
            "turns": [],
        }
    }


async def test_analysis_turns_stored_with_the_conversation_shown_by_both_routes(
    tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    """API.md section 18: each reply's stages, stored when the socket ends, in the
    Conversation JSON (and so the webhooks') and the analysis route."""
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"], ended=False)
    turns = (
        TurnTiming(410, 12, 95, 60, 640, played_ms=730, item_id="item_a"),
        TurnTiming(380, 0, 88, 55, 590),
    )
    await endings.end_conversation(
        ctx,
        org_id=tenant.org.id,
        conversation_id=conversation,
        ending=endings.CLIENT_CLOSED,
        measured=Outcome(latencies_ms=(640, 590), interruptions_count=1, turns=turns),
    )
    shown = [turn.to_json() for turn in turns]

    analysis = (await conversation_json(tenant, conversation))["analysis"]
    assert analysis == {
        "id": conversation,
        "latencies_ms": [640, 590],
        "interruptions_count": 1,
        "turns": shown,
    }
    assert shown[1] == {
        "item_id": None,
        "endpointing_ms": 380,
        "transcription_ms": 0,
        "model_first_token_ms": 88,
        "speech_first_audio_ms": 55,
        "total_ms": 590,
        "played_ms": None,
    }
    response = await tenant.client.get(f"/v1/conversations/{conversation}/analysis")
    assert response.json()["analysis"]["turns"] == shown


async def test_analysis_unknown_conversation_404(tenant: Tenant) -> None:
    response = await tenant.client.get("/v1/conversations/nope/analysis")
    assert_error(response, 404, "conversation_not_found")
