"""The conversation WebSocket end to end: real uvicorn, real `websockets` clients."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import struct
import time
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from parley.engine import AudioFormat
from parley.services import live
from tests import speech
from tests.e2e.conftest import AUDIENCE, Customer, Server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

RATE = 16_000
CHUNK_MS = 20
SENTENCE = speech.SENTENCES[0]


async def receive(ws: ClientConnection, within: float = 10.0) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), within))
    return message


async def until_closed(ws: ClientConnection, within: float = 5.0) -> tuple[int, str]:
    """Read until the server closes the socket; return its close code and reason."""
    deadline = time.monotonic() + within
    frame = None
    try:
        while True:
            await receive(ws, max(0.1, deadline - time.monotonic()))
    except ConnectionClosed as closed:
        frame = closed.rcvd
    if frame is None:
        raise AssertionError("the server did not send a close frame")
    return frame.code, frame.reason


async def receive_until(
    ws: ClientConnection, kind: str, within: float = 20.0
) -> list[dict[str, Any]]:
    """Collect messages until one of type `kind` arrives (inclusive)."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + within
    while True:
        message = await receive(ws, max(0.1, deadline - time.monotonic()))
        seen.append(message)
        if message["type"] == kind:
            return seen


async def configure(ws: ClientConnection, agent: str, **extra: Any) -> str:
    await ws.send(
        json.dumps(
            {
                "type": "config",
                "agent": agent,
                "input_format": "pcm_16000",
                "output_format": "pcm_16000",
                **extra,
            }
        )
    )
    created = await receive(ws)
    assert created["type"] == "conversation_created", created
    assert (await receive(ws))["type"] == "ready_to_start_conversation"
    conversation_id: str = created["conversation_id"]
    return conversation_id


def refused(error: InvalidStatus) -> tuple[int, dict[str, Any]]:
    body: dict[str, Any] = json.loads(error.response.body or b"{}")
    return error.response.status_code, body


# --- opening with each credential ----------------------------------------------------------


async def test_ws_open_with_api_key_header(server: Server, customer: Customer) -> None:
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    async with connect(f"{server.ws}/v1/sts/ws", additional_headers=headers) as ws:
        conversation_id = await configure(ws, customer.agent)
    assert conversation_id.startswith("conv_")


async def test_ws_open_with_session_token(server: Server, customer: Customer) -> None:
    token = (await customer.session_token())["session_token"]
    async with connect(f"{server.ws}/v1/sts/ws?session_token={token}") as ws:
        assert (await configure(ws, customer.agent)).startswith("conv_")


async def test_ws_open_with_jwt_creates_its_conversation(
    server: Server, customer: Customer
) -> None:
    async with connect(f"{server.ws}/v1/sts/ws?jwt={customer.jwt('order-1234')}") as ws:
        assert await configure(ws, customer.agent) == "order-1234"
    body = (await customer.api.get("/v1/conversations/order-1234")).json()["conversation"]
    assert body["end_user"] == "end-user-1"
    assert body["agent"]["name"] == customer.agent


async def test_ws_session_token_opens_pending_conversation(
    server: Server, customer: Customer
) -> None:
    made = await customer.api.post(
        "/v1/conversations", json={"agent": customer.agent, "id": "prepared-1"}
    )
    assert made.json()["conversation"]["status"] == "pending"
    token = (await customer.session_token(conversation_ids=["prepared-1"]))["session_token"]
    url = f"{server.ws}/v1/sts/ws?session_token={token}&conversation_id=prepared-1"
    async with connect(url) as ws:
        assert await configure(ws, customer.agent) == "prepared-1"
        live_now = (await customer.api.get("/v1/conversations/prepared-1")).json()["conversation"]
        assert live_now["status"] == "live"


# --- handshake refusals are HTTP answers with the REST envelope ------------------------------


async def expect_refusal(
    url: str, status: int, code: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    with pytest.raises(InvalidStatus) as raised:
        async with connect(url, additional_headers=headers or {}):
            pass
    got_status, body = refused(raised.value)
    assert (got_status, body["error"]["code"]) == (status, code), body
    return body


async def test_ws_refused_without_credential_401(server: Server) -> None:
    await expect_refusal(f"{server.ws}/v1/sts/ws", 401, "unauthorized")


async def test_ws_refused_with_unknown_session_token_401(server: Server) -> None:
    await expect_refusal(
        f"{server.ws}/v1/sts/ws?session_token=parley_st_{'A' * 43}", 401, "unauthorized"
    )


async def test_ws_refused_with_two_credentials_400(server: Server, customer: Customer) -> None:
    token = (await customer.session_token())["session_token"]
    url = f"{server.ws}/v1/sts/ws?session_token={token}&jwt={customer.jwt('c')}"
    await expect_refusal(url, 400, "multiple_credentials")
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    await expect_refusal(
        f"{server.ws}/v1/sts/ws?session_token={token}", 400, "multiple_credentials", headers
    )


async def test_ws_jwt_for_conversation_a_refused_on_b(server: Server, customer: Customer) -> None:
    url = f"{server.ws}/v1/sts/ws?jwt={customer.jwt('conv-a')}&conversation_id=conv-b"
    body = await expect_refusal(url, 403, "conversation_id_mismatch")
    assert body["error"]["message"] == "conversation_id mismatch"


async def test_ws_jwt_replayed_jti_on_handshake_409(server: Server, customer: Customer) -> None:
    token = customer.jwt("replayed")
    async with connect(f"{server.ws}/v1/sts/ws?jwt={token}") as ws:
        await configure(ws, customer.agent)
    body = await expect_refusal(f"{server.ws}/v1/sts/ws?jwt={token}", 409, "jti_replayed")
    assert body["error"]["message"] == "jti replayed"


async def test_ws_jwt_replayed_on_ended_conversation_replay_error_wins(
    server: Server, customer: Customer
) -> None:
    """The `jti` claim and the conversation's status read run side by side on a handshake;
    when both refuse, the claim's error is the answer, as when they ran in turn."""
    token = customer.jwt("ended-then-replayed")
    async with connect(f"{server.ws}/v1/sts/ws?jwt={token}") as ws:
        await configure(ws, customer.agent)
    ended = await customer.api.post("/v1/conversations/ended-then-replayed/end")
    assert ended.status_code == 200, ended.text
    fresh = customer.jwt("ended-then-replayed")

    await expect_refusal(f"{server.ws}/v1/sts/ws?jwt={fresh}", 409, "conversation_ended")
    await expect_refusal(f"{server.ws}/v1/sts/ws?jwt={token}", 409, "jti_replayed")
    await expect_refusal(f"{server.ws}/v1/sts/ws?jwt={fresh}", 409, "jti_replayed")


async def test_ws_jwt_expired_401(server: Server, customer: Customer) -> None:
    token = customer.jwt("old", ttl=60, clock=_Shifted(-200))
    body = await expect_refusal(f"{server.ws}/v1/sts/ws?jwt={token}", 401, "token_expired")
    assert body["error"]["message"] == "token expired"


async def test_ws_jwt_unregistered_issuer_403(server: Server, customer: Customer) -> None:
    from parley.jwt import mint_token

    token = mint_token(
        customer.private_key,
        kid=customer.kid,
        iss="https://nobody.example",
        aud="parley.test",
        sub="u",
        conversation_id="x",
    )
    await expect_refusal(f"{server.ws}/v1/sts/ws?jwt={token}", 403, "issuer_not_registered")


async def test_ws_restricted_session_token_cannot_open_others_403(
    server: Server, customer: Customer
) -> None:
    await customer.api.post("/v1/conversations", json={"agent": customer.agent, "id": "mine"})
    await customer.api.post("/v1/conversations", json={"agent": customer.agent, "id": "theirs"})
    token = (await customer.session_token(conversation_ids=["mine"]))["session_token"]
    await expect_refusal(
        f"{server.ws}/v1/sts/ws?session_token={token}&conversation_id=theirs",
        403,
        "insufficient_scope",
    )
    await expect_refusal(f"{server.ws}/v1/sts/ws?session_token={token}", 403, "insufficient_scope")


async def test_ws_unknown_pending_conversation_404(server: Server, customer: Customer) -> None:
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    await expect_refusal(
        f"{server.ws}/v1/sts/ws?conversation_id=ghost", 404, "conversation_not_found", headers
    )


# --- agent rules on the socket --------------------------------------------------------------


async def test_ws_disabled_agent_config_error_and_close_1008(
    server: Server, customer: Customer
) -> None:
    await customer.api.post(f"/v1/agents/{customer.agent}/disable")
    async with connect(f"{server.ws}/v1/sts/ws?jwt={customer.jwt('blocked')}") as ws:
        await ws.send(json.dumps({"type": "config", "agent": customer.agent}))
        error = await receive(ws)
        assert error["type"] == "error"
        assert error["error"]["code"] == "agent_disabled"
        code, _reason = await until_closed(ws)
    assert code == 1008


async def test_ws_live_conversation_runs_on_when_agent_disabled(
    server: Server, customer: Customer
) -> None:
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    async with connect(f"{server.ws}/v1/sts/ws", additional_headers=headers) as ws:
        await configure(ws, customer.agent)
        await customer.api.post(f"/v1/agents/{customer.agent}/disable")
        await ws.send(json.dumps({"type": "say", "text": "Still here."}))
        messages = await receive_until(ws, "assistant_finished_speaking")
    assert any(m["type"] == "audio_chunk" for m in messages)


# --- closing -------------------------------------------------------------------------------


async def test_ws_session_token_revocation_closes_within_2s(
    server: Server, customer: Customer
) -> None:
    created = await customer.session_token()
    async with connect(f"{server.ws}/v1/sts/ws?session_token={created['session_token']}") as ws:
        await configure(ws, customer.agent)
        revoked_at = time.monotonic()
        assert (await customer.api.delete(f"/v1/auth/session_token/{created['id']}")).json() == {
            "success": True
        }
        code, _reason = await until_closed(ws)
        elapsed = time.monotonic() - revoked_at
    assert code == 1008
    assert elapsed < 2.0
    refused_after = await customer.api.get(
        "/v1/conversations", headers={"Authorization": f"Bearer {created['session_token']}"}
    )
    assert refused_after.status_code == 401


async def test_ws_jwt_socket_closes_when_token_expires(server: Server, customer: Customer) -> None:
    token = customer.jwt("short", ttl=60, clock=_Shifted(-87))  # exp + 30 s is 3 s away
    async with connect(f"{server.ws}/v1/sts/ws?jwt={token}") as ws:
        await configure(ws, customer.agent)
        code, reason = await until_closed(ws, within=10)
    assert (code, reason) == (1008, "token expired")
    ended = (await customer.api.get("/v1/conversations/short")).json()["conversation"]
    assert (ended["status"], ended["ended_by"]) == ("ended", "timeout")


async def test_ws_rest_end_closes_socket_1000(server: Server, customer: Customer) -> None:
    async with connect(f"{server.ws}/v1/sts/ws?jwt={customer.jwt('to-end')}") as ws:
        await configure(ws, customer.agent)
        assert (await customer.api.post("/v1/conversations/to-end/end")).json() == {"success": True}
        code, _reason = await until_closed(ws)
    assert code == 1000
    ended = (await customer.api.get("/v1/conversations/to-end")).json()["conversation"]
    assert ended["status"] == "ended"
    assert ended["ended_at"] is not None
    assert ended["ended_by"] == "api"


async def test_ws_jwt_ends_its_own_conversation_over_rest(
    server: Server, customer: Customer
) -> None:
    """API.md section 1: a JWT acts on the REST endpoints under `/v1/conversations/{id}`
    (its own conversation only); a session token only opens and reads."""
    async with connect(f"{server.ws}/v1/sts/ws?jwt={customer.jwt('self-end')}") as ws:
        await configure(ws, customer.agent)
        async with httpx.AsyncClient(base_url=server.http) as http:
            other = await http.post(
                "/v1/conversations/self-end/end",
                headers={"Authorization": f"Bearer {customer.jwt('another-one')}"},
            )
            token = (await customer.session_token())["session_token"]
            by_session_token = await http.post(
                "/v1/conversations/self-end/end", headers={"Authorization": f"Bearer {token}"}
            )
            ended = await http.post(
                "/v1/conversations/self-end/end",
                headers={"Authorization": f"Bearer {customer.jwt('self-end')}"},
            )
        code, _reason = await until_closed(ws)
    assert (other.status_code, other.json()["error"]["code"]) == (403, "conversation_id_mismatch")
    assert (by_session_token.status_code, by_session_token.json()["error"]["code"]) == (
        403,
        "insufficient_scope",
    )
    assert ended.json() == {"success": True}
    assert code == 1000
    body = (await customer.api.get("/v1/conversations/self-end")).json()["conversation"]
    assert body["status"] == "ended"


@pytest.mark.parametrize("second_by", ["jwt", "session_token"])
async def test_ws_second_socket_on_a_live_conversation_refused_first_runs_on(
    server: Server, customer: Customer, second_by: str
) -> None:
    """One socket per conversation, whatever credential opens the second: it gets
    `conversation_exists` and 1008; the first runs on, and the conversation stays `live`
    until the first one closes (never `ended` while a socket still adds items)."""
    async with connect(f"{server.ws}/v1/sts/ws?jwt={customer.jwt('only-once')}") as first:
        await configure(first, customer.agent)
        if second_by == "jwt":
            url = f"{server.ws}/v1/sts/ws?jwt={customer.jwt('only-once')}"
        else:
            token = (await customer.session_token())["session_token"]
            url = f"{server.ws}/v1/sts/ws?session_token={token}&conversation_id=only-once"
        async with connect(url) as second:
            await second.send(json.dumps({"type": "config", "agent": customer.agent}))
            error = await receive(second)
            code, _reason = await until_closed(second)
        assert error["type"] == "error"
        assert error["error"]["code"] == "conversation_exists"
        assert code == 1008
        still = (await customer.api.get("/v1/conversations/only-once")).json()["conversation"]
        assert still["status"] == "live"
        await first.send(json.dumps({"type": "say", "text": "Still here."}))
        assert any(
            m["type"] == "audio_chunk"
            for m in await receive_until(first, "assistant_finished_speaking")
        )


# --- malformed input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("not json", "invalid_json"),
        ("[1, 2]", "validation_error"),
        ('{"type": "dance"}', "unknown_message_type"),
        ('{"type": "say"}', "validation_error"),
        ('{"type": "say", "text": "hi", "extra": 1}', "validation_error"),
        ('{"type": "audio_chunk", "audio": "%%%"}', "validation_error"),
    ],
    ids=["not-json", "not-object", "unknown-type", "missing-field", "extra-field", "bad-base64"],
)
async def test_ws_malformed_message_error_socket_stays_open(
    server: Server, customer: Customer, frame: str, code: str
) -> None:
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    async with connect(f"{server.ws}/v1/sts/ws", additional_headers=headers) as ws:
        await configure(ws, customer.agent)
        await ws.send(frame)
        error = await receive(ws)
        assert (error["type"], error["error"]["code"]) == ("error", code)
        await ws.send(json.dumps({"type": "set_external_id", "external_id": "crm-1"}))
        await ws.send(json.dumps({"type": "dance"}))
        assert (await receive(ws))["error"]["code"] == "unknown_message_type"


async def test_ws_message_before_config_error(server: Server, customer: Customer) -> None:
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    async with connect(f"{server.ws}/v1/sts/ws", additional_headers=headers) as ws:
        await ws.send(json.dumps({"type": "say", "text": "hello"}))
        assert (await receive(ws))["error"]["code"] == "config_required"
        await configure(ws, customer.agent)


async def test_ws_audio_chunk_over_40ms_refused(server: Server, customer: Customer) -> None:
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    async with connect(f"{server.ws}/v1/sts/ws", additional_headers=headers) as ws:
        await configure(ws, customer.agent)
        too_long = base64.b64encode(b"\x00\x00" * (RATE * 41 // 1000)).decode()
        await ws.send(json.dumps({"type": "audio_chunk", "audio": too_long}))
        assert (await receive(ws))["error"]["code"] == "audio_chunk_too_long"


async def test_ws_message_over_1mib_closes_1009(server: Server, customer: Customer) -> None:
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    async with connect(f"{server.ws}/v1/sts/ws", additional_headers=headers, max_size=None) as ws:
        await configure(ws, customer.agent)
        await ws.send(json.dumps({"type": "say", "text": "x" * (1024 * 1024)}))
        code, _reason = await until_closed(ws)
    assert code == 1009


async def test_ws_config_timeout_closes_1008(
    server: Server, customer: Customer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live.session, "CONFIG_TIMEOUT_SECONDS", 0.5)
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    async with connect(f"{server.ws}/v1/sts/ws", additional_headers=headers) as ws:
        assert (await receive(ws))["error"]["code"] == "config_timeout"
        code, _reason = await until_closed(ws)
    assert code == 1008


# --- a full turn, then the items over REST with every credential -------------------------------


async def test_ws_full_turn_then_items_readable_with_each_credential(
    server: Server, customer: Customer
) -> None:
    async with connect(f"{server.ws}/v1/sts/ws?jwt={customer.jwt('turn-1')}") as ws:
        await configure(ws, customer.agent)
        for chunk in speech.stream(AudioFormat.PCM_16000, 0.5, speech.spoken(SENTENCE), 1.0):
            await ws.send(
                json.dumps({"type": "audio_chunk", "audio": base64.b64encode(chunk).decode()})
            )
        messages = await receive_until(ws, "assistant_finished_speaking", within=30)
    kinds = [m["type"] for m in messages]
    for expected in (
        "user_started_speaking",
        "user_finished_speaking",
        "input_text",
        "assistant_started_speaking",
        "audio_chunk",
        "assistant_finished_speaking",
    ):
        assert expected in kinds, kinds
    assert kinds.index("user_started_speaking") < kinds.index("user_finished_speaking")
    assert kinds.index("user_finished_speaking") < kinds.index("assistant_started_speaking")
    audio = b"".join(base64.b64decode(m["audio"]) for m in messages if m["type"] == "audio_chunk")
    assert len(audio) > RATE * 2 * 0.3  # at least 0.3 s of 16-bit speech
    assert max(abs(v) for (v,) in struct.iter_unpack("<h", audio)) > 1000

    token = (await customer.session_token(conversation_ids=["turn-1"]))["session_token"]
    bodies = []
    for credential in (customer.api_key, token, customer.jwt("turn-1")):
        async with httpx.AsyncClient(base_url=server.http) as http:
            response = await http.get(
                "/v1/conversations/turn-1", headers={"Authorization": f"Bearer {credential}"}
            )
        assert response.status_code == 200, response.text
        bodies.append(response.json()["conversation"])
    # The recording's URL is signed at each read (its expiry moves with the clock, and it
    # is null until the recording is kept, a moment after the end): the rest is the same.
    urls = [body.pop("audio_url") for body in bodies]
    assert {url.split("?")[0] for url in urls if url is not None} <= {
        f"https://{AUDIENCE}/v1/conversations/turn-1/audio"
    }
    assert bodies[0] == bodies[1] == bodies[2]
    items = [(item["role"], item["text"]) for item in bodies[0]["items"]]
    assert items[0] == ("user", next(m["text"] for m in messages if m["type"] == "input_text"))
    assert speech.word_errors(SENTENCE, items[0][1]) == 0
    assert items[1][0] == "assistant"
    assert bodies[0]["status"] == "ended"


async def test_ws_generate_reply_user_message_stored_as_user_item(
    server: Server, customer: Customer
) -> None:
    async with connect(f"{server.ws}/v1/sts/ws?jwt={customer.jwt('typed-1')}") as ws:
        await configure(ws, customer.agent)
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "  Where is it?  "}))
        await receive_until(ws, "assistant_finished_speaking", within=30)
        await ws.send(json.dumps({"type": "generate_reply", "system_message": "Re-engage."}))
        await receive_until(ws, "assistant_finished_speaking", within=30)
    response = await customer.api.get("/v1/conversations/typed-1")
    assert response.status_code == 200, response.text
    items = [(item["role"], item["text"]) for item in response.json()["conversation"]["items"]]
    assert [role for role, _text in items] == ["user", "assistant", "assistant"]
    assert items[0] == ("user", "Where is it?")
    assert items[1][1].startswith("You said: Where is it")


async def test_ws_query_string_never_logged(
    server: Server, customer: Customer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token = customer.jwt("logged")
    async with connect(f"{server.ws}/v1/sts/ws?jwt={token}") as ws:
        await configure(ws, customer.agent)
    for _ in range(100):  # the access line is written when the server's handler returns
        if any("101" in r.getMessage() for r in caplog.records if r.name == "parley.access"):
            break
        await asyncio.sleep(0.02)
    with pytest.raises(InvalidStatus):
        async with connect(f"{server.ws}/v1/sts/ws?jwt={token}"):
            pass
    server_side = [r for r in caplog.records if not r.name.startswith("websockets.client")]
    text = "\n".join(record.getMessage() for record in server_side)
    assert token not in text
    assert token.split(".")[2] not in text
    assert '"WS /v1/sts/ws" 101' in text


class _Shifted:
    """A clock `offset` seconds away from now, to mint tokens in the past."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def time(self) -> float:
        return time.time() + self.offset

    def monotonic(self) -> float:
        return time.monotonic()


@pytest.mark.parametrize(
    ("overrides", "status", "code", "message"),
    [
        ({"aud": "elsewhere.example"}, 401, "invalid_audience", "invalid audience"),
        ({"nbf_ahead": 60}, 401, "token_not_yet_valid", "token not yet valid"),
    ],
    ids=["audience", "not-yet-valid"],
)
async def test_ws_jwt_table_rows_on_handshake(
    server: Server,
    customer: Customer,
    overrides: dict[str, Any],
    status: int,
    code: str,
    message: str,
) -> None:
    from parley.jwt import mint_token

    claims: dict[str, Any] = {"aud": "parley.test", **overrides}
    if "nbf_ahead" in claims:  # computed now, not when the test was collected
        claims["extra_claims"] = {"nbf": int(time.time()) + claims.pop("nbf_ahead")}
    token = mint_token(
        customer.private_key,
        kid=customer.kid,
        iss=customer.iss,
        sub="u",
        conversation_id="row",
        **claims,
    )
    body = await expect_refusal(f"{server.ws}/v1/sts/ws?jwt={token}", status, code)
    assert body["error"]["message"] == message


async def test_ws_jwt_signed_by_unregistered_key_401(server: Server, customer: Customer) -> None:
    from parley.jwt import generate_key_pair, mint_token

    stranger = generate_key_pair("EdDSA", kid=customer.kid)
    token = mint_token(
        stranger.private_key_pem,
        kid=customer.kid,
        iss=customer.iss,
        aud="parley.test",
        sub="u",
        conversation_id="forged",
    )
    body = await expect_refusal(f"{server.ws}/v1/sts/ws?jwt={token}", 401, "invalid_signature")
    assert body["error"]["message"] == "invalid signature"


async def test_ws_jwt_rate_limited_429_with_retry_after(server: Server, customer: Customer) -> None:
    # The default bucket of (iss, sub, conversation_id) holds a burst of 20 and refills one
    # token a second in real time, so a slow handshake may earn one more: go on until refused.
    opened = 0
    refusal: InvalidStatus | None = None
    while refusal is None and opened < 40:
        try:
            async with connect(f"{server.ws}/v1/sts/ws?jwt={customer.jwt('busy')}"):
                opened += 1
        except InvalidStatus as error:
            refusal = error
    assert refusal is not None, f"{opened} handshakes were never rate limited"
    assert opened >= 20  # the whole burst was allowed first
    status_code, body = refused(refusal)
    assert (status_code, body["error"]["code"]) == (429, "rate_limited")
    assert int(refusal.response.headers["Retry-After"]) >= 1
