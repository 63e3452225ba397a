"""A conversation client for the fault tests: configure, read until closed."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed


async def receive(ws: ClientConnection, within: float = 10.0) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), within))
    return message


async def configure(ws: ClientConnection, agent: str) -> str:
    """Send `config`; return the conversation's ID once it is ready."""
    await ws.send(json.dumps({"type": "config", "agent": agent}))
    created = await receive(ws)
    assert created["type"] == "conversation_created", created
    assert (await receive(ws))["type"] == "ready_to_start_conversation"
    conversation_id: str = created["conversation_id"]
    return conversation_id


async def until_closed(ws: ClientConnection, within: float = 10.0) -> tuple[int, str]:
    """Read until the server closes the socket; return its close code and reason."""
    deadline = time.monotonic() + within
    try:
        while True:
            await receive(ws, max(0.1, deadline - time.monotonic()))
    except ConnectionClosed as closed:
        if closed.rcvd is None:
            raise AssertionError("the server did not send a close frame") from None
        return closed.rcvd.code, closed.rcvd.reason


async def still_talks(ws: ClientConnection, within: float = 10.0) -> None:
    """Ask the agent to say something and see it answer: the socket is alive."""
    await ws.send(json.dumps({"type": "say", "text": "Still here."}))
    deadline = time.monotonic() + within
    while True:
        message = await receive(ws, max(0.1, deadline - time.monotonic()))
        if message["type"] in ("assistant_started_speaking", "audio_chunk"):
            return
        assert message["type"] != "error", message


async def make_agent(http: str, key: str) -> str:
    async with httpx.AsyncClient(base_url=http, headers={"Authorization": f"Bearer {key}"}) as api:
        made = await api.post("/v1/agents", json={"name": "faults", "welcome_message": None})
        assert made.status_code == 201, made.text
    return "faults"
