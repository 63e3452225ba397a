"""Recordings in the customer's bucket (API.md section 16): an external storage policy, a
real conversation over real uvicorn, and a real S3-protocol server on loopback that checks
every request's AWS Signature V4 (tests/s3_server.py). The bucket taken away mid-call and
brought back: the recording still arrives.

On PostgreSQL, the fleet's database, where external storage is what a deployment uses (the
service-level tests run the upload's rules on both databases)."""

from __future__ import annotations

import asyncio
import io
import json
import time
import wave
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from parley.engine import AudioFormat
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_voice import open_conversation
from tests.e2e.test_ws import receive_until
from tests.s3_server import S3Server, read_presigned, running_s3

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.e2e,
    pytest.mark.parametrize("database_url", ["postgres"], indirect=True),
]


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with running_s3() as server:
        yield server


@pytest.fixture
def app_settings() -> dict[str, Any]:
    """No recordings directory (PostgreSQL): recordings go to the agent's bucket only. The
    bucket is on loopback over http, which the operator's switches allow here."""
    return {"outbound_allow_http": True, "outbound_allow_private_networks": True}


async def agent_storing_in(customer: Customer, s3: S3Server) -> None:
    created = await customer.api.post("/v1/external_storage_policies", json=s3.policy())
    assert created.status_code == 200, created.text
    changed = await customer.api.patch(
        f"/v1/agents/{customer.agent}", json={"external_storage_policy": "archive"}
    )
    assert changed.status_code == 200, changed.text


async def audio_url_of(customer: Customer, conversation_id: str, within: float) -> str:
    deadline = time.monotonic() + within
    while True:
        response = await customer.api.get(f"/v1/conversations/{conversation_id}")
        assert response.status_code == 200, response.text
        url: str | None = response.json()["conversation"]["audio_url"]
        if url is not None:
            return url
        assert time.monotonic() < deadline, "no recording yet"
        await asyncio.sleep(0.2)


def wav_seconds(data: bytes) -> float:
    with wave.open(io.BytesIO(data)) as file:
        assert (file.getnchannels(), file.getsampwidth()) == (2, 2)
        return file.getnframes() / file.getframerate()


async def test_recording_of_an_agent_with_a_policy_lands_in_its_bucket_signed(
    server: Server, customer: Customer, s3: S3Server
) -> None:
    await agent_storing_in(customer, s3)
    ws = await open_conversation(server, customer, "bucket-1", AudioFormat.PCM_16000)
    async with ws:
        await ws.send(json.dumps({"type": "generate_reply", "user_message": "Hello?"}))
        await receive_until(ws, "assistant_finished_speaking", within=60)
    url = await audio_url_of(customer, "bucket-1", within=20)
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == s3.endpoint_url  # the bucket's own URL
    assert parts.path == f"/{s3.bucket}/calls/bucket-1.wav"  # {key_prefix}{id}.wav, path style
    assert "X-Amz-Signature=" in parts.query
    stored = s3.read("calls/bucket-1.wav")  # moto checked the upload's signature
    assert wav_seconds(stored) > 0.5  # the agent's answer is in it
    got = read_presigned(url)
    assert got.status_code == 200
    assert got.content == stored


async def test_recording_bucket_down_mid_call_then_back_the_object_still_arrives(
    server: Server, customer: Customer, s3: S3Server
) -> None:
    await agent_storing_in(customer, s3)
    ws = await open_conversation(server, customer, "bucket-2", AudioFormat.PCM_16000)
    s3.stop()
    try:
        async with ws:
            await ws.send(json.dumps({"type": "generate_reply", "user_message": "Hello?"}))
            await receive_until(ws, "assistant_finished_speaking", within=60)
        await asyncio.sleep(2.0)  # the upload is tried, and refused, while the bucket is down
        response = await customer.api.get("/v1/conversations/bucket-2")
        assert response.json()["conversation"]["audio_url"] is None
    finally:
        s3.start()
    url = await audio_url_of(customer, "bucket-2", within=30)  # the timer's next try
    assert urlsplit(url).path.endswith("/calls/bucket-2.wav")
    assert wav_seconds(s3.read("calls/bucket-2.wav")) > 0.5
