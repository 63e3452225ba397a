"""Calls placed through the API (API.md section 15), end to end over real uvicorn: Parley
places each call with the simulated carrier's REST API (tests/carrier_api.py), which plays
the scenario as Twilio would, every callback signed: a person who answers and speaks (real
rendered speech, mu-law, real time), busy, no answer, failed, an answering machine's
greeting and beep with its asynchronous verdict. The engine is the default one."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from parley.app import create_app
from parley.services import Context
from tests.carrier import MediaStream
from tests.carrier_api import CarrierApi
from tests.carrier_calls import Busy, Failed, NoAnswer, Person, PlacedCall, Voicemail
from tests.e2e.conftest import Server, serving
from tests.e2e.test_voice import speech_bounds
from tests.factories import make_org
from tests.ports import free_port
from tests.services.webhook_helpers import make_webhook
from tests.webhook_receiver import WebhookReceiver, running_receiver

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

WELCOME = "Hello, this is the Grand Hotel calling about your booking."
CALLEE = "Hello, Sam speaking."
VOICEMAIL = "Hello {{name}}, this is the Grand Hotel. Please call us back."


def new_number() -> str:
    return "+1628" + "".join(str(secrets.randbelow(10)) for _ in range(7))


@dataclass
class Office:
    """A customer who calls out: an API client, a carrier account at the simulated carrier,
    and an agent with a number of its own."""

    api: httpx.AsyncClient
    carrier: CarrierApi
    server: Server
    ctx: Context
    org_id: str
    agent: str
    number: str
    hooks: WebhookReceiver

    async def place(self, to: str | None = None, **config: Any) -> httpx.Response:
        body = {"to_phone_number": to or new_number(), "config": {"agent": self.agent, **config}}
        return await self.api.post("/v1/conversations/outbound_call", json=body)

    async def placed(self, **config: Any) -> tuple[str, PlacedCall]:
        response = await self.place(**config)
        assert response.status_code == 200, response.text
        conversation_id: str = response.json()["conversation_id"]
        return conversation_id, await self.carrier.wait_call(len(self.carrier.calls) - 1)

    async def conversation(self, conversation_id: str) -> dict[str, Any]:
        response = await self.api.get(f"/v1/conversations/{conversation_id}")
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()["conversation"]
        return found

    async def until_ended(self, conversation_id: str, within: float) -> dict[str, Any]:
        deadline = time.monotonic() + within
        while (found := await self.conversation(conversation_id))["status"] != "ended":
            assert time.monotonic() < deadline, found
            await asyncio.sleep(0.05)
        return found

    async def ended_events(self, conversation_id: str) -> list[dict[str, Any]]:
        """The `conversation` of each conversation.ended delivered for it."""
        return [
            body["data"]["conversation"]
            for body in await self.events(conversation_id, "conversation.ended")
        ]

    async def events(self, conversation_id: str, event_type: str) -> list[dict[str, Any]]:
        """The events of one type delivered for a conversation, once a second has passed
        with no new delivery (the first comes at once: the app's own sender)."""
        seen, quiet_since = -1, time.monotonic()
        while time.monotonic() - quiet_since < 1.0:
            if len(self.hooks.requests) != seen:
                seen, quiet_since = len(self.hooks.requests), time.monotonic()
            await asyncio.sleep(0.05)
        bodies = [json.loads(request.body) for request in self.hooks.requests]
        return [
            body
            for body in bodies
            if body["event_type"] == event_type
            and body["data"]["conversation"]["id"] == conversation_id
        ]


@pytest.fixture
async def carrier() -> AsyncIterator[CarrierApi]:
    async with CarrierApi() as api:
        yield api


@pytest.fixture
def office_settings() -> dict[str, Any]:
    """More settings of the office's app: a module overrides this (a language model)."""
    return {}


@pytest.fixture
async def office_app(
    settings_factory: Any, carrier: CarrierApi, office_settings: dict[str, Any]
) -> AsyncIterator[FastAPI]:
    port = free_port()
    application = create_app(
        settings_factory(
            public_url=f"http://127.0.0.1:{port}",
            twilio_api_url=carrier.url,
            outbound_allow_http=True,  # the webhook receiver on loopback
            outbound_allow_private_networks=True,
            **office_settings,
        )
    )
    application.state.test_port = port
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def office(office_app: FastAPI, carrier: CarrierApi) -> AsyncIterator[Office]:
    ctx: Context = office_app.state.context
    with running_receiver() as hooks:
        async with serving(office_app, office_app.state.test_port) as server:
            async for office in _office(ctx, server, carrier, hooks):
                yield office


async def _office(
    ctx: Context, server: Server, carrier: CarrierApi, hooks: WebhookReceiver
) -> AsyncIterator[Office]:
    created = await make_org(ctx)
    await make_webhook(
        ctx, created.org.id, hooks.url(), ["conversation.ended", "conversation.transferred"]
    )
    headers = {"Authorization": f"Bearer {created.api_key.secret}"}
    async with httpx.AsyncClient(base_url=server.http, headers=headers, timeout=30) as api:
        account = {"account_sid": carrier.account_sid, "auth_token": carrier.auth_token}
        assert (await api.put("/v1/telephony/twilio", json=account)).status_code == 200
        number, agent = new_number(), f"caller{secrets.token_hex(4)}"
        made = await api.post(
            "/v1/agents",
            json={
                "name": agent,
                "welcome_message": WELCOME,
                "system_prompt": "You call guests about their bookings.",
                "phone_numbers": [number],
                "voicemail_message": VOICEMAIL,
                "template_variables": {"name": {"default_value": "guest"}},
            },
        )
        assert made.status_code == 201, made.text
        yield Office(api, carrier, server, ctx, created.org.id, agent, number, hooks)


def first_audio_after(stream: MediaStream, moment: float) -> float:
    return min(at for at, _ in stream.heard.played if at >= moment)


# --- a person answers ---------------------------------------------------------------------


async def test_outbound_call_placed_as_the_contract_says_and_welcome_after_first_words(
    office: Office,
) -> None:
    to = new_number()
    office.carrier.script(Person(words=CALLEE))  # one utterance: one turn
    response = await office.place(to=to, template_variables={"name": "Ada"})
    assert response.status_code == 200, response.text
    conversation_id = response.json()["conversation_id"]
    assert response.json() == {"conversation_id": conversation_id, "dry_run": False}
    call = await office.carrier.wait_call()
    create = office.carrier.requests[0]
    assert (create.method, create.path) == (
        "POST",
        f"/2010-04-01/Accounts/{office.carrier.account_sid}/Calls.json",
    )
    assert (create.username, create.password) == (
        office.carrier.account_sid,
        office.carrier.auth_token,
    )
    public = office.server.http
    assert create.field("To") == to
    assert create.field("From") == office.number
    assert create.field("Url") == (
        f"{public}/v1/telephony/twilio/voice?conversation_id={conversation_id}"
    )
    assert create.field("StatusCallback") == f"{public}/v1/telephony/twilio/status"
    assert create.fields("StatusCallbackEvent") == ["initiated", "ringing", "answered", "completed"]
    assert create.field("MachineDetection") == "DetectMessageEnd"
    assert create.field("AsyncAmd") == "true"
    assert create.field("AsyncAmdStatusCallback") == f"{public}/v1/telephony/twilio/amd"
    assert create.field("Timeout") == "30"

    deadline = time.monotonic() + 30
    while not call.streams or call.streams[0].last_speech_sent_at == 0.0:
        assert time.monotonic() < deadline, call.callbacks
        await asyncio.sleep(0.05)
    stream = call.streams[0]
    assert stream.speech_started_at is not None
    # The callee's last voiced sample: its frames start with 0.2 s of silence
    # (tests/carrier_calls.py), then the rendered words.
    words_ended = stream.speech_started_at + 0.2 + speech_bounds(CALLEE)[1]
    before_words = [at for at, _ in stream.heard.played if at < words_ended]
    assert before_words == []  # the agent waited for the callee's first words
    await stream.wait_played(1.0, within=20)
    assert first_audio_after(stream, words_ended) - words_ended < 2.0
    found = await office.conversation(conversation_id)
    assert found["status"] == "live"
    assert found["call_info"] == {
        "direction": "outbound",
        "from_phone_number": office.number,
        "to_phone_number": to,
        "twilio_call_sid": call.sid,
    }
    await stream.wait_silent(within=20)
    items = [
        (item["role"], item["text"])
        for item in (await office.conversation(conversation_id))["items"]
    ]
    assert ("assistant", WELCOME) in items
    assert items[0][0] == "user"  # the callee's "Hello, Sam speaking." came first
    assert [c.field("AnsweredBy") for c in call.sent("AsyncAmdStatusCallback")] == ["human"]

    cancel = await office.api.post(f"/v1/conversations/{conversation_id}/cancel")
    assert cancel.status_code == 200
    assert cancel.json() == {"success": True}
    await call.wait_finished(20)
    assert call.updates == [[("Status", "completed")]]
    ended = await office.until_ended(conversation_id, within=10)
    assert ended["ended_by"] == "api"
    again = await office.api.post(f"/v1/conversations/{conversation_id}/cancel")
    assert again.status_code == 200  # idempotent, and the carrier is not asked again
    assert len(call.updates) == 1
    assert [e["ended_by"] for e in await office.ended_events(conversation_id)] == ["api"]


# --- calls that never connect -------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "ended_by"),
    [(Busy(), "busy"), (NoAnswer(), "no_answer"), (Failed(), "failed")],
    ids=["busy", "no_answer", "failed"],
)
async def test_outbound_call_that_never_connects_ends_with_why(
    office: Office, scenario: Busy | NoAnswer | Failed, ended_by: str
) -> None:
    office.carrier.script(scenario)
    conversation_id, call = await office.placed()
    await call.wait_finished(20)
    found = await office.until_ended(conversation_id, within=10)
    assert found["ended_by"] == ended_by
    assert call.sent("Url") == []  # never answered: no TwiML fetched
    assert all(c.status == 204 for c in call.callbacks), call.callbacks
    assert [e["ended_by"] for e in await office.ended_events(conversation_id)] == [ended_by]


# --- an answering machine -----------------------------------------------------------------


async def test_outbound_call_voicemail_message_left_once_then_hung_up(office: Office) -> None:
    office.carrier.script(Voicemail())
    conversation_id, call = await office.placed(template_variables={"name": "Ada"})
    await call.wait_finished(60)
    found = await office.until_ended(conversation_id, within=10)
    assert found["ended_by"] == "voicemail"
    verdicts = call.sent("AsyncAmdStatusCallback")
    assert [c.field("AnsweredBy") for c in verdicts] == ["machine_end_beep"]
    said = [item["text"] for item in found["items"] if item["role"] == "assistant"]
    assert said[-1] == "Hello Ada, this is the Grand Hotel. Please call us back."
    assert said.count(said[-1]) == 1
    (stream,) = call.streams
    beep_done = stream.last_speech_sent_at
    assert stream.heard.played_seconds() > 0
    assert max(at for at, _ in stream.heard.played) > beep_done  # spoken after the beep
    assert [e["ended_by"] for e in await office.ended_events(conversation_id)] == ["voicemail"]


async def test_outbound_call_machine_without_voicemail_message_hangs_up_at_once(
    office: Office,
) -> None:
    patched = await office.api.patch(f"/v1/agents/{office.agent}", json={"voicemail_message": None})
    assert patched.status_code == 200, patched.text
    assert patched.json()["agent"]["voicemail_message"] is None
    office.carrier.script(Voicemail())
    conversation_id, call = await office.placed()
    await call.wait_finished(60)
    found = await office.until_ended(conversation_id, within=10)
    assert found["ended_by"] == "voicemail"
    assert [("Status", "completed")] in call.updates


# --- the checks, a dry run ----------------------------------------------------------------


async def test_outbound_call_dry_run_checks_and_places_nothing(office: Office) -> None:
    body = {"to_phone_number": new_number(), "config": {"agent": office.agent}, "dry_run": True}
    response = await office.api.post("/v1/conversations/outbound_call", json=body)
    assert response.status_code == 200, response.text
    assert response.json() == {"conversation_id": None, "dry_run": True}
    listed = await office.api.get("/v1/conversations")
    assert listed.json()["conversations"] == []
    assert office.carrier.requests == []


# --- callbacks ----------------------------------------------------------------------------


async def test_outbound_call_unsigned_callbacks_refused_and_replays_change_nothing(
    office: Office,
) -> None:
    office.carrier.script(Busy())
    conversation_id, call = await office.placed()
    await call.wait_finished(20)
    assert (await office.until_ended(conversation_id, within=10))["ended_by"] == "busy"
    busy = call.sent("StatusCallback")[-1]
    for path in ("/v1/telephony/twilio/status", "/v1/telephony/twilio/amd"):
        unsigned = await office.api.post(
            path,
            content=b"&".join(f"{k}={v}".encode() for k, v in busy.params),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert unsigned.status_code == 403, unsigned.text
        assert unsigned.json()["error"]["code"] == "invalid_signature"
    # The busy callback again, signed as the carrier signed it, and a signed `completed`
    # after it: the first ending stands.
    for status in ("busy", "completed"):
        await office.carrier.player.callback(call, busy.url, [("CallStatus", status)])
        assert call.callbacks[-1].status == 204
    found = await office.conversation(conversation_id)
    assert (found["status"], found["ended_by"]) == ("ended", "busy")
    assert len(await office.ended_events(conversation_id)) == 1
    voice = call.field("Url") or ""
    late = await office.carrier.player.callback(call, voice, [("CallStatus", "in-progress")])
    assert "<Hangup/>" in late  # a call placed late for an ended conversation hangs up


# --- cancelling ---------------------------------------------------------------------------


async def test_outbound_call_cancelled_while_ringing_is_canceled_at_the_carrier(
    office: Office,
) -> None:
    office.carrier.script(Person(ring_s=3.0))
    conversation_id, call = await office.placed()
    await asyncio.sleep(0.3)
    response = await office.api.post(f"/v1/conversations/{conversation_id}/cancel")
    assert response.status_code == 200, response.text
    await call.wait_finished(20)
    assert call.updates[0] == [("Status", "canceled")]
    assert call.statuses()[-1] == "canceled"
    found = await office.until_ended(conversation_id, within=10)
    assert found["ended_by"] == "api"
    assert call.sent("Url") == []
    assert len(await office.ended_events(conversation_id)) == 1


# --- the official SDK ---------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning")
async def test_outbound_call_through_the_official_sdk_then_cancel(office: Office) -> None:
    from phonic import Phonic
    from phonic.environment import PhonicEnvironment

    key = office.api.headers["Authorization"].removeprefix("Bearer ")
    environment = PhonicEnvironment(base=f"{office.server.http}/v1", production=office.server.ws)
    with httpx.Client(timeout=30) as http:
        client = Phonic(api_key=key, environment=environment, httpx_client=http)
        # The SDK is synchronous and the server runs on this event loop: call it in a thread.
        dry = await asyncio.to_thread(
            client.conversations.outbound_call,
            to_phone_number=new_number(),
            config={"agent": office.agent},
            dry_run=True,
        )
        assert (dry.conversation_id, dry.dry_run) == (None, True)
        office.carrier.script(Person(ring_s=5.0))
        placed = await asyncio.to_thread(
            client.conversations.outbound_call,
            to_phone_number=new_number(),
            config={"agent": office.agent, "welcome_message": "Hi, it is the hotel."},
        )
        assert placed.dry_run is False
        assert placed.conversation_id.startswith("conv_")
        call = await office.carrier.wait_call()
        cancelled = await asyncio.to_thread(client.conversations.cancel, placed.conversation_id)
        assert cancelled.success is True
    await call.wait_finished(20)
    assert call.updates[0] == [("Status", "canceled")]
    found = await office.until_ended(placed.conversation_id, within=10)
    assert found["ended_by"] == "api"
