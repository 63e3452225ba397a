"""`built_in_transfer_to_agent` on the conversation socket (API.md section 15), end to end:
real uvicorn, an OpenAI-protocol server on loopback scripting the transfer call, a real
WebSocket client, `conversation.transferred` received by a real webhook receiver. The same
conversation goes on with the other agent: its prompt, tools, voice and welcome."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Customer, Server
from tests.e2e.test_tools_ws import call_round, open_socket, started, stored
from tests.e2e.test_ws import receive_until
from tests.llm_server import ChatServer, Round, running_chat_server
from tests.webhook_receiver import WebhookReceiver, running_receiver

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

BILLING_WELCOME = "Billing here. How can I help?"


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def hooks() -> Iterator[WebhookReceiver]:
    with running_receiver() as receiver:
        yield receiver


@pytest.fixture
def app_settings(chat: ChatServer) -> dict[str, Any]:
    return {
        "llm_base_url": chat.base_url,
        "llm_api_key": "sk-test",
        "llm_model": "bistro-7b",
        "llm_timeout_seconds": 5.0,
        "outbound_allow_http": True,  # the webhook receiver on loopback
        "outbound_allow_private_networks": True,
    }


async def make_desk(customer: Customer, hooks: WebhookReceiver) -> tuple[str, str]:
    """A `billing` agent (another voice, its own prompt and welcome), a transfer tool to it
    on the customer's agent, and a webhook for conversation.transferred."""
    voices = (await customer.api.get("/v1/voices")).json()["voices"]
    agent = (await customer.api.get(f"/v1/agents/{customer.agent}")).json()["agent"]
    other_voice = next(v["id"] for v in voices if v["id"] != agent["voice_id"])
    made = await customer.api.post(
        "/v1/agents",
        json={
            "name": "billing",
            "system_prompt": "You are the billing desk.",
            "welcome_message": BILLING_WELCOME,
            "voice_id": other_voice,
            "tools": ["natural_conversation_ending"],
        },
    )
    assert made.status_code == 201, made.text
    tool = await customer.api.post(
        "/v1/tools",
        json={
            "name": "to_billing",
            "type": "built_in_transfer_to_agent",
            "agents_to_transfer_to": ["billing", "closed_desk"],
        },
    )
    assert tool.status_code == 201, tool.text
    hook = await customer.api.post(
        "/v1/webhooks", json={"url": hooks.url(), "event_types": ["conversation.transferred"]}
    )
    assert hook.status_code == 201, hook.text
    return made.json()["agent"]["id"], other_voice


async def transferred_events(hooks: WebhookReceiver, within: float = 10) -> list[dict[str, Any]]:
    deadline = time.monotonic() + within
    while not hooks.requests:
        assert time.monotonic() < deadline, "no conversation.transferred delivered"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # a second delivery would have come by now
    return [request.json() for request in hooks.requests]


async def test_transfer_to_agent_goes_on_with_its_prompt_tools_voice_and_welcome(
    server: Server, customer: Customer, chat: ChatServer, hooks: WebhookReceiver
) -> None:
    billing_id, _ = await make_desk(customer, hooks)
    chat.script.rounds.append(
        call_round("to_billing", {"agent": "billing"}, text=["Let me put you through to billing."])
    )
    chat.script.reply = ["You owe nothing."]
    ws = await open_socket(server, customer, "transfer-agent-1", tools=["to_billing"])
    async with ws:
        await started(ws)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "A billing question"}))
        seen = await receive_until(ws, "assistant_finished_speaking", within=30)
        welcome = await receive_until(ws, "assistant_finished_speaking", within=30)
        asked_before = len(chat.requests)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "What do I owe?"}))
        answer = await receive_until(ws, "assistant_finished_speaking", within=30)
    spoken = [m["text"] for m in [*seen, *welcome, *answer] if m["type"] == "audio_chunk"]
    assert [text for text in spoken if text] == [
        "Let me put you through to billing.",
        "Billing here.",
        "How can I help?",
        "You owe nothing.",
    ]
    processed = [m for m in seen if m["type"] == "tool_call_output_processed"]
    assert [m["output"] for m in processed] == [{"status": "transferring", "agent": "billing"}]
    assert asked_before == 1  # the transfer ended the reply: the model was not asked again
    after = chat.requests[-1].body
    assert after["messages"][0] == {"role": "system", "content": "You are the billing desk."}
    assert [tool["function"]["name"] for tool in after["tools"]] == ["natural_conversation_ending"]
    conversation = await stored(customer, "transfer-agent-1")
    assert conversation["agent"] == {"id": billing_id, "name": "billing", "is_deleted": False}
    (event,) = await transferred_events(hooks)
    assert event["event_type"] == "conversation.transferred"
    assert event["data"]["transferred_to"] == {"agent": {"id": billing_id, "name": "billing"}}
    assert event["data"]["conversation"]["agent"]["name"] == "billing"


async def test_transfer_to_agent_unavailable_is_an_error_output_and_the_reply_goes_on(
    server: Server, customer: Customer, chat: ChatServer, hooks: WebhookReceiver
) -> None:
    await make_desk(customer, hooks)
    await customer.api.post("/v1/agents/billing/disable")
    chat.script.rounds.append(call_round("to_billing", {"agent": "billing"}))
    chat.script.rounds.append(call_round("to_billing", {"agent": "closed_desk"}))
    chat.script.rounds.append(Round(text=["Billing is closed, sorry."]))
    ws = await open_socket(server, customer, "transfer-agent-2", tools=["to_billing"])
    async with ws:
        await started(ws)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Billing please"}))
        seen = await receive_until(ws, "assistant_finished_speaking", within=30)
    outputs = [m["output"] for m in seen if m["type"] == "tool_call_output_processed"]
    assert outputs == [{"error": "agent unavailable"}] * 2  # disabled, and no such agent
    assert len(chat.requests) == 3  # asked again after each error, as after any call
    assert (await stored(customer, "transfer-agent-2"))["agent"]["name"] == customer.agent
    assert hooks.requests == []


async def test_transfer_to_phone_number_on_the_socket_needs_a_phone_call(
    server: Server, customer: Customer, chat: ChatServer
) -> None:
    tool = await customer.api.post(
        "/v1/tools",
        json={
            "name": "to_front_desk",
            "type": "built_in_transfer_to_phone_number",
            "phone_number": "+14155550100",
        },
    )
    assert tool.status_code == 201, tool.text
    chat.script.rounds.append(call_round("to_front_desk", {}))
    chat.script.rounds.append(Round(text=["I cannot transfer you from here."]))
    ws = await open_socket(server, customer, "transfer-phone-ws", tools=["to_front_desk"])
    async with ws:
        await started(ws)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "A person please"}))
        seen = await receive_until(ws, "assistant_finished_speaking", within=30)
    outputs = [m["output"] for m in seen if m["type"] == "tool_call_output_processed"]
    assert outputs == [{"error": "transfers need a phone call"}]
    offered = chat.requests[0].body["tools"][0]["function"]
    assert offered["parameters"]["properties"] == {}  # the number is the tool's own
