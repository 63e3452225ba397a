"""Redaction of a real conversation (API.md section 16, "Redaction"): real uvicorn, the real
WebSocket, real speech (hibari saying a phone number as words), the real recognizer, a
language model on loopback and a webhook receiver. What is stored, sent to webhooks and
logged holds a tag where the number was; the recording holds a 1 kHz tone where it was said;
the model got the words as heard."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import pytest

from parley.cli.serve import configure_logging
from parley.engine import AudioFormat
from tests import speech
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_recordings import channels, local, recorded
from tests.e2e.test_voice import open_conversation, stream_realtime
from tests.e2e.test_ws import receive_until
from tests.llm_server import ChatServer, running_chat_server
from tests.webhook_receiver import WebhookReceiver, running_receiver

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

LEAD = "Call me at"
NUMBER = "four one five five five five two six seven one."
PAUSE_S = 0.15
"""Between the two, so they make one turn (the voice's own silences around each cut off)."""
SILENCE_S = 0.3
ANSWER = ["Noted. ", "I will call 415-555-2671 tomorrow."]
DIGITS = re.compile(r"\d{3}")


def said_again(heard: str) -> re.Pattern[str]:
    """What would give the number away: the runs of 4 or more digits heard or answered, as
    whole tokens (not inside an ID), the first group as the answer writes it, or the words."""
    runs = set(re.findall(r"\d{4,}", heard)) | {"2671", "415-555"}
    alternatives = "|".join(re.escape(run) for run in sorted(runs))
    return re.compile(rf"(?<![0-9a-zA-Z])(?:{alternatives})(?![0-9a-zA-Z])|five five")


TAG = re.compile(r"\[(PHONE_NUMBER|SSN|CREDIT_CARD)\]")


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def hooks() -> Iterator[WebhookReceiver]:
    with running_receiver() as receiver:
        yield receiver


@pytest.fixture
def app_settings(tmp_path: Path, chat: ChatServer) -> dict[str, Any]:
    return {
        "recordings_dir": tmp_path / "recordings",
        "llm_base_url": chat.base_url,
        "llm_api_key": "sk-test",
        "llm_model": "bistro-7b",
        "llm_timeout_seconds": 5.0,
        "outbound_allow_http": True,  # the webhook receiver on loopback
        "outbound_allow_private_networks": True,
    }


async def ended_body(hooks: WebhookReceiver, conversation_id: str) -> dict[str, Any]:
    """The conversation.ended webhook's body for the conversation, once delivered."""
    deadline = time.monotonic() + 15
    while True:
        for request in hooks.requests:
            body: dict[str, Any] = json.loads(request.body)
            if (
                body["event_type"] == "conversation.ended"
                and body["data"]["conversation"]["id"] == conversation_id
            ):
                return body
        assert time.monotonic() < deadline, hooks.requests
        await asyncio.sleep(0.1)


def tone_windows(samples: npt.NDArray[np.float32], rate: int, start: float, end: float) -> float:
    """The share of the 50 ms windows of `start`..`end` (s) that are the redaction tone:
    strongest at 1 kHz, at its level (-12 dBFS peak)."""
    size = round(0.05 * rate)
    first, last = round(start * rate), round(end * rate)
    found = []
    for at in range(first, last - size + 1, size):
        window = samples[at : at + size].astype(np.float64)
        peak = np.fft.rfftfreq(size, 1 / rate)[np.argmax(np.abs(np.fft.rfft(window)))]
        level = np.sqrt(np.mean(window**2))
        found.append(abs(peak - 1000) <= 20 and abs(level - 0.251 / np.sqrt(2)) < 0.01)
    return sum(found) / len(found)


def voiced_part(samples: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The samples from the first to the last that sounds (hibari's silences cut off)."""
    loud = np.flatnonzero(np.abs(samples) > 0.01)
    return samples[loud[0] : loud[-1] + 1]


async def test_redaction_of_a_spoken_phone_number_stored_sent_logged_and_recorded_as_tags_and_tone(
    server: Server,
    customer: Customer,
    chat: ChatServer,
    hooks: WebhookReceiver,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    configure_logging("debug")  # as `parley serve` with PARLEY_LOG_LEVEL=debug
    patched = await customer.api.patch(
        f"/v1/agents/{customer.agent}", json={"enable_redaction": True}
    )
    assert patched.status_code == 200, patched.text
    hook = {"url": hooks.url(), "event_types": ["conversation.ended"]}
    assert (await customer.api.post("/v1/webhooks", json=hook)).status_code == 201
    chat.script.reply = ANSWER
    lead, number = voiced_part(speech.spoken(LEAD)), voiced_part(speech.spoken(NUMBER))
    fmt = AudioFormat.PCM_16000
    ws = await open_conversation(server, customer, "redact-1", fmt)
    async with ws:
        await stream_realtime(
            ws,
            speech.stream(fmt, SILENCE_S, lead, PAUSE_S, number, 1.0),
        )
        said = await receive_until(ws, "assistant_finished_speaking", within=60)
    heard = next(m["text"] for m in said if m["type"] == "input_text")
    assert DIGITS.search(heard), heard  # the recognizer heard the number...
    messages = chat.requests[-1].body["messages"]
    assert {"role": "user", "content": heard} in messages  # ...and the model got it so

    conversation = await recorded(customer, "redact-1")
    assert conversation["is_redacted"] is True
    texts = [item["text"] for item in conversation["items"]]
    assert [item["role"] for item in conversation["items"]] == ["user", "assistant"]
    assert TAG.search(texts[0]), texts
    assert texts[1] == "Noted. I will call [PHONE_NUMBER] tomorrow."
    assert not any(DIGITS.search(text) for text in texts), texts

    body = await ended_body(hooks, "redact-1")
    assert body["data"]["conversation"]["is_redacted"] is True
    assert [item["text"] for item in body["data"]["conversation"]["items"]] == texts
    given_away = said_again(heard)
    assert not given_away.search(json.dumps(body)), body

    logged = [r for r in caplog.records if not r.name.startswith("websockets.client")]
    leaked = [f"{r.name}: {r.getMessage()}" for r in logged if given_away.search(r.getMessage())]
    assert leaked == []

    async with httpx.AsyncClient() as plain:
        got = await plain.get(local(server, conversation["audio_url"]))
    rate, left, right = channels(got.content)
    said_from = SILENCE_S + lead.size / speech.RATE + PAUSE_S  # where it is in the stream
    said_to = said_from + number.size / speech.RATE
    assert tone_windows(left, rate, said_from + 0.1, said_to - 0.1) > 0.9
    assert tone_windows(left, rate, SILENCE_S, SILENCE_S + 0.3) == 0  # "Call me at": heard
    agent_s = right.size / rate  # the agent's sentence with the number: toned whole
    assert tone_windows(right, rate, 0.0, agent_s) * agent_s > 1.5
