"""When a user's turn ends, over the real WebSocket: the end-of-turn model, and silence alone.

Speech is hibari's, rendered at test time; a pause inside a sentence is silence put between
two of its words (tests/pauses.py), streamed in real time in 20 ms chunks.
"""

from __future__ import annotations

import asyncio
import base64
import json
import statistics
import time
from typing import Any

import pytest

from parley.engine import AudioFormat
from tests import pauses, speech
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_voice import items, open_conversation, stream_realtime
from tests.e2e.test_ws import receive, receive_until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

FMT = AudioFormat.PCM_16000
SEMANTIC = {"turn_detection": "semantic"}
VAD = {"turn_detection": "vad"}


async def talk(
    server: Server, customer: Customer, conversation: str, audio: Any, trailing_s: float = 2.0
) -> tuple[float, list[tuple[float, dict[str, Any]]]]:
    """Stream 0.3 s of silence, the audio, then silence; return the stream's start and every
    message received until 1.5 s after the last reply ended (monotonic arrival times)."""
    received: list[tuple[float, dict[str, Any]]] = []
    ws = await open_conversation(server, customer, conversation, FMT)
    async with ws:

        async def collect() -> None:
            while True:
                message = await receive(ws, within=60)
                received.append((time.monotonic(), message))

        collector = asyncio.create_task(collect())
        started = await stream_realtime(ws, speech.stream(FMT, 0.3, audio, trailing_s))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # until the reply to the last turn has ended
            kinds = [m["type"] for _, m in received]
            replies = kinds.count("assistant_finished_speaking") + kinds.count(
                "interrupted_response"
            )
            if kinds.count("user_finished_speaking") <= replies:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)
        collector.cancel()
    return started, received


def spelled(text: str) -> str:
    """The transcript with Whisper's digits as the sentence's words ("2" -> "two")."""
    names = "zero one two three four five six seven eight nine ten".split()
    return " ".join(names[int(w)] if w.isdigit() and int(w) <= 10 else w for w in text.split())


def kinds_of(received: list[tuple[float, dict[str, Any]]]) -> list[str]:
    return [m["type"] for _, m in received]


@pytest.mark.parametrize("app_settings", [SEMANTIC], ids=["semantic"])
@pytest.mark.parametrize("pause_s", [0.5, 0.8], ids=["500ms", "800ms"])
async def test_semantic_mid_sentence_pause_one_turn_one_reply(
    server: Server, customer: Customer, pause_s: float
) -> None:
    sentence = speech.SENTENCES[0]  # "Please book me a table for, ... two at seven tonight."
    audio, _pause_at, _end = pauses.paused(sentence, "for", pause_s)
    conversation = f"pause-{round(pause_s * 1000)}"
    _started, received = await talk(server, customer, conversation, audio)
    kinds = kinds_of(received)
    assert kinds.count("user_started_speaking") == 1, kinds
    assert kinds.count("user_finished_speaking") == 1, kinds
    assert kinds.count("input_text") == 1, kinds
    assert "interrupted_response" not in kinds
    heard = next(m["text"] for _, m in received if m["type"] == "input_text")
    assert speech.word_errors(sentence, spelled(heard)) <= 1, heard  # every word, one turn
    _status, stored = await items(customer, conversation)
    assert [role for role, _ in stored] == ["user", "assistant"]
    assert stored[0] == ("user", heard)


@pytest.mark.parametrize("app_settings", [SEMANTIC], ids=["semantic"])
async def test_semantic_complete_sentence_turn_ends_before_the_longest_wait(
    server: Server, customer: Customer
) -> None:
    """A finished thought ends the turn on the model's word, well before the 1.5 s of
    silence that ends any turn. The median over three sentences of the end of speech to
    `user_finished_speaking` is held to 1 s here, which no load makes it miss unless the
    model's answer is ignored; how fast it is (0.31-0.43 s on this machine) is
    bench/turn_taking.py's to measure, not a test's to time.

    Sentences without a pause between clauses: a complete clause followed by 160 to 250 ms
    of silence ("My package arrived damaged, and ...") may end the turn early, a behaviour
    of the semantic mode that bench/turn_taking.py measures and docs/engine.md states.
    """
    delays = []
    for n, sentence in enumerate(speech.SENTENCES[:3]):
        audio = speech.spoken(sentence)
        started, received = await talk(server, customer, f"complete-{n}", audio)
        kinds = kinds_of(received)
        assert kinds.count("user_finished_speaking") == 1, kinds
        finished = next(t for t, m in received if m["type"] == "user_finished_speaking")
        spoken_until = started + 0.3 + pauses.with_pause(sentence, 0.0, 0.0)[2]
        delays.append(finished - spoken_until)
    assert statistics.median(delays) < 1.0, delays


@pytest.mark.parametrize("app_settings", [SEMANTIC], ids=["semantic"])
async def test_semantic_answer_after_the_last_chunk_ends_the_turn(
    server: Server, customer: Customer
) -> None:
    """A client that stops sending at the silence still gets its turn ended: the whole
    sentence and 0.35 s of silence (enough for the model's answer to count, less than
    silence alone needs) are sent at once, so the model answers after the last chunk was
    heard, and that answer ends the turn."""
    ws = await open_conversation(server, customer, "stops-at-silence", FMT)
    async with ws:
        for chunk in speech.stream(FMT, 0.3, speech.spoken(speech.SENTENCES[1]), 0.35):
            await ws.send(
                json.dumps({"type": "audio_chunk", "audio": base64.b64encode(chunk).decode()})
            )
        messages = await receive_until(ws, "assistant_finished_speaking", within=30)
    kinds = [m["type"] for m in messages]
    assert kinds.count("user_finished_speaking") == 1, kinds
    assert kinds.index("user_finished_speaking") < kinds.index("assistant_started_speaking")
    heard = next(m["text"] for m in messages if m["type"] == "input_text")
    assert speech.word_errors(speech.SENTENCES[1], spelled(heard)) <= 1, heard


@pytest.mark.parametrize("app_settings", [VAD], ids=["vad"])
async def test_vad_mode_pause_of_500ms_ends_the_turn_as_before(
    server: Server, customer: Customer
) -> None:
    """`vad`: 400 ms of silence ends a turn, so a 500 ms pause makes two turns."""
    sentence = speech.SENTENCES[0]
    audio, _pause_at, _end = pauses.paused(sentence, "for", 0.5)
    _started, received = await talk(server, customer, "vad-pause", audio)
    kinds = kinds_of(received)
    assert kinds.count("user_finished_speaking") == 2, kinds
    assert kinds.count("input_text") == 2, kinds


@pytest.mark.parametrize("app_settings", [VAD], ids=["vad"])
async def test_vad_mode_turn_ends_after_400ms_of_silence(
    server: Server, customer: Customer
) -> None:
    sentence = speech.SENTENCES[1]
    started, received = await talk(server, customer, "vad-complete", speech.spoken(sentence))
    finished = next(t for t, m in received if m["type"] == "user_finished_speaking")
    delay = finished - (started + 0.3 + pauses.with_pause(sentence, 0.0, 0.0)[2])
    assert 0.4 <= delay < 1.0, delay


async def test_turn_detection_default_is_semantic_with_the_model_installed(
    app: Any,
) -> None:
    assert app.state.engine_factory.turn_model is not None
