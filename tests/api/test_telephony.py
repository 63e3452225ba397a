"""Phone calls up to the media socket (API.md section 13), on SQLite and PostgreSQL: the
carrier account, the signed voice webhook through a simulated carrier, and stream tokens."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from tests.api.helpers import assert_error
from tests.carrier import SimulatedCarrier, Twiml, new_call_sid, parse_twiml
from tests.types import MakeAgent, MakeTenant, Tenant

from parley.app import create_app
from parley.clock import SystemClock
from parley.config import Settings
from parley.db.engine import create_engine
from parley.errors import InvalidStreamToken
from parley.outbound.twiml import connect_stream
from parley.services import Context, telephony
from parley.services.twilio_signature import sign

pytestmark = pytest.mark.anyio

PUBLIC_URL = "https://calls.example.com"
"""The public URL of a Parley behind a TLS proxy: requests reach it as http://testserver."""
VOICE_URL = f"{PUBLIC_URL}/v1/telephony/twilio/voice"
MEDIA_URL = "wss://calls.example.com/v1/telephony/twilio/media"
NUMBER = "+14155550100"


class ShiftedClock(SystemClock):
    """The real clock, moved forward by `offset` seconds when a test needs time to pass."""

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        return super().time() + self.offset


@pytest.fixture
def clock() -> ShiftedClock:
    return ShiftedClock()


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    # A long lease keeps the housekeeping timer (which also ends expired calls) from
    # running during a test after its first tick, so the tests call it themselves.
    built: Settings = settings_factory(public_url=PUBLIC_URL, conversation_lease_seconds=3600)
    return built


@pytest.fixture
async def app(settings: Settings, clock: ShiftedClock) -> AsyncIterator[FastAPI]:
    application = create_app(settings, clock=clock)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def carrier(client: httpx.AsyncClient, tenant: Tenant) -> SimulatedCarrier:
    """A carrier account set by `tenant`, calling through `client` (no bearer credential)."""
    simulated = SimulatedCarrier(http=client, voice_url=VOICE_URL)
    await _put_account(tenant, simulated)
    return simulated


@pytest.fixture
async def agent(tenant: Tenant, make_agent: MakeAgent) -> dict[str, Any]:
    return await make_agent(tenant, phone_numbers=[NUMBER])


async def _put_account(tenant: Tenant, carrier: SimulatedCarrier) -> httpx.Response:
    body = {"account_sid": carrier.account_sid, "auth_token": carrier.auth_token}
    response = await tenant.client.put("/v1/telephony/twilio", json=body)
    assert response.status_code == 200, response.text
    return response


async def _conversations(tenant: Tenant) -> list[dict[str, Any]]:
    response = await tenant.client.get("/v1/conversations")
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["conversations"]
    return found


# --- the carrier account ---------------------------------------------------------------


async def test_put_twilio_account_answers_without_the_token(
    tenant: Tenant, carrier: SimulatedCarrier
) -> None:
    response = await _put_account(tenant, carrier)
    body = response.json()
    assert set(body) == {"account_sid", "auth_token_last4", "voice_url", "updated_at"}
    assert body["account_sid"] == carrier.account_sid
    assert body["auth_token_last4"] == carrier.auth_token[-4:]
    assert body["voice_url"] == VOICE_URL
    assert carrier.auth_token not in response.text
    shown = await tenant.client.get("/v1/telephony/twilio")
    assert shown.status_code == 200
    assert shown.json() == body
    assert carrier.auth_token not in shown.text


async def test_get_twilio_account_not_configured_404(tenant: Tenant) -> None:
    response = await tenant.client.get("/v1/telephony/twilio")
    assert_error(response, 404, "telephony_not_configured")


async def test_delete_twilio_account_then_not_configured(
    tenant: Tenant, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    response = await tenant.client.delete("/v1/telephony/twilio")
    assert response.status_code == 200
    assert response.json() == {"success": True}
    assert_error(await tenant.client.get("/v1/telephony/twilio"), 404, "telephony_not_configured")
    assert_error(
        await tenant.client.delete("/v1/telephony/twilio"), 404, "telephony_not_configured"
    )
    # The account is gone: its calls are refused as unknown.
    params = carrier.call_params(to=NUMBER)
    refused = await carrier.post(params, signature=carrier.signature(params))
    assert_error(refused, 403, "invalid_signature")


async def test_put_twilio_account_replaces_the_token(
    tenant: Tenant, carrier: SimulatedCarrier
) -> None:
    carrier.auth_token = secrets.token_hex(16)
    body = (await _put_account(tenant, carrier)).json()
    assert body["auth_token_last4"] == carrier.auth_token[-4:]


async def test_put_twilio_account_of_another_organization_409(
    carrier: SimulatedCarrier, other_tenant: Tenant
) -> None:
    body = {"account_sid": carrier.account_sid, "auth_token": secrets.token_hex(16)}
    response = await other_tenant.client.put("/v1/telephony/twilio", json=body)
    assert_error(response, 409, "account_taken")
    assert_error(
        await other_tenant.client.get("/v1/telephony/twilio"), 404, "telephony_not_configured"
    )


async def test_put_twilio_account_stores_the_token_sealed(
    tenant: Tenant, carrier: SimulatedCarrier, database_url: str, ctx: Context
) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            sealed = (
                await connection.execute(
                    text("SELECT auth_token_sealed FROM twilio_accounts WHERE org_id = :org"),
                    {"org": tenant.org.id},
                )
            ).scalar_one()
    finally:
        await engine.dispose()
    assert carrier.auth_token not in sealed
    assert ctx.secrets.unseal(sealed) == carrier.auth_token


async def test_twilio_account_changes_are_audited_without_the_token(
    tenant: Tenant, carrier: SimulatedCarrier
) -> None:
    await tenant.client.delete("/v1/telephony/twilio")
    response = await tenant.client.get("/v1/audit_events", params={"target": carrier.account_sid})
    events = response.json()["audit_events"]
    assert [event["action"] for event in events] == ["telephony.delete", "telephony.update"]
    assert carrier.auth_token not in response.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"account_sid": "AC" + "0" * 31, "auth_token": "a" * 32}, "account_sid"),
        ({"account_sid": "SK" + "0" * 32, "auth_token": "a" * 32}, "account_sid"),
        ({"account_sid": "AC" + "g" * 32, "auth_token": "a" * 32}, "account_sid"),
        ({"account_sid": "AC" + "0" * 32, "auth_token": "a" * 31}, "auth_token"),
        ({"account_sid": "AC" + "0" * 32, "auth_token": "a" * 33}, "auth_token"),
        ({"account_sid": "AC" + "0" * 32, "auth_token": "z" * 32}, "auth_token"),
        ({"account_sid": "AC" + "0" * 32, "auth_token": 12345}, "auth_token"),
        ({"account_sid": "AC" + "0" * 32}, "auth_token"),
        ({"auth_token": "a" * 32}, "account_sid"),
        ({"account_sid": "AC" + "0" * 32, "auth_token": "a" * 32, "x": 1}, "x"),
    ],
    ids=[
        "sid-short",
        "sid-prefix",
        "sid-not-hex",
        "token-short",
        "token-long",
        "token-not-hex",
        "token-not-string",
        "token-missing",
        "sid-missing",
        "unknown-field",
    ],
)
async def test_put_twilio_account_invalid_field_400(
    tenant: Tenant, body: dict[str, Any], field: str
) -> None:
    response = await tenant.client.put("/v1/telephony/twilio", json=body)
    found = assert_error(response, 400, "validation_error")
    assert set(found["param_errors"]) == {field}
    assert "z" * 32 not in response.text


async def test_twilio_account_without_api_key_401(client: httpx.AsyncClient) -> None:
    body = {"account_sid": "AC" + "0" * 32, "auth_token": "a" * 32}
    assert_error(await client.put("/v1/telephony/twilio", json=body), 401, "unauthorized")
    assert_error(await client.get("/v1/telephony/twilio"), 401, "unauthorized")


# --- the signature -----------------------------------------------------------------------


def test_twilio_signature_matches_twilios_published_example() -> None:
    params = [
        ("CallSid", "CA1234567890ABCDE"),
        ("Caller", "+12349013030"),
        ("Digits", "1234"),
        ("From", "+12349013030"),
        ("To", "+18005551212"),
    ]
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    assert sign("12345", url, params) == "0/KCTR6DLpKmkAf8muzZqo1nDgQ="
    assert sign("12345", url, list(reversed(params))) == "0/KCTR6DLpKmkAf8muzZqo1nDgQ="


# --- the voice webhook -------------------------------------------------------------------


async def test_voice_webhook_signed_call_connects_a_pending_conversation(
    tenant: Tenant, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    call_sid = new_call_sid()
    answer = await carrier.call(to=NUMBER, from_="+15105550199", call_sid=call_sid)
    assert answer.stream_url == MEDIA_URL
    assert set(answer.parameters) == {"conversation_id", "stream_token"}
    conversation_id = answer.parameters["conversation_id"]
    assert conversation_id.startswith("conv_")
    assert len(answer.parameters["stream_token"]) >= 32
    response = await tenant.client.get(f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    conversation = response.json()["conversation"]
    assert conversation["status"] == "pending"
    assert conversation["agent"] == {"id": agent["id"], "name": agent["name"], "is_deleted": False}
    assert conversation["call_info"] == {
        "from_phone_number": "+15105550199",
        "to_phone_number": NUMBER,
        "twilio_call_sid": call_sid,
        "direction": "inbound",
    }
    listed = await _conversations(tenant)
    assert [c["call_info"]["twilio_call_sid"] for c in listed] == [call_sid]


async def test_voice_webhook_answer_is_twiml_connect_stream(
    carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    params = carrier.call_params(to=NUMBER)
    response = await carrier.post(params, signature=carrier.signature(params))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/xml")
    body = response.text
    assert "<Response><Connect><Stream url=" in body
    assert "</Stream></Connect></Response>" in body


async def test_conversation_without_a_call_has_null_call_info(
    tenant: Tenant, agent: dict[str, Any]
) -> None:
    created = await tenant.client.post("/v1/conversations", json={"agent": agent["id"]})
    assert created.status_code == 201, created.text
    assert created.json()["conversation"]["call_info"] is None


@pytest.mark.parametrize("signature", ["wrong", None, ""], ids=["wrong", "missing", "empty"])
async def test_voice_webhook_bad_signature_403_and_no_conversation(
    tenant: Tenant, carrier: SimulatedCarrier, agent: dict[str, Any], signature: str | None
) -> None:
    params = carrier.call_params(to=NUMBER)
    if signature == "wrong":
        signature = sign(secrets.token_hex(16), VOICE_URL, params)
    response = await carrier.post(params, signature=signature)
    assert_error(response, 403, "invalid_signature")
    assert await _conversations(tenant) == []


async def test_voice_webhook_tampered_field_403(
    tenant: Tenant, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    params = carrier.call_params(to="+14155550199")
    signature = carrier.signature(params)
    tampered = [(name, NUMBER if name == "To" else value) for name, value in params]
    assert_error(await carrier.post(tampered, signature=signature), 403, "invalid_signature")
    assert await _conversations(tenant) == []


async def test_voice_webhook_unknown_account_sid_403_and_no_conversation(
    tenant: Tenant, client: httpx.AsyncClient, agent: dict[str, Any]
) -> None:
    unknown = SimulatedCarrier(http=client, voice_url=VOICE_URL)  # never PUT
    params = unknown.call_params(to=NUMBER)
    response = await unknown.post(params, signature=unknown.signature(params))
    assert_error(response, 403, "invalid_signature")
    assert await _conversations(tenant) == []


async def test_voice_webhook_signed_over_the_host_header_403_behind_a_proxy(
    tenant: Tenant, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    """The signature covers PARLEY_PUBLIC_URL, not the URL the proxy's request names."""
    params = carrier.call_params(to=NUMBER)
    as_seen = "http://testserver/v1/telephony/twilio/voice"
    response = await carrier.post(params, signature=carrier.signature(params, url=as_seen))
    assert_error(response, 403, "invalid_signature")
    answer = await carrier.call(to=NUMBER)  # signed over the public URL: accepted
    assert answer.stream_url == MEDIA_URL


async def test_voice_webhook_signature_with_default_port_accepted(
    carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    params = carrier.call_params(to=NUMBER)
    with_port = "https://calls.example.com:443/v1/telephony/twilio/voice"
    response = await carrier.post(params, signature=carrier.signature(params, url=with_port))
    assert response.status_code == 200, response.text
    assert not parse_twiml(response.text).rejected


async def test_voice_webhook_query_string_is_signed(
    tenant: Tenant, client: httpx.AsyncClient, agent: dict[str, Any]
) -> None:
    with_query = SimulatedCarrier(http=client, voice_url=f"{VOICE_URL}?line=support&x=1%202")
    await _put_account(tenant, with_query)
    answer = await with_query.call(to=NUMBER)
    assert not answer.rejected
    params = with_query.call_params(to=NUMBER)
    without_query = with_query.signature(params, url=VOICE_URL)
    assert_error(await with_query.post(params, signature=without_query), 403, "invalid_signature")


async def _reject_case(
    case: str, tenant: Tenant, other: Tenant, make_agent: MakeAgent, agent: dict[str, Any]
) -> None:
    if case == "released":
        released = await tenant.client.post(f"/v1/agents/{agent['id']}/phone_numbers/release")
        assert released.status_code == 200, released.text
    elif case == "disabled":
        disabled = await tenant.client.post(f"/v1/agents/{agent['id']}/disable")
        assert disabled.status_code == 200, disabled.text
    elif case == "deleted":
        deleted = await tenant.client.delete(f"/v1/agents/{agent['id']}")
        assert deleted.status_code == 200, deleted.text
    elif case == "other-organization":
        await tenant.client.delete(f"/v1/agents/{agent['id']}")
        await make_agent(other, phone_numbers=[NUMBER])


@pytest.mark.parametrize(
    "case", ["unknown", "released", "disabled", "deleted", "other-organization"]
)
async def test_voice_webhook_number_of_no_enabled_agent_rejects_busy(
    tenant: Tenant,
    make_tenant: MakeTenant,
    carrier: SimulatedCarrier,
    make_agent: MakeAgent,
    agent: dict[str, Any],
    case: str,
) -> None:
    other = await make_tenant()
    await _reject_case(case, tenant, other, make_agent, agent)
    to = "+14155550111" if case == "unknown" else NUMBER
    params = carrier.call_params(to=to)
    response = await carrier.post(params, signature=carrier.signature(params))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/xml")
    assert '<Response><Reject reason="busy"/></Response>' in response.text
    assert parse_twiml(response.text) == Twiml(reject_reason="busy")
    assert await _conversations(tenant) == []
    assert await _conversations(other) == []


async def test_voice_webhook_enabled_again_agent_answers(
    tenant: Tenant, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    await tenant.client.post(f"/v1/agents/{agent['id']}/disable")
    assert (await carrier.call(to=NUMBER)).rejected
    await tenant.client.post(f"/v1/agents/{agent['id']}/enable")
    assert not (await carrier.call(to=NUMBER)).rejected


async def test_voice_webhook_http_public_url_streams_over_ws(
    settings_factory: Any, make_agent: MakeAgent
) -> None:
    from tests.factories import make_org

    settings = settings_factory(public_url="http://parley.test:8080")
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        created = await make_org(application.state.context)
        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            tenant = Tenant(
                org=created.org,
                api_key=created.api_key.secret,
                client=http,
            )
            http.headers["Authorization"] = f"Bearer {created.api_key.secret}"
            await make_agent(tenant, phone_numbers=[NUMBER])
            carrier = SimulatedCarrier(
                http=http, voice_url="http://parley.test:8080/v1/telephony/twilio/voice"
            )
            await _put_account(tenant, carrier)
            body = (await http.get("/v1/telephony/twilio")).json()
            assert body["voice_url"] == "http://parley.test:8080/v1/telephony/twilio/voice"
            del http.headers["Authorization"]
            answer = await carrier.call(to=NUMBER)
    assert answer.stream_url == "ws://parley.test:8080/v1/telephony/twilio/media"


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/x-www-form-urlencoded", b"AccountSid"),
        ("application/x-www-form-urlencoded", b"To=%ff"),
        ("application/x-www-form-urlencoded", b"a=1&&b=2"),
        ("application/x-www-form-urlencoded", "To=é".encode()),
        ("application/json", b'{"To": "+14155550100"}'),
        ("application/x-www-form-urlencoded", b"&".join([b"a=1"] * 101)),
    ],
    ids=["no-value", "not-utf8", "empty-field", "raw-non-ascii", "json", "too-many-fields"],
)
async def test_voice_webhook_malformed_body_400(
    client: httpx.AsyncClient, content_type: str, body: bytes
) -> None:
    response = await client.post(
        "/v1/telephony/twilio/voice", content=body, headers={"Content-Type": content_type}
    )
    assert_error(response, 400, "invalid_request")


async def test_voice_webhook_oversized_body_413(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/telephony/twilio/voice",
        content=b"a=" + b"b" * 70_000,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert_error(response, 413, "payload_too_large")


@pytest.mark.parametrize(
    ("drop", "value", "field"),
    [("To", None, "To"), ("CallSid", None, "CallSid"), ("To", "+1 415\x00", "To")],
    ids=["no-to", "no-call-sid", "bad-to"],
)
async def test_voice_webhook_signed_call_without_fields_400(
    tenant: Tenant,
    carrier: SimulatedCarrier,
    agent: dict[str, Any],
    drop: str,
    value: str | None,
    field: str,
) -> None:
    params = [
        (name, given if name != drop or value is None else value)
        for name, given in carrier.call_params(to=NUMBER)
        if name != drop or value is not None
    ]
    response = await carrier.post(params, signature=carrier.signature(params))
    found = assert_error(response, 400, "validation_error")
    assert set(found["param_errors"]) == {field}
    assert await _conversations(tenant) == []


def test_twiml_connect_stream_escapes_every_value() -> None:
    document = connect_stream('wss://h/"<&>', [("a\"'<", 'v&<>"')])
    parsed = parse_twiml(document)
    assert parsed.stream_url == 'wss://h/"<&>'
    assert parsed.parameters == {"a\"'<": 'v&<>"'}


# --- stream tokens -----------------------------------------------------------------------


async def _answered(carrier: SimulatedCarrier) -> tuple[str, str]:
    answer = await carrier.call(to=NUMBER)
    return answer.parameters["conversation_id"], answer.parameters["stream_token"]


async def test_redeem_stream_token_works_once(
    ctx: Context, tenant: Tenant, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    conversation_id, token = await _answered(carrier)
    org_id, conversation = await telephony.redeem_stream_token(
        ctx, conversation_id=conversation_id, token=token
    )
    assert org_id == tenant.org.id
    assert conversation.id == conversation_id
    assert conversation.status == "pending"
    assert conversation.call_info is not None
    assert conversation.call_info.to_phone_number == NUMBER
    with pytest.raises(InvalidStreamToken):
        await telephony.redeem_stream_token(ctx, conversation_id=conversation_id, token=token)


async def test_redeem_stream_token_concurrently_only_one_wins(
    ctx: Context, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    conversation_id, token = await _answered(carrier)
    results = await asyncio.gather(
        *(
            telephony.redeem_stream_token(ctx, conversation_id=conversation_id, token=token)
            for _ in range(6)
        ),
        return_exceptions=True,
    )
    assert sum(isinstance(result, tuple) for result in results) == 1
    assert sum(isinstance(result, InvalidStreamToken) for result in results) == 5


@pytest.mark.parametrize(
    "wrong",
    ["guess", "", "x" * 500, "the-right-one-plus"],
    ids=["guess", "empty", "oversized", "longer"],
)
async def test_redeem_stream_token_wrong_token_keeps_the_right_one(
    ctx: Context, tenant: Tenant, carrier: SimulatedCarrier, agent: dict[str, Any], wrong: str
) -> None:
    conversation_id, token = await _answered(carrier)
    attempt = token + "x" if wrong == "the-right-one-plus" else wrong
    with pytest.raises(InvalidStreamToken):
        await telephony.redeem_stream_token(ctx, conversation_id=conversation_id, token=attempt)
    org_id, redeemed = await telephony.redeem_stream_token(
        ctx, conversation_id=conversation_id, token=token
    )
    assert (org_id, redeemed.id) == (tenant.org.id, conversation_id)


async def test_redeem_stream_token_of_another_conversation_refused(
    ctx: Context, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    first_id, first_token = await _answered(carrier)
    second_id, second_token = await _answered(carrier)
    with pytest.raises(InvalidStreamToken):
        await telephony.redeem_stream_token(ctx, conversation_id=second_id, token=first_token)
    with pytest.raises(InvalidStreamToken):
        await telephony.redeem_stream_token(ctx, conversation_id="conv_nope", token=first_token)
    # Neither refusal used a token up.
    await telephony.redeem_stream_token(ctx, conversation_id=first_id, token=first_token)
    await telephony.redeem_stream_token(ctx, conversation_id=second_id, token=second_token)


async def test_redeem_stream_token_expired_refused(
    ctx: Context, clock: ShiftedClock, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    conversation_id, token = await _answered(carrier)
    clock.offset = telephony.STREAM_TOKEN_TTL_SECONDS + 1
    with pytest.raises(InvalidStreamToken):
        await telephony.redeem_stream_token(ctx, conversation_id=conversation_id, token=token)


async def test_redeem_stream_token_just_before_expiry_accepted(
    ctx: Context, clock: ShiftedClock, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    conversation_id, token = await _answered(carrier)
    clock.offset = telephony.STREAM_TOKEN_TTL_SECONDS - 5
    await telephony.redeem_stream_token(ctx, conversation_id=conversation_id, token=token)


async def test_end_expired_calls_ends_only_unanswered_calls(
    ctx: Context,
    clock: ShiftedClock,
    tenant: Tenant,
    carrier: SimulatedCarrier,
    agent: dict[str, Any],
) -> None:
    redeemed_id, redeemed_token = await _answered(carrier)
    unanswered_id, _ = await _answered(carrier)
    fresh = await tenant.client.post("/v1/conversations", json={"agent": agent["id"]})
    await telephony.redeem_stream_token(ctx, conversation_id=redeemed_id, token=redeemed_token)
    assert await telephony.end_expired_calls(ctx) == 0  # nothing has expired yet
    clock.offset = telephony.STREAM_TOKEN_TTL_SECONDS + 1
    assert await telephony.end_expired_calls(ctx) == 1
    assert await telephony.end_expired_calls(ctx) == 0
    statuses = {c["id"]: c["status"] for c in await _conversations(tenant)}
    assert statuses == {
        redeemed_id: "pending",
        unanswered_id: "ended",
        fresh.json()["conversation"]["id"]: "pending",
    }
    ended = (await tenant.client.get(f"/v1/conversations/{unanswered_id}")).json()
    assert ended["conversation"]["ended_at"] is not None


async def test_redeem_stream_token_of_ended_call_refused(
    ctx: Context, tenant: Tenant, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    conversation_id, token = await _answered(carrier)
    ended = await tenant.client.post(f"/v1/conversations/{conversation_id}/end")
    assert ended.status_code == 200, ended.text
    with pytest.raises(InvalidStreamToken):
        await telephony.redeem_stream_token(ctx, conversation_id=conversation_id, token=token)


# --- one answer per CallSid (the replay guard) ------------------------------------------


def _answer(response: httpx.Response) -> Twiml:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/xml"), response.headers
    return parse_twiml(response.text)


async def _stored_call_tokens(database_url: str, org_id: str) -> list[str | None]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                text("SELECT token_sealed FROM stream_tokens WHERE org_id = :org"),
                {"org": org_id},
            )
            return [row[0] for row in rows]
    finally:
        await engine.dispose()


async def test_voice_webhook_replayed_byte_for_byte_gets_the_same_conversation_and_token(
    tenant: Tenant, client: httpx.AsyncClient, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    captured = carrier.capture(to=NUMBER)
    first = _answer(await captured.replay(client))
    assert not first.rejected
    again = [_answer(await captured.replay(client)) for _ in range(3)]
    assert again == [first] * 3
    assert [c["id"] for c in await _conversations(tenant)] == [first.parameters["conversation_id"]]


async def test_voice_webhook_20_concurrent_replays_make_exactly_one_conversation(
    tenant: Tenant, client: httpx.AsyncClient, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    captured = carrier.capture(to=NUMBER)
    answers = [
        _answer(response)
        for response in await asyncio.gather(*(captured.replay(client) for _ in range(20)))
    ]
    assert not answers[0].rejected
    assert answers == [answers[0]] * 20
    listed = await _conversations(tenant)
    assert [c["id"] for c in listed] == [answers[0].parameters["conversation_id"]]


async def test_voice_webhook_replayed_after_stream_started_rejected_and_token_single_use(
    ctx: Context,
    tenant: Tenant,
    client: httpx.AsyncClient,
    carrier: SimulatedCarrier,
    agent: dict[str, Any],
) -> None:
    captured = carrier.capture(to=NUMBER)
    first = _answer(await captured.replay(client))
    conversation_id, token = first.parameters["conversation_id"], first.parameters["stream_token"]
    await telephony.redeem_stream_token(ctx, conversation_id=conversation_id, token=token)
    for _ in range(2):
        assert _answer(await captured.replay(client)) == Twiml(reject_reason="busy")
    with pytest.raises(InvalidStreamToken):  # the repeats gave nothing that starts a stream
        await telephony.redeem_stream_token(ctx, conversation_id=conversation_id, token=token)
    assert [c["id"] for c in await _conversations(tenant)] == [conversation_id]


async def test_voice_webhook_repeat_token_is_the_same_single_use_token(
    ctx: Context, client: httpx.AsyncClient, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    captured = carrier.capture(to=NUMBER)
    first = _answer(await captured.replay(client))
    repeat = _answer(await captured.replay(client))
    conversation_id = repeat.parameters["conversation_id"]
    await telephony.redeem_stream_token(
        ctx, conversation_id=conversation_id, token=repeat.parameters["stream_token"]
    )
    with pytest.raises(InvalidStreamToken):
        await telephony.redeem_stream_token(
            ctx, conversation_id=conversation_id, token=first.parameters["stream_token"]
        )


async def test_voice_webhook_replayed_after_token_expired_rejected(
    ctx: Context,
    clock: ShiftedClock,
    tenant: Tenant,
    client: httpx.AsyncClient,
    carrier: SimulatedCarrier,
    agent: dict[str, Any],
) -> None:
    captured = carrier.capture(to=NUMBER)
    first = _answer(await captured.replay(client))
    clock.offset = telephony.STREAM_TOKEN_TTL_SECONDS + 1
    assert _answer(await captured.replay(client)).rejected  # expired, not yet ended
    assert await telephony.end_expired_calls(ctx) == 1
    assert _answer(await captured.replay(client)).rejected
    listed = await _conversations(tenant)
    assert [(c["id"], c["status"]) for c in listed] == [
        (first.parameters["conversation_id"], "ended")
    ]


async def test_voice_webhook_replayed_after_conversation_ended_rejected(
    tenant: Tenant, client: httpx.AsyncClient, carrier: SimulatedCarrier, agent: dict[str, Any]
) -> None:
    captured = carrier.capture(to=NUMBER)
    conversation_id = _answer(await captured.replay(client)).parameters["conversation_id"]
    ended = await tenant.client.post(f"/v1/conversations/{conversation_id}/end")
    assert ended.status_code == 200, ended.text
    assert _answer(await captured.replay(client)).rejected
    assert len(await _conversations(tenant)) == 1


async def test_voice_webhook_replay_of_a_rejected_call_stays_rejected(
    tenant: Tenant,
    client: httpx.AsyncClient,
    carrier: SimulatedCarrier,
    make_agent: MakeAgent,
) -> None:
    captured = carrier.capture(to=NUMBER)  # no agent has the number yet
    assert _answer(await captured.replay(client)).rejected
    await make_agent(tenant, phone_numbers=[NUMBER])
    assert _answer(await captured.replay(client)).rejected
    assert await _conversations(tenant) == []
    assert not (await carrier.call(to=NUMBER)).rejected  # a new call is answered


async def test_voice_webhook_same_call_sid_of_another_account_is_another_call(
    tenant: Tenant,
    make_tenant: MakeTenant,
    client: httpx.AsyncClient,
    carrier: SimulatedCarrier,
    make_agent: MakeAgent,
    agent: dict[str, Any],
) -> None:
    other = await make_tenant()
    other_carrier = SimulatedCarrier(http=client, voice_url=VOICE_URL)
    await _put_account(other, other_carrier)
    await make_agent(other, phone_numbers=["+14155550177"])
    call_sid = new_call_sid()
    mine = await carrier.call(to=NUMBER, call_sid=call_sid)
    theirs = await other_carrier.call(to="+14155550177", call_sid=call_sid)
    assert not mine.rejected
    assert not theirs.rejected
    assert mine.parameters["conversation_id"] != theirs.parameters["conversation_id"]


async def test_stream_token_kept_sealed_until_used_then_erased(
    ctx: Context,
    database_url: str,
    tenant: Tenant,
    carrier: SimulatedCarrier,
    agent: dict[str, Any],
) -> None:
    conversation_id, token = await _answered(carrier)
    (sealed,) = await _stored_call_tokens(database_url, tenant.org.id)
    assert sealed is not None
    assert token not in sealed
    assert ctx.secrets.unseal(sealed) == token
    await telephony.redeem_stream_token(ctx, conversation_id=conversation_id, token=token)
    assert await _stored_call_tokens(database_url, tenant.org.id) == [None]
