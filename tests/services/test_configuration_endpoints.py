"""The configuration endpoint's answer, read strictly (services/configuration_endpoints.py
rule 5): each member's type and size, nothing else. The call itself is tested against a
real receiver in tests/e2e/test_configuration_endpoint.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from parley.errors import ConfigurationEndpointInvalidResponse
from parley.records import UNSET
from parley.services.configuration_endpoints import Overrides, parse_answer


def answer(value: Any) -> bytes:
    return json.dumps(value).encode()


def test_configuration_answer_every_member_read() -> None:
    read = parse_answer(
        answer(
            {
                "welcome_message": "Hi",
                "system_prompt": "Be brief.",
                "template_variables": {"shop": "Chez Ada"},
                "tools": ["book_table"],
                "boosted_keywords": ["Ada"],
            }
        )
    )
    assert read == Overrides("Hi", "Be brief.", {"shop": "Chez Ada"}, ("book_table",), ("Ada",))


def test_configuration_answer_empty_object_overrides_nothing() -> None:
    assert parse_answer(b"{}") == Overrides()


def test_configuration_answer_welcome_null_means_no_welcome() -> None:
    read = parse_answer(answer({"welcome_message": None}))
    assert read.welcome_message is None
    assert read.system_prompt is UNSET


@pytest.mark.parametrize(
    "value",
    [
        {"welcome_message": 1},
        {"welcome_message": "x" * 2001},
        {"system_prompt": None},
        {"system_prompt": "x" * 20_001},
        {"template_variables": ["shop"]},
        {"template_variables": {"shop": 1}},
        {"tools": "book_table"},
        {"tools": [""]},
        {"boosted_keywords": ["x"] * 101},
        {"boosted_keywords": ["x" * 65]},
        {"boosted_keywords": [7]},
        {"language": "de"},
    ],
    ids=[
        "welcome-not-text",
        "welcome-too-long",
        "prompt-null",
        "prompt-too-long",
        "variables-not-object",
        "variable-not-text",
        "tools-not-list",
        "tool-empty",
        "too-many-keywords",
        "keyword-too-long",
        "keyword-not-text",
        "unknown-member",
    ],
)
def test_configuration_answer_wrong_member_invalid_response(value: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationEndpointInvalidResponse):
        parse_answer(answer(value))


@pytest.mark.parametrize(
    "body", [b"", b"\xff\xfe", b"not json", b"[]", b'"text"', b"null"], ids=str
)
def test_configuration_answer_not_an_object_invalid_response(body: bytes) -> None:
    with pytest.raises(ConfigurationEndpointInvalidResponse):
        parse_answer(body)
