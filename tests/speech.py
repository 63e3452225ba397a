"""Real speech for the tests: hibari-tts renders sentences, encoded in any wire format.

Recognizer, VAD and end-to-end tests stream these as a client would (20 ms chunks). The
sentences are fixed, so word error rates are comparable from run to run.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import numpy as np

from parley.engine import AudioFormat, HibariSynthesizer, Samples
from parley.engine.audio import encode, resample, split_chunks

SENTENCES = (
    "Please book me a table for two at seven tonight.",
    "I would like to cancel my order from last week.",
    "What time does the store open on Sunday morning?",
    "My package arrived damaged and I need a replacement.",
    "Can you tell me the balance on my account?",
    "I forgot my password and cannot log in.",
    "Is there a pharmacy near the train station?",
    "The weather today is sunny with a light breeze.",
    "Could you transfer me to the billing department?",
    "We need three tickets for the concert on Friday.",
    "How much does it cost to ship a parcel to Canada?",
    "I want to change the address on my account.",
    "Do you have this jacket in a larger size?",
    "My flight was delayed and I missed my connection.",
    "Please send me a copy of my last invoice.",
    "Is the museum open on public holidays?",
    "I need to speak with a doctor about my prescription.",
    "Can I pay the rest of the bill next month?",
    "The internet in my apartment stopped working yesterday.",
    "Thank you for your help, that is all for today.",
    "Which platform does the next train to Boston leave from?",
    "I would like to renew my library card please.",
)

RATE = 24_000
_WORD = re.compile(r"[^a-z0-9' ]+")


@functools.cache
def _voice() -> HibariSynthesizer:
    return HibariSynthesizer()


@functools.cache
def spoken(text: str) -> Samples:
    """The sentence spoken by hibari's default voice, at 24 kHz."""
    voice = _voice()
    tts = voice._voice(voice.default_voice)
    return np.asarray(tts.tts(text, seed=0), dtype=np.float32)


def silence(seconds: float) -> Samples:
    return np.zeros(round(seconds * RATE), dtype=np.float32)


def stream(fmt: AudioFormat, *parts: Samples | float, chunk_ms: int = 20) -> list[bytes]:
    """Encode speech (arrays at 24 kHz) and silences (seconds) as `chunk_ms` wire chunks."""
    audio = np.concatenate([silence(p) if isinstance(p, float | int) else p for p in parts])
    return split_chunks(fmt, encode(fmt, resample(audio, RATE, fmt.sample_rate)), chunk_ms)


def words(text: str) -> list[str]:
    """Normalize a transcript to lower-case words without punctuation."""
    return _WORD.sub(" ", text.lower().replace("-", " ")).split()


def word_errors(
    reference: str, hypothesis: str, *, split: Callable[[str], list[str]] = words
) -> int:
    """Return the word-level edit distance (substitutions, insertions, deletions) between
    the words `split` finds in each (by default `words`)."""
    ref, hyp = split(reference), split(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (r != h))
    return row[-1]
