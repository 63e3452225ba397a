"""Wire models of the voices and of speech outside a conversation (API.md sections 4, 17):
the SDK's `Voice`, `VoicesGetResponse`, `TtsResponse` and its speech request."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from parley.api.schemas import AudioFormat, Input
from parley.services.speech import MAX_SPEED, MAX_TEXT_CHARS, MIN_SPEED
from parley.text import Label, Text


class VoiceOut(BaseModel):
    """An installed voice: the SDK's members (`id`, `name`, `description`, `audio_url`: a
    signed URL of its sample) and Parley's `language`."""

    id: str
    name: str
    language: str
    description: str | None
    audio_url: str


class VoiceList(BaseModel):
    voices: list[VoiceOut]


class VoiceEnvelope(BaseModel):
    voice: VoiceOut


class SpeechIn(Input):
    """`POST /v1/tts` and `POST /v1/tts/stream` (the SDK's `voices.preview`, `tts.stream`)."""

    text: Annotated[Text, StringConstraints(min_length=1, max_length=MAX_TEXT_CHARS)]
    model: Literal["merritt"] | None = Field(
        default=None, description="The SDK's model name; Parley has one synthesizer."
    )
    speed: Annotated[float, Field(ge=MIN_SPEED, le=MAX_SPEED)] | None = None
    voice_id: Annotated[Label, StringConstraints(min_length=1, max_length=100)] | None = None
    output_format: AudioFormat | None = None
    languages: (
        Annotated[
            list[Annotated[Label, StringConstraints(min_length=2, max_length=8)]],
            Field(max_length=60),
        ]
        | None
    ) = None


class SpeechOut(BaseModel):
    """The preview: `audio` is a base64 WAV file holding the requested `output_format`."""

    audio: str
