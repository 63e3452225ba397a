"""The words so far as an end-of-turn signal (parley.engine.semantic.words): a clause that
ends on a conjunction, a preposition, an article or a filler holds the turn; each closed
class is tested alone, and how the signal combines with the model's answer
(SemanticParams.wait_ms)."""

from __future__ import annotations

import pytest

from parley.engine.semantic import SemanticParams
from parley.engine.semantic.words import (
    ADVERB_PREPOSITIONS,
    ARTICLES,
    CONJUNCTIONS,
    FILLERS,
    PREPOSITIONS,
    holds_the_turn,
    last_word,
    reads_words,
)


@pytest.mark.parametrize(
    "words",
    [
        "My package arrived damaged and",
        "I called yesterday, but",
        "Is it the red one or",
        "I'm calling because",
        "I can come on Monday if",
    ],
)
def test_words_ending_on_a_conjunction_hold_the_turn(words: str) -> None:
    assert last_word(words) in CONJUNCTIONS
    assert holds_the_turn(words)


@pytest.mark.parametrize(
    "words",
    [
        "Please book me a table for",
        "I would like to",
        "Can I speak with",
        "It's the invoice of",
        "We land at",
        "I'm calling about",
    ],
)
def test_words_ending_on_a_preposition_hold_the_turn(words: str) -> None:
    assert last_word(words) in PREPOSITIONS
    assert holds_the_turn(words)


@pytest.mark.parametrize(
    "words",
    ["I'd like a", "Can you cancel the", "I need to change my", "It's an", "Send it to our"],
)
def test_words_ending_on_an_article_hold_the_turn(words: str) -> None:
    assert last_word(words) in ARTICLES
    assert holds_the_turn(words)


@pytest.mark.parametrize("words", ["I'd like, um", "My number is, uh,", "So, er", "Hmm"])
def test_words_ending_on_a_filler_hold_the_turn(words: str) -> None:
    assert last_word(words) in FILLERS
    assert holds_the_turn(words)


def test_words_whisper_punctuation_and_case_do_not_hide_the_last_word() -> None:
    """Whisper writes "for..." or "For." at a pause: the word is what counts."""
    assert holds_the_turn("Please book me a table for...")
    assert holds_the_turn("A table FOR.")
    assert holds_the_turn("  and, ")


@pytest.mark.parametrize(
    "words",
    [
        "Which platform does the next train to Boston leave from?",
        "What is it for?",
        "Who am I speaking with?",
    ],
)
def test_words_question_ending_on_a_stranded_preposition_does_not_hold(words: str) -> None:
    assert last_word(words) in PREPOSITIONS
    assert not holds_the_turn(words)


@pytest.mark.parametrize(
    "words",
    [
        "Can I change the reservation from?",
        "Could you send the invoice to?",
        "What time? Can I move it to?",
    ],
)
def test_words_yes_no_question_ending_on_a_preposition_holds(words: str) -> None:
    """Only a wh-question strands a preposition: Whisper writes "?" after a cut-off yes-no
    question ("Can I change the reservation from" four guests to five)."""
    assert holds_the_turn(words)


@pytest.mark.parametrize(
    "words", ["Can you tell me the balance on", "Is the hotel on", "I live in", "the price on."]
)
def test_words_on_or_in_after_a_noun_hold_the_turn(words: str) -> None:
    assert last_word(words) in ADVERB_PREPOSITIONS
    assert holds_the_turn(words)


@pytest.mark.parametrize(
    "words",
    [
        "I cannot log in.",
        "I logged in",
        "Checking in",
        "Turn it on.",
        "The lights are on.",
        "It's on.",
        "Hang on",
        "I'll call you later on.",
    ],
)
def test_words_on_or_in_as_a_particle_do_not_hold(words: str) -> None:
    assert last_word(words) in ADVERB_PREPOSITIONS
    assert not holds_the_turn(words)


@pytest.mark.parametrize(
    "words",
    [
        "Please book me a table for two at seven tonight.",
        "I forgot my password and cannot log in.",
        "I think so.",
        "Can you call her?",
        "I'd like this.",
        "",
        "...",
    ],
)
def test_words_complete_or_ending_on_a_word_left_out_do_not_hold(words: str) -> None:
    assert not holds_the_turn(words)


def test_semantic_words_that_hold_wait_max_silence_whatever_the_model_says() -> None:
    params = SemanticParams(sure_ms=200)
    assert params.wait_ms(0.99, "Please book me a table for") is None
    assert params.wait_ms(0.7, "I'd like, um") is None


def test_semantic_model_finished_on_words_that_do_not_hold_waits_check_ms() -> None:
    params = SemanticParams()
    assert params.wait_ms(0.9, "Please book me a table for two.") == params.check_ms


def test_semantic_model_unfinished_on_words_that_do_not_hold_waits_words_ms() -> None:
    params = SemanticParams()
    assert params.words_ms is not None
    assert params.check_ms < params.words_ms < params.max_silence_ms
    assert params.wait_ms(0.1, "I forgot my password and cannot log in.") == params.words_ms
    assert params.checks_ms == (params.check_ms, params.words_ms)


def test_semantic_without_words_the_model_alone_decides() -> None:
    """No decode (a recognizer that is not incremental, a failed decode) or no words heard:
    the model's answer, read as before the words were a signal."""
    params = SemanticParams()
    assert params.wait_ms(0.9, None) == params.check_ms
    assert params.wait_ms(0.1, None) is None
    assert params.wait_ms(0.1, "") is None


def test_semantic_words_wait_dropped_when_not_shorter_than_max_silence() -> None:
    """An agent's shorter end-of-turn silence (tuning.listening) leaves no room for it."""
    params = SemanticParams(max_silence_ms=600)
    assert params.wait_ms(0.1, "I forgot my password and cannot log in.") is None
    assert params.checks_ms == (params.check_ms,)


def test_semantic_params_words_wait_not_longer_than_check_refused() -> None:
    with pytest.raises(ValueError, match="words_ms"):
        SemanticParams(check_ms=300, words_ms=300)


def test_words_read_only_in_english() -> None:
    """The lists are English: German "an" ends "Ich komme an"."""
    assert reads_words("en")
    assert reads_words("en-GB")
    assert not reads_words("de")
    assert not reads_words("es")
