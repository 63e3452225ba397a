"""Silence on the conversation socket (API.md section 15), end to end: real uvicorn, the
default engine, real speech, real time with 1-3 s settings. A poke is spoken once per
silence after `no_input_poke_sec`, never before; the user's speech starts a new silence;
the conversation ends after `no_input_end_conversation_sec` with `ended_by`
`assistant_silence_limit_reached` and one `conversation.ended`; `null` is off; `config`
overrides the agent; a bad value is an `error` frame."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from parley.engine import AudioFormat
from tests import speech
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_voice import stream_realtime
from tests.e2e.test_ws import configure, receive, until_closed

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

POKE = "Are you still there?"
SLACK = 0.15
"""What the client's clock may be ahead of the server's count (the count starts just
before `ready_to_start_conversation` is sent)."""


async def set_silence(customer: Customer, **fields: Any) -> None:
    response = await customer.api.patch(f"/v1/agents/{customer.agent}", json=fields)
    assert response.status_code == 200, response.text


async def opened(server: Server, customer: Customer) -> ClientConnection:
    return await connect(
        f"{server.ws}/v1/sts/ws", additional_headers={"Authorization": f"Bearer {customer.api_key}"}
    )


async def timed(
    ws: ClientConnection, within: float, *, until: str | None = None
) -> list[tuple[float, dict[str, Any]]]:
    """Every message within `within` seconds (or until the socket closes, or the agent
    begins to say `until`), each with the monotonic time it arrived."""
    seen: list[tuple[float, dict[str, Any]]] = []
    deadline = time.monotonic() + within
    try:
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = await receive(ws, left)
            except TimeoutError:
                break
            seen.append((time.monotonic(), message))
            if until is not None and message.get("text") == until:
                break
    except ConnectionClosed:
        pass
    return seen


def spoken(seen: list[tuple[float, dict[str, Any]]]) -> list[tuple[float, str]]:
    return [(at, m["text"]) for at, m in seen if m["type"] == "audio_chunk" and m["text"]]


async def test_ws_poke_spoken_once_after_poke_sec_of_silence_not_before(
    server: Server, customer: Customer
) -> None:
    await set_silence(customer, no_input_poke_sec=1)
    async with await opened(server, customer) as ws:
        conversation_id = await configure(ws, customer.agent)
        ready = time.monotonic()
        seen = await timed(ws, 4.0)
    said = spoken(seen)
    assert [text for _, text in said] == [POKE]  # once in 4 s of silence
    assert said[0][0] - ready >= 1.0 - SLACK
    audio = [m for _, m in seen if m["type"] == "audio_chunk"]
    assert sum(len(m["audio"]) for m in audio) > 1000  # spoken, not only written
    kinds = [m["type"] for _, m in seen]
    assert kinds.index("assistant_started_speaking") < kinds.index("assistant_finished_speaking")
    stored = (await customer.api.get(f"/v1/conversations/{conversation_id}")).json()
    assert [(i["role"], i["text"]) for i in stored["conversation"]["items"]] == [
        ("assistant", POKE)
    ]


async def test_ws_silence_limit_ends_conversation_assistant_silence_limit_reached(
    server: Server, customer: Customer
) -> None:
    """The `config` options override the agent's (off); the end counts from the poke's
    end."""
    async with await opened(server, customer) as ws:
        conversation_id = await configure(
            ws, customer.agent, no_input_poke_sec=1, no_input_end_conversation_sec=2
        )
        ready = time.monotonic()
        seen = await timed(ws, 10.0)  # until the server closes the socket
        closed_at = time.monotonic()
        assert await until_closed(ws) == (1000, "conversation ended")
    finished = next(at for at, m in seen if m["type"] == "assistant_finished_speaking")
    assert [text for _, text in spoken(seen)] == [POKE]
    assert 3.0 - SLACK <= closed_at - ready < 9.0  # closed by the server, not the window
    assert closed_at >= finished + 2.0 - SLACK  # two full seconds after the poke ended
    body = (await customer.api.get(f"/v1/conversations/{conversation_id}")).json()
    assert body["conversation"]["status"] == "ended"
    assert body["conversation"]["ended_by"] == "assistant_silence_limit_reached"


async def test_ws_silence_null_in_config_turns_the_agents_off(
    server: Server, customer: Customer
) -> None:
    await set_silence(customer, no_input_poke_sec=1, no_input_end_conversation_sec=2)
    async with await opened(server, customer) as ws:
        await configure(
            ws, customer.agent, no_input_poke_sec=None, no_input_end_conversation_sec=None
        )
        seen = await timed(ws, 3.0)
        await ws.send(json.dumps({"type": "say", "text": "Still open."}))
        assert "Still open." in [text for _, text in spoken(await timed(ws, 5.0))]
    assert seen == []  # no poke, no end within three seconds of silence


async def test_ws_user_speech_starts_a_new_silence(server: Server, customer: Customer) -> None:
    """With a 3 s poke, a user who starts speaking 0.4 s in is not poked while speaking nor
    while answered; the poke comes 3 s after the answer ends."""
    await set_silence(customer, no_input_poke_sec=3)
    async with await opened(server, customer) as ws:
        await configure(ws, customer.agent)
        reading = asyncio.create_task(timed(ws, 30.0, until=POKE))
        chunks = speech.stream(AudioFormat.PCM_16000, 0.4, speech.spoken(speech.SENTENCES[3]), 1.0)
        await stream_realtime(ws, chunks)
        seen = await reading
    said = spoken(seen)
    assert said[0][1].startswith("You said"), said  # the answer, not a poke
    pokes = [at for at, text in said if text == POKE]
    assert len(pokes) == 1, said
    answered = next(at for at, m in seen if m["type"] == "assistant_finished_speaking")
    assert pokes[0] - answered >= 3.0 - SLACK
    kinds = [m["type"] for _, m in seen]
    assert kinds.index("user_started_speaking") < kinds.index("user_finished_speaking")


async def test_ws_config_silence_out_of_range_answered_with_error_frame(
    server: Server, customer: Customer
) -> None:
    async with await opened(server, customer) as ws:
        for bad in (
            {"no_input_poke_sec": 0},
            {"no_input_end_conversation_sec": 3601},
            {"no_input_poke_sec": "5"},
        ):
            await ws.send(json.dumps({"type": "config", "agent": customer.agent, **bad}))
            error = await receive(ws)
            assert error["type"] == "error", error
            assert error["error"]["code"] == "validation_error", error
            assert next(iter(bad)) in json.dumps(error), error
        assert (await configure(ws, customer.agent)).startswith("conv_")  # the socket stayed
