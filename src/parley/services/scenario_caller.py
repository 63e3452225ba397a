"""The caller of a test scenario (API.md section 19): what it says, and how it is heard.

- A scripted caller says each of its lines in turn, then hangs up.
- A goal-driven caller is played by the language model: given the goal and the
  conversation so far (the agent's words as the caller's `user`, its own as `assistant`),
  it answers with its next words or calls `hang_up`; after `max_turns` turns it hangs up.
- Its words are spoken by Parley's own synthesizer (engine/spoken.py) in a voice other than
  the agent's, in the format of the transport (`pcm_16000` on the socket, `mulaw_8000` on the
  phone path), and sent by a `Dialer` (composition/scenario_dialer.py) at real-time pace over the
  real socket: the agent hears them through its recognizer and turn-taking.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from parley import engine
from parley.errors import NoLanguageModel
from parley.records import Agent
from parley.services.context import LanguageModel
from parley.services.voices import spoken_language

__all__ = [
    "HANG_UP",
    "Call",
    "Caller",
    "Dialer",
    "GoalCaller",
    "ScriptedCaller",
    "Speech",
    "caller_of",
    "caller_voice",
]

HANG_UP: Final = engine.ToolDefinition(
    name="hang_up",
    description="End the call: the goal is reached, or cannot be reached.",
    parameters={"type": "object", "properties": {}},
)
GOAL_PROMPT: Final = (
    "You are a person phoning a business's voice agent, to test it. Your goal: {goal}\n"
    "Speak as that caller would: one or two short sentences a turn, plain words, no "
    "lists or markup. When the goal is reached, or clearly cannot be, call hang_up."
)


class Caller(Protocol):
    """Decides the caller's next words from the conversation heard so far."""

    async def next_line(self, heard: Sequence[tuple[str, str]]) -> str | None:
        """The next words to say (None: hang up); `heard` is (role, text), `agent` or
        `caller`, in order."""
        ...


class ScriptedCaller:
    """Says each line in turn, then hangs up."""

    def __init__(self, lines: Sequence[str]) -> None:
        self._lines = list(lines)
        self._said = 0

    async def next_line(self, heard: Sequence[tuple[str, str]]) -> str | None:
        del heard  # a script does not listen
        if self._said >= len(self._lines):
            return None
        self._said += 1
        return self._lines[self._said - 1]


class GoalCaller:
    """A caller played by the language model, for at most `max_turns` turns."""

    def __init__(self, model: LanguageModel, *, goal: str, max_turns: int) -> None:
        self._model = model
        self._prompt = GOAL_PROMPT.format(goal=goal)
        self._turns_left = max_turns

    async def next_line(self, heard: Sequence[tuple[str, str]]) -> str | None:
        if self._turns_left <= 0:
            return None
        self._turns_left -= 1
        history = [
            engine.Turn(role="user" if role == "agent" else "assistant", text=text)
            for role, text in heard
        ]
        if not history or history[-1].role != "user":
            history.append(engine.Turn(role="user", text="(The agent is waiting for you.)"))
        answer = await self._model.respond(
            system_prompt=self._prompt, history=history, tools=(HANG_UP,), max_tokens=200
        )
        if any(call.name == HANG_UP.name for call in answer.tool_calls):
            return None
        return answer.text.strip() or None


def caller_of(spec: Mapping[str, Any], model: LanguageModel | None) -> Caller:
    """The caller a scenario's `caller` describes; NoLanguageModel for a goal without one."""
    if "lines" in spec:
        return ScriptedCaller(spec["lines"])
    if model is None:
        raise NoLanguageModel("A goal-driven caller is played by the language model: none is set.")
    return GoalCaller(model, goal=spec["goal"], max_turns=int(spec["max_turns"]))


def caller_voice(
    synthesizer: engine.Synthesizer, agent_voice_id: str, *, language: str = "en"
) -> str:
    """A voice of the synthesizer other than the agent's that speaks `language` (the
    agent's, whose language the caller speaks): an English line read by a German voice is
    not a caller the agent can understand. The agent's own voice when there is no other."""
    agent_voice = synthesizer.resolve_voice(agent_voice_id) or synthesizer.default_voice
    others = [
        voice
        for voice in synthesizer.voices()
        if voice != agent_voice and spoken_language(synthesizer, voice) == language
    ]
    return others[0] if others else agent_voice


class Speech:
    """The caller's words as audio in one wire format, in one voice."""

    def __init__(
        self, synthesizer: engine.Synthesizer, *, voice: str, output_format: engine.AudioFormat
    ) -> None:
        self._synthesizer = synthesizer
        self._voice = voice
        self.output_format = output_format

    async def render(self, text: str) -> bytes:
        """`text` spoken whole."""
        parts = engine.spoken(
            self._synthesizer,
            engine.sentences_of(text),
            voice=self._voice,
            speed=1.0,
            output_format=self.output_format,
        )
        return b"".join([part async for part in parts])


@dataclass(frozen=True, slots=True)
class Call:
    """One test call for a Dialer: where to dial, what to send first, who speaks."""

    url: str
    """The socket's URL, its credential in the query string."""
    transport: str
    """`websocket` (the conversation socket) or `phone` (the Twilio media socket)."""
    opening: Mapping[str, Any]
    """The `config` frame (websocket) or the stream's `start` parameters (phone)."""
    caller: Caller
    speak: Callable[[str], Awaitable[bytes]]
    """The caller's words as audio in the transport's format."""
    conversation_id: str
    welcome_expected: bool = True
    """The agent may speak first: the caller waits for its welcome, or for a moment of
    quiet, before its first words. False: the agent has no welcome, the caller speaks at
    once."""
    max_seconds: float = 300.0
    heard: list[tuple[str, str]] = field(default_factory=list)
    """What was said, (`agent` | `caller`, text): filled in by the Dialer."""


class Dialer(Protocol):
    """Holds one test call over a real socket (composition/scenario_dialer.py)."""

    async def dial(self, call: Call) -> None:
        """Open the socket, play the call out, hang up (or be hung up on); return when the
        socket is closed."""
        ...


def may_greet(agent: Agent) -> bool:
    """Whether the agent may speak first (the caller then waits for it): a welcome message,
    one the model writes, or a configuration endpoint that may give one."""
    return (
        agent.welcome_message is not None
        or agent.delivery.generate_welcome_message
        or agent.configuration_endpoint is not None
    )
