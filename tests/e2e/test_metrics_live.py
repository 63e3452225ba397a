"""/metrics scraped during a real conversation on uvicorn: the live gauge and the handshake."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from parley.app import create_app
from tests.e2e.conftest import AUDIENCE, Customer, Server
from tests.factories import unique_name

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture
async def app(settings_factory: Any) -> AsyncIterator[FastAPI]:
    """The e2e app, with metrics on."""
    application = create_app(settings_factory(public_url=f"https://{AUDIENCE}", metrics=True))
    async with application.router.lifespan_context(application):
        yield application


async def scrape(server: Server) -> str:
    # The server shares this test's event loop, where the new conversation's engine starts:
    # on a machine busy with other test processes that can hold the loop past httpx's 5 s.
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.get(f"{server.http}/metrics")
    assert response.status_code == 200
    return response.text


async def gauge(server: Server) -> float:
    lines = (await scrape(server)).splitlines()
    line = next(each for each in lines if each.startswith("parley_live_"))
    return float(line.split()[-1])


@pytest.mark.timeout(60)
async def test_metrics_during_conversation_live_gauge_and_handshakes(
    server: Server, customer: Customer
) -> None:
    conversation_id = unique_name("metrics")
    token = customer.jwt(conversation_id)
    url = f"{server.ws}/v1/sts/ws?jwt={quote(token)}"
    assert await gauge(server) == 0
    async with connect(url) as ws:
        await ws.send(json.dumps({"type": "config", "agent": customer.agent}))
        created = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert created["type"] == "conversation_created"
        assert await gauge(server) == 1
        text = await scrape(server)
        assert 'parley_http_requests_total{method="WS",route="/v1/sts/ws",status="101"} 1.0' in text
    for _ in range(50):  # the server ends the conversation once it sees the close
        if await gauge(server) == 0:
            break
        await asyncio.sleep(0.1)
    assert await gauge(server) == 0

    with pytest.raises(InvalidStatus):  # the same token again: a replay, refused as HTTP 409
        async with connect(url):
            pass
    text = await scrape(server)
    assert 'parley_auth_refusals_total{code="jti_replayed"} 1.0' in text
    assert 'parley_http_requests_total{method="WS",route="/v1/sts/ws",status="409"} 1.0' in text
    assert token not in text
    assert conversation_id not in text
