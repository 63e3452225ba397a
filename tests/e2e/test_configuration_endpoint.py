"""An agent's configuration endpoint (API.md section 17), end to end: a real `parley serve`,
a real HTTP receiver that checks each call's signature with the `standardwebhooks` library,
the OpenAI-protocol test server as the model, the official SDK for the agents and real
WebSocket clients. One server for the module: each test makes its own agent, whose endpoint
is its own path on the receiver."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from phonic import Phonic
from phonic.environment import PhonicEnvironment
from standardwebhooks import Webhook
from websockets.asyncio.client import ClientConnection, connect

from tests.e2e.test_ws import receive, receive_until, until_closed
from tests.faults.serve_process import ServeProcess
from tests.llm_server import ChatServer, Round, running_chat_server
from tests.webhook_receiver import ReceivedRequest, Reply, WebhookReceiver, running_receiver

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.e2e,
    # The SDK's conversations module imports websockets' legacy API, which warns on import.
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]

WELCOME = "Hello from the agent."
PROMPT = "You are the agent's own prompt."


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    with running_receiver() as server:
        yield server


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, chat: ChatServer) -> Iterator[ServeProcess]:
    process = ServeProcess(
        tmp_path_factory.mktemp("configuration-endpoint"),
        PARLEY_LLM_BASE_URL=chat.base_url,
        PARLEY_LLM_MODEL="bistro-7b",
        PARLEY_OUTBOUND_ALLOW_HTTP="true",  # the receiver is http on loopback
        PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS="true",
    )
    try:
        process.start()
        assert process.first_key is not None
        yield process
    finally:
        process.ensure_stopped()


@pytest.fixture(scope="module")
def client(serve: ServeProcess) -> Iterator[Phonic]:
    environment = PhonicEnvironment(base=f"{serve.http}/v1", production=serve.ws)
    with httpx.Client(timeout=10) as http:
        yield Phonic(api_key=serve.first_key, environment=environment, httpx_client=http)


def make_agent(
    client: Phonic, receiver: WebhookReceiver, reply: Reply, **endpoint: Any
) -> tuple[str, str, str]:
    """An agent whose endpoint is a path of its own, answered by `reply`: its name, the
    path and the endpoint's secret."""
    name = f"cfg-{secrets.token_hex(4)}"
    path = f"/config/{name}"
    receiver.script(reply)
    created = client.agents.create(
        name=name,
        welcome_message=WELCOME,
        system_prompt=PROMPT,
        template_variables={"shop": {"default_value": "the bistro"}},
        configuration_endpoint={"url": receiver.url(path), **endpoint},
    )
    secret = (created.model_extra or {})["configuration_endpoint_secret"]
    return name, path, secret


def calls_to(receiver: WebhookReceiver, path: str) -> list[ReceivedRequest]:
    return [request for request in receiver.requests if request.path == path]


async def open_socket(serve: ServeProcess, agent: str) -> ClientConnection:
    ws = await connect(
        f"{serve.ws}/v1/sts/ws", additional_headers={"Authorization": f"Bearer {serve.first_key}"}
    )
    config = {"type": "config", "agent": agent, "input_format": "pcm_16000"}
    await ws.send(json.dumps({**config, "output_format": "pcm_16000"}))
    return ws


def verified(request: ReceivedRequest, secret: str) -> dict[str, Any]:
    """The call's body, once `standardwebhooks` has checked its signature."""
    payload: dict[str, Any] = Webhook(secret).verify(request.body, request.headers)
    return payload


async def refused(serve: ServeProcess, agent: str) -> tuple[str, dict[str, Any], int, str]:
    """Open a conversation the endpoint refuses: its ID, the error frame, the close code
    and reason."""
    async with await open_socket(serve, agent) as ws:
        created = await receive(ws)
        assert created["type"] == "conversation_created", created
        error = await receive(ws)
        assert error["type"] == "error", error
        code, reason = await until_closed(ws)
    return created["conversation_id"], error, code, reason


def ended_by(client: Phonic, conversation_id: str) -> str | None:
    conversation = client.conversations.get(conversation_id).conversation
    assert conversation.status == "ended"
    ended: str | None = conversation.ended_by
    return ended


# --- answered well ---------------------------------------------------------------------


async def test_configuration_endpoint_answer_overrides_welcome_prompt_and_variables(
    serve: ServeProcess, client: Phonic, receiver: WebhookReceiver, chat: ChatServer
) -> None:
    answer = {
        "welcome_message": "Welcome to {{shop}}!",
        "system_prompt": "You serve {{shop}}.",
        "template_variables": {"shop": "Chez Ada"},
        "boosted_keywords": ["Ada"],
    }
    name, path, secret = make_agent(
        client, receiver, Reply.json(answer), headers={"Authorization": "Bearer token123"}
    )
    chat.script.rounds.append(Round(text=["Happy to help."]))
    async with await open_socket(serve, name) as ws:
        created = await receive(ws)
        assert (await receive(ws))["type"] == "ready_to_start_conversation"
        welcome = await receive_until(ws, "assistant_finished_speaking", within=30)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Hi"}))
        await receive_until(ws, "assistant_finished_speaking", within=30)
    spoken = " ".join(m["text"] for m in welcome if m["type"] == "audio_chunk" and m["text"])
    assert "Welcome to Chez Ada!" in spoken
    assert chat.requests[-1].body["messages"][0] == {
        "role": "system",
        "content": "You serve Chez Ada.",
    }
    (call,) = calls_to(receiver, path)
    assert call.method == "POST"
    assert call.headers["authorization"] == "Bearer token123"
    assert call.headers["webhook-id"] == created["conversation_id"]
    assert verified(call, secret) == {
        "project": {"name": "main"},
        "agent": {
            "name": name,
            "welcome_message": WELCOME,
            "system_prompt": PROMPT,
            "tools": [],
            "boosted_keywords": [],
        },
        "conversation_id": created["conversation_id"],
    }
    conversation = client.conversations.get(created["conversation_id"]).conversation
    assert conversation.template_variables == {"shop": "Chez Ada"}
    assert conversation.items[0].text == "Welcome to Chez Ada!"


async def test_configuration_endpoint_empty_answer_keeps_agent_settings(
    serve: ServeProcess, client: Phonic, receiver: WebhookReceiver
) -> None:
    name, path, secret = make_agent(client, receiver, Reply.json({}))
    async with await open_socket(serve, name) as ws:
        await receive(ws)
        assert (await receive(ws))["type"] == "ready_to_start_conversation"
        welcome = await receive_until(ws, "assistant_finished_speaking", within=30)
    spoken = " ".join(m["text"] for m in welcome if m["type"] == "audio_chunk" and m["text"])
    assert WELCOME in spoken
    (call,) = calls_to(receiver, path)
    verified(call, secret)


async def test_configuration_endpoint_absent_no_call_made(
    serve: ServeProcess, client: Phonic, receiver: WebhookReceiver
) -> None:
    before = len(receiver.requests)
    name = f"plain-{secrets.token_hex(4)}"
    client.agents.create(name=name, welcome_message=None, system_prompt=PROMPT)
    async with await open_socket(serve, name) as ws:
        await receive(ws)
        assert (await receive(ws))["type"] == "ready_to_start_conversation"
    assert len(receiver.requests) == before


# --- failures: the conversation ends before it starts ----------------------------------


async def test_configuration_endpoint_error_status_ends_conversation_error(
    serve: ServeProcess, client: Phonic, receiver: WebhookReceiver
) -> None:
    name, path, _ = make_agent(client, receiver, Reply.json({"detail": "boom"}, status=500))
    conversation_id, error, code, reason = await refused(serve, name)
    assert error["error"]["code"] == "configuration_endpoint_error"
    assert "HTTP 500" in error["error"]["message"]
    assert (code, reason) == (1011, "configuration_endpoint_error")
    assert ended_by(client, conversation_id) == "configuration_endpoint_error"
    assert len(calls_to(receiver, path)) == 1  # never retried


async def test_configuration_endpoint_late_answer_ends_conversation_timed_out(
    serve: ServeProcess, client: Phonic, receiver: WebhookReceiver
) -> None:
    name, _, _ = make_agent(client, receiver, Reply.json({}, delay_s=1.5), timeout_ms=200)
    conversation_id, error, code, reason = await refused(serve, name)
    assert error["error"]["code"] == "configuration_endpoint_timed_out"
    assert (code, reason) == (1011, "configuration_endpoint_timed_out")
    assert ended_by(client, conversation_id) == "configuration_endpoint_timed_out"


@pytest.mark.parametrize(
    "reply",
    [
        Reply.garbage(),
        Reply.json(["not", "an", "object"]),
        Reply.json({"system_prompt": 5}),
        Reply.json({"tools": ["no_such_tool"]}),
        Reply.json({"voice_id": "us_male"}),
    ],
    ids=["not-json", "not-an-object", "wrong-type", "unknown-tool", "unknown-member"],
)
async def test_configuration_endpoint_invalid_answer_ends_conversation_invalid_response(
    serve: ServeProcess, client: Phonic, receiver: WebhookReceiver, reply: Reply
) -> None:
    name, _, _ = make_agent(client, receiver, reply)
    conversation_id, error, code, reason = await refused(serve, name)
    assert error["error"]["code"] == "configuration_endpoint_invalid_response"
    assert (code, reason) == (1011, "configuration_endpoint_invalid_response")
    assert ended_by(client, conversation_id) == "configuration_endpoint_invalid_response"


# --- the agent field through the SDK ---------------------------------------------------


async def test_configuration_endpoint_sdk_create_update_secret_shown_once_headers_masked(
    serve: ServeProcess, client: Phonic, receiver: WebhookReceiver
) -> None:
    name, path, secret = make_agent(
        client, receiver, Reply.json({}), headers={"X-Api-Key": "k-123"}, timeout_ms=7000
    )
    assert secret.startswith("whsec_")
    agent = client.agents.get(name).agent
    assert agent.configuration_endpoint is not None
    assert agent.configuration_endpoint.url == receiver.url(path)
    assert agent.configuration_endpoint.headers == {"X-Api-Key": "********"}
    assert agent.configuration_endpoint.timeout_ms == 7000
    assert "configuration_endpoint_secret" not in (agent.model_extra or {})

    # A read-modify-write: the masked value keeps the stored one; the secret stays.
    shown = agent.configuration_endpoint
    updated = client.agents.update(
        name,
        configuration_endpoint={"url": shown.url, "headers": dict(shown.headers)},
    )
    assert "configuration_endpoint_secret" not in (updated.model_extra or {})
    assert client.agents.get(name).agent.configuration_endpoint.timeout_ms == 3000  # default
    async with await open_socket(serve, name) as ws:
        await receive(ws)
        assert (await receive(ws))["type"] == "ready_to_start_conversation"
    (call,) = calls_to(receiver, path)
    assert call.headers["x-api-key"] == "k-123"
    verified(call, secret)  # the same secret signs

    # Removed, then set again: a new secret.
    removed = client.agents.update(name, configuration_endpoint=None)
    assert removed.agent.configuration_endpoint is None
    again = client.agents.update(name, configuration_endpoint={"url": receiver.url(path)})
    renewed = (again.model_extra or {})["configuration_endpoint_secret"]
    assert renewed.startswith("whsec_")
    assert renewed != secret
