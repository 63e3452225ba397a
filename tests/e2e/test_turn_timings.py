"""Honest turn timings over real uvicorn (API.md section 18), measured against the client.

A client streams hibari's speech in real time and notes when the chunk holding its last
voiced sample left and when the reply's first audio came; the stored `latencies_ms`, the
`analysis.turns` and the first `audio_chunk`'s `timings` must agree with it within
`TOLERANCE_MS`.
On a call (the simulated carrier) `played_ms` is the carrier's echo of the mark after the
reply's first audio. A client that stops sending after its speech still gets its reply.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.client import ClientConnection

from parley.engine import AudioFormat, Samples
from tests import speech
from tests.carrier import MediaStream, phone_frames
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_phone_calls import Line, call, line  # noqa: F401 - fixtures
from tests.e2e.test_voice import open_conversation

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

TOLERANCE_MS = 150
"""How far the server's figures may be from the client's here. A figure counted from the
end-of-turn decision, as before issue #42, is off by the end-of-turn wait (300 ms at least),
so this tells an honest figure from a dishonest one on a loaded machine, where one stall
of the event loop the client and server share once cost 62 ms (a CI run at 4 workers on 2
cores). The issue's goal, 60 ms every turn, is a benchmark's (bench/voice_turn.py,
docs/performance.md "Honest turn timings"), measured on a quiet machine."""
FMT = AudioFormat.PCM_16000
STAGES = (
    "endpointing_ms",
    "transcription_ms",
    "model_first_token_ms",
    "speech_first_audio_ms",
    "total_ms",
)


def voiced_only(sentence: str) -> Samples:
    """The sentence cut after its last voiced sample (the voice's own silence dropped)."""
    audio = speech.spoken(sentence)
    return audio[: np.flatnonzero(np.abs(audio) > 0.01)[-1] + 1]


@dataclass
class Client:
    """A socket client that streams in real time and notes when things left and came."""

    ws: ClientConnection
    messages: list[tuple[float, dict[str, Any]]] = field(default_factory=list)

    async def read(self) -> None:
        async for data in self.ws:
            self.messages.append((time.monotonic(), json.loads(data)))

    async def say(self, sentence: str, *, after: float) -> float:
        """Stream 0.3 s of silence, the sentence, `after` seconds of silence; return when
        the chunk holding its last voiced sample was sent."""
        spoken = voiced_only(sentence)
        chunks = (
            speech.stream(FMT, 0.3, spoken, after) if after else speech.stream(FMT, 0.3, spoken)
        )
        last_voiced = len(speech.stream(FMT, 0.3, spoken)) - 1
        started = time.monotonic()
        sent_at = 0.0
        for index, chunk in enumerate(chunks):
            if index == last_voiced:
                sent_at = time.monotonic()
            audio = base64.b64encode(chunk).decode()
            await self.ws.send(json.dumps({"type": "audio_chunk", "audio": audio}))
            await asyncio.sleep(max(0.0, started + 0.02 * (index + 1) - time.monotonic()))
        return sent_at

    def first_audio_after(self, since: float) -> tuple[float, dict[str, Any]]:
        return next((at, m) for at, m in self.messages if at > since and m["type"] == "audio_chunk")

    async def until(self, kind: str, *, count: int, within: float) -> None:
        deadline = time.monotonic() + within
        while sum(m["type"] == kind for _, m in self.messages) < count:
            assert time.monotonic() < deadline, [m["type"] for _, m in self.messages]
            await asyncio.sleep(0.02)


async def ended(customer: Customer, conversation_id: str) -> dict[str, Any]:
    for _ in range(100):
        response = await customer.api.get(f"/v1/conversations/{conversation_id}")
        found: dict[str, Any] = response.json()["conversation"]
        if found["status"] == "ended":
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(found["status"])


async def test_timings_stored_latency_and_stages_agree_with_the_clients_own_measurement(
    server: Server, customer: Customer
) -> None:
    ws = await open_conversation(server, customer, "timings-1", FMT)
    client = Client(ws)
    measured: list[tuple[float, float, dict[str, Any]]] = []  # (client ms, …)
    async with ws:
        reader = asyncio.create_task(client.read())
        for number, sentence in enumerate(speech.SENTENCES[:2], start=1):
            last_voiced = await client.say(sentence, after=1.5)
            await client.until("assistant_finished_speaking", count=number, within=60)
            came, first = client.first_audio_after(last_voiced)
            measured.append(((came - last_voiced) * 1000, last_voiced, first))
        await ws.close()
        await asyncio.wait_for(reader, 10)
    found = await ended(customer, "timings-1")

    analysis = found["analysis"]
    assert len(analysis["latencies_ms"]) == 2, analysis
    assistant_items = [item["id"] for item in found["items"] if item["role"] == "assistant"]
    for (client_ms, _, first), stored, turn, item_id in zip(
        measured, analysis["latencies_ms"], analysis["turns"], assistant_items, strict=True
    ):
        assert abs(stored - client_ms) <= TOLERANCE_MS, (stored, client_ms)
        assert turn["total_ms"] == stored
        assert turn["item_id"] == item_id  # the reply's assistant item
        assert turn["played_ms"] is None  # no carrier: nothing echoes a mark
        assert first["timings"] == {name: turn[name] for name in STAGES}
        assert turn["endpointing_ms"] >= 350  # the 400 ms of silence, counted honestly
        assert sum(turn[name] for name in STAGES[:-1]) <= turn["total_ms"]
    by_route = await customer.api.get("/v1/conversations/timings-1/analysis")
    assert by_route.json()["analysis"]["turns"] == analysis["turns"]


async def test_timings_push_to_talk_client_that_stops_sending_after_speech_gets_its_reply(
    server: Server, customer: Customer
) -> None:
    """After speech, silence is time: not a frame after the last voiced one, yet the turn
    ends on the wall clock, as timely as with frames."""
    ws = await open_conversation(server, customer, "timings-ptt", FMT)
    client = Client(ws)
    async with ws:
        reader = asyncio.create_task(client.read())
        last_voiced = await client.say(speech.SENTENCES[3], after=0.0)
        await client.until("input_text", count=1, within=20)
        await client.until("assistant_finished_speaking", count=1, within=60)
        came, first = client.first_audio_after(last_voiced)
        finished = next(at for at, m in client.messages if m["type"] == "user_finished_speaking")
        await ws.close()
        await asyncio.wait_for(reader, 10)
    # No later than with frames: the longest end-of-turn wait (1.5 s, when the end-of-turn
    # model has not answered yet: on a loaded machine it waits for the words), plus the
    # VAD's window and the silence timer's tick; never sooner than the shortest (300 ms).
    assert 0.3 <= finished - last_voiced <= 1.5 + 0.1, finished - last_voiced
    found = await ended(customer, "timings-ptt")
    (stored,) = found["analysis"]["latencies_ms"]
    assert abs(stored - (came - last_voiced) * 1000) <= TOLERANCE_MS
    assert first["timings"]["total_ms"] == stored


async def test_timings_call_played_ms_is_the_carriers_echo_of_the_first_audios_mark(
    line: Line,  # noqa: F811 - the fixture
    call: tuple[MediaStream, str],  # noqa: F811 - the fixture
) -> None:
    stream, conversation_id = call
    echoed_before = len(stream.heard.marks_echoed)
    media_before = len(stream.heard.first_media_at)
    last_voiced = await stream.speak(phone_frames(0.3, voiced_only(speech.SENTENCES[0])))
    await line.until_items(conversation_id, 3, within=60)
    await stream.wait_silent(within=30)
    first_media = stream.heard.first_media_at[media_before]
    echo = next(at for at, _ in stream.heard.marks_echoed[echoed_before:] if at > first_media)
    await stream.stop()
    await line.until_status(conversation_id, "ended", within=10)
    found = await line.conversation(conversation_id)

    (turn,) = found["analysis"]["turns"]
    assert abs(turn["total_ms"] - (first_media - last_voiced) * 1000) <= TOLERANCE_MS
    assert abs(turn["played_ms"] - (echo - last_voiced) * 1000) <= TOLERANCE_MS
    assert turn["played_ms"] > turn["total_ms"]
    assert found["analysis"]["latencies_ms"] == [turn["total_ms"]]
