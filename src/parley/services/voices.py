"""The voices an agent may speak with and the languages it may listen in (API.md section 4).

`GET /v1/voices` lists the voices the process's synthesizer has installed; creating or
updating an agent refuses a `voice_id` the synthesizer cannot resolve (400 `unknown_voice`:
its aliases such as the default `us_female` count) and a `language` the recognizer does not
know (400 `unsupported_language`; tiny.en knows only `en`, base and small Whisper's 99
languages: parley.engine.recognizers.models).

Each voice speaks one language (`Voice.language`: the synthesizer's `language_of`, else
English): hibari's voices speak English, espeak-ng's `espeak-<tag>` voices the other
languages (engine/synthesizers). `voice_for` picks the voice a language speaks with; the
rules of an agent's languages are services/languages.py's.

The services see the engine through `SpeechCatalog`, built once per process from the engine
factory the app holds (`catalog_of`), never by building an engine themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from parley.engine import EngineFactory, Recognizer, Synthesizer, WhisperRecognizer
from parley.errors import InvalidRequest

VOICE_LANGUAGE = "en"
"""The language of a voice whose synthesizer names none (hibari's Kokoro voices are en-US
and en-GB)."""


class UnknownVoice(InvalidRequest):
    """The agent's `voice_id` names no installed voice."""

    code = "unknown_voice"
    message = "The voice_id names no installed voice: GET /v1/voices lists them."


class UnsupportedLanguage(InvalidRequest):
    """The agent's `language` is not one the installed recognizer understands."""

    code = "unsupported_language"
    message = "The speech recognizer installed does not understand this language."


@dataclass(frozen=True, slots=True)
class Voice:
    """One installed voice, as `GET /v1/voices` shows it."""

    id: str
    name: str
    language: str


class SpeechCatalog(Protocol):
    """What the engine of this process can speak and hear."""

    def voices(self) -> tuple[Voice, ...]:
        """The installed voices."""
        ...

    def knows_voice(self, voice_id: str) -> bool:
        """Whether `voice_id` (a voice or one of its aliases) can be spoken."""
        ...

    def languages(self) -> frozenset[str] | None:
        """The primary language tags the recognizer understands (None: any)."""
        ...

    def language_of(self, voice_id: str) -> str | None:
        """The language `voice_id` (a voice or one of its aliases) speaks; None: unknown."""
        ...


@runtime_checkable
class _SpeaksLanguages(Protocol):
    """A synthesizer that says which language each voice speaks (the engine's do)."""

    def language_of(self, voice: str) -> str: ...


def spoken_language(synthesizer: Synthesizer, voice: str) -> str:
    """The language `synthesizer`'s `voice` speaks (`VOICE_LANGUAGE` when it names none)."""
    if isinstance(synthesizer, _SpeaksLanguages):
        return synthesizer.language_of(voice)
    return VOICE_LANGUAGE


class EngineSpeech:
    """A SpeechCatalog read from the engine's synthesizer and recognizer."""

    def __init__(self, synthesizer: Synthesizer, recognizer: Recognizer | None) -> None:
        self._synthesizer = synthesizer
        self._languages = _recognizer_languages(recognizer)

    def voices(self) -> tuple[Voice, ...]:
        """The synthesizer's voices, each named for display, with its language."""
        return tuple(
            Voice(id=name, name=_display_name(name), language=self._language(name))
            for name in self._synthesizer.voices()
        )

    def knows_voice(self, voice_id: str) -> bool:
        """Whether the synthesizer resolves `voice_id`."""
        return self._synthesizer.resolve_voice(voice_id) is not None

    def language_of(self, voice_id: str) -> str | None:
        """The language of the voice `voice_id` resolves to (None: no such voice)."""
        voice = self._synthesizer.resolve_voice(voice_id)
        return None if voice is None else self._language(voice)

    def _language(self, voice: str) -> str:
        return spoken_language(self._synthesizer, voice)

    def languages(self) -> frozenset[str] | None:
        """The recognizer's languages (None: no recognizer that cares, e.g. PARLEY_STT=none)."""
        return self._languages


def catalog_of(factory: EngineFactory) -> SpeechCatalog | None:
    """The catalog of the process's engine factory, or None when it exposes no synthesizer
    (a factory made by a test for another purpose: nothing is checked then)."""
    synthesizer = getattr(factory, "synthesizer", None)
    if synthesizer is None:
        return None
    return EngineSpeech(synthesizer, getattr(factory, "recognizer", None))


def cached_catalog(state: Any) -> SpeechCatalog | None:
    """The catalog of `state.engine_factory` (the app's state), made once and kept there."""
    catalog: SpeechCatalog | None = getattr(state, "speech_catalog", None)
    if catalog is None:
        catalog = state.speech_catalog = catalog_of(state.engine_factory)
    return catalog


def check_speech(
    speech: SpeechCatalog | None, *, voice_id: str | None, language: str | None
) -> None:
    """Refuse a voice or a language the engine cannot use (None values are not checked)."""
    if speech is None:
        return
    if voice_id is not None and not speech.knows_voice(voice_id):
        raise UnknownVoice(param_errors={"voice_id": f"{voice_id!r} is not an installed voice"})
    known = speech.languages()
    if language is not None and known is not None and language not in known:
        raise UnsupportedLanguage(
            param_errors={"language": f"must be one of: {', '.join(sorted(known))}"}
        )


def _display_name(voice: str) -> str:
    return voice.replace("_", " ").replace("-", " ").title() if voice.islower() else voice


def _recognizer_languages(recognizer: Recognizer | None) -> frozenset[str] | None:
    if not isinstance(recognizer, WhisperRecognizer):
        return None  # the placeholder recognizer hears no words in any language
    return recognizer.languages


def voice_for(speech: SpeechCatalog, language: str, *, preferred: str) -> str | None:
    """The voice `language` speaks with: `preferred` (the agent's `voice_id`) when it speaks
    that language, else the first installed voice that does (None: none does)."""
    if speech.language_of(preferred) == language:
        return preferred
    return next((voice.id for voice in speech.voices() if voice.language == language), None)


def list_voices(speech: SpeechCatalog | None) -> tuple[Voice, ...]:
    """The installed voices (none when the process has no synthesizer to ask)."""
    return speech.voices() if speech is not None else ()
