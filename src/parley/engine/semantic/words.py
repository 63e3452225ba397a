"""The words so far as an end-of-turn signal: a clause that ends on a conjunction, a
preposition, an article or a filler is not finished ("a table for", "and", "the", "um").

The end-of-turn model hears the audio; these rules read the speculative decode's words at
the same pause (`Listener`, docs/engine.md step 3b). Each class is closed and kept short:
a word that often ends a sentence is left out ("so": "I think so"; "up"; "her", "this",
"that"; "like"). "On" and "in" hold unless the word before makes them an adverb ("log
in", "turn it on", "the lights are on"). A preposition closing a question is stranded, not
held, when the question asks with a wh-word ("Where are you from?", "Who am I speaking
with?"); a yes-no question cannot strand one ("Can I change the reservation from?" is a
decode that left out the rest). docs/decisions.md says what this signal catches and misses.
"""

from __future__ import annotations

import re

CONJUNCTIONS = frozenset("and but or nor because cause cuz if unless whereas although".split())
PREPOSITIONS = frozenset(
    "to for with of at from about into onto than between without within during until "
    "till toward towards via per upon".split()
)
ADVERB_PREPOSITIONS = frozenset({"on", "in"})
"""Prepositions that end many sentences as a verb's particle: they hold only after a word
that cannot take that particle (`PARTICLE_TAKERS`)."""
PARTICLE_TAKERS = frozenset(
    "log sign check turn switch come carry hold go get put keep move plug fill hang drop "
    "join tune stay walk let count call pull try bring "
    "it them me him her us you "
    "is are was were be been am "
    "later right back".split()
)
"""Words after which "on" or "in" is an adverb ("log in", "turn it on", "it's on", "later
on"): a verb's base form (its -s, -ed, -ing forms too), an object pronoun, a form of "be"."""
WH_WORDS = frozenset("what where who whom whose which when why how".split())
"""A question with one of these may end on a stranded preposition ("What is it for?")."""
ARTICLES = frozenset("a an the my your our their its".split())
"""Articles and the possessive determiners that stand where one would ("my order")."""
FILLERS = frozenset("um umm uh uhh uhm er erm hmm".split())
HOLDING = CONJUNCTIONS | PREPOSITIONS | ARTICLES | FILLERS
LANGUAGES = frozenset({"en"})
"""The languages the lists are written for; another's words are not read (German "an"
ends "Ich komme an")."""

_WORDS = re.compile(r"[\w']+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def reads_words(language: str) -> bool:
    """True when these rules read the words of `language` (an ISO 639-1 code, maybe with a
    region: "en-GB")."""
    return language.split("-")[0].lower() in LANGUAGES


def last_word(text: str) -> str:
    """The last word of `text`, lower case, without punctuation ("" when there is none)."""
    words = _WORDS.findall(text.lower())
    return words[-1].strip("'") if words else ""


def holds_the_turn(text: str) -> bool:
    """True when `text` ends on a word that leaves its clause unfinished.

    A preposition before a final "?" in a wh-question is stranded ("What is it for?"), so
    it does not hold; "on" and "in" after a word that takes them as a particle do not.
    """
    words = _WORDS.findall(text.lower())
    if not words:
        return False
    word = words[-1].strip("'")
    if word in CONJUNCTIONS or word in ARTICLES or word in FILLERS:
        return True
    if word in ADVERB_PREPOSITIONS:
        before = _stem(words[-2].strip("'")) if len(words) > 1 else ""
        if before in PARTICLE_TAKERS or before.endswith("'s") or before.endswith("'re"):
            return False
    elif word not in PREPOSITIONS:
        return False
    return not (text.rstrip().endswith("?") and _asks_with_wh(text))


def _asks_with_wh(text: str) -> bool:
    """True when the last sentence of `text` holds a wh-word (its question may strand a
    preposition: "What is it for?")."""
    sentence = _SENTENCE_END.split(text.strip())[-1]
    return any(word.split("'")[0] in WH_WORDS for word in _WORDS.findall(sentence.lower()))


def _stem(word: str) -> str:
    """`word` without a verb's -s, -ed or -ing ending when the rest is a particle taker
    ("logged" -> "log", "checking" -> "check"); else `word`."""
    for ending in ("ing", "ed", "s"):
        base = word.removesuffix(ending)
        if base == word:
            continue
        for candidate in (base, base[:-1], base + "e"):  # "logged", "logging", "moved"
            if candidate in PARTICLE_TAKERS:
                return candidate
    return word
