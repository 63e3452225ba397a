"""Interruptions that are meant (API.md section 18), in the engine: real speech rendered by
hibari, played over the agent's reply at real-time pace, heard by the real VAD and Whisper.

The agent speaks with the tone synthesizer (its audio is not what is judged), slowly
enough that its reply outlasts the longest speech played over it (`TONE_WORD_S`); the
pacing is the service's (0.5 s ahead of playback).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import anyio
import pytest
from tests import overlaps, speech
from tests.engine.conftest import ToneSynthesizer
from tests.engine.recorder import Recorder

from parley.engine import (
    AgentTuning,
    AssistantPaused,
    AssistantResumed,
    DefaultEngineFactory,
    InputText,
    InterruptedResponse,
    SessionConfig,
    UserFinishedSpeaking,
    UserStartedSpeaking,
)
from parley.engine.recognizers import WhisperRecognizer

pytestmark = pytest.mark.anyio

TONE_WORD_S = 0.12
"""The tone reply's time per word: REPLY (73 words) lasts 8.8 s, so after the lead-in there
is more of it than the long interruption and the silence after it (3.1 + 1.6 s), and speech
over it really overlaps it (at 60 ms a word, 4.4 s, the reply could end before the
interruption's words did)."""


@pytest.fixture
async def factory() -> AsyncIterator[DefaultEngineFactory]:
    """Per test: the recognizer's queue belongs to one event loop (the model is cached)."""
    built = DefaultEngineFactory(
        ToneSynthesizer(word_s=TONE_WORD_S), recognizer=WhisperRecognizer()
    )
    await built.warm_up()
    yield built
    await built.aclose()


async def played_over(
    factory: DefaultEngineFactory, config: SessionConfig, sound: speech.Samples, min_words: int = 1
) -> overlaps.Overlap:
    config = dataclasses.replace(config, tuning=AgentTuning(min_words_to_interrupt=min_words))
    recorder = Recorder()
    async with factory.create(config) as engine, anyio.create_task_group() as group:
        group.start_soon(recorder.consume, engine)
        overlap = await overlaps.over_agent(engine, recorder, sound, fmt=config.input_format)
        await engine.close()
    return overlap


async def test_backchannel_over_agent_no_interruption_no_turn(
    factory: DefaultEngineFactory, config: SessionConfig
) -> None:
    overlap = await played_over(factory, config, speech.spoken("Uh-huh."))
    assert overlap.paused_at is not None  # heard as speech: the agent paused...
    assert overlap.resumed, overlap  # ...and went on
    assert overlap.finished, overlap  # to the end
    assert overlap.interrupted is None
    assert overlap.heard == []  # no input_text, no item, no reply
    assert UserStartedSpeaking not in overlap.kinds
    assert UserFinishedSpeaking not in overlap.kinds
    assert " ".join(overlap.sentences) == overlaps.REPLY


async def test_min_words_to_interrupt_1_one_word_interrupts(
    factory: DefaultEngineFactory, config: SessionConfig
) -> None:
    overlap = await played_over(factory, config, speech.spoken(overlaps.SHORT), min_words=1)
    assert overlap.interrupted is not None
    assert not overlap.resumed
    assert [speech.words(text) for text in overlap.heard] == [["wait"]]
    assert overlap.kinds.index(UserStartedSpeaking) < overlap.kinds.index(InterruptedResponse)
    assert overlaps.REPLY.startswith(overlap.interrupted.text)
    assert len(overlap.interrupted.text) < len(overlaps.REPLY)


async def test_min_words_to_interrupt_3_one_word_resumes(
    factory: DefaultEngineFactory, config: SessionConfig
) -> None:
    overlap = await played_over(factory, config, speech.spoken(overlaps.SHORT), min_words=3)
    assert overlap.paused_at is not None
    assert overlap.resumed, overlap
    assert overlap.finished, overlap
    assert overlap.interrupted is None
    assert overlap.heard == []
    assert " ".join(overlap.sentences) == overlaps.REPLY


async def test_long_interruption_stops_agent_at_onset(
    factory: DefaultEngineFactory, config: SessionConfig
) -> None:
    sound = speech.spoken(overlaps.LONG)
    played_s = overlaps.LEAD_IN_S + sound.size / speech.RATE + overlaps.AFTER_S
    assert len(overlaps.REPLY.split()) * TONE_WORD_S > played_s  # the reply outlasts it
    overlap = await played_over(factory, config, sound, min_words=3)
    assert overlap.interrupted is not None
    assert overlap.stop_ms is not None
    assert overlap.stop_ms < 300, overlap.stop_ms
    assert AssistantResumed not in overlap.kinds
    assert speech.word_errors(overlaps.LONG, " ".join(overlap.heard)) <= 1, overlap.heard


async def test_noise_burst_over_agent_resumed_whole_reply_kept(
    factory: DefaultEngineFactory, config: SessionConfig
) -> None:
    overlap = await played_over(factory, config, overlaps.noise_burst())
    assert AssistantPaused in overlap.kinds, overlap.kinds  # the VAD took it for a voice
    assert overlap.resumed, overlap
    assert overlap.finished, overlap
    assert overlap.interrupted is None
    assert overlap.heard == []
    assert " ".join(overlap.sentences) == overlaps.REPLY


async def test_audio_paused_no_chunk_until_resumed(
    factory: DefaultEngineFactory, config: SessionConfig
) -> None:
    overlap = await played_over(factory, config, speech.spoken("Okay."))
    kinds = overlap.kinds
    paused, resumed = kinds.index(AssistantPaused), kinds.index(AssistantResumed)
    assert resumed == paused + 1  # no audio_chunk while paused
    assert InputText not in kinds
