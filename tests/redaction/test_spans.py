"""Overlaps: the longest span wins, then the most specific kind; tags already there stay."""

from __future__ import annotations

from parley.redaction import Span, Tag
from parley.redaction.spans import SPECIFICITY, choose, replace


def test_choose_longest_span_wins() -> None:
    card = Span(0, 19, Tag.CREDIT_CARD)
    phone = Span(5, 17, Tag.PHONE_NUMBER)
    assert choose([phone, card]) == [card]


def test_choose_tie_goes_to_the_more_specific_kind() -> None:
    spans = [Span(0, 10, tag) for tag in reversed(SPECIFICITY)]
    assert choose(spans) == [Span(0, 10, Tag.IBAN)]
    assert choose([Span(0, 10, Tag.PHONE_NUMBER), Span(0, 10, Tag.SSN)]) == [Span(0, 10, Tag.SSN)]


def test_choose_keeps_disjoint_spans_in_text_order() -> None:
    spans = [Span(20, 30, Tag.EMAIL), Span(0, 10, Tag.SSN), Span(10, 20, Tag.PHONE_NUMBER)]
    assert choose(spans) == sorted(spans)


def test_choose_drops_spans_over_tags_already_there() -> None:
    assert choose([Span(3, 8, Tag.EMAIL), Span(9, 12, Tag.SSN)], taken=[(0, 5)]) == [
        Span(9, 12, Tag.SSN)
    ]


def test_choose_drops_empty_spans() -> None:
    assert choose([Span(4, 4, Tag.EMAIL)]) == []


def test_replace_puts_each_tag_in_place() -> None:
    text = "a 123-45-6789 b x@y.co c"
    assert replace(text, [Span(2, 13, Tag.SSN), Span(16, 22, Tag.EMAIL)]) == "a [SSN] b [EMAIL] c"
