"""The replay's in-process wire (wires/replay_codec.py): user audio in, nothing out, and
when the last reply is over."""

from __future__ import annotations

from parley import engine
from parley.errors import ValidationFailed
from parley.services.live import codec
from parley.wires.replay_codec import ReplayCodec


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_replay_codec_frames_are_user_audio_and_nothing_goes_out() -> None:
    wire = ReplayCodec(Clock())
    assert wire.decode(b"\x01\x00\x02\x00") == [codec.AudioIn(b"\x01\x00\x02\x00")]
    assert wire.encode(engine.AudioChunk(audio=b"\x00\x00", text="Hi")) == ()
    assert (wire.client_tools, wire.playback_pending) == (False, False)


def test_replay_codec_settled_only_after_the_reply_and_the_quiet() -> None:
    clock = Clock()
    wire = ReplayCodec(clock)
    clock.now += 2
    assert wire.settled(1.0)
    wire.encode(engine.UserStartedSpeaking())
    clock.now += 5
    assert not wire.settled(1.0)  # the user's turn awaits its reply
    wire.encode(engine.AssistantStartedSpeaking())
    clock.now += 5
    assert not wire.settled(1.0)  # the reply is being spoken
    wire.encode(engine.AssistantFinishedSpeaking())
    clock.now += 0.5
    assert not wire.settled(1.0)
    clock.now += 0.5
    assert wire.settled(1.0)


def test_replay_codec_error_before_live_failed() -> None:
    wire = ReplayCodec(Clock())
    wire.encode(codec.RequestError(ValidationFailed()))
    assert wire.failed
    later = ReplayCodec(Clock())
    later.encode(codec.ConversationCreated("conv_1"))
    later.encode(codec.RequestError(ValidationFailed()))
    assert (later.live, later.failed) == (True, False)
