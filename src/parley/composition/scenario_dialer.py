"""The test caller's end of a real socket (API.md section 19): a WebSocket client of the
server's own `/v1/sts/ws`, as a person's browser would be, or of
`/v1/telephony/twilio/media`, as the carrier would be for a phone call (μ-law 8 kHz).

It sends the opening (the `config`; or `connected` and a `start` carrying the stream
token), then 20 ms audio frames at real-time pace the whole call: the caller's words when it
has some to say, silence otherwise, as a microphone (or the carrier) does. It waits for the
agent's welcome when it may have one (`Call.welcome_expected`), and after its words for the
agent to finish speaking, then `QUIET_SECONDS` without another reply starting, before the
caller's next words; when the caller has none left it hangs up (closes the socket; on the
phone path after a `stop`), unless the agent ended the conversation first.

How the agent is heard: on the conversation socket from `assistant_started_speaking` /
`assistant_finished_speaking` (and the words of each `audio_chunk`); on the phone path from
the `media` frames to the mark the server sends at a reply's end (`REPLY_MARK`), echoing
each `mark` once the audio before it has been taken (and at once for those a `clear` drops),
as Twilio does once it has played it. The server sends a test
run's conversation the agent's audio unpaced (engine `SessionConfig.paced`), and the caller
takes it as it comes: nothing plays it, so a run waits on the agent's thinking and the
caller's own real-time words, never on the agent's speaking time (the recording still lays
the reply out whole before the caller's next words: services/live/recorder.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
from collections import deque
from typing import Any, Final

import websockets

from parley.services.scenario_caller import Call
from parley.wires.twilio_codec import REPLY_MARK

CHUNK_MS: Final = 20
QUIET_SECONDS: Final = 0.3
"""The agent is done once it has been silent this long after a reply (it may say more: a
second reply queued, an asynchronous tool's answer): about the gap a person leaves before
taking the turn."""
WELCOME_SECONDS: Final = 3.0
"""How long the caller waits for an agent that may greet to start speaking before it speaks
first (a person on the phone waits a moment for the greeting, longer than for a turn)."""
REPLY_SECONDS: Final = 45.0
"""How long the caller waits for a reply to end after its words before speaking again."""
SOCKET_CHUNK: Final = 640
"""20 ms of `pcm_16000`, the format the caller's `config` asks for."""
PHONE_CHUNK: Final = 160
"""20 ms of μ-law at 8 kHz."""


class _Listening:
    """What the caller hears of the agent."""

    def __init__(self, heard: list[tuple[str, str]]) -> None:
        self.heard = heard
        self.speaking = False
        self.ended = asyncio.Event()
        self.changed = asyncio.Event()
        self.ready = asyncio.Event()
        self.replies = 0
        self.current: list[str] = []

    def started(self) -> None:
        self.speaking, self.current = True, []
        self.changed.set()

    def finished(self) -> None:
        self.speaking = False
        self.replies += 1
        said = " ".join(self.current).strip()
        if said:
            self.heard.append(("agent", said))
        self.changed.set()


class _ParleyWire:
    """`/v1/sts/ws`'s frames."""

    chunk = SOCKET_CHUNK

    def __init__(self, socket: Any, call: Call, listening: _Listening) -> None:
        self.socket, self.call, self.listening = socket, call, listening

    async def open(self) -> None:
        await self.socket.send(json.dumps(dict(self.call.opening)))

    def audio(self, chunk: bytes) -> str:
        return json.dumps({"type": "audio_chunk", "audio": base64.b64encode(chunk).decode()})

    def hear(self, frame: str | bytes) -> None:
        if not isinstance(frame, str):
            return
        message = json.loads(frame)
        kind = message.get("type")
        listening = self.listening
        if kind == "ready_to_start_conversation":
            listening.ready.set()
        elif kind == "assistant_started_speaking":
            listening.started()
        elif kind == "audio_chunk" and message.get("text"):
            listening.current.append(str(message["text"]))
        elif kind == "assistant_finished_speaking":
            listening.finished()
        elif kind == "assistant_ended_conversation":
            listening.ended.set()
        listening.changed.set()

    async def play(self) -> None:
        """Nothing to play: the server says when the agent is done."""
        await asyncio.Event().wait()

    async def hang_up(self) -> None:
        """Closing the socket is the hang-up."""


class _TwilioWire:
    """Twilio Media Streams' frames, as the carrier sends and answers them."""

    chunk = PHONE_CHUNK

    def __init__(self, socket: Any, call: Call, listening: _Listening) -> None:
        self.socket, self.call, self.listening = socket, call, listening
        self.stream_sid = "MZ" + secrets.token_hex(16)
        self.call_sid = "TEST" + secrets.token_hex(16)
        self.sequence = 0
        self.queue: deque[bytes | str] = deque()
        self.queued = asyncio.Event()

    def _next(self) -> str:
        self.sequence += 1
        return str(self.sequence)

    async def open(self) -> None:
        await self.socket.send(
            json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        )
        start = {
            "accountSid": "AC" + "0" * 32,
            "streamSid": self.stream_sid,
            "callSid": self.call_sid,
            "tracks": ["inbound"],
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
            "customParameters": dict(self.call.opening),
        }
        frame = {"event": "start", "sequenceNumber": self._next(), "start": start}
        await self.socket.send(json.dumps({**frame, "streamSid": self.stream_sid}))
        self.listening.ready.set()

    def audio(self, chunk: bytes) -> str:
        media = {"track": "inbound", "payload": base64.b64encode(chunk).decode("ascii")}
        return json.dumps(
            {
                "event": "media",
                "sequenceNumber": self._next(),
                "media": media,
                "streamSid": self.stream_sid,
            }
        )

    def hear(self, frame: str | bytes) -> None:
        message = json.loads(frame)
        event = message.get("event")
        if event == "media":
            self.queue.append(base64.b64decode(message["media"]["payload"]))
        elif event == "mark":
            self.queue.append(str(message["mark"]["name"]))
        elif event == "clear":  # a barge-in: what is left of the reply is not heard
            marks = [item for item in self.queue if isinstance(item, str)]
            self.queue.clear()
            for name in marks:
                self._echo(name)
            if self.listening.speaking:
                self.listening.finished()
        self.queued.set()

    def _echo(self, name: str) -> None:
        mark = {
            "event": "mark",
            "sequenceNumber": self._next(),
            "streamSid": self.stream_sid,
            "mark": {"name": name},
        }
        asyncio.get_running_loop().create_task(_send(self.socket, json.dumps(mark)))

    async def play(self) -> None:
        """Take the agent's audio as it comes (unpaced: no one listens); echo each mark
        when it is reached."""
        while True:
            if not self.queue:
                self.queued.clear()
                await self.queued.wait()
                continue
            item = self.queue.popleft()
            if isinstance(item, str):
                self._echo(item)
                if item.startswith(f"{REPLY_MARK}-") and self.listening.speaking:
                    self.listening.finished()  # the reply's last audio was taken
                continue
            if not self.listening.speaking:
                self.listening.started()

    async def hang_up(self) -> None:
        stop = {"accountSid": "AC" + "0" * 32, "callSid": self.call_sid}
        frame = {"event": "stop", "sequenceNumber": self._next(), "stop": stop}
        await _send(self.socket, json.dumps({**frame, "streamSid": self.stream_sid}))


class WebSocketDialer:
    """Dials the server's own sockets for test calls (services/scenario_caller.py `Dialer`)."""

    async def dial(self, call: Call) -> None:
        """Play the call out over a real socket; return once it is closed."""
        async with (
            asyncio.timeout(call.max_seconds),
            websockets.connect(call.url, max_size=4 * 1024 * 1024) as socket,
        ):
            listening = _Listening(call.heard)
            wire: _ParleyWire | _TwilioWire = (
                _TwilioWire(socket, call, listening)
                if call.transport == "phone"
                else _ParleyWire(socket, call, listening)
            )
            await _talk(socket, wire, call, listening)


async def _talk(
    socket: Any, wire: _ParleyWire | _TwilioWire, call: Call, listening: _Listening
) -> None:
    await wire.open()
    outgoing: asyncio.Queue[bytes | asyncio.Future[None]] = asyncio.Queue()
    reader = asyncio.create_task(_read(socket, wire, listening))
    helpers = [
        asyncio.create_task(_send_audio(socket, wire, outgoing)),
        asyncio.create_task(wire.play()),
    ]
    try:
        await _first_of(listening.ready.wait(), reader)
        if call.welcome_expected:  # its synthesis may take longer than a turn's pause
            await _until_quiet(listening, expecting=0, reader=reader, first=WELCOME_SECONDS)
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
            await _until_quiet(listening, expecting=expecting, reader=reader)
    finally:
        for helper in helpers:
            helper.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        if not reader.done():
            await wire.hang_up()
            await socket.close()
        with contextlib.suppress(Exception):
            await reader


async def _until_quiet(
    listening: _Listening,
    *,
    expecting: int,
    reader: asyncio.Task[None],
    first: float = QUIET_SECONDS,
) -> None:
    """Wait for the reply expected (if any) to end, then for quiet: `first` seconds without
    the agent starting to speak, `QUIET_SECONDS` after each time it does."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REPLY_SECONDS
    while listening.replies < expecting and not reader.done() and loop.time() < deadline:
        await _changed(listening, deadline - loop.time())
    quiet = first
    while not reader.done() and not listening.ended.is_set():
        quiet_until = loop.time() + quiet
        quiet = QUIET_SECONDS
        while not listening.speaking and loop.time() < quiet_until and not reader.done():
            await _changed(listening, quiet_until - loop.time())
        if not listening.speaking:
            return
        while listening.speaking and not reader.done():
            await _changed(listening, REPLY_SECONDS)


async def _read(socket: Any, wire: _ParleyWire | _TwilioWire, listening: _Listening) -> None:
    with contextlib.suppress(websockets.ConnectionClosed):
        async for frame in socket:
            wire.hear(frame)
    listening.changed.set()


async def _send_audio(
    socket: Any,
    wire: _ParleyWire | _TwilioWire,
    outgoing: asyncio.Queue[bytes | asyncio.Future[None]],
) -> None:
    """Frames of 20 ms at real-time pace: queued audio, silence between."""
    loop = asyncio.get_running_loop()
    size = wire.chunk
    silence = b"\xff" * size if isinstance(wire, _TwilioWire) else bytes(size)
    next_at = loop.time()
    pending = b""
    while True:
        if not pending:
            try:
                item = outgoing.get_nowait()
            except asyncio.QueueEmpty:
                item = b""
            if isinstance(item, asyncio.Future):
                item.set_result(None)
                continue
            pending = item
        chunk, pending = (pending[:size], pending[size:]) if pending else (silence, b"")
        await _send(socket, wire.audio(chunk))
        next_at += CHUNK_MS / 1000
        await asyncio.sleep(max(0.0, next_at - loop.time()))


async def _send(socket: Any, frame: str) -> None:
    with contextlib.suppress(websockets.ConnectionClosed):
        await socket.send(frame)


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
