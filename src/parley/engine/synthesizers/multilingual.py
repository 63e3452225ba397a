"""One synthesizer of the product voice (hibari, English) and espeak-ng's voices of the other
languages (API.md section 18): an agent's languages each speak with a voice of their own.

The voices of hibari keep their names; those of other languages are espeak-ng's
(`espeak-de`, ...), synthesized at hibari's rate so a conversation's audio has one rate.
"""

from __future__ import annotations

from parley.engine.audio import Samples
from parley.engine.base import Synthesizer
from parley.engine.synthesizers.espeak import EspeakSynthesizer


class WithLanguageVoices:
    """`primary`'s voices, and `others`' voices of languages other than English."""

    def __init__(self, primary: Synthesizer, others: EspeakSynthesizer) -> None:
        self._primary = primary
        self._others = others
        self._other_voices = frozenset(others.language_voices())

    @property
    def sample_rate(self) -> int:
        """The primary's rate (the others are synthesized at it)."""
        return self._primary.sample_rate

    @property
    def default_voice(self) -> str:
        """The primary's default voice."""
        return self._primary.default_voice

    def voices(self) -> tuple[str, ...]:
        """The primary's voices, then the other languages'."""
        return (*self._primary.voices(), *sorted(self._other_voices))

    def resolve_voice(self, voice_id: str) -> str | None:
        """The primary's voice for `voice_id`, else another language's voice."""
        voice = self._primary.resolve_voice(voice_id)
        if voice is not None:
            return voice
        other = self._others.resolve_voice(voice_id)
        return other if other in self._other_voices else None

    def describe(self, voice: str) -> str | None:
        """The voice's accent or language, as the synthesizer that speaks it says."""
        speaker = self._others if voice in self._other_voices else self._primary
        describe = getattr(speaker, "describe", None)
        return describe(voice) if describe is not None else None

    def language_of(self, voice: str) -> str:
        """The primary language tag `voice` speaks (the primary's are English)."""
        return self._others.language_of(voice) if voice in self._other_voices else "en"

    async def warm_up(self) -> None:
        """Load the primary's default voice (espeak-ng loads nothing)."""
        await self._primary.warm_up()

    async def synthesize(self, text: str, *, voice: str, speed: float = 1.0) -> Samples:
        """Speak `text` with the synthesizer `voice` belongs to."""
        if voice in self._other_voices:
            return await self._others.synthesize(text, voice=voice, speed=speed)
        return await self._primary.synthesize(text, voice=voice, speed=speed)
