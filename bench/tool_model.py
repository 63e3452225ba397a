"""The loopback model and webhook endpoint of the tool turn (bench/voice_turn.py --tool-turns).

The model is tests/llm_server.py's OpenAI-protocol server (streamed chat completions on
127.0.0.1) with a script that reads each request: a request offering tools whose last
message is the user's gets one call of `book_table` and no words (so the first audio of the
turn is the answer after the tool, not words said before it); any other request (a request
without tools, or the round after the tool's output) gets the same words. The plain turn
and the tool turn therefore speak the same answer, and differ only by the tool round.

The endpoint is tests/webhook_receiver.py answering every call with JSON after 200 ms.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from tests.llm_server import Call, Round, Script
from tests.webhook_receiver import Reply

TOOL_NAME = "book_table"
ANSWER = ["Your table for two is booked. ", "See you tonight."]
ENDPOINT_DELAY_S = 0.2
ENDPOINT_REPLY = Reply.json({"status": "confirmed", "booking_id": "BK-1"}, delay_s=ENDPOINT_DELAY_S)
TOOL = {
    "name": TOOL_NAME,
    "description": "Book a table at the restaurant.",
    "type": "custom_webhook",
    "execution_mode": "sync",
    "endpoint_method": "POST",
    "parameters": {
        "type": "object",
        "properties": {"people": {"type": "integer", "description": "How many guests"}},
        "required": ["people"],
        "additionalProperties": False,
    },
}


@dataclass
class ToolScript(Script):
    """Calls the tool on a user's turn when tools are offered; answers in words otherwise."""

    ids: itertools.count[int] = field(default_factory=itertools.count)
    calls: int = 0

    def answer(self, body: dict[str, Any]) -> Round:
        messages = body.get("messages") or [{}]
        if body.get("tools") and messages[-1].get("role") == "user":
            self.calls += 1
            arguments = [json.dumps({"people": 2})]
            return Round(calls=[Call(TOOL_NAME, arguments, id=f"call_bench{next(self.ids)}")])
        return Round(text=list(ANSWER))
