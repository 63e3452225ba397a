"""The carrier's transfer callbacks (API.md section 15) through the API: each is signed as the
voice webhook is (else 403 `invalid_signature`), and a callback of nothing under way (an
ended conversation, an unknown one, a repeat) answers `<Hangup/>` or nothing and changes
nothing; the briefing's audio URL works once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from tests.carrier import SimulatedCarrier, form_encode, new_call_sid
from tests.types import MakeAgent, Tenant

from parley.config import Settings
from parley.services import Context, conversations, endings

pytestmark = pytest.mark.anyio

PUBLIC = "https://parley.test"
HANG_UP = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>'


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    built: Settings = settings_factory(public_url=PUBLIC)
    return built


async def carrier_of(tenant: Tenant) -> SimulatedCarrier:
    carrier = SimulatedCarrier(http=tenant.client, voice_url=f"{PUBLIC}/v1/telephony/twilio/voice")
    body = {"account_sid": carrier.account_sid, "auth_token": carrier.auth_token}
    assert (await tenant.client.put("/v1/telephony/twilio", json=body)).status_code == 200
    return carrier


async def post(
    client: httpx.AsyncClient,
    carrier: SimulatedCarrier,
    target: str,
    params: Sequence[tuple[str, str]],
    *,
    signed: bool = True,
) -> httpx.Response:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if signed:
        headers["X-Twilio-Signature"] = carrier.signature(params, url=PUBLIC + target)
    return await client.post(target, content=form_encode(params), headers=headers)


def fields(carrier: SimulatedCarrier, *extra: tuple[str, str]) -> list[tuple[str, str]]:
    return [("AccountSid", carrier.account_sid), ("CallSid", new_call_sid()),
            ("From", "+15005550006"), ("To", "+14155550100"), *extra]  # fmt: skip


@pytest.mark.parametrize(
    "path",
    [
        "/v1/telephony/twilio/transfer?conversation_id=conv_x",
        "/v1/telephony/twilio/dial?conversation_id=conv_x&attempt=1",
        "/v1/telephony/twilio/briefing?conversation_id=conv_x&token=t",
    ],
    ids=["transfer", "dial", "briefing"],
)
async def test_transfer_callbacks_unsigned_or_forged_403(tenant: Tenant, path: str) -> None:
    carrier = await carrier_of(tenant)
    params = fields(carrier, ("DialCallStatus", "completed"))
    unsigned = await post(tenant.client, carrier, path, params, signed=False)
    assert unsigned.status_code == 403, unsigned.text
    assert unsigned.json()["error"]["code"] == "invalid_signature"
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Twilio-Signature": carrier.signature(params, url=PUBLIC + path + "x"),  # another URL
    }
    forged = await tenant.client.post(path, content=form_encode(params), headers=headers)
    assert forged.status_code == 403, forged.text


async def test_dial_action_of_nothing_under_way_hangs_up_and_changes_nothing(
    tenant: Tenant, make_agent: MakeAgent, ctx: Context
) -> None:
    carrier = await carrier_of(tenant)
    agent = await make_agent(tenant)
    made = await conversations.create_conversation(
        ctx, org_id=tenant.org.id, agent=agent["id"], project=None, conversation_id="ended-1"
    )
    await endings.end_conversation(
        ctx, org_id=tenant.org.id, conversation_id=made.id, ending=endings.API
    )
    for conversation_id in ("ended-1", "conv_unknown"):
        target = f"/v1/telephony/twilio/dial?conversation_id={conversation_id}&attempt=1"
        for status in ("completed", "no-answer"):
            answer = await post(
                tenant.client, carrier, target, fields(carrier, ("DialCallStatus", status))
            )
            assert answer.status_code == 200, answer.text
            assert answer.text == HANG_UP
    found = await conversations.get_conversation(
        ctx, org_id=tenant.org.id, conversation_id="ended-1"
    )
    assert found.ended_by == "api"  # a late "answered" did not make it `transferred`
    answered = await post(
        tenant.client, carrier, "/v1/telephony/twilio/transfer?conversation_id=ended-1",
        fields(carrier, ("CallStatus", "in-progress")),
    )  # fmt: skip
    assert answered.status_code == 204
    found = await conversations.get_conversation(
        ctx, org_id=tenant.org.id, conversation_id="ended-1"
    )
    assert found.ended_by == "api"


@pytest.mark.parametrize("attempt", ["", "x", "999"])
async def test_dial_action_bad_attempt_400(tenant: Tenant, attempt: str) -> None:
    carrier = await carrier_of(tenant)
    target = f"/v1/telephony/twilio/dial?conversation_id=conv_x&attempt={attempt}"
    answer = await post(tenant.client, carrier, target, fields(carrier))
    assert answer.status_code == 400, answer.text


@pytest.mark.parametrize("token", ["A" * 32, "short", "../../etc"])
async def test_briefing_audio_of_an_unknown_token_404(tenant: Tenant, token: str) -> None:
    answer = await tenant.client.get(f"/v1/telephony/twilio/briefings/{token}.wav")
    assert answer.status_code == 404, answer.text
