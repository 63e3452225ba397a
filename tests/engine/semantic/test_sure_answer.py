"""How long a turn waits for each answer of the end-of-turn model (SemanticParams): one it
judges finished after `check_ms` of silence, an unfinished one after `max_silence_ms`; with
`sure_ms` set (off by default), a thought it is all but sure is finished after `sure_ms`."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from tests import speech
from tests.engine.fake_recognizer import FakeRecognizer, listener_of

from parley.engine import SmartTurn
from parley.engine.audio import Samples, resample
from parley.engine.semantic import SemanticParams
from parley.engine.vad import Transition

pytestmark = pytest.mark.anyio
RATE = 16_000


class FixedTurnModel(SmartTurn):
    """An end-of-turn model that always answers `probability`, at once."""

    def __init__(self, probability: float) -> None:
        super().__init__()
        self.answer = probability

    async def probability(self, samples: Samples) -> tuple[float, float]:
        return self.answer, 0.0


SURE = SemanticParams(sure_ms=200)


async def silence_that_ended_the_turn(
    probability: float, params: SemanticParams | None = None
) -> float:
    """Seconds of silence after the last voiced window when the turn ended."""
    model = FixedTurnModel(probability)
    listener = listener_of(FakeRecognizer(), turn_model=model, semantic=params)
    try:
        audio = np.concatenate(
            [speech.silence(0.3), speech.spoken(speech.SENTENCES[0]), speech.silence(2.0)]
        )
        samples = resample(audio, speech.RATE, RATE)
        for start in range(0, samples.size, 320):
            for event in listener.feed(samples[start : start + 320]):
                if event.kind is Transition.FINISHED:
                    return (start + 320) / RATE - event.time
            for _ in range(5):  # let the decode and the model's answer run
                await asyncio.sleep(0)
        raise AssertionError("the turn never ended")
    finally:
        await listener.aclose()


async def test_semantic_sure_answer_ends_the_turn_after_sure_ms() -> None:
    silence = await silence_that_ended_the_turn(0.99, SURE)
    assert 0.2 <= silence < 0.26, silence  # in whole 32 ms windows, 20 ms chunks


async def test_semantic_finished_answer_below_sure_threshold_waits_check_ms() -> None:
    check = SURE.check_ms / 1000
    silence = await silence_that_ended_the_turn(0.8, SURE)
    assert check <= silence < check + 0.06, silence


async def test_semantic_sure_wait_off_by_default_every_finished_answer_waits_check_ms() -> None:
    assert SemanticParams().sure_ms is None
    check = SemanticParams().check_ms / 1000
    silence = await silence_that_ended_the_turn(0.99)
    assert check <= silence < check + 0.06, silence


async def test_semantic_unfinished_answer_waits_max_silence() -> None:
    longest = SemanticParams().max_silence_ms / 1000
    silence = await silence_that_ended_the_turn(0.2)
    assert longest <= silence < longest + 0.06, silence


def test_semantic_params_wait_for_each_answer() -> None:
    params = SemanticParams(check_ms=300, sure_ms=200, threshold=0.5, sure_threshold=0.95)
    assert [params.wait_ms(p) for p in (0.99, 0.95, 0.7, 0.5, 0.1)] == [200, 300, 300, None, None]
    words_ms = SemanticParams().words_ms  # the words' wait (test_words.py)
    assert params.checks_ms == (200, 300, words_ms)
    assert SemanticParams(check_ms=300, sure_ms=300).checks_ms == (300, words_ms)
    assert SemanticParams(check_ms=300).wait_ms(0.99) == 300
    assert SemanticParams(check_ms=300).checks_ms == (300, words_ms)


def test_semantic_params_sure_wait_not_longer_than_check_refused() -> None:
    with pytest.raises(ValueError, match="sure_ms"):
        SemanticParams(check_ms=300, sure_ms=400)
    with pytest.raises(ValueError, match="sure_threshold"):
        SemanticParams(threshold=0.9, sure_threshold=0.8)
