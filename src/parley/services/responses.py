"""`responses.create` (API.md section 17): the responses an assistant would give after a
conversation supplied in the request; stateless (nothing is stored) and no tool is run.

Rules (services/alternatives.py asks the model):
1. `input`: at least one item, in order; every assistant tool call is followed at once by
   the `tool_call_output` that carries its result (the SDK's rule), `tool_call_id`s are
   unique, an output names a call before it; an assistant item says something, calls
   tools or takes an action, never both of the last two. Else 400 naming the item.
2. `tool_definitions`: inline tools (a JSON Schema object or the SDK's flat list, checked as
   a WebSocket tool's are), names unique and none a built-in's.
3. `tools`: built-ins by name (or `{"type": "built_in", "name", "tool_config"}`):
   `natural_conversation_ending`, `keypad_input`, `choose_not_to_respond`; a call of one is
   the response's `action`. `web_search` and stored tools are 400 `not_supported` (define
   the tool inline).
4. `voice_id`, `default_language`, `additional_languages`, `phonic_model` are accepted and
   change nothing: Parley has one language model, which answers in the conversation's
   language; `project`, when given, must be a project of the organization (404).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

from parley import engine
from parley.db.repos import projects as project_repo
from parley.errors import NotSupported, ParleyError, ValidationFailed
from parley.services import tool_parameters
from parley.services.alternatives import Alternative, generate, offered_inline
from parley.services.context import Context
from parley.services.live.tools import BUILT_IN_DEFINITIONS
from parley.services.model_answers import model_of

__all__ = [
    "AssistantSaid",
    "InlineDefinition",
    "ProposedCallIn",
    "ResponsesRequest",
    "ToolOutput",
    "UserSaid",
    "create_responses",
]

ACTIONS: Final[Mapping[str, str]] = {
    engine.END_CONVERSATION_TOOL: "assistant_ended_conversation",
    engine.KEYPAD_TOOL: "dtmf",
    engine.SILENCE_TOOL: "assistant_chose_not_to_respond",
}
"""Rule 3: the built-ins, and the `action` type a call of each is."""


@dataclass(frozen=True, slots=True)
class UserSaid:
    text: str


@dataclass(frozen=True, slots=True)
class ProposedCallIn:
    """A tool call of an assistant item of `input`."""

    tool_call_id: str
    name: str
    request_body: Mapping[str, Any] | None = None
    query_params: Mapping[str, str | None] | None = None


@dataclass(frozen=True, slots=True)
class AssistantSaid:
    text: str
    tool_calls: tuple[ProposedCallIn, ...] = ()
    action: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A `tool_call_output` item: what the call gave (its members as sent)."""

    tool_call_id: str
    outcome: Mapping[str, Any]


InputItem = UserSaid | AssistantSaid | ToolOutput


@dataclass(frozen=True, slots=True)
class InlineDefinition:
    name: str
    description: str
    parameters: Any
    require_speech_before_tool_call: bool = True


@dataclass(frozen=True, slots=True)
class ResponsesRequest:
    system_prompt: str
    input: tuple[InputItem, ...]
    tool_definitions: tuple[InlineDefinition, ...] = ()
    tools: tuple[str, ...] = ()
    """Rule 3's names (a built-in object given by its name)."""
    project: str | None = None
    num_responses: int = 1
    ignored: Mapping[str, Any] = field(default_factory=dict)
    """Rule 4's members, as given (checked by their shape only)."""


async def create_responses(
    ctx: Context, *, org_id: str, request: ResponsesRequest
) -> list[Alternative]:
    """Return `request.num_responses` responses to `request.input` (see the module doc)."""
    model_of(ctx)
    history = _history(request.input)
    definitions = [*_inline(request), *_built_ins(request)]
    if request.project is not None:
        async with ctx.db.read() as session:
            await project_repo.resolve(session, org_id, request.project)
    return await generate(
        ctx,
        system_prompt=request.system_prompt,
        history=history,
        offered=offered_inline(definitions),
        count=request.num_responses,
        actions=ACTIONS,
    )


def _history(items: Sequence[InputItem]) -> list[engine.Turn]:
    """Rule 1's checks, and the items as the model's history."""
    history: list[engine.Turn] = []
    waiting: list[str] = []  # calls whose output must come next, in order
    seen: set[str] = set()
    for index, item in enumerate(items):
        where = f"input[{index}]"
        if isinstance(item, ToolOutput):
            if not waiting or waiting[0] != item.tool_call_id:
                _refuse(where, "must follow the assistant tool call it answers, in order")
            waiting.pop(0)
            history.append(
                engine.Turn(
                    role="tool", text=json.dumps(item.outcome), tool_call_id=item.tool_call_id
                )
            )
            continue
        if waiting:
            _refuse(where, f"the output of tool call {waiting[0]!r} must come first")
        if isinstance(item, UserSaid):
            history.append(engine.Turn(role="user", text=item.text))
            continue
        if item.tool_calls and item.action is not None:
            _refuse(where, "cannot carry both tool_calls and an action")
        if not (item.text or item.tool_calls or item.action is not None):
            _refuse(where, "must carry text, tool_calls or an action")
        for call in item.tool_calls:
            if call.tool_call_id in seen:
                _refuse(where, f"repeats tool_call_id {call.tool_call_id!r}")
            seen.add(call.tool_call_id)
            waiting.append(call.tool_call_id)
        calls = tuple(
            engine.ToolCallPart(call.tool_call_id, call.name, json.dumps(_arguments(call)))
            for call in item.tool_calls
        )
        history.append(engine.Turn(role="assistant", text=item.text, tool_calls=calls))
    if waiting:
        _refuse(f"input[{len(items)}]", f"the output of tool call {waiting[0]!r} is missing")
    return history


def _arguments(call: ProposedCallIn) -> dict[str, Any]:
    return {**(call.query_params or {}), **(call.request_body or {})}


def _inline(request: ResponsesRequest) -> list[engine.ToolDefinition]:
    """Rule 2."""
    found: list[engine.ToolDefinition] = []
    names: set[str] = set(request.tools)
    for index, tool in enumerate(request.tool_definitions):
        where = f"tool_definitions[{index}]"
        if tool.name in names or tool.name in BUILT_IN_DEFINITIONS:
            _refuse(where, f"the name {tool.name!r} is taken (a built-in, or given twice)")
        names.add(tool.name)
        try:
            tool_parameters.check_parameters(tool.parameters, webhook=False)
        except ParleyError as bad:
            _refuse(f"{where}.parameters", bad.message)
        found.append(
            engine.ToolDefinition(
                name=tool.name,
                description=tool.description,
                parameters=tool_parameters.model_schema(tool.parameters),
                require_speech_before_tool_call=tool.require_speech_before_tool_call,
            )
        )
    return found


def _built_ins(request: ResponsesRequest) -> list[engine.ToolDefinition]:
    """Rule 3."""
    if len(set(request.tools)) != len(request.tools):
        _refuse("tools", "must not repeat a tool")
    for name in request.tools:
        if name not in BUILT_IN_DEFINITIONS:
            raise NotSupported(
                f"The tool {name!r} cannot be referenced here: Parley's responses take the "
                "built-ins natural_conversation_ending, keypad_input and choose_not_to_respond "
                "by name; define any other tool inline in tool_definitions.",
                param_errors={"tools": f"{name!r} is not supported"},
            )
    return [BUILT_IN_DEFINITIONS[name] for name in request.tools]


def _refuse(where: str, message: str) -> NoReturn:
    raise ValidationFailed(param_errors={where: message})
