"""The DTMF tones of `keypad_input` (engine/dtmf.py), read back with an FFT."""

from __future__ import annotations

import numpy as np
import pytest

from parley.engine import AudioFormat
from parley.engine.audio import decode, encode
from parley.engine.dtmf import KEYS, key_seconds, tones

Q23 = {
    "1": (697, 1209), "2": (697, 1336), "3": (697, 1477),
    "4": (770, 1209), "5": (770, 1336), "6": (770, 1477),
    "7": (852, 1209), "8": (852, 1336), "9": (852, 1477),
    "*": (941, 1209), "0": (941, 1336), "#": (941, 1477),
}  # fmt: skip
"""ITU-T Q.23, written out again here so a typo in the module cannot pass."""


def strongest_pair(samples: np.ndarray, rate: int) -> tuple[float, float]:
    """The two strongest frequencies (Hz, ascending) of a tone, zero-padded for resolution."""
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples)), n=1 << 16))
    hz = np.fft.rfftfreq(1 << 16, 1 / rate)
    first = int(np.argmax(spectrum))
    far = np.abs(hz - hz[first]) > 60  # the other peak, not the first one's skirt
    second = int(np.argmax(np.where(far, spectrum, 0)))
    low, high = sorted((float(hz[first]), float(hz[second])))
    return low, high


def read_keys(samples: np.ndarray, rate: int) -> list[tuple[float, float]]:
    """Per 100 ms tone (each followed by 100 ms of gap), its frequency pair."""
    step = int(0.1 * rate)
    return [
        strongest_pair(samples[at : at + step], rate) for at in range(0, len(samples), 2 * step)
    ]


def assert_pairs(found: list[tuple[float, float]], digits: str) -> None:
    assert len(found) == len(digits)
    for (low, high), key in zip(found, digits, strict=True):
        want_low, want_high = Q23[key]
        assert abs(low - want_low) <= 0.015 * want_low, (key, low)
        assert abs(high - want_high) <= 0.015 * want_high, (key, high)


def test_dtmf_keys_are_the_q23_pairs() -> None:
    assert KEYS == Q23


@pytest.mark.parametrize("rate", [8000, 16000])
def test_dtmf_each_tone_reads_back_as_its_q23_pair(rate: int) -> None:
    digits = "0123456789*#"
    samples = tones(digits, rate)
    assert len(samples) == round(key_seconds(digits) * rate)
    assert_pairs(read_keys(samples.astype(np.float64), rate), digits)


def test_dtmf_tone_100_ms_then_100_ms_gap_without_clipping() -> None:
    samples = tones("5#", 8000)
    assert len(samples) == 3200
    assert np.max(np.abs(samples[:800])) > 0.5
    assert np.max(np.abs(samples)) <= 1.0
    assert not np.any(samples[800:1600])
    assert not np.any(samples[2400:])
    assert np.max(np.abs(samples[1600:2400])) > 0.5


def test_dtmf_through_mulaw_still_reads_back_as_its_pairs() -> None:
    wire = encode(AudioFormat.MULAW_8000, tones("159#*0", 8000))
    assert len(wire) == 6 * 1600  # 8000 bytes a second, 0.2 s a key
    back = decode(AudioFormat.MULAW_8000, wire).astype(np.float64)
    assert_pairs(read_keys(back, 8000), "159#*0")


def test_dtmf_no_digits_is_no_audio() -> None:
    assert len(tones("")) == 0


def test_dtmf_unknown_key_raises_key_error() -> None:
    with pytest.raises(KeyError):
        tones("1A")
