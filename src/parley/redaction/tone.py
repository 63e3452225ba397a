"""The recording's side of redaction: what was redacted in words, covered by a tone.

`tone_spans` turns the spans `redact` found in a transcript into the times of the words
that said them; `tone_out` replaces those times of the audio by a 1 kHz sine at -12 dBFS
(peak), faded in and out over 5 ms inside each interval so the cut makes no click; audio
outside the intervals is left exactly as it was.

The transcript is the words joined as `join_words` joins them: that is what fixes where
each word's characters are. A word any part of which is in a span is covered whole.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

TONE_HZ = 1000.0
TONE_DBFS = -12.0
FADE_SECONDS = 0.005


class TimedWord(Protocol):
    """A recognized word and when it was said, in seconds from the start of the audio."""

    @property
    def text(self) -> str: ...

    @property
    def start(self) -> float: ...

    @property
    def end(self) -> float: ...


def join_words(words: Sequence[TimedWord]) -> str:
    """Return the transcript `tone_spans` reads: each word stripped, one space between."""
    return " ".join(word.text.strip() for word in words)


def tone_spans(
    words: Sequence[TimedWord], transcript_spans: Iterable[tuple[int, int, str]]
) -> list[tuple[float, float]]:
    """Return the times, in order and merged, of the words that `transcript_spans` touch.

    `transcript_spans` are character spans of `join_words(words)`, as `redact` reports
    them (`Redacted.spans`); the tag is not read.
    """
    places: list[tuple[int, int]] = []
    position = 0
    for word in words:
        length = len(word.text.strip())
        places.append((position, position + length))
        position += length + 1
    intervals: list[tuple[float, float]] = []
    for start, end, _tag in transcript_spans:
        said = [
            word
            for word, (first, last) in zip(words, places, strict=True)
            if first < end and start < last
        ]
        if said:
            intervals.append((min(w.start for w in said), max(w.end for w in said)))
    return _merged(intervals)


def tone_out(
    samples: npt.NDArray[np.float32], rate: int, intervals: Iterable[tuple[float, float]]
) -> npt.NDArray[np.float32]:
    """Return a copy of mono `samples` with each interval (seconds) replaced by the tone.

    Intervals may overlap and reach past the audio: they are merged and clipped. Each
    covers the samples from the floor of its start to the ceiling of its end.
    """
    if samples.ndim != 1:
        raise ValueError(f"mono samples expected, not an array of shape {samples.shape}")
    if rate <= 0:
        raise ValueError(f"a sample rate must be positive, not {rate}")
    out = samples.astype(np.float32, copy=True)
    amplitude = 10.0 ** (TONE_DBFS / 20.0)
    for start, end in _merged(intervals):
        first = max(0, math.floor(start * rate))
        last = min(len(out), math.ceil(end * rate))
        if last <= first:
            continue
        count = last - first
        tone = amplitude * np.sin(2.0 * np.pi * TONE_HZ * np.arange(count) / rate)
        gain = np.ones(count)
        fade = min(round(FADE_SECONDS * rate), count // 2)
        if fade:
            ramp = 0.5 - 0.5 * np.cos(np.pi * (np.arange(fade) + 0.5) / fade)
            gain[:fade] = ramp
            gain[count - fade :] = ramp[::-1]
        mixed = out[first:last] * (1.0 - gain) + tone * gain
        out[first:last] = mixed.astype(np.float32)
    return out


def _merged(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The intervals sorted, overlapping or touching ones joined; empty ones dropped."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if not (math.isfinite(start) and math.isfinite(end)):
            raise ValueError(f"an interval must be finite, not {start}..{end}")
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
