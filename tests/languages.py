"""Speech in other languages for the recognizer tests: espeak-ng renders it at test time.

hibari speaks English only; Debian's espeak-ng (scripts/install-espeak, run by scripts/test)
speaks German and Spanish. Its voices are robotic: the sentences are ones Whisper base hears
with at most two words wrong at espeak's default speed (most others came out garbled).
A missing espeak-ng fails the test that needs it, with the command that installs it.
"""

from __future__ import annotations

import functools
import io
import re
import shutil
import subprocess
import wave

import numpy as np

from parley.engine import Samples
from parley.engine.audio import resample
from tests import speech

GERMAN = "Guten Tag, ich möchte mit einem Arzt sprechen."
SPANISH = "Buenos días, necesito hablar con un médico."
RATE = 24_000  # as tests/speech.py: speech.stream takes these arrays
_PUNCTUATION = re.compile(r"[^\w' ]+")


@functools.cache
def espeak_spoken(text: str, voice: str) -> Samples:
    """`text` spoken by espeak-ng's `voice` (de, es, ...), at 24 kHz."""
    program = shutil.which("espeak-ng")
    assert program is not None, "espeak-ng is missing: run scripts/install-espeak"
    wav = subprocess.run(  # noqa: S603 - the program found on PATH, fixed arguments
        [program, "-v", voice, "--stdout", text], capture_output=True, check=True, timeout=30
    ).stdout
    with wave.open(io.BytesIO(wav)) as reader:
        rate = reader.getframerate()
        pcm = np.frombuffer(reader.readframes(reader.getnframes()), dtype=np.int16)
    return resample((pcm / 32_768).astype(np.float32), rate, RATE)


def words(text: str) -> list[str]:
    """Lower-case words without punctuation, accents kept (tests/speech.py drops them)."""
    return _PUNCTUATION.sub(" ", text.lower()).split()


def word_errors(reference: str, hypothesis: str) -> int:
    """The word-level edit distance of the two, by `words`."""
    return speech.word_errors(reference, hypothesis, split=words)
