"""Events written in the transaction of each change (API.md section 14): which changes
write which events, with `data` as the API shows the records; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from parley.api.analysis_schemas import EvaluationOut, ExtractionOut
from parley.api.convert import conversation_out
from parley.api.schemas import AgentOut
from parley.records import (
    OPERATOR,
    AgentPatch,
    AgentRef,
    CallInfo,
    Conversation,
    ConversationItem,
    Evaluation,
    Extraction,
    Outcome,
    TemplateVariable,
    ToolCall,
)
from parley.services import Context, agents, conversations, endings, instances
from parley.services.context import Instance
from parley.services.event_payloads import (
    agent_json,
    conversation_json,
    evaluation_json,
    extraction_json,
)
from parley.services.webhook_delivery import claim
from tests.factories import agent_record, make_agent, make_org
from tests.services.webhook_helpers import local_context, make_webhook

pytestmark = pytest.mark.anyio
URL = "http://127.0.0.1:9/never-called"
"""No worker runs in these tests: the deliveries are read from the outbox."""


@pytest.fixture
async def ctx(database_url: str) -> AsyncIterator[Context]:
    async with local_context(database_url, instance_id="events-test") as context:
        yield context


async def bodies(ctx: Context) -> list[dict[str, Any]]:
    """Claim every due delivery and return the bodies, oldest first."""
    return [json.loads(due.body) for due in await claim(ctx, limit=100, per_webhook=100)]


async def test_agent_changes_write_their_events(ctx: Context) -> None:
    org = (await make_org(ctx)).org
    await make_webhook(ctx, org.id, URL)
    agent = await make_agent(ctx, org.id)
    ref: dict[str, Any] = {"org_id": org.id, "ref": agent.id, "project": None, "actor": OPERATOR}
    await agents.update_agent(ctx, patch=AgentPatch(system_prompt="Be kind."), **ref)
    await agents.disable_agent(ctx, **ref)
    await agents.disable_agent(ctx, **ref)  # already disabled: no change, no event
    await agents.enable_agent(ctx, **ref)
    await agents.enable_agent(ctx, **ref)
    await agents.delete_agent(ctx, **ref)
    sent = await bodies(ctx)
    assert [body["event_type"] for body in sent] == [
        "agent.created",
        "agent.updated",
        "agent.disabled",
        "agent.enabled",
        "agent.deleted",
    ]
    assert [body["data"]["agent"]["is_disabled"] for body in sent] == [
        False,
        False,
        True,
        False,
        False,
    ]
    assert sent[1]["data"]["agent"]["system_prompt"] == "Be kind."
    assert all(body["id"].startswith("msg_") for body in sent)
    assert all(set(body) == {"id", "event_type", "created_at", "data"} for body in sent)


async def test_failed_change_writes_no_event(ctx: Context) -> None:
    org = (await make_org(ctx)).org
    agent = await make_agent(ctx, org.id)
    await make_webhook(ctx, org.id, URL)
    with pytest.raises(Exception, match="already exists"):
        await make_agent(ctx, org.id, name=agent.name)
    assert await bodies(ctx) == []


async def test_one_event_is_one_delivery_per_subscribed_enabled_webhook(ctx: Context) -> None:
    org = (await make_org(ctx)).org
    other = (await make_org(ctx)).org
    first = await make_webhook(ctx, org.id, URL)
    second = await make_webhook(ctx, org.id, URL + "2", ["agent.created"])
    await make_webhook(ctx, org.id, URL + "3", ["agent.deleted"])
    await make_webhook(ctx, other.id, URL + "4")
    await make_agent(ctx, org.id)
    claimed = await claim(ctx, limit=100)
    assert sorted(due.webhook_id for due in claimed) == sorted(
        [first.webhook.id, second.webhook.id]
    )
    assert len({due.id for due in claimed}) == 2
    data = [json.loads(due.body)["data"] for due in claimed]
    assert data[0] == data[1]


async def test_conversation_started_and_ended_events(ctx: Context) -> None:
    org = (await make_org(ctx)).org
    agent = await make_agent(ctx, org.id)
    await make_webhook(ctx, org.id, URL, ["conversation.started", "conversation.ended"])
    live, _ = await conversations.start_live(
        ctx,
        org_id=org.id,
        conversation_id=None,
        create_if_missing=False,
        agent=agent.id,
        project=None,
        end_user="u-1",
    )
    await conversations.add_item(
        ctx, org_id=org.id, conversation_id=live.id, role="user", text="Hello"
    )
    socket_end: dict[str, Any] = {"ending": endings.CLIENT_CLOSED, "measured": Outcome()}
    await endings.end_conversation(ctx, org_id=org.id, conversation_id=live.id, **socket_end)
    await endings.end_conversation(
        ctx, org_id=org.id, conversation_id=live.id, **socket_end
    )  # no 2nd event
    await conversations.end_conversation(
        ctx, org_id=org.id, conversation_id=live.id, actor=OPERATOR
    )
    started, ended = await bodies(ctx)
    assert started["event_type"] == "conversation.started"
    assert started["data"]["conversation"]["status"] == "live"
    assert started["data"]["call_info"] is None
    assert ended["event_type"] == "conversation.ended"
    shown = ended["data"]["conversation"]
    stored = await conversations.get_conversation(ctx, org_id=org.id, conversation_id=live.id)
    assert shown == conversation_out(stored).model_dump(mode="json")
    assert [item["text"] for item in shown["items"]] == ["Hello"]
    assert ended["data"]["call_info"] == shown["call_info"]


async def test_conversation_ended_by_the_api_once(ctx: Context) -> None:
    org = (await make_org(ctx)).org
    agent = await make_agent(ctx, org.id)
    await make_webhook(ctx, org.id, URL, ["conversation.ended"])
    created = await conversations.create_conversation(
        ctx, org_id=org.id, agent=agent.id, project=None, conversation_id=None
    )
    for _ in range(2):
        await conversations.end_conversation(
            ctx, org_id=org.id, conversation_id=created.id, actor=OPERATOR
        )
    (ended,) = await bodies(ctx)
    assert ended["data"]["conversation"]["status"] == "ended"


async def test_orphaned_conversation_ended_event(ctx: Context, database_url: str) -> None:
    org = (await make_org(ctx)).org
    agent = await make_agent(ctx, org.id)
    await make_webhook(ctx, org.id, URL, ["conversation.ended"])
    async with local_context(database_url, instance_id="gone") as gone:
        await instances.start(gone)
        live, _ = await conversations.start_live(
            gone,
            org_id=org.id,
            conversation_id=None,
            create_if_missing=False,
            agent=agent.id,
            project=None,
            end_user=None,
        )
    # "gone" never renews its lease: with a short lease it is stale at once.
    impatient = replace(ctx, instance=Instance(id=ctx.instance.id, lease_seconds=0.1))
    await asyncio.sleep(0.2)
    assert await instances.end_orphans(impatient) == 1
    (ended,) = await bodies(ctx)
    assert ended["event_type"] == "conversation.ended"
    assert ended["data"]["conversation"]["id"] == live.id
    assert ended["data"]["conversation"]["status"] == "ended"


def test_event_payloads_match_the_api_schemas() -> None:
    now = datetime(2026, 11, 25, 12, 0, 0, 123456, tzinfo=UTC)
    agent = agent_record(
        system_prompt="Hi {{name}}",
        phone_numbers=("+15551234567",),
        disabled_at=now,
        created_at=now,
        updated_at=now + timedelta(seconds=1),
        tools=("lookup",),
        template_variables={"name": TemplateVariable(default_value="you")},
        boosted_keywords=("Parley",),
        extraction_schemas=("Appointment details",),
        eval_prompts=("polite",),
    )
    assert agent_json(agent) == AgentOut.of(agent).model_dump(mode="json")
    call = ToolCall(
        id="tcall_1",
        tool_id="tool_" + "1" * 32,
        tool_name="lookup",
        parameters={"q": "x"},
        output={"ok": True},
        endpoint_url="https://tools.example.com",
        response_status_code=200,
        duration_ms=12,
    )
    for call_info in (None, CallInfo("+15550000001", "+15551234567", "CA123")):
        conversation = Conversation(
            id="conv_1",
            org_id=agent.org_id,
            agent=AgentRef(id=agent.id, name=agent.name),
            project=agent.project,
            status="ended",
            end_user="u",
            external_id="crm-1",
            started_at=now,
            ended_at=now + timedelta(seconds=3),
            created_at=now,
            items=(
                ConversationItem(role="user", text="Hi", created_at=now),
                ConversationItem(
                    role="assistant", text="Hello", created_at=now, tool_calls=(call,)
                ),
            ),
            template_variables={"name": "Ann"},
            call_info=call_info,
            summary="Ann said hi.",
        )
        assert conversation_json(conversation) == conversation_out(conversation).model_dump(
            mode="json"
        )


@pytest.mark.parametrize("schema_deleted", [False, True])
def test_event_payloads_of_the_work_after_a_call_match_the_api_schemas(
    schema_deleted: bool,
) -> None:
    now = datetime(2026, 12, 10, 12, 0, 0, 123456, tzinfo=UTC)
    extraction = Extraction(
        id="extr_" + "1" * 32,
        conversation_id="conv_1",
        schema_id="schema_" + "1" * 32,
        schema_name="Appointment details",
        result={"Date": None, "Guests": 4, "Copay": 1.5, "ok": True},
        created_at=now,
        schema_deleted=schema_deleted,
    )
    evaluation = Evaluation(
        id="eval_" + "1" * 32,
        conversation_id="conv_1",
        prompt_id="evalp_" + "1" * 32,
        prompt_name="polite",
        result="undecided",
        created_at=now,
    )
    assert extraction_json(extraction) == ExtractionOut.of(extraction).model_dump(
        mode="json", by_alias=True
    )
    assert evaluation_json(evaluation) == EvaluationOut.of(evaluation).model_dump(mode="json")
