"""The recording's side: redacted words to times, and those times covered by a 1 kHz tone."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pytest

from parley.redaction import TONE_DBFS, TONE_HZ, Span, Tag, join_words, redact, tone_out, tone_spans

RATE = 16_000
FADE = 80  # 5 ms at 16 kHz
TONE_RMS = 10 ** (TONE_DBFS / 20) / math.sqrt(2)


@dataclass(frozen=True)
class Word:
    text: str
    start: float
    end: float


def said(*timed: tuple[str, float, float]) -> list[Word]:
    return [Word(*word) for word in timed]


PHONE_CALL = said(
    ("My", 0.0, 0.2), ("number", 0.2, 0.5), ("is", 0.5, 0.6),
    ("four", 0.8, 1.0), ("one", 1.0, 1.2), ("five,", 1.2, 1.5),
    ("five", 1.6, 1.8), ("five", 1.8, 2.0), ("five,", 2.0, 2.3),
    ("two", 2.4, 2.6), ("six", 2.6, 2.8), ("seven", 2.8, 3.0), ("one.", 3.0, 3.3),
    ("Thanks.", 3.6, 4.0),
)  # fmt: skip


def test_tone_spans_cover_the_words_that_said_it() -> None:
    transcript = join_words(PHONE_CALL)
    redacted = redact(transcript)
    assert redacted.text == "My number is [PHONE_NUMBER]. Thanks."
    assert tone_spans(PHONE_CALL, redacted.spans) == [(0.8, 3.3)]


def test_tone_spans_read_words_with_the_recognizer_spacing() -> None:
    words = said((" call", 0.0, 0.3), (" 415-555-2671", 0.4, 2.0), (" now", 2.1, 2.3))
    assert join_words(words) == "call 415-555-2671 now"
    assert tone_spans(words, redact(join_words(words)).spans) == [(0.4, 2.0)]


def test_tone_spans_cover_a_word_partly_redacted_whole() -> None:
    words = said(("mail:jane@example.com,", 1.0, 2.5), ("bye", 2.6, 2.9))
    spans = redact(join_words(words)).spans
    assert spans == (Span(5, 21, Tag.EMAIL),)
    assert tone_spans(words, spans) == [(1.0, 2.5)]


def test_tone_spans_merge_spans_whose_words_touch_or_overlap() -> None:
    words = said(("a", 0.0, 1.0), ("b", 1.0, 2.0), ("c", 1.5, 3.0), ("d", 4.0, 5.0))
    spans = [(0, 1, "x"), (2, 3, "x"), (4, 5, "x"), (6, 7, "x")]
    assert tone_spans(words, spans) == [(0.0, 3.0), (4.0, 5.0)]


def test_tone_spans_of_no_span_are_none() -> None:
    assert tone_spans(PHONE_CALL, []) == []


def voice(seconds: float) -> npt.NDArray[np.float32]:
    """A stand-in for speech: two partials at half scale."""
    t = np.arange(round(seconds * RATE)) / RATE
    return (0.3 * np.sin(2 * np.pi * 220 * t) + 0.2 * np.sin(2 * np.pi * 3100 * t)).astype(
        np.float32
    )


def test_tone_out_interval_carries_the_tones_energy_and_pitch() -> None:
    samples = voice(1.0)
    out = tone_out(samples, RATE, [(0.25, 0.75)])
    inside = out[4000 + FADE : 12000 - FADE].astype(np.float64)
    assert math.sqrt(np.mean(inside**2)) == pytest.approx(TONE_RMS, rel=0.01)
    spectrum = np.abs(np.fft.rfft(inside))
    frequencies = np.fft.rfftfreq(len(inside), 1 / RATE)
    assert frequencies[np.argmax(spectrum)] == pytest.approx(TONE_HZ, abs=5)
    at_voice = spectrum[np.argmin(np.abs(frequencies - 220))]
    assert at_voice < spectrum.max() * 1e-3  # nothing of what was said is left


def test_tone_out_leaves_audio_outside_the_intervals_untouched() -> None:
    samples = voice(1.0)
    before = samples.copy()
    out = tone_out(samples, RATE, [(0.25, 0.5), (0.6, 0.75)])
    assert np.array_equal(samples, before)  # a copy: the input is not changed
    assert out.dtype == np.float32
    for outside in (slice(0, 4000), slice(8000, 9600), slice(12000, None)):
        assert np.array_equal(out[outside], samples[outside])
    assert not np.array_equal(out[4000:8000], samples[4000:8000])


def test_tone_out_fades_so_the_cut_makes_no_click() -> None:
    samples = voice(1.0)
    out = tone_out(samples, RATE, [(0.25, 0.75)]).astype(np.float64)
    largest_step = max(
        np.abs(np.diff(samples.astype(np.float64))).max(),
        2 * np.pi * TONE_HZ / RATE * 10 ** (TONE_DBFS / 20),
    )
    assert np.abs(np.diff(out)).max() <= largest_step * 1.05


def test_tone_out_merges_overlaps_and_clips_to_the_audio() -> None:
    samples = voice(1.0)
    once = tone_out(samples, RATE, [(0.5, 1.5)])
    assert np.array_equal(tone_out(samples, RATE, [(0.5, 0.9), (0.7, 2.0), (-1.0, -0.5)]), once)
    assert np.array_equal(once[:8000], samples[:8000])
    inside = once[8000 + FADE : 16000 - FADE].astype(np.float64)
    assert math.sqrt(np.mean(inside**2)) == pytest.approx(TONE_RMS, rel=0.01)


def test_tone_out_covers_a_very_short_interval() -> None:
    out = tone_out(np.zeros(RATE, dtype=np.float32), RATE, [(0.5, 0.5005)])
    assert np.count_nonzero(out[8000:8008]) > 0
    assert np.count_nonzero(out[:8000]) == 0
    assert np.count_nonzero(out[8009:]) == 0


@pytest.mark.parametrize(
    ("samples", "rate", "intervals", "message"),
    [
        (np.zeros((10, 2), dtype=np.float32), RATE, [], "mono"),
        (np.zeros(10, dtype=np.float32), 0, [], "positive"),
        (np.zeros(10, dtype=np.float32), RATE, [(0.0, math.nan)], "finite"),
    ],
    ids=["stereo", "rate zero", "not finite"],
)
def test_tone_out_refuses_what_it_cannot_cover(
    samples: npt.NDArray[np.float32],
    rate: int,
    intervals: list[tuple[float, float]],
    message: str,
) -> None:
    with pytest.raises(ValueError, match=message):
        tone_out(samples, rate, intervals)
