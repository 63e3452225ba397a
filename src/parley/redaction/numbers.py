"""The number detectors: phone numbers, card numbers, SSNs and IBANs, in written digits.

Each reads a text (the original, or the one `spoken.normalise_numbers` rewrote) and yields
candidate spans; `spans.choose` settles their overlaps.

- Phone numbers: `phonenumbers.PhoneNumberMatcher` at `Leniency.VALID` (the number is
  valid for its region in libphonenumber's metadata; the grouping is not checked, since a
  recognizer's grouping is its own), numbers without `+` read in the caller's region.
  `POSSIBLE` would take any digit run of a possible length (a seven-digit order number).
- Card numbers: 13 to 19 digits passing the Luhn check (`stdnum.luhn`), in groups split by
  one space or dash; a run of groups longer than a card is searched for one at group edges.
- SSNs (`stdnum.us.ssn`: area not 000, 666 or 9xx, group not 00, serial not 0000, and not a
  number known from advertising): NNN-NN-NNNN always; nine digits in other groupings only
  when "social" or "SSN" is said in the twelve words before.
- IBANs (`stdnum.iban`: the country's length and format, and the mod-97 check digits):
  a country code and two check digits, then letters and digits, single spaces allowed
  anywhere (a recognizer spells "G B 82 W E S T ...").
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import phonenumbers
from stdnum import iban, luhn
from stdnum.us import ssn

from parley.redaction.context import words_before
from parley.redaction.spans import Span, Tag

CARD_DIGITS = range(13, 20)
SSN_CONTEXT = frozenset({"social", "ssn"})
IBAN_LENGTHS = range(34, 14, -1)  # longest first; 15 (Norway) to 34 characters

_DIGIT_GROUPS = re.compile(r"(?<![0-9])[0-9]+(?:[ -][0-9]+)*")
_SSN_DASHED = re.compile(r"(?<![0-9-])[0-9]{3}-[0-9]{2}-[0-9]{4}(?![0-9]|-[0-9])")
_IBAN_START = re.compile(r"(?<![0-9A-Za-z])(?=[A-Za-z] ?[A-Za-z] ?[0-9] ?[0-9])")


def phone_numbers(text: str, region: str) -> Iterator[Span]:
    """Yield the valid phone numbers of `text`; numbers without `+` are read in `region`."""
    # max_tries bounds the matcher's attempts (65535 by default): past it, it stops looking.
    # Every attempt starts at a digit, so the text's length is always enough.
    matcher = phonenumbers.PhoneNumberMatcher(
        text, region, leniency=phonenumbers.Leniency.VALID, max_tries=max(65535, len(text))
    )
    for match in matcher:
        yield Span(match.start, match.end, Tag.PHONE_NUMBER)


def credit_cards(text: str) -> Iterator[Span]:
    """Yield the Luhn-valid card numbers of `text`, group-aligned within each run."""
    for groups in _group_runs(text):
        for first in range(len(groups)):
            digits = ""
            for last in range(first, len(groups)):
                digits += groups[last][2]
                if len(digits) > CARD_DIGITS.stop - 1:
                    break
                if len(digits) in CARD_DIGITS and luhn.is_valid(digits):
                    yield Span(groups[first][0], groups[last][1], Tag.CREDIT_CARD)


def ssns(text: str) -> Iterator[Span]:
    """Yield the valid SSNs of `text`: NNN-NN-NNNN, or nine digits said as an SSN."""
    for match in _SSN_DASHED.finditer(text):
        if ssn.is_valid(match.group()):
            yield Span(match.start(), match.end(), Tag.SSN)
    for groups in _group_runs(text):
        digits = "".join(group[2] for group in groups)
        start, end = groups[0][0], groups[-1][1]
        if len(digits) == 9 and ssn.is_valid(digits) and _said_as_ssn(text, start):
            yield Span(start, end, Tag.SSN)


def ibans(text: str) -> Iterator[Span]:
    """Yield the valid IBANs of `text`, the longest that ends at a word's end."""
    for start in _IBAN_START.finditer(text):
        positions = _iban_characters(text, start.start())
        compact = "".join(text[position] for position in positions)
        for length in IBAN_LENGTHS:
            if length > len(compact):
                continue
            end = positions[length - 1] + 1
            if end < len(text) and text[end].isalnum():
                continue  # the candidate stops inside a word
            if iban.is_valid(compact[:length]):
                yield Span(start.start(), end, Tag.IBAN)
                break


def _iban_characters(text: str, start: int) -> list[int]:
    """Where the letters and digits from `start` are, single spaces between, at most 34."""
    positions: list[int] = []
    index = start
    while index < len(text) and len(positions) < IBAN_LENGTHS.start:
        if text[index].isascii() and text[index].isalnum():
            positions.append(index)
            index += 1
        elif text[index] == " " and index + 1 < len(text) and text[index + 1] != " ":
            index += 1
        else:
            break
    return positions


def _group_runs(text: str) -> Iterator[list[tuple[int, int, str]]]:
    """Each run of digit groups split by one space or dash: (start, end, digits) per group."""
    for run in _DIGIT_GROUPS.finditer(text):
        yield [
            (run.start() + group.start(), run.start() + group.end(), group.group())
            for group in re.finditer(r"[0-9]+", run.group())
        ]


def _said_as_ssn(text: str, start: int) -> bool:
    words = words_before(text, start)
    spelled = any(words[i : i + 3] == ["s", "s", "n"] for i in range(len(words)))
    return spelled or not SSN_CONTEXT.isdisjoint(words)
