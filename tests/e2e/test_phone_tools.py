"""Tools on phone calls (API.md sections 12 and 13): a WebSocket tool has no client to run it
on a call, so its output is `{"error": "no client connected"}` and the call goes on. The
model is a real HTTP server on loopback speaking OpenAI's streaming protocol."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Customer, Server
from tests.e2e.test_phone_calls import make_line
from tests.llm_server import Call, ChatServer, Round, running_chat_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def app_settings(chat: ChatServer) -> dict[str, Any]:
    return {
        "llm_base_url": chat.base_url,
        "llm_api_key": "sk-test",
        "llm_model": "bistro-7b",
        "llm_timeout_seconds": 5.0,
    }


async def test_call_websocket_tool_gets_no_client_connected_and_call_goes_on(
    customer: Customer, server: Server, chat: ChatServer
) -> None:
    made = await customer.api.post(
        "/v1/tools",
        json={
            "name": "lookup_room",
            "description": "Looks up a room.",
            "type": "custom_websocket",
            "execution_mode": "sync",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    )
    assert made.status_code == 201, made.text
    line = await make_line(customer, server, welcome=None, tools=["lookup_room"])
    arguments = [json.dumps({})]
    chat.script.rounds.append(Round(calls=[Call("lookup_room", arguments, id="call_r1")]))
    chat.script.rounds.append(Round(text=["I cannot look that up on the phone."]))
    twiml = await line.call()
    conversation_id = twiml.parameters["conversation_id"]
    stream = await line.stream(twiml)
    try:
        await line.until_status(conversation_id, "live", within=10)
        await stream.press("12#")
        found = await line.until_items(conversation_id, 2, within=30)
        await stream.wait_played(1.0, within=30)
    finally:
        await stream.close()
    assert found[0] == ("user", "DTMF: 12")
    conversation = await line.conversation(conversation_id)
    assistant = conversation["items"][1]
    assert assistant["role"] == "assistant"
    (stored_call,) = assistant["tool_calls"]
    assert stored_call["tool"]["name"] == "lookup_room"
    assert stored_call["output"] == {"error": "no client connected"}
    tool_turns = [m for m in chat.requests[-1].body["messages"] if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in tool_turns] == [{"error": "no client connected"}]
    assert "look that up" in assistant["text"]
