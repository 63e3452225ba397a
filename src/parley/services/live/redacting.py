"""What a conversation with redaction on keeps (API.md section 16, "Redaction"): the words
and tool call records as they are stored, personal data replaced by tags
(`parley.redaction`).

Only what is kept passes through here: the engine, the model and the tools still get the
words as heard. A redacted conversation's items, tool call records (parameters, outputs,
the endpoint URL and the error) are redacted before they are written, so every reader of
the stored conversation (the API, `conversation.ended` and the other webhooks) sees only
tags. About half a millisecond per sentence, in the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from parley.records import ToolCall
from parley.redaction import redact


def redact_text(text: str) -> str:
    """`text` with each phone number, email, card number, SSN and IBAN replaced by its tag."""
    return redact(text).text if text else text


def redact_json(value: Any) -> Any:
    """A JSON value with every string in it redacted, and every integer that reads as
    personal data (a card or phone number sent as a number) replaced by its tag; the keys of
    objects, and every other value, stay as they are."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        found = redact(str(value))
        return found.text if found.spans else value
    if isinstance(value, dict):
        return {key: redact_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(item) for item in value]
    return value


def redact_tool_call(call: ToolCall) -> ToolCall:
    """A tool call's record as a redacted conversation stores it."""
    return replace(
        call,
        parameters=redact_json(call.parameters),
        output=redact_json(call.output),
        endpoint_url=redact_text(call.endpoint_url) if call.endpoint_url else call.endpoint_url,
        error_message=(
            redact_text(call.error_message) if call.error_message else call.error_message
        ),
    )
