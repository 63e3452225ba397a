"""A multilingual agent's languages in the engine (API.md section 18; engine/languages.py):
which languages a turn is detected among, the reply's language and voice, by mode."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Sequence

import anyio
import pytest
from tests import speech
from tests.engine.conftest import ToneSynthesizer
from tests.engine.recorder import Recorder

from parley.engine import (
    AssistantFinishedSpeaking,
    DefaultEngineFactory,
    EndConversation,
    EngineSettings,
    InputText,
    LanguageSettings,
    ReplyPart,
    ReplyRequest,
    RuleBasedReplies,
    Samples,
    SessionConfig,
    Transcript,
    Utterance,
    requested_language,
)
from parley.engine.languages import LanguageChoice

FAST = EngineSettings(playback_lead_s=None)
SETTINGS = LanguageSettings(
    additional=("de", "es"), voices=(("en", "tone"), ("de", "tone-de"), ("es", "tone-es"))
)


def turn(text: str, language: str) -> Transcript:
    return Transcript(text, language)


# --- the choice, mode by mode ----------------------------------------------------------------


def test_language_choice_one_language_detects_nothing_and_keeps_its_language() -> None:
    choice = LanguageChoice("en", LanguageSettings())
    assert choice.candidates() == ()
    assert choice.heard(turn("Hola.", "es")) is None
    assert choice.current == "en"
    assert choice.instruction() is None  # an English agent's prompt stays its own


def test_language_choice_one_other_language_instructs_the_model() -> None:
    choice = LanguageChoice("de", LanguageSettings())
    assert choice.instructed("Be brief.") == (
        "Be brief.\n\nReply in German (de): the user hears your reply spoken in that language."
    )


def test_language_choice_auto_each_turn_detected_and_answered_in_its_language() -> None:
    choice = LanguageChoice("en", SETTINGS)
    assert choice.candidates() == ("en", "de", "es")
    assert choice.heard(turn("Guten Tag.", "de")) == "de"
    assert choice.candidates() == ("en", "de", "es")
    assert choice.heard(turn("Buenos días.", "es")) == "es"
    assert choice.heard(turn("Hello.", "en")) == "en"
    assert choice.heard(turn("Hi again.", "en")) is None  # no change
    assert choice.voice("es") == "tone-es"


def test_language_choice_initial_first_turn_decides_for_the_conversation() -> None:
    choice = LanguageChoice("en", dataclasses.replace(SETTINGS, mode="initial"))
    assert choice.candidates() == ("en", "de", "es")
    assert choice.heard(turn("Guten Tag.", "de")) == "de"
    assert choice.candidates() == ()  # decided: decoded in German from now on
    assert choice.heard(turn("Buenos días.", "es")) is None
    assert choice.current == "de"


def test_language_choice_request_switches_only_when_the_user_asks() -> None:
    choice = LanguageChoice("en", dataclasses.replace(SETTINGS, mode="request"))
    assert choice.heard(turn("Guten Tag, ich habe eine Frage.", "de")) is None
    assert choice.current == "en"
    assert choice.candidates() == ("en", "de", "es")  # the words are heard in any of them
    assert choice.heard(turn("Can we speak Spanish, please?", "en")) == "es"
    assert choice.heard(turn("Sí, gracias.", "es")) is None
    assert choice.heard(turn("Können wir bitte Deutsch sprechen?", "de")) == "de"


@pytest.mark.parametrize(
    ("said", "language"),
    [
        ("Can we speak Spanish?", "es"),
        ("¿Podemos hablar en inglés?", "en"),
        ("Auf Deutsch, bitte.", "de"),
        ("Could you switch to german", "de"),
        ("podemos hablar espanol", "es"),
        ("Spanish food is great.", None),
        ("Can we speak French?", None),  # not one of the agent's languages
        ("I would like a table for two.", None),
    ],
)
def test_requested_language_names_one_of_the_agents_languages(
    said: str, language: str | None
) -> None:
    assert requested_language(said, ("en", "de", "es")) == language


# --- the engine: detection, the reply's language and voice -----------------------------------


class DetectingRecognizer:
    """Answers each final with `words`, reporting `heard` when it is among the languages
    asked to detect (else the language it was told to decode in); notes each call."""

    sample_rate = 16_000
    incremental = False

    def __init__(self, words: list[tuple[str, str]]) -> None:
        self.words = words
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    async def warm_up(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def transcribe(
        self,
        utterance: Utterance,
        *,
        language: str,
        prefix: str = "",
        partial: bool = False,
        prompt: str = "",
        words: bool = False,
        languages: Sequence[str] = (),
    ) -> Transcript | None:
        self.asked.append((language, tuple(languages)))
        text, heard = self.words.pop(0)
        return Transcript(text, heard if heard in languages else language)


class VoicesSynthesizer(ToneSynthesizer):
    """The tone in three voices; notes which voice said what."""

    def __init__(self) -> None:
        super().__init__()
        self.spoken: list[tuple[str, str]] = []

    def voices(self) -> tuple[str, ...]:
        return ("tone", "tone-de", "tone-es")

    def resolve_voice(self, voice_id: str) -> str | None:
        return voice_id if voice_id in self.voices() else super().resolve_voice(voice_id)

    async def synthesize(self, text: str, *, voice: str, speed: float = 1.0) -> Samples:
        self.spoken.append((voice, text))
        return await super().synthesize(text, voice="tone", speed=speed)


class NotedReplies(RuleBasedReplies):
    """The rule-based replier, noting each request."""

    def __init__(self) -> None:
        self.requests: list[ReplyRequest] = []

    async def reply(self, request: ReplyRequest) -> AsyncGenerator[ReplyPart, None]:
        self.requests.append(request)
        async for part in super().reply(request):
            if not isinstance(part, EndConversation):
                yield part


async def converse(
    config: SessionConfig, said: list[tuple[str, str]]
) -> tuple[DetectingRecognizer, VoicesSynthesizer, NotedReplies, Recorder]:
    """One conversation of `said` user turns, each answered before the next."""
    recognizer, synthesizer, replies = (
        DetectingRecognizer(list(said)),
        VoicesSynthesizer(),
        NotedReplies(),
    )
    factory = DefaultEngineFactory(
        synthesizer, recognizer=recognizer, replies=replies, settings=FAST
    )
    recorder = Recorder()
    async with factory.create(config) as engine, anyio.create_task_group() as group:
        group.start_soon(recorder.consume, engine)
        for answered in range(1, len(said) + 1):
            for chunk in speech.stream(
                config.input_format, 0.3, speech.spoken(speech.SENTENCES[0]), 0.9
            ):
                await engine.feed_audio(chunk)
            await recorder.wait_for(AssistantFinishedSpeaking, answered)
        await engine.close()
    return recognizer, synthesizer, replies, recorder


@pytest.mark.anyio
async def test_engine_multilingual_auto_turn_detected_answered_in_its_language_and_voice(
    config: SessionConfig,
) -> None:
    multilingual = dataclasses.replace(config, language="en", voice_id="tone", languages=SETTINGS)
    recognizer, synthesizer, replies, recorder = await converse(
        multilingual, [("Guten Tag, ich brauche Hilfe.", "de"), ("Hello again.", "en")]
    )
    assert recognizer.asked == [("en", ("en", "de", "es")), ("de", ("en", "de", "es"))]
    heard = [event.language for event in recorder.events if isinstance(event, InputText)]
    assert heard == ["de", "en"]
    german, english = replies.requests
    assert german.language == "de"
    assert german.system_prompt.endswith(
        "Reply in German (de): the user hears your reply spoken in that language."
    )
    assert english.language == "en"
    assert english.system_prompt.endswith(
        "Reply in English (en): the user hears your reply spoken in that language."
    )
    voices = [voice for voice, _text in synthesizer.spoken]
    assert synthesizer.spoken[0] == ("tone-de", "Sie sagten: Guten Tag, ich brauche Hilfe.")
    assert voices[-1] == "tone"  # back in English, in the English voice


@pytest.mark.anyio
async def test_engine_one_language_agent_asks_no_detection(config: SessionConfig) -> None:
    recognizer, _synthesizer, replies, _recorder = await converse(
        dataclasses.replace(config, voice_id="tone"), [("Hello.", "de")]
    )
    assert recognizer.asked == [("en", ())]
    assert replies.requests[0].language == "en"
    assert replies.requests[0].system_prompt == config.system_prompt


@pytest.mark.anyio
async def test_engine_multilingual_request_mode_answers_in_the_language_asked_for(
    config: SessionConfig,
) -> None:
    settings = dataclasses.replace(SETTINGS, mode="request")
    multilingual = dataclasses.replace(config, voice_id="tone", languages=settings)
    _recognizer, synthesizer, replies, _recorder = await converse(
        multilingual, [("Hola, buenos días.", "es"), ("Can we speak Spanish?", "en")]
    )
    assert [request.language for request in replies.requests] == ["en", "es"]
    assert synthesizer.spoken[-1][0] == "tone-es"


def test_rule_based_replies_phrasebook_language_else_english() -> None:
    async def first(language: str) -> str:
        request = ReplyRequest("bot", "You are a bot.", language, (), user_message="Hola")
        async for part in RuleBasedReplies().reply(request):
            return str(part)
        raise AssertionError("no reply")

    assert anyio.run(first, "es") == "Usted dijo: Hola. ¿En qué puedo ayudarle?"
    assert anyio.run(first, "ja").startswith("You said: Hola.")  # no phrasebook: English
