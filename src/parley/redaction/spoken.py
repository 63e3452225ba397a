"""Numbers said as words, rewritten as digits that remember the words they came from.

A recognizer writes what it hears: "four one five, five five five, two six seven one",
"double five", "triple seven", "oh seven", "forty-two", "eight hundred", or words and
digits mixed ("four one five 555 2671"). `normalise_numbers` rewrites each run of such
words as digits, so the detectors that read "415 555 2671" read what was said the same
way, and `Normalised.source_span` maps a span of the rewritten text back to the characters
of the original, so the tag covers exactly the words that said it.

Written by hand, and kept small: the libraries we found that read number words
(word2number, text2num, text2digits) read quantities ("four hundred fifteen" is 415) and
return an integer or a rewritten string, with no offsets back to the words; redaction
needs the digit sequence as said and, for every digit, the characters it came from.

The rules, in full:

- a number word is a unit (zero to nine, and "oh" for zero), a teen (ten to nineteen), a
  ten (twenty to ninety), which takes a unit after it ("forty two", "forty-two": 42);
  "hundred" after a unit (not zero) makes hundreds ("eight hundred": 800), and takes a teen
  or a ten after it ("four hundred fifteen": 415), never a bare unit, since "eight hundred
  five five five" is said for 800-555; "double" and "triple" before a single digit repeat
  it ("double five": 55);
- a run is number words and digit tokens, each a whole word, joined by whitespace or by
  one comma, full stop or dash (with whitespace around it); whitespace joins the digits of
  number words ("four one five": 415), while punctuation, or a written number on either
  side, leaves a space between them ("four one five, five": "415 5"; "one 415": "1 415"),
  as a writer groups them;
- "oh" counts as zero only beside another number with nothing but whitespace or a dash
  between ("oh seven", not "oh, four");
- a run of digit tokens only is left as written: the detectors read digits as they are.

"and" inside a number ("four hundred and fifteen"), "thousand", ordinals and other
languages are not read: each breaks a run.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass

UNITS = {
    "zero": 0, "oh": 0, "one": 1, "two": 2, "three": 3, "four": 4,
    "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
}  # fmt: skip
TEENS = {
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
REPEATS = {"double": 2, "triple": 3}

_WORD = re.compile(r"[A-Za-z0-9]+")
_RUN_GAP = re.compile(r"\s{1,3}|\s{0,3}[,.\-\u2013\u2014]\s{0,3}")
_TIGHT_GAP = re.compile(r"\s{1,3}|\s?-\s?")


@dataclass(frozen=True)
class _Word:
    start: int
    end: int
    text: str  # lower case


@dataclass(frozen=True)
class _Item:
    """One number read from words `first` to `last` (indices): its digits."""

    first: int
    last: int
    digits: str
    is_oh: bool = False


@dataclass(frozen=True)
class _Piece:
    """A part of the rewritten text: copied from the source, or digits standing for it."""

    start: int  # in the rewritten text
    source_start: int
    source_end: int
    copied: bool


@dataclass(frozen=True)
class Normalised:
    """A text with its runs of number words rewritten as digits."""

    text: str
    _pieces: tuple[_Piece, ...]
    _starts: tuple[int, ...]

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """Return the characters of the source that `text[start:end]` came from."""
        if not 0 <= start < end <= len(self.text):
            raise ValueError(f"not a span of the text: {start}..{end}")
        return self._source(start, end=False), self._source(end - 1, end=True)

    def _source(self, index: int, *, end: bool) -> int:
        piece = self._pieces[bisect.bisect_right(self._starts, index) - 1]
        if piece.copied:
            return piece.source_start + index - piece.start + int(end)
        return piece.source_end if end else piece.source_start


def normalise_numbers(text: str) -> Normalised:
    """Rewrite each run of number words in `text` as digits (the rules: module docstring)."""
    words = [_Word(m.start(), m.end(), m.group().lower()) for m in _WORD.finditer(text)]
    out = _Builder(text)
    index = 0
    while index < len(words):
        items = _run(text, words, index)
        if not items:
            index += 1
            continue
        if any(not words[item.first].text.isdigit() for item in items):
            out.copy_to(words[items[0].first].start)
            out.put(items[0].digits, words[items[0].first].start, words[items[0].last].end)
            for before, item in itertools.pairwise(items):
                gap_start, gap_end = words[before.last].end, words[item.first].start
                if _keeps_apart(text[gap_start:gap_end], words, before, item):
                    out.put(" ", gap_start, gap_end)
                out.put(item.digits, words[item.first].start, words[item.last].end)
        index = items[-1].last + 1
    out.copy_to(len(text))
    pieces = tuple(out.pieces)
    return Normalised("".join(out.parts), pieces, tuple(piece.start for piece in pieces))


def _run(text: str, words: list[_Word], index: int) -> list[_Item]:
    """The numbers of the run that starts at word `index` (none when no number starts there)."""
    items: list[_Item] = []
    item = _item(text, words, index)
    while item is not None:
        items.append(item)
        following = item.last + 1
        if following == len(words) or not _joins(text, words, item.last, _RUN_GAP):
            break
        item = _item(text, words, following)
    while (
        items
        and items[0].is_oh
        and not (len(items) > 1 and _joins(text, words, items[0].last, _TIGHT_GAP))
    ):
        items.pop(0)
    while items and items[-1].is_oh and not _joins(text, words, items[-1].first - 1, _TIGHT_GAP):
        items.pop()
    return items


def _keeps_apart(gap: str, words: list[_Word], before: _Item, after: _Item) -> bool:
    """Whether two numbers of a run stay apart: punctuation between them, or digits on
    either side (a writer's "415 555" is two groups; a speaker's "four one five" is one)."""
    written = words[before.first].text.isdigit() or words[after.first].text.isdigit()
    return written or bool(gap.strip())


def _joins(text: str, words: list[_Word], index: int, gap: re.Pattern[str]) -> bool:
    """Whether word `index` and the next one are joined by `gap`."""
    if index < 0 or index + 1 >= len(words):
        return False
    return gap.fullmatch(text, words[index].end, words[index + 1].start) is not None


def _item(text: str, words: list[_Word], index: int) -> _Item | None:
    """The number that starts at word `index`, or None."""
    word = words[index].text

    def next_word(after: int, lexicon: dict[str, int]) -> int | None:
        if _joins(text, words, after, _TIGHT_GAP) and words[after + 1].text in lexicon:
            return lexicon[words[after + 1].text]
        return None

    if word.isdigit():
        return _Item(index, index, word)
    if word in REPEATS:
        digit = next_word(index, UNITS)
        if digit is None and _joins(text, words, index, _TIGHT_GAP):
            following = words[index + 1].text
            digit = int(following) if len(following) == 1 and following.isdigit() else None
        return None if digit is None else _Item(index, index + 1, str(digit) * REPEATS[word])
    if word in UNITS:
        if UNITS[word] and next_word(index, {"hundred": 100}):
            return _hundreds(text, words, index)
        return _Item(index, index, str(UNITS[word]), is_oh=word == "oh")
    if word in TEENS:
        return _Item(index, index, str(TEENS[word]))
    if word in TENS:
        unit = next_word(index, UNITS)
        if unit:
            return _Item(index, index + 1, str(TENS[word] + unit))
        return _Item(index, index, str(TENS[word]))
    return None


def _hundreds(text: str, words: list[_Word], index: int) -> _Item:
    """Hundreds: "eight hundred" (800), "four hundred fifteen" (415), "one hundred twenty
    one" (121)."""
    value, last = UNITS[words[index].text] * 100, index + 1
    if _joins(text, words, last, _TIGHT_GAP):
        following = words[last + 1].text
        if following in TEENS:
            value, last = value + TEENS[following], last + 1
        elif following in TENS:
            value, last = value + TENS[following], last + 1
            if _joins(text, words, last, _TIGHT_GAP) and UNITS.get(words[last + 1].text):
                value, last = value + UNITS[words[last + 1].text], last + 1
    return _Item(index, last, str(value))


class _Builder:
    """The rewritten text, piece by piece, with where each piece came from."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.parts: list[str] = []
        self.pieces: list[_Piece] = []
        self.length = 0
        self.copied_to = 0

    def copy_to(self, end: int) -> None:
        if end > self.copied_to:
            self._add(self.source[self.copied_to : end], self.copied_to, end, copied=True)

    def put(self, digits: str, source_start: int, source_end: int) -> None:
        self._add(digits, source_start, source_end, copied=False)

    def _add(self, part: str, source_start: int, source_end: int, *, copied: bool) -> None:
        self.pieces.append(_Piece(self.length, source_start, source_end, copied))
        self.parts.append(part)
        self.length += len(part)
        self.copied_to = source_end
