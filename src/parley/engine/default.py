"""The default engine: VAD -> recognizer -> reply generator -> synthesizer -> output chunks.

Per conversation it runs two workers next to the caller: a listener (utterances to InputText,
then a reply) and a responder (one response at a time: text to sentences to audio). Audio goes
out paced at most `playback_lead_s` ahead of real time, so "the assistant is speaking" means
the listener is hearing it, and speech from the user in that time is a barge-in: the response
stops, queued responses are dropped, and InterruptedResponse carries the sentences already sent.
Every response ends with AssistantFinishedSpeaking or InterruptedResponse, never both.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from parley.clock import Clock
from parley.engine.audio import OUTPUT_CHUNK_MS, check_input_chunk, decode, resample
from parley.engine.base import (
    AssistantFinishedSpeaking,
    EngineEvent,
    EngineWarning,
    InputText,
    InterruptedResponse,
    Recognizer,
    ReplyGenerator,
    ReplyPart,
    ReplyRequest,
    SessionConfig,
    Synthesizer,
    Turn,
    UserFinishedSpeaking,
    UserStartedSpeaking,
)
from parley.engine.errors import EngineClosed, TooManyPendingResponses
from parley.engine.speaker import Response, Speaker
from parley.engine.vad import Utterance, UtteranceCapture, VadParams

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineSettings:
    """Per-process tuning; the defaults are what the service runs with."""

    vad: VadParams = field(default_factory=VadParams)
    output_chunk_ms: int = OUTPUT_CHUNK_MS
    playback_lead_s: float | None = 0.5  # None: send audio as fast as it is made (tests)
    max_history: int = 50
    max_pending_responses: int = 8
    max_pending_utterances: int = 4
    event_buffer: int = 64

    def __post_init__(self) -> None:
        if not 20 <= self.output_chunk_ms <= 100:
            raise ValueError("output_chunk_ms must be between 20 and 100")


@dataclass(frozen=True)
class _Say:
    text: str


@dataclass(frozen=True)
class _Reply:
    user_message: str | None = None
    system_message: str | None = None
    transcribed: bool = True


@dataclass
class _Channels:
    events_in: MemoryObjectSendStream[EngineEvent]
    events_out: MemoryObjectReceiveStream[EngineEvent]
    jobs_in: MemoryObjectSendStream[_Say | _Reply]
    jobs_out: MemoryObjectReceiveStream[_Say | _Reply]
    utterances_in: MemoryObjectSendStream[Utterance]
    utterances_out: MemoryObjectReceiveStream[Utterance]
    workers: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def close(self) -> None:
        for stream in (self.events_in, self.jobs_in, self.utterances_in):
            stream.close()
        for receiver in (self.events_out, self.jobs_out, self.utterances_out):
            receiver.close()


class DefaultEngine:
    """One conversation (see the module doc and parley.engine.base.ConversationEngine).

    Built by DefaultEngineFactory.create; the plug-ins are shared with every other conversation.
    """

    def __init__(
        self,
        config: SessionConfig,
        *,
        synthesizer: Synthesizer,
        recognizer: Recognizer,
        replies: ReplyGenerator,
        settings: EngineSettings,
        clock: Clock,
    ) -> None:
        self._config = config
        self._system_prompt = config.system_prompt
        self._recognizer = recognizer
        self._replies = replies
        self._settings = settings
        self._capture = UtteranceCapture(config.input_format.sample_rate, self._settings.vad)
        self._history: deque[Turn] = deque(maxlen=self._settings.max_history)
        self._current: Response | None = None
        self._muted = False
        self._closed = False
        self._channels: _Channels | None = None
        self._stack = AsyncExitStack()
        voice = synthesizer.resolve_voice(config.voice_id)
        self._voice_warning = None
        if voice is None:
            voice = synthesizer.default_voice
            self._voice_warning = EngineWarning(
                "voice_not_available",
                f"Voice {config.voice_id!r} is not available on this server; using {voice!r}.",
            )
        self._speaker = Speaker(
            synthesizer,
            voice=voice,
            output_format=config.output_format,
            chunk_ms=self._settings.output_chunk_ms,
            lead_s=self._settings.playback_lead_s,
            clock=clock,
            emit=self._emit,
        )

    async def __aenter__(self) -> Self:
        settings = self._settings
        events = anyio.create_memory_object_stream[EngineEvent](settings.event_buffer)
        jobs = anyio.create_memory_object_stream[_Say | _Reply](settings.max_pending_responses)
        utterances = anyio.create_memory_object_stream[Utterance](settings.max_pending_utterances)
        channels = self._channels = _Channels(*events, *jobs, *utterances)
        self._stack.callback(channels.close)
        task_group = await self._stack.enter_async_context(anyio.create_task_group())
        task_group.start_soon(self._run_workers, channels)
        if self._voice_warning is not None:
            await self._emit(self._voice_warning)
        greeting = self._replies.greeting(self._config)
        if greeting:
            self._queue(_Say(greeting))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
        await self._stack.__aexit__(exc_type, exc, tb)

    async def events(self) -> AsyncIterator[EngineEvent]:
        """Yield the engine's events until it closes (one consumer only)."""
        if self._channels is None:
            raise EngineClosed()
        try:
            async for event in self._channels.events_out:
                yield event
        except anyio.ClosedResourceError:
            return

    async def feed_audio(self, audio: bytes) -> None:
        """Validate a chunk (InvalidAudioChunk), then run it through the VAD unless muted."""
        self._open_channels()
        fmt = self._config.input_format
        check_input_chunk(fmt, audio)
        if self._muted:
            return
        for item in self._capture.process(decode(fmt, audio)):
            if isinstance(item, Utterance):
                await self._finish_user_turn(item)
            else:
                await self._emit(UserStartedSpeaking())
                self._interrupt()

    async def say(self, text: str) -> None:
        """Queue `text` to be spoken as it is; raise TooManyPendingResponses when full."""
        self._open_channels()
        self._queue(_Say(text))

    async def generate_reply(
        self, *, user_message: str | None = None, system_message: str | None = None
    ) -> None:
        """Queue a reply; a non-empty `user_message` joins the history as the user's turn."""
        self._open_channels()
        if user_message and user_message.strip():
            self._history.append(Turn("user", user_message))
        self._queue(_Reply(user_message, system_message))

    async def update_system_prompt(self, text: str) -> None:
        """Use `text` for every later reply."""
        self._open_channels()
        self._system_prompt = text

    async def mute(self) -> None:
        """Ignore input audio as speech; a user turn in progress finishes now."""
        self._open_channels()
        if not self._muted:
            self._muted = True
            utterance = self._capture.finish()
            if utterance is not None:
                await self._finish_user_turn(utterance)

    async def unmute(self) -> None:
        """Listen to input audio again."""
        self._open_channels()
        self._muted = False

    async def close(self) -> None:
        """Stop the workers and end the events stream (buffered events are still delivered)."""
        if self._closed:
            return
        self._closed = True
        if self._channels is not None:
            self._channels.workers.cancel()
            self._channels.events_in.close()

    # --- workers ----------------------------------------------------------------------------

    async def _run_workers(self, channels: _Channels) -> None:
        with channels.workers:
            async with anyio.create_task_group() as workers:
                workers.start_soon(self._listen, channels.utterances_out)
                workers.start_soon(self._respond, channels.jobs_out)

    async def _listen(self, utterances: MemoryObjectReceiveStream[Utterance]) -> None:
        rate = self._recognizer.sample_rate
        async for utterance in utterances:
            try:
                samples = await anyio.to_thread.run_sync(
                    resample, utterance.samples, utterance.sample_rate, rate
                )
                transcript = await self._recognizer.transcribe(
                    Utterance(samples, rate, utterance.speech_seconds),
                    language=self._config.language,
                )
            except Exception:
                logger.exception("speech recognition failed")
                await self._warn("recognition_failed", "The user's speech could not be recognized.")
                continue
            if not transcript.text.strip():
                continue
            await self._emit(InputText(transcript.text, transcript.language))
            self._history.append(Turn("user", transcript.text))
            if self._capture.vad.speaking:
                continue  # the user goes on talking: the reply to that turn answers both
            try:
                self._queue(_Reply(transcript.text, transcribed=not transcript.placeholder))
            except TooManyPendingResponses:
                await self._warn("reply_dropped", "Too many responses queued; one was dropped.")

    async def _respond(self, jobs: MemoryObjectReceiveStream[_Say | _Reply]) -> None:
        async for job in jobs:
            response = self._current = Response()
            with response.scope:
                try:
                    await self._speaker.speak(self._reply_stream(job), response)
                except Exception:
                    logger.exception("a response failed")
                    await self._warn("response_failed", "The assistant's response failed.")
                    if response.started:
                        await self._emit(AssistantFinishedSpeaking())
            self._current = None
            if response.spoken:
                self._history.append(Turn("assistant", response.text))
            if response.scope.cancelled_caught and response.started:
                await self._emit(InterruptedResponse(response.text))

    def _reply_stream(self, job: _Say | _Reply) -> AsyncGenerator[ReplyPart, None]:
        if isinstance(job, _Say):
            return _text_only(job.text)
        return self._replies.reply(
            ReplyRequest(
                agent_name=self._config.agent_name,
                system_prompt=self._system_prompt,
                language=self._config.language,
                history=tuple(self._history),
                user_message=job.user_message,
                system_message=job.system_message,
                transcribed=job.transcribed,
            )
        )

    # --- helpers ----------------------------------------------------------------------------

    def _open_channels(self) -> _Channels:
        if self._closed or self._channels is None:
            raise EngineClosed()
        return self._channels

    def _queue(self, job: _Say | _Reply) -> None:
        try:
            self._open_channels().jobs_in.send_nowait(job)
        except anyio.WouldBlock:
            raise TooManyPendingResponses() from None

    def _interrupt(self) -> None:
        """Drop queued responses and stop the current one (barge-in)."""
        jobs = self._open_channels().jobs_out
        while True:
            try:
                jobs.receive_nowait()
            except anyio.WouldBlock:
                break
        if self._current is not None:
            self._current.scope.cancel()

    async def _finish_user_turn(self, utterance: Utterance) -> None:
        await self._emit(UserFinishedSpeaking())
        try:
            self._open_channels().utterances_in.send_nowait(utterance)
        except anyio.WouldBlock:
            await self._warn("utterance_dropped", "Speech came faster than it could be handled.")

    async def _warn(self, code: str, message: str) -> None:
        await self._emit(EngineWarning(code, message))

    async def _emit(self, event: EngineEvent) -> None:
        if self._channels is None:
            return
        try:
            await self._channels.events_in.send(event)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("engine event dropped after close: %r", event)


async def _text_only(text: str) -> AsyncGenerator[ReplyPart, None]:
    yield text
