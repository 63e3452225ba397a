"""What the live session stores (API.md sections 5 and 12): items with tool calls, late
outputs, template values, the project object; and the tools a conversation may call."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from parley.errors import ConversationNotFound, NotFound, UnknownTool
from parley.records import ProjectRef, ToolCall
from parley.services import Context, conversations
from parley.services.tools import tools_for_conversation
from tests.factories import make_agent, make_org, make_tool

pytestmark = pytest.mark.anyio


def call(call_id: str = "call_1", **fields: object) -> ToolCall:
    values: dict[str, object] = {
        "id": call_id,
        "tool_id": "tool_x",
        "tool_name": "lookup",
        "parameters": {"q": "rain"},
        "output": {"status": "started"},
    }
    values.update(fields)
    return ToolCall(**values)  # type: ignore[arg-type]


async def new_conversation(ctx: Context) -> tuple[str, str, ProjectRef]:
    org = (await make_org(ctx)).org
    agent = await make_agent(ctx, org.id)
    created = await conversations.create_conversation(
        ctx, org_id=org.id, agent=agent.id, project=None, conversation_id=None
    )
    assert created.project == agent.project
    return org.id, created.id, agent.project


async def test_add_item_stores_tool_calls_even_with_empty_text(ctx: Context) -> None:
    org_id, conversation_id, _ = await new_conversation(ctx)
    made = call(endpoint_url="https://x.example.com", response_status_code=200, duration_ms=12)

    await conversations.add_item(
        ctx,
        org_id=org_id,
        conversation_id=conversation_id,
        role="assistant",
        text="",
        tool_calls=[made],
    )

    stored = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    assert [(i.role, i.text, i.tool_calls) for i in stored.items] == [("assistant", "", (made,))]


async def test_update_tool_call_output_replaces_the_stored_call(ctx: Context) -> None:
    org_id, conversation_id, _ = await new_conversation(ctx)
    await conversations.add_item(
        ctx,
        org_id=org_id,
        conversation_id=conversation_id,
        role="assistant",
        text="One moment.",
        tool_calls=[call("call_1"), call("call_2")],
    )
    await conversations.add_item(
        ctx, org_id=org_id, conversation_id=conversation_id, role="user", text="Thanks."
    )
    finished = call("call_2", output={"rain": False}, duration_ms=900)

    await conversations.update_tool_call_output(
        ctx, org_id=org_id, conversation_id=conversation_id, tool_call=finished
    )

    stored = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    assert stored.items[0].tool_calls == (call("call_1"), finished)
    assert stored.items[1].tool_calls == ()


async def test_update_tool_call_output_unknown_call_not_found(ctx: Context) -> None:
    org_id, conversation_id, _ = await new_conversation(ctx)
    with pytest.raises(NotFound):
        await conversations.update_tool_call_output(
            ctx, org_id=org_id, conversation_id=conversation_id, tool_call=call("call_9")
        )


async def test_set_template_variables_shows_on_the_conversation(ctx: Context) -> None:
    org_id, conversation_id, project = await new_conversation(ctx)

    await conversations.set_template_variables(
        ctx, org_id=org_id, conversation_id=conversation_id, values={"name": "Ada"}
    )

    stored = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    assert stored.template_variables == {"name": "Ada"}
    assert stored.project == project
    listed = await conversations.list_conversations(
        ctx, org_id=org_id, project=project.id, agent=None, only_ids=None, cursor=None, limit=10
    )
    assert [c.template_variables for c in listed.items] == [{"name": "Ada"}]


async def test_set_template_variables_unknown_conversation_not_found(ctx: Context) -> None:
    org_id, _, _ = await new_conversation(ctx)
    with pytest.raises(ConversationNotFound):
        await conversations.set_template_variables(
            ctx, org_id=org_id, conversation_id="nope", values={}
        )


async def test_duration_ms_from_start_to_end(ctx: Context) -> None:
    org_id, conversation_id, _ = await new_conversation(ctx)
    pending = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    assert pending.duration_ms is None
    started = pending.created_at
    ended = replace(
        pending, started_at=started, ended_at=started + timedelta(seconds=2, milliseconds=5)
    )
    assert ended.duration_ms == 2005


async def test_tools_for_conversation_unseals_and_refuses_unknown(ctx: Context) -> None:
    org = (await make_org(ctx)).org
    issued = await make_tool(ctx, org.id, name="lookup")
    other = (await make_org(ctx)).org
    await make_tool(ctx, other.id, name="theirs")

    found = await tools_for_conversation(
        ctx,
        org_id=org.id,
        project_id=issued.tool.project.id,
        names=["natural_conversation_ending", "lookup"],
    )

    assert [t.name for t in found] == ["lookup"]
    assert found[0].signing_secret == issued.signing_secret
    with pytest.raises(UnknownTool):
        await tools_for_conversation(
            ctx, org_id=org.id, project_id=issued.tool.project.id, names=["theirs"]
        )
