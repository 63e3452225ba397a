"""Speech outside a conversation (API.md section 17): a voice's sample, the voices preview
(`POST /v1/tts`) and the speech stream (`POST /v1/tts/stream`).

The rules: the text is 1 to `MAX_TEXT_CHARS` characters; `speed` is `MIN_SPEED` to
`MAX_SPEED` (1.0 when omitted); `voice_id` names an installed voice or one of its aliases
(the default voice when omitted; 400 `unknown_voice`); `languages`, when non-empty, must
include English, the one language the voices speak (400 `unsupported_language`); the
output format is one of the agents' audio formats (default `pcm_16000` for the stream,
`pcm_24000` for the preview and the samples: a person listens to those).

A voice's sample is `SAMPLE_TEXT` in that voice, a WAV rendered once per process and kept
in memory (`SpeechMaker.sample`). Its `audio_url` is signed, as a recording's is
(services/recordings.py): `GET /v1/voices/{id}/sample?expires=…&signature=…`, an
HMAC-SHA256 under a key derived from `PARLEY_SECRET_KEY` over the voice and the expiry,
valid `SAMPLE_URL_SECONDS` (the SDK's "expires in 7 days"). So an `<audio>` element, which
sends no Bearer header, can play it, and the route still needs a credential (API.md 1).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable
from urllib.parse import quote

from parley import engine
from parley.engine.audio import AudioFormat
from parley.errors import Unavailable, ValidationFailed, VoiceNotFound
from parley.services.context import Context
from parley.services.recordings import InvalidAudioSignature
from parley.services.voices import (
    VOICE_LANGUAGE,
    SpeechCatalog,
    UnknownVoice,
    UnsupportedLanguage,
    Voice,
    list_voices,
)

MAX_TEXT_CHARS: Final = 5_000
MIN_SPEED: Final = 0.5
MAX_SPEED: Final = 2.0
STREAM_FORMAT: Final = AudioFormat.PCM_16000
"""`tts.stream`'s default output format (API.md section 17)."""
PREVIEW_FORMAT: Final = AudioFormat.PCM_24000
"""The preview's and the samples' default format: the voices' own rate (hibari's)."""
SAMPLE_TEXT: Final = "Hello! This is how I sound. How can I help you today?"
SAMPLE_URL_SECONDS: Final = 7 * 24 * 3600
SIGNING_PURPOSE: Final = "voice-sample-url"


class InvalidSampleSignature(InvalidAudioSignature):
    """A voice sample's URL whose signature is wrong, missing or expired: one answer for all
    (a recording's answer, with its own message)."""

    message = "The voice sample's URL is not valid: its signature is wrong or has expired."


@dataclass(frozen=True, slots=True)
class SpeechRequest:
    """What a client asks to hear, as it sent it (None: omitted)."""

    text: str
    voice_id: str | None = None
    speed: float | None = None
    output_format: str | None = None
    languages: Sequence[str] | None = None


@dataclass(frozen=True, slots=True)
class SpeechJob:
    """A checked request: the sentences to speak, the resolved voice, speed and format."""

    sentences: list[str]
    voice: str
    speed: float
    output_format: AudioFormat


@runtime_checkable
class Describes(Protocol):
    """A synthesizer that can describe its voices (hibari and espeak-ng can)."""

    def describe(self, voice: str) -> str | None: ...


class SpeechMaker:
    """The process's synthesizer, speaking outside conversations; keeps the voices' samples."""

    def __init__(self, synthesizer: engine.Synthesizer) -> None:
        self._synthesizer = synthesizer
        self._samples: dict[str, asyncio.Future[bytes]] = {}

    def check(self, request: SpeechRequest, *, default_format: AudioFormat) -> SpeechJob:
        """Apply the module's rules; raise the 400 the request deserves."""
        text = request.text
        if not text.strip() or len(text) > MAX_TEXT_CHARS:
            raise ValidationFailed(
                param_errors={"text": f"must be 1 to {MAX_TEXT_CHARS:,} characters"}
            )
        speed = 1.0 if request.speed is None else request.speed
        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise ValidationFailed(
                param_errors={"speed": f"must be between {MIN_SPEED} and {MAX_SPEED}"}
            )
        voice = self._synthesizer.resolve_voice(request.voice_id or "")
        if voice is None:
            raise UnknownVoice(param_errors={"voice_id": "is not an installed voice"})
        if request.languages and VOICE_LANGUAGE not in request.languages:
            raise UnsupportedLanguage(
                param_errors={"languages": f"the voices speak only {VOICE_LANGUAGE!r}"}
            )
        output_format = default_format
        if request.output_format is not None:
            try:
                output_format = AudioFormat.parse(request.output_format)
            except engine.UnknownAudioFormat:
                raise ValidationFailed(
                    param_errors={"output_format": f"must be {AudioFormat.listed()}"}
                ) from None
        return SpeechJob(engine.sentences_of(text), voice, speed, output_format)

    def stream(self, job: SpeechJob) -> AsyncIterator[bytes]:
        """The job's audio, raw, sentence by sentence as it is made."""
        return engine.spoken(
            self._synthesizer,
            job.sentences,
            voice=job.voice,
            speed=job.speed,
            output_format=job.output_format,
        )

    async def whole(self, job: SpeechJob) -> bytes:
        """The job's audio as one WAV file."""
        parts = [part async for part in self.stream(job)]
        return engine.wav_file(b"".join(parts), job.output_format)

    def voice_of(self, voice_id: str) -> str:
        """The installed voice `voice_id` names (an alias such as `us_female` counts);
        404 `voice_not_found` otherwise."""
        voice = self._synthesizer.resolve_voice(voice_id) if voice_id.strip() else None
        if voice is None:
            raise VoiceNotFound()
        return voice

    def describe(self, voice: str) -> str | None:
        """A few words on the voice (accent, gender), when the synthesizer knows them."""
        synthesizer: Any = self._synthesizer
        return synthesizer.describe(voice) if isinstance(synthesizer, Describes) else None

    async def sample(self, voice: str) -> bytes:
        """`SAMPLE_TEXT` in an installed voice, a WAV made once per process: concurrent
        first requests share one rendering, and a failed one is not kept."""
        made = self._samples.get(voice)
        if made is None:
            job = SpeechJob(engine.sentences_of(SAMPLE_TEXT), voice, 1.0, PREVIEW_FORMAT)
            made = self._samples[voice] = asyncio.ensure_future(self.whole(job))
        try:
            return await asyncio.shield(made)
        except Exception:
            if self._samples.get(voice) is made and made.done():
                del self._samples[voice]
            raise


class NoSynthesizer(Unavailable):
    """The process has no speech synthesizer to ask (an engine made without one)."""

    message = "No speech synthesizer is installed on this server."


@dataclass(frozen=True, slots=True)
class SpeechStream:
    """An accepted stream request: its format, and its audio as it is made."""

    output_format: AudioFormat
    chunks: AsyncIterator[bytes]


async def preview(maker: SpeechMaker | None, request: SpeechRequest) -> bytes:
    """The voices preview: the request's text spoken whole, a WAV file (default format
    `PREVIEW_FORMAT`); the 400 the request deserves, before any synthesis."""
    if maker is None:
        raise NoSynthesizer()
    return await maker.whole(maker.check(request, default_format=PREVIEW_FORMAT))


def open_stream(maker: SpeechMaker | None, request: SpeechRequest) -> SpeechStream:
    """The speech stream, checked now (its 400 before the first byte), made as it is read
    (default format `STREAM_FORMAT`)."""
    if maker is None:
        raise NoSynthesizer()
    job = maker.check(request, default_format=STREAM_FORMAT)
    return SpeechStream(job.output_format, maker.stream(job))


@dataclass(frozen=True, slots=True)
class VoiceView:
    """A voice as `GET /v1/voices` shows it: the SDK's members and Parley's `language`."""

    id: str
    name: str
    language: str
    description: str | None
    audio_url: str


def voice_views(
    ctx: Context, catalog: SpeechCatalog | None, maker: SpeechMaker | None
) -> list[VoiceView]:
    """The installed voices, each with its description and its sample's signed URL."""
    return [_view(ctx, maker, voice) for voice in list_voices(catalog)]


def voice_view(
    ctx: Context, catalog: SpeechCatalog | None, maker: SpeechMaker | None, voice_id: str
) -> VoiceView:
    """One installed voice by ID or alias; 404 `voice_not_found` otherwise."""
    voice = maker.voice_of(voice_id) if maker is not None else None
    for found in list_voices(catalog):
        if found.id == voice:
            return _view(ctx, maker, found)
    raise VoiceNotFound()


def _view(ctx: Context, maker: SpeechMaker | None, voice: Voice) -> VoiceView:
    return VoiceView(
        id=voice.id,
        name=voice.name,
        language=voice.language,
        description=maker.describe(voice.id) if maker is not None else None,
        audio_url=sample_url(ctx, voice.id),
    )


async def voice_sample(
    ctx: Context,
    maker: SpeechMaker | None,
    voice_id: str,
    *,
    expires: str | None,
    signature: str | None,
) -> bytes:
    """The WAV sample a signed URL names (403 `invalid_signature`, 404 `voice_not_found`)."""
    check_sample_url(ctx, voice_id, expires=expires, signature=signature)
    if maker is None:
        raise VoiceNotFound()
    return await maker.sample(maker.voice_of(voice_id))


def speech_maker(state: Any) -> SpeechMaker | None:
    """The SpeechMaker of `state.engine_factory` (the app's state), made once and kept there;
    None when the factory exposes no synthesizer (a test's factory)."""
    maker: SpeechMaker | None = getattr(state, "speech_maker", None)
    if maker is None:
        synthesizer = getattr(state.engine_factory, "synthesizer", None)
        if synthesizer is None:
            return None
        maker = state.speech_maker = SpeechMaker(synthesizer)
    return maker


def sample_url(ctx: Context, voice_id: str) -> str:
    """The signed URL of a voice's sample, valid `SAMPLE_URL_SECONDS` from now."""
    expires = int(ctx.clock.time()) + SAMPLE_URL_SECONDS
    signature = _sign(ctx, voice_id, expires)
    path = quote(voice_id, safe="")
    return f"{ctx.public_url}/v1/voices/{path}/sample?expires={expires}&signature={signature}"


def check_sample_url(
    ctx: Context, voice_id: str, *, expires: str | None, signature: str | None
) -> None:
    """Refuse a wrong, missing or expired signature (403 `invalid_signature`)."""
    if not expires or not signature or not expires.isdigit() or len(expires) > 12:
        raise InvalidSampleSignature()
    if int(expires) < ctx.clock.time():
        raise InvalidSampleSignature()
    if not hmac.compare_digest(_sign(ctx, voice_id, int(expires)), signature):
        raise InvalidSampleSignature()


def _sign(ctx: Context, voice_id: str, expires: int) -> str:
    message = f"{voice_id}\n{expires}".encode()
    digest = hmac.new(ctx.secrets.derive(SIGNING_PURPOSE), message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
