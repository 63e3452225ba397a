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
"""

from __future__ import annotations

import secrets
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit

import httpx
import numpy as np
import numpy.typing as npt

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
#
# To be written with GET /v1/telephony/twilio/media: a `MediaStream` that connects to the
# `Twiml.stream_url` (over the test's loopback server), sends `connected` and `start` (with
# `customParameters` = `Twiml.parameters`, a `streamSid` "MZ…" and `callSid`), streams
# `phone_frames(...)` as `media` events at real-time pace (one per 20 ms, `sequenceNumber`
# and `chunk` as strings, `timestamp` in ms), plays the received `media` at real-time pace,
# echoes each `mark` only once the audio queued before it has played, drops queued audio
# (and echoes its marks at once, as Twilio does) on `clear`, sends `dtmf` digits and `stop`.
