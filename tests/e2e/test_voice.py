"""Real conversations over the real WebSocket: real speech in, words, replies, speech out.

The server is uvicorn on loopback with the default engine (faster-whisper tiny.en, Silero
VAD, hibari-tts); audio is hibari speaking fixed sentences, streamed in real time in 20 ms
chunks as a client would.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from parley.engine import AudioFormat
from tests import speech
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_ws import receive, receive_until, refused, until_closed

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def open_conversation(
    server: Server, customer: Customer, conversation_id: str, fmt: AudioFormat, **extra: Any
) -> ClientConnection:
    ws = await connect(f"{server.ws}/v1/sts/ws?jwt={customer.jwt(conversation_id)}")
    config = {
        "type": "config",
        "agent": customer.agent,
        "input_format": fmt.value,
        "output_format": fmt.value,
        **extra,
    }
    await ws.send(json.dumps(config))
    assert (await receive(ws))["type"] == "conversation_created"
    assert (await receive(ws))["type"] == "ready_to_start_conversation"
    return ws


async def stream_realtime(
    ws: ClientConnection, chunks: list[bytes], chunk_s: float = 0.02
) -> float:
    """Send chunks paced in real time; return the monotonic time the stream started."""
    started = time.monotonic()
    for index, chunk in enumerate(chunks):
        await ws.send(
            json.dumps({"type": "audio_chunk", "audio": base64.b64encode(chunk).decode()})
        )
        delay = started + (index + 1) * chunk_s - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
    return started


def speech_bounds(sentence: str) -> tuple[float, float]:
    """Seconds from the start of the sentence's audio to its first and last voiced sample."""
    voiced = np.flatnonzero(np.abs(speech.spoken(sentence)) > 0.01)
    return voiced[0] / speech.RATE, voiced[-1] / speech.RATE


async def items(customer: Customer, conversation_id: str) -> tuple[str, list[tuple[str, str]]]:
    response = await customer.api.get(f"/v1/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    body = response.json()["conversation"]
    return body["status"], [(item["role"], item["text"]) for item in body["items"]]


@pytest.mark.parametrize("fmt", list(AudioFormat), ids=lambda f: f.value)
async def test_voice_spoken_sentence_heard_stored_and_answered_every_format(
    server: Server, customer: Customer, fmt: AudioFormat
) -> None:
    sentence = speech.SENTENCES[3]
    conversation = f"voice-{fmt.value}"
    ws = await open_conversation(server, customer, conversation, fmt)
    async with ws:
        await stream_realtime(ws, speech.stream(fmt, 0.4, speech.spoken(sentence), 1.0))
        messages = await receive_until(ws, "assistant_finished_speaking", within=60)
    kinds = [m["type"] for m in messages]
    assert kinds.index("user_started_speaking") < kinds.index("user_finished_speaking")
    assert kinds.index("user_finished_speaking") <= kinds.index("input_text")
    heard = next(m for m in messages if m["type"] == "input_text")
    assert heard["language"] == "en"
    assert speech.word_errors(sentence, heard["text"]) == 0, heard
    audio = b"".join(base64.b64decode(m["audio"]) for m in messages if m["type"] == "audio_chunk")
    assert fmt.duration(audio) > 1.0  # the answer, spoken in the session's format
    said = " ".join(m["text"] for m in messages if m["type"] == "audio_chunk" and m["text"])
    assert said.startswith("You said: My package arrived damaged")
    status, stored = await items(customer, conversation)
    assert stored[:2] == [("user", heard["text"]), ("assistant", said)]
    for _ in range(50):  # the server ends it as the socket goes, a moment after the client
        if status == "ended":
            break
        await asyncio.sleep(0.1)
        status, _ = await items(customer, conversation)
    assert status == "ended"
    outcome = (await customer.api.get(f"/v1/conversations/{conversation}")).json()
    assert outcome["conversation"]["ended_by"] == "user"  # the client closed


async def test_voice_reply_latency_and_interruptions_stored_as_analysis(
    server: Server, customer: Customer
) -> None:
    """API.md section 5: `analysis.latencies_ms` holds, per assistant reply to a user turn,
    the end of the user's speech to the reply's first audio; a barge-in is an interruption."""
    fmt = AudioFormat.PCM_16000
    ws = await open_conversation(server, customer, "analysis-1", fmt)
    async with ws:
        for sentence in (speech.SENTENCES[0], speech.SENTENCES[1]):
            await stream_realtime(ws, speech.stream(fmt, 0.3, speech.spoken(sentence), 1.0))
            await receive_until(ws, "assistant_finished_speaking", within=60)
        await ws.send(json.dumps({"type": "say", "text": "A long announcement. " * 8}))
        await receive_until(ws, "audio_chunk", within=30)
        await stream_realtime(ws, speech.stream(fmt, 0.1, speech.spoken(speech.SENTENCES[2]), 0.6))
        await receive_until(ws, "interrupted_response", within=30)
    for _ in range(50):
        found = (await customer.api.get("/v1/conversations/analysis-1")).json()["conversation"]
        if found["status"] == "ended":
            break
        await asyncio.sleep(0.1)
    analysis = found["analysis"]
    assert len(analysis["latencies_ms"]) >= 2  # one per answered turn (the third may be too)
    assert all(0 < latency < 5000 for latency in analysis["latencies_ms"]), analysis
    assert analysis["interruptions_count"] == 1
    assert found["ended_by"] == "user"


async def test_voice_goodbye_ends_conversation_closes_1000_and_status_ended(
    server: Server, customer: Customer
) -> None:
    ws = await open_conversation(server, customer, "bye-1", AudioFormat.PCM_16000)
    async with ws:
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Thanks, goodbye!"}))
        messages = await receive_until(ws, "assistant_ended_conversation", within=60)
        code, _reason = await until_closed(ws)
    assert "assistant_finished_speaking" in [m["type"] for m in messages]
    assert code == 1000
    status, stored = await items(customer, "bye-1")
    assert status == "ended"
    ended = (await customer.api.get("/v1/conversations/bye-1")).json()["conversation"]
    assert ended["ended_by"] == "assistant"
    assert stored[0] == ("user", "Thanks, goodbye!")
    with pytest.raises(InvalidStatus) as again:
        await connect(f"{server.ws}/v1/sts/ws?jwt={customer.jwt('bye-1')}")
    assert refused(again.value) == (
        409,
        {"error": {"message": "The conversation has ended.", "code": "conversation_ended"}},
    )


async def test_voice_client_dropping_mid_reply_leaves_no_live_conversation(
    server: Server, customer: Customer
) -> None:
    ids = [f"drop-{n}" for n in range(6)]
    sockets = [await open_conversation(server, customer, i, AudioFormat.PCM_16000) for i in ids]
    for ws in sockets:
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Tell me a story."}))
    for ws in sockets:
        await receive_until(ws, "audio_chunk", within=60)
        ws.transport.abort()  # the TCP connection drops: no close frame
    deadline = time.monotonic() + 5
    statuses: list[str] = []
    while time.monotonic() < deadline:
        statuses = [(await items(customer, i))[0] for i in ids]
        if set(statuses) == {"ended"}:
            break
        await asyncio.sleep(0.1)
    assert statuses == ["ended"] * len(ids)


async def test_voice_barge_in_stops_audio_within_200ms_and_stores_heard_text(
    server: Server, customer: Customer
) -> None:
    long_text = " ".join(speech.SENTENCES[10:16])
    sentence = speech.SENTENCES[5]
    ws = await open_conversation(server, customer, "barge-1", AudioFormat.PCM_16000)
    async with ws:
        await ws.send(json.dumps({"type": "say", "text": long_text}))
        await receive_until(ws, "audio_chunk", within=60)
        await asyncio.sleep(1.5)  # the assistant is audible
        received: list[tuple[float, dict[str, Any]]] = []

        async def collect() -> None:
            while True:
                message = await receive(ws, within=60)
                received.append((time.monotonic(), message))  # its arrival, not the wait's start
                if message["type"] == "interrupted_response":
                    return

        collector = asyncio.create_task(collect())
        started = await stream_realtime(
            ws, speech.stream(AudioFormat.PCM_16000, 0.0, speech.spoken(sentence), 1.0)
        )
        await asyncio.wait_for(collector, 20)
    onset = started + speech_bounds(sentence)[0]
    kinds = [m["type"] for _, m in received]
    noticed = next(t for t, m in received if m["type"] == "user_started_speaking")
    last_audio = max((t for t, m in received if m["type"] == "audio_chunk"), default=onset)
    assert noticed - onset <= 0.2, noticed - onset
    assert last_audio - onset <= 0.2, last_audio - onset
    assert kinds.index("interrupted_response") > kinds.index("user_started_speaking")
    interrupted = received[-1][1]["text"]
    assert interrupted
    assert long_text.startswith(interrupted)
    assert len(interrupted) < len(long_text)
    _status, stored = await items(customer, "barge-1")
    assert ("assistant", interrupted) in stored
    assert ("assistant", long_text) not in stored


async def test_voice_silent_stream_starts_no_turn(server: Server, customer: Customer) -> None:
    ws = await open_conversation(server, customer, "silent-1", AudioFormat.MULAW_8000)
    async with ws:
        for chunk in speech.stream(AudioFormat.MULAW_8000, 5.0, chunk_ms=40):
            await ws.send(
                json.dumps({"type": "audio_chunk", "audio": base64.b64encode(chunk).decode()})
            )
        await ws.send(json.dumps({"type": "say", "text": "Still there?"}))
        messages = await receive_until(ws, "assistant_finished_speaking", within=60)
    assert not {"user_started_speaking", "input_text", "error", "warning"} & {
        m["type"] for m in messages
    }


async def test_voice_ten_minute_noise_stream_no_words_conversation_intact(
    server: Server, customer: Customer
) -> None:
    fmt = AudioFormat.MULAW_8000
    rng = np.random.default_rng(11)
    ws = await open_conversation(server, customer, "noise-1", fmt)
    seen: list[dict[str, Any]] = []

    async def drain() -> None:
        while True:
            seen.append(await receive(ws, within=60))

    async with ws:
        reader = asyncio.create_task(drain())
        for _minute in range(10):  # 600 s of noise, sent faster than real time
            noise = rng.normal(0, 0.03, speech.RATE * 60).astype(np.float32)
            for chunk in speech.stream(fmt, noise, chunk_ms=40):
                await ws.send(
                    json.dumps({"type": "audio_chunk", "audio": base64.b64encode(chunk).decode()})
                )
        await ws.send(json.dumps({"type": "say", "text": "Are you still there?"}))
        deadline = time.monotonic() + 60
        while "assistant_finished_speaking" not in [m["type"] for m in seen]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        reader.cancel()
    kinds = {m["type"] for m in seen}
    assert not {"input_text", "error"} & kinds, kinds
    _status, stored = await items(customer, "noise-1")
    assert stored == [("assistant", "Are you still there?")]


async def test_voice_malformed_audio_error_frames_then_speech_still_heard(
    server: Server, customer: Customer
) -> None:
    sentence = speech.SENTENCES[6]
    ws = await open_conversation(server, customer, "malformed-1", AudioFormat.PCM_8000)
    async with ws:
        await ws.send(
            json.dumps({"type": "audio_chunk", "audio": base64.b64encode(b"abc").decode()})
        )
        odd = await receive(ws)
        await ws.send(json.dumps({"type": "audio_chunk", "audio": "not base64!"}))
        bad = await receive(ws)
        wrong_rate = speech.stream(AudioFormat.PCM_44100, speech.spoken(sentence))[
            0
        ]  # 20 ms at 44.1k
        await ws.send(
            json.dumps({"type": "audio_chunk", "audio": base64.b64encode(wrong_rate * 2).decode()})
        )
        too_long = await receive(ws)
        await stream_realtime(
            ws, speech.stream(AudioFormat.PCM_8000, 0.3, speech.spoken(sentence), 1.0)
        )
        messages = await receive_until(ws, "input_text", within=60)
    assert odd["error"]["code"] == "audio_chunk_misaligned"
    assert bad["error"]["code"] == "validation_error"
    assert bad["param_errors"] == {"audio": "must be base64"}
    assert too_long["error"]["code"] == "audio_chunk_too_long"
    assert speech.word_errors(sentence, messages[-1]["text"]) == 0
    _status, stored = await items(customer, "malformed-1")
    assert stored[0] == ("user", messages[-1]["text"])
