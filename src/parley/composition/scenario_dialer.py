"""The test caller's end of the conversation socket (API.md section 19): a real WebSocket
client of `/v1/sts/ws`, as a person's browser would be.

It sends the `config`, then 20 ms audio chunks at real-time pace the whole call (the
caller's words when it has some to say, silence otherwise, as a microphone does). It waits
for the agent to finish speaking (`assistant_finished_speaking`, then `QUIET_SECONDS`
without another reply starting) before the caller's next words; when the caller has none
left it hangs up by closing the socket, unless the agent ended the conversation first.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from typing import Any, Final

import websockets

from parley.errors import NotSupported
from parley.services.scenario_caller import Call

log = logging.getLogger(__name__)

CHUNK_MS: Final = 20
CHUNK_BYTES: Final = 640
"""20 ms of `pcm_16000`, the format the caller's `config` asks for."""
SILENCE: Final = bytes(CHUNK_BYTES)
QUIET_SECONDS: Final = 0.8
"""The agent is done once it has been silent this long after a reply (it may say more)."""
REPLY_SECONDS: Final = 20.0
"""How long the caller waits for a reply to start after its words before speaking again."""


class _Listening:
    """What the caller hears of the agent, from the server's messages."""

    def __init__(self, heard: list[tuple[str, str]]) -> None:
        self.heard = heard
        self.speaking = False
        self.ended = asyncio.Event()
        self.changed = asyncio.Event()
        self.ready = asyncio.Event()
        self.replies = 0
        self.current: list[str] = []

    def hear(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "ready_to_start_conversation":
            self.ready.set()
        elif kind == "assistant_started_speaking":
            self.speaking, self.current = True, []
        elif kind == "audio_chunk" and message.get("text"):
            self.current.append(str(message["text"]))
        elif kind == "assistant_finished_speaking":
            self.speaking = False
            self.replies += 1
            said = " ".join(self.current).strip()
            if said:
                self.heard.append(("agent", said))
        elif kind == "assistant_ended_conversation":
            self.ended.set()
        self.changed.set()


class WebSocketDialer:
    """Dials `/v1/sts/ws` for a test call (services/scenario_caller.py `Dialer`)."""

    async def dial(self, call: Call) -> None:
        """Play the call out over a real socket; return once it is closed."""
        if call.transport != "websocket":
            raise NotSupported("Test calls over the phone path are not supported yet.")
        async with asyncio.timeout(call.max_seconds):
            async with websockets.connect(call.url, max_size=4 * 1024 * 1024) as socket:
                await self._talk(socket, call)

    async def _talk(self, socket: Any, call: Call) -> None:
        await socket.send(json.dumps(dict(call.opening)))
        listening = _Listening(call.heard)
        outgoing: asyncio.Queue[bytes | asyncio.Future[None]] = asyncio.Queue()
        reader = asyncio.create_task(self._read(socket, listening))
        sender = asyncio.create_task(self._send(socket, outgoing))
        try:
            await _first_of(listening.ready.wait(), reader)
            await self._until_quiet(listening, expecting=0, reader=reader)
            while not listening.ended.is_set() and not reader.done():
                line = await call.caller.next_line(call.heard)
                if line is None:
                    break
                audio = await call.speak(line)
                call.heard.append(("caller", line))
                expecting = listening.replies + 1
                done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                await outgoing.put(audio)
                await outgoing.put(done)
                await _first_of(done, reader)
                await self._until_quiet(listening, expecting=expecting, reader=reader)
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender
            if not reader.done():
                await socket.close()
            with contextlib.suppress(Exception):
                await reader

    async def _until_quiet(self, listening: _Listening, *, expecting: int, reader: Any) -> None:
        """Wait for the reply expected (if any) to end, then for `QUIET_SECONDS` of quiet."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REPLY_SECONDS
        while listening.replies < expecting and not reader.done() and loop.time() < deadline:
            await _changed(listening, deadline - loop.time())
        while not reader.done() and not listening.ended.is_set():
            quiet_until = loop.time() + QUIET_SECONDS
            while not listening.speaking and loop.time() < quiet_until and not reader.done():
                await _changed(listening, quiet_until - loop.time())
            if not listening.speaking:
                return
            while listening.speaking and not reader.done():
                await _changed(listening, REPLY_SECONDS)

    async def _read(self, socket: Any, listening: _Listening) -> None:
        async for frame in socket:
            if isinstance(frame, str):
                listening.hear(json.loads(frame))
        listening.changed.set()

    async def _send(
        self, socket: Any, outgoing: asyncio.Queue[bytes | asyncio.Future[None]]
    ) -> None:
        """20 ms chunks at real-time pace: queued audio, silence between."""
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        pending = b""
        while True:
            if not pending:
                try:
                    item = outgoing.get_nowait()
                except asyncio.QueueEmpty:
                    item = None
                if isinstance(item, asyncio.Future):
                    item.set_result(None)
                    continue
                pending = item or b""
            chunk, pending = (
                (pending[:CHUNK_BYTES], pending[CHUNK_BYTES:]) if pending else (SILENCE, b"")
            )
            await socket.send(
                json.dumps({"type": "audio_chunk", "audio": base64.b64encode(chunk).decode()})
            )
            next_at += CHUNK_MS / 1000
            await asyncio.sleep(max(0.0, next_at - loop.time()))


async def _changed(listening: _Listening, seconds: float) -> None:
    listening.changed.clear()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(listening.changed.wait(), max(0.0, seconds))


async def _first_of(awaitable: Any, reader: asyncio.Task[None]) -> None:
    """Wait for `awaitable`, or for the socket to close first."""
    waiting = asyncio.ensure_future(awaitable)
    await asyncio.wait({waiting, reader}, return_when=asyncio.FIRST_COMPLETED)
    if not waiting.done():
        waiting.cancel()
