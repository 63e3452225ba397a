"""The recorder (services/live/recorder.py): both directions on one timeline, cut at a
barge-in, decoded and mixed only when rendered."""

from __future__ import annotations

import io
import wave

import numpy as np
import numpy.typing as npt

from parley import engine
from parley.engine import AudioFormat, audio
from parley.services.live.recorder import TONE_MARGIN_S, Recorder


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def tone(fmt: AudioFormat, seconds: float, level: float = 0.5) -> bytes:
    """A steady level (every sample sounds, so where sound starts and ends is exact)."""
    return audio.encode(fmt, np.full(round(fmt.sample_rate * seconds), level, dtype=np.float32))


def rendered(recorder: Recorder) -> tuple[int, npt.NDArray[np.int16], npt.NDArray[np.int16]]:
    with wave.open(io.BytesIO(recorder.render())) as file:
        assert (file.getnchannels(), file.getsampwidth()) == (2, 2)
        frames = np.frombuffer(file.readframes(file.getnframes()), dtype="<i2").reshape(-1, 2)
        return file.getframerate(), frames[:, 0], frames[:, 1]


def sounding(channel: npt.NDArray[np.int16], rate: int) -> tuple[float, float]:
    """First and last sample louder than -40 dBFS, in seconds."""
    loud = np.flatnonzero(np.abs(channel) > 328)
    return loud[0] / rate, loud[-1] / rate


def test_recorder_user_left_agent_right_at_input_rate_on_one_timeline() -> None:
    clock = Clock()
    recorder = Recorder(AudioFormat.MULAW_8000, AudioFormat.PCM_24000, clock)
    silence, speech = tone(AudioFormat.MULAW_8000, 0.02, 0.0), tone(AudioFormat.MULAW_8000, 0.02)
    for n in range(100):  # 2 s of user audio, speech from 0.5 s to 1.0 s, in real time
        clock.now += 0.02
        recorder.heard(speech if 25 <= n < 50 else silence)
    recorder.observe(engine.AudioChunk(audio=tone(AudioFormat.PCM_24000, 0.5), text="Hi."))
    clock.now += 0.5
    recorder.observe(engine.AssistantFinishedSpeaking())
    rate, left, right = rendered(recorder)
    assert rate == 8_000
    assert left.size == right.size == 2.5 * 8_000
    start, end = sounding(left, rate)
    assert abs(start - 0.5) < 0.01
    assert abs(end - 1.0) < 0.01
    start, end = sounding(right, rate)
    assert abs(start - 2.0) < 0.01  # resampled from 24 kHz
    assert abs(end - 2.5) < 0.01


def test_recorder_agent_chunks_sent_ahead_follow_each_other_as_played() -> None:
    clock = Clock()
    recorder = Recorder(AudioFormat.PCM_16000, AudioFormat.PCM_16000, clock)
    recorder.heard(tone(AudioFormat.PCM_16000, 0.02, 0.0))
    for _ in range(5):  # five 0.2 s chunks sent in the same instant: played one after another
        recorder.observe(engine.AudioChunk(audio=tone(AudioFormat.PCM_16000, 0.2), text=""))
    rate, _left, right = rendered(recorder)
    start, end = sounding(right, rate)
    assert start < 0.03
    assert abs(end - 1.02) < 0.01


def test_recorder_unpaced_agent_reply_heard_whole_before_the_callers_next_frames() -> None:
    """A test run's caller gets the reply unpaced (a 3 s reply in an instant) and speaks
    1 s later by the clock: the recording has the reply whole, then the caller's frames,
    and the agent's next reply after them, as a person would have had the call."""
    clock = Clock()
    fmt = AudioFormat.PCM_16000
    recorder = Recorder(fmt, fmt, clock, paced=False)
    silence, speech = tone(fmt, 0.02, 0.0), tone(fmt, 0.02)
    for _ in range(50):  # the caller's first line: 1 s
        clock.now += 0.02
        recorder.heard(speech)
    recorder.observe(engine.AudioChunk(audio=tone(fmt, 3.0), text="A long reply."))
    for n in range(100):  # 2 s by the clock: 1 s of quiet, then the caller's next line
        clock.now += 0.02
        recorder.heard(speech if n >= 50 else silence)
    recorder.observe(engine.AudioChunk(audio=tone(fmt, 0.5, 0.25), text="Yes."))
    rate, left, right = rendered(recorder)
    loud_left = np.flatnonzero(np.abs(left) > 328) / rate
    first_reply = np.flatnonzero(np.abs(right) > 9000) / rate  # the 0.5-level reply
    second_reply = np.flatnonzero((np.abs(right) > 328) & (np.abs(right) < 9000)) / rate
    assert abs(loud_left[0] - 0.0) < 0.03
    assert abs(first_reply[0] - 1.0) < 0.03
    assert abs(first_reply[-1] - 4.0) < 0.03  # the reply whole
    next_line = loud_left[loud_left > 1.5]
    assert abs(next_line[0] - 5.0) < 0.03  # 1 s of quiet after the reply, not 1 s after it came
    assert abs(next_line[-1] - 6.0) < 0.03
    assert abs(second_reply[0] - 6.0) < 0.03
    assert abs(second_reply[-1] - 6.5) < 0.03


def test_recorder_paced_caller_speaking_over_the_agent_stays_where_it_was() -> None:
    clock = Clock()
    fmt = AudioFormat.PCM_16000
    recorder = Recorder(fmt, fmt, clock)
    recorder.heard(tone(fmt, 0.02, 0.0))
    recorder.observe(engine.AudioChunk(audio=tone(fmt, 3.0), text="A long reply."))
    for _ in range(50):  # the caller speaks over it at once: a barge-in, kept where it was
        clock.now += 0.02
        recorder.heard(tone(fmt, 0.02, 0.25))
    rate, left, _right = rendered(recorder)
    start, end = sounding(left, rate)
    assert start < 0.05
    assert abs(end - 1.02) < 0.03


def test_recorder_barge_in_cuts_what_was_sent_but_not_played() -> None:
    clock = Clock()
    recorder = Recorder(AudioFormat.PCM_16000, AudioFormat.PCM_16000, clock)
    recorder.heard(tone(AudioFormat.PCM_16000, 0.02, 0.0))
    for _ in range(3):  # 1.5 s sent at once
        recorder.observe(engine.AudioChunk(audio=tone(AudioFormat.PCM_16000, 0.5), text=""))
    clock.now += 0.7  # the user speaks over it 0.7 s in
    recorder.observe(engine.InterruptedResponse(text="Partly"))
    clock.now += 0.3
    recorder.heard(tone(AudioFormat.PCM_16000, 0.02))
    recorder.observe(engine.AudioChunk(audio=tone(AudioFormat.PCM_16000, 0.2), text="Yes?"))
    rate, _left, right = rendered(recorder)
    sound = np.abs(right) > 328
    # The timeline starts with the first user frame (0.02 s); the agent from 0.02 s on.
    assert sound[int(0.03 * rate) : int(0.71 * rate)].all()  # played until the barge-in...
    assert not sound[int(0.73 * rate) : int(1.02 * rate)].any()  # ...not what was sent after
    assert sound[int(1.03 * rate) : int(1.21 * rate)].all()  # the next answer, when it came


def test_recorder_keeps_wire_bytes_until_render() -> None:
    """Recording costs the turn a list append: no decoding while the conversation runs."""
    recorder = Recorder(AudioFormat.PCM_16000, AudioFormat.PCM_16000, Clock())
    assert recorder.empty
    chunk = tone(AudioFormat.PCM_16000, 0.02)
    recorder.heard(chunk)
    assert not recorder.empty
    assert recorder._user[0].data is chunk  # the frame itself, not a copy or a decode


def test_recorder_ignores_a_stray_odd_byte() -> None:
    recorder = Recorder(AudioFormat.PCM_16000, AudioFormat.PCM_16000, Clock())
    recorder.observe(engine.AudioChunk(audio=b"\xff", text="Bye."))
    recorder.heard(b"\x01")
    assert recorder.empty


def test_recorder_late_user_frames_follow_on_a_pause_starts_after_the_gap() -> None:
    """A frame that arrives late is jitter (it follows the one before); one that arrives
    after the client stopped sending for a while starts where it arrived."""
    clock = Clock()
    recorder = Recorder(AudioFormat.PCM_16000, AudioFormat.PCM_16000, clock)
    frame = tone(AudioFormat.PCM_16000, 0.02)
    began = clock.now
    for n in range(50):  # 1 s of frames in real time; the 5th to 10th held up, then a burst
        nominal = began + 0.02 * (n + 1)
        clock.now = max(nominal, began + 0.2) if 4 <= n < 10 else nominal
        recorder.heard(frame)
    heard_until = sounding(rendered(recorder)[1], 16_000)[1]
    assert abs(heard_until - 1.0) < 0.01  # 50 frames, no gaps: exactly 1 s of sound
    clock.now += 2.0  # the client stops sending for 2 s
    recorder.heard(frame)
    rate, left, _right = rendered(recorder)
    assert not (np.abs(left[int(1.05 * rate) : int(2.9 * rate)]) > 328).any()
    assert (np.abs(left[-int(0.02 * rate) :]) > 328).all()  # the frame, where it arrived


def test_recorder_a_held_up_first_frame_does_not_shift_the_user_late() -> None:
    """The first frames reach the server 0.3 s late and then in a burst (a busy host as the
    stream opened): the user's channel still sits where the frames were sent, so the agent's
    answer 1 s after the stream began is 1 s after the user's first sound."""
    clock = Clock()
    recorder = Recorder(AudioFormat.PCM_16000, AudioFormat.PCM_16000, clock)
    frame = tone(AudioFormat.PCM_16000, 0.02)
    began = clock.now
    for n in range(40):  # 0.8 s sent in real time; the first 15 frames all arrive at 0.3 s
        clock.now = max(began + 0.02 * (n + 1), began + 0.3)
        recorder.heard(frame)
    clock.now = began + 1.0
    recorder.observe(engine.AudioChunk(audio=tone(AudioFormat.PCM_16000, 0.2), text="Yes."))
    rate, left, right = rendered(recorder)
    user_start, user_end = sounding(left, rate)
    agent_start, _agent_end = sounding(right, rate)
    assert user_start < 0.001
    assert abs(user_end - 0.8) < 0.01
    assert abs(agent_start - 1.0) < 0.01  # not 1.0 - 0.28: the late arrival is not a shift


# --- redaction (API.md section 16): a 1 kHz tone where personal data was said ---------------


def is_tone(channel: npt.NDArray[np.int16], rate: int, start: float, end: float) -> bool:
    """Whether `start`..`end` (s) of the channel is the redaction tone: its strongest
    frequency 1 kHz, at the tone's level (-12 dBFS peak), nothing of what was there."""
    part = channel[round(start * rate) : round(end * rate)].astype(np.float64) / 32768
    spectrum = np.abs(np.fft.rfft(part))
    peak = np.fft.rfftfreq(part.size, 1 / rate)[np.argmax(spectrum)]
    return abs(peak - 1000) < 20 and abs(np.sqrt(np.mean(part**2)) - 0.251 / np.sqrt(2)) < 0.01


def test_recorder_redacting_tones_the_users_redacted_words_where_they_sit_on_the_timeline() -> None:
    """The words' times are input-stream times; the user's stream here pauses for 1 s (the
    client stopped sending), so what was said 1.4 s into the stream sits 2.4 s into the
    recording. The tone covers the number's words and TONE_MARGIN_S around them."""
    clock = Clock()
    recorder = Recorder(AudioFormat.PCM_16000, AudioFormat.PCM_16000, clock, redact=True)
    frame = tone(AudioFormat.PCM_16000, 0.02)
    for n in range(100):  # 1 s of frames, a 1 s pause, 1 s more
        clock.now += 0.02 + (1.0 if n == 50 else 0.0)
        recorder.heard(frame)
    words = (
        engine.Word("Call", 0.1, 0.3),
        engine.Word("me", 0.3, 0.4),
        engine.Word("at", 0.4, 0.5),
        engine.Word("415-555-2671.", 1.4, 1.6),
    )
    said = engine.InputText("Call me at 415-555-2671.", "en", words)
    recorder.observe(said)
    assert recorder._said == [words]  # all the call costs: the words kept as they came
    rate, left, _right = rendered(recorder)
    assert left.size == 3 * rate
    margin = TONE_MARGIN_S
    assert is_tone(left, rate, 2.4 - margin + 0.01, 2.6 + margin - 0.01)
    untouched = np.full(round(0.1 * rate), 16_384, dtype=np.int16)  # the frames' level
    before = left[round((2.4 - margin - 0.1) * rate) : round((2.4 - margin) * rate)]
    after = left[round((2.6 + margin) * rate) : round((2.6 + margin + 0.1) * rate)]
    assert np.array_equal(before, untouched)
    assert np.array_equal(after, untouched)
    assert np.array_equal(left[:rate], np.full(rate, 16_384, dtype=np.int16))  # "Call me at"


def test_recorder_redacting_tones_each_agent_sentence_with_personal_data_whole() -> None:
    """Synthesis gives no word times: a sentence that redaction changes is toned from its
    first chunk to the next sentence's; the rest is what the recording holds unredacted."""
    channels = []
    for redact in (True, False):
        recorder = Recorder(AudioFormat.PCM_16000, AudioFormat.PCM_24000, Clock(), redact=redact)
        recorder.heard(tone(AudioFormat.PCM_16000, 0.02, 0.0))
        chunk = tone(AudioFormat.PCM_24000, 0.2)
        for text in ("Your total is ten dollars.", "", "I will call 415-555-2671 at noon.", ""):
            recorder.observe(engine.AudioChunk(audio=chunk, text=text))
        recorder.observe(engine.AudioChunk(audio=chunk, text="Goodbye."))
        rate, _left, right = rendered(recorder)
        channels.append(right)
    redacted, heard = channels
    toned = slice(round(0.42 * rate), round(0.82 * rate))  # the second sentence's 0.4 s
    assert is_tone(redacted, rate, 0.43, 0.81)
    assert not is_tone(heard, rate, 0.43, 0.81)
    assert np.array_equal(redacted[: toned.start], heard[: toned.start])
    assert np.array_equal(redacted[toned.stop :], heard[toned.stop :])


def test_recorder_not_redacting_keeps_no_words_and_no_tone() -> None:
    clock = Clock()
    recorder = Recorder(AudioFormat.PCM_16000, AudioFormat.PCM_16000, clock)
    recorder.heard(tone(AudioFormat.PCM_16000, 0.02))
    words = (engine.Word("415-555-2671", 0.0, 0.02),)
    recorder.observe(engine.InputText("415-555-2671", "en", words))
    recorder.observe(
        engine.AudioChunk(audio=tone(AudioFormat.PCM_16000, 0.2), text="415-555-2671.")
    )
    assert recorder._said == []
    _rate, left, right = rendered(recorder)
    assert (left[left != 0] == 16_384).all()
    assert (right[right != 0] == 16_384).all()


def test_recorder_redacting_finds_a_number_the_sentence_splitter_cut_in_two() -> None:
    """The agent's sentences are redacted as one text, as its item is stored: a number said
    over two sentences tones both."""
    recorder = Recorder(AudioFormat.PCM_16000, AudioFormat.PCM_16000, Clock(), redact=True)
    recorder.heard(tone(AudioFormat.PCM_16000, 0.02, 0.0))
    chunk = tone(AudioFormat.PCM_16000, 0.2)
    for text in ("Call four one five.", "Five five five, two six seven one.", "Thanks."):
        recorder.observe(engine.AudioChunk(audio=chunk, text=text))
    rate, _left, right = rendered(recorder)
    assert is_tone(right, rate, 0.03, 0.41)
    assert not is_tone(right, rate, 0.43, 0.61)
