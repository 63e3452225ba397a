"""The offline stand-in for speech recognition.

No recognizer model ships with Parley, so each utterance becomes a placeholder transcript such
as "[speech 1.2 s]" (marked placeholder=True, so reply generators know no words were heard).
A real recognizer implements parley.engine.base.Recognizer and is handed to
DefaultEngineFactory(recognizer=...); see docs/engine.md.
"""

from __future__ import annotations

from parley.engine.base import Transcript
from parley.engine.vad import Utterance


class PlaceholderRecognizer:
    """Reports the duration of each utterance instead of its words."""

    sample_rate = 16_000

    async def transcribe(self, utterance: Utterance, *, language: str) -> Transcript:
        """Return "[speech N.N s]" for the utterance's speech duration."""
        return Transcript(
            f"[speech {utterance.speech_seconds:.1f} s]", language=language, placeholder=True
        )
