"""A real uvicorn server on loopback serving the app, and a tenant with every credential."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from parley.app import create_app
from parley.jwt import generate_key_pair, mint_token
from tests.factories import make_org, unique_name

AUDIENCE = "parley.test"


@dataclass
class Server:
    http: str
    ws: str


@dataclass
class Customer:
    """An organization with an API key, a registered signing key and an agent."""

    api: httpx.AsyncClient
    api_key: str
    iss: str
    kid: str
    private_key: str
    agent: str

    def jwt(self, conversation_id: str, **overrides: Any) -> str:
        return mint_token(
            self.private_key,
            kid=self.kid,
            iss=self.iss,
            aud=AUDIENCE,
            sub="end-user-1",
            conversation_id=conversation_id,
            **overrides,
        )

    async def session_token(self, **body: Any) -> dict[str, Any]:
        response = await self.api.post("/v1/auth/session_token", json=body)
        assert response.status_code == 200, response.text
        created: dict[str, Any] = response.json()
        return created


@pytest.fixture
def app_settings() -> dict[str, Any]:
    """Extra settings for the served app; a test module overrides this fixture to change them."""
    return {}


@pytest.fixture
async def app(settings_factory: Any, app_settings: dict[str, Any]) -> AsyncIterator[FastAPI]:
    application = create_app(settings_factory(public_url=f"https://{AUDIENCE}", **app_settings))
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def server(app: FastAPI) -> AsyncIterator[Server]:
    async with serving(app) as served:
        yield served


@contextlib.asynccontextmanager
async def serving(app: FastAPI, port: int = 0) -> AsyncIterator[Server]:
    """`app` served by real uvicorn on 127.0.0.1:`port` (0: any free port) until exit."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        lifespan="off",
        log_level="info",
        ws="websockets-sansio",
        ws_max_size=2 * 1024 * 1024,
    )
    instance = uvicorn.Server(config)
    task = asyncio.create_task(instance.serve())
    while not instance.started:
        if task.done():
            task.result()  # surfaces why the server did not start
            raise RuntimeError("uvicorn stopped before it started")
        await asyncio.sleep(0.01)
    port = instance.servers[0].sockets[0].getsockname()[1]
    try:
        yield Server(http=f"http://127.0.0.1:{port}", ws=f"ws://127.0.0.1:{port}")
    finally:
        instance.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)


@pytest.fixture
async def customer(app: FastAPI, server: Server) -> AsyncIterator[Customer]:
    created = await make_org(app.state.context)
    keys = generate_key_pair("EdDSA")
    iss = f"https://{created.org.name}.example.com"
    async with httpx.AsyncClient(
        base_url=server.http, headers={"Authorization": f"Bearer {created.api_key.secret}"}
    ) as api:
        registered = await api.put(
            "/v1/auth/jwt", json={"issuers": [iss], "public_keys": keys.jwks["keys"]}
        )
        assert registered.status_code == 200, registered.text
        agent = unique_name("agent")
        made = await api.post(
            "/v1/agents",
            json={"name": agent, "welcome_message": None, "system_prompt": "You help with orders."},
        )
        assert made.status_code == 201, made.text
        yield Customer(api, created.api_key.secret, iss, keys.kid, keys.private_key_pem, agent)
