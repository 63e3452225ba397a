"""PARLEY_WEBHOOK_RETRY_SCHEDULE (API.md section 14): comma-separated seconds that replace
the retry schedule; anything else stops the server with a message naming the rule."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from parley.config import Settings


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)


def test_retry_schedule_default_is_the_api_schedule() -> None:
    assert settings().retry_schedule == (5, 300, 1800, 7200, 18000, 36000, 36000)


def test_retry_schedule_replaced_by_the_variable() -> None:
    assert settings(webhook_retry_schedule=" 1, 2 ,3").retry_schedule == (1, 2, 3)


@pytest.mark.parametrize(
    "value",
    ["", "1,,2", "0", "-5", "1.5", "five", "604801", ",".join(["1"] * 21)],
    ids=["empty", "empty_entry", "zero", "negative", "fraction", "word", "over_a_week", "too_many"],
)
def test_retry_schedule_invalid_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="comma-separated waits in seconds"):
        settings(webhook_retry_schedule=value)
