"""A phone call outlives no process that served it (API.md section 13: "a call whose
instance crashed is ended by another as an orphan, `ended_by` `shutdown`").

`parley serve` runs as a real process on embedded SQLite; a simulated carrier (tests/carrier.py)
places a real call to it and streams in real time; the test kills the process with -9
mid-call, as a power cut would, and restarts it (or lets a second instance end the orphan).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.carrier import MediaStream, SimulatedCarrier, Twiml
from tests.faults.serve_process import ServeProcess

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

AUDIENCE = "parley.test"
DATABASE: dict[str, Any] = {
    "PARLEY_DATABASE_URL": "sqlite:///parley.db",
    "PARLEY_PUBLIC_URL": f"https://{AUDIENCE}",
}
MEDIA_PATH = "/v1/telephony/twilio/media"
WELCOME = "Thank you for calling the hotel. " * 6


def api(serve: ServeProcess, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=serve.http, headers={"Authorization": f"Bearer {key}"})


async def place_call(serve: ServeProcess, key: str) -> Twiml:
    """Set a carrier account and an agent with a number on `serve`; call it."""
    async with api(serve, key) as client:
        carrier = SimulatedCarrier(
            http=client, voice_url=f"https://{AUDIENCE}/v1/telephony/twilio/voice"
        )
        body = {"account_sid": carrier.account_sid, "auth_token": carrier.auth_token}
        assert (await client.put("/v1/telephony/twilio", json=body)).status_code == 200
        number = "+1415" + "".join(str(secrets.randbelow(10)) for _ in range(7))
        made = await client.post(
            "/v1/agents",
            json={"name": "desk", "welcome_message": WELCOME, "phone_numbers": [number]},
        )
        assert made.status_code == 201, made.text
        twiml = await carrier.call(to=number)
    assert not twiml.rejected
    return twiml


async def status(serve: ServeProcess, key: str, conversation_id: str) -> dict[str, object]:
    async with api(serve, key) as client:
        answer = await client.get(f"/v1/conversations/{conversation_id}")
    assert answer.status_code == 200, answer.text
    found: dict[str, object] = answer.json()["conversation"]
    return found


async def live_call(serve: ServeProcess, key: str) -> tuple[MediaStream, Twiml]:
    twiml = await place_call(serve, key)
    stream = await MediaStream.open(serve.ws + MEDIA_PATH, twiml.parameters)
    await stream.wait_played(0.5, within=30)  # the agent is speaking: the call is live
    found = await status(serve, key, twiml.parameters["conversation_id"])
    assert found["status"] == "live"
    return stream, twiml


async def test_kill_9_mid_call_then_restart_leaves_no_live_call(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path, **DATABASE)
    try:
        serve.start()
        assert serve.first_key is not None
        key = serve.first_key
        stream, twiml = await live_call(serve, key)
        conversation_id = twiml.parameters["conversation_id"]
        serve.kill()
        code, _ = await stream.wait_closed(within=10)  # the carrier sees the socket drop
        assert code != 1000
        await stream.close()
        serve.start()  # the same instance, in its next life
        ended = await status(serve, key, conversation_id)
        assert ended["status"] == "ended"
        assert ended["ended_by"] == "shutdown"
        # The carrier retrying the stream gets nothing started: the token was used.
        again = await MediaStream.open(serve.ws + MEDIA_PATH, twiml.parameters)
        try:
            assert (await again.wait_closed(within=10)) == (1008, "invalid_stream_token")
        finally:
            await again.close()
        assert (await status(serve, key, conversation_id))["status"] == "ended"
    finally:
        serve.ensure_stopped()


async def test_kill_9_mid_call_orphan_ended_by_another_instance(tmp_path: Path) -> None:
    lease: dict[str, Any] = {"PARLEY_CONVERSATION_LEASE_SECONDS": "2"}
    first = ServeProcess(tmp_path, PARLEY_INSTANCE_ID="first", **lease, **DATABASE)
    second = ServeProcess(tmp_path, PARLEY_INSTANCE_ID="second", **lease, **DATABASE)
    try:
        first.start()
        assert first.first_key is not None
        key = first.first_key
        second.start()
        stream, twiml = await live_call(first, key)
        conversation_id = twiml.parameters["conversation_id"]
        first.kill()
        started = time.monotonic()
        while (await status(second, key, conversation_id))["status"] == "live":
            assert time.monotonic() - started < 10, "the orphaned call stayed live"
            await asyncio.sleep(0.2)
        assert (await status(second, key, conversation_id))["ended_by"] == "shutdown"
        await stream.close()
    finally:
        first.ensure_stopped()
        second.ensure_stopped()
