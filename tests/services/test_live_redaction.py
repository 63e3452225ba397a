"""Redaction wired into the conversation (API.md section 16, "Redaction"): what a session
with `enable_redaction` stores (items, the user's and the agent's words, tool call records)
and sends out (`conversation.ended`) holds tags where personal data was; the engine, the
tool and the client still get the words as heard. `is_redacted` says so.

LiveSession runs on a memory socket with a scripted engine (tests/services/
test_live_session.py), on the test's own database so the webhook outbox can be read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from parley import engine
from parley.engine.replies.completions import ChatCompletions
from parley.recordings.directory import DirectoryStore
from parley.records import OPERATOR, AgentPatch, ExtractionField, ExtractionSchemaSpec, ToolCall
from parley.services import Context, agents, conversations, extraction_schemas, post_call
from parley.services.event_payloads import conversation_json
from parley.services.live.redacting import redact_json, redact_tool_call
from parley.services.webhook_delivery import claim
from tests.factories import make_agent, make_org, unique_name
from tests.llm_server import Round, running_chat_server
from tests.services.test_live_session import Live, start_sessions
from tests.services.webhook_helpers import local_context, make_webhook

pytestmark = pytest.mark.anyio
URL = "http://127.0.0.1:9/never-called"

SAID = "My number is four one five, five five five, two six seven one."
SAID_REDACTED = "My number is [PHONE_NUMBER]."
TYPED = "Charge card 4111 1111 1111 1111 please"
TYPED_REDACTED = "Charge card [CREDIT_CARD] please"
ANSWER = "I will call 415-555-2671 or write to jane.doe@example.com."
ANSWER_REDACTED = "I will call [PHONE_NUMBER] or write to [EMAIL]."


@pytest.fixture
async def ctx(database_url: str) -> AsyncIterator[Context]:
    async with local_context(database_url, instance_id=unique_name("redaction")) as context:
        yield context


async def spoken_turn(live: Live, *, user: str, agent: str) -> None:
    """The user's words heard, then the agent's answer said in full."""
    for event in (
        engine.InputText(user, "en"),
        engine.AssistantStartedSpeaking(),
        engine.AudioChunk(audio=b"\x00\x00", text=agent),
        engine.AssistantFinishedSpeaking(),
    ):
        live.engine.push(event)
    await live.socket.message("assistant_finished_speaking")


def words_of(value: Any, key: str = "") -> list[str]:
    """Every string of `value` but IDs (`id`, `*_id`) and times (`*_at`)."""
    if isinstance(value, dict):
        return [text for name, inner in value.items() for text in words_of(inner, name)]
    if isinstance(value, list):
        return [text for inner in value for text in words_of(inner, key)]
    if isinstance(value, str) and not (key == "id" or key.endswith(("_id", "_at"))):
        return [value]
    return []


async def ended_bodies(ctx: Context, conversation_id: str) -> list[dict[str, Any]]:
    bodies = [json.loads(due.body) for due in await claim(ctx, limit=100, per_webhook=100)]
    return [
        body
        for body in bodies
        if body["event_type"] == "conversation.ended"
        and body["data"]["conversation"]["id"] == conversation_id
    ]


async def stored_items(live: Live, conversation_id: str) -> list[tuple[str, str]]:
    found = await conversations.get_conversation(
        live.ctx, org_id=live.org.org.id, conversation_id=conversation_id
    )
    return [(item.role, item.text) for item in found.items]


async def until_items(live: Live, conversation_id: str, count: int) -> list[tuple[str, str]]:
    """Wait for `count` stored items: by the clock, not by polls (on a loaded machine a
    poll of PostgreSQL can take longer than the write it waits for)."""
    deadline = time.monotonic() + 20
    while len(items := await stored_items(live, conversation_id)) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {count} items after 20 s: {items}")
        await asyncio.sleep(0.01)
    return items


async def test_redaction_stores_user_and_agent_words_as_tags_live_side_gets_words(
    ctx: Context,
) -> None:
    async with start_sessions(ctx) as start:
        org = await make_org(ctx)
        await make_webhook(ctx, org.org.id, URL, ["conversation.ended"])
        agent = await make_agent(ctx, org.org.id)
        await agents.update_agent(
            ctx,
            org_id=org.org.id,
            ref=agent.id,
            project=None,
            patch=AgentPatch(enable_redaction=True),
            actor=OPERATOR,
        )
        live = await start(org=org, agent=agent.name)
        conversation_id = await live.configure()
        await spoken_turn(live, user=SAID, agent=ANSWER)
        live.socket.push({"type": "generate_reply", "user_message": TYPED})
        await until_items(live, conversation_id, 3)
        live.socket.push(None)
        await live.closed()
    assert await stored_items(live, conversation_id) == [
        ("user", SAID_REDACTED),
        ("assistant", ANSWER_REDACTED),
        ("user", TYPED_REDACTED),
    ]
    assert ("generate_reply", TYPED) in live.engine.calls  # the model gets the words
    sent = live.socket.messages()  # the live client too: it is the conversation
    assert {"type": "input_text", "text": SAID, "language": "en"} in sent
    (ended,) = await ended_bodies(ctx, conversation_id)
    shown = ended["data"]["conversation"]
    assert shown["is_redacted"] is True
    assert [item["text"] for item in shown["items"]] == [
        SAID_REDACTED,
        ANSWER_REDACTED,
        TYPED_REDACTED,
    ]
    said = " ".join(words_of(ended))  # not the IDs: a random one may hold "415"
    for kept in ("415", "2671", "4111", "jane.doe", "five five five"):
        assert kept not in said


@pytest.mark.parametrize(
    ("agent_redacts", "config_redacts", "redacted"),
    [(False, True, True), (True, False, False), (True, None, True), (False, None, False)],
    ids=["config-on", "config-off", "agent-on", "agent-off"],
)
async def test_redaction_config_option_overrides_the_agent_and_sets_is_redacted(
    ctx: Context, tmp_path: Path, agent_redacts: bool, config_redacts: bool | None, redacted: bool
) -> None:
    """The words' times are asked of the engine only for a recording's tone."""
    ctx = dataclasses.replace(ctx, recordings=DirectoryStore(tmp_path))
    org = await make_org(ctx)
    agent = await make_agent(ctx, org.org.id)
    await agents.update_agent(
        ctx,
        org_id=org.org.id,
        ref=agent.id,
        project=None,
        patch=AgentPatch(enable_redaction=agent_redacts),
        actor=OPERATOR,
    )
    config = {} if config_redacts is None else {"enable_redaction": config_redacts}
    async with start_sessions(ctx) as start:
        live = await start(org=org, agent=agent.name)
        conversation_id = await live.configure(**config)
        assert live.engine.config.word_timings is redacted
        await spoken_turn(live, user=SAID, agent="Noted.")
        await until_items(live, conversation_id, 2)
        live.socket.push(None)
        await live.closed()
    found = await conversations.get_conversation(
        ctx, org_id=org.org.id, conversation_id=conversation_id
    )
    assert found.is_redacted is redacted
    assert conversation_json(found)["is_redacted"] is redacted
    assert found.items[0].text == (SAID_REDACTED if redacted else SAID)


async def test_redaction_config_option_not_a_boolean_refused(ctx: Context) -> None:
    org = await make_org(ctx)
    agent = await make_agent(ctx, org.org.id)
    async with start_sessions(ctx) as start:
        live = await start(org=org, agent=agent.name)
        live.socket.push({"type": "config", "agent": agent.name, "enable_redaction": "yes"})
        error = await live.socket.message("error")
    assert error["error"]["code"] == "validation_error"
    assert list(error["param_errors"]) == ["enable_redaction"]


async def test_redaction_tool_call_records_stored_redacted_tool_gets_words(
    ctx: Context,
) -> None:
    org = await make_org(ctx)
    agent = await make_agent(ctx, org.org.id)
    inline = {
        "type": "custom_websocket",
        "tool_schema": {"type": "function", "function": {"name": "lookup"}},
    }
    arguments = {"phone": "four one five 555 2671", "card": 4111111111111111, "count": 2}
    output = {"customer": {"email": "jane.doe@example.com", "vip": True}, "notes": ["ok"]}
    async with start_sessions(ctx) as start:
        live = await start(org=org, agent=agent.name)
        conversation_id = await live.configure(tools=[inline], enable_redaction=True)
        runner = live.engine.tool_runner
        assert runner is not None
        call = asyncio.create_task(
            runner.run(engine.ToolInvocation(id="c1", name="lookup", arguments=arguments))
        )
        asked = await live.socket.message("tool_call")
        assert asked["parameters"] == arguments  # the client runs the call as made
        live.socket.push(
            {"type": "tool_call_output", "tool_call_id": asked["tool_call_id"], "output": output}
        )
        assert await call == output  # the model hears the output as given
        for event in (engine.AssistantStartedSpeaking(), engine.AssistantFinishedSpeaking()):
            live.engine.push(event)
        await until_items(live, conversation_id, 1)
        live.socket.push(None)
        await live.closed()
    found = await conversations.get_conversation(
        ctx, org_id=org.org.id, conversation_id=conversation_id
    )
    (stored,) = found.items[0].tool_calls
    assert stored.parameters == {"phone": "[PHONE_NUMBER]", "card": "[CREDIT_CARD]", "count": 2}
    assert stored.output == {"customer": {"email": "[EMAIL]", "vip": True}, "notes": ["ok"]}


def test_redaction_of_a_tool_call_record_covers_url_and_error_keeps_the_rest() -> None:
    call = ToolCall(
        id="call_1",
        tool_id="tool_1",
        tool_name="lookup",
        parameters=[{"to": "+1 415 555 2671"}, 3.5, None, "jane@example.com"],
        output={"error": "no account for 4111111111111111"},
        endpoint_url="https://crm.example.com/customers/4155552671",
        response_status_code=404,
        duration_ms=12,
        error_message="The endpoint answered HTTP 404 for 4155552671.",
    )
    kept = redact_tool_call(call)
    assert kept.parameters == [{"to": "[PHONE_NUMBER]"}, 3.5, None, "[EMAIL]"]
    assert kept.output == {"error": "no account for [CREDIT_CARD]"}
    assert kept.endpoint_url == "https://crm.example.com/customers/[PHONE_NUMBER]"
    assert kept.error_message == "The endpoint answered HTTP 404 for [PHONE_NUMBER]."
    assert (kept.id, kept.tool_name, kept.response_status_code, kept.duration_ms) == (
        "call_1",
        "lookup",
        404,
        12,
    )
    assert redact_json({"phone_number": True, "n": 7}) == {"phone_number": True, "n": 7}


async def test_redaction_the_work_after_the_call_asks_the_model_about_tags_not_words(
    ctx: Context,
) -> None:
    """The summary's and the extraction's requests read the stored transcript: the model
    sees `[PHONE_NUMBER]`, never the digits or the words the caller said them with."""

    with running_chat_server() as chat:
        model = ChatCompletions(base_url=chat.base_url, api_key="sk-test", model="m")
        asking = dataclasses.replace(ctx, language_model=model)
        try:
            async with start_sessions(asking) as start:
                org = await make_org(asking)
                spec = ExtractionSchemaSpec(
                    name="Callback",
                    prompt="The number to call back.",
                    fields=(ExtractionField(name="number", type="string"),),
                )
                await extraction_schemas.create_schema(
                    asking, org_id=org.org.id, project=None, spec=spec, actor=OPERATOR
                )
                agent = await make_agent(asking, org.org.id)
                patch = AgentPatch(enable_redaction=True, extraction_schemas=("Callback",))
                await agents.update_agent(
                    asking,
                    org_id=org.org.id,
                    ref=agent.id,
                    project=None,
                    patch=patch,
                    actor=OPERATOR,
                )
                live = await start(org=org, agent=agent.name)
                conversation_id = await live.configure()
                await spoken_turn(live, user=SAID, agent=ANSWER)
                await until_items(live, conversation_id, 2)
                chat.script.rounds.extend(
                    [Round(text=["A callback was asked for."]), Round(text=['{"number": null}'])]
                )
                live.socket.push(None)
                await live.closed()
            # The session's end starts the work after the call (post_call.later).
            for _ in range(500):
                if len(chat.requests) >= 2 and not asking.background:
                    break
                await asyncio.sleep(0.02)
            assert not await post_call.run(  # done already, by the ending instance
                asking, org_id=org.org.id, conversation_id=conversation_id
            )
        finally:
            await model.aclose()
    asked = [json.dumps(request.body["messages"]) for request in chat.requests]
    assert len(asked) == 2  # the summary, the extraction
    for request in asked:
        assert "[PHONE_NUMBER]" in request
        for kept in ("415", "2671", "five five five", "jane.doe"):
            assert kept not in request
