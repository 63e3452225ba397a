"""An agent's configuration endpoint (API.md section 17), end to end: the app on real
uvicorn, a real HTTP receiver that checks each call's signature with the `standardwebhooks`
library, the OpenAI-protocol test server as the model, the official SDK (its async client)
for the agents and real WebSocket clients. One server for the module (on a SQLite copy of
the migrated template): each test makes its own agent, whose endpoint is its own path on
the receiver."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from phonic import AsyncPhonic
from phonic.environment import PhonicEnvironment
from standardwebhooks import Webhook
from websockets.asyncio.client import ClientConnection, connect

from parley.app import create_app
from parley.config import Settings
from tests import databases
from tests.e2e.conftest import serving
from tests.e2e.test_ws import receive, receive_until, until_closed
from tests.factories import make_org
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


@dataclass
class Served:
    """The app on uvicorn, and an organization's API key."""

    http: str
    ws: str
    api_key: str


@pytest.fixture(scope="module")
async def serve(
    tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path, chat: ChatServer
) -> AsyncIterator[Served]:
    settings = Settings(
        _env_file=None,
        database_url=databases.sqlite_copy(sqlite_template, tmp_path_factory.mktemp("cfg")),
        redis_url=None,
        secret_key=databases.TEST_SECRET_KEY,
        llm_base_url=chat.base_url,
        llm_model="bistro-7b",
        outbound_allow_http=True,  # the receiver is http on loopback
        outbound_allow_private_networks=True,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app), serving(app) as server:
        created = await make_org(app.state.context)
        yield Served(server.http, server.ws, created.api_key.secret)


@pytest.fixture(scope="module")
async def client(serve: Served) -> AsyncIterator[AsyncPhonic]:
    environment = PhonicEnvironment(base=f"{serve.http}/v1", production=serve.ws)
    async with httpx.AsyncClient(timeout=10) as http:
        yield AsyncPhonic(api_key=serve.api_key, environment=environment, httpx_client=http)


async def make_agent(
    client: AsyncPhonic, receiver: WebhookReceiver, reply: Reply, **endpoint: Any
) -> tuple[str, str, str]:
    """An agent whose endpoint is a path of its own, answered by `reply`: its name, the
    path and the endpoint's secret."""
    name = f"cfg-{secrets.token_hex(4)}"
    path = f"/config/{name}"
    receiver.script(reply)
    created = await client.agents.create(
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


async def open_socket(serve: Served, agent: str) -> ClientConnection:
    ws = await connect(
        f"{serve.ws}/v1/sts/ws", additional_headers={"Authorization": f"Bearer {serve.api_key}"}
    )
    config = {"type": "config", "agent": agent, "input_format": "pcm_16000"}
    await ws.send(json.dumps({**config, "output_format": "pcm_16000"}))
    return ws


def verified(request: ReceivedRequest, secret: str) -> dict[str, Any]:
    """The call's body, once `standardwebhooks` has checked its signature."""
    payload: dict[str, Any] = Webhook(secret).verify(request.body, request.headers)
    return payload


async def refused(serve: Served, agent: str) -> tuple[str, dict[str, Any], int, str]:
    """Open a conversation the endpoint refuses: its ID, the error frame, the close code
    and reason."""
    async with await open_socket(serve, agent) as ws:
        created = await receive(ws)
        assert created["type"] == "conversation_created", created
        error = await receive(ws)
        assert error["type"] == "error", error
        code, reason = await until_closed(ws)
    return created["conversation_id"], error, code, reason


async def ended_by(client: AsyncPhonic, conversation_id: str) -> str | None:
    conversation = (await client.conversations.get(conversation_id)).conversation
    assert conversation.status == "ended"
    ended: str | None = conversation.ended_by
    return ended


# --- answered well ---------------------------------------------------------------------


async def test_configuration_endpoint_answer_overrides_welcome_prompt_and_variables(
    serve: Served, client: AsyncPhonic, receiver: WebhookReceiver, chat: ChatServer
) -> None:
    answer = {
        "welcome_message": "Welcome to {{shop}}!",
        "system_prompt": "You serve {{shop}}.",
        "template_variables": {"shop": "Chez Ada"},
        "boosted_keywords": ["Ada"],
    }
    name, path, secret = await make_agent(
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
    conversation = (await client.conversations.get(created["conversation_id"])).conversation
    assert conversation.template_variables == {"shop": "Chez Ada"}
    assert conversation.items[0].text == "Welcome to Chez Ada!"


async def test_configuration_endpoint_empty_answer_keeps_agent_settings(
    serve: Served, client: AsyncPhonic, receiver: WebhookReceiver
) -> None:
    name, path, secret = await make_agent(client, receiver, Reply.json({}))
    async with await open_socket(serve, name) as ws:
        await receive(ws)
        assert (await receive(ws))["type"] == "ready_to_start_conversation"
        welcome = await receive_until(ws, "assistant_finished_speaking", within=30)
    spoken = " ".join(m["text"] for m in welcome if m["type"] == "audio_chunk" and m["text"])
    assert WELCOME in spoken
    (call,) = calls_to(receiver, path)
    verified(call, secret)


async def test_configuration_endpoint_absent_no_call_made(
    serve: Served, client: AsyncPhonic, receiver: WebhookReceiver
) -> None:
    before = len(receiver.requests)
    name = f"plain-{secrets.token_hex(4)}"
    await client.agents.create(name=name, welcome_message=None, system_prompt=PROMPT)
    async with await open_socket(serve, name) as ws:
        await receive(ws)
        assert (await receive(ws))["type"] == "ready_to_start_conversation"
    assert len(receiver.requests) == before


# --- failures: the conversation ends before it starts ----------------------------------


async def test_configuration_endpoint_error_status_ends_conversation_error(
    serve: Served, client: AsyncPhonic, receiver: WebhookReceiver
) -> None:
    name, path, _ = await make_agent(client, receiver, Reply.json({"detail": "boom"}, status=500))
    conversation_id, error, code, reason = await refused(serve, name)
    assert error["error"]["code"] == "configuration_endpoint_error"
    assert "HTTP 500" in error["error"]["message"]
    assert (code, reason) == (1011, "configuration_endpoint_error")
    assert await ended_by(client, conversation_id) == "configuration_endpoint_error"
    assert len(calls_to(receiver, path)) == 1  # never retried


async def test_configuration_endpoint_late_answer_ends_conversation_timed_out(
    serve: Served, client: AsyncPhonic, receiver: WebhookReceiver
) -> None:
    name, _, _ = await make_agent(client, receiver, Reply.json({}, delay_s=1.5), timeout_ms=200)
    conversation_id, error, code, reason = await refused(serve, name)
    assert error["error"]["code"] == "configuration_endpoint_timed_out"
    assert (code, reason) == (1011, "configuration_endpoint_timed_out")
    assert await ended_by(client, conversation_id) == "configuration_endpoint_timed_out"


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
    serve: Served, client: AsyncPhonic, receiver: WebhookReceiver, reply: Reply
) -> None:
    name, _, _ = await make_agent(client, receiver, reply)
    conversation_id, error, code, reason = await refused(serve, name)
    assert error["error"]["code"] == "configuration_endpoint_invalid_response"
    assert (code, reason) == (1011, "configuration_endpoint_invalid_response")
    assert await ended_by(client, conversation_id) == "configuration_endpoint_invalid_response"


# --- the agent field through the SDK ---------------------------------------------------


async def test_configuration_endpoint_sdk_create_update_secret_shown_once_headers_masked(
    serve: Served, client: AsyncPhonic, receiver: WebhookReceiver
) -> None:
    name, path, secret = await make_agent(
        client, receiver, Reply.json({}), headers={"X-Api-Key": "k-123"}, timeout_ms=7000
    )
    assert secret.startswith("whsec_")
    agent = (await client.agents.get(name)).agent
    assert agent.configuration_endpoint is not None
    assert agent.configuration_endpoint.url == receiver.url(path)
    assert agent.configuration_endpoint.headers == {"X-Api-Key": "********"}
    assert agent.configuration_endpoint.timeout_ms == 7000
    assert "configuration_endpoint_secret" not in (agent.model_extra or {})

    # A read-modify-write: the masked value keeps the stored one; the secret stays.
    shown = agent.configuration_endpoint
    updated = await client.agents.update(
        name,
        configuration_endpoint={"url": shown.url, "headers": dict(shown.headers)},
    )
    assert "configuration_endpoint_secret" not in (updated.model_extra or {})
    endpoint = (await client.agents.get(name)).agent.configuration_endpoint
    assert endpoint is not None
    assert endpoint.timeout_ms == 3000  # default
    async with await open_socket(serve, name) as ws:
        await receive(ws)
        assert (await receive(ws))["type"] == "ready_to_start_conversation"
    (call,) = calls_to(receiver, path)
    assert call.headers["x-api-key"] == "k-123"
    verified(call, secret)  # the same secret signs

    # Removed, then set again: a new secret.
    removed = await client.agents.update(name, configuration_endpoint=None)
    assert removed.agent.configuration_endpoint is None
    again = await client.agents.update(name, configuration_endpoint={"url": receiver.url(path)})
    renewed = (again.model_extra or {})["configuration_endpoint_secret"]
    assert renewed.startswith("whsec_")
    assert renewed != secret
