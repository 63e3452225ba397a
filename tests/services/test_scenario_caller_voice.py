"""The scripted caller's voice (API.md section 19): another voice than the agent's, of the
language the agent hears (services/scenario_caller.py: caller_voice)."""

from __future__ import annotations

from parley.engine.audio import Samples
from parley.services.scenario_caller import caller_voice


class Voices:
    """A synthesizer's catalogue: voices and the language each speaks."""

    sample_rate = 24_000
    default_voice = "heart"

    def __init__(self, languages: dict[str, str]) -> None:
        self._languages = languages

    def voices(self) -> tuple[str, ...]:
        return tuple(self._languages)

    def resolve_voice(self, voice_id: str) -> str | None:
        return voice_id if voice_id in self._languages else None

    def language_of(self, voice: str) -> str:
        return self._languages[voice]

    def describe(self, voice: str) -> str | None:
        return voice

    async def warm_up(self) -> None:
        return None

    async def synthesize(self, text: str, *, voice: str, speed: float = 1.0) -> Samples:
        raise AssertionError("not used")


def test_caller_voice_other_than_the_agents_of_the_agents_language() -> None:
    synthesizer = Voices({"espeak-de": "de", "heart": "en", "espeak-es": "es", "adam": "en"})

    assert caller_voice(synthesizer, "heart", language="en") == "adam"  # not espeak-de
    assert caller_voice(synthesizer, "adam", language="en") == "heart"
    assert caller_voice(synthesizer, "heart", language="es") == "espeak-es"


def test_caller_voice_is_the_agents_when_no_other_speaks_its_language() -> None:
    synthesizer = Voices({"heart": "en", "espeak-de": "de"})

    assert caller_voice(synthesizer, "heart", language="en") == "heart"
