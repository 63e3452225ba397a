"""Backchannels: the short sounds of listening ("mm-hmm", "uh-huh", "yeah", "right", "okay",
"sure", "I see") that a caller says over the agent without meaning to take the turn
(API.md section 18). The one home of the list.

Words are compared as the recognizer writes them: lower case, without punctuation, a hyphen
or a space inside a backchannel the same ("uh-huh", "uh huh"), and Whisper's spellings of the
same sounds listed with them ("mhm", "aha"). A word cut off at the end of a partial decode
("Hold-", "I-") is a fragment: not yet a word.
"""

from __future__ import annotations

import re
from typing import Final

BACKCHANNELS: Final = frozenset(
    {
        "mm hmm",
        "mhm",
        "mm",
        "mmm",
        "hmm",
        "hm",
        "uh huh",
        "uh hum",
        "aha",
        "ah",
        "oh",
        "uh",
        "um",
        "yeah",
        "yes",
        "yep",
        "yup",
        "ya",
        "right",
        "alright",
        "all right",
        "okay",
        "ok",
        "sure",
        "i see",
        "got it",
        "cool",
        "exactly",
        "indeed",
        "true",
    }
)
"""The backchannels, each as `words` writes it."""

PROMPT: Final = "Mm-hmm. Uh-huh. Yeah. Right. Okay."
"""The recognizer's prompt for a decode of speech over the agent: Whisper then writes these
sounds as backchannels (without it, "uh-huh" came out as "if I" or "it's hard")."""

_LONGEST: Final = max(len(phrase.split()) for phrase in BACKCHANNELS)
_PUNCTUATION = re.compile(r"[^\w\s'-]+")


def words(text: str) -> list[str]:
    """The whole words of `text`, lower case, without punctuation or fragments."""
    found: list[str] = []
    for raw in _PUNCTUATION.sub(" ", text.lower()).split():
        if raw.endswith("-"):
            continue  # a word cut off: a fragment, not yet a word
        found.extend(part for part in raw.split("-") if part.strip("'"))
    return found


def is_backchannel(text: str) -> bool:
    """Tell whether `text` has words and every one belongs to a backchannel ("Uh-huh.
    Yeah." is one; "Yeah, but wait" is not)."""
    heard = words(text)
    return bool(heard) and _covered(heard)


def _covered(heard: list[str]) -> bool:
    """Whether the words split into backchannels, longest first at each place."""
    at = 0
    while at < len(heard):
        for size in range(min(_LONGEST, len(heard) - at), 0, -1):
            if " ".join(heard[at : at + size]) in BACKCHANNELS:
                at += size
                break
        else:
            return False
    return True
