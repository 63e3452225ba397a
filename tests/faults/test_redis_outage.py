"""Redis stopped, paused and restarted under live conversations (issue #9 findings 9, 10
and 11): a real `parley serve` process on a Redis of the test's own.

- live sockets ride out a short outage; one past the revocation bound (2 s) closes them
  with 1011 and a reason; no new socket opens without the store;
- a session token revoked, or a conversation ended, during an outage is answered as done,
  is in force at once, and closes its socket when the store returns;
- a Redis restarted without persistence forgets its replay records: a JWT used before is
  refused, a token issued after the loss is accepted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from parley.jwt import generate_key_pair, mint_token
from parley.stores.redis import RedisRevocations, connect_redis
from tests.faults.redis_server import RedisServer
from tests.faults.serve_process import ServeProcess
from tests.faults.ws_client import configure, make_agent, still_talks, until_closed

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

AUDIENCE = "parley.test"
ISSUER = "https://tenant.example"


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        server.start()
        yield server
    finally:
        server.destroy()


@dataclass
class Fleet:
    """One instance on its own Redis, with an agent, a key pair and the API key."""

    serve: ServeProcess
    redis: RedisServer
    key: str
    agent: str
    signing: object
    sockets: list[ClientConnection] = field(default_factory=list)

    async def connect(self, url: str, headers: dict[str, str] | None = None) -> ClientConnection:
        """Open a socket that is closed when the test ends."""
        ws = await connect(url, additional_headers=headers or {})
        self.sockets.append(ws)
        return ws

    def api(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.serve.http, headers={"Authorization": f"Bearer {self.key}"}
        )

    def jwt(self, conversation_id: str, jti: str) -> str:
        keys = self.signing
        return mint_token(
            keys.private_key_pem, kid=keys.kid, iss=ISSUER, aud=AUDIENCE,  # type: ignore[attr-defined]
            sub="user-1", conversation_id=conversation_id, jti=jti,
        )  # fmt: skip

    async def session_token(self) -> dict[str, str]:
        async with self.api() as api:
            made = await api.post("/v1/auth/session_token")
        assert made.status_code == 200, made.text
        token: dict[str, str] = made.json()
        return token


@pytest.fixture
async def fleet(tmp_path: Path, redis_server: RedisServer) -> AsyncIterator[Fleet]:
    serve = ServeProcess(
        tmp_path,
        PARLEY_DATABASE_URL="sqlite:///parley.db",
        PARLEY_REDIS_URL=redis_server.url,
        PARLEY_PUBLIC_URL=f"https://{AUDIENCE}",
    )
    try:
        serve.start()
        assert serve.first_key is not None
        agent = await make_agent(serve.http, serve.first_key)
        keys = generate_key_pair("EdDSA")
        fleet = Fleet(serve, redis_server, serve.first_key, agent, keys)
        async with fleet.api() as api:
            registered = await api.put(
                "/v1/auth/jwt", json={"issuers": [ISSUER], "public_keys": keys.jwks["keys"]}
            )
        assert registered.status_code == 200, registered.text
        yield fleet
        for ws in fleet.sockets:
            await ws.close()
    finally:
        serve.ensure_stopped()


async def open_sockets(fleet: Fleet) -> dict[str, tuple[ClientConnection, str]]:
    """One live conversation per credential kind."""
    token = (await fleet.session_token())["session_token"]
    urls = {
        "api_key": (f"{fleet.serve.ws}/v1/sts/ws", {"Authorization": f"Bearer {fleet.key}"}),
        "session_token": (f"{fleet.serve.ws}/v1/sts/ws?session_token={token}", {}),
        "jwt": (f"{fleet.serve.ws}/v1/sts/ws?jwt={fleet.jwt('by-jwt', 'socket-1')}", {}),
    }
    opened = {}
    for kind, (url, headers) in urls.items():
        ws = await fleet.connect(url, headers)
        opened[kind] = (ws, await configure(ws, fleet.agent))
    return opened


async def refused_status(url: str, headers: dict[str, str] | None = None) -> int:
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, additional_headers=headers or {}):
            pass
    status: int = refused.value.response.status_code
    return status


async def test_health_says_redis_is_gone_while_it_is_then_ok_again(fleet: Fleet) -> None:
    """Issue #12: a fleet whose Redis is gone refuses every JWT, so `/health` is 503 and
    names Redis; with Redis back it is 200 again."""
    async with httpx.AsyncClient(base_url=fleet.serve.http) as http:
        assert (await http.get("/health")).json() == {"status": "ok", "database": "sqlite"}
        fleet.redis.stop()
        down = await http.get("/health")
        assert down.status_code == 503, down.text
        assert down.json()["error"]["code"] == "service_unavailable"
        assert "Redis (PARLEY_REDIS_URL) does not answer" in down.json()["error"]["message"]
        fleet.redis.start()
        deadline = time.monotonic() + 10
        while (back := await http.get("/health")).status_code != 200:
            assert time.monotonic() < deadline, back.text
            await asyncio.sleep(0.2)


async def test_redis_restarted_within_bound_live_sockets_ride_it_out(fleet: Fleet) -> None:
    opened = await open_sockets(fleet)
    token = (await fleet.session_token())["session_token"]
    fleet.redis.stop()
    started = time.monotonic()
    # nothing new is admitted without the store, whatever the credential
    assert await refused_status(f"{fleet.serve.ws}/v1/sts/ws?session_token={token}") == 503
    assert (
        await refused_status(
            f"{fleet.serve.ws}/v1/sts/ws", {"Authorization": f"Bearer {fleet.key}"}
        )
        == 503
    )
    assert await refused_status(f"{fleet.serve.ws}/v1/sts/ws?jwt={fleet.jwt('new', 'n-1')}") == 503
    await asyncio.sleep(max(0.0, 0.8 - (time.monotonic() - started)))
    fleet.redis.start()  # empty: no persistence
    assert time.monotonic() - started < 1.8
    await asyncio.sleep(2.5)  # past the bound, counted from the outage's start
    for ws, _ in opened.values():
        await still_talks(ws)
    # and new sockets open again
    async with connect(f"{fleet.serve.ws}/v1/sts/ws?session_token={token}") as ws:
        await configure(ws, fleet.agent)


async def test_redis_paused_within_bound_live_sockets_ride_it_out(fleet: Fleet) -> None:
    opened = await open_sockets(fleet)
    fleet.redis.pause()
    await asyncio.sleep(1.0)
    fleet.redis.resume()
    await asyncio.sleep(2.0)
    for ws, _ in opened.values():
        await still_talks(ws)


async def test_redis_outage_past_bound_closes_live_sockets_1011_with_reason(fleet: Fleet) -> None:
    opened = await open_sockets(fleet)
    fleet.redis.stop()
    started = time.monotonic()
    closes = await asyncio.gather(*(until_closed(ws, within=10) for ws, _ in opened.values()))
    took = time.monotonic() - started
    assert closes == [(1011, "revocation store unavailable")] * 3, closes
    assert 2.0 <= took < 5.0, took
    async with fleet.api() as api:
        for _, conversation_id in opened.values():
            found = (await api.get(f"/v1/conversations/{conversation_id}")).json()
            assert found["conversation"]["status"] == "ended", found


async def test_session_token_revoked_during_outage_answers_done_then_socket_closes(
    fleet: Fleet,
) -> None:
    made = await fleet.session_token()
    ws = await fleet.connect(f"{fleet.serve.ws}/v1/sts/ws?session_token={made['session_token']}")
    await configure(ws, fleet.agent)
    fleet.redis.stop()
    async with fleet.api() as api:
        revoked = await api.delete(f"/v1/auth/session_token/{made['id']}")
        assert revoked.status_code in (200, 204), revoked.text  # the answer says: done
        fleet.redis.start()
        async with httpx.AsyncClient(base_url=fleet.serve.http) as client:
            refused = await client.get(
                "/v1/conversations", headers={"Authorization": f"Bearer {made['session_token']}"}
            )
        assert refused.status_code == 401  # in force at once, from the database
    code, reason = await until_closed(ws, within=5)
    assert (code, reason) == (1008, "session token revoked")


async def test_conversation_ended_during_outage_answers_done_then_socket_closes(
    fleet: Fleet,
) -> None:
    ws = await fleet.connect(
        f"{fleet.serve.ws}/v1/sts/ws", {"Authorization": f"Bearer {fleet.key}"}
    )
    conversation_id = await configure(ws, fleet.agent)
    fleet.redis.stop()
    async with fleet.api() as api:
        ended = await api.post(f"/v1/conversations/{conversation_id}/end")
        assert ended.status_code == 200, ended.text
        assert ended.json() == {"success": True}
        fleet.redis.start()
        found = (await api.get(f"/v1/conversations/{conversation_id}")).json()
        assert found["conversation"]["status"] == "ended"
    code, reason = await until_closed(ws, within=5)
    assert (code, reason) == (1000, "conversation ended")


async def test_redis_restarted_without_persistence_jti_used_before_refused(fleet: Fleet) -> None:
    before = fleet.jwt("replayed", "used-once")
    bearer = {"Authorization": f"Bearer {before}"}
    async with httpx.AsyncClient(base_url=fleet.serve.http) as client:
        first = await client.get("/v1/conversations/replayed", headers=bearer)
        assert first.status_code in (200, 404), first.text
        fleet.redis.stop()
        await asyncio.sleep(1.1)  # the restarted server starts in a later second than `iat`
        fleet.redis.start()
        again = await client.get("/v1/conversations/replayed", headers=bearer)
        assert again.status_code == 409, again.text
        assert again.json()["error"]["code"] == "jti_replayed"
        await asyncio.sleep(1.1)
        fresh = fleet.jwt("replayed", "issued-after-loss")
        after = await client.get(
            "/v1/conversations/replayed", headers={"Authorization": f"Bearer {fresh}"}
        )
        assert after.status_code in (200, 404), after.text


async def test_redis_restart_pooled_connections_replaced_before_use(
    redis_server: RedisServer,
) -> None:
    client = connect_redis(redis_server.url)
    try:
        revocations = RedisRevocations(client)
        await asyncio.gather(*(revocations.is_revoked(f"warm-{n}") for n in range(4)))  # 4 pooled
        redis_server.stop()
        await asyncio.sleep(0.2)  # the loop sees the connections close, as a running server does
        redis_server.start()
        answers = await asyncio.gather(*(revocations.is_revoked(f"k-{n}") for n in range(4)))
        assert answers == [False] * 4  # no command failed on a connection the restart broke
    finally:
        await client.aclose()
