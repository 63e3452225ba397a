"""Speaking one response: reply text -> sentences -> synthesized audio -> paced AudioChunks.

Each sentence is synthesized whole, resampled and encoded in a worker thread, and cut into
`chunk_ms` chunks (the last one shorter). A sentence is spoken as soon as the reply stream
completes it, so the first sentence plays while a language model still writes the rest.
Chunks go out at most `lead_s` ahead of the listener's playback (None: as fast as they are
made), and the response ends, with AssistantFinishedSpeaking, only when its playback time
has passed.

The speaker notes when each sentence starts playing at the listener, so a barge-in can
tell what was actually heard: the sentences played through, and of the sentence playing
when the user spoke, the share of its words its played time covers (`Response.heard`).

A ToolCallPart or a Break in the stream ends the text before it: what is buffered is spoken
at once, even without a final full stop (what the model says before a tool call is spoken
while the tool runs). A response that spoke nothing (a reply that only called tools) is
still framed by AssistantStartedSpeaking and AssistantFinishedSpeaking, with no audio
between, so every response ends with exactly one of AssistantFinishedSpeaking or (from the
engine, on barge-in) InterruptedResponse.

A PressKeys ends the text before it too, then sends KeypadPressed (after
AssistantStartedSpeaking: the tones are the response's sound) and counts the tones'
duration as playback. A StaySilent ends the response with AssistantChoseNotToRespond: when
nothing was said or pressed, instead of the Started/Finished framing (the client sees only
that the assistant chose silence), else after AssistantFinishedSpeaking.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from parley.clock import Clock
from parley.engine.audio import AudioFormat, render, split_chunks
from parley.engine.base import (
    AssistantChoseNotToRespond,
    AssistantEndedConversation,
    AssistantFinishedSpeaking,
    AssistantHandedOff,
    AssistantStartedSpeaking,
    AudioChunk,
    EndConversation,
    EngineEvent,
    HandOver,
    KeypadPressed,
    PressKeys,
    ReplyPart,
    StaySilent,
    Synthesizer,
    ToolCallPart,
)
from parley.engine.dtmf import key_seconds
from parley.engine.sentences import SentenceSplitter
from parley.engine.timing import TurnClock

Emit = Callable[[EngineEvent], Awaitable[None]]


@dataclass(frozen=True)
class _Played:
    sentence: str
    starts: float | None  # monotonic time its playback starts; None: unknown (unpaced)
    seconds: float


@dataclass(frozen=True)
class Break:
    """In a reply stream: the text before it is complete; speak what is buffered now."""


@dataclass
class Response:
    """The state of one response: its cancel scope (barge-in) and what was already sent."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    started: bool = False
    finished: bool = False  # AssistantFinishedSpeaking was sent
    first_audio_at: float | None = None  # monotonic time of the first chunk
    sent: list[_Played] = field(default_factory=list)
    on_air: anyio.Event = field(default_factory=anyio.Event)  # set with the first chunk
    waiting: bool = False  # the speaker waits for more of the stream, nothing buffered
    playing_until: float | None = None  # monotonic end of the playback sent (None: unpaced)
    calls_queued: int = 0  # ToolCallParts the tool loop put in the stream
    calls_passed: int = 0  # ToolCallParts the speaker has reached
    after_calls: int = 0  # sentences sent before the last of them
    interruptible: bool = True  # False: a welcome the user's speech does not cut
    turn: TurnClock | None = None  # a reply to a spoken user turn: its stages' instants

    @property
    def text(self) -> str:
        """The sentences sent so far, joined."""
        return self.text_from(0)

    def text_from(self, start: int) -> str:
        """The sentences sent from the `start`-th on, joined."""
        return " ".join(played.sentence for played in self.sent[start:])

    def speaking(self, now: float) -> bool:
        """Tell whether anything of the response is still to be sent or to be heard."""
        if not self.waiting:
            return True
        return self.playing_until is not None and now < self.playing_until

    def heard(self, now: float, start: int = 0) -> str:
        """What the listener had heard at monotonic time `now`, of the sentences from the
        `start`-th on (see the module doc)."""
        words: list[str] = []
        for played in self.sent[start:]:
            if played.starts is None or played.starts + played.seconds <= now:
                words.append(played.sentence)
                continue
            if played.starts >= now or played.seconds <= 0:
                break
            sentence = played.sentence.split()
            share = int(len(sentence) * (now - played.starts) / played.seconds)
            if share:
                words.append(" ".join(sentence[:share]))
            break
        return " ".join(words)


class Pacer:
    """Tracks when the listener's playback of the audio sent so far ends."""

    def __init__(self, clock: Clock, lead_s: float | None) -> None:
        self._clock = clock
        self._lead = lead_s
        self._end: float | None = None

    async def wait_for_room(self) -> None:
        """Sleep until the audio sent is at most `lead_s` ahead of playback."""
        if self._lead is not None and self._end is not None:
            await anyio.sleep(max(self._end - self._clock.monotonic() - self._lead, 0.0))

    @property
    def end(self) -> float | None:
        """When the listener's playback of what was sent ends (None: unpaced or nothing)."""
        return self._end if self._lead is not None else None

    def sent(self, seconds: float) -> float | None:
        """Record `seconds` more audio sent; return when it starts playing (None: unpaced)."""
        now = self._clock.monotonic()
        starts = max(self._end or now, now)
        self._end = starts + seconds
        return starts if self._lead is not None else None

    async def drain(self) -> None:
        """Sleep until playback of everything sent has ended."""
        if self._lead is not None and self._end is not None:
            await anyio.sleep(max(self._end - self._clock.monotonic(), 0.0))


class Speaker:
    """Speaks responses for one conversation in one voice (until `voice` changes: a transfer
    to another agent) and one output format."""

    def __init__(
        self,
        synthesizer: Synthesizer,
        *,
        voice: str,
        output_format: AudioFormat,
        chunk_ms: int,
        lead_s: float | None,
        clock: Clock,
        emit: Emit,
        speed: float = 1.0,
        pronounce: Callable[[str], str] | None = None,
    ) -> None:
        """`speed` is the synthesizer's pace; `pronounce` rewrites each sentence's text
        before synthesis (the pronunciation dictionary), never the text sent with it."""
        self._synthesizer = synthesizer
        self._speed = speed
        self._pronounce = pronounce
        self._voice = voice
        self._prepared: dict[tuple[str, str], asyncio.Future[bytes]] = {}
        self._format = output_format
        self._chunk_ms = chunk_ms
        self._lead_s = lead_s
        self._clock = clock
        self._emit = emit

    @property
    def voice(self) -> str:
        return self._voice

    @voice.setter
    def voice(self, voice: str) -> None:
        """Speak later sentences in `voice` (a voice the synthesizer resolved)."""
        self._voice = voice

    async def speak(
        self, parts: AsyncGenerator[ReplyPart | Break, None], response: Response
    ) -> None:
        """Speak a reply stream to its end; cancel `response.scope` to stop it."""
        pacer = Pacer(self._clock, self._lead_s)
        splitter = SentenceSplitter()
        ending = silent = handing = False
        async with aclosing(parts) as stream:
            response.waiting = True
            async for part in stream:
                response.waiting = False
                if isinstance(part, EndConversation):
                    ending = True
                elif isinstance(part, HandOver):
                    handing = True
                elif isinstance(part, StaySilent):
                    silent = True
                elif isinstance(part, str):
                    for sentence in splitter.feed(part):
                        await self._sentence(sentence, response, pacer)
                else:  # the text before a tool call (or a Break) is complete: say it now
                    for sentence in splitter.flush():
                        await self._sentence(sentence, response, pacer)
                    if isinstance(part, ToolCallPart):
                        response.calls_passed += 1
                        response.after_calls = len(response.sent)
                    elif isinstance(part, PressKeys):
                        await self._keys(part.digits, response, pacer)
                response.waiting = not splitter.pending
        response.waiting = False
        for sentence in splitter.flush():
            await self._sentence(sentence, response, pacer)
        await pacer.drain()
        if silent and not response.started:  # silence chosen, nothing said: no framing
            response.finished = True
            await self._emit(AssistantChoseNotToRespond())
            return
        if not response.started:  # nothing was spoken: frame the response all the same
            response.started = True
            await self._emit(AssistantStartedSpeaking())
        await self._emit(AssistantFinishedSpeaking())
        response.finished = True
        if silent:
            await self._emit(AssistantChoseNotToRespond())
        if ending:
            await self._emit(AssistantEndedConversation())
        elif handing:
            await self._emit(AssistantHandedOff())

    async def _keys(self, digits: str, response: Response, pacer: Pacer) -> None:
        """Press keys: KeypadPressed, its tones counted as playback (see the module doc)."""
        if not response.started:
            response.started = True
            response.first_audio_at = self._clock.monotonic()
            await self._emit(AssistantStartedSpeaking())
        await pacer.wait_for_room()
        await self._emit(KeypadPressed(digits))
        response.on_air.set()
        pacer.sent(key_seconds(digits))
        response.playing_until = pacer.end

    def prepare(self, text: str) -> None:
        """Render the sentences of `text` ahead (a held welcome: it is spoken the moment the
        callee's first turn ends, with no synthesis then); `speak` uses them once."""
        splitter = SentenceSplitter()
        for sentence in splitter.feed(text) + splitter.flush():
            key = (sentence, self._voice)
            if key not in self._prepared:
                self._prepared[key] = asyncio.ensure_future(self._render(sentence))

    def discard_prepared(self) -> None:
        """Drop what was rendered ahead and not spoken (the conversation ends)."""
        for task in self._prepared.values():
            task.cancel()
        self._prepared.clear()

    async def _render(self, sentence: str) -> bytes:
        said = self._pronounce(sentence) if self._pronounce is not None else sentence
        samples = await self._synthesizer.synthesize(said, voice=self._voice, speed=self._speed)
        rate = self._synthesizer.sample_rate
        return await anyio.to_thread.run_sync(render, samples, rate, self._format)

    async def _sentence(self, sentence: str, response: Response, pacer: Pacer) -> None:
        if response.turn is not None:
            response.turn.sentence(self._clock.monotonic())
        fmt = self._format
        ready = self._prepared.pop((sentence, self._voice), None)
        data = await ready if ready is not None else await self._render(sentence)
        seconds = fmt.duration(data)
        for index, chunk in enumerate(split_chunks(fmt, data, self._chunk_ms)):
            turn = None
            if not response.started:
                response.started = True
                response.first_audio_at = self._clock.monotonic()
                if response.turn is not None:
                    turn = response.turn.marks(response.first_audio_at)
                await self._emit(AssistantStartedSpeaking())
            await pacer.wait_for_room()
            await self._emit(AudioChunk(chunk, sentence if index == 0 else "", turn))
            response.on_air.set()
            starts = pacer.sent(fmt.duration(chunk))
            response.playing_until = pacer.end
            if index == 0:
                response.sent.append(_Played(sentence, starts, seconds))
