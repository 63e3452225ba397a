"""The recognizer for machines that cannot run a model (PARLEY_STT=none).

Each utterance becomes a placeholder transcript such as "[speech 1.2 s]" (placeholder=True,
so reply generators know no words were heard).
"""

from __future__ import annotations

from collections.abc import Sequence

from parley.engine.base import Transcript, Utterance


class PlaceholderRecognizer:
    """Reports the duration of each utterance instead of its words."""

    sample_rate = 16_000
    incremental = False

    async def warm_up(self) -> None:
        """Nothing to load."""

    async def transcribe(
        self,
        utterance: Utterance,
        *,
        language: str,
        prefix: str = "",  # noqa: ARG002 (no words to continue)
        partial: bool = False,
        prompt: str = "",  # noqa: ARG002 (no words to bias)
        words: bool = False,  # noqa: ARG002 (no words to time)
        languages: Sequence[str] = (),  # noqa: ARG002 (no words to tell a language by)
    ) -> Transcript | None:
        """Return "[speech N.N s]" for the utterance's speech duration."""
        if partial:
            return None
        return Transcript(
            f"[speech {utterance.speech_seconds:.1f} s]", language=language, placeholder=True
        )

    async def aclose(self) -> None:
        """Nothing to release."""
