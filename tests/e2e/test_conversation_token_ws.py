"""Conversation tokens on the conversation WebSocket (API.md section 17): real uvicorn, real
`websockets` clients and the official SDK's socket. Single-use, for one agent, refused as
HTTP on the handshake when used, expired or unknown."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from phonic import AsyncPhonic, ConfigPayload, ConversationCreatedPayload
from phonic.environment import PhonicEnvironment
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from parley.app import create_app
from tests.e2e.conftest import AUDIENCE, Customer, Server
from tests.e2e.test_ws import configure, expect_refusal, receive, refused, until_closed
from tests.factories import unique_name

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.e2e,
    # The SDK's conversations module imports websockets' legacy API, which warns on import.
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]


class MovableClock:
    """The real clock, plus an offset a test moves forward to let a token expire."""

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        return time.time() + self.offset

    def monotonic(self) -> float:
        return time.monotonic()


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock()


@pytest.fixture
async def app(
    settings_factory: Any, app_settings: dict[str, Any], clock: MovableClock
) -> AsyncIterator[FastAPI]:
    settings = settings_factory(public_url=f"https://{AUDIENCE}", **app_settings)
    application = create_app(settings, clock=clock)
    async with application.router.lifespan_context(application):
        yield application


async def conversation_token(customer: Customer, agent: str | None = None, **body: Any) -> str:
    agent_id = (await customer.api.get(f"/v1/agents/{agent or customer.agent}")).json()["agent"]
    made = await customer.api.post(
        "/v1/auth/conversation_token", json={"agent_id": agent_id["id"], **body}
    )
    assert made.status_code == 200, made.text
    token: str = made.json()["conversation_token"]
    return token


async def test_ws_conversation_token_opens_conversation_with_its_agent(
    server: Server, customer: Customer
) -> None:
    token = await conversation_token(customer)
    async with connect(f"{server.ws}/v1/sts/ws?conversation_token={token}") as ws:
        conversation_id = await configure(ws, customer.agent)
    body = (await customer.api.get(f"/v1/conversations/{conversation_id}")).json()
    assert body["conversation"]["agent"]["name"] == customer.agent


async def test_ws_conversation_token_reused_401(server: Server, customer: Customer) -> None:
    token = await conversation_token(customer)
    url = f"{server.ws}/v1/sts/ws?conversation_token={token}"
    async with connect(url) as ws:
        await configure(ws, customer.agent)
    await expect_refusal(url, 401, "unauthorized")


async def test_ws_conversation_token_used_once_by_concurrent_handshakes(
    server: Server, customer: Customer
) -> None:
    token = await conversation_token(customer)
    url = f"{server.ws}/v1/sts/ws?conversation_token={token}"

    async def attempt() -> int:
        try:
            async with connect(url) as ws:
                await ws.close()
                return 101
        except InvalidStatus as error:
            return refused(error)[0]

    outcomes = await asyncio.gather(*(attempt() for _ in range(8)))

    assert sorted(outcomes) == [101] + [401] * 7


async def test_ws_conversation_token_expired_401(
    server: Server, customer: Customer, clock: MovableClock
) -> None:
    token = await conversation_token(customer, ttl_seconds=30)
    clock.offset += 31
    await expect_refusal(f"{server.ws}/v1/sts/ws?conversation_token={token}", 401, "unauthorized")


async def test_ws_conversation_token_unknown_or_of_another_kind_401(
    server: Server, customer: Customer
) -> None:
    unknown = "parley_ct_" + "A" * 43
    await expect_refusal(f"{server.ws}/v1/sts/ws?conversation_token={unknown}", 401, "unauthorized")
    url = f"{server.ws}/v1/sts/ws?conversation_token={customer.api_key}"
    await expect_refusal(url, 401, "unauthorized")


async def config_refusal(server: Server, customer: Customer, agent: str) -> tuple[str, int]:
    """The error code and close code a conversation token's socket gets for `agent`."""
    token = await conversation_token(customer)
    async with connect(f"{server.ws}/v1/sts/ws?conversation_token={token}") as ws:
        await ws.send(json.dumps({"type": "config", "agent": agent}))
        error = await receive(ws)
        code, _ = await until_closed(ws)
    assert error["type"] == "error", error
    return error["error"]["code"], code


async def test_ws_conversation_token_other_agent_forbidden_close_1008(
    server: Server, customer: Customer
) -> None:
    other = unique_name("agent")
    made = await customer.api.post("/v1/agents", json={"name": other, "system_prompt": "Hi."})
    assert made.status_code == 201, made.text

    assert await config_refusal(server, customer, other) == ("forbidden", 1008)
    assert await config_refusal(server, customer, made.json()["agent"]["id"]) == ("forbidden", 1008)
    # Whether another agent exists is not told: a name of none gets the same answer.
    assert await config_refusal(server, customer, "no-such-agent") == ("forbidden", 1008)
    listed = (await customer.api.get("/v1/conversations")).json()["conversations"]
    assert [c for c in listed if (c["agent"] or {}).get("name") == other] == []


async def test_ws_conversation_token_naming_a_conversation_403_token_kept(
    server: Server, customer: Customer
) -> None:
    made = await customer.api.post("/v1/conversations", json={"agent": customer.agent})
    conversation_id = made.json()["conversation"]["id"]
    token = await conversation_token(customer)
    url = f"{server.ws}/v1/sts/ws?conversation_token={token}"
    await expect_refusal(f"{url}&conversation_id={conversation_id}", 403, "insufficient_scope")
    async with connect(url) as ws:
        assert (await configure(ws, customer.agent)).startswith("conv_")


async def test_ws_conversation_token_with_another_credential_400(
    server: Server, customer: Customer
) -> None:
    token = await conversation_token(customer)
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    url = f"{server.ws}/v1/sts/ws?conversation_token={token}"
    await expect_refusal(url, 400, "multiple_credentials", headers)
    await expect_refusal(f"{url}&conversation_token={token}", 400, "multiple_credentials")


async def test_ws_conversation_token_through_sdk(server: Server, customer: Customer) -> None:
    environment = PhonicEnvironment(base=f"{server.http}/v1", production=server.ws)
    async with httpx.AsyncClient(timeout=10) as http:
        backend = AsyncPhonic(api_key=customer.api_key, environment=environment, httpx_client=http)
        agent = (await customer.api.get(f"/v1/agents/{customer.agent}")).json()["agent"]
        made = await backend.auth.create_conversation_token(agent_id=agent["id"])
        browser = AsyncPhonic(
            api_key=made.conversation_token, environment=environment, httpx_client=http
        )
        async with browser.conversations.connect() as socket:
            await socket.send_config(
                ConfigPayload(
                    agent=customer.agent, input_format="pcm_16000", output_format="pcm_16000"
                )
            )
            created = await asyncio.wait_for(socket.recv(), 10)
    assert isinstance(created, ConversationCreatedPayload), created
    assert created.conversation_id.startswith("conv_")
