"""The transcript page shows each assistant item's tool calls and the conversation's
template values (API.md sections 5 and 12)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI

from parley.records import Outcome, ToolCall
from parley.services import conversations, endings
from tests.types import MakeAgent, Tenant
from tests.web.helpers import Browser, text_of

pytestmark = pytest.mark.anyio


async def test_transcript_shows_tool_calls_under_their_item_and_template_values(
    app: FastAPI, tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    ctx = app.state.context
    agent = await make_agent(tenant)
    conversation = await conversations.create_conversation(
        ctx, org_id=tenant.org.id, agent=agent["id"], project=None, conversation_id="order-42"
    )
    calls = (
        ToolCall(
            id="call_1", tool_id="tool_x", tool_name="lookup_order",
            parameters={"order_id": "A-17"}, output={"status": "<b>shipped</b>"},
            endpoint_url="https://hooks.example.com/orders", response_status_code=200,
            duration_ms=412,
        ),
        ToolCall(
            id="call_2", tool_id="inline_show_map", tool_name="show_map",
            parameters={"city": "Berlin"}, output={"error": "timed out"}, duration_ms=5000,
            timed_out=True, error_message="no answer in 5000 ms",
        ),
    )  # fmt: skip
    await conversations.add_item(
        ctx, org_id=tenant.org.id, conversation_id=conversation.id, role="user",
        text="Where is order A-17?",
    )  # fmt: skip
    await conversations.add_item(
        ctx, org_id=tenant.org.id, conversation_id=conversation.id, role="assistant",
        text="It has shipped.", tool_calls=calls,
    )  # fmt: skip
    await conversations.set_template_variables(
        ctx, org_id=tenant.org.id, conversation_id=conversation.id,
        values={"customer_name": "Ada"},
    )  # fmt: skip
    await browser.sign_in(tenant.api_key)

    page = await browser.http.get(f"/dashboard/conversations/{conversation.id}")

    assert page.status_code == 200
    first = text_of(page.text, "tool-call-call_1")
    for shown in ["lookup_order", "hooks.example.com/orders", '"order_id": "A-17"',
                  "<b>shipped</b>", "200", "412 ms", "no"]:  # fmt: skip
        assert shown in first
    second = text_of(page.text, "tool-call-call_2")
    for shown in ["show_map", '"city": "Berlin"', '"error": "timed out"', "timed out",
                  "5000 ms", "no answer in 5000 ms"]:  # fmt: skip
        assert shown in second
    transcript = page.text[page.text.index('id="transcript"') :]
    assert transcript.index("It has shipped.") < transcript.index("tool-call-call_1")
    assert transcript.index("Where is order A-17?") < transcript.index("It has shipped.")
    assert "&lt;b&gt;shipped&lt;/b&gt;" in page.text  # output is escaped, never markup
    assert "customer_name" in text_of(page.text, "template-variables")
    assert "Ada" in text_of(page.text, "template-variables")


async def test_transcript_without_tool_calls_or_values_shows_none(
    app: FastAPI, tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    conversation = await conversations.create_conversation(
        app.state.context, org_id=tenant.org.id, agent=agent["id"], project=None,
        conversation_id=None,
    )  # fmt: skip
    await browser.sign_in(tenant.api_key)

    page = await browser.http.get(f"/dashboard/conversations/{conversation.id}")

    assert page.status_code == 200
    assert text_of(page.text, "template-variables") == "None used."
    assert "tool-calls" not in page.text


async def test_transcript_shows_outcome_ended_by_duration_latencies_interruptions(
    app: FastAPI, tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    """#20: the outcome of a conversation is shown on its transcript page."""
    ctx = app.state.context
    agent = await make_agent(tenant)
    await conversations.start_live(
        ctx, org_id=tenant.org.id, conversation_id="outcome-1", create_if_missing=True,
        agent=agent["id"], project=None, end_user=None,
    )  # fmt: skip
    await endings.end_conversation(
        ctx, org_id=tenant.org.id, conversation_id="outcome-1", ending=endings.ASSISTANT,
        measured=Outcome(latencies_ms=(312, 405), interruptions_count=2),
    )  # fmt: skip
    await browser.sign_in(tenant.api_key)

    page = await browser.http.get("/dashboard/conversations/outcome-1")

    assert page.status_code == 200
    assert text_of(page.text, "ended-by") == "assistant"
    assert text_of(page.text, "duration").endswith(" s")
    assert text_of(page.text, "latencies") == "312 ms, 405 ms"
    assert text_of(page.text, "interruptions") == "2"


async def test_transcript_shows_a_transfer_and_how_it_ended(
    app: FastAPI, tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    from parley.clock import utcnow
    from parley.db.repos import conversations as conversation_repo

    ctx = app.state.context
    agent = await make_agent(tenant)
    conversation = await conversations.create_conversation(
        ctx, org_id=tenant.org.id, agent=agent["id"], project=None, conversation_id="desk-1"
    )
    handed = ToolCall(
        id="call_t", tool_id="tool_desk", tool_name="front_desk", parameters={},
        output={"status": "transferring", "phone_number": "+14155550188"}, duration_ms=3,
    )  # fmt: skip
    await conversations.add_item(
        ctx, org_id=tenant.org.id, conversation_id=conversation.id, role="assistant",
        text="Putting you through now.", tool_calls=(handed,),
    )  # fmt: skip
    async with ctx.db.transaction() as session:
        state = await conversation_repo.find(session, tenant.org.id, "desk-1", for_update=True)
        assert state is not None
        transfer = {"state": "dialing", "attempt": 1, "phone_number": "+14155550188", "warm": True}
        await conversation_repo.set_transfer(session, state, transfer, at=utcnow(ctx.clock))
    await browser.sign_in(tenant.api_key)
    path = f"/dashboard/conversations/{conversation.id}"

    dialing = await browser.http.get(path)
    assert (
        text_of(dialing.text, "transfer")
        == "putting the call through to +14155550188 (dial 1) warm"
    )
    assert text_of(dialing.text, "handoff-call_t") == "Handed on: to +14155550188"
    await endings.end_conversation(
        ctx, org_id=tenant.org.id, conversation_id="desk-1", ending=endings.TRANSFERRED
    )
    ended = await browser.http.get(path)

    assert text_of(ended.text, "ended-by") == "transferred"
    assert text_of(ended.text, "transfer") == "transferred to +14155550188 warm"
