"""Two real `parley serve` processes on one PostgreSQL database and one Redis are one service
(issue #11, API.md section 11): replay records, rate limits, disables, revocations and JWKS
refreshes hold across both.

The pair starts once for the module: `a` first (it creates the organization `default` and
prints its first API key), then `b`. Each test registers its own issuer, agent or credential,
so the tests share the pair without sharing state.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import redis
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from parley.jwt import KeyPair, generate_key_pair, mint_token
from tests.carrier import CapturedWebhook, MediaStream, SimulatedCarrier, Twiml, parse_twiml
from tests.carrier_api import CarrierApi
from tests.carrier_calls import Voicemail
from tests.databases import postgres_admin_url, postgres_database
from tests.faults.serve_process import ServeProcess
from tests.faults.ws_client import configure, receive, until_closed
from tests.jwks_server import running_jwks_server
from tests.ports import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.redis, pytest.mark.e2e]

AUDIENCE = "parley.test"
REDIS_DB = 13
"""A logical database of the pair's own: flushed at the start, so no other test's keys clash."""
RATE_BURST = 4


@dataclass(frozen=True)
class Pair:
    a: ServeProcess
    b: ServeProcess
    key: str
    """The first API key of the organization `default`, printed by `a`."""
    carrier_port: int
    """PARLEY_TWILIO_API_URL's port: a test that places calls runs the carrier's API there."""


def pair_redis_url() -> str:
    """PARLEY_TEST_REDIS_URL (default the local server) with the pair's own logical database."""
    base = os.environ.get("PARLEY_TEST_REDIS_URL") or "redis://127.0.0.1:6379/15"
    return urlsplit(base)._replace(path=f"/{REDIS_DB}").geturl()


def flush_redis(url: str) -> None:
    """Empty the pair's logical database; an unreachable Redis fails the tests."""
    try:
        with redis.Redis.from_url(url, socket_connect_timeout=3) as client:
            client.flushdb()
    except redis.RedisError as exc:
        pytest.fail(f"Redis at {urlsplit(url).hostname} is unreachable ({exc!r}): start one.")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Two instances on a fresh, migrated PostgreSQL database and a flushed Redis database."""
    if postgres_admin_url() is None:
        pytest.fail("PARLEY_TEST_DATABASE_URL is not set: these tests need PostgreSQL.")
    redis_url = pair_redis_url()
    flush_redis(redis_url)
    cwd: Path = tmp_path_factory.mktemp("two-instances")
    with contextlib.ExitStack() as stack:
        database_url = stack.enter_context(contextlib.contextmanager(postgres_database)())
        shared = {
            "PARLEY_DATABASE_URL": database_url,
            "PARLEY_REDIS_URL": redis_url,
            "PARLEY_PUBLIC_URL": f"https://{AUDIENCE}",
            "PARLEY_JWKS_ALLOW_HTTP": "true",
            "PARLEY_JWKS_ALLOW_PRIVATE_NETWORKS": "true",
            "PARLEY_JWT_RATE_BURST": str(RATE_BURST),
            "PARLEY_JWT_RATE_PER_MINUTE": "1",  # no refill while a test runs
        }
        carrier_port = free_port()
        shared["PARLEY_TWILIO_API_URL"] = f"http://127.0.0.1:{carrier_port}"
        a = ServeProcess(cwd, PARLEY_INSTANCE_ID="two-instances-a", **shared)
        b = ServeProcess(cwd, PARLEY_INSTANCE_ID="two-instances-b", **shared)
        stack.callback(a.ensure_stopped)
        stack.callback(b.ensure_stopped)
        a.start()
        b.start()
        assert a.first_key is not None, "the first instance printed no API key"
        yield Pair(a, b, a.first_key, carrier_port)


def api(serve: ServeProcess, credential: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {credential}"} if credential else {}
    return httpx.AsyncClient(base_url=serve.http, headers=headers, timeout=30)


def assert_error(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code, answer.text


async def register_static_key(pair: Pair) -> tuple[KeyPair, str]:
    """Register a fresh issuer and EdDSA key through `a`; return the key pair and issuer."""
    keys = generate_key_pair("EdDSA")
    iss = f"https://{secrets.token_hex(6)}.tenant.example"
    async with api(pair.a, pair.key) as client:
        put = await client.put(
            "/v1/auth/jwt", json={"issuers": [iss], "public_keys": keys.jwks["keys"]}
        )
    assert put.status_code == 200, put.text
    return keys, iss


async def make_agent(pair: Pair) -> str:
    name = f"agent-{secrets.token_hex(4)}"
    async with api(pair.a, pair.key) as client:
        made = await client.post("/v1/agents", json={"name": name, "welcome_message": None})
    assert made.status_code == 201, made.text
    return name


async def make_conversation(pair: Pair) -> str:
    """A pending conversation of a fresh agent, created through `a`."""
    agent = await make_agent(pair)
    conversation_id = f"conv-{secrets.token_hex(4)}"
    async with api(pair.a, pair.key) as client:
        made = await client.post("/v1/conversations", json={"agent": agent, "id": conversation_id})
    assert made.status_code == 201, made.text
    return conversation_id


def token(keys: KeyPair, iss: str, conversation_id: str, **claims: Any) -> str:
    return mint_token(
        keys.private_key_pem,
        kid=claims.pop("kid", keys.kid),
        iss=iss,
        aud=AUDIENCE,
        sub=claims.pop("sub", "user-1"),
        conversation_id=conversation_id,
        **claims,
    )


async def read_with(serve: ServeProcess, credential: str, conversation_id: str) -> httpx.Response:
    async with api(serve, credential) as client:
        return await client.get(f"/v1/conversations/{conversation_id}")


async def test_two_instances_jti_used_on_one_refused_on_the_other(pair: Pair) -> None:
    keys, iss = await register_static_key(pair)
    conversation_id = await make_conversation(pair)
    for first, second in ((pair.a, pair.b), (pair.b, pair.a)):
        jwt = token(keys, iss, conversation_id, jti=secrets.token_hex(8))
        assert (await read_with(first, jwt, conversation_id)).status_code == 200
        assert_error(await read_with(second, jwt, conversation_id), 409, "jti_replayed")


async def test_two_instances_share_the_rate_limit_of_iss_sub_conversation(pair: Pair) -> None:
    keys, iss = await register_static_key(pair)
    conversation_id = await make_conversation(pair)
    for n in range(RATE_BURST):  # the burst, spent half on each
        serve = (pair.a, pair.b)[n % 2]
        answer = await read_with(serve, token(keys, iss, conversation_id), conversation_id)
        assert answer.status_code == 200, (n, answer.text)
    for serve in (pair.a, pair.b):
        limited = await read_with(serve, token(keys, iss, conversation_id), conversation_id)
        assert_error(limited, 429, "rate_limited")
        assert int(limited.headers["retry-after"]) >= 1
    # Another end user of the same conversation has a budget of its own.
    other = token(keys, iss, conversation_id, sub="user-2")
    assert (await read_with(pair.b, other, conversation_id)).status_code == 200


async def test_two_instances_agent_disabled_on_one_starts_nothing_on_the_other(
    pair: Pair,
) -> None:
    agent = await make_agent(pair)
    async with api(pair.b, pair.key) as b:
        started = await b.post("/v1/conversations", json={"agent": agent})
        assert started.status_code == 201, started.text  # `b` has seen it enabled
        async with api(pair.a, pair.key) as a:
            disabled = await a.post(f"/v1/agents/{agent}/disable")
        assert disabled.status_code == 200, disabled.text
        assert_error(
            await b.post("/v1/conversations", json={"agent": agent}), 409, "agent_disabled"
        )
    async with connect(
        f"{pair.b.ws}/v1/sts/ws", additional_headers={"Authorization": f"Bearer {pair.key}"}
    ) as ws:
        await ws.send(f'{{"type": "config", "agent": "{agent}"}}')
        refused = await receive(ws)
        assert refused["type"] == "error", refused
        assert refused["error"]["code"] == "agent_disabled", refused
        code, _ = await until_closed(ws)
        assert code == 1008


async def test_two_instances_session_token_revoked_on_one_refused_and_closed_on_the_other(
    pair: Pair,
) -> None:
    agent = await make_agent(pair)
    async with api(pair.a, pair.key) as a:
        made = await a.post("/v1/auth/session_token", json={})
        assert made.status_code == 200, made.text
        session = made.json()
        async with connect(f"{pair.b.ws}/v1/sts/ws?session_token={session['session_token']}") as ws:
            conversation_id = await configure(ws, agent)
            live = await read_with(pair.b, session["session_token"], conversation_id)
            assert live.status_code == 200, live.text
            closing = asyncio.create_task(until_closed(ws, within=10))
            revoked_at = time.monotonic()
            revoked = await a.delete(f"/v1/auth/session_token/{session['id']}")
            assert revoked.status_code == 200, revoked.text
            refused = await read_with(pair.b, session["session_token"], conversation_id)
            code, reason = await closing
            closed_after = time.monotonic() - revoked_at
    assert refused.status_code == 401, refused.text
    assert (code, reason) == (1008, "session token revoked")
    assert closed_after <= 2.0, f"the socket closed {closed_after:.2f} s after the revocation"


async def test_two_instances_api_key_revoked_on_one_stops_on_the_other_at_once(
    pair: Pair,
) -> None:
    async with api(pair.a, pair.key) as a:
        made = await a.post("/v1/api_keys", json={"name": "revoked-across"})
        assert made.status_code == 201, made.text
        secret, key_id = made.json()["secret"], made.json()["id"]
        async with api(pair.b, secret) as b:
            assert (await b.get("/v1/agents")).status_code == 200  # known to `b` now
            assert (await b.get("/v1/agents")).status_code == 200
            revoked = await a.delete(f"/v1/api_keys/{key_id}")
            assert revoked.status_code == 200, revoked.text
            assert_error(await b.get("/v1/agents"), 401, "unauthorized")
        async with api(pair.a, secret) as a_with_revoked:
            assert_error(await a_with_revoked.get("/v1/agents"), 401, "unauthorized")


async def test_two_instances_api_key_rotated_on_one_old_secret_stops_on_the_other_at_once(
    pair: Pair,
) -> None:
    async with api(pair.a, pair.key) as a:
        made = await a.post("/v1/api_keys", json={"name": "rotated-across"})
        old, key_id = made.json()["api_key"], made.json()["id"]
        async with api(pair.b, old) as b_with_old:
            assert (await b_with_old.get("/v1/agents")).status_code == 200  # known to `b`
            rotated = await a.post(f"/v1/api_keys/{key_id}/rotate")
            assert rotated.status_code == 200, rotated.text
            assert_error(await b_with_old.get("/v1/agents"), 401, "unauthorized")
        async with api(pair.b, rotated.json()["api_key"]) as b_with_new:
            assert (await b_with_new.get("/v1/agents")).status_code == 200


async def test_two_instances_conversation_token_opens_one_socket_across_both(
    pair: Pair,
) -> None:
    agent = await make_agent(pair)
    async with api(pair.a, pair.key) as a:
        agent_id = (await a.get(f"/v1/agents/{agent}")).json()["agent"]["id"]
        made = await a.post("/v1/auth/conversation_token", json={"agent_id": agent_id})
    token = made.json()["conversation_token"]

    async def attempt(serve: ServeProcess) -> int:
        try:
            async with connect(f"{serve.ws}/v1/sts/ws?conversation_token={token}") as ws:
                await ws.close()
                return 101
        except InvalidStatus as error:
            return error.response.status_code

    outcomes = await asyncio.gather(*(attempt(s) for s in [pair.a, pair.b] * 4))

    assert sorted(outcomes) == [101] + [401] * 7


async def test_two_instances_100_unknown_kids_cause_at_most_one_jwks_fetch(pair: Pair) -> None:
    keys = generate_key_pair("EdDSA")
    stranger = generate_key_pair("EdDSA")
    iss = f"https://{secrets.token_hex(6)}.jwks.example"
    conversation_id = await make_conversation(pair)
    with running_jwks_server() as jwks:
        jwks.publish(*keys.jwks["keys"])
        async with api(pair.a, pair.key) as a:
            put = await a.put("/v1/auth/jwt", json={"issuers": [iss], "jwks_url": jwks.url})
        assert put.status_code == 200, put.text
        registered = jwks.fetches
        forged = [
            token(stranger, iss, conversation_id, kid=f"unknown-{n}", sub=f"user-{n}")
            for n in range(100)
        ]
        async with api(pair.a) as a, api(pair.b) as b:
            both = (a, b)

            async def send(n: int) -> httpx.Response:
                bearer = {"Authorization": f"Bearer {forged[n]}"}
                return await both[n % 2].get(f"/v1/conversations/{conversation_id}", headers=bearer)

            at_once = await asyncio.gather(*(send(n) for n in range(50)))
            one_by_one = [await send(n) for n in range(50, 100)]
            known = await b.get(
                f"/v1/conversations/{conversation_id}",
                headers={"Authorization": f"Bearer {token(keys, iss, conversation_id)}"},
            )
        fetched = jwks.fetches - registered
    for answer in [*at_once, *one_by_one]:
        assert_error(answer, 401, "invalid_signature")
    assert known.status_code == 200, known.text
    assert fetched <= 1, f"{fetched} JWKS fetches for 100 unknown kids"


# --- phone calls: one answer per CallSid across the fleet (API.md section 13) ------------

VOICE_URL = f"https://{AUDIENCE}/v1/telephony/twilio/voice"
MEDIA_PATH = "/v1/telephony/twilio/media"
CALLER = "+15105550199"


async def phone_line(pair: Pair) -> tuple[str, CapturedWebhook]:
    """A fresh carrier account and agent with a number (through `a`); return the agent's name
    and the signed webhook of one call to it, captured, unsent."""
    number = "+1415" + "".join(str(secrets.randbelow(10)) for _ in range(7))
    name = f"phone-{secrets.token_hex(4)}"
    async with api(pair.a, pair.key) as client:
        carrier = SimulatedCarrier(http=client, voice_url=VOICE_URL)
        body = {"account_sid": carrier.account_sid, "auth_token": carrier.auth_token}
        put = await client.put("/v1/telephony/twilio", json=body)
        assert put.status_code == 200, put.text
        made = await client.post(
            "/v1/agents", json={"name": name, "welcome_message": None, "phone_numbers": [number]}
        )
        assert made.status_code == 201, made.text
    return name, carrier.capture(to=number, from_=CALLER)


async def replay_on(
    serves: tuple[ServeProcess, ...], captured: CapturedWebhook, times: int, *, at_once: bool
) -> list[Twiml]:
    """Send the captured webhook `times` times, to the instances in turn."""
    clients = [api(serve) for serve in serves]
    try:
        sends = [captured.replay(clients[n % len(clients)]) for n in range(times)]
        if at_once:
            responses = await asyncio.gather(*sends)
        else:
            responses = [await send for send in sends]
    finally:
        for client in clients:
            await client.aclose()
    for response in responses:
        assert response.status_code == 200, response.text
    return [parse_twiml(response.text) for response in responses]


async def calls_of(pair: Pair, agent: str) -> list[dict[str, Any]]:
    async with api(pair.b, pair.key) as client:
        listed = await client.get("/v1/conversations", params={"agent": agent})
    assert listed.status_code == 200, listed.text
    found: list[dict[str, Any]] = listed.json()["conversations"]
    return found


async def test_two_instances_phone_webhook_replayed_on_both_makes_one_conversation(
    pair: Pair,
) -> None:
    agent, captured = await phone_line(pair)
    at_once = await replay_on((pair.a, pair.b), captured, 20, at_once=True)
    one_by_one = await replay_on((pair.b, pair.a), captured, 6, at_once=False)
    first = at_once[0]
    assert not first.rejected, first
    assert set(first.parameters) == {"conversation_id", "stream_token"}
    assert [*at_once, *one_by_one] == [first] * 26  # the same conversation and stream token
    calls = await calls_of(pair, agent)
    assert [call["id"] for call in calls] == [first.parameters["conversation_id"]]
    assert calls[0]["status"] == "pending"


async def test_two_instances_phone_webhook_replayed_after_stream_started_rejected_on_both(
    pair: Pair,
) -> None:
    agent, captured = await phone_line(pair)
    (first,) = await replay_on((pair.a,), captured, 1, at_once=False)
    assert not first.rejected, first
    conversation_id = first.parameters["conversation_id"]
    stream = await MediaStream.open(pair.b.ws + MEDIA_PATH, first.parameters)
    try:
        deadline = time.monotonic() + 20
        while (await calls_of(pair, agent))[0]["status"] != "live":
            assert time.monotonic() < deadline, "the genuine call's stream never started"
            await asyncio.sleep(0.05)
        at_once = await replay_on((pair.a, pair.b), captured, 10, at_once=True)
        one_by_one = await replay_on((pair.b, pair.a), captured, 4, at_once=False)
        assert [*at_once, *one_by_one] == [Twiml(reject_reason="busy")] * 14
        # The first answer's token was used: no second stream starts on either instance.
        for serve in (pair.a, pair.b):
            again = await MediaStream.open(serve.ws + MEDIA_PATH, first.parameters)
            try:
                assert await again.wait_closed(within=10) == (1008, "invalid_stream_token")
            finally:
                await again.close()
        calls = await calls_of(pair, agent)
        assert [(call["id"], call["status"]) for call in calls] == [(conversation_id, "live")]
        assert calls[0]["call_info"]["from_phone_number"] == CALLER
    finally:
        await stream.close()


# --- a call placed on one instance, its callbacks on the other (API.md section 15) ----------


class _To(httpx.AsyncBaseTransport):
    """Sends what is addressed to the public URL to one instance on loopback, as a load
    balancer that picked it would (the signature stays over the public URL)."""

    def __init__(self, serve: ServeProcess) -> None:
        self._serve = serve
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.url = httpx.URL(self._serve.http + request.url.raw_path.decode("ascii"))
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_two_instances_call_placed_on_one_callbacks_on_the_other_voicemail_left(
    pair: Pair,
) -> None:
    """Placed through `a`, its media stream on `a`, every carrier callback (the voice URL,
    the statuses, the machine's verdict) on `b`: the verdict reaches the session on `a`,
    which leaves the voicemail message and ends the call `voicemail`; `cancel` through `b`
    of the ended call changes nothing."""
    callbacks = httpx.AsyncClient(transport=_To(pair.b), timeout=30)
    media = pair.a.ws + "/v1/telephony/twilio/media"
    async with CarrierApi(
        http=callbacks, port=pair.carrier_port, stream_route=lambda _url: media
    ) as carrier:
        number = "+1628" + "".join(str(secrets.randbelow(10)) for _ in range(7))
        name = f"caller-{secrets.token_hex(4)}"
        async with api(pair.a, pair.key) as client:
            account = {"account_sid": carrier.account_sid, "auth_token": carrier.auth_token}
            assert (await client.put("/v1/telephony/twilio", json=account)).status_code == 200
            made = await client.post(
                "/v1/agents",
                json={"name": name, "welcome_message": "Hello from the hotel.",
                      "phone_numbers": [number], "voicemail_message": "Please call us back."},
            )  # fmt: skip
            assert made.status_code == 201, made.text
            carrier.script(Voicemail())
            body = {"to_phone_number": "+14155550123", "config": {"agent": name}}
            placed = await client.post("/v1/conversations/outbound_call", json=body)
            assert placed.status_code == 200, placed.text
        conversation_id = placed.json()["conversation_id"]
        call = await carrier.wait_call()
        await call.wait_finished(60)
        assert [c.field("AnsweredBy") for c in call.sent("AsyncAmdStatusCallback")] == [
            "machine_end_beep"
        ]
        assert all(c.status in (200, 204) for c in call.callbacks), call.callbacks
        found = (await read_with(pair.b, pair.key, conversation_id)).json()["conversation"]
        assert (found["status"], found["ended_by"]) == ("ended", "voicemail")
        said = [item["text"] for item in found["items"] if item["role"] == "assistant"]
        assert said[-1] == "Please call us back."
        async with api(pair.b, pair.key) as client:
            again = await client.post(f"/v1/conversations/{conversation_id}/cancel")
        assert again.status_code == 200
        after = (await read_with(pair.a, pair.key, conversation_id)).json()["conversation"]
        assert after["ended_by"] == "voicemail"
