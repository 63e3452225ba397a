"""What the assistant would say instead (API.md section 17): `conversation_items.replay`
and `responses.create`.

Rules:
1. The language model is asked as a live reply asks it (the system prompt, the history with
   its tool calls and outputs, the tools' definitions: engine `ChatCompletions.respond`),
   once per response wanted, concurrently: `num_responses` 1-5 (default 1). No model
   configured: 409 `no_language_model`; unreachable: 503; a refusal: 502.
2. No tool is run: each call comes back with its arguments as `request_body` (the JSON
   object the model wrote; null when that is not an object).
3. `conversation_items.replay`: an assistant item (400 `not_an_assistant_item` for the
   user's) of an ended conversation (409 `conversation_live`) that keeps its transcript
   (409 `no_transcript`); the history is every item before it, the system prompt the one
   given or else the agent's, with the conversation's template values, and the tools the
   agent's. Its agent deleted and no `system_prompt` given: 400.
4. `responses.create` (responses.py turns its body into a `ResponsesRequest`): the history
   and the tools as given; a built-in's call is an `action` (what a live conversation
   would have done), not a tool call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from parley import engine
from parley.db.repos import conversations as conversation_repo
from parley.errors import (
    ConversationItemNotFound,
    ConversationLive,
    NotAnAssistantItem,
    NoTranscript,
    ValidationFailed,
)
from parley.ids import looks_like_id
from parley.records import Conversation, ConversationItem, Status
from parley.services import agents, templates
from parley.services.context import Context
from parley.services.conversations import get_conversation
from parley.services.live.tools import definitions_of, resolve_tools, tool_id_of
from parley.services.model_answers import model_of

__all__ = [
    "MAX_RESPONSES",
    "Alternative",
    "ProposedCall",
    "generate",
    "replay_item",
]

MAX_RESPONSES: Final = 5
MAX_ANSWER_TOKENS: Final = 600


@dataclass(frozen=True, slots=True)
class ProposedCall:
    """A tool call the model would make (rule 2)."""

    call_id: str
    name: str
    tool_id: str
    request_body: dict[str, Any] | None
    endpoint_method: str | None = None
    endpoint_url: str | None = None


@dataclass(frozen=True, slots=True)
class Alternative:
    """One response: its text, the calls it would make, and (rule 4) its built-in's action."""

    text: str
    calls: tuple[ProposedCall, ...]
    action: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class OfferedTool:
    """A tool the model is offered, and what a call of it is reported as."""

    definition: engine.ToolDefinition
    tool_id: str
    endpoint_method: str | None = None
    endpoint_url: str | None = None


async def replay_item(
    ctx: Context,
    *,
    org_id: str,
    item_id: str,
    system_prompt: str | None,
    num_responses: int,
) -> list[Alternative]:
    """Ask the model again for an assistant item (rule 3)."""
    model_of(ctx)  # rule 1, before anything is read
    owner = None
    if looks_like_id(item_id, "item"):
        async with ctx.db.read() as session:
            owner = await conversation_repo.item_owner(session, org_id, item_id)
    if owner is None:
        raise ConversationItemNotFound()
    conversation = await get_conversation(ctx, org_id=org_id, conversation_id=owner)
    index = next((i for i, item in enumerate(conversation.items) if item.id == item_id), None)
    if index is None:  # deleted in between
        raise ConversationItemNotFound()
    if conversation.items[index].role != "assistant":
        raise NotAnAssistantItem()
    if conversation.status != Status.ENDED:
        raise ConversationLive("The conversation has not ended: only an ended one's items replay.")
    if conversation.zero_data_retention or conversation.transcripts_deleted_at is not None:
        raise NoTranscript()
    prompt, offered = await _agent_side(ctx, conversation, system_prompt)
    history = history_of(conversation.items[:index])
    return await generate(
        ctx, system_prompt=prompt, history=history, offered=offered, count=num_responses
    )


async def _agent_side(
    ctx: Context, conversation: Conversation, system_prompt: str | None
) -> tuple[str, list[OfferedTool]]:
    """The system prompt and the tools of a replay of `conversation` (rule 3)."""
    if conversation.agent is None or conversation.project is None:
        if system_prompt is None:
            raise ValidationFailed(
                "The conversation's agent is gone: give the system prompt to replay with.",
                param_errors={"system_prompt": "is required: the conversation has no agent"},
            )
        return system_prompt, []
    agent = await agents.get_agent(
        ctx, org_id=conversation.org_id, ref=conversation.agent.id, project=None
    )
    if system_prompt is None:
        defaults = {n: v.default_value for n, v in agent.template_variables.items()}
        system_prompt = templates.render(
            agent.system_prompt, values=conversation.template_variables, defaults=defaults
        )
    tools, built_ins = await resolve_tools(
        ctx, org_id=conversation.org_id, project_id=agent.project.id, items=agent.tools
    )
    offered = [
        OfferedTool(
            definition,
            tool_id_of(tool),
            getattr(tool, "endpoint_method", None),
            getattr(tool, "endpoint_url", None),
        )
        for tool, definition in zip(tools, definitions_of(tools, ()), strict=True)
    ]
    offered += [OfferedTool(d, d.name) for d in definitions_of((), built_ins)]
    return system_prompt, offered


def history_of(items: Sequence[ConversationItem]) -> list[engine.Turn]:
    """The stored items as the model's history: each assistant item's tool calls, then
    their outputs."""
    history: list[engine.Turn] = []
    for item in items:
        role: Literal["user", "assistant"] = "user" if item.role == "user" else "assistant"
        calls = tuple(
            engine.ToolCallPart(call.id, call.tool_name, json.dumps(call.parameters or {}))
            for call in item.tool_calls
        )
        history.append(engine.Turn(role=role, text=item.text, tool_calls=calls))
        history += [
            engine.Turn(role="tool", text=json.dumps(call.output), tool_call_id=call.id)
            for call in item.tool_calls
        ]
    return history


async def generate(
    ctx: Context,
    *,
    system_prompt: str,
    history: Sequence[engine.Turn],
    offered: Sequence[OfferedTool],
    count: int,
    actions: Mapping[str, str] | None = None,
) -> list[Alternative]:
    """Ask the model `count` times at once (rule 1); report each answer (rules 2 and 4:
    a call of a tool named in `actions` becomes that action)."""
    model = model_of(ctx)
    definitions = [tool.definition for tool in offered]
    answers = await asyncio.gather(
        *(
            model.respond(
                system_prompt=system_prompt,
                history=history,
                tools=definitions,
                max_tokens=MAX_ANSWER_TOKENS,
            )
            for _ in range(count)
        )
    )
    by_name = {tool.definition.name: tool for tool in offered}
    return [_alternative(answer, by_name, actions or {}) for answer in answers]


def _alternative(
    answer: engine.ModelAnswer, by_name: Mapping[str, OfferedTool], actions: Mapping[str, str]
) -> Alternative:
    calls: list[ProposedCall] = []
    action: dict[str, Any] | None = None
    for part in answer.tool_calls:
        arguments = _arguments(part.arguments)
        if part.name in actions and action is None:
            action = {"type": actions[part.name], **(arguments or {})}
            continue
        tool = by_name.get(part.name)
        calls.append(
            ProposedCall(
                call_id=part.id,
                name=part.name,
                tool_id=tool.tool_id if tool else part.name,
                request_body=arguments,
                endpoint_method=tool.endpoint_method if tool else None,
                endpoint_url=tool.endpoint_url if tool else None,
            )
        )
    return Alternative(text=answer.text, calls=tuple(calls), action=action)


def _arguments(raw: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw or "{}")
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def offered_inline(definitions: Sequence[engine.ToolDefinition]) -> list[OfferedTool]:
    """Tools given in a request (`responses.create`), reported by name."""
    return [OfferedTool(d, d.name) for d in definitions]
