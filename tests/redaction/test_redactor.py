"""`redact`: each tag as digits and as words, what is not personal data, spans, idempotence."""

from __future__ import annotations

import pytest

from parley.redaction import Redacted, Span, Tag, redact


def found(text: str, **options: str) -> list[tuple[str, Tag]]:
    """What `redact` tags, as the original words and the tag."""
    return [(text[span.start : span.end], span.tag) for span in redact(text, **options).spans]


TAGGED = [
    # (text, the span said, its tag)
    ("call me at 415-555-2671 today", "415-555-2671", Tag.PHONE_NUMBER),
    ("it's (415) 555-2671", "(415) 555-2671", Tag.PHONE_NUMBER),
    ("the office is +44 20 7946 0958", "+44 20 7946 0958", Tag.PHONE_NUMBER),
    (
        "my number is four one five, five five five, two six seven one, thanks",
        "four one five, five five five, two six seven one",
        Tag.PHONE_NUMBER,
    ),
    ("four one five triple five two six seven one", None, Tag.PHONE_NUMBER),
    ("eight hundred five five five oh one nine nine", None, Tag.PHONE_NUMBER),
    ("call four one five 555 2671 please", "four one five 555 2671", Tag.PHONE_NUMBER),
    ("write to jane.doe@example.com today", "jane.doe@example.com", Tag.EMAIL),
    ("it's jane dot doe at example dot com", "jane dot doe at example dot com", Tag.EMAIL),
    ("bob at gmail dot com", None, Tag.EMAIL),
    ("my email is jane at example dot com", "jane at example dot com", Tag.EMAIL),
    ("j underscore doe forty two at example dot org", None, Tag.EMAIL),
    ("card 4242 4242 4242 4242 expires 12/25", "4242 4242 4242 4242", Tag.CREDIT_CARD),
    ("card 4242-4242-4242-4242", "4242-4242-4242-4242", Tag.CREDIT_CARD),
    ("amex 3782 822463 10005", "3782 822463 10005", Tag.CREDIT_CARD),
    ("a 13-digit 4222222222222 card", "4222222222222", Tag.CREDIT_CARD),
    ("a 19-digit 6000000000000000004 card", "6000000000000000004", Tag.CREDIT_CARD),
    (
        "my card is four two four two four two four two four two four two four two four two",
        "four two four two four two four two four two four two four two four two",
        Tag.CREDIT_CARD,
    ),
    (
        "it's forty-two forty-two, forty-two forty-two, forty-two forty-two, forty-two forty-two",
        "forty-two forty-two, forty-two forty-two, forty-two forty-two, forty-two forty-two",
        Tag.CREDIT_CARD,
    ),
    ("ssn 123-45-6789", "123-45-6789", Tag.SSN),
    ("my social security number is 123 45 6789", "123 45 6789", Tag.SSN),
    ("my SSN is 123456789", "123456789", Tag.SSN),
    (
        "my social is one two three, four five, six seven eight nine",
        "one two three, four five, six seven eight nine",
        Tag.SSN,
    ),
    (
        "S S N oh one two, three four, five six seven eight",
        "oh one two, three four, five six seven eight",
        Tag.SSN,
    ),
    ("IBAN GB82 WEST 1234 5698 7654 32 thanks", "GB82 WEST 1234 5698 7654 32", Tag.IBAN),
    ("pay DE89370400440532013000 now", "DE89370400440532013000", Tag.IBAN),
    ("lower case de89 3704 0044 0532 0130 00", "de89 3704 0044 0532 0130 00", Tag.IBAN),
    ("norway NO93 8601 1117 947", "NO93 8601 1117 947", Tag.IBAN),
    (
        "G B eight two W E S T one two three four five six nine eight seven six five four three "
        "two",
        None,
        Tag.IBAN,
    ),
]


@pytest.mark.parametrize(("text", "said", "tag"), TAGGED, ids=[row[0][:40] for row in TAGGED])
def test_redact_tags_personal_data_as_digits_and_as_words(
    text: str, said: str | None, tag: Tag
) -> None:
    said = text if said is None else said
    assert found(text) == [(said, tag)]
    assert redact(text).text == text.replace(said, tag.value)


NOT_TAGGED = [
    "table for 4 at 7 pm",
    "table for four at seven pm",
    "1999",
    "I was born in nineteen ninety nine",
    "room 12",
    "we are open from 9 to 5",
    "it costs $1,250,000",
    "on 12/25/2024 at 10:30",
    "zip code 94107",
    "flight 1234 leaves at gate twenty two",
    "two hundred people",
    "double check it",
    "oh, I see, four of us",
    "three point five",
    "counting 1, 2, 3, 4, 5, 6, 7, 8, 9, 10",
    "I work at acme dot com",
    "look at amazon.com",
    "order 123456789",  # nine digits, not said as an SSN
]


@pytest.mark.parametrize("text", NOT_TAGGED)
def test_redact_leaves_ordinary_numbers(text: str) -> None:
    assert redact(text) == Redacted(text=text, spans=())


@pytest.mark.parametrize(
    "text",
    [
        "card 4242 4242 4242 4241",
        "card 4242424242424241",
        "four two four two four two four two four two four two four two four one",
        "12 digits 4444 4444 4442",  # Luhn-valid, too short
        "20 digits 44444444444444444444",  # Luhn-valid, too long
    ],
)
def test_redact_skips_card_numbers_failing_luhn_or_length(text: str) -> None:
    assert not [tag for _, tag in found(text) if tag is Tag.CREDIT_CARD]


@pytest.mark.parametrize(
    "number",
    ["000-12-3456", "666-12-3456", "900-12-3456", "123-00-4567", "123-45-0000", "078-05-1120"],
    ids=["area 000", "area 666", "area 9xx", "group 00", "serial 0000", "advertised"],
)
def test_redact_skips_invalid_ssns(number: str) -> None:
    assert found(f"my social security number is {number}") == []


@pytest.mark.parametrize(
    "text",
    ["GB82 WEST 1234 5698 7654 33", "DE00370400440532013000", "XX82WEST12345698765432"],
    ids=["check digits", "zero check digits", "no such country"],
)
def test_redact_skips_invalid_ibans(text: str) -> None:
    assert found(f"IBAN {text}") == []


def test_redact_card_number_is_not_also_a_phone_number() -> None:
    assert found("4155552671424242") == []  # Luhn-invalid: and not a phone number either
    assert found("card 4242 4242 4242 4242") == [("4242 4242 4242 4242", Tag.CREDIT_CARD)]


def test_redact_spans_point_at_the_original_text() -> None:
    text = "Hi, four one five, five five five, two six seven one; mail jane@example.com!"
    redacted = redact(text)
    assert redacted.spans == (
        Span(4, 52, Tag.PHONE_NUMBER),
        Span(59, 75, Tag.EMAIL),
    )
    assert text[4:52] == "four one five, five five five, two six seven one"
    assert text[59:75] == "jane@example.com"
    assert redacted.text == "Hi, [PHONE_NUMBER]; mail [EMAIL]!"


def test_redact_finds_each_kind_in_one_text() -> None:
    text = (
        "Call 415-555-2671 or email jane dot doe at example dot com. Card four two four two "
        "four two four two four two four two four two four two, SSN 123-45-6789, "
        "IBAN GB82 WEST 1234 5698 7654 32."
    )
    assert redact(text).text == (
        "Call [PHONE_NUMBER] or email [EMAIL]. Card [CREDIT_CARD], SSN [SSN], IBAN [IBAN]."
    )


def test_redact_leaves_tags_already_there() -> None:
    text = "call [PHONE_NUMBER] or 415-555-2671, [CREDIT_CARD] [EMAIL]"
    redacted = redact(text)
    assert redacted.text == "call [PHONE_NUMBER] or [PHONE_NUMBER], [CREDIT_CARD] [EMAIL]"
    assert redacted.spans == (Span(23, 35, Tag.PHONE_NUMBER),)


def test_redact_repeats_until_a_pass_finds_nothing() -> None:
    """The SSN's context is fifteen words back as said, five once the phone number is a tag:
    the second pass finds it, and its span is still in the original text."""
    text = "my social, not my number four one five five five five two six seven one, is 123 45 6789"
    assert found(text) == [
        ("four one five five five five two six seven one", Tag.PHONE_NUMBER),
        ("123 45 6789", Tag.SSN),
    ]
    assert redact(text).text == "my social, not my number [PHONE_NUMBER], is [SSN]"


IDEMPOTENT = [row[0] for row in TAGGED] + NOT_TAGGED + [
    "Hi, four one five, five five five, two six seven one; mail jane@example.com!",
    "my social security number, after 415-555-2671 and four one five five five five two six "
    "seven one, is 123 45 6789",
    "one 415 555 2671 one more thing",
    "call [PHONE_NUMBER] or 415-555-2671",
    "4242 4242 4242 4242 4242 4242 4242 4242",
]  # fmt: skip


@pytest.mark.parametrize("text", IDEMPOTENT, ids=[text[:40] for text in IDEMPOTENT])
def test_redact_is_idempotent(text: str) -> None:
    once = redact(text).text
    assert redact(once) == Redacted(text=once, spans=())


def test_redact_reads_national_phone_numbers_in_the_region() -> None:
    assert found("call 020 7946 0958") == []
    assert found("call 020 7946 0958", region="GB") == [("020 7946 0958", Tag.PHONE_NUMBER)]


def test_redact_refuses_an_unknown_region() -> None:
    with pytest.raises(ValueError, match="not a region"):
        redact("call 020 7946 0958", region="XX")


def test_redact_reads_a_long_text_without_an_address_quickly() -> None:
    """Bounded repetitions: no regular expression backtracks over the whole text."""
    for text in ["a dot " * 5000, "x" * 50_000, "x@" * 10_000, "one two " * 3000]:
        assert redact(text).spans == ()
