"""The seam between a conversation session and its wire (STYLE.md convention 21).

The session speaks events and never sees a frame. A codec turns one wire's frames into
`Inbound` events (`decode`) and the session's `Outbound` messages into frames (`encode`),
and owns that wire's quirks. The codecs live in `parley.wires`, which the session never
imports: `ParleyCodec` (wires/parley_codec.py) is Parley's own socket; a phone carrier's codec
(`TwilioCodec`, wires/twilio_codec.py) fits the same Protocol:

- `AudioIn` holds bytes in the session's input format: the codec undoes base64 and the like;
- a call is configured by `Configure(agent=None)`: the agent of the pending conversation its
  handshake names, in the formats the codec's wire carries;
- `Dtmf` is one entry the caller keyed (a user turn), `Mark` an acknowledgement that sent
  audio was played, `Hangup` the far end hanging up, `Interrupt` a barge-in without speech
  (a key pressed while the agent speaks);
- a codec that also implements `KnowsPlayback` decides the stored text of an interrupted
  reply (what its wire acknowledged as played), not the engine's clock;
- `encode` may answer one message with several frames (audio and its mark, a `clear` on
  barge-in) or none (a message the wire has no frame for, e.g. `Closing` on a wire that just
  closes);
- `playback_pending` is True while audio the wire sent is not yet acknowledged as played:
  an ending conversation closes only once it is False (bounded), so the caller hears the
  goodbye; `client_tools` is False on a wire with no client to run WebSocket tools (their
  output is then `{"error": "no client connected"}`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeAlias, runtime_checkable

from parley import engine
from parley.errors import ParleyError
from parley.records import UNSET, ToolCall, Unset
from parley.records import DeliveryPatch as DeliveryPatch  # for the wires, which see no records
from parley.records import PronunciationEntry as PronunciationEntry
from parley.records import RetentionPolicy as RetentionPolicy

Frame: TypeAlias = str | bytes
"""One WebSocket message: a text frame or a binary frame."""

MAX_FRAME_BYTES = 1024 * 1024
"""A frame over 1 MiB closes the socket with 1009, whatever the wire."""


# --- inbound: the wire -> the session --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InlineTool:
    """A WebSocket tool the client defines (API.md section 12), run by the client.

    `parameters` are as the client sent them: the session checks them (tools.py).
    """

    name: str
    description: str
    parameters: Any
    execution_mode: str = "sync"
    tool_call_output_timeout_ms: int | None = None
    require_speech_before_tool_call: bool = False


ToolItem: TypeAlias = str | InlineTool
"""A tool of the agent's project by name (or the built-in ending's name), or an inline tool."""


@dataclass(frozen=True, slots=True)
class Configure:
    """Start the conversation; every None field takes the agent's value.

    `agent` None: the agent of the pending conversation the handshake names (a phone call).
    """

    agent: str | None
    project: str | None = None
    input_format: str | None = None
    output_format: str | None = None
    system_prompt: str | None = None
    welcome_message: str | None = None
    voice_id: str | None = None
    tools: tuple[ToolItem, ...] | None = None
    template_variables: Mapping[str, str] | None = None
    no_input_poke_sec: int | Unset | None = UNSET
    """UNSET: the agent's; None: off (API.md section 15)."""
    no_input_poke_text: str | Unset = UNSET
    no_input_end_conversation_sec: int | Unset | None = UNSET
    wait_for_callee: bool = False
    """A call placed to someone: the welcome waits for the callee's first words or the
    carrier's verdict on who answered (callee.py; API.md section 15)."""
    voicemail_message: str | None = None
    """What such a call leaves on an answering machine (None: it hangs up at once)."""
    data_retention_policy: RetentionPolicy | None = None
    """What this conversation keeps (API.md section 16); None: its agent's policy."""
    external_storage_policy: str | Unset | None = UNSET
    """Where its recording goes (API.md section 16): a policy of the agent's project by
    name; UNSET: the agent's policy; None: no external storage."""
    enable_redaction: bool | None = None
    """Personal data kept only as tags (API.md section 16); None: its agent's setting."""
    delivery: DeliveryPatch = field(default_factory=DeliveryPatch)
    """The agent's delivery members this conversation sets (API.md section 17); the UNSET
    ones are the agent's."""
    language: str | None = None
    default_language: str | None = None
    """The conversation's default language (API.md section 18: `default_language` wins over
    its alias `language`); both None: the agent's."""
    additional_languages: tuple[str, ...] | None = None
    multilingual_mode: str | None = None
    resume_note: str | None = None
    """A caller back from a transfer that was not answered: the conversation goes on live,
    with its history, and the model gets this note (services/transfers.py rule 4)."""


@dataclass(frozen=True, slots=True)
class Reset:
    """Go on with new settings (API.md section 17): `config` is checked as a `config` is;
    its `agent` None means the conversation's agent (services/live/reset.py)."""

    config: Configure


@dataclass(frozen=True, slots=True)
class AddSystemMessage:
    """A system message joins the model's history where the conversation stands; no reply."""

    text: str


@dataclass(frozen=True, slots=True)
class AudioIn:
    """User audio, in the session's input format."""

    audio: bytes


@dataclass(frozen=True, slots=True)
class Say:
    text: str


@dataclass(frozen=True, slots=True)
class GenerateReply:
    """Reply now; `user_message` is the user's words (stored as a user item)."""

    user_message: str | None = None
    system_message: str | None = None


@dataclass(frozen=True, slots=True)
class SetExternalId:
    external_id: str


@dataclass(frozen=True, slots=True)
class UpdateSystemPrompt:
    system_prompt: str


@dataclass(frozen=True, slots=True)
class Mute:
    pass


@dataclass(frozen=True, slots=True)
class Unmute:
    pass


@dataclass(frozen=True, slots=True)
class ToolCallOutput:
    """The client's output for a WebSocket tool call it was sent."""

    tool_call_id: str
    output: Any


@dataclass(frozen=True, slots=True)
class UpdateToolsSubset:
    tools: tuple[ToolItem, ...]


@dataclass(frozen=True, slots=True)
class Dtmf:
    """Keys the caller pressed, as one entry: a user turn `DTMF: <digits>`."""

    digits: str


@dataclass(frozen=True, slots=True)
class Mark:
    """The wire acknowledges that the audio sent up to the mark `name` was played;
    `first_audio`: it is the mark after the first audio of a reply to a spoken turn (its
    `played_ms`, API.md section 18)."""

    name: str
    first_audio: bool = False


@dataclass(frozen=True, slots=True)
class Hangup:
    """The far end hung up: the conversation ends as when a client leaves."""


@dataclass(frozen=True, slots=True)
class Interrupt:
    """Stop the agent's speech as the user's speech would (a key pressed while it speaks)."""


Inbound: TypeAlias = (
    Configure
    | AudioIn
    | Say
    | GenerateReply
    | SetExternalId
    | UpdateSystemPrompt
    | Reset
    | AddSystemMessage
    | Mute
    | Unmute
    | ToolCallOutput
    | UpdateToolsSubset
    | Dtmf
    | Mark
    | Hangup
    | Interrupt
)


# --- outbound: the session -> the wire -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConversationCreated:
    conversation_id: str


@dataclass(frozen=True, slots=True)
class ReadyToStart:
    """The engine runs: audio is heard from now on."""


@dataclass(frozen=True, slots=True)
class RequestError:
    """An inbound frame or event was refused; the conversation goes on unless closed."""

    error: ParleyError


@dataclass(frozen=True, slots=True)
class ToolCallRequested:
    """Run a WebSocket tool: the client answers with a ToolCallOutput."""

    tool_call_id: str
    tool_name: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class WebhookExchange:
    """The request a webhook tool call made and what came back."""

    method: str
    url: str
    called_at: datetime
    request_body: Any
    response_body: Any
    response_status_code: int | None


@dataclass(frozen=True, slots=True)
class ToolCallProcessed:
    """A tool call is done: `call` as stored, and the webhook exchange for a webhook tool."""

    call: ToolCall
    webhook: WebhookExchange | None = None


@dataclass(frozen=True, slots=True)
class Closing:
    """The session closes the socket with this code next (the last message it encodes)."""

    code: int
    reason: str


Outbound: TypeAlias = (
    ConversationCreated
    | ReadyToStart
    | RequestError
    | ToolCallRequested
    | ToolCallProcessed
    | Closing
    | engine.EngineEvent
)
"""Engine events (docs/engine.md) go out as they are; warnings are `engine.EngineWarning`."""


class Codec(Protocol):
    """One wire protocol's frames <-> the session's events (see the module doc).

    One codec serves one socket and may keep state (a stream ID, marks in flight).
    """

    @property
    def client_tools(self) -> bool:
        """True when a client on the wire can run WebSocket tools."""
        ...

    @property
    def playback_pending(self) -> bool:
        """True while sent audio is not yet acknowledged as played (always False on a wire
        without acknowledgements)."""
        ...

    def decode(self, data: Frame) -> Sequence[Inbound]:
        """Return the events one frame carries (maybe none); raise a ParleyError (an
        InvalidRequest) for a malformed frame: the session answers it and reads on."""
        ...

    def encode(self, message: Outbound) -> Sequence[Frame]:
        """Return the frames that carry one message, in order (maybe none)."""
        ...


@runtime_checkable
class KnowsPlayback(Protocol):
    """A codec whose wire acknowledges playback (a phone carrier's marks) and so knows better
    than the engine's clock what the listener heard of an interrupted reply."""

    def heard(self, said: str) -> str:
        """Return what was played of the interrupted reply the engine says was heard as
        `said` (a word prefix of it): never more than `said`."""
        ...
