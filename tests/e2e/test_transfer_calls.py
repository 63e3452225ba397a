"""`built_in_transfer_to_phone_number` on phone calls (API.md section 15), end to end over real
uvicorn: a call placed through the simulated carrier (tests/carrier_api.py), a callee who
speaks (rendered speech, real time), an OpenAI-protocol server on loopback scripting the
transfer, and the carrier's `<Dial>` played with a target that answers or not, every
callback signed as Twilio signs it."""

from __future__ import annotations

import asyncio
import io
import time
import wave
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

from tests import speech
from tests.carrier import MediaStream, phone_frames
from tests.carrier_calls import Person, PlacedCall, Target
from tests.e2e.test_outbound_calls import (
    Office,
    carrier,
    office,
    office_app,
)
from tests.e2e.test_tools_ws import call_round
from tests.llm_server import ChatServer, Round, running_chat_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

__all__ = ["carrier", "office", "office_app"]  # the fixtures of a placed call

DESK = "+14155550188"
ASKS = "I would like to talk to a person please."
PUT_THROUGH = "Putting you through now."


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def office_settings(chat: ChatServer) -> dict[str, Any]:
    return {
        "llm_base_url": chat.base_url,
        "llm_api_key": "sk-test",
        "llm_model": "bistro-7b",
        "llm_timeout_seconds": 5.0,
    }


async def with_transfer_tool(office: Office, **tool: Any) -> None:
    made = await office.api.post(
        "/v1/tools",
        json={"name": "to_desk", "type": "built_in_transfer_to_phone_number", **tool},
    )
    assert made.status_code == 201, made.text
    patched = await office.api.patch(f"/v1/agents/{office.agent}", json={"tools": ["to_desk"]})
    assert patched.status_code == 200, patched.text


async def answered_and_asking(
    office: Office, chat: ChatServer, *then: Round
) -> tuple[str, PlacedCall]:
    """A placed call, its welcome heard; then the callee asks for a person and the model
    calls the transfer tool after saying PUT_THROUGH (`then`: its next answers)."""
    chat.script.rounds.extend([call_round("to_desk", {}, text=[PUT_THROUGH]), *then])
    office.carrier.script(Person(words="Hello, Sam speaking.", amd=None))
    conversation_id, call = await office.placed()
    stream = await first_stream(call)
    await stream.wait_played(1.0, within=20)
    await stream.wait_silent(within=20)
    speech.spoken(ASKS)
    await stream.speak(phone_frames(0.2, speech.spoken(ASKS), 0.3))
    return conversation_id, call


async def first_stream(call: PlacedCall, index: int = 0, within: float = 30) -> MediaStream:
    deadline = time.monotonic() + within
    while len(call.streams) <= index:
        assert time.monotonic() < deadline, call.callbacks
        await asyncio.sleep(0.05)
    return call.streams[index]


async def until_dialled(call: PlacedCall, count: int = 1, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while len(call.dials) < count:
        assert time.monotonic() < deadline, call.callbacks
        await asyncio.sleep(0.05)


def dial_of(document: str) -> tuple[ET.Element, ET.Element]:
    root = ET.fromstring(document)  # noqa: S314 - Parley's TwiML, in a test
    dial = root.find("Dial")
    assert dial is not None, document
    number = dial.find("Number")
    assert number is not None, document
    return dial, number


async def test_transfer_cold_answered_dial_as_contracted_and_ended_transferred(
    office: Office, chat: ChatServer
) -> None:
    await with_transfer_tool(office, phone_number=DESK, dtmf="12")
    conversation_id, call = await answered_and_asking(office, chat)
    await until_dialled(call)
    (update,) = call.updates
    ((name, document),) = update
    assert name == "Twiml"
    dial, number = dial_of(document)
    public = office.server.http
    assert dial.get("callerId") == call.field("To")  # the other party's number (cold)
    assert dial.get("timeout") == "20"
    action = urlsplit(dial.get("action") or "")
    assert f"{action.scheme}://{action.netloc}{action.path}" == f"{public}/v1/telephony/twilio/dial"
    assert parse_qs(action.query) == {"conversation_id": [conversation_id], "attempt": ["1"]}
    assert (number.text, number.get("sendDigits")) == (DESK, "12")
    assert number.get("statusCallbackEvent") == "answered"
    assert number.get("statusCallback") == (
        f"{public}/v1/telephony/twilio/transfer?conversation_id={conversation_id}"
    )
    assert number.get("url") is None  # cold: the target hears no briefing
    first = call.streams[0]
    last_word = max(at for at, _ in first.heard.played)
    await call.wait_finished(30)
    found = await office.until_ended(conversation_id, within=10)
    assert found["ended_by"] == "transferred"
    said = [item["text"] for item in found["items"] if item["role"] == "assistant"]
    assert said[-1] == PUT_THROUGH  # the agent finished its sentence before the transfer
    transferred = await office.events(conversation_id, "conversation.transferred")
    assert [event["data"]["transferred_to"] for event in transferred] == [{"phone_number": DESK}]
    assert len(await office.ended_events(conversation_id)) == 1
    action_answers = [c for c in call.callbacks if c.url.startswith(dial.get("action") or "-")]
    assert [c.answer for c in action_answers] == [
        '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>'
    ]
    (request,) = [r for r in office.carrier.requests if r.field("Twiml")]
    assert last_word <= request.at < last_word + 2.0  # after the agent's last word was heard


async def test_transfer_not_answered_caller_back_with_the_agent_who_is_told(
    office: Office, chat: ChatServer
) -> None:
    await with_transfer_tool(office, phone_number=DESK)
    office.carrier.transfer_to(Target(answers=False, status="no-answer"))
    sorry = Round(text=["Sorry, nobody answered at the desk."])
    conversation_id, call = await answered_and_asking(office, chat, sorry)
    back = await first_stream(call, index=1)
    await back.wait_played(1.0, within=30)
    await back.wait_silent(within=30)
    told = chat.requests[-1].body["messages"]
    notes = [m["content"] for m in told if m["role"] == "system"]
    assert any("was not answered (no-answer)" in note for note in notes), notes
    history = [m["content"] for m in told if m["role"] == "user"]
    assert any("person" in text for text in history), history  # the conversation goes on
    found = await office.conversation(conversation_id)
    assert (found["status"], found["ended_by"]) == ("live", None)
    said = [item["text"] for item in found["items"] if item["role"] == "assistant"]
    assert said[-1] == "Sorry, nobody answered at the desk."
    cancel = await office.api.post(f"/v1/conversations/{conversation_id}/cancel")
    assert cancel.status_code == 200
    assert (await office.until_ended(conversation_id, within=10))["ended_by"] == "api"
    assert await office.events(conversation_id, "conversation.transferred") == []


async def test_transfer_keep_retrying_dials_three_times_then_the_caller_is_back(
    office: Office, chat: ChatServer
) -> None:
    await with_transfer_tool(office, phone_number=DESK, on_transfer_no_answer="keep_retrying")
    office.carrier.transfer_to(*[Target(answers=False, status="busy")] * 3)
    busy = Round(text=["The desk is busy, sorry."])
    conversation_id, call = await answered_and_asking(office, chat, busy)
    back = await first_stream(call, index=1, within=60)
    await back.wait_played(0.5, within=30)
    assert len(call.dials) == 3
    attempts = [
        parse_qs(urlsplit(dial_of(document)[0].get("action") or "").query)["attempt"]
        for document in call.dials
    ]
    assert attempts == [["1"], ["2"], ["3"]]
    await office.api.post(f"/v1/conversations/{conversation_id}/cancel")


async def test_transfer_warm_target_hears_the_briefing_in_the_agents_voice_once(
    office: Office, chat: ChatServer
) -> None:
    await with_transfer_tool(
        office,
        phone_number=DESK,
        keep_listening=True,
        post_transfer_message="A guest is calling about a booking.",
    )
    conversation_id, call = await answered_and_asking(office, chat)
    await call.wait_finished(40)
    _, number = dial_of(call.dials[0])
    assert number.get("url", "").startswith(f"{office.server.http}/v1/telephony/twilio/briefing?")
    ((url, body),) = call.fetched
    with wave.open(io.BytesIO(body), "rb") as audio:
        assert (audio.getnchannels(), audio.getsampwidth(), audio.getframerate()) == (1, 2, 8000)
        frames = audio.readframes(audio.getnframes())
        seconds = audio.getnframes() / 8000
    samples = np.frombuffer(frames, dtype="<i2").astype(np.float64) / 32768
    assert seconds > 1.5  # the message and the summary, spoken
    assert float(np.sqrt(np.mean(samples**2))) > 0.01
    again = await office.api.get(url)
    assert again.status_code == 404  # single-use
    found = await office.until_ended(conversation_id, within=10)
    assert found["ended_by"] == "transferred"


async def test_transfer_to_agent_on_a_call_the_same_call_goes_on_with_it(
    office: Office, chat: ChatServer
) -> None:
    voices = (await office.api.get("/v1/voices")).json()["voices"]
    front = (await office.api.get(f"/v1/agents/{office.agent}")).json()["agent"]
    billing = await office.api.post(
        "/v1/agents",
        json={
            "name": "billing",
            "system_prompt": "You are the billing desk.",
            "welcome_message": "Billing here. How can I help?",
            "voice_id": next(v["id"] for v in voices if v["id"] != front["voice_id"]),
        },
    )
    assert billing.status_code == 201, billing.text
    made = await office.api.post(
        "/v1/tools",
        json={"name": "to_desk", "type": "built_in_transfer_to_agent",
              "agents_to_transfer_to": ["billing"]},
    )  # fmt: skip
    assert made.status_code == 201, made.text
    await office.api.patch(f"/v1/agents/{office.agent}", json={"tools": ["to_desk"]})
    chat.script.rounds.append(call_round("to_desk", {"agent": "billing"}, text=[PUT_THROUGH]))
    office.carrier.script(Person(words="Hello, Sam speaking.", amd=None))
    conversation_id, call = await office.placed()
    stream = await first_stream(call)
    await stream.wait_played(1.0, within=20)
    await stream.wait_silent(within=20)
    await stream.speak(phone_frames(0.2, speech.spoken(ASKS), 0.3))
    deadline = time.monotonic() + 40
    while True:
        found = await office.conversation(conversation_id)
        said = [item["text"] for item in found["items"] if item["role"] == "assistant"]
        if said and said[-1] == "Billing here. How can I help?":
            break
        assert time.monotonic() < deadline, said
        await asyncio.sleep(0.1)
    assert said[-2:] == [PUT_THROUGH, "Billing here. How can I help?"]
    assert found["agent"]["name"] == "billing"
    assert found["status"] == "live"
    assert call.updates == []
    assert len(call.streams) == 1
    (event,) = await office.events(conversation_id, "conversation.transferred")
    assert event["data"]["transferred_to"]["agent"]["name"] == "billing"
    await office.api.post(f"/v1/conversations/{conversation_id}/cancel")
