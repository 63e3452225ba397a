"""A simulated carrier that behaves as Twilio does, for the tests (API.md section 13).

Part 1, here: the voice webhook. The carrier signs the POST exactly as Twilio does
(`X-Twilio-Signature` over the URL configured in its console and the form fields, with
`parley.services.twilio_signature`, whose signer is checked against Twilio's published
example), form-encodes it as Twilio does (`application/x-www-form-urlencoded`, UTF-8, `+` for
spaces), posts it and parses the TwiML answer. Audio helpers turn hibari speech
(tests/speech.py) into the 20 ms mu-law 8 kHz frames (160 bytes) of a media stream.

Part 2, below the marked line: the media socket (`GET /v1/telephony/twilio/media`), written
with the media-socket work: stream frames in real time, play received audio in real time,
echo marks only once the audio before them has played, honour `clear`, send DTMF and `stop`.

Part 3, in modules of their own for their size: the carrier's REST API (calls placed,
transferred and hung up; tests/carrier_api.py) and the scenarios it plays after a create
(tests/carrier_calls.py).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import json
import secrets
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import numpy as np
import numpy.typing as npt
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from parley.engine import AudioFormat, Samples
from parley.engine.audio import mulaw_decode as _engine_mulaw_decode
from parley.engine.audio import mulaw_encode as _engine_mulaw_encode
from parley.services.twilio_signature import sign

FRAME_MS = 20
FRAME_BYTES = 160
"""20 ms of mu-law at 8 kHz: one byte a sample."""
PHONE = AudioFormat.MULAW_8000


def new_account_sid() -> str:
    return "AC" + secrets.token_hex(16)


def new_auth_token() -> str:
    return secrets.token_hex(16)


def new_call_sid() -> str:
    return "CA" + secrets.token_hex(16)


# --- the voice webhook ---------------------------------------------------------------


@dataclass(frozen=True)
class Twiml:
    """A parsed TwiML answer: a rejection, or a `<Connect><Stream>` with its parameters."""

    reject_reason: str | None = None
    stream_url: str | None = None
    parameters: Mapping[str, str] = field(default_factory=dict)

    @property
    def rejected(self) -> bool:
        return self.reject_reason is not None


def parse_twiml(document: str) -> Twiml:
    """Read the answer as Twilio would; raise AssertionError for anything else."""
    root = ET.fromstring(document)  # noqa: S314 - the document is the test's own server's
    assert root.tag == "Response", document
    children = list(root)
    assert len(children) == 1, document
    verb = children[0]
    if verb.tag == "Reject":
        return Twiml(reject_reason=verb.get("reason", "rejected"))
    assert verb.tag == "Connect", document
    streams = list(verb)
    assert len(streams) == 1, document
    assert streams[0].tag == "Stream", document
    stream = streams[0]
    parameters = {}
    for parameter in stream:
        assert parameter.tag == "Parameter", document
        parameters[parameter.attrib["name"]] = parameter.attrib["value"]
    return Twiml(stream_url=stream.attrib["url"], parameters=parameters)


def form_encode(params: Sequence[tuple[str, str]]) -> bytes:
    """The body Twilio sends: UTF-8, percent-encoded, `+` for spaces."""
    return urlencode(list(params), encoding="utf-8").encode("ascii")


@dataclass(frozen=True)
class CapturedWebhook:
    """A signed voice webhook as it went over the wire: what an eavesdropper (a logging proxy,
    a leaked capture) holds and can send again, byte for byte."""

    target: str
    """The path and query string posted to."""
    headers: Mapping[str, str]
    body: bytes

    async def replay(self, http: httpx.AsyncClient) -> httpx.Response:
        """Send the same bytes to `http` (any instance): Twilio's signature has no timestamp."""
        return await http.post(self.target, content=self.body, headers=dict(self.headers))


@dataclass
class SimulatedCarrier:
    """One carrier account calling Parley's voice webhook as Twilio does.

    `voice_url` is what the operator pasted into the carrier's console (Parley's public URL);
    `http` is where the request really goes (the ASGI app, or a real server on loopback),
    so a test can put a proxy-like gap between the two.
    """

    http: httpx.AsyncClient
    voice_url: str
    account_sid: str = field(default_factory=new_account_sid)
    auth_token: str = field(default_factory=new_auth_token)

    def call_params(
        self, *, to: str, from_: str = "+15005550006", call_sid: str | None = None
    ) -> list[tuple[str, str]]:
        """The fields Twilio posts for an incoming call (a representative subset)."""
        return [
            ("AccountSid", self.account_sid),
            ("ApiVersion", "2010-04-01"),
            ("CallSid", call_sid or new_call_sid()),
            ("CallStatus", "ringing"),
            ("Called", to),
            ("Caller", from_),
            ("Direction", "inbound"),
            ("From", from_),
            ("FromCity", "SAN FRANCISCO"),
            ("FromCountry", "US"),
            ("To", to),
        ]

    def signature(self, params: Sequence[tuple[str, str]], *, url: str | None = None) -> str:
        return sign(self.auth_token, url or self.voice_url, params)

    async def post(
        self,
        params: Sequence[tuple[str, str]],
        *,
        signature: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """POST the form to the webhook's path and query, with `signature` if not None."""
        parts = urlsplit(self.voice_url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        sent = {
            "Content-Type": "application/x-www-form-urlencoded",
            "User-Agent": "TwilioProxy/1.1",
            **(headers or {}),
        }
        if signature is not None:
            sent["X-Twilio-Signature"] = signature
        return await self.http.post(target, content=form_encode(params), headers=sent)

    def capture(
        self, *, to: str, from_: str = "+15005550006", call_sid: str | None = None
    ) -> CapturedWebhook:
        """The signed webhook of a call to `to`, as the carrier would send it (unsent)."""
        params = self.call_params(to=to, from_=from_, call_sid=call_sid)
        parts = urlsplit(self.voice_url)
        return CapturedWebhook(
            target=parts.path + (f"?{parts.query}" if parts.query else ""),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "User-Agent": "TwilioProxy/1.1",
                "X-Twilio-Signature": self.signature(params),
            },
            body=form_encode(params),
        )

    async def call(
        self, *, to: str, from_: str = "+15005550006", call_sid: str | None = None
    ) -> Twiml:
        """Place a call to `to`: sign and post the webhook, return the parsed TwiML."""
        params = self.call_params(to=to, from_=from_, call_sid=call_sid)
        response = await self.post(params, signature=self.signature(params))
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/xml"), response.headers
        return parse_twiml(response.text)


# --- audio: G.711 mu-law 8 kHz in 20 ms frames ----------------------------------------


def mulaw_encode(pcm16: npt.NDArray[np.int16] | bytes) -> bytes:
    """G.711 mu-law bytes of 16-bit samples (an array, or little-endian bytes).

    The engine's codec (parley/engine/audio.py), checked in tests/engine/test_audio.py
    against the G.711 table; Python 3.13 has no audioop.
    """
    samples = np.frombuffer(pcm16, dtype="<i2") if isinstance(pcm16, bytes) else pcm16
    return _engine_mulaw_encode(samples.astype(np.int16)).tobytes()


def mulaw_decode(data: bytes) -> npt.NDArray[np.int16]:
    """16-bit samples of G.711 mu-law bytes."""
    return _engine_mulaw_decode(np.frombuffer(data, dtype=np.uint8))


def phone_frames(*parts: Samples | float) -> list[bytes]:
    """Speech (24 kHz arrays from tests/speech.py) and silences (seconds) as the 20 ms
    mu-law 8 kHz frames a caller's carrier sends: 160 bytes each, the last padded with
    mu-law silence (0xFF)."""
    from tests.speech import stream

    frames = stream(PHONE, *parts, chunk_ms=FRAME_MS)
    if frames and len(frames[-1]) < FRAME_BYTES:
        frames[-1] = frames[-1] + b"\xff" * (FRAME_BYTES - len(frames[-1]))
    return frames


# === Part 2: the media socket (Twilio Media Streams) ==================================


@dataclass
class Heard:
    """What the caller's side received and played, with monotonic times."""

    played: list[tuple[float, bytes]] = field(default_factory=list)
    """Each 20 ms frame of the agent's audio, when its playback started (as scheduled: the
    event loop may wake a few ms late, the carrier's clock does not)."""
    first_media_at: list[float] = field(default_factory=list)
    """When each answer's first `media` frame arrived (after silence or a `clear`)."""
    marks_echoed: list[tuple[float, str]] = field(default_factory=list)
    clears: list[float] = field(default_factory=list)
    bad_frames: list[str] = field(default_factory=list)
    """Frames from the server that are not Twilio's outbound shapes."""

    def played_seconds(self, until: float | None = None) -> float:
        return FRAME_MS / 1000 * sum(1 for at, _ in self.played if until is None or at < until)


class MediaStream:
    """One call's media stream, as Twilio runs it (see the module doc, part 2).

    Open with `MediaStream.open(url, parameters)`; it sends `connected` and `start`, then
    sends a `media` frame every 20 ms (the caller's speech when `speak` queued some, mu-law
    silence otherwise), plays the agent's `media` in real time, echoes each `mark` once the
    audio queued before it has played, and on `clear` drops what is queued (echoing its
    marks at once, as Twilio does). `close()` ends it (with `stop` first unless hung up by
    the server).
    """

    def __init__(self, ws: ClientConnection, *, stream_sid: str, call_sid: str) -> None:
        self.ws = ws
        self.stream_sid = stream_sid
        self.call_sid = call_sid
        self.heard = Heard()
        self.closed: asyncio.Future[tuple[int, str]] = asyncio.get_running_loop().create_future()
        self._speech: collections.deque[bytes] = collections.deque()
        self._spoken = asyncio.Event()
        self._queue: collections.deque[bytes | str] = collections.deque()  # audio or a mark
        self._queued = asyncio.Event()
        self._sequence = 1
        self._chunk = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.last_speech_sent_at = 0.0
        self.speech_started_at: float | None = None

    @classmethod
    async def open(
        cls,
        url: str,
        parameters: Mapping[str, str],
        *,
        call_sid: str | None = None,
        connected: bool = True,
    ) -> MediaStream:
        ws = await connect(url, max_size=2**20)
        stream = cls(
            ws, stream_sid="MZ" + secrets.token_hex(16), call_sid=call_sid or new_call_sid()
        )
        if connected:
            await stream.send({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        await stream.send(stream.start_frame(parameters))
        stream._tasks = [
            asyncio.create_task(stream._read()),
            asyncio.create_task(stream._play()),
            asyncio.create_task(stream._talk()),
        ]
        return stream

    def start_frame(self, parameters: Mapping[str, str]) -> dict[str, Any]:
        start = {
            "accountSid": "AC" + "0" * 32,
            "streamSid": self.stream_sid,
            "callSid": self.call_sid,
            "tracks": ["inbound"],
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
            "customParameters": dict(parameters),
        }
        return {
            "event": "start",
            "sequenceNumber": "1",
            "start": start,
            "streamSid": self.stream_sid,
        }

    async def send(self, frame: Mapping[str, Any] | str | bytes) -> None:
        """Send one frame (a dict as JSON); a gone socket drops it."""
        data = frame if isinstance(frame, str | bytes) else json.dumps(frame)
        with contextlib.suppress(ConnectionClosed):
            await self.ws.send(data)

    def _next_sequence(self) -> str:
        self._sequence += 1
        return str(self._sequence)

    async def speak(self, frames: Sequence[bytes]) -> float:
        """Queue the caller's frames, wait until they are sent in real time; return when the
        last was sent (monotonic)."""
        self._spoken.clear()
        self.speech_started_at = None
        self._speech.extend(frames)
        await asyncio.wait_for(self._spoken.wait(), FRAME_MS / 1000 * len(frames) + 30)
        return self.last_speech_sent_at

    async def press(self, digits: str, *, gap: float = 0.15) -> None:
        """Send DTMF keys, `gap` seconds apart."""
        for digit in digits:
            dtmf = {"track": "inbound_track", "digit": digit}
            await self.send(
                {
                    "event": "dtmf",
                    "streamSid": self.stream_sid,
                    "sequenceNumber": self._next_sequence(),
                    "dtmf": dtmf,
                }
            )
            await asyncio.sleep(gap)

    async def stop(self) -> None:
        """Hang up as the caller: `stop`, then close the socket."""
        stop = {"accountSid": "AC" + "0" * 32, "callSid": self.call_sid}
        await self.send(
            {
                "event": "stop",
                "streamSid": self.stream_sid,
                "sequenceNumber": self._next_sequence(),
                "stop": stop,
            }
        )
        await self.close()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.ws.close()

    async def wait_closed(self, within: float) -> tuple[int, str]:
        """The close code and reason the server closed the stream with."""
        return await asyncio.wait_for(asyncio.shield(self.closed), within)

    async def wait_played(self, seconds: float, within: float) -> None:
        """Wait until `seconds` of the agent's audio have played."""
        loop = asyncio.get_running_loop()
        until = loop.time() + within
        while self.heard.played_seconds() < seconds:
            assert loop.time() < until, f"played {self.heard.played_seconds():.2f} s"
            await asyncio.sleep(0.02)

    async def wait_silent(self, within: float, quiet: float = 0.5) -> None:
        """Wait until nothing was played for `quiet` seconds and nothing is queued."""
        loop = asyncio.get_running_loop()
        until = loop.time() + within
        while True:
            last = self.heard.played[-1][0] if self.heard.played else 0.0
            if not self._queue and time.monotonic() - last >= quiet:
                return
            assert loop.time() < until, "still playing"
            await asyncio.sleep(0.05)

    # --- the carrier's three loops --------------------------------------------------------

    async def _talk(self) -> None:
        """Send a `media` frame every 20 ms: queued speech, else silence (as Twilio does)."""
        started = time.monotonic()
        tick = 0
        while True:
            speaking = bool(self._speech)
            if speaking and self.speech_started_at is None:
                self.speech_started_at = time.monotonic()
            frame = self._speech.popleft() if speaking else b"\xff" * FRAME_BYTES
            self._chunk += 1
            media = {
                "track": "inbound",
                "chunk": str(self._chunk),
                "timestamp": str(self._chunk * FRAME_MS),
                "payload": base64.b64encode(frame).decode("ascii"),
            }
            await self.send(
                {
                    "event": "media",
                    "sequenceNumber": self._next_sequence(),
                    "media": media,
                    "streamSid": self.stream_sid,
                }
            )
            if speaking and not self._speech:  # the last frame queued was just sent
                self.last_speech_sent_at = time.monotonic()
                self._spoken.set()
            tick += 1
            await asyncio.sleep(max(0.0, started + tick * FRAME_MS / 1000 - time.monotonic()))

    async def _read(self) -> None:
        """Take the server's frames: queue audio and marks, honour `clear`."""
        try:
            async for data in self.ws:
                self._take(data)
        except ConnectionClosed:
            pass
        finally:
            if not self.closed.done():
                code = self.ws.close_code
                self.closed.set_result(
                    (code if code is not None else 1006, self.ws.close_reason or "")
                )

    def _take(self, data: str | bytes) -> None:
        try:
            frame = json.loads(data)
            event = frame["event"]
            assert frame["streamSid"] == self.stream_sid
        except (ValueError, KeyError, TypeError, AssertionError):
            self.heard.bad_frames.append(repr(data)[:200])
            return
        if event == "media" and set(frame) == {"event", "streamSid", "media"}:
            payload = base64.b64decode(frame["media"]["payload"])
            if not any(isinstance(item, bytes) for item in self._queue):
                self.heard.first_media_at.append(time.monotonic())
            self._queue.append(payload)
        elif event == "mark" and set(frame) == {"event", "streamSid", "mark"}:
            self._queue.append(str(frame["mark"]["name"]))
        elif event == "clear" and set(frame) == {"event", "streamSid"}:
            self.heard.clears.append(time.monotonic())
            marks = [item for item in self._queue if isinstance(item, str)]
            self._queue.clear()
            for name in marks:  # Twilio echoes the marks of cleared audio at once
                self._echo(name)
        else:
            self.heard.bad_frames.append(repr(data)[:200])
        self._queued.set()

    def _echo(self, name: str) -> None:
        self.heard.marks_echoed.append((time.monotonic(), name))
        mark = {
            "event": "mark",
            "sequenceNumber": self._next_sequence(),
            "streamSid": self.stream_sid,
            "mark": {"name": name},
        }
        asyncio.get_running_loop().create_task(self.send(mark))

    async def _play(self) -> None:
        """Play queued audio in real time; echo a mark once the audio before it has played."""
        frame_s = FRAME_MS / 1000
        next_at: float | None = None
        while True:
            if not self._queue:
                self._queued.clear()
                await self._queued.wait()
                continue
            now = time.monotonic()
            if next_at is None or next_at < now - frame_s:
                next_at = now  # playback (re)starts: the buffer had run dry
            await asyncio.sleep(max(0.0, next_at - now))  # the frame before has played
            while self._queue and isinstance(self._queue[0], str):
                self._echo(str(self._queue.popleft()))
            if self._queue:
                item = self._queue.popleft()
                assert isinstance(item, bytes)
                self.heard.played.append((next_at, item))  # its scheduled start
                next_at += frame_s
