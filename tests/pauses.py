"""Sentences with a pause inside, as a speaker who stops to think: "a table for, … two".

The sentence is rendered whole by hibari (tests/speech.py), so the words before the pause
keep the intonation of a sentence going on, and silence is put between two of its words.
Where the words are comes from faster-whisper's word timestamps on the rendering (tiny.en's are
rough); the cut is at the quietest 10 ms from 150 ms before the first word's end to 50 ms
after the second word's start.
"""

from __future__ import annotations

import functools
import itertools
import re

import numpy as np

from parley.engine import Samples
from parley.engine.audio import resample
from tests import speech

# Words after which a thought is plainly not finished: a pause there is a hesitation.
HOLDING_WORDS = frozenset(
    "a an the my your our for to of at on in from with about and is are was me near".split()
)


@functools.cache
def _model() -> object:
    from faster_whisper import WhisperModel

    from parley.engine.recognizers import default_model_dir

    return WhisperModel(str(default_model_dir()), device="cpu", compute_type="int8", cpu_threads=2)


@functools.cache
def word_spans(sentence: str) -> tuple[tuple[str, float, float], ...]:
    """(word, start, end) in seconds of the sentence's rendering (tests/speech.spoken)."""
    audio = resample(speech.spoken(sentence), speech.RATE, 16_000)
    segments, _ = _model().transcribe(  # type: ignore[attr-defined]
        audio, language="en", word_timestamps=True, beam_size=1
    )
    return tuple((_bare(w.word), float(w.start), float(w.end)) for s in segments for w in s.words)


def pause_points(sentence: str) -> list[tuple[int, float]]:
    """Where a hesitation fits: (index of the word before it, seconds into the rendering)."""
    spans = word_spans(sentence)
    audio = speech.spoken(sentence)
    points = []
    for index, ((word, _, end), (_, start, _)) in enumerate(itertools.pairwise(spans)):
        if index == 0 or word not in HOLDING_WORDS:
            continue
        points.append((index, _quietest(audio, end - 0.15, start + 0.05)))
    return points


def paused(sentence: str, after_word: str, seconds: float) -> tuple[Samples, float, float]:
    """The sentence with `seconds` of silence after the first `after_word` that holds a pause.

    Returns the audio at 24 kHz and, in seconds into it, where the pause starts and where
    the speech ends.
    """
    spans = word_spans(sentence)
    for index, at in pause_points(sentence):
        if spans[index][0] == after_word:
            return with_pause(sentence, at, seconds)
    raise LookupError(f"no pause point after {after_word!r} in {sentence!r}: {spans}")


def with_pause(sentence: str, at: float, seconds: float) -> tuple[Samples, float, float]:
    """The sentence with `seconds` of silence at `at`: (audio, pause start, speech end)."""
    audio = speech.spoken(sentence)
    cut = round(at * speech.RATE)
    joined = np.concatenate((audio[:cut], speech.silence(seconds), audio[cut:]))
    voiced = np.flatnonzero(np.abs(joined) > 0.01)
    return joined, cut / speech.RATE, float(voiced[-1] / speech.RATE)


def _quietest(audio: Samples, start: float, end: float) -> float:
    """The middle of the quietest 10 ms of `audio` between two times (seconds)."""
    step = speech.RATE // 100
    first, last = max(round(start * speech.RATE), 0), min(round(end * speech.RATE), audio.size)
    if last - first < step:
        return (start + end) / 2
    frames = [audio[i : i + step] for i in range(first, last - step + 1, step)]
    loudness = [float(np.sqrt(np.mean(f * f))) for f in frames]
    return (first + int(np.argmin(loudness)) * step + step // 2) / speech.RATE


def _bare(word: str) -> str:
    return re.sub(r"[^a-z']", "", word.lower())
