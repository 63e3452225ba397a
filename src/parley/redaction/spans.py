"""What redaction finds and returns: tags, spans, the redacted text; and which span wins.

Overlaps are settled once, here: the longest span wins, and between two of the same length
the more specific kind (`SPECIFICITY`), so a card number is never also a phone number.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple


class Tag(StrEnum):
    """What replaces a span of personal data (API.md section 16, "Redaction")."""

    CREDIT_CARD = "[CREDIT_CARD]"
    EMAIL = "[EMAIL]"
    IBAN = "[IBAN]"
    PHONE_NUMBER = "[PHONE_NUMBER]"
    SSN = "[SSN]"


SPECIFICITY = (Tag.IBAN, Tag.CREDIT_CARD, Tag.SSN, Tag.EMAIL, Tag.PHONE_NUMBER)
"""Most specific first: the order that settles a tie between spans of the same length."""

TAGGED = re.compile("|".join(re.escape(tag) for tag in Tag))
"""A tag already in the text: left as it is, and never part of a new span."""


class Span(NamedTuple):
    """Characters `start` to `end` (exclusive) of a text, personal data of kind `tag`."""

    start: int
    end: int
    tag: Tag


@dataclass(frozen=True)
class Redacted:
    """A text with each span of personal data replaced by its tag.

    `spans` are in the original text, in order, and never overlap.
    """

    text: str
    spans: tuple[Span, ...]


def choose(candidates: Iterable[Span], taken: Iterable[tuple[int, int]] = ()) -> list[Span]:
    """Keep the candidates that win their overlaps, in text order.

    Longest first, then the more specific kind, then the earlier; a candidate that overlaps
    one already kept, or a range in `taken` (tags already in the text), is dropped.
    """
    rank = {tag: index for index, tag in enumerate(SPECIFICITY)}
    ordered = sorted(candidates, key=lambda s: (s.start - s.end, rank[s.tag], s.start))
    kept = _Intervals(taken)
    chosen: list[Span] = []
    for span in ordered:
        if span.end > span.start and kept.add(span.start, span.end):
            chosen.append(span)
    return sorted(chosen)


class _Intervals:
    """Disjoint half-open ranges, sorted; `add` refuses one that overlaps."""

    def __init__(self, ranges: Iterable[tuple[int, int]]) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        for start, end in sorted(ranges):
            self.add(start, end)

    def add(self, start: int, end: int) -> bool:
        index = bisect.bisect_right(self._starts, start)
        if index > 0 and self._ends[index - 1] > start:
            return False
        if index < len(self._starts) and self._starts[index] < end:
            return False
        self._starts.insert(index, start)
        self._ends.insert(index, end)
        return True


def replace(text: str, spans: Iterable[Span]) -> str:
    """Put each span's tag in its place; `spans` are disjoint and in order."""
    parts: list[str] = []
    position = 0
    for span in spans:
        parts += [text[position : span.start], span.tag.value]
        position = span.end
    parts.append(text[position:])
    return "".join(parts)
