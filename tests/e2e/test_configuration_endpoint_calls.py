"""An agent's configuration endpoint on a phone call (API.md sections 13, 15 and 17): the
simulated carrier (tests/carrier.py) calls the agent's number over real uvicorn, or Parley
places a call through the simulated carrier's REST API (tests/carrier_api.py); when the
stream starts, the endpoint (a real receiver, its signature checked with the
`standardwebhooks` library) is called with the call's numbers. Answered well, the caller
hears the overridden welcome; answered 500, the caller hears nothing and the stream is
closed, so the carrier ends the call."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from standardwebhooks import Webhook

from tests.carrier import SimulatedCarrier
from tests.carrier_calls import Person
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_outbound_calls import Office, carrier, office, office_app, office_settings
from tests.e2e.test_phone_calls import VOICE_URL, Line, new_number
from tests.webhook_receiver import Reply, WebhookReceiver, running_receiver

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

__all__ = ["carrier", "office", "office_app", "office_settings"]  # a placed call's fixtures

CALLER = "+15005550006"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with running_receiver() as server:
        yield server


@pytest.fixture
def app_settings() -> dict[str, Any]:
    return {"outbound_allow_http": True, "outbound_allow_private_networks": True}


async def configured_line(
    customer: Customer, server: Server, receiver: WebhookReceiver
) -> tuple[Line, str]:
    """A line whose agent has a configuration endpoint on the receiver, and its secret."""
    carrier = SimulatedCarrier(http=customer.api, voice_url=VOICE_URL)
    body = {"account_sid": carrier.account_sid, "auth_token": carrier.auth_token}
    assert (await customer.api.put("/v1/telephony/twilio", json=body)).status_code == 200
    number, name = new_number(), f"cfgphone{secrets.token_hex(4)}"
    made = await customer.api.post(
        "/v1/agents",
        json={
            "name": name,
            "welcome_message": "Hello, this is the day desk.",
            "system_prompt": "You are the front desk of a small hotel.",
            "phone_numbers": [number],
            "configuration_endpoint": {"url": receiver.url("/config"), "timeout_ms": 2000},
        },
    )
    assert made.status_code == 201, made.text
    secret: str = made.json()["configuration_endpoint_secret"]
    return Line(customer, carrier, server, name, number), secret


async def test_configuration_endpoint_inbound_call_hears_overridden_welcome(
    customer: Customer, server: Server, receiver: WebhookReceiver
) -> None:
    receiver.script(Reply.json({"welcome_message": "Good evening, this is the night desk."}))
    line, secret = await configured_line(customer, server, receiver)
    twiml = await line.call()
    conversation_id = twiml.parameters["conversation_id"]
    stream = await line.stream(twiml)
    try:
        await line.until_status(conversation_id, "live", within=10)
        await stream.wait_played(1.0, within=20)
        found = await line.until_items(conversation_id, 1, within=20)
    finally:
        await stream.close()
    assert found[0] == ("assistant", "Good evening, this is the night desk.")
    (call,) = receiver.requests
    sent = Webhook(secret).verify(call.body, call.headers)
    assert sent["conversation_id"] == conversation_id
    assert (sent["from_phone_number"], sent["to_phone_number"]) == (CALLER, line.number)
    assert sent["agent"]["welcome_message"] == "Hello, this is the day desk."


async def test_configuration_endpoint_inbound_call_error_hangs_up_silently(
    customer: Customer, server: Server, receiver: WebhookReceiver
) -> None:
    receiver.script(Reply.json({"error": "down"}, status=500))
    line, _ = await configured_line(customer, server, receiver)
    twiml = await line.call()
    conversation_id = twiml.parameters["conversation_id"]
    stream = await line.stream(twiml)
    try:
        code, reason = await stream.wait_closed(within=10)
        await asyncio.sleep(0.1)  # anything sent before the close has been read
    finally:
        await stream.close()
    assert (code, reason) == (1011, "configuration_endpoint_error")
    assert stream.heard.played == []  # the caller heard nothing
    found = await line.conversation(conversation_id)
    assert (found["status"], found["ended_by"]) == ("ended", "configuration_endpoint_error")
    assert found["items"] == []


async def test_configuration_endpoint_placed_call_error_ends_call_at_carrier(
    office: Office, receiver: WebhookReceiver
) -> None:
    receiver.script(Reply.json({"error": "down"}, status=503))
    endpoint = {"url": receiver.url("/config")}
    patched = await office.api.patch(
        f"/v1/agents/{office.agent}", json={"configuration_endpoint": endpoint}
    )
    assert patched.status_code == 200, patched.text
    secret = patched.json()["configuration_endpoint_secret"]
    office.carrier.script(Person())
    conversation_id, call = await office.placed()
    await call.wait_finished(30)  # the stream closed: the carrier hung up
    (stream,) = call.streams
    assert (await stream.wait_closed(within=1)) == (1011, "configuration_endpoint_error")
    assert stream.heard.played == []
    assert call.statuses()[-1] == "completed"
    ended = await office.until_ended(conversation_id, within=10)
    assert ended["ended_by"] == "configuration_endpoint_error"
    (request,) = receiver.requests
    sent = Webhook(secret).verify(request.body, request.headers)
    assert sent["from_phone_number"] == office.number
    assert sent["to_phone_number"] == call.field("To")
    events = await office.ended_events(conversation_id)
    assert [event["ended_by"] for event in events] == ["configuration_endpoint_error"]
