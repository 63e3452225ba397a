"""The words so far as an end-of-turn signal: a clause that ends on a conjunction, a
preposition, an article or a filler is not finished ("a table for", "and", "the", "um").

The end-of-turn model hears the audio; these rules read the speculative decode's words at
the same pause (`Listener`, docs/engine.md step 3b). Each class is closed and kept short:
a word that often ends a sentence is left out ("so": "I think so"; "in", "on", "up": "log
in"; "her", "this", "that"; "like"). A preposition closing a question is stranded, not
held ("Where are you from?"), so it does not hold the turn when the words end with "?".
docs/decisions.md says what this signal catches and misses.
"""

from __future__ import annotations

import re

CONJUNCTIONS = frozenset("and but or nor because cause cuz if unless whereas although".split())
PREPOSITIONS = frozenset(
    "to for with of at from about into onto than between without within during until "
    "till toward towards via per upon".split()
)
ARTICLES = frozenset("a an the my your our their its".split())
"""Articles and the possessive determiners that stand where one would ("my order")."""
FILLERS = frozenset("um umm uh uhh uhm er erm hmm".split())
HOLDING = CONJUNCTIONS | PREPOSITIONS | ARTICLES | FILLERS
LANGUAGES = frozenset({"en"})
"""The languages the lists are written for; another's words are not read (German "an"
ends "Ich komme an")."""

_WORDS = re.compile(r"[\w']+")


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

    A preposition before a final "?" is stranded ("What is it for?"), so it does not hold.
    """
    word = last_word(text)
    if word in CONJUNCTIONS or word in ARTICLES or word in FILLERS:
        return True
    return word in PREPOSITIONS and not text.rstrip().endswith("?")
