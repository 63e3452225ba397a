"""Prefixed IDs and names (API.md section 0)."""

from __future__ import annotations

import re

import pytest

from parley.ids import (
    ID_KINDS,
    has_control_characters,
    is_valid_conversation_id,
    is_valid_name,
    looks_like_id,
    new_id,
)


@pytest.mark.parametrize("kind", ID_KINDS)
def test_new_id_has_prefix_and_128_bits(kind: str) -> None:
    value = new_id(kind)  # type: ignore[arg-type]
    assert re.fullmatch(rf"{kind}_[0-9a-f]{{32}}", value)
    assert looks_like_id(value, kind)  # type: ignore[arg-type]
    assert new_id(kind) != value  # type: ignore[arg-type]


def test_looks_like_id_checks_kind() -> None:
    assert not looks_like_id(new_id("agent"), "proj")
    assert looks_like_id(new_id("agent"))
    assert not looks_like_id("agent_123")


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("main", True),
        ("a", True),
        ("9-lives_x", True),
        ("a" * 64, True),
        ("a" * 65, False),
        ("", False),
        ("-x", False),
        ("_x", False),
        ("Caps", False),
        ("sp ace", False),
        ("agent_" + "f" * 32, False),
        ("agent_" + "f" * 31, True),
    ],
)
def test_is_valid_name(name: str, valid: bool) -> None:
    assert is_valid_name(name) is valid


@pytest.mark.parametrize(
    ("conversation_id", "valid"),
    [
        ("c1", True),
        ("conv_" + "a" * 32, True),
        ("order:42@shop_a.b-c", True),
        ("C" * 128, True),
        ("C" * 129, False),
        ("", False),
        ("-c", False),
        (".c", False),
        ("c 1", False),
        ("c/1", False),
        ("c\x00", False),
        ("c\n", False),
        ("ç", False),
    ],
)
def test_is_valid_conversation_id(conversation_id: str, valid: bool) -> None:
    assert is_valid_conversation_id(conversation_id) is valid


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ("plain", False),
        ("utilisateur-é 日本", False),
        ("a\x00", True),
        ("tab\t", True),
        ("del\x7f", True),
        ("c1\x85", True),
        ("\ud800", True),
    ],
    ids=["plain", "non-ascii", "nul", "tab", "del", "c1", "lone-surrogate"],
)
def test_has_control_characters(value: str, found: bool) -> None:
    assert has_control_characters(value) is found


def test_control_characters_are_unicode_category_cc_exactly() -> None:
    import sys
    import unicodedata

    for code in range(sys.maxunicode + 1):
        char = chr(code)
        expected = unicodedata.category(char) in {"Cc", "Cs"}  # Cs: an unpaired surrogate
        assert has_control_characters(f"a{char}b") is expected, hex(code)
