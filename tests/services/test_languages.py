"""A conversation's voice per language (services/languages.py `session_languages`) and the
rule of the default language's two names, against the engine's installed voices."""

from __future__ import annotations

import pytest

from parley.engine import PlaceholderRecognizer, load_synthesizer
from parley.services.languages import default_of, session_languages
from parley.services.voices import EngineSpeech, SpeechCatalog


@pytest.fixture(scope="module")
def speech() -> SpeechCatalog:
    return EngineSpeech(load_synthesizer(), PlaceholderRecognizer())


def test_default_of_default_language_wins_over_language() -> None:
    assert default_of("en", "de") == "de"
    assert default_of("en", None) == "en"
    assert default_of(None, None) is None


def test_session_languages_each_language_its_voice_the_agents_where_it_speaks_it(
    speech: SpeechCatalog,
) -> None:
    voice, settings = session_languages(
        speech, default="en", additional=("de", "es"), mode=None, voice_id="us_female"
    )
    assert voice == "us_female"
    assert dict(settings.voices) == {"en": "us_female", "de": "espeak-de", "es": "espeak-es"}
    assert (settings.additional, settings.mode) == (("de", "es"), "auto")


def test_session_languages_default_language_not_the_voices_starts_in_one_of_its_own(
    speech: SpeechCatalog,
) -> None:
    voice, settings = session_languages(
        speech, default="de", additional=("en",), mode="request", voice_id="heart"
    )
    assert voice == "espeak-de"  # heart speaks English, the agent's other language
    assert dict(settings.voices) == {"de": "espeak-de", "en": "heart"}


def test_session_languages_unknown_voice_kept_for_the_engine_to_warn(
    speech: SpeechCatalog,
) -> None:
    voice, _settings = session_languages(
        speech, default="en", additional=(), mode=None, voice_id="nobody"
    )
    assert voice == "nobody"
