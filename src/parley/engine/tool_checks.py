"""Checking a tool call the model made before anything runs it (API.md section 12).

A model may call a tool nobody offered, send arguments that are not JSON, or invent
parameters the tool's schema does not allow. Each of these refuses the call with a reason
the model is told (as the call's `{"error": ...}` output) so it can try again: never a crash.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jsonschema import SchemaError, validators
from jsonschema.exceptions import best_match

from parley.engine.base import ToolCallPart
from parley.engine.tools import ToolDefinition, ToolInvocation

MAX_ARGUMENTS_CHARS = 64 * 1024
"""Longer arguments are refused unread: a model in a loop could send megabytes."""

_MAX_REASON_CHARS = 300


class ToolCallRefused(Exception):
    """The call cannot run; `reason` is what the model is told."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason[:_MAX_REASON_CHARS]


def check_call(call: ToolCallPart, tools: Mapping[str, ToolDefinition]) -> ToolInvocation:
    """Return the call with its arguments parsed; raise ToolCallRefused if it cannot run.

    Checks, in order: the tool is offered, the arguments are a JSON object (empty text
    counts as `{}`, as some servers send for a call without parameters), and they match
    the tool's JSON Schema.
    """
    definition = tools.get(call.name)
    if definition is None:
        raise ToolCallRefused(f"unknown tool {call.name!r}")
    arguments = _parse(call.arguments)
    _validate(arguments, definition.parameters)
    return ToolInvocation(id=call.id, name=call.name, arguments=arguments)


def _parse(text: str) -> dict[str, Any]:
    if len(text) > MAX_ARGUMENTS_CHARS:
        raise ToolCallRefused("the arguments are too long")
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        raise ToolCallRefused("the arguments are not valid JSON") from None
    if not isinstance(value, dict):
        raise ToolCallRefused("the arguments must be a JSON object")
    return value


def _validate(arguments: dict[str, Any], schema: Mapping[str, Any]) -> None:
    plain = json.loads(json.dumps(schema, default=dict))  # read-only mappings to dicts
    validator_class = validators.validator_for(plain)
    try:
        validator_class.check_schema(plain)
    except SchemaError:
        raise ToolCallRefused("the tool's parameter schema is invalid") from None
    error = best_match(validator_class(plain).iter_errors(arguments))
    if error is not None:
        where = "/".join(str(step) for step in error.absolute_path)
        at = f" (at {where})" if where else ""
        raise ToolCallRefused(f"invalid arguments: {error.message}{at}")
