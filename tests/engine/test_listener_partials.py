"""Partial decodes while the user speaks: off by default (they saved no time and held the
recognizer under load), and, when a deployment turns them on, the words two partials agree
on are forced onto the final decode."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from tests import speech
from tests.engine.fake_recognizer import FakeRecognizer, listener_of

from parley.engine import Utterance
from parley.engine.audio import resample
from parley.engine.default import EngineSettings
from parley.engine.vad import Transition

pytestmark = pytest.mark.anyio
SENTENCE = "I need to speak with a doctor about my prescription."


class ScriptedRecognizer(FakeRecognizer):
    """A partial hears the sentence's words so far, a final all of them."""

    async def answer(self, utterance: Utterance, *, partial: bool) -> str | None:
        if not partial:
            return SENTENCE
        words = SENTENCE.split()
        heard = max(2, round(len(words) * min(1.0, utterance.samples.size / 16_000 / 3.5)))
        return " ".join(words[:heard])


async def decodes(partial_interval_s: float | None) -> tuple[list[tuple[bool, str]], str]:
    recognizer = ScriptedRecognizer()
    listener = listener_of(recognizer, partial_interval_s=partial_interval_s)
    audio = np.concatenate([speech.silence(0.3), speech.spoken(SENTENCE), speech.silence(0.6)])
    samples = resample(audio, speech.RATE, 16_000)
    words = ""
    try:
        for start in range(0, samples.size, 320):
            for event in listener.feed(samples[start : start + 320]):
                if event.kind is Transition.FINISHED:
                    task = listener.take_turn(event)
                    assert task is not None
                    result = await task
                    words = result.text if result else ""
            await asyncio.sleep(0.001)  # let a partial finish, as real time would
    finally:
        await listener.aclose()
    return recognizer.calls, words


async def test_listener_partial_decodes_off_by_default() -> None:
    assert EngineSettings().partial_interval_s is None
    calls, words = await decodes(EngineSettings().partial_interval_s)
    assert calls == [(False, "")]  # the one final, nothing forced onto it
    assert words == SENTENCE


async def test_listener_partial_decodes_when_on_force_agreed_words_onto_the_final() -> None:
    calls, words = await decodes(0.5)
    partials = [prefix for partial, prefix in calls if partial]
    finals = [prefix for partial, prefix in calls if not partial]
    assert len(partials) >= 3
    assert len(finals) == 1
    assert finals[0]  # words two partials agreed on
    assert SENTENCE.startswith(finals[0])
    assert words == SENTENCE
