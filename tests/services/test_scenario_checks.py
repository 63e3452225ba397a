"""A scenario's expectations checked against a conversation (services/scenario_checks.py):
one failure per expectation not met, naming it and what happened."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from parley.records import Conversation, ConversationItem, ToolCall
from parley.services.scenario_checks import (
    check_conversation,
    check_evaluations,
    check_extraction,
    is_subset,
)

AT = datetime(2026, 12, 7, tzinfo=UTC)


def conversation(ended_by: str = "user", latencies: tuple[int, ...] = (400, 900)) -> Conversation:
    call = ToolCall(
        id="call_1",
        tool_id="tool_1",
        tool_name="book_table",
        parameters={"people": 2, "when": {"day": "friday", "time": "19:00"}},
        output={"booking": "T-1"},
    )
    items = (
        ConversationItem(role="user", text="A table for two on Friday.", created_at=AT),
        ConversationItem(
            role="assistant", text="Your table is booked.", created_at=AT, tool_calls=(call,)
        ),
    )
    return Conversation(
        id="conv_1",
        org_id="org_1",
        agent=None,
        project=None,
        status="ended",
        end_user=None,
        external_id=None,
        started_at=AT,
        ended_at=AT,
        created_at=AT,
        items=items,
        ended_by=ended_by,
        latencies_ms=latencies,
    )


def test_subset_nested_objects_compared_by_their_keys() -> None:
    assert is_subset({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}, "d": 3})
    assert not is_subset({"a": {"b": 1}}, {"a": {"b": 2}})
    assert not is_subset({"a": 1}, {})
    assert is_subset([1, 2], [1, 2])


@pytest.mark.parametrize(
    ("expect", "failures"),
    [
        ({"tool_calls": [{"name": "book_table", "parameters": {"people": 2}}]}, []),
        ({"tool_calls": [{"name": "book_table", "parameters": {"when": {"day": "friday"}}}]}, []),
        (
            {"tool_calls": [{"name": "cancel"}]},
            ["tool_calls: cancel was never called (calls made: book_table)"],
        ),
        (
            {"tool_calls": [{"name": "book_table", "parameters": {"people": 3}}]},
            [
                'tool_calls: book_table was called, but never with {"people": 3} (its '
                'parameters: {"people": 2, "when": {"day": "friday", "time": "19:00"}})'
            ],
        ),
        ({"transcript_contains": ["TABLE FOR TWO", "booked"]}, []),
        ({"transcript_contains": ["pizza"]}, ["transcript_contains: 'pizza' was never said"]),
        ({"transcript_not_contains": ["Booked"]}, ["transcript_not_contains: 'Booked' was said"]),
        ({"ended_by": ["user", "assistant"]}, []),
        ({"ended_by": ["assistant"]}, ["ended_by: expected one of assistant; it ended by user"]),
        ({"max_latency_ms": 900}, []),
        (
            {"max_latency_ms": 500},
            ["max_latency_ms: a reply came 900 ms after the caller's turn, over 500 ms"],
        ),
    ],
    ids=[
        "tool-call-parameters-subset",
        "tool-call-nested-subset",
        "tool-never-called",
        "tool-called-with-other-parameters",
        "transcript-contains-any-case-every-item",
        "transcript-missing-phrase",
        "transcript-forbidden-phrase",
        "ended-by-one-of",
        "ended-by-other",
        "latency-at-the-limit",
        "latency-over-the-limit",
    ],
)
def test_expectation_failures_name_the_expectation_and_what_happened(
    expect: dict[str, Any], failures: list[str]
) -> None:
    assert check_conversation(expect, conversation()) == failures


def test_eval_prompts_each_must_be_judged_successful() -> None:
    verdicts = {"polite": "successful", "helpful": "undecided"}
    assert check_evaluations(verdicts) == ["eval_prompts: 'helpful' was judged undecided"]


def test_extraction_each_field_given_must_be_extracted_as_given() -> None:
    result = {"city": "Paris", "people": 2, "vip": None}
    assert check_extraction({"city": "Paris", "people": 2}, result) == []
    assert check_extraction({"vip": True}, result) == ["extraction: 'vip' was null, expected true"]
