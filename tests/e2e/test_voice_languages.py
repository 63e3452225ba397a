"""A multilingual recognizer over the real WebSocket (PARLEY_STT_MODEL=base): the agent's
`language` (API.md 4) selects Whisper's language, `input_text.language` (API.md 8) reports
the language heard. German and Spanish speech rendered by espeak-ng (tests/languages.py)."""

from __future__ import annotations

from typing import Any

import pytest

from parley.engine import AudioFormat
from tests import languages, speech
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_voice import open_conversation, stream_realtime
from tests.e2e.test_ws import receive_until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture
def app_settings() -> dict[str, Any]:
    return {"stt_model": "base"}


async def test_voice_input_text_reports_the_language_heard(
    server: Server, customer: Customer
) -> None:
    made = await customer.api.patch(f"/v1/agents/{customer.agent}", json={"language": "de"})
    assert made.status_code == 200, made.text
    fmt = AudioFormat.PCM_16000
    ws = await open_conversation(server, customer, "languages-1", fmt)
    async with ws:
        german = languages.espeak_spoken(languages.GERMAN, "de")
        await stream_realtime(ws, speech.stream(fmt, 0.3, german, 1.5))
        first = (await receive_until(ws, "input_text", within=60))[-1]
        await receive_until(ws, "assistant_finished_speaking", within=60)
        spanish = languages.espeak_spoken(languages.SPANISH, "es")
        await stream_realtime(ws, speech.stream(fmt, 0.3, spanish, 1.5))
        second = (await receive_until(ws, "input_text", within=60))[-1]
    assert first["language"] == "de", first
    assert languages.word_errors(languages.GERMAN, first["text"]) <= 2, first
    assert second["language"] == "es", second  # heard, though the agent's language is de
