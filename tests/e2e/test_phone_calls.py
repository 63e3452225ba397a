"""Real phone calls over real uvicorn (API.md section 13): a simulated carrier (tests/carrier.py)
signs the voice webhook, opens the media stream the TwiML names, streams hibari's speech as
8 kHz mu-law in real time and plays the agent's audio in real time, echoing marks as Twilio
does. The engine is the default one (faster-whisper tiny.en, Silero VAD, hibari-tts)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests import speech
from tests.carrier import FRAME_BYTES, MediaStream, SimulatedCarrier, Twiml, phone_frames
from tests.e2e.conftest import AUDIENCE, Customer, Server
from tests.e2e.test_voice import speech_bounds

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

VOICE_URL = f"https://{AUDIENCE}/v1/telephony/twilio/voice"
MEDIA_PATH = "/v1/telephony/twilio/media"
WELCOME = "Hello, thank you for calling."
LONG_WELCOME = " ".join(speech.SENTENCES[10:16])


def new_number() -> str:
    return "+1415" + "".join(str(secrets.randbelow(10)) for _ in range(7))


@dataclass
class Line:
    """A customer's phone line: a carrier account, and an agent answering `number`."""

    customer: Customer
    carrier: SimulatedCarrier
    server: Server
    agent: str
    number: str

    async def call(self) -> Twiml:
        twiml = await self.carrier.call(to=self.number)
        assert not twiml.rejected, twiml
        assert twiml.stream_url == f"wss://{AUDIENCE}{MEDIA_PATH}"
        return twiml

    async def stream(self, twiml: Twiml, **parameters: str) -> MediaStream:
        """Open the media stream the TwiML names (on the loopback server)."""
        return await MediaStream.open(
            self.server.ws + MEDIA_PATH, {**twiml.parameters, **parameters}
        )

    async def conversation(self, conversation_id: str) -> dict[str, Any]:
        response = await self.customer.api.get(f"/v1/conversations/{conversation_id}")
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()["conversation"]
        return found

    async def until_status(self, conversation_id: str, status: str, within: float) -> None:
        deadline = time.monotonic() + within
        while (found := await self.conversation(conversation_id))["status"] != status:
            assert time.monotonic() < deadline, found["status"]
            await asyncio.sleep(0.05)

    async def items(self, conversation_id: str) -> list[tuple[str, str]]:
        found = await self.conversation(conversation_id)
        return [(item["role"], item["text"]) for item in found["items"]]

    async def until_items(
        self, conversation_id: str, count: int, within: float
    ) -> list[tuple[str, str]]:
        deadline = time.monotonic() + within
        while len(found := await self.items(conversation_id)) < count:
            assert time.monotonic() < deadline, found
            await asyncio.sleep(0.1)
        return found


async def make_line(
    customer: Customer, server: Server, *, welcome: str | None = WELCOME, **agent: Any
) -> Line:
    carrier = SimulatedCarrier(http=customer.api, voice_url=VOICE_URL)
    body = {"account_sid": carrier.account_sid, "auth_token": carrier.auth_token}
    response = await customer.api.put("/v1/telephony/twilio", json=body)
    assert response.status_code == 200, response.text
    number = new_number()
    name = f"phone{secrets.token_hex(4)}"
    made = await customer.api.post(
        "/v1/agents",
        json={
            "name": name,
            "welcome_message": welcome,
            "system_prompt": "You are the front desk of a small hotel.",
            "phone_numbers": [number],
            "audio_format": "pcm_16000",  # the call is mu-law 8 kHz whatever this says
            **agent,
        },
    )
    assert made.status_code == 201, made.text
    return Line(customer, carrier, server, name, number)


@pytest.fixture
async def line(customer: Customer, server: Server) -> Line:
    return await make_line(customer, server)


@pytest.fixture
async def call(line: Line) -> AsyncIterator[tuple[MediaStream, str]]:
    """A call answered by `line`'s agent; its welcome message has been played."""
    twiml = await line.call()
    stream = await line.stream(twiml)
    try:
        await line.until_status(twiml.parameters["conversation_id"], "live", within=10)
        await stream.wait_played(1.0, within=20)
        await stream.wait_silent(within=20)
        yield stream, twiml.parameters["conversation_id"]
    finally:
        await stream.close()


def marks_of(stream: MediaStream) -> list[str]:
    return [name for _, name in stream.heard.marks_echoed]


# --- a call ----------------------------------------------------------------------------


async def test_call_words_recognised_and_answer_spoken_as_mulaw_frames(
    line: Line, call: tuple[MediaStream, str]
) -> None:
    stream, conversation_id = call
    for _ in range(200):  # the welcome's mark is echoed once its audio has played
        if any(name.startswith("reply-") for name in marks_of(stream)):
            break
        await asyncio.sleep(0.05)
    assert any(name.startswith("reply-") for name in marks_of(stream))  # after the welcome
    sentence = speech.SENTENCES[0]
    played_before = len(stream.heard.played)
    await stream.speak(phone_frames(0.3, speech.spoken(sentence), 0.2))
    found = await line.until_items(conversation_id, 3, within=60)
    assert found[0] == ("assistant", WELCOME)
    role, heard = found[1]
    assert role == "user"
    assert speech.word_errors(sentence, heard) <= 1, heard
    assert found[2][0] == "assistant"
    assert found[2][1].startswith("You said:")
    await stream.wait_silent(within=30)
    answer = stream.heard.played[played_before:]
    assert len(answer) * 0.02 > 1.0  # the answer, spoken
    assert all(len(frame) == FRAME_BYTES for _, frame in answer)  # 20 ms mu-law frames
    assert stream.heard.bad_frames == []
    assert marks_of(stream)[-1].startswith("reply-")  # a mark after the reply, echoed
    assert (await line.conversation(conversation_id))["call_info"]["to_phone_number"] == line.number


async def test_call_caller_stop_ends_conversation_within_5s_by_user(
    line: Line, call: tuple[MediaStream, str]
) -> None:
    stream, conversation_id = call
    await stream.stop()
    await line.until_status(conversation_id, "ended", within=5)
    assert (await line.conversation(conversation_id))["ended_by"] == "user"


async def test_call_socket_dropped_ends_conversation_within_5s(
    line: Line, call: tuple[MediaStream, str]
) -> None:
    stream, conversation_id = call
    stream.ws.transport.abort()  # no stop, no close frame: the connection is gone
    await line.until_status(conversation_id, "ended", within=5)


async def test_call_ended_by_api_closes_media_socket_1000(
    line: Line, call: tuple[MediaStream, str]
) -> None:
    stream, conversation_id = call
    ended = await line.customer.api.post(f"/v1/conversations/{conversation_id}/end")
    assert ended.status_code == 200, ended.text
    assert (await stream.wait_closed(within=5))[0] == 1000
    assert (await line.conversation(conversation_id))["ended_by"] == "api"


async def test_call_agent_goodbye_heard_before_socket_closes(
    line: Line, call: tuple[MediaStream, str]
) -> None:
    stream, conversation_id = call
    await stream.speak(phone_frames(0.3, speech.spoken("Thank you, goodbye."), 0.2))
    code, _ = await stream.wait_closed(within=60)
    closed_at = time.monotonic()
    assert code == 1000
    last_reply_mark = max(at for at, name in stream.heard.marks_echoed if name.startswith("reply"))
    assert stream.heard.played[-1][0] + 0.02 <= closed_at  # the goodbye played through
    assert last_reply_mark <= closed_at
    found = await line.conversation(conversation_id)
    assert found["status"] == "ended"
    assert found["ended_by"] == "assistant"


async def test_call_barge_in_clears_within_200ms_and_stores_only_played(
    customer: Customer, server: Server
) -> None:
    line = await make_line(customer, server, welcome=LONG_WELCOME)
    twiml = await line.call()
    conversation_id = twiml.parameters["conversation_id"]
    stream = await line.stream(twiml)
    try:
        await stream.wait_played(2.5, within=30)
        sentence = speech.SENTENCES[5]
        await stream.speak(phone_frames(speech.spoken(sentence), 0.6))
        assert stream.speech_started_at is not None
        onset = stream.speech_started_at + speech_bounds(sentence)[0]
        assert stream.heard.clears, "no clear"
        assert stream.heard.clears[0] - onset <= 0.2
        played = stream.heard.played_seconds(until=stream.heard.clears[0])
        found = await line.until_items(conversation_id, 1, within=30)
    finally:
        await stream.close()
    role, stored = found[0]
    assert role == "assistant"
    welcome_words = LONG_WELCOME.split()
    stored_words = stored.split()
    assert stored_words == welcome_words[: len(stored_words)]  # a word prefix
    assert 0 < len(stored_words) < len(welcome_words)
    # Every sentence whose audio had played through is in it; none that had not begun.
    elapsed = 0.0
    kept = 0
    for sentence_text in speech.SENTENCES[10:16]:
        seconds = len(speech.spoken(sentence_text)) / speech.RATE
        words = len(sentence_text.split())
        if elapsed + seconds <= played - 0.25:
            kept += words
            assert len(stored_words) >= kept, (played, stored)
        elif elapsed >= played + 0.25:
            assert len(stored_words) <= kept, (played, stored)
        else:
            kept += words
        elapsed += seconds


async def test_call_dtmf_gathered_until_hash_is_a_user_turn(
    line: Line, call: tuple[MediaStream, str]
) -> None:
    stream, conversation_id = call
    await stream.press("123#")
    found = await line.until_items(conversation_id, 3, within=30)
    assert found[1] == ("user", "DTMF: 123")
    assert found[2][0] == "assistant"
    assert "123" in found[2][1]


async def test_call_dtmf_pause_of_2s_ends_entry(line: Line, call: tuple[MediaStream, str]) -> None:
    stream, conversation_id = call
    pressing = time.monotonic()  # before the first key: the server hears the last one later
    await stream.press("45")
    found = await line.until_items(conversation_id, 2, within=10)
    assert found[1] == ("user", "DTMF: 45")
    # The last key left 0.15 s after the first, and the entry then waits 2 s of the
    # server's own clock: it cannot be seen sooner than that, however loaded the machine.
    assert time.monotonic() - pressing >= 2.0  # the entry waited for the pause


async def test_call_key_pressed_while_agent_speaks_interrupts_it(
    customer: Customer, server: Server
) -> None:
    line = await make_line(customer, server, welcome=LONG_WELCOME)
    twiml = await line.call()
    conversation_id = twiml.parameters["conversation_id"]
    stream = await line.stream(twiml)
    try:
        await stream.wait_played(1.5, within=30)
        await stream.press("9#")
        await asyncio.sleep(0.5)
        assert stream.heard.clears, "no clear"
        found = await line.until_items(conversation_id, 2, within=30)
    finally:
        await stream.close()
    assert found[0][0] == "assistant"
    assert len(found[0][1].split()) < len(LONG_WELCOME.split())
    assert found[1] == ("user", "DTMF: 9")


# --- refusals --------------------------------------------------------------------------


async def refused(line: Line, twiml: Twiml, **parameters: str) -> tuple[int, str]:
    stream = await line.stream(twiml, **parameters)
    try:
        return await stream.wait_closed(within=10)
    finally:
        await stream.close()


async def test_media_stream_wrong_token_refused_1008_right_one_still_works(line: Line) -> None:
    twiml = await line.call()
    conversation_id = twiml.parameters["conversation_id"]
    assert await refused(line, twiml, stream_token="x" * 43) == (1008, "invalid_stream_token")
    assert (await line.conversation(conversation_id))["status"] == "pending"
    stream = await line.stream(twiml)
    try:
        await line.until_status(conversation_id, "live", within=10)
    finally:
        await stream.close()


async def test_media_stream_replayed_token_refused_1008(line: Line) -> None:
    twiml = await line.call()
    conversation_id = twiml.parameters["conversation_id"]
    first = await line.stream(twiml)
    try:
        await line.until_status(conversation_id, "live", within=10)
        assert await refused(line, twiml) == (1008, "invalid_stream_token")
        assert (await line.conversation(conversation_id))["status"] == "live"  # untouched
    finally:
        await first.close()


async def test_media_stream_foreign_token_refused_1008_nothing_started(line: Line) -> None:
    one, other = await line.call(), await line.call()
    foreign = {"conversation_id": other.parameters["conversation_id"]}
    assert await refused(line, one, **foreign) == (1008, "invalid_stream_token")
    for twiml in (one, other):
        found = await line.conversation(twiml.parameters["conversation_id"])
        assert found["status"] == "pending"


async def test_media_stream_without_connected_refused_1008(line: Line) -> None:
    twiml = await line.call()
    stream = await MediaStream.open(line.server.ws + MEDIA_PATH, twiml.parameters, connected=False)
    try:
        assert (await stream.wait_closed(within=10))[0] == 1008
    finally:
        await stream.close()
    found = await line.conversation(twiml.parameters["conversation_id"])
    assert found["status"] == "pending"


async def test_call_to_disabled_agent_number_rejected(line: Line) -> None:
    disabled = await line.customer.api.post(f"/v1/agents/{line.agent}/disable")
    assert disabled.status_code == 200, disabled.text
    twiml = await line.carrier.call(to=line.number)
    assert twiml.rejected


async def test_agent_disabled_between_webhook_and_start_refused_nothing_live(
    line: Line,
) -> None:
    twiml = await line.call()
    conversation_id = twiml.parameters["conversation_id"]
    disabled = await line.customer.api.post(f"/v1/agents/{line.agent}/disable")
    assert disabled.status_code == 200, disabled.text
    assert await refused(line, twiml) == (1008, "agent_disabled")
    await line.until_status(conversation_id, "ended", within=5)  # not left pending
    found = await line.conversation(conversation_id)
    assert found["items"] == []
    assert found["ended_by"] == "error"


# --- bad input -------------------------------------------------------------------------


async def test_media_stream_bad_input_dropped_call_goes_on(
    line: Line, call: tuple[MediaStream, str]
) -> None:
    stream, conversation_id = call
    sid = stream.stream_sid
    await stream.send(b"\x00\x01binary")
    await stream.send(json.dumps({"event": "surprise", "streamSid": sid}))
    await stream.send(json.dumps({"event": "media", "media": {"payload": "AAAA"}}))
    await stream.send(json.dumps({"event": "media", "media": {"payload": "@@not base64@@"}}))
    await stream.send("{not json")
    flood = json.dumps({"event": "mark", "streamSid": sid, "mark": {"name": "nope"}})
    for _ in range(2000):
        await stream.send(flood)
    await asyncio.sleep(1.5)  # the flood's frames were dropped; the allowance refills
    # A loaded server may still be working through the flood, whose meter then drops the
    # keys too: the call goes on when a key pressed afterwards is heard.
    for _ in range(10):
        await stream.press("7#")
        with contextlib.suppress(AssertionError):
            found = await line.until_items(conversation_id, 3, within=3)
            break
    else:
        raise AssertionError("no key was heard after the bad input")
    assert found[1] == ("user", "DTMF: 7")
    assert (await line.conversation(conversation_id))["status"] == "live"
