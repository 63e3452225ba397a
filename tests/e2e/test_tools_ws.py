"""Tools on the conversation socket (API.md sections 8 and 12), end to end.

A real uvicorn server, a real OpenAI-protocol server on loopback that streams scripted tool
calls, a real HTTP receiver for webhook tools that checks signatures with the
`standardwebhooks` and `svix` libraries, and real WebSocket clients.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from standardwebhooks import Webhook
from svix.webhooks import Webhook as SvixWebhook
from websockets.asyncio.client import ClientConnection, connect

from parley.cli.serve import configure_logging
from parley.engine import AudioFormat
from tests import speech
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_voice import stream_realtime
from tests.e2e.test_ws import receive, receive_until
from tests.llm_server import Call, ChatServer, Round, running_chat_server
from tests.webhook_receiver import Reply, WebhookReceiver, running_receiver

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

LOOKUP = {
    "type": "custom_websocket",
    "tool_schema": {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Find an order by its number.",
            "parameters": {
                "type": "object",
                "properties": {"order": {"type": "string"}},
                "required": ["order"],
                "additionalProperties": False,
            },
        },
    },
    "tool_call_output_timeout_ms": 1000,
}


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with running_receiver() as server:
        yield server


@pytest.fixture
def app_settings(chat: ChatServer) -> dict[str, Any]:
    return {
        "llm_base_url": chat.base_url,
        "llm_api_key": "sk-test",
        "llm_model": "bistro-7b",
        "llm_timeout_seconds": 5.0,
        "outbound_allow_http": True,
        "outbound_allow_private_networks": True,
    }


async def open_socket(
    server: Server, customer: Customer, conversation_id: str, **config: Any
) -> ClientConnection:
    ws = await connect(f"{server.ws}/v1/sts/ws?jwt={customer.jwt(conversation_id)}")
    message = {"type": "config", "agent": customer.agent, "input_format": "pcm_16000"}
    message["output_format"] = "pcm_16000"
    await ws.send(json.dumps({**message, **config}))
    return ws


async def started(ws: ClientConnection) -> None:
    assert (await receive(ws))["type"] == "conversation_created"
    assert (await receive(ws))["type"] == "ready_to_start_conversation"


async def stored(customer: Customer, conversation_id: str) -> dict[str, Any]:
    response = await customer.api.get(f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    conversation: dict[str, Any] = response.json()["conversation"]
    return conversation


def call_round(name: str, arguments: dict[str, Any], *, text: list[str] | None = None) -> Round:
    return Round(text=text or [], calls=[Call(name, [json.dumps(arguments)], id="call_m1")])


def tool_messages(chat: ChatServer) -> list[dict[str, Any]]:
    return [m for m in chat.requests[-1].body["messages"] if m["role"] == "tool"]


async def test_websocket_tool_call_output_reaches_model_and_is_stored(
    server: Server, customer: Customer, chat: ChatServer
) -> None:
    chat.script.rounds.append(call_round("lookup_order", {"order": "A17"}))
    chat.script.rounds.append(Round(text=["Your order ships today."]))
    ws = await open_socket(server, customer, "tools-ws-1", tools=[LOOKUP])
    async with ws:
        await started(ws)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Where is A17?"}))
        seen = await receive_until(ws, "tool_call", within=30)
        call = seen[-1]
        assert call["tool_name"] == "lookup_order"
        assert call["parameters"] == {"order": "A17"}
        await ws.send(
            json.dumps(
                {
                    "type": "tool_call_output",
                    "tool_call_id": call["tool_call_id"],
                    "output": {"status": "shipped"},
                }
            )
        )
        processed = (await receive_until(ws, "tool_call_output_processed", within=30))[-1]
        finished = await receive_until(ws, "assistant_finished_speaking", within=30)
    assert processed["tool_call_id"] == call["tool_call_id"]
    assert processed["tool"] == {"id": "inline_lookup_order", "name": "lookup_order"}
    assert processed["parameters"] == {"order": "A17"}
    assert processed["output"] == {"status": "shipped"}
    assert processed["endpoint_url"] is None
    assert processed["response_status_code"] is None
    assert processed["timed_out"] is False
    spoken = " ".join(m["text"] for m in finished if m["type"] == "audio_chunk" and m["text"])
    assert "ships today" in spoken
    offered = chat.requests[0].body["tools"]
    assert [tool["function"]["name"] for tool in offered] == ["lookup_order"]
    assert [json.loads(m["content"]) for m in tool_messages(chat)] == [{"status": "shipped"}]
    conversation = await stored(customer, "tools-ws-1")
    (assistant,) = [i for i in conversation["items"] if i["role"] == "assistant"]
    (stored_call,) = assistant["tool_calls"]
    assert stored_call["id"] == call["tool_call_id"]
    assert stored_call["tool"] == {"id": "inline_lookup_order", "name": "lookup_order"}
    assert stored_call["parameters"] == {"order": "A17"}
    assert stored_call["output"] == {"status": "shipped"}


async def test_websocket_tool_no_answer_in_time_times_out_and_late_answer_warns(
    server: Server, customer: Customer, chat: ChatServer
) -> None:
    chat.script.rounds.append(call_round("lookup_order", {"order": "B2"}))
    chat.script.rounds.append(Round(text=["I could not check that."]))
    ws = await open_socket(server, customer, "tools-ws-2", tools=[LOOKUP])
    async with ws:
        await started(ws)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Where is B2?"}))
        call = (await receive_until(ws, "tool_call", within=30))[-1]
        processed = (await receive_until(ws, "tool_call_output_processed", within=30))[-1]
        await ws.send(
            json.dumps(
                {"type": "tool_call_output", "tool_call_id": call["tool_call_id"], "output": 1}
            )
        )
        late = (await receive_until(ws, "warning", within=10))[-1]
        await ws.send(
            json.dumps({"type": "tool_call_output", "tool_call_id": "call_nope", "output": 1})
        )
        unknown = (await receive_until(ws, "error", within=10))[-1]
        await receive_until(ws, "assistant_finished_speaking", within=30)
    assert processed["output"] == {"error": "timed out"}
    assert processed["timed_out"] is True
    assert late["warning"]["code"] == "tool_call_late"
    assert unknown["error"]["code"] == "unknown_tool_call"
    assert [json.loads(m["content"]) for m in tool_messages(chat)] == [{"error": "timed out"}]


async def test_webhook_tool_call_signed_stored_and_answered_secrets_never_logged(
    server: Server,
    customer: Customer,
    chat: ChatServer,
    receiver: WebhookReceiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    configure_logging("debug")  # as `parley serve` with PARLEY_LOG_LEVEL=debug
    created = await customer.api.post(
        "/v1/tools",
        json={
            "name": "book_table",
            "description": "Book a table.",
            "type": "custom_webhook",
            "execution_mode": "sync",
            "endpoint_method": "POST",
            "endpoint_url": receiver.url("/bookings"),
            "endpoint_headers": {"X-Api-Key": "secret-header-value"},
            "parameters": {
                "type": "object",
                "properties": {"people": {"type": "integer"}},
                "required": ["people"],
            },
        },
    )
    assert created.status_code == 201, created.text
    secret = created.json()["signing_secret"]
    patched = await customer.api.patch(
        f"/v1/agents/{customer.agent}", json={"tools": ["book_table"]}
    )
    assert patched.status_code == 200, patched.text
    receiver.script(Reply.json({"booking": "T-9"}))
    chat.script.rounds.append(call_round("book_table", {"people": 2}, text=["Let me book that. "]))
    chat.script.rounds.append(Round(text=["Booked, reference T 9."]))
    ws = await open_socket(server, customer, "tools-wh-1")
    async with ws:
        await started(ws)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Table for two"}))
        processed = (await receive_until(ws, "tool_call_output_processed", within=30))[-1]
        await receive_until(ws, "assistant_finished_speaking", within=30)
    (request,) = receiver.requests
    assert request.method == "POST"
    assert request.json() == {"people": 2, "conversation_id": "tools-wh-1"}
    assert request.headers["x-api-key"] == "secret-header-value"
    assert request.headers["idempotency-key"] == processed["tool_call_id"]
    assert request.headers["webhook-id"] == processed["tool_call_id"]
    Webhook(secret).verify(request.body, request.headers)
    svix_headers = {
        "svix-id": request.headers["webhook-id"],
        "svix-timestamp": request.headers["webhook-timestamp"],
        "svix-signature": request.headers["webhook-signature"],
    }
    SvixWebhook(secret).verify(request.body, svix_headers)
    assert processed["endpoint_method"] == "POST"
    assert processed["endpoint_url"] == receiver.url("/bookings")
    assert processed["response_status_code"] == 200
    assert processed["response_body"] == {"booking": "T-9"}
    assert processed["parameters"] is None
    assert processed["output"] is None
    assert [json.loads(m["content"]) for m in tool_messages(chat)] == [{"booking": "T-9"}]
    conversation = await stored(customer, "tools-wh-1")
    (assistant,) = [i for i in conversation["items"] if i["role"] == "assistant"]
    (call,) = assistant["tool_calls"]
    assert call["tool"]["name"] == "book_table"
    assert call["tool"]["id"].startswith("tool_")
    assert call["parameters"] == {"people": 2}
    assert call["output"] == {"booking": "T-9"}
    assert call["response_status_code"] == 200
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "book_table" in logged  # the call was logged...
    assert secret not in logged  # ...without the tool's secrets
    assert secret.removeprefix("whsec_") not in logged
    assert "secret-header-value" not in logged


async def test_webhook_tool_endpoint_failure_becomes_error_output_and_conversation_goes_on(
    server: Server, customer: Customer, chat: ChatServer, receiver: WebhookReceiver
) -> None:
    created = await customer.api.post(
        "/v1/tools",
        json={
            "name": "flaky",
            "description": "Fails.",
            "type": "custom_webhook",
            "endpoint_url": receiver.url("/flaky"),
            "parameters": {"type": "object", "properties": {}},
        },
    )
    assert created.status_code == 201, created.text
    receiver.script(Reply.text("boom", status=500))
    chat.script.rounds.append(call_round("flaky", {}))
    chat.script.rounds.append(Round(text=["Sorry, that failed."]))
    ws = await open_socket(server, customer, "tools-wh-2", tools=["flaky"])
    async with ws:
        await started(ws)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Try it"}))
        processed = (await receive_until(ws, "tool_call_output_processed", within=30))[-1]
        await receive_until(ws, "assistant_finished_speaking", within=30)
        await ws.send(json.dumps({"type": "say", "text": "Still here."}))
        await receive_until(ws, "assistant_finished_speaking", within=30)
    assert processed["response_status_code"] == 500
    (message,) = tool_messages(chat)
    assert "error" in json.loads(message["content"])
    assert len(receiver.requests) == 1  # never retried


async def test_config_tools_unknown_name_is_error_and_socket_stays_open(
    server: Server, customer: Customer
) -> None:
    ws = await open_socket(server, customer, "tools-unknown", tools=["no_such_tool"])
    async with ws:
        error = await receive(ws)
        assert error["type"] == "error"
        assert error["error"]["code"] == "unknown_tool"
        await ws.send(
            json.dumps(
                {
                    "type": "config",
                    "agent": customer.agent,
                    "input_format": "pcm_16000",
                    "output_format": "pcm_16000",
                }
            )
        )
        await started(ws)


async def test_update_tools_subset_changes_tools_offered_to_model(
    server: Server, customer: Customer, chat: ChatServer
) -> None:
    ws = await open_socket(server, customer, "tools-subset", tools=[LOOKUP])
    async with ws:
        await started(ws)
        await ws.send(
            json.dumps({"type": "update_tools_subset", "tools": ["natural_conversation_ending"]})
        )
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Hello"}))
        await receive_until(ws, "assistant_finished_speaking", within=30)
    offered = [tool["function"]["name"] for tool in chat.requests[-1].body["tools"]]
    assert offered == ["natural_conversation_ending"]


async def test_natural_conversation_ending_ends_after_goodbye_by_assistant(
    server: Server, customer: Customer, chat: ChatServer
) -> None:
    chat.script.rounds.append(call_round("natural_conversation_ending", {}, text=["Goodbye!"]))
    ws = await open_socket(server, customer, "tools-end", tools=["natural_conversation_ending"])
    async with ws:
        await started(ws)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "That is all"}))
        seen = await receive_until(ws, "assistant_ended_conversation", within=30)
        await ws.wait_closed()
    assert ws.close_code == 1000
    spoken = " ".join(m["text"] for m in seen if m["type"] == "audio_chunk" and m["text"])
    assert "Goodbye" in spoken
    ended = await stored(customer, "tools-end")
    assert (ended["status"], ended["ended_by"]) == ("ended", "assistant")


async def test_template_variables_fill_prompts_and_are_stored(
    server: Server, customer: Customer, chat: ChatServer
) -> None:
    patched = await customer.api.patch(
        f"/v1/agents/{customer.agent}",
        json={
            "system_prompt": "You help {{customer_name}} at {{ shop }}.",
            "template_variables": {
                "customer_name": {"default_value": "a guest"},
                "shop": {"default_value": "Bistro"},
            },
        },
    )
    assert patched.status_code == 200, patched.text
    ws = await open_socket(
        server, customer, "tools-tpl", template_variables={"customer_name": "Ada"}
    )
    async with ws:
        await started(ws)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Hi"}))
        await receive_until(ws, "assistant_finished_speaking", within=30)
    system = chat.requests[-1].body["messages"][0]
    assert system == {"role": "system", "content": "You help Ada at Bistro."}
    conversation = await stored(customer, "tools-tpl")
    assert conversation["template_variables"] == {"customer_name": "Ada", "shop": "Bistro"}


async def test_missing_template_variable_is_error_frame_and_config_may_be_sent_again(
    server: Server, customer: Customer
) -> None:
    ws = await open_socket(
        server, customer, "tools-tpl-missing", system_prompt="Greet {{nobody}} warmly."
    )
    async with ws:
        error = await receive(ws)
        assert error["type"] == "error"
        assert error["error"]["code"] == "missing_template_variable"
        await ws.send(
            json.dumps(
                {
                    "type": "config",
                    "agent": customer.agent,
                    "input_format": "pcm_16000",
                    "output_format": "pcm_16000",
                    "system_prompt": "Greet {{nobody}} warmly.",
                    "template_variables": {"nobody": "Grace"},
                }
            )
        )
        await started(ws)
    assert (await stored(customer, "tools-tpl-missing"))["template_variables"] == {
        "nobody": "Grace"
    }


async def test_barge_in_during_sync_tool_interrupts_reply_and_output_still_joins_history(
    server: Server, customer: Customer, chat: ChatServer
) -> None:
    chat.script.rounds.append(call_round("lookup_order", {"order": "C3"}))
    chat.script.rounds.append(Round(text=["Never spoken: the user barged in."]))
    slow = {**LOOKUP, "tool_call_output_timeout_ms": 20_000}
    ws = await open_socket(server, customer, "tools-barge", tools=[slow])
    async with ws:
        await started(ws)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Where is C3?"}))
        call = (await receive_until(ws, "tool_call", within=30))[-1]
        sentence = speech.SENTENCES[0]
        await stream_realtime(
            ws, speech.stream(AudioFormat.PCM_16000, 0.3, speech.spoken(sentence), 1.0)
        )
        interrupted = (await receive_until(ws, "tool_call_interrupted", within=30))[-1]
        await ws.send(
            json.dumps(
                {
                    "type": "tool_call_output",
                    "tool_call_id": call["tool_call_id"],
                    "output": {"status": "lost"},
                }
            )
        )
        seen = await receive_until(ws, "assistant_finished_speaking", within=60)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "And now?"}))
        seen += await receive_until(ws, "assistant_finished_speaking", within=60)
    assert interrupted["tool_call_id"] == call["tool_call_id"]
    assert interrupted["tool_name"] == "lookup_order"
    assert not [m for m in seen if m["type"] == "error"]
    spoken = " ".join(m["text"] for m in seen if m["type"] == "audio_chunk" and m["text"])
    assert "Never spoken" in spoken  # the model answered the new user turn instead
    last_request = chat.requests[-1].body["messages"]
    outputs = [json.loads(m["content"]) for m in last_request if m["role"] == "tool"]
    assert outputs == [{"status": "lost"}]
    conversation = await stored(customer, "tools-barge")
    calls = [c for i in conversation["items"] for c in i["tool_calls"]]
    assert [(c["id"], c["output"]) for c in calls] == [(call["tool_call_id"], {"status": "lost"})]
    for _ in range(50):  # the server ends it as the socket goes, a moment after the client
        if conversation["status"] == "ended":
            break
        await asyncio.sleep(0.1)
        conversation = await stored(customer, "tools-barge")
    assert conversation["ended_by"] == "user"
    assert conversation["analysis"]["interruptions_count"] == 1
