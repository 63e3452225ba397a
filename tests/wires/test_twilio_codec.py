"""The Twilio Media Streams codec: frames in, events out, and what was played (API.md 13)."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import pytest

from parley import engine
from parley.errors import AgentDisabled
from parley.services.live import codec
from parley.wires.twilio_codec import (
    DTMF_PAUSE_SECONDS,
    FRAME_BYTES,
    IDLE_FRAME,
    Connected,
    InvalidStreamStart,
    StreamStart,
    TwilioCodec,
    call_configure,
    parse_opening,
)

SID = "MZ" + "0" * 32


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def wire(clock: ManualClock) -> TwilioCodec:
    return TwilioCodec(stream_sid=SID, clock=clock)


def frame(event: str, **fields: Any) -> str:
    return json.dumps({"event": event, "streamSid": SID, **fields})


def media(payload: bytes, *, track: str = "inbound") -> str:
    encoded = base64.b64encode(payload).decode("ascii")
    data = {"track": track, "chunk": "1", "timestamp": "20", "payload": encoded}
    return frame("media", sequenceNumber="2", media=data)


def key(digit: str) -> str:
    return frame("dtmf", sequenceNumber="3", dtmf={"track": "inbound_track", "digit": digit})


def sent(frames: Any) -> list[dict[str, Any]]:
    return [json.loads(item) for item in frames]


def speak(wire: TwilioCodec, *chunks: tuple[int, str]) -> list[dict[str, Any]]:
    """Encode a response start and chunks of (bytes, sentence); return the frames."""
    out = sent(wire.encode(engine.AssistantStartedSpeaking()))
    for size, text in chunks:
        out += sent(wire.encode(engine.AudioChunk(b"\x00" * size, text)))
    return out


# --- the opening -----------------------------------------------------------------------


def start_frame(**start: Any) -> str:
    body = {
        "streamSid": SID,
        "accountSid": "AC" + "1" * 32,
        "callSid": "CA" + "2" * 32,
        "tracks": ["inbound"],
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        "customParameters": {"conversation_id": "conv_x", "stream_token": "tok"},
        **start,
    }
    return frame("start", sequenceNumber="1", start=body)


def test_opening_connected_then_start_parsed() -> None:
    assert parse_opening(json.dumps({"event": "connected", "protocol": "Call"})) == Connected()
    found = parse_opening(start_frame())
    assert found == StreamStart(SID, "CA" + "2" * 32, "conv_x", "tok")


@pytest.mark.parametrize(
    "data",
    [
        b"\x00",
        "not json",
        frame("media"),
        start_frame(customParameters={"conversation_id": "conv_x"}),
        start_frame(customParameters={"stream_token": "tok"}),
        start_frame(mediaFormat={"encoding": "audio/l16", "sampleRate": 16000}),
        start_frame(streamSid=7),
    ],
    ids=["binary", "not-json", "media", "no-token", "no-conversation", "not-mulaw", "bad-sid"],
)
def test_opening_anything_else_refused(data: str | bytes) -> None:
    with pytest.raises(InvalidStreamStart):
        parse_opening(data)


def test_call_configure_pending_conversation_mulaw_both_ways() -> None:
    assert call_configure() == codec.Configure(
        agent=None, input_format="mulaw_8000", output_format="mulaw_8000"
    )


# --- inbound -----------------------------------------------------------------------------


def test_media_payload_is_caller_audio(wire: TwilioCodec) -> None:
    audio = bytes(range(FRAME_BYTES))
    assert wire.decode(media(audio)) == (codec.AudioIn(audio),)


def test_media_outbound_track_ignored(wire: TwilioCodec) -> None:
    assert wire.decode(media(b"\xff" * FRAME_BYTES, track="outbound")) == ()


@pytest.mark.parametrize(
    "data",
    [
        media(b"\xff" * 100),
        media(b"\xff" * 1000),
        frame("media", media={"payload": "!!not base64!!"}),
        frame("media", media={"payload": 5}),
        frame("media"),
        frame("hello"),
        frame("dtmf", dtmf={"digit": "x"}),
        "[1, 2]",
        "{",
        b"\x00\x01",
    ],
    ids=[
        "short",
        "long",
        "bad-base64",
        "payload-not-string",
        "no-media",
        "unknown-event",
        "bad-digit",
        "not-object",
        "not-json",
        "binary",
    ],
)
def test_bad_input_dropped_with_log_line(
    wire: TwilioCodec, data: str | bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "parley.wires.twilio_codec"):
        assert wire.decode(data) == ()
        assert wire.decode(data) == ()  # the second within the interval: no second line
    assert len(caplog.records) == 1


def test_flood_of_frames_dropped_beyond_burst(
    wire: TwilioCodec, caplog: pytest.LogCaptureFixture
) -> None:
    audio = media(b"\xff" * FRAME_BYTES)
    with caplog.at_level(logging.WARNING, "parley.wires.twilio_codec"):
        taken = sum(len(wire.decode(audio)) for _ in range(1000))  # all at one instant
    assert taken == 200
    assert len(caplog.records) == 1


def test_stop_is_hangup(wire: TwilioCodec) -> None:
    assert wire.decode(frame("stop", stop={"callSid": "CA1"})) == (codec.Hangup(),)


def test_dtmf_gathered_until_hash_not_kept(wire: TwilioCodec) -> None:
    assert wire.decode(key("1")) == ()
    assert wire.decode(key("2")) == ()
    assert wire.decode(key("3")) == ()
    assert wire.decode(key("#")) == (codec.Dtmf("123"),)
    assert wire.decode(key("#")) == ()  # no entry: nothing


def test_dtmf_pause_of_two_seconds_ends_entry(wire: TwilioCodec, clock: ManualClock) -> None:
    wire.decode(key("4"))
    wire.decode(key("2"))
    clock.now += DTMF_PAUSE_SECONDS - 0.1
    assert wire.decode(IDLE_FRAME) == ()
    clock.now += 0.1
    assert wire.decode(media(b"\xff" * FRAME_BYTES)) == (
        codec.AudioIn(b"\xff" * FRAME_BYTES),
        codec.Dtmf("42"),
    )


def test_dtmf_pause_noticed_on_idle_frame(wire: TwilioCodec, clock: ManualClock) -> None:
    wire.decode(key("7"))
    clock.now += DTMF_PAUSE_SECONDS
    assert wire.decode(IDLE_FRAME) == (codec.Dtmf("7"),)


def test_dtmf_key_while_agent_speaks_interrupts(wire: TwilioCodec) -> None:
    speak(wire, (800, "Hello there."))
    assert wire.decode(key("5")) == (codec.Interrupt(),)
    frames = sent(wire.encode(engine.InterruptedResponse("Hello")))
    assert frames == [{"event": "clear", "streamSid": SID}]


# --- outbound ----------------------------------------------------------------------------


def test_agent_audio_sent_as_20ms_media_frames_then_mark(wire: TwilioCodec) -> None:
    frames = speak(wire, (800, "Hello there."))
    assert [item["event"] for item in frames] == ["media"] * 5 + ["mark"]
    payloads = [base64.b64decode(item["media"]["payload"]) for item in frames[:5]]
    assert all(len(payload) == FRAME_BYTES for payload in payloads)
    assert all(item["streamSid"] == SID for item in frames)


def test_reply_end_flushes_padded_frame_and_marks(wire: TwilioCodec) -> None:
    frames = speak(wire, (250, "Hi."))
    assert [item["event"] for item in frames] == ["media", "mark"]
    end = sent(wire.encode(engine.AssistantFinishedSpeaking()))
    assert [item["event"] for item in end] == ["media", "mark"]
    last = base64.b64decode(end[0]["media"]["payload"])
    assert last == b"\x00" * 90 + b"\xff" * 70  # the tail, padded with mu-law silence
    assert end[1]["mark"]["name"].startswith("reply-")


def test_playback_pending_until_last_mark_echoed(wire: TwilioCodec) -> None:
    frames = speak(wire, (800, "Goodbye."))
    frames += sent(wire.encode(engine.AssistantFinishedSpeaking()))
    marks = [item["mark"]["name"] for item in frames if item["event"] == "mark"]
    assert wire.playback_pending
    assert wire.decode(frame("mark", mark={"name": marks[0]})) == (codec.Mark(marks[0]),)
    assert wire.playback_pending
    assert wire.decode(frame("mark", mark={"name": marks[-1]})) == (codec.Mark(marks[-1]),)
    assert not wire.playback_pending


def test_user_speech_over_agent_sends_clear_and_drops_rest(wire: TwilioCodec) -> None:
    speak(wire, (800, "One two three four."))
    assert sent(wire.encode(engine.UserStartedSpeaking())) == [{"event": "clear", "streamSid": SID}]
    assert not wire.playback_pending
    assert wire.encode(engine.AudioChunk(b"\x00" * 800, "")) == []
    assert wire.encode(engine.InterruptedResponse("One two")) == []  # cleared already


def test_user_speech_while_silent_sends_nothing(wire: TwilioCodec) -> None:
    assert wire.encode(engine.UserStartedSpeaking()) == []


def test_marks_of_cleared_audio_do_not_count(wire: TwilioCodec) -> None:
    frames = speak(wire, (800, "One two."), (800, "Three four."), (800, "Five six."))
    marks = [item["mark"]["name"] for item in frames if item["event"] == "mark"]
    wire.decode(frame("mark", mark={"name": marks[0]}))  # the first sentence played
    wire.encode(engine.UserStartedSpeaking())
    assert wire.decode(frame("mark", mark={"name": marks[1]})) == ()  # echoed by the clear
    assert wire.decode(frame("mark", mark={"name": marks[2]})) == ()
    assert wire.heard("One two. Three four.") == "One two."


def test_interrupted_reply_heard_to_nearest_frame_cut_at_word(
    wire: TwilioCodec, clock: ManualClock
) -> None:
    frames = speak(
        wire, (800, "Alpha beta."), (800, "Gamma delta epsilon zeta eta theta iota kappa.")
    )
    frames += sent(wire.encode(engine.AssistantFinishedSpeaking()))
    first = next(item["mark"]["name"] for item in frames if item["event"] == "mark")
    clock.now += 0.1
    wire.decode(frame("mark", mark={"name": first}))  # the first sentence played
    clock.now += 0.04  # and 2 frames of the second
    wire.encode(engine.UserStartedSpeaking())
    said = "Alpha beta. Gamma delta epsilon zeta eta"
    assert wire.heard(said) == "Alpha beta. Gamma delta epsilon"  # 2 of 5 frames: 3 words


def test_interrupted_reply_never_more_than_engine_said(
    wire: TwilioCodec, clock: ManualClock
) -> None:
    speak(wire, (800, "Alpha beta."))
    wire.encode(engine.AssistantFinishedSpeaking())
    clock.now += 1.0
    assert wire.heard("Alpha") == "Alpha"


def test_nothing_played_before_a_mark_position_passes(
    wire: TwilioCodec, clock: ManualClock
) -> None:
    speak(wire, (800, "Alpha beta."), (800, "Gamma delta."))
    wire.encode(engine.AssistantFinishedSpeaking())
    clock.now += 5.0  # no echo: the carrier's playback may be stalled, capped at the first mark
    wire.encode(engine.UserStartedSpeaking())
    assert wire.heard("Alpha beta. Gamma delta.") == "Alpha beta."


def test_request_error_logged_never_sent(
    wire: TwilioCodec, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "parley.wires.twilio_codec"):
        assert wire.encode(codec.RequestError(AgentDisabled())) == []
    assert "agent_disabled" in caplog.text


def test_client_tools_unavailable_on_calls(wire: TwilioCodec) -> None:
    assert wire.client_tools is False
    assert isinstance(wire, codec.KnowsPlayback)


def test_engine_warning_logged_never_sent(
    wire: TwilioCodec, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "parley.wires.twilio_codec"):
        assert wire.encode(engine.EngineWarning("utterance_dropped", "Too fast.")) == []
    assert "utterance_dropped" in caplog.text


def test_interrupted_open_sentence_engine_share_scaled_to_played(
    wire: TwilioCodec, clock: ManualClock
) -> None:
    frames = speak(wire, (800, "One two three four five six seven eight nine ten."))
    frames += sent(wire.encode(engine.AudioChunk(b"\x00" * 800, "")))
    first = next(item["mark"]["name"] for item in frames if item["event"] == "mark")
    clock.now += 0.1
    wire.decode(frame("mark", mark={"name": first}))  # 100 ms played
    clock.now += 0.3  # the engine counts 400 ms; the carrier has played 200 (the next mark's)
    wire.encode(engine.UserStartedSpeaking())
    assert wire.heard("One two three four five six") == "One two three"  # half of the six


def test_interrupted_open_sentence_played_in_step_keeps_engine_words(
    wire: TwilioCodec, clock: ManualClock
) -> None:
    frames = speak(wire, (800, "One two three four five six seven eight nine ten."))
    first = next(item["mark"]["name"] for item in frames if item["event"] == "mark")
    clock.now += 0.1
    wire.decode(frame("mark", mark={"name": first}))
    wire.encode(engine.UserStartedSpeaking())
    assert wire.heard("One two") == "One two"
