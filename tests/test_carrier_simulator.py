"""The simulated carrier's REST API and its scenarios (tests/carrier_api.py), where they stand
alone: placed through Parley's own client (parley/outbound/carrier.py), played against a
stand-in for Parley on loopback that proves every callback's `X-Twilio-Signature` with the
service's algorithm (services/twilio_signature.py) and runs a media socket recording the
frames. The outbound-call and transfer features test Parley itself against the same API."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import httpx
import numpy as np
import pytest
from aiohttp import WSMsgType, web

from parley.outbound import CarrierAccount, OutboundClient, TwilioCalls
from parley.services.twilio_signature import signature_matches
from tests.carrier import FRAME_MS, mulaw_decode, phone_frames
from tests.carrier_api import CarrierApi
from tests.carrier_calls import (
    Busy,
    Failed,
    NoAnswer,
    Person,
    PlacedCall,
    Scenario,
    Target,
    Voicemail,
)
from tests.speech import spoken

pytestmark = pytest.mark.anyio

SPEECH_LEVEL = 300
"""A 20 ms frame whose loudest sample passes this (of 32767) carries sound."""


@dataclass
class Received:
    path: str
    params: dict[str, str]
    signed: bool
    at: float


@dataclass
class StandIn:
    """Parley's side of the calls, for the simulator alone: signed callbacks checked and
    recorded, TwiML answered per path, a media socket closed when `hang_up` is set."""

    auth_token: str
    port: int = 0
    callbacks: list[Received] = field(default_factory=list)
    frames: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)
    hang_up: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def connect(self) -> str:
        return (
            f'<Response><Connect><Stream url="ws://127.0.0.1:{self.port}/media">'
            '<Parameter name="conversation_id" value="conv_1"/></Stream></Connect></Response>'
        )

    def at(self, path: str) -> list[Received]:
        return [c for c in self.callbacks if c.path == path]

    def events(self, name: str) -> list[tuple[float, dict[str, Any]]]:
        return [(t, f) for t, f in self.frames if f.get("event") == name]

    async def until(self, check: Any, within: float = 60) -> None:
        """Wait until `check()` holds (each callback and frame wakes it)."""
        async with asyncio.timeout(within):
            while not check():
                self.changed.clear()
                await self.changed.wait()

    async def callback(self, request: web.Request) -> web.Response:
        body = await request.read()
        params = parse_qsl(body.decode(), keep_blank_values=True)
        signed = signature_matches(
            self.auth_token,
            self.url(request.path_qs),
            params,
            request.headers.get("X-Twilio-Signature", ""),
        )
        self.callbacks.append(Received(request.path, dict(params), signed, time.monotonic()))
        self.changed.set()
        answer = self.answers.get(request.path, "<Response/>")
        return web.Response(text=answer, content_type="text/xml")

    async def media(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)

        async def hang_up_when_told() -> None:
            await self.hang_up.wait()
            await ws.close()

        closer = asyncio.create_task(hang_up_when_told())
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self.frames.append((time.monotonic(), json.loads(message.data)))
                    self.changed.set()
        finally:
            closer.cancel()
        return ws


async def audio(request: web.Request) -> web.Response:
    return web.Response(body=b"rendered audio", content_type="audio/basic")


@pytest.fixture
async def api() -> AsyncIterator[CarrierApi]:
    async with CarrierApi() as running:
        yield running


@pytest.fixture
async def parley(api: CarrierApi) -> AsyncIterator[StandIn]:
    stand_in = StandIn(api.auth_token)
    app = web.Application()
    for path in ("/voice", "/status", "/amd", "/dial", "/number", "/warm"):
        app.router.add_post(path, stand_in.callback)
    app.router.add_get("/media", stand_in.media)
    app.router.add_get("/audio", audio)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    stand_in.port = runner.addresses[0][1]
    stand_in.answers["/voice"] = stand_in.connect()
    try:
        yield stand_in
    finally:
        stand_in.hang_up.set()
        await runner.cleanup()


@pytest.fixture
async def calls(api: CarrierApi) -> AsyncIterator[TwilioCalls]:
    outbound = OutboundClient()
    try:
        yield TwilioCalls(outbound, api_url=api.url)
    finally:
        await outbound.aclose()


async def place(
    api: CarrierApi, calls: TwilioCalls, parley: StandIn, scenario: Scenario
) -> PlacedCall:
    api.script(scenario)
    sid = await calls.create_call(
        CarrierAccount(api.account_sid, api.auth_token),
        to="+14155550100",
        from_="+14155550123",
        url=parley.url("/voice?conversation_id=conv_1"),
        status_callback=parley.url("/status"),
        amd_callback=parley.url("/amd"),
    )
    return api.calls[sid]


def loud(frame: dict[str, Any]) -> bool:
    payload = base64.b64decode(frame["media"]["payload"])
    return int(np.abs(mulaw_decode(payload).astype(np.int32)).max()) > SPEECH_LEVEL


def statuses(parley: StandIn) -> list[str]:
    return [c.params["CallStatus"] for c in parley.at("/status")]


async def test_simulated_api_refuses_a_wrong_basic_credential_with_twilios_error(
    api: CarrierApi,
) -> None:
    path = f"/2010-04-01/Accounts/{api.account_sid}/Calls.json"
    async with httpx.AsyncClient(base_url=api.url) as http:
        unsigned = await http.post(path, data={"To": "+1", "From": "+2", "Url": "http://x"})
        wrong = await http.post(path, data={"To": "+1"}, auth=(api.account_sid, "0" * 32))
    for answer in (unsigned, wrong):
        assert answer.status_code == 401
        assert answer.json()["code"] == 20003
        assert set(answer.json()) == {"code", "message", "more_info", "status"}
    assert [r.password for r in api.requests] == [None, "0" * 32]
    assert api.calls == {}


async def test_person_scenario_signs_every_callback_and_speaks_in_real_time(
    api: CarrierApi, calls: TwilioCalls, parley: StandIn
) -> None:
    call = await place(api, calls, parley, Person())
    await parley.until(lambda: parley.at("/amd"))
    parley.hang_up.set()  # the agent ends the call: the server closes the media socket
    await call.wait_finished(10)

    assert parley.callbacks
    assert all(c.signed for c in parley.callbacks)
    assert statuses(parley) == ["initiated", "ringing", "in-progress", "completed"]
    (voice,) = parley.at("/voice")
    assert voice.params["Direction"] == "outbound-api"
    assert voice.params["CallStatus"] == "in-progress"
    assert (voice.params["CallSid"], voice.params["AccountSid"]) == (call.sid, api.account_sid)
    assert (voice.params["To"], voice.params["From"]) == ("+14155550100", "+14155550123")

    (_, start), *_ = parley.events("start")
    assert start["start"]["customParameters"] == {"conversation_id": "conv_1"}
    assert start["start"]["callSid"] == call.sid
    spoken_frames = [(t, f) for t, f in parley.events("media") if loud(f)]
    expected = len(phone_frames(spoken(Person().words)))
    assert 0.4 * expected <= len(spoken_frames) <= expected  # words, and pauses between
    chunks = int(spoken_frames[-1][1]["media"]["chunk"]) - int(
        spoken_frames[0][1]["media"]["chunk"]
    )
    assert 0.7 * expected <= chunks + 1 <= expected
    span = spoken_frames[-1][0] - spoken_frames[0][0]
    assert span >= 0.9 * chunks * FRAME_MS / 1000  # at the pace of speech, not in a burst
    (amd,) = parley.at("/amd")
    assert amd.params["AnsweredBy"] == "human"
    assert amd.at >= spoken_frames[-1][0]


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        (Busy(), ["initiated", "ringing", "busy"]),
        (NoAnswer(), ["initiated", "ringing", "no-answer"]),
        (Failed(), ["initiated", "failed"]),
    ],
    ids=["busy", "no-answer", "failed"],
)
async def test_unanswered_scenarios_send_signed_statuses_and_never_fetch_the_url(
    api: CarrierApi, calls: TwilioCalls, parley: StandIn, scenario: Scenario, expected: list[str]
) -> None:
    call = await place(api, calls, parley, scenario)
    await call.wait_finished(10)
    assert statuses(parley) == expected
    assert all(c.signed for c in parley.callbacks)
    assert parley.at("/voice") == []
    assert parley.frames == []


async def test_voicemail_scenario_plays_a_greeting_then_a_beep_then_the_amd_verdict(
    api: CarrierApi, calls: TwilioCalls, parley: StandIn
) -> None:
    call = await place(api, calls, parley, Voicemail())
    await parley.until(lambda: parley.at("/amd"))
    parley.hang_up.set()
    await call.wait_finished(10)
    (amd,) = parley.at("/amd")
    assert amd.params["AnsweredBy"] == "machine_end_beep"
    assert amd.signed
    sounding = [(t, f) for t, f in parley.events("media") if loud(f)]
    tail = np.concatenate(
        [mulaw_decode(base64.b64decode(f["media"]["payload"])) for _, f in sounding[-20:]]
    ).astype(np.float64)
    peak_hz = np.argmax(np.abs(np.fft.rfft(tail))) * 8000 / len(tail)
    assert abs(peak_hz - 1000) < 30  # the beep ends the greeting
    assert amd.at >= sounding[-1][0]
    greeting = len(phone_frames(spoken(Voicemail().greeting)))
    assert len(sounding) >= 0.4 * greeting + 20  # the greeting's words, then the beep


async def test_hang_up_update_stops_the_stream_and_completes_the_call(
    api: CarrierApi, calls: TwilioCalls, parley: StandIn
) -> None:
    call = await place(api, calls, parley, Person(amd=None))
    await parley.until(lambda: parley.events("start"))
    await calls.update_call(
        CarrierAccount(api.account_sid, api.auth_token), call.sid, status="completed"
    )
    await call.wait_finished(10)
    await parley.until(lambda: parley.events("stop"))
    assert statuses(parley)[-1] == "completed"


def dial_twiml(parley: StandIn) -> str:
    return (
        f'<Response><Dial callerId="+14155550123" timeout="20" action="{parley.url("/dial")}">'
        f'<Number sendDigits="12" statusCallbackEvent="answered" '
        f'statusCallback="{parley.url("/number")}">+14155550199</Number></Dial></Response>'
    )


async def test_transfer_target_that_answers_gets_the_number_callback_then_the_dial_action(
    api: CarrierApi, calls: TwilioCalls, parley: StandIn
) -> None:
    call = await place(api, calls, parley, Person(amd=None))
    await parley.until(lambda: parley.events("start"))
    parley.answers["/dial"] = "<Response><Hangup/></Response>"
    account = CarrierAccount(api.account_sid, api.auth_token)
    await calls.update_call(account, call.sid, twiml=dial_twiml(parley))
    await call.wait_finished(20)
    assert parley.events("stop")  # the carrier stopped the media stream
    (number,) = parley.at("/number")
    (action,) = parley.at("/dial")
    assert number.params["CallStatus"] == "in-progress"
    assert number.signed
    assert action.params["DialCallStatus"] == "completed"
    assert action.signed
    assert number.at <= action.at
    assert statuses(parley)[-1] == "completed"
    assert len(call.streams) == 1


@pytest.mark.parametrize("status", ["no-answer", "busy"])
async def test_transfer_target_that_does_not_answer_brings_the_caller_back(
    api: CarrierApi, calls: TwilioCalls, parley: StandIn, status: str
) -> None:
    api.transfer_to(Target(answers=False, status=status))
    call = await place(api, calls, parley, Person(amd=None))
    await parley.until(lambda: parley.events("start"))
    parley.answers["/dial"] = parley.connect()
    account = CarrierAccount(api.account_sid, api.auth_token)
    await calls.update_call(account, call.sid, twiml=dial_twiml(parley))
    await parley.until(lambda: len(parley.events("start")) == 2)  # the caller is back
    assert parley.at("/number") == []
    (action,) = parley.at("/dial")
    assert action.params["DialCallStatus"] == status
    assert action.signed
    assert "completed" not in statuses(parley)
    parley.hang_up.set()
    await call.wait_finished(10)
    assert statuses(parley)[-1] == "completed"
    assert len(call.streams) == 2


async def test_warm_transfer_target_fetches_its_twiml_and_the_audio_it_plays(
    api: CarrierApi, calls: TwilioCalls, parley: StandIn
) -> None:
    call = await place(api, calls, parley, Person(amd=None))
    await parley.until(lambda: parley.events("start"))
    audio_url = parley.url("/audio?token=1")
    parley.answers["/warm"] = f"<Response><Play>{audio_url}</Play></Response>"
    twiml = (
        f'<Response><Dial action="{parley.url("/dial")}"><Number url="{parley.url("/warm")}">'
        "+14155550199</Number></Dial></Response>"
    )
    await calls.update_call(CarrierAccount(api.account_sid, api.auth_token), call.sid, twiml=twiml)
    await call.wait_finished(20)
    (warm,) = parley.at("/warm")
    assert warm.signed
    assert warm.params["ParentCallSid"] == call.sid
    assert call.fetched == [(audio_url, b"rendered audio")]
