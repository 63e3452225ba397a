"""Honest turn timings and silence as time (API.md section 18; engine/timing.py).

The end of speech is when the last voiced audio arrived; a client that stops sending after
speech still has its turn ended, on the wall clock, in both end-of-turn modes.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import numpy as np
import pytest
from tests import speech
from tests.engine.recorder import Recorder

from parley.engine import (
    AudioChunk,
    ConversationEngine,
    DefaultEngineFactory,
    EngineSettings,
    InputText,
    SessionConfig,
    SmartTurn,
    Synthesizer,
    UserFinishedSpeaking,
    Word,
)
from parley.engine.default import _InputClock
from parley.engine.timing import IDLE_GRACE_S, READ_LATE_S, Arrivals, TurnClock, TurnMarks

HELLO = "Hello, I need some help with my order."
FAST = EngineSettings(playback_lead_s=None)


def test_arrival_of_audio_is_when_the_piece_holding_it_came() -> None:
    arrivals = Arrivals()
    for index in range(5):  # 20 ms pieces, arriving 20 ms apart from t=10
        arrivals.heard(0.02, 10.0 + 0.02 * index)

    assert arrivals.arrival(0.0) == 10.0
    assert arrivals.arrival(0.031) == pytest.approx(10.02)  # in the second piece
    assert arrivals.arrival(0.04) == pytest.approx(10.02)  # its last sample
    assert arrivals.arrival(5.0) == pytest.approx(10.08)  # past the end: the last piece
    assert Arrivals().arrival(1.0) is None


def test_arrival_of_a_piece_read_late_is_dated_by_the_pieces_read_on_time_after_it() -> None:
    """The loop stood still from 10.19 to 10.35: the pieces sent meanwhile were all read at
    10.35, the ones after on time. The user's speech that ended in piece 12 (sent at 10.24)
    ended then, not when this process got round to reading it."""
    arrivals = Arrivals()
    for index in range(40):  # sent every 20 ms from t=10
        sent = 10.0 + 0.02 * index
        arrivals.heard(0.02, 10.35 if 10.19 < sent < 10.35 else sent)

    assert arrivals.arrival(0.02 * 12 + 0.01) == pytest.approx(10.24)
    assert arrivals.arrival(0.02 * 17 + 0.01) == pytest.approx(10.34)
    assert arrivals.arrival(0.02 * 5 + 0.01) == pytest.approx(10.10)  # read on time


def test_arrival_read_late_correction_capped_for_a_client_faster_than_real_time() -> None:
    """Two seconds of audio sent at once look like a long stall: at most READ_LATE_S is taken
    off."""
    arrivals = Arrivals()
    for _ in range(100):
        arrivals.heard(0.02, 10.0)

    assert arrivals.arrival(0.01) == pytest.approx(10.0 - READ_LATE_S)
    assert arrivals.arrival(1.99) == pytest.approx(10.0)  # nothing after it: as read


def test_silence_owed_only_after_the_grace_then_all_the_time_since_the_last_audio() -> None:
    arrivals = Arrivals()
    assert arrivals.owed(5.0) == 0.0  # nothing heard yet
    arrivals.heard(0.02, 10.0)

    assert arrivals.owed(10.0 + IDLE_GRACE_S - 0.01) == 0.0  # jitter, a stall: not yet
    gap = IDLE_GRACE_S + 0.05
    assert arrivals.owed(10.0 + gap) == pytest.approx(gap)  # the whole gap counts
    arrivals.invented(gap, 10.0 + gap)
    assert arrivals.owed(10.0 + gap + 0.05) == pytest.approx(0.05)  # then time as it passes
    arrivals.heard(0.02, 10.0 + gap + 0.06)  # the client sends again
    assert arrivals.owed(10.0 + gap + 0.1) == 0.0


def test_arrival_inside_invented_silence_is_the_instant_that_place_stands_for() -> None:
    arrivals = Arrivals()
    arrivals.heard(0.02, 10.0)
    arrivals.invented(0.3, 10.3)  # stream 0.02-0.32 stands for wall 10.0-10.3

    assert arrivals.arrival(0.05) == pytest.approx(10.03)


def test_input_clock_takes_invented_silence_out_of_word_times() -> None:
    clock = _InputClock()
    clock.heard(1.0)
    clock.invented(0.2)
    clock.invented(0.3)  # more of the same silence
    clock.heard(1.0)

    assert clock.placed(Word("hi", 1.7, 1.9)) == Word("hi", pytest.approx(1.2), pytest.approx(1.4))
    assert clock.placed(Word("so", 0.2, 0.4)) == Word("so", 0.2, 0.4)


def test_turn_clock_marks_first_of_each_and_unreached_stages_at_first_audio() -> None:
    clock = TurnClock(speech_ended=1.0, decided=1.3, transcribed=1.35)
    clock.token(1.5)
    clock.token(1.6)  # later pieces: not the first token

    assert clock.marks(1.9) == TurnMarks(1.0, 1.3, 1.35, 1.5, 1.9, 1.9)


def voiced_only(sentence: str) -> np.ndarray:
    """The sentence cut after its last voiced sample (the voice's own silence dropped)."""
    audio = speech.spoken(sentence)
    return audio[: np.flatnonzero(np.abs(audio) > 0.01)[-1] + 1]


@asynccontextmanager
async def running(
    synthesizer: Synthesizer, config: SessionConfig, *, semantic: bool
) -> AsyncIterator[tuple[ConversationEngine, Recorder]]:
    factory = DefaultEngineFactory(
        synthesizer, settings=FAST, turn_model=SmartTurn() if semantic else None
    )
    await factory.warm_up()
    recorder = Recorder()
    try:
        async with factory.create(config) as engine, anyio.create_task_group() as group:
            group.start_soon(recorder.consume, engine)
            yield engine, recorder
            await engine.close()
    finally:
        await factory.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("semantic", [False, True], ids=["vad", "end_of_turn_model"])
async def test_silence_is_time_client_that_stops_after_speech_gets_its_reply(
    tone_synthesizer: Synthesizer, config: SessionConfig, semantic: bool
) -> None:
    """Push-to-talk: the speech and not a frame of silence after it, then nothing."""
    chunks = speech.stream(config.input_format, 0.3, voiced_only(HELLO))
    async with running(tone_synthesizer, config, semantic=semantic) as (engine, recorder):
        for chunk in chunks:
            await engine.feed_audio(chunk)
        stopped = anyio.current_time()
        await recorder.wait_for(InputText)
        await recorder.wait_for(AudioChunk)
    kinds = [type(event) for event in recorder.events]
    finished = recorder.times[kinds.index(UserFinishedSpeaking)]
    waited = finished - stopped
    # The end-of-turn wait (400 ms of silence; 300 ms for a finished thought) counts from
    # the last audio, as if silence had kept coming (bound: a loaded machine's slack).
    assert 0.25 <= waited <= 1.2, waited
    first = next(e for e in recorder.events if isinstance(e, AudioChunk))
    assert first.turn is not None
    assert first.turn.speech_ended <= first.turn.decided <= first.turn.first_audio


@pytest.mark.anyio
async def test_end_of_speech_is_when_the_last_voiced_audio_arrived(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    """Real-time chunks: the turn's `speech_ended` is the arrival of the chunk holding the
    last voiced audio, not the end-of-turn decision 400 ms later."""
    fmt = config.input_format
    voiced = np.flatnonzero(np.abs(speech.spoken(HELLO)) > 0.01)
    last_voiced = int((0.3 + voiced[-1] / speech.RATE) / 0.02)  # its 20 ms chunk
    chunks = speech.stream(fmt, 0.3, speech.spoken(HELLO), 1.0)
    sent: list[float] = []
    async with running(tone_synthesizer, config, semantic=False) as (engine, recorder):
        started = time.monotonic()
        for index, chunk in enumerate(chunks):
            sent.append(time.monotonic())
            await engine.feed_audio(chunk)
            await anyio.sleep(max(0.0, started + 0.02 * (index + 1) - time.monotonic()))
        await recorder.wait_for(AudioChunk)
    first = next(e for e in recorder.events if isinstance(e, AudioChunk))
    assert first.turn is not None
    assert abs(first.turn.speech_ended - sent[last_voiced]) <= 0.06
    assert first.turn.decided - first.turn.speech_ended >= 0.35  # the 400 ms wait, honest


def test_stall_of_this_process_is_excused_not_owed() -> None:
    arrivals = Arrivals()
    arrivals.heard(0.02, 10.0)
    arrivals.excuse(1.0)  # this process stood still for a second right after
    assert arrivals.owed(10.0 + 1.0 + IDLE_GRACE_S - 0.01) == 0.0  # the grace starts again
    gap = IDLE_GRACE_S + 0.05
    assert arrivals.owed(11.0 + gap) == pytest.approx(gap)  # the stall is never owed
    assert Arrivals().owed(3.0) == 0.0
    Arrivals().excuse(1.0)  # nothing heard yet: nothing to excuse


@pytest.mark.anyio
async def test_stalled_event_loop_mid_sentence_is_no_pause_of_the_client(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    """The process stands still for longer than the grace and the end-of-turn wait together
    right after the first half of a sentence (the client's frames of that time wait unread):
    no turn ends, and the sentence is one turn when the rest comes."""
    audio = voiced_only(HELLO)
    half = len(audio) // 2
    first, rest = speech.stream(config.input_format, 0.3, audio[:half]), audio[half:]
    async with running(tone_synthesizer, config, semantic=False) as (engine, recorder):
        for chunk in first:
            await engine.feed_audio(chunk)
        await anyio.sleep(0.1)  # the first half is heard (well inside the grace)
        time.sleep(IDLE_GRACE_S + 1.0)  # noqa: ASYNC251 # the whole process stands still, on purpose
        await anyio.sleep(0.2)  # the timer runs again, late
        assert UserFinishedSpeaking not in [type(event) for event in recorder.events]
        for chunk in speech.stream(config.input_format, 0.0, rest):
            await engine.feed_audio(chunk)
        await recorder.wait_for(InputText)
    (heard,) = [event for event in recorder.events if isinstance(event, InputText)]
    # The fake recognizer names the utterance's length: longer than all the first half
    # (its leading quiet too), so the rest is in the same turn.
    said = float(heard.text.removeprefix("[speech ").removesuffix(" s]"))
    assert said > half / speech.RATE, (heard.text, half / speech.RATE)
