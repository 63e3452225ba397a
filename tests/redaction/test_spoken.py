"""The number-word normaliser: each rule of spoken.py's docstring, and the way back."""

from __future__ import annotations

import pytest

from parley.redaction.spoken import normalise_numbers

RULES = [
    # (rule, text, rewritten)
    ("units", "four one five", "415"),
    ("zero", "zero nine", "09"),
    ("oh inside a number", "four oh five", "405"),
    ("oh leading a number", "oh seven eight", "078"),
    ("oh as a word", "oh, four one five", "oh, 415"),
    ("oh alone", "oh I see", "oh I see"),
    ("oh trailing after a pause", "four one, oh", "41, oh"),
    ("teens", "twelve thirteen", "1213"),
    ("tens with a unit", "forty two", "42"),
    ("tens hyphenated", "forty-two", "42"),
    ("tens alone", "twenty twenty", "2020"),
    ("tens before oh", "twenty oh five", "2005"),
    ("hundreds", "eight hundred", "800"),
    ("hundreds with a teen", "four hundred fifteen", "415"),
    ("hundreds with tens and unit", "one hundred twenty one", "121"),
    ("hundreds never take a bare unit", "eight hundred five five five", "800555"),
    ("zero hundred is no number", "zero hundred", "0 hundred"),
    ("double", "double five", "55"),
    ("triple", "triple seven", "777"),
    ("double oh", "double oh seven", "007"),
    ("double a digit", "double 5", "55"),
    ("double without a digit", "double check", "double check"),
    ("commas keep groups", "four one five, five five five, two six seven one", "415 555 2671"),
    ("full stops keep groups", "Four one five. Five five five.", "415 555."),
    ("dashes keep groups", "four-one-five", "4 1 5"),
    ("written digits keep their groups", "four one five 555 2671", "415 555 2671"),
    ("digits alone stay as written", "415-555-2671 and 12, 13", "415-555-2671 and 12, 13"),
    ("words break a run", "four at seven", "4 at 7"),
    ("and breaks a run", "four hundred and fifteen", "400 and 15"),
    ("a word containing a number is no number", "someone fourteenth", "someone fourteenth"),
    ("case does not matter", "Four ONE five", "415"),
]


@pytest.mark.parametrize(("text", "rewritten"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_normalise_numbers_rules(text: str, rewritten: str) -> None:
    assert normalise_numbers(text).text == rewritten


def test_normalise_numbers_maps_digits_back_to_their_words() -> None:
    text = "call four one five, double five five, 2671 ok"
    normalised = normalise_numbers(text)
    assert normalised.text == "call 415 555 2671 ok"
    source = [normalised.source_span(i, i + 1) for i in range(len(normalised.text))]
    said = [text[start:end] for start, end in source]
    assert said[:5] == ["c", "a", "l", "l", " "]
    assert said[5:8] == ["four", "one", "five"]
    assert said[8] == ", "
    assert said[9:12] == ["double five", "double five", "five"]
    assert said[13:17] == ["2671"] * 4
    assert said[17:] == [" ", "o", "k"]


def test_normalise_numbers_span_covers_whole_words() -> None:
    text = "my number is forty-two sixty, thanks"
    normalised = normalise_numbers(text)
    assert normalised.text == "my number is 4260, thanks"
    start = normalised.text.index("4260")
    assert normalised.source_span(start, start + 4) == (13, 28)
    assert text[13:28] == "forty-two sixty"
    assert normalised.source_span(start + 1, start + 2) == (13, 22)  # "2" is "forty-two"


def test_normalise_numbers_text_without_numbers_is_the_same() -> None:
    text = "Hello there, how are you?"
    normalised = normalise_numbers(text)
    assert normalised.text == text
    assert normalised.source_span(6, 11) == (6, 11)


@pytest.mark.parametrize(("start", "end"), [(3, 3), (-1, 2), (0, 99)])
def test_normalise_numbers_source_span_refuses_a_span_outside(start: int, end: int) -> None:
    with pytest.raises(ValueError, match="not a span"):
        normalise_numbers("four one five").source_span(start, end)
