"""A replay's user audio (services/conversation_replays.py): the recording's left channel."""

from __future__ import annotations

import io
import wave

import numpy as np
import pytest

from parley.errors import NoRecording
from parley.services.conversation_replays import user_channel


def wav_of(samples: np.ndarray, *, channels: int, rate: int) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(channels)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(samples.astype("<i2").tobytes())
    return buffer.getvalue()


def test_user_channel_is_the_recordings_left_channel_at_its_rate() -> None:
    left = np.arange(0, 800, dtype=np.int16)
    right = -np.arange(0, 800, dtype=np.int16)
    stereo = np.stack([left, right], axis=1).reshape(-1)
    audio, rate = user_channel(wav_of(stereo, channels=2, rate=8_000))
    assert rate == 8_000
    assert np.array_equal(np.frombuffer(audio, dtype="<i2"), left)


@pytest.mark.parametrize(
    "wav",
    [
        wav_of(np.zeros(160, dtype=np.int16), channels=1, rate=16_000),
        wav_of(np.zeros(320, dtype=np.int16), channels=2, rate=11_025),
        b"RIFF not a wave",
    ],
    ids=["mono", "odd-rate", "not-a-wav"],
)
def test_user_channel_not_a_parley_recording_no_recording(wav: bytes) -> None:
    with pytest.raises(NoRecording):
        user_channel(wav)
