"""A multilingual model (Whisper base) on real speech: the agent's language selects the
decoding, the transcript reports the language heard. German and Spanish by espeak-ng."""

from __future__ import annotations

import numpy as np
import pytest
from tests import languages, speech

from parley.engine import Utterance, WhisperRecognizer
from parley.engine.audio import resample
from parley.engine.recognizers.whisper import likeliest_language

pytestmark = pytest.mark.anyio


def utterance(samples: np.ndarray) -> Utterance:
    """24 kHz speech with 0.2 s of silence before and 0.3 s after, at 16 kHz."""
    audio = resample(
        np.concatenate([speech.silence(0.2), samples, speech.silence(0.3)]), 24_000, 16_000
    )
    return Utterance(audio, 16_000, audio.size / 16_000)


@pytest.mark.parametrize(
    ("sentence", "voice"), [(languages.GERMAN, "de"), (languages.SPANISH, "es")], ids=["de", "es"]
)
async def test_whisper_base_agent_language_selects_the_decoding_and_is_reported(
    sentence: str, voice: str
) -> None:
    spoken = utterance(languages.espeak_spoken(sentence, voice))
    recognizer = WhisperRecognizer("base")
    try:
        heard = await recognizer.transcribe(spoken, language=voice)
        as_english = await recognizer.transcribe(spoken, language="en")
    finally:
        await recognizer.aclose()
    assert heard is not None
    assert as_english is not None
    # espeak is robotic: two words of the eight may be misheard; decoded as English, the same
    # audio comes out as English words (translated or garbled), most of them wrong.
    assert languages.word_errors(sentence, heard.text) <= 2, heard.text
    assert languages.word_errors(sentence, as_english.text) >= 5, as_english.text
    assert heard.language == as_english.language == voice


async def test_whisper_base_reports_the_language_heard_not_the_agents() -> None:
    recognizer = WhisperRecognizer("base")
    try:
        heard = await recognizer.transcribe(
            utterance(languages.espeak_spoken(languages.SPANISH, "es")), language="de"
        )
        english = await recognizer.transcribe(
            utterance(speech.spoken(speech.SENTENCES[4])), language="de"
        )
    finally:
        await recognizer.aclose()
    assert heard is not None
    assert heard.language == "es"
    assert english is not None
    assert english.language == "en"


async def test_whisper_base_english_words_at_most_5_percent_errors() -> None:
    recognizer = WhisperRecognizer("base")
    errors = words = 0
    try:
        for sentence in speech.SENTENCES[:8]:
            heard = await recognizer.transcribe(utterance(speech.spoken(sentence)), language="en")
            assert heard is not None
            assert heard.language == "en"
            errors += speech.word_errors(sentence, heard.text)
            words += len(speech.words(sentence))
    finally:
        await recognizer.aclose()
    assert errors / words <= 0.05


async def test_whisper_partial_decode_reports_the_agents_language() -> None:
    """Only a final decode asks which language is heard (partials are never shown)."""
    recognizer = WhisperRecognizer("base")
    try:
        heard = await recognizer.transcribe(
            utterance(languages.espeak_spoken(languages.SPANISH, "es")), language="de", partial=True
        )
    finally:
        await recognizer.aclose()
    assert heard is not None
    assert heard.language == "de"


async def test_whisper_tiny_en_reports_english_whatever_the_language_asked() -> None:
    recognizer = WhisperRecognizer("tiny.en")
    try:
        heard = await recognizer.transcribe(
            utterance(languages.espeak_spoken(languages.GERMAN, "de")), language="de"
        )
    finally:
        await recognizer.aclose()
    assert heard is not None
    assert heard.language == "en"


async def test_whisper_base_languages_decodes_in_the_likeliest_of_them_and_reports_it() -> None:
    """A multilingual agent's turn (API.md section 18): detected among its languages, then
    decoded in the one found, whatever language the decode was told."""
    german = utterance(languages.espeak_spoken(languages.GERMAN, "de"))
    spanish = utterance(languages.espeak_spoken(languages.SPANISH, "es"))
    recognizer = WhisperRecognizer("base")
    try:
        heard_de = await recognizer.transcribe(german, language="en", languages=("en", "de", "es"))
        heard_es = await recognizer.transcribe(spanish, language="en", languages=("en", "de", "es"))
        only_en_de = await recognizer.transcribe(spanish, language="en", languages=("en", "de"))
    finally:
        await recognizer.aclose()
    assert heard_de is not None
    assert heard_es is not None
    assert only_en_de is not None
    assert heard_de.language == "de"
    assert languages.word_errors(languages.GERMAN, heard_de.text) <= 2, heard_de.text
    assert heard_es.language == "es"
    assert languages.word_errors(languages.SPANISH, heard_es.text) <= 2, heard_es.text
    assert only_en_de.language in ("en", "de")  # never a language the agent does not have


def test_likeliest_language_among_the_candidates_else_the_first() -> None:
    ranked = [("<|es|>", 0.7), ("<|de|>", 0.2), ("<|en|>", 0.1)]
    assert likeliest_language(ranked, ("en", "de")) == "de"
    assert likeliest_language(ranked, ("fr", "it")) == "fr"
