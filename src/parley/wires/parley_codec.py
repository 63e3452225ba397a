"""Parley's own socket as a codec: JSON text frames (API.md section 8; frames.py).

The frames are byte for byte what the socket has always carried: compact JSON
(`separators=(",", ":")`, ASCII-escaped), one object per text frame. A binary frame is
refused with `validation_error` and the socket stays open.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from parley.errors import ValidationFailed
from parley.services.live import codec
from parley.wires import frames


class ParleyCodec:
    """The Parley conversation socket's frames <-> the session's events."""

    client_tools = True
    """The client runs WebSocket tools (`tool_call` -> `tool_call_output`)."""
    playback_pending = False
    """The client plays what it gets; the engine paces the audio, nothing is acknowledged."""

    def decode(self, data: codec.Frame) -> Sequence[codec.Inbound]:
        """Return the one event a text frame carries; raise a request error otherwise."""
        if isinstance(data, bytes):
            raise ValidationFailed(param_errors={"message": "send JSON text frames"})
        return (_inbound(frames.parse_frame(data)),)

    def encode(self, message: codec.Outbound) -> Sequence[codec.Frame]:
        """Return the JSON text frame of a message (none for `Closing`)."""
        found = frames.server_message(message)
        return () if found is None else (json.dumps(found, separators=(",", ":")),)


def _inbound(frame: frames.ClientFrame) -> codec.Inbound:
    match frame:
        case frames.Configure():
            return _configure(frame)
        case frames.FeedAudio():
            return codec.AudioIn(frame.pcm())
        case frames.Say(text=text):
            return codec.Say(text)
        case frames.GenerateReply(user_message=user, system_message=system):
            return codec.GenerateReply(user_message=user, system_message=system)
        case frames.SetExternalId(external_id=external_id):
            return codec.SetExternalId(external_id)
        case frames.UpdateSystemPrompt(system_prompt=prompt):
            return codec.UpdateSystemPrompt(prompt)
        case frames.Mute(type="mute"):
            return codec.Mute()
        case frames.Mute():
            return codec.Unmute()
        case frames.ToolCallOutput(tool_call_id=call_id, output=output):
            return codec.ToolCallOutput(call_id, output)
        case frames.UpdateToolsSubset(tools=items):
            return codec.UpdateToolsSubset(tuple(_tool_item(item) for item in items))
        case frames.Reset(config=options):
            return codec.Reset(_configure(options))
        case frames.AddSystemMessage(system_message=text):
            return codec.AddSystemMessage(text)


def _configure(frame: frames.Configure) -> codec.Configure:
    return codec.Configure(
        agent=frame.agent,
        project=frame.project,
        input_format=frame.input_format,
        output_format=frame.output_format,
        system_prompt=frame.system_prompt,
        welcome_message=frame.welcome_message,
        voice_id=frame.voice_id,
        tools=None if frame.tools is None else tuple(_tool_item(item) for item in frame.tools),
        template_variables=(
            None if frame.template_variables is None else dict(frame.template_variables)
        ),
        data_retention_policy=_retention(frame.data_retention_policy),
        enable_redaction=frame.enable_redaction,
        delivery=_delivery(frame),
        language=frame.language,
        default_language=frame.default_language,
        additional_languages=(
            None if frame.additional_languages is None else tuple(frame.additional_languages)
        ),
        multilingual_mode=frame.multilingual_mode,
        **_silence(frame),
        **_storage(frame),
    )


_DELIVERY = (
    "generate_welcome_message",
    "is_welcome_message_interruptible",
    "audio_speed",
    "timezone",
    "vad_min_silence_duration_ms",
    "vad_threshold",
)
_NOT_NULL = frozenset(
    {"generate_welcome_message", "is_welcome_message_interruptible", "audio_speed"}
)


def _delivery(frame: frames.Configure) -> codec.DeliveryPatch:
    """The delivery members the frame sets; null is the default again for `timezone` and
    the VAD members, the agent's for the others (as if left out)."""
    sent = frame.model_fields_set
    given: dict[str, Any] = {
        name: getattr(frame, name)
        for name in _DELIVERY
        if name in sent and not (name in _NOT_NULL and getattr(frame, name) is None)
    }
    entries = frame.pronunciation_dictionary
    if entries is not None:
        given["pronunciation_dictionary"] = tuple(
            codec.PronunciationEntry(entry.word, entry.pronunciation) for entry in entries
        )
    return codec.DeliveryPatch(**given)


def _retention(
    given: frames.ZeroRetentionFrame | frames.WindowedRetentionFrame | None,
) -> codec.RetentionPolicy | None:
    if given is None:
        return None
    if isinstance(given, frames.ZeroRetentionFrame):
        return codec.RetentionPolicy(zero_data_retention=True)
    return codec.RetentionPolicy(
        transcripts_hours=given.transcripts.delete_after_hours,
        audio_hours=given.audio_recordings.delete_after_hours,
    )


def _silence(frame: frames.Configure) -> dict[str, Any]:
    """The silence options the frame names (null: off), leaving out the omitted ones."""
    names = ("no_input_poke_sec", "no_input_end_conversation_sec", "no_input_poke_text")
    given = {name: getattr(frame, name) for name in names if name in frame.model_fields_set}
    if given.get("no_input_poke_text", "") is None:
        del given["no_input_poke_text"]  # null text: the agent's
    return given


def _storage(frame: frames.Configure) -> dict[str, Any]:
    """The external storage policy the frame names (null: none), unless it leaves it out."""
    if "external_storage_policy" not in frame.model_fields_set:
        return {}
    return {"external_storage_policy": frame.external_storage_policy}


def _tool_item(item: str | frames.InlineToolFrame) -> codec.ToolItem:
    if isinstance(item, str):
        return item
    function = item.tool_schema.function
    return codec.InlineTool(
        name=function.name,
        description=function.description,
        parameters=function.parameters,
        execution_mode=item.execution_mode or "sync",
        tool_call_output_timeout_ms=item.tool_call_output_timeout_ms,
        require_speech_before_tool_call=bool(item.require_speech_before_tool_call),
    )
