"""`redact`: every detector over a text and over its number words read as digits.

One pass reads the text as written and, when it says numbers as words, the text with them
rewritten as digits (`spoken.normalise_numbers`), whose spans map back to the words; the
overlaps are settled (`spans.choose`), and tags already in the text are left as they are.
Passes repeat on the redacted text until one finds nothing: a tag can change what a later
pass reads (the words before a number), and stopping only at a fixed point is what makes
`redact(redact(x).text).text == redact(x).text` hold. It ends: each pass replaces at least
one character that is not a tag's, and a span never overlaps a tag.
"""

from __future__ import annotations

from collections.abc import Iterator

import phonenumbers

from parley.redaction.emails import emails
from parley.redaction.numbers import credit_cards, ibans, phone_numbers, ssns
from parley.redaction.spans import TAGGED, Redacted, Span, choose, replace
from parley.redaction.spoken import normalise_numbers

DEFAULT_REGION = "US"


def redact(text: str, *, region: str = DEFAULT_REGION) -> Redacted:
    """Replace each phone number, email, card number, SSN and IBAN of `text` by its tag.

    `region` (ISO 3166-1 alpha-2, as libphonenumber knows it) is where a phone number
    written without `+` is read. Names, addresses and other personal data are not found.
    """
    if region not in phonenumbers.SUPPORTED_REGIONS:
        raise ValueError(f"not a region libphonenumber knows: {region!r}")
    spans: list[Span] = []
    redacted = text
    while found := _one_pass(redacted, region):
        spans = sorted([*spans, *(_in_source(span, spans) for span in found)])
        redacted = replace(text, spans)
    return Redacted(text=redacted, spans=tuple(spans))


def _one_pass(text: str, region: str) -> list[Span]:
    """The spans of `text` to redact, overlaps settled, none over a tag."""
    candidates = list(_detect(text, region))
    normalised = normalise_numbers(text)
    if normalised.text != text:
        for span in _detect(normalised.text, region):
            start, end = normalised.source_span(span.start, span.end)
            candidates.append(Span(start, end, span.tag))
    tags = [(match.start(), match.end()) for match in TAGGED.finditer(text)]
    return choose(candidates, taken=tags)


def _detect(text: str, region: str) -> Iterator[Span]:
    yield from phone_numbers(text, region)
    yield from credit_cards(text)
    yield from ssns(text)
    yield from ibans(text)
    yield from emails(text)


def _in_source(span: Span, earlier: list[Span]) -> Span:
    """`span` of a text where the `earlier` spans (of the source) are tags, in the source.

    `span` overlaps none of those tags, so only the tags before it shift it.
    """
    shift = 0  # how much longer the redacted text is than the source, up to here
    for done in earlier:
        if done.start + shift >= span.start:
            break
        shift += len(done.tag) - (done.end - done.start)
    return Span(span.start - shift, span.end - shift, span.tag)
