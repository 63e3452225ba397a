"""The scripted caller's voice (API.md section 19): another voice than the agent's, of the
language the agent hears (services/scenario_caller.py: caller_voice); and whether it waits
for the agent to greet first (may_greet)."""

from __future__ import annotations

import dataclasses

from parley.engine.audio import Samples
from parley.records import DEFAULT_DELIVERY, ConfigurationEndpoint
from parley.services.scenario_caller import caller_voice, may_greet
from tests.factories import agent_record


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


def test_caller_waits_for_a_welcome_only_when_the_agent_may_greet() -> None:
    """A scripted caller speaks at once to an agent with no welcome; it waits for one when
    the agent has a welcome message, writes one with the model, or may get one from its
    configuration endpoint (services/scenario_caller.py: may_greet)."""
    endpoint = ConfigurationEndpoint(url="https://x.test/", headers={}, timeout_ms=500, secret="s")
    assert may_greet(agent_record()) is False
    assert may_greet(agent_record(welcome_message="Hello!")) is True
    generated = dataclasses.replace(DEFAULT_DELIVERY, generate_welcome_message=True)
    assert may_greet(agent_record(delivery=generated)) is True
    assert may_greet(agent_record(configuration_endpoint=endpoint)) is True
