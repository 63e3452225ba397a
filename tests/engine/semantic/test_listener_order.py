"""When the listener asks the end-of-turn model: after its turn's speculative decode, which
the reply needs anyway (the two side by side slow each other down on two cores; asking the
model at once under load was tried and measured worse: docs/performance.md)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from tests import speech
from tests.engine.fake_recognizer import FakeRecognizer, listener_of

from parley.engine import SmartTurn, Utterance
from parley.engine.audio import Samples, resample

pytestmark = pytest.mark.anyio


class HeldRecognizer(FakeRecognizer):
    """A recognizer whose final decodes finish only when the test releases them."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.events: list[str] = []

    async def answer(self, utterance: Utterance, *, partial: bool) -> str | None:
        if partial:
            return None
        await self.release.wait()
        self.events.append("decoded")
        return "words"


class RecordingTurnModel(SmartTurn):
    """The real model, noting when it is asked."""

    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    async def probability(self, samples: Samples) -> tuple[float, float]:
        self.events.append("asked")
        return await super().probability(samples)


async def order_of_events() -> list[str]:
    recognizer = HeldRecognizer()
    model = RecordingTurnModel(recognizer.events)
    listener = listener_of(recognizer, turn_model=model)
    try:
        audio = np.concatenate(
            [
                speech.silence(0.3),
                speech.spoken(speech.SENTENCES[0]),
                speech.silence(0.2),  # past PAUSED, short of the end of the turn
            ]
        )
        samples = resample(audio, speech.RATE, 16_000)
        for start in range(0, samples.size, 320):
            listener.feed(samples[start : start + 320])
            await asyncio.sleep(0)
        for _ in range(100):  # up to 2 s for the model, if it is not waiting for the decode
            if recognizer.events:
                break
            await asyncio.sleep(0.02)
        recognizer.release.set()
        for _ in range(100):
            if len(recognizer.events) == 2:
                break
            await asyncio.sleep(0.02)
        return recognizer.events
    finally:
        await listener.aclose()
        await model.aclose()


async def test_listener_end_of_turn_model_asked_after_the_speculative_decode() -> None:
    assert await order_of_events() == ["decoded", "asked"]
