"""Tools the language model may call during a conversation (API.md section 12), engine side.

The engine knows tools only as definitions (a name, a description, a JSON Schema) and a
runner handed to it per conversation: it never knows whether a tool is a webhook, a
client-side tool or a phone call's refusal. The conversation session (services/live) builds
the definitions from the agent's tools and implements the runner.

The loop, per user turn: the model streams words and tool calls; the words are spoken first;
each call's arguments are checked against its schema (an invalid call gets an error output,
never a crash); a `sync` call's output goes back to the model, which is asked again (at most
MAX_TOOL_ROUNDS rounds, then once more without tools so the turn ends in words); an `async`
call answers `{"status": "started"}` at once and its real output replaces that in the history
when it arrives. `natural_conversation_ending` ends the conversation after the sentence being
spoken, unless that reply was interrupted. `keypad_input` presses keys after what is being
said (KeypadPressed: DTMF tones on a call, a `dtmf` frame on the socket; the model is told
KEYPAD_DONE and asked again); `choose_not_to_respond` ends the reply in silence (no more
words, AssistantChoseNotToRespond). A runner that answers a HandOff (a transfer) ends the
reply after its words: AssistantHandedOff, and the socket layer hands the conversation on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

MAX_TOOL_ROUNDS = 5
"""Tool rounds per user turn; after the last, the model is asked once more without tools."""

HOLDING_LINE_AFTER_S = 1.5
"""A sync tool silent this long (with nothing being spoken) gets a holding line."""

END_CONVERSATION_TOOL = "natural_conversation_ending"
"""The built-in tool: the model may end the conversation (API.md section 12)."""

KEYPAD_TOOL = "keypad_input"
"""The built-in tool: the model presses phone keys, `digits` of 0-9 * # (API.md section 15)."""

SILENCE_TOOL = "choose_not_to_respond"
"""The built-in tool: the model stays silent for this turn (API.md section 15)."""

BUILT_IN_TOOL_NAMES = (END_CONVERSATION_TOOL, KEYPAD_TOOL, SILENCE_TOOL)
"""The tools the engine handles itself; an agent may list each by name."""

KEYPAD_DONE: Mapping[str, Any] = {"success": True}
"""What the model is told for a `keypad_input` call (and a `choose_not_to_respond` one)."""

ASYNC_STARTED: Mapping[str, Any] = {"status": "started"}
"""What the model is told at once for an `async` tool."""


@dataclass(frozen=True)
class ToolDefinition:
    """A tool the model may call in one conversation, as the model sees it."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """A JSON Schema object: what the arguments are checked against."""
    execution_mode: Literal["sync", "async"] = "sync"
    require_speech_before_tool_call: bool = False


@dataclass(frozen=True)
class HandOff:
    """What a runner answers for a call that hands the conversation on (a transfer, API.md
    section 15): the model hears `output`; the reply ends after the words already said (the
    model is not asked again), and AssistantHandedOff follows AssistantFinishedSpeaking."""

    output: Mapping[str, Any]


@dataclass(frozen=True)
class ToolInvocation:
    """One call the model made, its arguments parsed and checked against the schema."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


class ToolRunner(Protocol):
    """Runs the calls of one conversation; implemented by the conversation session."""

    async def run(self, call: ToolInvocation) -> Any:
        """Run one call and return its output (a JSON value), or a HandOff.

        A tool that fails (an endpoint down, a client that does not answer in time) is an
        output such as `{"error": "timed out"}`, never an exception: the conversation goes on.
        """
        ...


class NoTools:
    """The runner of a conversation without tools: every call is an error output."""

    async def run(self, call: ToolInvocation) -> Any:
        """Answer that no such tool exists."""
        return {"error": f"unknown tool {call.name!r}"}
