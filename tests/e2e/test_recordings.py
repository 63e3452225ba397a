"""Recordings of real conversations (API.md section 16), over real uvicorn and the real
WebSocket, with real speech: the WAV's channels, rate and timing are checked by reading its
samples; its signed URL, byte ranges and refusals."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time
import wave
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
import numpy.typing as npt
import pytest
from fastapi import FastAPI
from websockets.asyncio.client import connect

from parley.clock import SystemClock
from parley.engine import AudioFormat, audio
from parley.recordings.directory import DirectoryStore
from parley.services import recordings
from parley.services.context import Context
from tests import speech
from tests.carrier import mulaw_decode, phone_frames
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_phone_calls import make_line
from tests.e2e.test_voice import open_conversation, speech_bounds, stream_realtime
from tests.e2e.test_ws import receive, receive_until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

WINDOW_S = 0.02
VOICED_RMS = 0.01


@pytest.fixture
def app_settings(tmp_path: Path) -> dict[str, Any]:
    """A recordings directory on either database (PostgreSQL needs it named)."""
    return {"recordings_dir": tmp_path / "recordings"}


async def recorded(customer: Customer, conversation_id: str) -> dict[str, Any]:
    """The conversation once its recording is kept (the socket closes without waiting)."""
    deadline = time.monotonic() + 15
    while True:
        response = await customer.api.get(f"/v1/conversations/{conversation_id}")
        assert response.status_code == 200, response.text
        conversation: dict[str, Any] = response.json()["conversation"]
        if conversation["audio_url"] is not None:
            return conversation
        assert time.monotonic() < deadline, conversation
        await asyncio.sleep(0.1)


def local(server: Server, audio_url: str) -> str:
    """The URL on the test's server (PARLEY_PUBLIC_URL names the public host)."""
    parts = urlsplit(audio_url)
    return f"{server.http}{parts.path}?{parts.query}"


def channels(wav_bytes: bytes) -> tuple[int, npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """(rate, left, right) of a 16-bit stereo WAV, as floats; refuses any other shape."""
    with wave.open(io.BytesIO(wav_bytes)) as file:
        assert file.getnchannels() == 2
        assert file.getsampwidth() == 2
        rate = file.getframerate()
        frames = np.frombuffer(file.readframes(file.getnframes()), dtype="<i2")
    stereo = frames.astype(np.float32).reshape(-1, 2) / 32768.0
    return rate, stereo[:, 0], stereo[:, 1]


def voiced(samples: npt.NDArray[np.float32], rate: int) -> npt.NDArray[np.float64]:
    """The start time (s) of every 20 ms window that holds sound."""
    size = int(rate * WINDOW_S)
    count = samples.size // size
    rms = np.sqrt(np.mean(samples[: count * size].reshape(count, size) ** 2, axis=1))
    return np.flatnonzero(rms > VOICED_RMS) * WINDOW_S


async def test_recording_user_left_agent_right_one_timeline_at_input_rate(
    server: Server, customer: Customer
) -> None:
    fmt = AudioFormat.PCM_16000
    sentence = speech.SENTENCES[3]
    ws = await open_conversation(server, customer, "rec-1", fmt)
    async with ws:
        first_audio: list[float] = []
        answer: list[bytes] = []

        async def collect() -> float:
            """Read while the user speaks: when the answer's first audio arrives, and when
            it ends."""
            while True:
                message = await receive(ws, within=60)
                if message["type"] == "audio_chunk":
                    first_audio.append(time.monotonic())
                    answer.append(base64.b64decode(message["audio"]))
                if message["type"] == "assistant_finished_speaking":
                    return time.monotonic()

        collector = asyncio.create_task(collect())
        started = await stream_realtime(ws, speech.stream(fmt, 0.4, speech.spoken(sentence), 1.0))
        answered_at = await asyncio.wait_for(collector, 60)
    conversation = await recorded(customer, "rec-1")
    async with httpx.AsyncClient() as plain:  # no credential: the URL is the credential
        got = await plain.get(local(server, conversation["audio_url"]))
    assert got.status_code == 200, got.text
    assert got.headers["content-type"] == "audio/wav"
    rate, left, right = channels(got.content)
    assert rate == 16_000
    onset, offset = speech_bounds(sentence)
    user = voiced(left, rate)
    assert abs(user[0] - (0.4 + onset)) < 0.1, user[:3]
    assert abs(user[-1] - (0.4 + offset)) < 0.1, user[-3:]
    agent = voiced(right, rate)
    leading = voiced(audio.decode(fmt, b"".join(answer)), fmt.sample_rate)[0]  # TTS's own pause
    expected = first_audio[0] - started + leading
    assert abs(agent[0] - expected) < 0.15, (agent[0], expected)
    assert agent[0] > user[-1]  # the answer follows the question on the one timeline
    assert agent[-1] <= answered_at - started + 0.1  # nothing after the answer was played
    assert left.size / rate >= answered_at - started - 0.2  # the whole conversation


async def test_recording_barge_in_cuts_agent_channel_where_user_spoke(
    server: Server, customer: Customer
) -> None:
    fmt = AudioFormat.PCM_16000
    sentence = speech.SENTENCES[5]
    ws = await open_conversation(server, customer, "rec-barge", fmt)
    async with ws:
        started = await stream_realtime(ws, speech.stream(fmt, 0.2))
        await ws.send(json.dumps({"type": "say", "text": " ".join(speech.SENTENCES[10:16])}))
        await receive_until(ws, "audio_chunk", within=60)
        await asyncio.sleep(1.5)
        spoke = await stream_realtime(ws, speech.stream(fmt, 0.0, speech.spoken(sentence), 0.8))
        await receive_until(ws, "interrupted_response", within=30)
        cut_at = time.monotonic()
        await receive_until(ws, "assistant_finished_speaking", within=60)  # the answer
    conversation = await recorded(customer, "rec-barge")
    async with httpx.AsyncClient() as plain:
        got = await plain.get(local(server, conversation["audio_url"]))
    rate, left, right = channels(got.content)
    agent = voiced(right, rate)
    user = voiced(left, rate)
    onset, offset = speech_bounds(sentence)
    user_onset, user_end = spoke - started + onset, spoke - started + offset
    cut = cut_at - started
    assert abs(user[0] - user_onset) < 0.1, (user[0], user_onset)
    assert agent[0] < user_onset  # the agent spoke first...
    assert np.any((agent >= user_onset - 0.1) & (agent < cut))  # ...until the user was heard
    silent = agent[(agent > cut + 0.05) & (agent < user_end)]  # ...then nothing it had sent
    assert silent.size == 0, (cut, silent)
    assert agent[-1] > user_end  # then its answer to what the user said


async def test_recording_url_byte_ranges_and_refusals(
    app: FastAPI, server: Server, customer: Customer
) -> None:
    fmt = AudioFormat.MULAW_8000
    ws = await open_conversation(server, customer, "rec-range", fmt)
    async with ws:
        await ws.send(json.dumps({"type": "say", "text": "Thank you for calling."}))
        await receive_until(ws, "assistant_finished_speaking", within=60)
    conversation = await recorded(customer, "rec-range")
    url = local(server, conversation["audio_url"])
    async with httpx.AsyncClient() as plain:
        whole = await plain.get(url)
        head = await plain.get(url, headers={"Range": "bytes=0-43"})
        tail = await plain.get(url, headers={"Range": "bytes=44-"})
        tampered = await plain.get(url.replace("signature=", "signature=x"))
        unsigned = await plain.get(url.split("?")[0])
        ctx: Context = app.state.context
        past = replace(ctx, clock=_Shifted(-2 * recordings.URL_SECONDS))
        expired = await plain.get(local(server, recordings.audio_url(past, *_owner(ctx, whole))))
    assert whole.status_code == 200
    rate, _left, right = channels(whole.content)
    assert rate == 8_000  # the input rate: a call's
    assert voiced(right, rate).size > 0
    assert head.status_code == 206
    assert head.content == whole.content[:44]
    assert head.headers["content-range"] == f"bytes 0-43/{len(whole.content)}"
    assert tail.status_code == 206
    assert head.content + tail.content == whole.content
    refusal = {
        "error": {
            "code": "invalid_signature",
            "message": "The recording's URL is not valid: its signature is wrong or has expired.",
        }
    }
    for refused in (tampered, unsigned, expired):
        assert refused.status_code == 403, refused.text
        assert refused.json() == refusal


class _Shifted(SystemClock):
    """The system's clock, `offset` seconds away."""

    def __init__(self, offset: float) -> None:
        self._offset = offset

    def time(self) -> float:
        return super().time() + self._offset


def _owner(ctx: Context, _whole: httpx.Response) -> tuple[str, str]:
    """(organization, conversation) of the one recording made in this test's directory."""
    store = ctx.recordings
    assert isinstance(store, DirectoryStore)
    found = sorted(store.root.glob("*/rec-range.wav"))
    assert len(found) == 1, found
    return found[0].parent.name, "rec-range"


async def test_delete_conversation_removes_transcript_and_recording_keeps_record(
    app: FastAPI, server: Server, customer: Customer
) -> None:
    """API.md section 16: `DELETE /v1/conversations/{id}` (an ended one; else 409
    `conversation_live`) deletes both now, keeps the record with `deletion_info`, audited."""
    ws = await open_conversation(server, customer, "rec-delete", AudioFormat.PCM_16000)
    async with ws:
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "My card is 4111."}))
        await receive_until(ws, "assistant_finished_speaking", within=60)
        live = await customer.api.delete("/v1/conversations/rec-delete")
    assert live.status_code == 409, live.text
    assert live.json()["error"]["code"] == "conversation_live"
    conversation = await recorded(customer, "rec-delete")
    assert conversation["items"]
    old_url = local(server, conversation["audio_url"])
    deleted = await customer.api.delete("/v1/conversations/rec-delete")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {"success": True}
    after = (await customer.api.get("/v1/conversations/rec-delete")).json()["conversation"]
    assert after["items"] == []
    assert after["audio_url"] is None
    assert after["status"] == "ended"  # the record stays
    info = after["deletion_info"]
    assert info["transcripts_deleted_at"] is not None
    assert info["audio_recordings_deleted_at"] is not None
    store = app.state.context.recordings
    assert isinstance(store, DirectoryStore)
    assert list(store.root.glob("*/rec-delete.wav")) == []  # the file itself is gone
    async with httpx.AsyncClient() as plain:
        gone = await plain.get(old_url)
    assert gone.status_code == 403  # a URL handed out before names nothing now
    again = await customer.api.delete("/v1/conversations/rec-delete")
    assert again.status_code == 200  # idempotent; the first deletion's times stay
    repeated = (await customer.api.get("/v1/conversations/rec-delete")).json()["conversation"]
    assert repeated["deletion_info"] == info
    missing = await customer.api.delete("/v1/conversations/no-such-conversation")
    assert missing.status_code == 404
    trail = (await customer.api.get("/v1/audit_events")).json()
    actions = [event["action"] for event in trail["audit_events"]]
    assert actions.count("conversation.delete") == 2


async def test_zero_data_retention_stores_no_item_and_no_recording(
    app: FastAPI, server: Server, customer: Customer
) -> None:
    """API.md section 16: with `{"zero_data_retention": true}` no item text, tool call
    record or audio is stored; the conversation itself is, with its figures."""
    changed = await customer.api.patch(
        f"/v1/agents/{customer.agent}",
        json={"data_retention_policy": {"zero_data_retention": True}},
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["agent"]["data_retention_policy"] == {"zero_data_retention": True}
    ws = await open_conversation(server, customer, "rec-zero", AudioFormat.PCM_16000)
    async with ws:
        await stream_realtime(
            ws, speech.stream(AudioFormat.PCM_16000, 0.3, speech.spoken(speech.SENTENCES[0]), 1.0)
        )
        await receive_until(ws, "assistant_finished_speaking", within=60)
    deadline = time.monotonic() + 10
    while True:
        found = (await customer.api.get("/v1/conversations/rec-zero")).json()["conversation"]
        if found["status"] == "ended":
            break
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)  # time enough for a recording to have been kept, were there one
    found = (await customer.api.get("/v1/conversations/rec-zero")).json()["conversation"]
    assert found["items"] == []
    assert found["audio_url"] is None
    assert len(found["analysis"]["latencies_ms"]) == 1  # what was measured is not what was said
    store = app.state.context.recordings
    assert isinstance(store, DirectoryStore)
    assert list(store.root.rglob("*.wav")) == []


async def test_recording_of_a_phone_call_is_8khz_caller_left_agent_right(
    app: FastAPI, server: Server, customer: Customer
) -> None:
    """A call over the simulated carrier's Media Streams: the recording is at the call's
    8 kHz, the welcome and the answer on the right channel where the carrier played them,
    the caller's words on the left where the caller said them."""
    line = await make_line(customer, server)
    twiml = await line.call()
    conversation_id = twiml.parameters["conversation_id"]
    stream = await line.stream(twiml)
    try:
        await line.until_status(conversation_id, "live", within=10)
        await stream.wait_played(1.0, within=20)
        await stream.wait_silent(within=20)
        sentence = speech.SENTENCES[0]
        await stream.speak(phone_frames(0.3, speech.spoken(sentence), 0.2))
        said_at = stream.speech_started_at
        await line.until_items(conversation_id, 3, within=60)
        await stream.wait_silent(within=30)
    finally:
        await stream.close()
    assert said_at is not None
    conversation = await recorded(customer, conversation_id)
    async with httpx.AsyncClient() as plain:
        got = await plain.get(local(server, conversation["audio_url"]))
    rate, left, right = channels(got.content)
    assert rate == 8_000
    agent, caller = voiced(right, rate), voiced(left, rate)
    sounding = [at for at, frame in stream.heard.played if loud(frame)]
    welcome_at = sounding[0]  # the carrier's clock: the welcome's first voiced frame
    spoke = said_at - welcome_at + 0.3 + speech_bounds(sentence)[0]
    assert abs((caller[0] - agent[0]) - spoke) < 0.2, (caller[0], agent[0], spoke)
    answer_at = next(at for at in sounding if at > said_at) - welcome_at
    answered = agent[agent > caller[-1]]
    assert answered.size > 0  # the answer is in the recording, after the caller's words
    assert abs((answered[0] - agent[0]) - answer_at) < 0.25, (answered[0] - agent[0], answer_at)


async def test_config_data_retention_policy_overrides_the_agents_for_one_conversation(
    app: FastAPI, server: Server, customer: Customer
) -> None:
    """API.md section 16: `data_retention_policy` is a `config` option too; the agent's
    other conversations keep its own policy."""
    zero = {"zero_data_retention": True}
    ws = await open_conversation(
        server, customer, "rec-config-zero", AudioFormat.PCM_16000, data_retention_policy=zero
    )
    async with ws:
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Where is it?"}))
        await receive_until(ws, "assistant_finished_speaking", within=60)
    ws = await open_conversation(server, customer, "rec-config-kept", AudioFormat.PCM_16000)
    async with ws:
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Where is it?"}))
        await receive_until(ws, "assistant_finished_speaking", within=60)
    kept = await recorded(customer, "rec-config-kept")  # recorded: the agent's default
    assert [item["role"] for item in kept["items"]] == ["user", "assistant"]
    zeroed = (await customer.api.get("/v1/conversations/rec-config-zero")).json()
    assert zeroed["conversation"]["items"] == []
    assert zeroed["conversation"]["audio_url"] is None
    store = app.state.context.recordings
    assert isinstance(store, DirectoryStore)
    assert list(store.root.rglob("rec-config-zero.wav")) == []
    bad = await open_conversation_refused(server, customer, {"zero_data_retention": "no"})
    assert bad["type"] == "error"
    assert bad["error"]["code"] == "validation_error"


async def open_conversation_refused(
    server: Server, customer: Customer, policy: dict[str, Any]
) -> dict[str, Any]:
    """The error frame a `config` with this retention policy gets."""
    async with connect(f"{server.ws}/v1/sts/ws?jwt={customer.jwt('rec-config-bad')}") as ws:
        config = {"type": "config", "agent": customer.agent, "data_retention_policy": policy}
        await ws.send(json.dumps(config))
        return await receive(ws)


def loud(frame: bytes) -> bool:
    """Whether a 20 ms mu-law frame the carrier played holds sound."""
    samples = mulaw_decode(frame).astype(np.float32) / 32768.0
    return float(np.sqrt(np.mean(samples**2))) > VOICED_RMS
