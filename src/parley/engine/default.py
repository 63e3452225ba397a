"""The default engine: listener (VAD, recognizer) -> reply generator -> speaker.

Per conversation it runs two workers next to the caller: a turn worker (each finished turn's
words to InputText, then a reply) and a responder (one response at a time: text to
sentences to audio). Audio goes out paced at most `playback_lead_s` ahead of real time, so
"the assistant is speaking" means the listener is hearing it, and speech from the user in
that time is a barge-in: the response stops, queued responses are dropped, and
InterruptedResponse carries what the listener had heard of it.
A reply may call tools (API.md section 12): tool_loop.py runs its rounds and calls and
speaks the model's words meanwhile; the calls run in the workers' task group, so a barge-in
drops the reply (ToolCallInterrupted for each sync call it waited for) but not the calls.

Every response the responder begins ends with exactly one of AssistantFinishedSpeaking or
InterruptedResponse, also one that made tool calls and spoke nothing: if it finishes, it is
framed by AssistantStartedSpeaking and AssistantFinishedSpeaking with no audio between; if
it is cut before speaking, InterruptedResponse("") (the socket layer stores the assistant
item, with its tool calls, on either). A `natural_conversation_ending` call or an
EndConversation adds AssistantEndedConversation after AssistantFinishedSpeaking, never after
an InterruptedResponse. The history gets the model's words and calls of each tool round as
said, then what was said (or heard, on barge-in) after the last call.
A reply generator that fails (a language model down or too slow) gets a `response_failed`
warning and a short spoken apology; the conversation goes on.
With `SessionConfig.hold_welcome` (a call placed to someone) the greeting waits: the end of
the user's first turn speaks it, in place of a reply to that turn, or `release_welcome`
does (the carrier heard a person); `release_welcome(speak=False)` drops it.
A third worker keeps time: while the user's turn lasts and the client sends no audio, it
feeds the listener the silence owed (engine/timing.py), so the turn ends on the wall clock;
and each reply to a spoken turn carries its stages' instants on its first AudioChunk.
With `SessionConfig.word_timings` each InputText carries its words' times in the input
stream: the listener gives them in the time of the audio it heard, and the engine adds the
muted audio it did not hear before them (`_InputClock`).
A multilingual agent's languages (which the recognizer listens for, which the reply is in,
and its voice) are engine/languages.py's `LanguageChoice`.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

import anyio
import numpy as np
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from parley import metrics
from parley.clock import Clock
from parley.engine.audio import OUTPUT_CHUNK_MS, Samples, check_input_chunk, decode
from parley.engine.base import (
    AssistantEndedConversation,
    EndConversation,
    EngineEvent,
    EngineWarning,
    InputCancelled,
    InputText,
    InterruptedResponse,
    Recognizer,
    ReplyGenerator,
    ReplyPart,
    ReplyRequest,
    SessionConfig,
    Synthesizer,
    Transcript,
    Turn,
    UserFinishedSpeaking,
    UserStartedSpeaking,
    Word,
)
from parley.engine.errors import EngineClosed, TooManyPendingResponses
from parley.engine.languages import LanguageChoice
from parley.engine.listening import Listener
from parley.engine.semantic import SemanticParams, SmartTurn
from parley.engine.speaker import Response, Speaker
from parley.engine.timing import STALL_S, Arrivals, TurnClock
from parley.engine.tool_loop import ToolLoop
from parley.engine.tools import ToolDefinition, ToolRunner
from parley.engine.tuning import WELCOME_INSTRUCTION, Pronouncer, listening, with_local_time
from parley.engine.vad import SileroPool, Transition, VadEvent, VadParams, vad_rate

logger = logging.getLogger(__name__)
turn_log = logging.getLogger("parley.turns")

APOLOGY = "Sorry, I cannot answer that right now."
_KEEP_TIME_TICK_S = 0.032
"""How often the silence owed is fed (a Silero window at 16 kHz)."""


@dataclass(frozen=True)
class EngineSettings:
    """Per-process tuning; the defaults are what the service runs with."""

    vad: VadParams = field(default_factory=VadParams)
    semantic: SemanticParams = field(default_factory=SemanticParams)  # with a turn model
    output_chunk_ms: int = OUTPUT_CHUNK_MS
    playback_lead_s: float | None = 0.5  # None: send audio as fast as it is made (tests)
    partial_interval_s: float | None = None
    """Partial decodes while the user speaks, every this many seconds (None: none). Off:
    forcing their words onto the final decode saved no time (the encoder dominates: a
    14 s turn decodes in 0.21 s either way), and under load they held the recognizer when
    finals were due (docs/performance.md, session 17)."""
    max_history: int = 50
    max_pending_responses: int = 8
    max_pending_turns: int = 4
    event_buffer: int = 64

    def __post_init__(self) -> None:
        if not 20 <= self.output_chunk_ms <= 100:
            raise ValueError("output_chunk_ms must be between 20 and 100")


@dataclass(frozen=True)
class _Say:
    text: str
    then_end: bool = False
    """End the conversation once it is said (AssistantEndedConversation)."""
    welcome: bool = False


@dataclass(frozen=True)
class _Reply:
    user_message: str | None = None
    system_message: str | None = None
    transcribed: bool = True
    turn: TurnClock | None = None  # the spoken user turn it answers: its stages' instants
    welcome: bool = False  # the model writes the welcome (AgentTuning.generate_welcome)


@dataclass(frozen=True)
class _Heard:
    """A finished turn on its way to words."""

    transcript: asyncio.Task[Transcript | None]
    ended_at: float
    speech_ended: float  # when the turn's last voiced audio arrived (monotonic)
    answered: bool = False
    """The held welcome answered this turn: its words get no reply."""


@dataclass
class _Channels:
    events_in: MemoryObjectSendStream[EngineEvent]
    events_out: MemoryObjectReceiveStream[EngineEvent]
    jobs_in: MemoryObjectSendStream[_Say | _Reply]
    jobs_out: MemoryObjectReceiveStream[_Say | _Reply]
    turns_in: MemoryObjectSendStream[_Heard]
    turns_out: MemoryObjectReceiveStream[_Heard]
    workers: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def close(self) -> None:
        for stream in (self.events_in, self.jobs_in, self.turns_in):
            stream.close()
        for receiver in (self.events_out, self.jobs_out, self.turns_out):
            receiver.close()


class DefaultEngine:
    """One conversation (see the module doc and parley.engine.base.ConversationEngine).

    Built by DefaultEngineFactory.create; the plug-ins are shared with every other conversation.
    """

    def __init__(
        self,
        config: SessionConfig,
        *,
        tool_runner: ToolRunner,
        synthesizer: Synthesizer,
        recognizer: Recognizer,
        replies: ReplyGenerator,
        vad_pool: SileroPool,
        settings: EngineSettings,
        clock: Clock,
        turn_model: SmartTurn | None = None,
    ) -> None:
        self._config = config
        self._turn_model = turn_model
        self._system_prompt = config.system_prompt
        self._tools = config.tools
        self._tool_runner = tool_runner
        self._recognizer = recognizer
        self._synthesizer = synthesizer
        self._replies = replies
        self._vad_pool = vad_pool
        self._settings = settings
        self._clock = clock
        self._listener: Listener | None = None
        self._task_group: TaskGroup | None = None
        self._history: deque[Turn] = deque(maxlen=self._settings.max_history)
        self._history.extend(config.history)  # a conversation that goes on
        self._current: Response | None = None
        self._muted = False
        self._closed = False
        self._channels: _Channels | None = None
        self._stack = AsyncExitStack()
        self._held_welcome: _Say | _Reply | None = None
        self._said_goodbye = False  # AssistantEndedConversation went out: nothing more
        self._input_clock = _InputClock()
        self._languages = LanguageChoice(config.language, config.languages)
        self._arrivals = Arrivals()
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
            lead_s=self._settings.playback_lead_s if config.paced else None,
            clock=clock,
            emit=self._emit,
            speed=config.tuning.speed,
            pronounce=Pronouncer(config.tuning.pronunciations),
        )
        self._tool_loop = ToolLoop(
            replies=replies,
            runner=tool_runner,
            speaker=self._speaker,
            history=self._history,
            emit=self._emit,
            clock=clock,
            apology=APOLOGY,
        )

    async def __aenter__(self) -> Self:
        settings = self._settings
        model = await self._vad_pool.acquire(vad_rate(self._config.input_format.sample_rate))
        self._stack.callback(self._vad_pool.release, model)
        vad, semantic = listening(settings.vad, settings.semantic, self._config.tuning)
        self._listener = Listener(
            self._config.input_format,
            recognizer=self._languages.recognizer(self._recognizer),
            vad_model=model,
            params=vad,
            language=self._config.language,
            partial_interval_s=settings.partial_interval_s,
            turn_model=self._turn_model if semantic is not None else None,
            semantic=semantic,
            keywords=self._config.keywords,
            on_late_finish=self._late_finish,
            word_timings=self._config.word_timings,
        )
        self._stack.push_async_callback(self._listener.aclose)
        events = anyio.create_memory_object_stream[EngineEvent](settings.event_buffer)
        jobs = anyio.create_memory_object_stream[_Say | _Reply](settings.max_pending_responses)
        turns = anyio.create_memory_object_stream[_Heard](settings.max_pending_turns)
        channels = self._channels = _Channels(*events, *jobs, *turns)
        self._stack.callback(channels.close)
        task_group = self._task_group = await self._stack.enter_async_context(
            anyio.create_task_group()
        )
        task_group.start_soon(self._run_workers, channels)
        if self._voice_warning is not None:
            await self._emit(self._voice_warning)
        welcome = self._welcome()
        if welcome is not None and self._config.hold_welcome:
            self._held_welcome = welcome
            if isinstance(welcome, _Say):
                self._speaker.prepare(welcome.text)  # ready the moment the callee's turn ends
        elif welcome is not None:
            self._queue(welcome)
        return self

    def _welcome(self) -> _Say | _Reply | None:
        """The welcome: the reply generator's greeting, or (`generate_welcome`) its first
        reply, to no user message (a model writes it; the rule-based replier greets)."""
        if self._config.tuning.generate_welcome:
            return _Reply(system_message=WELCOME_INSTRUCTION, welcome=True)
        greeting = self._replies.greeting(self._config)
        return _Say(greeting, welcome=True) if greeting else None

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
        """Validate a chunk (InvalidAudioChunk), then listen to it unless muted."""
        self._open_channels()
        fmt = self._config.input_format
        check_input_chunk(fmt, audio)
        seconds = fmt.duration(audio)
        if self._muted:
            self._input_clock.skipped(seconds)
            return
        self._input_clock.heard(seconds)
        self._arrivals.heard(seconds, self._clock.monotonic())
        await self._hear(decode(fmt, audio))

    async def _hear(self, samples: Samples) -> None:
        for event in self._ear().feed(samples):
            if event.kind is Transition.STARTED:
                await self._emit(UserStartedSpeaking())
                self._interrupt()
            else:
                await self._finish_user_turn(event)

    async def say(self, text: str, *, then_end: bool = False) -> None:
        """Queue `text` to be spoken as it is, and with `then_end` end the conversation once
        it is said; raise TooManyPendingResponses when full."""
        self._open_channels()
        self._queue(_Say(text, then_end=then_end))

    async def release_welcome(self, *, speak: bool = True) -> None:
        """Speak the held welcome now (`speak`), or drop it; nothing if none is held."""
        self._open_channels()
        welcome, self._held_welcome = self._held_welcome, None
        if welcome is not None and speak:
            self._queue(welcome)

    async def generate_reply(
        self, *, user_message: str | None = None, system_message: str | None = None
    ) -> None:
        """Queue a reply; a non-empty `user_message` joins the history as the user's turn."""
        self._open_channels()
        if user_message and user_message.strip():
            self._history.append(Turn("user", user_message.strip()))
        self._queue(_Reply(user_message, system_message))

    async def update_system_prompt(self, text: str) -> None:
        """Use `text` for every later reply."""
        self._open_channels()
        self._system_prompt = text

    async def add_system_message(self, text: str) -> None:
        """Add `text` to the history as a system turn; no reply is queued."""
        self._open_channels()
        if text.strip():
            self._history.append(Turn("system", text.strip()))

    async def update_tools(self, tools: tuple[ToolDefinition, ...]) -> None:
        """Offer `tools` to every later reply."""
        self._open_channels()
        self._tools = tools

    async def change_voice(self, voice_id: str) -> None:
        """Speak every later sentence in `voice_id`; an unknown voice is warned about and
        the current one kept."""
        self._open_channels()
        voice = self._synthesizer.resolve_voice(voice_id)
        if voice is None:
            await self._warn("voice_not_available", f"Voice {voice_id!r} is not available.")
            return
        self._speaker.voice = voice

    async def mute(self) -> None:
        """Ignore input audio as speech; a user turn in progress finishes now."""
        self._open_channels()
        if not self._muted:
            self._muted = True
            finished = self._ear().finish()
            if finished is not None:
                await self._finish_user_turn(finished)

    async def unmute(self) -> None:
        """Listen to input audio again."""
        self._open_channels()
        self._muted = False

    async def interrupt(self) -> None:
        """Barge in without speech: stop the current response, drop queued ones."""
        self._open_channels()
        self._interrupt()

    async def close(self) -> None:
        """Stop the workers and end the events stream (buffered events are still delivered)."""
        if self._closed:
            return
        self._closed = True
        self._speaker.discard_prepared()
        if self._channels is not None:
            self._channels.workers.cancel()
            self._channels.events_in.close()

    # --- workers ----------------------------------------------------------------------------

    async def _run_workers(self, channels: _Channels) -> None:
        with channels.workers:
            async with anyio.create_task_group() as workers:
                workers.start_soon(self._take_turns, channels.turns_out)
                workers.start_soon(self._respond, channels.jobs_out, workers)
                workers.start_soon(self._keep_time)

    async def _take_turns(self, turns: MemoryObjectReceiveStream[_Heard]) -> None:
        async for heard in turns:
            try:
                transcript = await heard.transcript
            except asyncio.CancelledError:
                if heard.transcript.cancelled():
                    continue  # dropped by the listener; our own cancellation propagates
                raise
            except Exception:
                logger.exception("speech recognition failed")
                await self._warn("recognition_failed", "The user's speech could not be recognized.")
                continue
            if transcript is None or not transcript.text.strip():
                await self._emit(InputCancelled())  # speech, but no words in it
                continue
            metrics.observe_queue_time("stt", transcript.queue_seconds)
            turn_log.info(
                "turn recognized %.0f ms after the end of speech (queue %.0f ms, decode %.0f ms,"
                " %d words)",
                (self._clock.monotonic() - heard.ended_at) * 1000,
                transcript.queue_seconds * 1000,
                transcript.compute_seconds * 1000,
                len(transcript.text.split()),
            )
            transcribed = self._clock.monotonic()
            words = tuple(self._input_clock.placed(word) for word in transcript.words)
            await self._emit(InputText(transcript.text, transcript.language, words))
            self._history.append(Turn("user", transcript.text))
            self._follow_language(transcript)
            if heard.answered:
                continue  # the welcome answered it: its words join the history only
            if self._ear().detector.in_turn:
                continue  # the user goes on talking: the reply to that turn answers both
            try:
                self._queue(
                    _Reply(
                        transcript.text,
                        transcribed=not transcript.placeholder,
                        turn=TurnClock(heard.speech_ended, heard.ended_at, transcribed),
                    )
                )
            except TooManyPendingResponses:
                await self._warn("reply_dropped", "Too many responses queued; one was dropped.")

    async def _respond(
        self, jobs: MemoryObjectReceiveStream[_Say | _Reply], calls: TaskGroup
    ) -> None:
        async for job in jobs:
            if self._said_goodbye:
                continue  # the conversation is ending: later responses are not spoken
            welcome = job.welcome and not self._config.tuning.welcome_interruptible
            response = self._current = Response(interruptible=not welcome)
            response.turn = job.turn if isinstance(job, _Reply) else None
            with response.scope:
                try:
                    if isinstance(job, _Say):
                        await self._speaker.speak(_text_only(job.text, job.then_end), response)
                    else:
                        await self._tool_loop.reply(self._request(job), response, calls)
                except Exception:
                    logger.exception("a response failed")
                    await self._warn("response_failed", "The assistant's response failed.")
                    await self._speaker.speak(_text_only(APOLOGY), response)
            self._current = None
            await self._record(response)

    async def _record(self, response: Response) -> None:
        """Add what was said after the last tool call to the history; report a barge-in."""
        # Words before a call are in the history already (the call's turn); when the
        # speaker had not reached the last call, nothing after it was said.
        start = response.after_calls if response.calls_passed == response.calls_queued else None
        if response.scope.cancelled_caught and not response.finished:
            now = self._clock.monotonic()
            tail = response.heard(now, start) if start is not None else ""
            if tail:
                self._history.append(Turn("assistant", tail))
            await self._emit(InterruptedResponse(response.heard(now)))
        elif start is not None and response.sent[start:]:
            self._history.append(Turn("assistant", response.text_from(start)))

    def _request(self, job: _Reply) -> ReplyRequest:
        zone = self._config.tuning.timezone
        return ReplyRequest(
            agent_name=self._config.agent_name,
            system_prompt=self._languages.instructed(
                with_local_time(self._system_prompt, self._clock.time(), zone)
            ),
            language=self._languages.current,
            history=tuple(self._history),
            user_message=job.user_message,
            system_message=job.system_message,
            transcribed=job.transcribed,
            tools=self._tools,
        )

    # --- helpers ----------------------------------------------------------------------------

    def _follow_language(self, transcript: Transcript) -> None:
        """A turn that changes the reply's language changes its voice too."""
        language = self._languages.heard(transcript)
        if language is not None:
            voice_id = self._languages.voice(language) or self._config.voice_id
            self._speaker.voice = self._synthesizer.resolve_voice(voice_id) or self._speaker.voice

    def _ear(self) -> Listener:
        if self._listener is None:
            raise EngineClosed()
        return self._listener

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
        """Drop queued responses and stop the current one (barge-in), unless it is a welcome
        the agent does not let the user cut."""
        jobs = self._open_channels().jobs_out
        while True:
            try:
                jobs.receive_nowait()
            except anyio.WouldBlock:
                break
        if self._current is not None and self._current.interruptible:
            self._current.scope.cancel()

    def _late_finish(self, finished: VadEvent) -> None:
        """The end-of-turn model ended the turn after the last chunk fed (Listener)."""
        if self._task_group is not None and not (self._closed or self._muted):
            self._task_group.start_soon(self._finish_user_turn, finished)

    async def _finish_user_turn(self, finished: VadEvent) -> None:
        await self._emit(UserFinishedSpeaking())
        task = self._ear().take_turn(finished)
        if task is None:  # too little speech for a turn (a cough, a click)
            await self._emit(InputCancelled())
            return
        welcome, self._held_welcome = self._held_welcome, None
        if welcome is not None:  # the callee's first words: the welcome answers them, at once
            self._queue(welcome)
        now = self._clock.monotonic()
        # Silero's state lags the audio by about a window: the last window it scores as
        # speech is the one after the speech, so the speech ends where that window starts.
        speech_ended = self._arrivals.arrival(finished.time - self._ear().window_seconds)
        heard = _Heard(
            task,
            now,
            now if speech_ended is None else min(speech_ended, now),
            answered=welcome is not None,
        )
        try:
            self._open_channels().turns_in.send_nowait(heard)
        except anyio.WouldBlock:
            task.cancel()
            await self._warn("utterance_dropped", "Speech came faster than it could be handled.")

    async def _keep_time(self) -> None:
        """After speech, silence is time: while the user's turn lasts and no audio comes,
        feed the listener the silence owed (engine/timing.py), so the turn ends on the
        wall clock, in either end-of-turn mode."""
        rate = self._config.input_format.sample_rate
        while True:
            asked = self._clock.monotonic() + _KEEP_TIME_TICK_S
            await anyio.sleep(_KEEP_TIME_TICK_S)
            late = self._clock.monotonic() - asked
            if late > STALL_S:  # this process stood still: the client may not have
                self._arrivals.excuse(late)
            if self._muted or self._listener is None or not self._listener.detector.in_turn:
                continue
            now = self._clock.monotonic()
            samples = int(self._arrivals.owed(now) * rate)
            if samples <= 0:
                continue
            self._input_clock.invented(samples / rate)
            self._arrivals.invented(samples / rate, now)
            await self._hear(np.zeros(samples, dtype=np.float32))

    async def _warn(self, code: str, message: str) -> None:
        await self._emit(EngineWarning(code, message))

    async def _emit(self, event: EngineEvent) -> None:
        if self._channels is None:
            return
        if isinstance(event, AssistantEndedConversation):
            self._said_goodbye = True
        try:
            await self._channels.events_in.send(event)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            # Its name only: an event may hold the user's or the agent's words.
            logger.debug("engine event dropped after close: %s", type(event).__name__)


class _InputClock:
    """Where the listener's time lies in the input stream: the listener does not hear muted
    audio, so each muted stretch shifts what it heard after it."""

    def __init__(self) -> None:
        self._heard = 0.0  # seconds the listener was fed
        self._at: list[float] = []  # listener times where muted audio was skipped...
        self._shift: list[float] = []  # ...and the muted seconds in all up to each

    def heard(self, seconds: float) -> None:
        self._heard += seconds

    def invented(self, seconds: float) -> None:
        """The listener heard `seconds` of silence that is not in the input stream."""
        total = (self._shift[-1] if self._shift else 0.0) - seconds
        follows = bool(self._at) and self._at[-1] == self._heard
        self._heard += seconds
        if follows:  # more of the same silence: one entry
            self._at[-1], self._shift[-1] = self._heard, total
        else:
            self._at.append(self._heard)
            self._shift.append(total)

    def skipped(self, seconds: float) -> None:
        total = (self._shift[-1] if self._shift else 0.0) + seconds
        if self._at and self._at[-1] == self._heard:
            self._shift[-1] = total
        else:
            self._at.append(self._heard)
            self._shift.append(total)

    def placed(self, word: Word) -> Word:
        """`word`, timed in the listener's time, timed in the input stream's."""
        return Word(word.text, self._input(word.start), self._input(word.end))

    def _input(self, seconds: float) -> float:
        index = bisect.bisect_right(self._at, seconds) - 1
        return seconds + (self._shift[index] if index >= 0 else 0.0)


async def _text_only(text: str, then_end: bool = False) -> AsyncGenerator[ReplyPart, None]:
    yield text
    if then_end:
        yield EndConversation()
