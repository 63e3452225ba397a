"""The built-ins `keypad_input` and `choose_not_to_respond` on the conversation socket
(API.md sections 8, 12 and 15), end to end: real uvicorn, a real OpenAI-protocol server on
loopback streaming scripted tool calls, a real WebSocket client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Customer, Server
from tests.e2e.test_tools_ws import call_round, open_socket, started, stored, tool_messages
from tests.e2e.test_ws import receive_until
from tests.llm_server import ChatServer, Round, running_chat_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

BUILT_INS = ["keypad_input", "choose_not_to_respond"]


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


def types(seen: list[dict[str, Any]]) -> list[str]:
    return [message["type"] for message in seen]


async def test_keypad_input_sends_dtmf_frame_after_the_words_and_model_told_success(
    server: Server, customer: Customer, chat: ChatServer
) -> None:
    chat.script.rounds.append(
        call_round("keypad_input", {"digits": "3*#"}, text=["Pressing three."])
    )
    chat.script.rounds.append(Round(text=["Done."]))
    ws = await open_socket(server, customer, "keypad-ws-1", tools=BUILT_INS)
    async with ws:
        await started(ws)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Press three"}))
        seen = await receive_until(ws, "assistant_finished_speaking", within=30)
    offered = [tool["function"] for tool in chat.requests[0].body["tools"]]
    assert [tool["name"] for tool in offered] == BUILT_INS
    assert offered[0]["parameters"]["properties"]["digits"]["pattern"] == "^[0-9*#]{1,32}$"
    assert offered[1]["parameters"]["properties"] == {}
    dtmf = [message for message in seen if message["type"] == "dtmf"]
    assert dtmf == [{"type": "dtmf", "digits": "3*#"}]
    kinds = types(seen)
    spoken = [m["text"] for m in seen if m["type"] == "audio_chunk" and m["text"]]
    assert spoken == ["Pressing three.", "Done."]
    first_words = kinds.index("audio_chunk")
    assert kinds.index("assistant_started_speaking") < first_words < kinds.index("dtmf")
    assert [json.loads(m["content"]) for m in tool_messages(chat)] == [{"success": True}]
    assert len(chat.requests) == 2  # asked again after the keys, as after any call


async def test_keypad_input_bad_digits_is_an_error_output_and_no_dtmf(
    server: Server, customer: Customer, chat: ChatServer
) -> None:
    chat.script.rounds.append(call_round("keypad_input", {"digits": "12a"}))
    chat.script.rounds.append(Round(text=["Sorry, I cannot press that."]))
    ws = await open_socket(server, customer, "keypad-ws-bad", tools=BUILT_INS)
    async with ws:
        await started(ws)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Press 12a"}))
        seen = await receive_until(ws, "assistant_finished_speaking", within=30)
    assert "dtmf" not in types(seen)
    warnings = [m["warning"]["code"] for m in seen if m["type"] == "warning"]
    assert warnings == ["tool_call_invalid"]
    (output,) = [json.loads(m["content"]) for m in tool_messages(chat)]
    assert "error" in output
    assert "success" not in output


async def test_choose_not_to_respond_sends_frame_and_no_audio_then_next_turn_answered(
    server: Server, customer: Customer, chat: ChatServer
) -> None:
    chat.script.rounds.append(call_round("choose_not_to_respond", {}))
    chat.script.reply = ["Yes, ", "I am here."]
    ws = await open_socket(server, customer, "silent-ws-1", tools=BUILT_INS)
    async with ws:
        await started(ws)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Hold on a sec"}))
        silent = await receive_until(ws, "assistant_chose_not_to_respond", within=30)
        asked_once = len(chat.requests)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Still there?"}))
        answer = await receive_until(ws, "assistant_finished_speaking", within=30)
    assert silent[-1] == {"type": "assistant_chose_not_to_respond"}
    assert "audio_chunk" not in types(silent)
    assert "assistant_started_speaking" not in types(silent)
    assert asked_once == 1  # not asked again after choosing silence
    spoken = [m["text"] for m in answer if m["type"] == "audio_chunk" and m["text"]]
    assert spoken == ["Yes, I am here."]
    assert [json.loads(m["content"]) for m in tool_messages(chat)] == [{"success": True}]
    conversation = await stored(customer, "silent-ws-1")
    assistant = [item["text"] for item in conversation["items"] if item["role"] == "assistant"]
    assert assistant == ["Yes, I am here."]  # the silent turn stores no assistant item


async def test_update_tools_subset_accepts_keypad_and_silence_built_ins(
    server: Server, customer: Customer, chat: ChatServer
) -> None:
    ws = await open_socket(server, customer, "builtins-subset")
    async with ws:
        await started(ws)
        subset = {"type": "update_tools_subset", "tools": ["choose_not_to_respond", "keypad_input"]}
        await ws.send(json.dumps(subset))
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Hello"}))
        seen = await receive_until(ws, "assistant_finished_speaking", within=30)
    assert "error" not in types(seen)
    offered = [tool["function"]["name"] for tool in chat.requests[-1].body["tools"]]
    assert offered == ["choose_not_to_respond", "keypad_input"]
