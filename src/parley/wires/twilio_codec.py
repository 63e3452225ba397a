"""Twilio Media Streams as a codec (API.md section 13; STYLE.md convention 21).

Frames are JSON text. In: `connected` and `start` (read by the media socket before the
session begins: `parse_opening`), then `media` (base64 mu-law 8 kHz, 160 bytes = 20 ms; the
counters `sequenceNumber`, `chunk` and `timestamp` are strings and carry nothing the session
needs), `mark`, `dtmf`, `stop`. Out: `media` ({event, streamSid, media: {payload}}), `mark`
({event, streamSid, mark: {name}}) and `clear` ({event, streamSid}).

Rules:
- the session's audio is mu-law 8 kHz both ways (the socket configures it so, whatever the
  agent's `audio_format`): caller frames pass straight to the engine, agent audio is only
  cut into 20 ms frames (the last one of a reply padded with mu-law silence);
- a `mark` goes after each engine chunk and after each reply (twilio_playback.py: what was
  played); `playback_pending` holds until the last comes back, so a goodbye is heard; the
  echo of the mark after a reply's timed first audio is `Mark(first_audio=True)` (the
  reply's `played_ms`, API.md section 18);
- barge-in: the engine's `user_started_speaking` while audio is unplayed sends `clear` (the
  onset is 96 ms of speech), and the rest of the interrupted reply is dropped;
- the assistant's keys (`keypad_input`: engine.KeypadPressed) go out as DTMF tones in
  `media` frames, after the audio before them (engine/dtmf.py);
- keys are gathered until `#` (not kept) or a 2 s pause into one `Dtmf` entry; a key pressed
  while the agent speaks interrupts it (`Interrupt`);
- bad input (binary frames, malformed JSON, unknown events, a `media` payload of the wrong
  size or bad base64) and a flood (more frames than `FLOOD_RATE` a second beyond a burst) are
  dropped with one log line per kind per `COMPLAINT_INTERVAL` seconds: never an error frame
  (the carrier reads none), never a crash.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from parley import engine
from parley.clock import Clock
from parley.engine import dtmf
from parley.engine.audio import encode as encode_samples
from parley.errors import InvalidRequest
from parley.services.live import codec
from parley.wires.twilio_playback import Playback

log = logging.getLogger(__name__)

REPLY_MARK: Final = "reply"
"""The kind of the mark sent when a reply has been sent whole (named `reply-N`): once it
is echoed, the caller has heard the reply to its end."""
FRAME_BYTES: Final = 160
"""20 ms of mu-law 8 kHz."""
SILENCE: Final = b"\xff"
"""Mu-law silence, to pad the last frame of a reply."""
DTMF_PAUSE_SECONDS: Final = 2.0
MAX_DIGITS: Final = 32
"""An entry this long is sent at once (bounds what a caller can make the codec hold)."""
DIGITS: Final = frozenset("0123456789*#ABCD")
FLOOD_RATE: Final = 100.0
"""Frames a second the codec takes (Twilio sends 50 `media` and about 10 `mark`)."""
FLOOD_BURST: Final = 200.0
COMPLAINT_INTERVAL: Final = 10.0
IDLE_FRAME: Final = ""
"""What the media socket hands the codec when no frame came for a while: checks the DTMF
pause (Twilio sends no empty frame)."""
MULAW_8000: Final = engine.AudioFormat.MULAW_8000.value


class InvalidStreamStart(InvalidRequest):
    code = "invalid_stream_start"
    message = "Expected Twilio's `connected`, then `start` with the stream's parameters."


@dataclass(frozen=True, slots=True)
class Connected:
    """Twilio's first frame."""


@dataclass(frozen=True, slots=True)
class StreamStart:
    """Twilio's `start`: the stream, the call, and Parley's TwiML parameters."""

    stream_sid: str
    call_sid: str | None
    conversation_id: str
    stream_token: str


def parse_opening(data: codec.Frame) -> Connected | StreamStart:
    """Read a frame of the stream's opening; raise InvalidStreamStart for anything else."""
    found = _json(data)
    event = found.get("event") if found is not None else None
    if event == "connected":
        return Connected()
    if found is None or event != "start":
        raise InvalidStreamStart()
    start = _dict(found.get("start"))
    parameters = _dict(start.get("customParameters"))
    media_format = _dict(start.get("mediaFormat"))
    stream_sid = start.get("streamSid", found.get("streamSid"))
    conversation_id = parameters.get("conversation_id")
    token = parameters.get("stream_token")
    call_sid = start.get("callSid")
    if media_format and (
        media_format.get("encoding") != "audio/x-mulaw"
        or media_format.get("sampleRate") not in (8000, "8000")
    ):
        raise InvalidStreamStart("The stream must be mu-law at 8 kHz.")
    if not (
        isinstance(stream_sid, str)
        and isinstance(conversation_id, str)
        and isinstance(token, str)
        and stream_sid
    ):
        raise InvalidStreamStart()
    return StreamStart(
        stream_sid=stream_sid,
        call_sid=call_sid if isinstance(call_sid, str) else None,
        conversation_id=conversation_id,
        stream_token=token,
    )


def call_configure() -> codec.Configure:
    """The config of a call: its pending conversation's agent, mu-law 8 kHz both ways."""
    return codec.Configure(agent=None, input_format=MULAW_8000, output_format=MULAW_8000)


class TwilioCodec:
    """One Twilio media stream's frames <-> the session's events (see the module doc)."""

    client_tools = False
    """No client on a call runs WebSocket tools: they get `{"error": "no client connected"}`."""

    def __init__(self, *, stream_sid: str, clock: Clock) -> None:
        self._sid = stream_sid
        self._clock = clock
        self._playback = Playback(clock)
        self._pending_audio = b""  # less than a frame, waiting for the next chunk
        self._speaking = False  # between the engine's start and end of a response
        self._dropping = False  # the reply was cleared: drop the rest of its audio
        self._digits = ""
        self._last_key = 0.0
        self._allowance = FLOOD_BURST
        self._allowance_at = clock.monotonic()
        self._complained: dict[str, tuple[float, int]] = {}
        self._timed = False  # a reply's timed first audio went out: the next mark tells
        self._timed_mark: str | None = None  # the mark after it, until echoed or cleared

    @property
    def playback_pending(self) -> bool:
        """True until the carrier echoes the last mark sent."""
        return self._playback.pending

    def heard(self, said: str) -> str:
        """What the carrier played of the interrupted reply (codec.KnowsPlayback)."""
        return self._playback.heard(said)

    # --- inbound ---------------------------------------------------------------------------

    def decode(self, data: codec.Frame) -> Sequence[codec.Inbound]:
        """Return the events of one frame; drop bad input with a (rate-limited) log line."""
        if data == IDLE_FRAME:
            return tuple(self._due_entry())
        if not self._take_allowance():
            self._complain("flood", "too many frames: dropped")
            return ()
        if isinstance(data, bytes):
            self._complain("binary", "a binary frame: dropped (Twilio sends JSON text)")
            return ()
        found = _json(data)
        if found is None:
            self._complain("malformed", "a frame that is not a JSON object: dropped")
            return ()
        return (*self._event(found), *self._due_entry())

    def _event(self, found: dict[str, Any]) -> list[codec.Inbound]:
        match found.get("event"):
            case "media":
                return self._media(_dict(found.get("media")))
            case "mark":
                name = _dict(found.get("mark")).get("name")
                if isinstance(name, str) and self._playback.acknowledge(name):
                    first, self._timed_mark = name == self._timed_mark, None
                    return [codec.Mark(name, first_audio=first)]
                return []  # a mark of cleared audio (or not ours): it does not count
            case "dtmf":
                return self._key(_dict(found.get("dtmf")).get("digit"))
            case "stop":
                return [codec.Hangup()]
            case "connected" | "start":
                self._complain("repeated", "a repeated opening frame: ignored")
                return []
            case _:
                self._complain("unknown", "an unknown event: ignored")
                return []

    def _media(self, media: dict[str, Any]) -> list[codec.Inbound]:
        if media.get("track", "inbound") not in ("inbound", "inbound_track"):
            return []  # a bidirectional stream's echo of our own audio
        payload = media.get("payload")
        try:
            audio = base64.b64decode(payload, validate=True) if isinstance(payload, str) else b""
        except (binascii.Error, ValueError):
            audio = b""
        if len(audio) != FRAME_BYTES:
            self._complain("media", "a media payload that is not 20 ms of mu-law: dropped")
            return []
        return [codec.AudioIn(audio)]

    def _key(self, digit: object) -> list[codec.Inbound]:
        if not isinstance(digit, str) or digit not in DIGITS:
            self._complain("dtmf", "a dtmf frame without a key: ignored")
            return []
        events: list[codec.Inbound] = []
        if self._speaking or self._playback.pending:
            events.append(codec.Interrupt())  # a key pressed over the agent stops it
        if digit == "#":
            return events + self._entry()
        self._digits += digit
        self._last_key = self._clock.monotonic()
        return events + (self._entry() if len(self._digits) >= MAX_DIGITS else [])

    def _due_entry(self) -> list[codec.Inbound]:
        """The keys gathered, once the caller paused for 2 s."""
        if self._digits and self._clock.monotonic() - self._last_key >= DTMF_PAUSE_SECONDS:
            return self._entry()
        return []

    def _entry(self) -> list[codec.Inbound]:
        digits, self._digits = self._digits, ""
        return [codec.Dtmf(digits)] if digits else []

    def _take_allowance(self) -> bool:
        now = self._clock.monotonic()
        self._allowance = min(
            FLOOD_BURST, self._allowance + (now - self._allowance_at) * FLOOD_RATE
        )
        self._allowance_at = now
        if self._allowance < 1.0:
            return False
        self._allowance -= 1.0
        return True

    def _complain(self, kind: str, line: str) -> None:
        """Log bad input once per kind per COMPLAINT_INTERVAL, with how many were dropped."""
        now = self._clock.monotonic()
        last, count = self._complained.get(kind, (float("-inf"), 0))
        if now - last < COMPLAINT_INTERVAL:
            self._complained[kind] = (last, count + 1)
            return
        self._complained[kind] = (now, 0)
        log.warning("media stream %s: %s (%d more since the last line)", self._sid, line, count)

    # --- outbound --------------------------------------------------------------------------

    def encode(self, message: codec.Outbound) -> Sequence[codec.Frame]:
        """Return the frames of one message: audio, marks and `clear`; nothing for the rest."""
        match message:
            case engine.AssistantStartedSpeaking():
                self._speaking, self._dropping = True, False
                self._playback.start_reply()
                return []
            case engine.AudioChunk(audio=audio, text=text, turn=turn):
                if self._dropping:
                    return []
                self._timed = self._timed or turn is not None  # played_ms (API.md 18)
                return self._audio(audio, text)
            case engine.KeypadPressed(digits=digits):  # the keys, as DTMF tones
                return [] if self._dropping else self._audio(_keypad_audio(digits), "")
            case engine.AssistantFinishedSpeaking():
                self._speaking = False
                frames = self._audio(b"", "", flush=True)
                self._playback.end_reply()
                return [*frames, self._mark(REPLY_MARK)]
            case engine.UserStartedSpeaking() if self._speaking or self._playback.pending:
                return self._clear()
            case engine.InterruptedResponse():  # a key pressed: not cleared yet
                self._speaking = False
                return [] if self._dropping else self._clear()
            case codec.RequestError(error=error):
                self._complain(error.code, f"refused: {error.code}")
                return []
            case engine.EngineWarning(code=code):  # the carrier has no frame for it: log it
                self._complain(code, f"engine warning: {code}")
                return []
        return []

    def _audio(self, audio: bytes, text: str, *, flush: bool = False) -> list[codec.Frame]:
        if text:  # the sentence starts where this chunk will: after the bytes still pending
            self._playback.sentence(text, self._playback.sent + len(self._pending_audio))
        data = self._pending_audio + audio
        if flush and len(data) % FRAME_BYTES:
            data += SILENCE * (FRAME_BYTES - len(data) % FRAME_BYTES)
        cut = len(data) - len(data) % FRAME_BYTES
        self._pending_audio = data[cut:]
        frames: list[codec.Frame] = []
        for start in range(0, cut, FRAME_BYTES):
            frames.append(self._media_frame(data[start : start + FRAME_BYTES]))
        if frames and not flush:
            frames.append(self._mark("audio"))
        return frames

    def _media_frame(self, payload: bytes) -> str:
        self._playback.audio_sent(len(payload))
        media = {"payload": base64.b64encode(payload).decode("ascii")}
        return _dump({"event": "media", "streamSid": self._sid, "media": media})

    def _mark(self, kind: str) -> str:
        name = self._playback.new_mark(kind)
        if self._timed:
            self._timed, self._timed_mark = False, name
        return _dump({"event": "mark", "streamSid": self._sid, "mark": {"name": name}})

    def _clear(self) -> list[codec.Frame]:
        self._dropping = True
        self._pending_audio = b""
        self._timed, self._timed_mark = False, None
        self._playback.clear()
        return [_dump({"event": "clear", "streamSid": self._sid})]


def _keypad_audio(digits: str) -> bytes:
    """The DTMF tones of `digits` as mu-law 8 kHz (engine/dtmf.py)."""
    return encode_samples(engine.AudioFormat.MULAW_8000, dtmf.tones(digits, 8000))


def _json(data: codec.Frame) -> dict[str, Any] | None:
    if isinstance(data, bytes):
        return None
    try:
        found = json.loads(data)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dump(frame: dict[str, Any]) -> str:
    return json.dumps(frame, separators=(",", ":"))
