"""A scenario's expectations checked against the conversation its caller held (API.md 19).

Each failure is one sentence that names the expectation and says what happened instead:
- `tool_calls`: each expected call was made, by name, with at least the parameters given
  (a subset: nested objects compared the same way);
- `transcript_contains` / `transcript_not_contains`: every item's text, the user's and the
  agent's, compared without regard to case;
- `ended_by`: the conversation ended one of the ways listed;
- `max_latency_ms`: no reply came later than this after the caller's turn ended;
- `eval_prompts`: each named evaluation judged `successful`;
- `extraction`: each field given was extracted with that value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from parley.records import Conversation, ToolCall

__all__ = ["check_conversation", "check_evaluations", "check_extraction", "is_subset"]


def is_subset(expected: Any, actual: Any) -> bool:
    """Whether `actual` holds `expected`: every key of an object (recursively), else equal."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and is_subset(value, actual[key]) for key, value in expected.items()
        )
    return bool(expected == actual)


def check_conversation(expect: Mapping[str, Any], conversation: Conversation) -> list[str]:
    """The failures of the expectations read from the conversation itself."""
    failures: list[str] = []
    calls = [call for item in conversation.items for call in item.tool_calls]
    for wanted in expect.get("tool_calls") or ():
        failures.extend(_tool_call(wanted, calls))
    said = " ".join(item.text for item in conversation.items).lower()
    for phrase in expect.get("transcript_contains") or ():
        if phrase.lower() not in said:
            failures.append(f"transcript_contains: {phrase!r} was never said")
    for phrase in expect.get("transcript_not_contains") or ():
        if phrase.lower() in said:
            failures.append(f"transcript_not_contains: {phrase!r} was said")
    endings = expect.get("ended_by")
    if endings and conversation.ended_by not in endings:
        failures.append(
            f"ended_by: expected one of {', '.join(endings)}; it ended by {conversation.ended_by}"
        )
    limit = expect.get("max_latency_ms")
    if limit is not None and conversation.latencies_ms and max(conversation.latencies_ms) > limit:
        failures.append(
            f"max_latency_ms: a reply came {max(conversation.latencies_ms)} ms after the "
            f"caller's turn, over {limit} ms"
        )
    return failures


def check_evaluations(verdicts: Mapping[str, str]) -> list[str]:
    """The failures of `eval_prompts`: each prompt's verdict must be `successful`."""
    return [
        f"eval_prompts: {name!r} was judged {verdict}"
        for name, verdict in verdicts.items()
        if verdict != "successful"
    ]


def check_extraction(expected: Mapping[str, Any], result: Mapping[str, Any]) -> list[str]:
    """The failures of `extraction`: each field given must have been extracted as given."""
    return [
        f"extraction: {field!r} was {json.dumps(result.get(field))}, expected {json.dumps(value)}"
        for field, value in expected.items()
        if not is_subset(value, result.get(field))
    ]


def _tool_call(wanted: Mapping[str, Any], calls: Sequence[ToolCall]) -> list[str]:
    name, parameters = wanted["name"], wanted.get("parameters") or {}
    named = [call for call in calls if call.tool_name == name]
    if any(is_subset(parameters, call.parameters) for call in named):
        return []
    if not named:
        made = ", ".join(sorted({call.tool_name for call in calls})) or "none"
        return [f"tool_calls: {name} was never called (calls made: {made})"]
    seen = "; ".join(json.dumps(call.parameters, sort_keys=True) for call in named)
    return [
        f"tool_calls: {name} was called, but never with {json.dumps(parameters, sort_keys=True)}"
        f" (its parameters: {seen})"
    ]
