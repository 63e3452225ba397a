"""The backchannels' one list (API.md section 18), as the recognizer writes them."""

from __future__ import annotations

import pytest

from parley.engine.backchannels import BACKCHANNELS, is_backchannel, words


@pytest.mark.parametrize(
    "text",
    [
        "Mm-hmm.",
        "Uh-huh.",
        "uh huh",
        "Yeah.",
        "Right.",
        "Okay.",
        "OK",
        "Sure.",
        "I see.",
        "I see. I see.",
        "Got it.",
        "Yep.",
        "Mhm.",
        "Aha",
        "Yeah, yeah. Right.",
    ],
)
def test_backchannel_alone_recognised_however_written(text: str) -> None:
    assert is_backchannel(text)


@pytest.mark.parametrize(
    "text", ["Wait.", "Yeah, but wait.", "Okay stop", "I see a problem.", "Mama", "", "..."]
)
def test_backchannel_with_other_words_or_none_is_not_one(text: str) -> None:
    assert not is_backchannel(text)


def test_backchannel_fragment_cut_off_is_not_a_word() -> None:
    assert words("Hold- I-") == []
    assert words("Hold on, I-") == ["hold", "on"]


def test_backchannel_list_written_as_words_writes_them() -> None:
    assert all(" ".join(words(phrase)) == phrase for phrase in BACKCHANNELS)
