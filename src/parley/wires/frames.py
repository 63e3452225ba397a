"""The Parley conversation socket's frames (API.md section 8), defined once.

Client frames are strict pydantic models: `parse_frame` turns one text frame into one of
them, or raises a request error (the socket answers an `error` message and stays open).
`server_message` builds the JSON object of each server message from the session's Outbound
messages. Only ParleyCodec (parley_codec.py) uses this module: the session never sees a frame.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    TypeAdapter,
    ValidationError,
)

from parley import engine
from parley.clock import isoformat
from parley.errors import InvalidJson, InvalidRequest, ParleyError, ValidationFailed
from parley.services.live import codec
from parley.text import Label
from parley.text import Text as FreeText

Text = Annotated[FreeText, StringConstraints(max_length=20_000)]


class UnknownMessageType(InvalidRequest):
    code = "unknown_message_type"
    message = "Unknown message type."


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


ToolName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]{1,64}$")]
FunctionName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


class InlineFunction(_Frame):
    name: FunctionName
    description: Annotated[FreeText, StringConstraints(max_length=2_000)] = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None


class InlineToolSchema(_Frame):
    type: Literal["function"]
    function: InlineFunction


class InlineToolFrame(_Frame):
    """An inline WebSocket tool (API.md section 12): defined by the client, run by it."""

    type: Literal["custom_websocket"]
    tool_schema: InlineToolSchema
    execution_mode: Literal["sync", "async"] | None = None
    tool_call_output_timeout_ms: Annotated[int, Field(ge=1000, le=600_000)] | None = None
    require_speech_before_tool_call: bool | None = None


def _tool_item_kind(value: Any) -> str:
    return "name" if isinstance(value, str) else "inline"


ToolItem = Annotated[
    Annotated[ToolName, Tag("name")] | Annotated[InlineToolFrame, Tag("inline")],
    Discriminator(_tool_item_kind),
]
_TAGS = frozenset({"name", "inline"})
ToolList = Annotated[list[ToolItem], Field(max_length=64)]
TemplateValue = Annotated[FreeText, StringConstraints(max_length=2_000)]


class RetentionWindowFrame(_Frame):
    delete_after_hours: Annotated[int, Field(ge=0, le=87_600)] | None = None


class ZeroRetentionFrame(_Frame):
    zero_data_retention: Literal[True]


class WindowedRetentionFrame(_Frame):
    zero_data_retention: Literal[False] = False
    transcripts: RetentionWindowFrame = Field(default_factory=RetentionWindowFrame)
    audio_recordings: RetentionWindowFrame = Field(default_factory=RetentionWindowFrame)


class PronunciationFrame(_Frame):
    word: Annotated[FreeText, StringConstraints(max_length=100)]
    pronunciation: Annotated[FreeText, StringConstraints(max_length=200)]


LanguageTag = Annotated[Label, StringConstraints(pattern=r"^[a-z]{2,3}$")]
"""A BCP 47 primary language tag in lower case (`en`, `de`)."""


class Configure(_Frame):
    type: Literal["config"]
    agent: Annotated[Label, StringConstraints(min_length=1, max_length=64)]
    project: Annotated[Label, StringConstraints(min_length=1, max_length=64)] | None = None
    input_format: Label | None = None
    output_format: Label | None = None
    system_prompt: Text | None = None
    welcome_message: Annotated[FreeText, StringConstraints(max_length=2_000)] | None = None
    voice_id: Annotated[Label, StringConstraints(min_length=1, max_length=100)] | None = None
    tools: ToolList | None = None
    # Silence (API.md section 15): omitted, the agent's; null, off.
    no_input_poke_sec: Annotated[int, Field(ge=1, le=600)] | None = None
    no_input_poke_text: (
        Annotated[FreeText, StringConstraints(min_length=1, max_length=2_000)] | None
    ) = None
    no_input_end_conversation_sec: Annotated[int, Field(ge=1, le=3600)] | None = None
    # What the conversation keeps (API.md section 16); omitted: the agent's policy.
    data_retention_policy: ZeroRetentionFrame | WindowedRetentionFrame | None = None
    # Where its recording goes (API.md section 16): omitted, the agent's policy; null, none.
    external_storage_policy: (
        Annotated[Label, StringConstraints(min_length=1, max_length=64)] | None
    ) = None
    # Personal data kept only as tags (API.md section 16); omitted: the agent's.
    enable_redaction: bool | None = None
    template_variables: (
        Annotated[
            dict[Annotated[Label, StringConstraints(max_length=64)], TemplateValue],
            Field(max_length=100),
        ]
        | None
    ) = None
    # The agent's delivery (API.md section 17): omitted, the agent's; the session checks
    # the values (services/delivery.py); null, for the three that take it, the default.
    generate_welcome_message: bool | None = None
    is_welcome_message_interruptible: bool | None = None
    audio_speed: float | None = None
    timezone: Annotated[Label, StringConstraints(max_length=64)] | None = None
    pronunciation_dictionary: Annotated[list[PronunciationFrame], Field(max_length=100)] | None = (
        None
    )
    vad_min_silence_duration_ms: int | None = None
    vad_threshold: float | None = None
    # The languages (API.md section 18): omitted, the agent's; the session checks them
    # (services/languages.py).
    language: LanguageTag | None = None
    default_language: LanguageTag | None = None
    additional_languages: Annotated[list[LanguageTag], Field(max_length=100)] | None = None
    multilingual_mode: Literal["auto", "initial", "request"] | None = None


class ResetOptions(Configure):
    """A `reset`'s `config`: a `config`'s members and checks (API.md section 17), its
    `agent` optional (omitted: the conversation's agent)."""

    type: Literal["config"] = "config"
    agent: Annotated[Label, StringConstraints(min_length=1, max_length=64)] | None = None  # type: ignore[assignment]


class Reset(_Frame):
    type: Literal["reset"]
    config: ResetOptions


class AddSystemMessage(_Frame):
    type: Literal["add_system_message"]
    system_message: Annotated[FreeText, StringConstraints(min_length=1, max_length=2_000)]


class FeedAudio(_Frame):
    type: Literal["audio_chunk"]
    audio: Annotated[str, StringConstraints(max_length=16_384)]

    def pcm(self) -> bytes:
        """The chunk's bytes; raise ValidationFailed unless `audio` is strict base64."""
        try:
            return base64.b64decode(self.audio, validate=True)
        except (binascii.Error, ValueError):
            raise ValidationFailed(param_errors={"audio": "must be base64"}) from None


class Say(_Frame):
    type: Literal["say"]
    text: Annotated[FreeText, StringConstraints(min_length=1, max_length=2_000)]


class GenerateReply(_Frame):
    type: Literal["generate_reply"]
    user_message: Annotated[FreeText, StringConstraints(max_length=2_000)] | None = None
    system_message: Annotated[FreeText, StringConstraints(max_length=2_000)] | None = None


class SetExternalId(_Frame):
    type: Literal["set_external_id"]
    external_id: Annotated[Label, StringConstraints(min_length=1, max_length=256)]


class UpdateSystemPrompt(_Frame):
    type: Literal["update_system_prompt"]
    system_prompt: Text


class Mute(_Frame):
    type: Literal["mute", "unmute"]


class ToolCallOutput(_Frame):
    type: Literal["tool_call_output"]
    tool_call_id: Annotated[Label, StringConstraints(min_length=1, max_length=256)]
    output: Any


class UpdateToolsSubset(_Frame):
    type: Literal["update_tools_subset"]
    tools: ToolList


ClientFrame = (
    Configure
    | FeedAudio
    | Say
    | GenerateReply
    | SetExternalId
    | UpdateSystemPrompt
    | Mute
    | ToolCallOutput
    | UpdateToolsSubset
    | Reset
    | AddSystemMessage
)
_frames: TypeAdapter[ClientFrame] = TypeAdapter(Annotated[ClientFrame, Field(discriminator="type")])
CLIENT_MESSAGE_TYPES = frozenset(
    {
        "config",
        "audio_chunk",
        "say",
        "generate_reply",
        "set_external_id",
        "update_system_prompt",
        "mute",
        "unmute",
        "tool_call_output",
        "update_tools_subset",
        "reset",
        "add_system_message",
    }
)


def parse_frame(text: str) -> ClientFrame:
    """Parse one client text frame strictly, or raise a request error."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidJson("The message is not valid JSON.") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise ValidationFailed(param_errors={"type": "every message is an object with a type"})
    if raw["type"] not in CLIENT_MESSAGE_TYPES:
        raise UnknownMessageType(f"Unknown message type: {raw['type'][:40]!r}.")
    try:
        frame: ClientFrame = _frames.validate_python(raw)
    except ValidationError as error:
        raise ValidationFailed(param_errors=_param_errors(error)) from None
    return frame


def _param_errors(error: ValidationError) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in error.errors():
        location = [
            str(p) for p in item.get("loc", ()) if p not in CLIENT_MESSAGE_TYPES and p not in _TAGS
        ]
        found.setdefault(".".join(location) or "message", str(item.get("msg", "is invalid")))
    return found


# --- server -> client -------------------------------------------------------------------


def server_message(message: codec.Outbound) -> dict[str, Any] | None:
    """The JSON object of a server message; None for one with no frame (`Closing`)."""
    match message:
        case codec.ConversationCreated(conversation_id=conversation_id):
            return {"type": "conversation_created", "conversation_id": conversation_id}
        case codec.ReadyToStart():
            return {"type": "ready_to_start_conversation"}
        case codec.RequestError(error=error):
            return error_message(error)
        case codec.ToolCallRequested(tool_call_id=call_id, tool_name=name, parameters=params):
            return {
                "type": "tool_call",
                "tool_call_id": call_id,
                "tool_name": name,
                "parameters": dict(params),
            }
        case codec.ToolCallProcessed():
            return tool_call_processed_message(message)
        case codec.Closing():
            return None
    return event_message(message)


def tool_call_processed_message(message: codec.ToolCallProcessed) -> dict[str, Any]:
    """`tool_call_output_processed` (API.md section 12): `endpoint_*`, `request_body`,
    `response_body` and `response_status_code` are null for a WebSocket tool; `parameters`
    and `output` are null for a webhook tool."""
    call, webhook = message.call, message.webhook
    return {
        "type": "tool_call_output_processed",
        "tool_call_id": call.id,
        "tool": {"id": call.tool_id, "name": call.tool_name},
        "parameters": call.parameters if webhook is None else None,
        "output": call.output if webhook is None else None,
        "endpoint_method": webhook.method if webhook else None,
        "endpoint_url": webhook.url if webhook else None,
        "endpoint_called_at": isoformat(webhook.called_at) if webhook else None,
        "request_body": webhook.request_body if webhook else None,
        "response_body": webhook.response_body if webhook else None,
        "response_status_code": webhook.response_status_code if webhook else None,
        "duration_ms": call.duration_ms,
        "timed_out": call.timed_out,
        "error_message": call.error_message,
        "conversation_item_role": "assistant",
    }


def error_message(error: ParleyError) -> dict[str, Any]:
    """An `error` message: `{"type": "error", "error": {"message", "code"}, "param_errors"?}`."""
    message: dict[str, Any] = {
        "type": "error",
        "error": {"message": error.message, "code": error.code},
    }
    if error.param_errors:
        message["param_errors"] = error.param_errors
    return message


def event_message(event: engine.EngineEvent) -> dict[str, Any]:
    """The server message for an engine event (docs/engine.md maps them one to one)."""
    match event:
        case engine.InputText(text=text, language=language):
            return {"type": "input_text", "text": text, "language": language}
        case engine.AudioChunk(audio=audio, text=text, timings=timings):
            chunk: dict[str, Any] = {
                "type": "audio_chunk",
                "audio": base64.b64encode(audio).decode(),
                "text": text,
            }
            if timings is not None:  # a reply's first audio (API.md section 18)
                chunk["timings"] = dict(timings)
            return chunk
        case engine.InterruptedResponse(text=text):
            return {"type": "interrupted_response", "text": text}
        case engine.KeypadPressed(digits=digits):
            return {"type": "dtmf", "digits": digits}
        case engine.ToolCallInterrupted(call_id=call_id, tool_name=tool_name):
            return {
                "type": "tool_call_interrupted",
                "tool_call_id": call_id,
                "tool_name": tool_name,
            }
        case engine.EngineWarning(code=code, message=message):
            return {"type": "warning", "warning": {"message": message, "code": code}}
    return {"type": _PLAIN[type(event)]}


_PLAIN: dict[type, str] = {
    engine.UserStartedSpeaking: "user_started_speaking",
    engine.UserFinishedSpeaking: "user_finished_speaking",
    engine.InputCancelled: "input_cancelled",
    engine.AssistantStartedSpeaking: "assistant_started_speaking",
    engine.AssistantFinishedSpeaking: "assistant_finished_speaking",
    engine.AssistantEndedConversation: "assistant_ended_conversation",
    engine.AssistantChoseNotToRespond: "assistant_chose_not_to_respond",
}
