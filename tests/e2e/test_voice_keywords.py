"""An agent's `boosted_keywords` (API.md 4) reach the recognizer: over the real WebSocket."""

from __future__ import annotations

import pytest

from parley.engine import AudioFormat
from tests import speech
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_voice import open_conversation, stream_realtime
from tests.e2e.test_ws import receive_until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_voice_boosted_keywords_spell_the_words_heard(
    server: Server, customer: Customer
) -> None:
    sentence = "Please send it to Siobhan Quirke."  # tiny.en alone: "the Open Quirk"
    made = await customer.api.patch(
        f"/v1/agents/{customer.agent}", json={"boosted_keywords": ["Siobhan Quirke"]}
    )
    assert made.status_code == 200, made.text
    fmt = AudioFormat.PCM_16000
    ws = await open_conversation(server, customer, "keywords-1", fmt)
    async with ws:
        await stream_realtime(ws, speech.stream(fmt, 0.3, speech.spoken(sentence), 2.0))
        messages = await receive_until(ws, "input_text", within=60)
    heard = messages[-1]["text"]
    assert "Siobhan Quirke" in heard, heard
    assert speech.word_errors(sentence, heard) == 0, heard
