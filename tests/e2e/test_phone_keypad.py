"""`keypad_input` on a phone call (API.md sections 13 and 15): the keys the model presses are
played into the call as DTMF tones, after its words, in the outbound `media` frames. The
carrier is tests/carrier.py's simulated Twilio; the model a real OpenAI-protocol server on
loopback; the tones are read back with an FFT (tests/engine/test_dtmf.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.carrier import mulaw_decode
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_phone_calls import make_line
from tests.engine.test_dtmf import assert_pairs, strongest_pair
from tests.llm_server import Call, ChatServer, Round, running_chat_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

RATE = 8000
TONE = 800  # samples: 100 ms at 8 kHz
EDGE = 40  # samples kept off each end of a tone window (5 ms)


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def app_settings(chat: ChatServer) -> dict[str, Any]:
    return {
        "llm_base_url": chat.base_url,
        "llm_api_key": "sk-test",
        "llm_model": "bistro-7b",
        "llm_timeout_seconds": 5.0,
    }


async def test_call_keypad_input_plays_dtmf_pairs_in_order_after_the_words(
    customer: Customer, server: Server, chat: ChatServer
) -> None:
    digits = "2#9*"
    line = await make_line(customer, server, welcome=None, tools=["keypad_input"])
    keys = Call("keypad_input", [json.dumps({"digits": digits})], id="call_k1")
    chat.script.rounds.append(Round(text=["Pressing two now."], calls=[keys]))
    chat.script.rounds.append(Round(text=[]))
    twiml = await line.call()
    conversation_id = twiml.parameters["conversation_id"]
    stream = await line.stream(twiml)
    try:
        await line.until_status(conversation_id, "live", within=10)
        await stream.press("1#")
        found = await line.until_items(conversation_id, 2, within=30)
        await stream.wait_silent(within=30)
    finally:
        await stream.close()
    assert found == [("user", "DTMF: 1"), ("assistant", "Pressing two now.")]
    played = mulaw_decode(b"".join(frame for _, frame in stream.heard.played))
    samples = played.astype(np.float64) / 32768
    loud = np.flatnonzero(np.abs(samples) > 0.01)
    end = int(loud[-1]) + 1  # the last tone's end; its gap and the frame padding are silence
    starts = [end - TONE - (len(digits) - 1 - k) * 2 * TONE for k in range(len(digits))]
    windows = [samples[at + EDGE : at + TONE - EDGE] for at in starts]
    assert_pairs([strongest_pair(window, RATE) for window in windows], digits)
    for at in starts:  # each tone is followed by 100 ms of silence
        assert np.max(np.abs(samples[at + TONE + EDGE : at + 2 * TONE - EDGE])) < 0.01
    assert np.max(np.abs(samples[: starts[0] - EDGE])) > 0.05  # the words came first
    tool_turns = [m for m in chat.requests[-1].body["messages"] if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in tool_turns] == [{"success": True}]
