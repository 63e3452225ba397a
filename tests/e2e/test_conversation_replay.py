"""`conversations.replay` through the official SDK (API.md section 17), over real uvicorn: a
real conversation over the real WebSocket with real speech (hibari), recorded; its replay
feeds the recording's user channel to the real recognizer at real-time pace, and the new
conversation hears the same words."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from phonic import AsyncPhonic
from phonic.environment import PhonicEnvironment

from parley.engine import AudioFormat
from tests import speech
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_recordings import recorded
from tests.e2e.test_voice import open_conversation, stream_realtime
from tests.e2e.test_ws import receive_until

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.e2e,
    # One database: the replay is the session's and the engine's work; a real-time
    # conversation and its replay cost half a minute.
    pytest.mark.parametrize("database_url", ["postgres"], indirect=True),
    # The SDK's conversations module imports websockets' legacy API, which warns on import.
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]


@pytest.fixture
def app_settings(tmp_path: Path) -> dict[str, Any]:
    """A recordings directory on either database (PostgreSQL needs it named)."""
    return {"recordings_dir": tmp_path / "recordings"}


@pytest.fixture
async def sdk(server: Server, customer: Customer) -> AsyncIterator[AsyncPhonic]:
    async with httpx.AsyncClient(timeout=10) as http:
        environment = PhonicEnvironment(base=f"{server.http}/v1", production=server.ws)
        yield AsyncPhonic(api_key=customer.api_key, environment=environment, httpx_client=http)


async def ended(customer: Customer, conversation_id: str, within: float) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        response = await customer.api.get(f"/v1/conversations/{conversation_id}")
        assert response.status_code == 200, response.text
        conversation: dict[str, Any] = response.json()["conversation"]
        if conversation["status"] == "ended":
            return conversation
        assert time.monotonic() < deadline, conversation
        await asyncio.sleep(0.2)


def said_by_user(conversation: dict[str, Any]) -> list[str]:
    return [item["text"] for item in conversation["items"] if item["role"] == "user"]


async def test_sdk_conversations_replay_new_conversation_hears_the_same_words(
    server: Server, customer: Customer, sdk: AsyncPhonic
) -> None:
    fmt = AudioFormat.PCM_16000
    sentence = speech.SENTENCES[0]
    ws = await open_conversation(server, customer, "replayed-1", fmt)
    async with ws:
        await stream_realtime(ws, speech.stream(fmt, 0.4, speech.spoken(sentence), 1.0))
        await receive_until(ws, "assistant_finished_speaking", within=30)
    original = await recorded(customer, "replayed-1")
    heard = said_by_user(original)
    assert len(heard) == 1
    assert speech.word_errors(sentence, heard[0]) == 0, heard

    started = await sdk.conversations.replay("replayed-1")

    new_id = started.conversation_id  # type: ignore[attr-defined]
    assert started.message
    assert new_id != "replayed-1"
    replay = await ended(customer, new_id, within=30)
    assert said_by_user(replay) == heard
    assert [item["role"] for item in replay["items"]] == ["user", "assistant"]
    assert (replay["origin"], replay["replay_of"]) == ("replay", "replayed-1")
    assert replay["agent"]["name"] == customer.agent
    assert replay["ended_by"] == "user"
    # It took the recording's own time: the user's words came at real-time pace.
    assert replay["duration_ms"] >= original["duration_ms"] - 500


async def test_conversations_replay_refusals(server: Server, customer: Customer) -> None:
    fmt = AudioFormat.PCM_16000
    ws = await open_conversation(server, customer, "still-live", fmt)
    async with ws:
        live = await customer.api.post("/v1/conversations/still-live/replay")
        assert (live.status_code, live.json()["error"]["code"]) == (409, "conversation_live")
    unknown = await customer.api.post("/v1/conversations/nothing-here/replay", json={})
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (
        404,
        "conversation_not_found",
    )
    pending = await customer.api.post("/v1/conversations", json={"agent": customer.agent})
    pending_id = pending.json()["conversation"]["id"]
    ended_now = await customer.api.post(f"/v1/conversations/{pending_id}/end")
    assert ended_now.status_code == 200
    silent = await customer.api.post(f"/v1/conversations/{pending_id}/replay")
    assert (silent.status_code, silent.json()["error"]["code"]) == (409, "no_recording")
    bad = await customer.api.post(f"/v1/conversations/{pending_id}/replay", json={"agent": 7})
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "validation_error")
