"""The tools of one conversation, and the runner the engine calls (API.md section 12).

A conversation's tools are the agent's (or `config.tools`, or the last
`update_tools_subset`): custom tools of the agent's project by name, inline WebSocket tools,
and the built-ins `natural_conversation_ending`, `keypad_input` and `choose_not_to_respond`
(which the engine handles itself: BUILT_IN_DEFINITIONS). The
engine sees only their definitions; `ConversationTools.run` carries out a call:

- a webhook tool: one signed request (services/webhook_tools.py), never retried; in a test
  run's conversation a scenario's `tool_overrides` output answers in its place (API.md 19);
- a WebSocket tool: a ToolCallRequested (`tool_call`) to the client, whose ToolCallOutput
  (`tool_call_output`) must come within the tool's `tool_call_output_timeout_ms` (default
  5000), else the output is `{"error": "timed out"}`; a later answer gets a `tool_call_late`
  warning, an answer for an unknown or already answered call an `unknown_tool_call` error.
  With no client (a phone call: the codec's `client_tools` is False) the output is
  `{"error": "no client connected"}`;
- a transfer tool (handoffs.py): the model hears `{"status": "transferring", …}` and its
  reply ends; the session takes the hand-off (`take_hand_off`) once the words before it
  are said, and carries it out.

Messages leave as events through the session's codec (`emit`), never as frames. After each
call the client gets ToolCallProcessed (`tool_call_output_processed`), and the call joins the
ToolCalls stored on the assistant item of its turn (`take_calls`); an output that arrives
after that item was stored (an async tool, or a sync tool whose reply was interrupted)
updates the stored call (`conversations.update_tool_call_output`). With `redact` (API.md
section 16) the records are stored redacted (redacting.py); the model, the tool and the
client get the call as made.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from parley import engine
from parley.errors import InvalidRequest, ParleyError, ValidationFailed
from parley.records import Tool, ToolCall
from parley.services import conversations, tool_parameters
from parley.services import tools as tool_service
from parley.services.context import Context
from parley.services.live import codec, handoffs
from parley.services.live.codec import InlineTool
from parley.services.live.redacting import redact_tool_call
from parley.services.webhook_tools import call_webhook_tool

log = logging.getLogger(__name__)

Emit = Callable[[codec.Outbound], Awaitable[None]]
"""Sends one message to the wire (through the session's codec)."""

DEFAULT_OUTPUT_TIMEOUT_MS = 5000
NO_CLIENT: Mapping[str, str] = {"error": "no client connected"}
TIMED_OUT: Mapping[str, str] = {"error": "timed out"}
PENDING_OUTPUT: Mapping[str, str] = {"status": "started"}
"""A call's stored output while it runs (replaced when the output arrives)."""


class UnknownToolCall(InvalidRequest):
    code = "unknown_tool_call"
    message = "No tool call with this ID is waiting for an output."


ConversationTool = Tool | InlineTool


@dataclass
class _Call:
    """One call in flight or done, under the ID the outside world sees."""

    public_id: str
    record: ToolCall
    stored: bool = False
    done: bool = False


class ConversationTools:
    """The tools of one conversation and the ToolRunner its engine calls (see module doc)."""

    def __init__(
        self,
        ctx: Context,
        *,
        org_id: str,
        conversation_id: str,
        emit: Emit,
        has_client: bool = True,
        on_call: bool = False,
        redact: bool = False,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self._ctx = ctx
        self._overrides = dict(overrides or {})
        self._redact = redact
        self._org_id = org_id
        self._conversation_id = conversation_id
        self._emit = emit
        self._has_client = has_client
        self._on_call = on_call
        self._hand_off: handoffs.HandOffRequest | None = None
        self._tools: dict[str, ConversationTool] = {}
        self._built_ins: tuple[str, ...] = ()
        self._calls: dict[str, _Call] = {}
        """By the engine's call ID."""
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        """Client-side calls waiting for `tool_call_output`, by public ID."""
        self._late: set[str] = set()
        """Client-side calls that timed out: a later answer is only warned about."""
        self._order: list[str] = []

    # --- which tools --------------------------------------------------------------------

    def use(self, tools: Sequence[ConversationTool], *, built_ins: Sequence[str]) -> None:
        """Offer exactly these tools from now on, and these built-ins (by name)."""
        self._tools = {tool.name: tool for tool in tools}
        self._built_ins = tuple(built_ins)

    def definitions(self) -> tuple[engine.ToolDefinition, ...]:
        """The tools as the engine (and the model) sees them."""
        return definitions_of(list(self._tools.values()), self._built_ins)

    # --- the runner ---------------------------------------------------------------------

    async def run(self, call: engine.ToolInvocation) -> Any:
        """Carry out one call (never raises for the tool's own failure)."""
        tool = self._tools.get(call.name)
        public_id = f"call_{secrets.token_hex(12)}"
        tool_id = _tool_id(tool) if tool is not None else f"unknown_{call.name}"
        state = _Call(
            public_id,
            ToolCall(
                id=public_id,
                tool_id=tool_id,
                tool_name=call.name,
                parameters=dict(call.arguments),
                output=dict(PENDING_OUTPUT),
            ),
        )
        self._calls[call.id] = state
        self._order.append(call.id)
        try:
            if tool is None:
                output: Any = {"error": f"unknown tool {call.name!r}"}
                await self._finish(state, replace(state.record, output=output))
            elif isinstance(tool, Tool) and tool.name in self._overrides:
                output = self._overrides[tool.name]
                await self._finish(state, replace(state.record, output=output))
            elif isinstance(tool, Tool) and tool.type == "custom_webhook":
                output = await self._call_webhook(state, tool, call)
            elif isinstance(tool, Tool) and handoffs.is_transfer(tool):
                output = await self._transfer(state, tool, call)
            else:
                output = await self._call_client(state, tool, call)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not end the conversation: the model gets an error
            log.exception("tool %s failed", call.name)
            output = {"error": "the tool failed"}
            await self._finish(state, replace(state.record, output=output))
        return output

    def public_id(self, engine_call_id: str) -> str:
        """The ID the client knows for one of the engine's calls (itself if unknown)."""
        state = self._calls.get(engine_call_id)
        return state.public_id if state is not None else engine_call_id

    async def accept_output(self, tool_call_id: str, output: Any) -> None:
        """Take a client's `tool_call_output` (UnknownToolCall for an unknown ID)."""
        future = self._waiting.pop(tool_call_id, None)
        if future is not None and not future.done():
            future.set_result(output)
            return
        if tool_call_id in self._late:
            self._late.discard(tool_call_id)
            await self._emit(
                engine.EngineWarning(
                    code="tool_call_late",
                    message="The tool call had timed out; its output was not used.",
                )
            )
            return
        raise UnknownToolCall()

    def take_hand_off(self) -> handoffs.HandOffRequest | None:
        """The hand-off the last transfer call asked for (once), or None."""
        taken, self._hand_off = self._hand_off, None
        return taken

    def take_calls(self) -> tuple[ToolCall, ...]:
        """The calls not yet stored on an item, in order, as they are stored (redacted when
        the conversation is); marks them stored."""
        taken = []
        for engine_id in self._order:
            state = self._calls[engine_id]
            if not state.stored:
                state.stored = True
                taken.append(self._kept(state.record))
        return tuple(taken)

    def _kept(self, record: ToolCall) -> ToolCall:
        """A call's record as the conversation stores it."""
        return redact_tool_call(record) if self._redact else record

    # --- the two kinds of call ----------------------------------------------------------

    async def _call_webhook(self, state: _Call, tool: Tool, call: engine.ToolInvocation) -> Any:
        outcome = await call_webhook_tool(
            self._ctx,
            tool,
            call_id=state.public_id,
            conversation_id=self._conversation_id,
            arguments=call.arguments,
        )
        record = replace(
            state.record,
            output=outcome.output,
            endpoint_url=outcome.endpoint_url,
            response_status_code=outcome.response_status_code,
            duration_ms=outcome.duration_ms,
            timed_out=outcome.timed_out,
            error_message=outcome.error_message,
        )
        exchange = codec.WebhookExchange(
            method=outcome.endpoint_method,
            url=outcome.endpoint_url,
            called_at=outcome.endpoint_called_at,
            request_body=outcome.request_body,
            response_body=outcome.response_body,
            response_status_code=outcome.response_status_code,
        )
        await self._finish(state, record, webhook=exchange)
        return outcome.output

    async def _transfer(self, state: _Call, tool: Tool, call: engine.ToolInvocation) -> Any:
        request = await handoffs.requested(
            self._ctx, tool, call.arguments, org_id=self._org_id, on_call=self._on_call
        )
        if isinstance(request, handoffs.PhoneTransfer | handoffs.AgentTransfer):
            self._hand_off = request
            output = dict(handoffs.output_of(request))
            await self._finish(state, replace(state.record, output=output))
            return engine.HandOff(output)
        await self._finish(state, replace(state.record, output=dict(request)))
        return dict(request)

    async def _call_client(
        self, state: _Call, tool: ConversationTool, call: engine.ToolInvocation
    ) -> Any:
        started = self._ctx.clock.monotonic()
        timed_out = False
        if not self._has_client:
            output: Any = dict(NO_CLIENT)
        else:
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._waiting[state.public_id] = future
            await self._emit(
                codec.ToolCallRequested(state.public_id, call.name, dict(call.arguments))
            )
            timeout_ms = tool.tool_call_output_timeout_ms or DEFAULT_OUTPUT_TIMEOUT_MS
            try:
                output = await asyncio.wait_for(future, timeout_ms / 1000)
            except TimeoutError:
                self._waiting.pop(state.public_id, None)
                self._late.add(state.public_id)
                output, timed_out = dict(TIMED_OUT), True
        duration_ms = round((self._ctx.clock.monotonic() - started) * 1000)
        record = replace(
            state.record,
            output=output,
            duration_ms=duration_ms,
            timed_out=timed_out,
            error_message="timed out" if timed_out else None,
        )
        await self._finish(state, record)
        return output

    async def _finish(
        self, state: _Call, record: ToolCall, *, webhook: codec.WebhookExchange | None = None
    ) -> None:
        """Record the call's outcome, tell the client, update a call already stored."""
        state.record, state.done = record, True
        await self._emit(codec.ToolCallProcessed(record, webhook))
        if state.stored:
            try:
                await conversations.update_tool_call_output(
                    self._ctx,
                    org_id=self._org_id,
                    conversation_id=self._conversation_id,
                    tool_call=self._kept(record),
                )
            except ParleyError:
                log.warning("could not store the output of tool call %s", record.id)


ENDING_DEFINITION = engine.ToolDefinition(
    name=engine.END_CONVERSATION_TOOL,
    description=(
        "End the conversation when the user has said goodbye or the conversation has come to "
        "its natural end. Say your closing words first."
    ),
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
)

KEYPAD_DEFINITION = engine.ToolDefinition(
    name=engine.KEYPAD_TOOL,
    description=(
        "Press keys on the phone keypad, e.g. to choose an option of an automated phone menu "
        "(the keys are sent after what you are saying). `digits`: the keys in order, 0-9, * "
        "and #."
    ),
    parameters={
        "type": "object",
        "properties": {
            "digits": {
                "type": "string",
                "pattern": "^[0-9*#]{1,32}$",
                "description": "The keys to press in order: 1 to 32 of 0-9, * and #.",
            }
        },
        "required": ["digits"],
        "additionalProperties": False,
    },
)

SILENCE_DEFINITION = engine.ToolDefinition(
    name=engine.SILENCE_TOOL,
    description=(
        "Say nothing this turn: call this instead of answering when no answer is wanted "
        "(e.g. the user is talking to someone else, or asked you to wait)."
    ),
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
)

BUILT_IN_DEFINITIONS: Mapping[str, engine.ToolDefinition] = {
    tool.name: tool for tool in (ENDING_DEFINITION, KEYPAD_DEFINITION, SILENCE_DEFINITION)
}
"""The built-in tools as the model sees them, by name (engine.BUILT_IN_TOOL_NAMES)."""


def checked_inline_tool(tool: InlineTool) -> InlineTool:
    """The inline tool with the JSON Schema its model sees; ValidationFailed for parameters
    in neither accepted form (tool_parameters.py)."""
    tool_parameters.check_parameters(tool.parameters, webhook=False)
    return replace(tool, parameters=tool_parameters.model_schema(tool.parameters))


def definitions_of(
    tools: Sequence[ConversationTool], built_ins: Sequence[str]
) -> tuple[engine.ToolDefinition, ...]:
    """The tools and the built-ins (by name) as the model sees them: a conversation's, or a
    replay's (services/alternatives.py)."""
    found = [_definition(tool) for tool in tools]
    found += [BUILT_IN_DEFINITIONS[name] for name in built_ins]
    return tuple(found)


def tool_id_of(tool: ConversationTool) -> str:
    """The ID a call of `tool` names it by (an inline tool's: `inline_<name>`)."""
    return _tool_id(tool)


def _definition(tool: ConversationTool) -> engine.ToolDefinition:
    if isinstance(tool, Tool) and handoffs.is_transfer(tool):
        return handoffs.definition(tool)
    if isinstance(tool, InlineTool):
        parameters: Mapping[str, Any] = tool.parameters
    else:
        parameters = tool_parameters.model_schema(tool.parameters)
    return engine.ToolDefinition(
        name=tool.name,
        description=tool.description,
        parameters=parameters,
        execution_mode="async" if tool.execution_mode == "async" else "sync",
        require_speech_before_tool_call=tool.require_speech_before_tool_call,
    )


def _tool_id(tool: ConversationTool) -> str:
    return f"inline_{tool.name}" if isinstance(tool, InlineTool) else tool.id


async def resolve_tools(
    ctx: Context, *, org_id: str, project_id: str, items: Sequence[codec.ToolItem]
) -> tuple[list[ConversationTool], list[str]]:
    """Resolve a tool list (names and inline tools): the tools, and the built-ins named, in
    order. Raises UnknownTool (400 `unknown_tool`) for an unknown name, ValidationFailed for
    two tools of one name or an inline tool's bad parameters."""
    inline = [checked_inline_tool(item) for item in items if isinstance(item, InlineTool)]
    names = [item for item in items if isinstance(item, str)]
    custom = [name for name in names if name not in BUILT_IN_DEFINITIONS]
    built_ins = list(dict.fromkeys(name for name in names if name in BUILT_IN_DEFINITIONS))
    found: list[ConversationTool] = list(
        await tool_service.tools_for_conversation(
            ctx, org_id=org_id, project_id=project_id, names=custom
        )
        if custom
        else []
    )
    found += inline
    seen: set[str] = set()
    for tool in found:
        if tool.name in seen or tool.name in BUILT_IN_DEFINITIONS:
            raise ValidationFailed(param_errors={"tools": f"two tools are named {tool.name!r}"})
        seen.add(tool.name)
    return found, built_ins
