"""Distributed mode: two instances sharing the database and Redis behave as one service
(API.md section 11): replay records, rate limits, revocations and JWKS refreshes hold
across all of them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from parley.app import create_app
from parley.jwt import generate_key_pair, mint_token
from tests.factories import make_org
from tests.jwks_server import JwksServer, running_jwks_server

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

AUDIENCE = "parley.test"


def redis_url() -> str:
    return os.environ.get("PARLEY_TEST_REDIS_URL") or "redis://127.0.0.1:6379/15"


@pytest.fixture
async def fleet(settings_factory: Any) -> AsyncIterator[list[httpx.AsyncClient]]:
    """Two app instances on the same database and the same Redis."""
    settings = settings_factory(
        redis_url=redis_url(),
        public_url=f"https://{AUDIENCE}",
        jwks_allow_http=True,
        jwks_allow_private_networks=True,
        jwt_rate_burst=3,
        # One token a minute refills the bucket: the four requests of the shared-limit test
        # may take over a second on a loaded machine (CI once refilled one at 1/s).
        jwt_rate_per_minute=1,
    )
    async with contextlib.AsyncExitStack() as stack:
        clients = []
        for _ in range(2):
            app = create_app(settings)
            await stack.enter_async_context(app.router.lifespan_context(app))
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            clients.append(
                await stack.enter_async_context(
                    httpx.AsyncClient(transport=transport, base_url="http://instance")
                )
            )
        yield clients


@pytest.fixture
def jwks() -> Any:
    with running_jwks_server() as server:
        yield server


async def setup_customer(
    fleet: list[httpx.AsyncClient], jwks: JwksServer
) -> tuple[dict[str, str], Any, str]:
    app: FastAPI = fleet[0]._transport.app  # type: ignore[attr-defined]
    created = await make_org(app.state.context)
    headers = {"Authorization": f"Bearer {created.api_key.secret}"}
    keys = generate_key_pair("ES256")
    jwks.publish(*keys.jwks["keys"])
    iss = f"https://{created.org.name}.example.com"
    put = await fleet[0].put(
        "/v1/auth/jwt", json={"issuers": [iss], "jwks_url": jwks.url}, headers=headers
    )
    assert put.status_code == 200, put.text
    await fleet[0].post("/v1/agents", json={"name": "bot"}, headers=headers)
    await fleet[0].post("/v1/conversations", json={"agent": "bot", "id": "c1"}, headers=headers)
    return headers, keys, iss


def token(keys: Any, iss: str, **extra: Any) -> str:
    return mint_token(
        keys.private_key_pem,
        kid=keys.kid,
        iss=iss,
        aud=AUDIENCE,
        sub="u",
        conversation_id="c1",
        **extra,
    )


async def test_jti_replay_holds_across_instances(
    fleet: list[httpx.AsyncClient], jwks: JwksServer
) -> None:
    _, keys, iss = await setup_customer(fleet, jwks)
    jwt = token(keys, iss, jti=secrets.token_hex(8))
    auth = {"Authorization": f"Bearer {jwt}"}
    first, second = await asyncio.gather(
        fleet[0].get("/v1/conversations/c1", headers=auth),
        fleet[1].get("/v1/conversations/c1", headers=auth),
    )
    assert sorted([first.status_code, second.status_code]) == [200, 409]


async def test_rate_limit_shared_across_instances(
    fleet: list[httpx.AsyncClient], jwks: JwksServer
) -> None:
    _, keys, iss = await setup_customer(fleet, jwks)
    statuses = []
    for n in range(4):
        auth = {"Authorization": f"Bearer {token(keys, iss)}"}
        statuses.append((await fleet[n % 2].get("/v1/conversations/c1", headers=auth)).status_code)
    assert statuses == [200, 200, 200, 429]


async def test_revocations_hold_across_instances(
    fleet: list[httpx.AsyncClient], jwks: JwksServer
) -> None:
    headers, _, _ = await setup_customer(fleet, jwks)
    created = (await fleet[0].post("/v1/auth/session_token", headers=headers)).json()
    auth = {"Authorization": f"Bearer {created['session_token']}"}
    assert (await fleet[1].get("/v1/conversations/c1", headers=auth)).status_code == 200
    await fleet[0].delete(f"/v1/auth/session_token/{created['id']}", headers=headers)
    assert (await fleet[1].get("/v1/conversations/c1", headers=auth)).status_code == 401

    key = (await fleet[0].post("/v1/api_keys", headers=headers)).json()
    await fleet[1].delete(f"/v1/api_keys/{key['id']}", headers=headers)
    gone = await fleet[0].get("/v1/agents", headers={"Authorization": f"Bearer {key['secret']}"})
    assert gone.status_code == 401


async def test_jwks_miss_fetches_once_across_instances(
    fleet: list[httpx.AsyncClient], jwks: JwksServer
) -> None:
    _, _keys, iss = await setup_customer(fleet, jwks)
    before = jwks.fetches
    stranger = generate_key_pair("ES256")
    forged = [
        mint_token(
            stranger.private_key_pem,
            kid=f"unknown-{n}",
            iss=iss,
            aud=AUDIENCE,
            sub="u",
            conversation_id="c1",
        )
        for n in range(20)
    ]
    responses = await asyncio.gather(
        *(
            fleet[n % 2].get("/v1/conversations/c1", headers={"Authorization": f"Bearer {t}"})
            for n, t in enumerate(forged)
        )
    )
    assert {r.status_code for r in responses} == {401}
    assert jwks.fetches - before <= 1
