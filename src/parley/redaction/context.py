"""The words just before a span: what tells a nine-digit number said as an SSN, or a name
said as an email address, from any other."""

from __future__ import annotations

import re

WORD = re.compile(r"\[[A-Z_]+\]|[A-Za-z0-9]+")
"""A word, a number or a tag (one word: `[PHONE_NUMBER]`)."""

LOOK_BACK = 12
"""How many words before a span are read for its context."""


def words_before(text: str, index: int, count: int = LOOK_BACK) -> list[str]:
    """Return the last `count` words of `text[:index]`, in lower case."""
    window = text[max(0, index - 40 * count) : index]
    return [word.lower() for word in WORD.findall(window)[-count:]]
