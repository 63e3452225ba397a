"""DTMF tones for the `keypad_input` built-in tool (API.md section 15).

Each key is the sum of its ITU-T Q.23 row and column frequencies, 100 ms of tone then 100 ms
of silence, at 8 kHz by default (a phone call's rate). Each frequency peaks at 0.35 of full
scale (together 0.7: no clipping, about -9 dBm0 per tone after mu-law).
"""

from __future__ import annotations

from typing import Final

import numpy as np

from parley.engine.audio import Samples

KEYS: Final[dict[str, tuple[int, int]]] = {
    "1": (697, 1209),
    "2": (697, 1336),
    "3": (697, 1477),
    "4": (770, 1209),
    "5": (770, 1336),
    "6": (770, 1477),
    "7": (852, 1209),
    "8": (852, 1336),
    "9": (852, 1477),
    "*": (941, 1209),
    "0": (941, 1336),
    "#": (941, 1477),
}
"""The (row, column) frequencies in Hz of each key a model may press."""
TONE_S: Final = 0.1
GAP_S: Final = 0.1
AMPLITUDE: Final = 0.35


def key_seconds(digits: str) -> float:
    """How long the tones of `digits` last (each key's tone and gap)."""
    return len(digits) * (TONE_S + GAP_S)


def tones(digits: str, sample_rate: int = 8000) -> Samples:
    """The tones of `digits` in order, as float samples at `sample_rate`.

    Raises KeyError for a character that is no key of KEYS.
    """
    tone_n, gap_n = round(TONE_S * sample_rate), round(GAP_S * sample_rate)
    t = np.arange(tone_n, dtype=np.float64) / sample_rate
    gap = np.zeros(gap_n, dtype=np.float64)
    pieces: list[np.ndarray] = []
    for key in digits:
        low, high = KEYS[key]
        pieces.append(AMPLITUDE * (np.sin(2 * np.pi * low * t) + np.sin(2 * np.pi * high * t)))
        pieces.append(gap)
    if not pieces:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate(pieces).astype(np.float32)
