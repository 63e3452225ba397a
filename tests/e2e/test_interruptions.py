"""Interruptions that are meant (API.md section 18) over real uvicorn: on the socket, a
backchannel over the agent pauses its audio and it goes on, `min_words_to_interrupt` in the
`config` keeps one word from cutting it; on a call (the simulated carrier), the carrier gets
`clear` at the onset, then the rest of the reply from where it stopped."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from parley.engine import AudioFormat
from parley.engine.barge_in import MAX_HOLD_S
from tests import overlaps, speech
from tests.carrier import phone_frames
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_phone_calls import make_line
from tests.e2e.test_voice import items, open_conversation, speech_bounds, stream_realtime
from tests.e2e.test_ws import receive, receive_until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

FMT = AudioFormat.PCM_16000


async def test_socket_backchannel_and_short_word_pause_agent_then_it_goes_on(
    server: Server, customer: Customer
) -> None:
    ws = await open_conversation(server, customer, "meant-1", FMT, min_words_to_interrupt=2)
    received: list[tuple[float, dict[str, Any]]] = []
    async with ws:
        await ws.send(json.dumps({"type": "say", "text": overlaps.REPLY}))

        async def collect() -> None:
            while True:
                message = await receive(ws, within=60)
                received.append((time.monotonic(), message))
                if message["type"] in ("assistant_finished_speaking", "interrupted_response"):
                    return

        first = await receive_until(ws, "audio_chunk", within=60)
        received.extend((time.monotonic(), message) for message in first)
        collector = asyncio.create_task(collect())
        await asyncio.sleep(1.0)  # the agent is audible
        sounds = (speech.spoken("Uh-huh."), 1.5, speech.spoken(overlaps.SHORT), 1.5)
        started = await stream_realtime(ws, speech.stream(FMT, 0.0, *sounds))
        await asyncio.wait_for(collector, 90)
    kinds = [m["type"] for _, m in received]
    assert kinds[-1] == "assistant_finished_speaking", kinds
    for absent in ("user_started_speaking", "input_text", "interrupted_response"):
        assert absent not in kinds
    said = " ".join(m["text"] for _, m in received if m["type"] == "audio_chunk" and m["text"])
    assert said == overlaps.REPLY
    second = started + (len(sounds[0]) / speech.RATE + 1.5)
    for onset in (started + speech_bounds("Uh-huh.")[0], second + speech_bounds("Wait.")[0]):
        # the agent's audio stopped within 300 ms of each sound's onset, and stayed paused
        arrivals = [at for at, m in received if m["type"] == "audio_chunk"]
        assert not [at for at in arrivals if onset + 0.3 < at < onset + 0.6], onset
        assert any(at > onset + 0.6 for at in arrivals)  # then it went on
    _status, stored = await items(customer, "meant-1")
    assert stored == [("assistant", overlaps.REPLY)]  # no user item, the whole reply


async def test_call_speech_over_agent_clear_then_rest_of_reply_sent_again(
    customer: Customer, server: Server
) -> None:
    line = await make_line(customer, server, welcome=overlaps.REPLY, min_words_to_interrupt=3)
    twiml = await line.call()
    conversation_id = twiml.parameters["conversation_id"]
    stream = await line.stream(twiml)
    try:
        await stream.wait_played(1.5, within=30)
        await stream.speak(phone_frames(speech.spoken(overlaps.SHORT), 0.6))
        assert stream.speech_started_at is not None
        onset = stream.speech_started_at + speech_bounds(overlaps.SHORT)[0]
        found = await line.until_items(conversation_id, 1, within=40)
        await stream.wait_silent(within=20)
    finally:
        await stream.close()
    heard = stream.heard
    assert len(heard.clears) == 1, heard.clears
    assert heard.clears[0] - onset <= 0.3, heard.clears[0] - onset
    before = [frame for at, frame in heard.played if at < heard.clears[0]]
    after = [(at, frame) for at, frame in heard.played if at >= heard.clears[0]]
    assert after, "the rest of the reply was not sent again"
    resumed_at, first_again = after[0]
    assert resumed_at - heard.clears[0] < MAX_HOLD_S + 0.5  # at once, or when the hold ends
    # It goes on from the frame the carrier stopped in, or the one after it: not from the
    # audio the engine had sent ahead (dropped by the clear) nor from the start.
    assert first_again == before[-1] or first_again not in before
    assert found == [("assistant", overlaps.REPLY)]  # the whole reply, no user turn
    total = heard.played_seconds()
    assert total < len(speech.spoken(overlaps.REPLY)) / speech.RATE * 1.6  # nothing twice
