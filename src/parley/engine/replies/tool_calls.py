"""Tool calls in the OpenAI chat-completions protocol: the `tools`, the history, the stream.

A streamed answer spreads each call over chunks of `delta.tool_calls`: the first names the
call (`id`, `function.name`) at an `index`, the next ones add pieces of its
`function.arguments`. Servers differ: some interleave parallel calls by index, some reuse
index 0 for every call and tell them apart only by `id`, some omit the `id`. The assembler
starts a new call when an index gets a different `id` or a second name, and gives a call
without an `id` a generated one (the history needs one to pair the output with the call).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from parley.engine.base import ToolCallPart, Turn
from parley.engine.tools import ToolDefinition


def tool_spec(tool: ToolDefinition) -> dict[str, Any]:
    """Return a definition as an OpenAI `tools` item (function calling)."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": _plain(tool.parameters),
        },
    }


def history_messages(history: Sequence[Turn]) -> list[dict[str, Any]]:
    """Return the history as chat messages.

    `tool` turns at the start (their call was cut off by the history limit) are left out:
    a server refuses a `tool` message that follows no call.
    """
    start = 0
    while start < len(history) and history[start].role == "tool":
        start += 1
    return [_message(turn) for turn in history[start:]]


def _message(turn: Turn) -> dict[str, Any]:
    if turn.role == "tool":
        return {"role": "tool", "tool_call_id": turn.tool_call_id or "", "content": turn.text}
    if turn.tool_calls:
        return {
            "role": "assistant",
            "content": turn.text or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in turn.tool_calls
            ],
        }
    return {"role": turn.role, "content": turn.text}


@dataclass
class _Building:
    id: str
    name: str
    arguments: str


class ToolCallAssembler:
    """Assembles the streamed `delta.tool_calls` of one answer into whole calls."""

    def __init__(self) -> None:
        self._calls: list[_Building] = []
        self._at: dict[int, _Building] = {}

    def feed(self, deltas: Iterable[Any] | None) -> bool:
        """Add one chunk's `delta.tool_calls`; return True if it held any."""
        fed = False
        for delta in deltas or ():
            fed = True
            index = getattr(delta, "index", None) or 0
            call_id = getattr(delta, "id", None) or ""
            function = getattr(delta, "function", None)
            name = getattr(function, "name", None) or ""
            arguments = getattr(function, "arguments", None) or ""
            current = self._at.get(index)
            another_id = bool(call_id and current and current.id and call_id != current.id)
            another_name = bool(not call_id and name and current and current.name)
            if current is None or another_id or another_name:
                current = self._at[index] = _Building(call_id, name, "")
                self._calls.append(current)
            current.id = current.id or call_id
            current.name = current.name or name
            current.arguments += arguments
        return fed

    def finish(self) -> list[ToolCallPart]:
        """Return the calls in the order they began."""
        return [
            ToolCallPart(call.id or f"call_{secrets.token_hex(12)}", call.name, call.arguments)
            for call in self._calls
        ]


def _plain(value: Any) -> Any:
    """Return `value` as plain dicts and lists (a definition may hold read-only mappings)."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
