"""An agent's languages (API.md sections 4 and 18): the rules, and a conversation's voices.

1. `default_language` is section 4's `language` under the official SDK's name. A request
   (create, `PATCH`, upsert, the socket's `config`) may give either; one that gives both
   takes `default_language` (`default_of`), whatever `language` says.
2. `additional_languages`: at most `MAX_ADDITIONAL`, none twice, none the default language
   (400 `validation_error` naming the field).
3. Each of the agent's languages is one the installed recognizer hears, else 400
   `unsupported_language` naming the field: additional languages need a multilingual
   recognizer (`PARLEY_STT_MODEL=base` or larger; tiny.en hears `en` alone).
4. Each of them speaks with an installed voice of that language (`GET /v1/voices` lists
   each voice's `language`), else 400 `unsupported_language`.
5. `multilingual_mode`: `auto`, `initial` or `request` (engine/languages.py says what each
   does); null means `auto`. It matters only with additional languages.

A conversation's voices (`session_languages`): each language speaks with the agent's
`voice_id` when that voice speaks it, else with the first installed voice that does
(services/voices.py `voice_for`); the conversation starts in the default language's voice
(an unknown `voice_id` is kept: the engine warns about it, `voice_not_available`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from parley import engine
from parley.errors import ValidationFailed
from parley.records import Agent
from parley.services.voices import SpeechCatalog, UnsupportedLanguage, voice_for

MAX_ADDITIONAL: Final = 4
MODES: Final = engine.MULTILINGUAL_MODES


def default_of(language: str | None, default_language: str | None) -> str | None:
    """Rule 1: the default language a request gives (`default_language` wins)."""
    return default_language if default_language is not None else language


def check_additional(default: str, additional: Sequence[str]) -> None:
    """Rule 2: refuse a list that is too long, repeats a language or names the default."""
    problem = None
    if len(additional) > MAX_ADDITIONAL:
        problem = f"at most {MAX_ADDITIONAL} languages"
    elif len(set(additional)) != len(additional):
        problem = "must not name a language twice"
    elif default in additional:
        problem = f"must not name the default language {default!r}"
    if problem is not None:
        raise ValidationFailed(param_errors={"additional_languages": problem})


def check_languages(
    speech: SpeechCatalog | None, *, default: str, additional: Sequence[str]
) -> None:
    """Rules 2 to 4 for an agent's (or a conversation's) languages; `speech` None (no
    engine to ask): rule 2 alone."""
    check_additional(default, additional)
    if speech is None:
        return
    heard = speech.languages()
    fields = [("language", default)] + [("additional_languages", a) for a in additional]
    for field, language in fields:
        if heard is not None and language not in heard:
            rule = f"must be one of: {', '.join(sorted(heard))}"
            if heard == {"en"}:
                rule += "; other languages need a multilingual speech model (PARLEY_STT_MODEL=base)"
            raise UnsupportedLanguage(param_errors={field: rule})
        if not any(voice.language == language for voice in speech.voices()):
            raise UnsupportedLanguage(
                param_errors={field: f"no installed voice speaks {language!r}"}
            )


@dataclass(frozen=True, slots=True)
class Languages:
    """A conversation's languages: its default, the others, how the reply's is chosen."""

    default: str
    additional: tuple[str, ...] = ()
    mode: str | None = None


ENGLISH_ONLY: Final = Languages("en")


def configured(
    agent: Agent,
    *,
    language: str | None,
    default_language: str | None,
    additional: Sequence[str] | None,
    mode: str | None,
    speech: SpeechCatalog | None,
) -> Languages:
    """A conversation's languages: those its `config` gives (rule 1 for the default, rules
    2 to 4 checked), else its agent's. A default the config gives is dropped from the
    agent's additional languages."""
    default = default_of(language, default_language)
    chosen = Languages(
        default or agent.language,
        tuple(additional)
        if additional is not None
        else tuple(a for a in agent.additional_languages if a != default),
        mode or agent.multilingual_mode,
    )
    if default is not None or additional is not None:
        check_languages(speech, default=chosen.default, additional=chosen.additional)
    return chosen


def session_languages(
    speech: SpeechCatalog | None,
    *,
    default: str,
    additional: Sequence[str],
    mode: str | None,
    voice_id: str,
) -> tuple[str, engine.LanguageSettings]:
    """The voice a conversation starts with and its language settings: a voice for each
    of its languages (the agent's own where it speaks the language)."""
    languages = (default, *additional)
    voices = tuple(
        (language, voice)
        for language in languages
        if speech is not None
        and (voice := voice_for(speech, language, preferred=voice_id)) is not None
    )
    settings = engine.LanguageSettings(
        additional=tuple(additional), mode=mode or "auto", voices=voices
    )
    if speech is None or speech.language_of(voice_id) is None:
        return voice_id, settings  # an unknown voice: the engine warns and uses its default
    return dict(voices).get(default, voice_id), settings
