"""Turn-taking rules, on probabilities (exact) and on real speech through Silero."""

from __future__ import annotations

import numpy as np
import pytest
from tests import speech

from parley.engine import AudioFormat
from parley.engine.audio import StreamResampler, decode
from parley.engine.vad import (
    SileroPool,
    SileroStream,
    Transition,
    TurnAudio,
    TurnDetector,
    VadParams,
    stream_time,
    vad_rate,
)

WINDOW = 0.032  # Silero's window at 8 and 16 kHz


def run(probabilities: list[float], params: VadParams | None = None) -> list[tuple[str, float]]:
    detector = TurnDetector(WINDOW, params or VadParams())
    return [(e.kind.value, round(e.time, 3)) for e in detector.process(probabilities)]


def windows(seconds: float, p: float) -> list[float]:
    return [p] * round(seconds / WINDOW)


def test_vad_onset_reported_after_onset_ms_dated_at_first_window() -> None:
    detector = TurnDetector(WINDOW, VadParams())
    assert detector.process([*windows(0.32, 0.0), 0.9, 0.9]) == []
    (started,) = detector.process([0.9])
    assert started.kind is Transition.STARTED
    assert started.time == pytest.approx(0.32)


def test_vad_end_of_turn_after_end_silence_ms() -> None:
    events = run(windows(0.32, 0.0) + windows(0.96, 0.9) + windows(0.39, 0.0))
    assert [kind for kind, _ in events] == ["started", "paused"]
    events = run(windows(0.32, 0.0) + windows(0.96, 0.9) + windows(0.42, 0.0))
    assert [kind for kind, _ in events] == ["started", "paused", "finished"]
    assert events[-1][1] == pytest.approx(1.28)  # where the speech last was


def test_vad_end_silence_configurable() -> None:
    params = VadParams(end_silence_ms=800)
    events = run(windows(0.96, 0.9) + windows(0.6, 0.0), params)
    assert "finished" not in [kind for kind, _ in events]
    events = run(windows(0.96, 0.9) + windows(0.82, 0.0), params)
    assert events[-1][0] == "finished"


def test_vad_short_burst_shorter_than_min_speech_dropped() -> None:
    detector = TurnDetector(WINDOW, VadParams())
    events = detector.process(windows(0.16, 0.9) + windows(0.5, 0.0))  # a cough
    assert [e.kind for e in events] == [Transition.STARTED, Transition.PAUSED, Transition.FINISHED]
    assert events[-1].dropped is True
    events = detector.process(windows(0.4, 0.9) + windows(0.5, 0.0))  # a word
    assert events[-1].kind is Transition.FINISHED
    assert events[-1].dropped is False


def test_vad_click_shorter_than_onset_starts_nothing() -> None:
    assert run(windows(0.064, 1.0) + windows(1.0, 0.0)) == []


def test_vad_check_after_check_ms_of_silence_once_per_pause() -> None:
    """Semantic mode: CHECK (ask the end-of-turn model) comes after PAUSED, once per pause,
    dated where the speech stopped; the turn still ends on the longest silence."""
    detector = TurnDetector(WINDOW, VadParams(end_silence_ms=1500), checks_ms=(150,))
    audio = windows(0.96, 0.9) + windows(0.5, 0.0) + windows(0.64, 0.9) + windows(1.6, 0.0)
    events = [(e.kind.value, round(e.time, 3)) for e in detector.process(audio)]
    assert events == [
        ("started", 0.0),
        ("paused", 0.96),
        ("check", 0.96),
        ("resumed", 1.472),
        ("paused", 2.112),
        ("check", 2.112),
        ("finished", 2.112),
    ]


def test_vad_check_after_each_of_checks_ms_with_the_silence_so_far() -> None:
    """Two waits (the model's sure and plain answers): a CHECK after each, in whole windows,
    carrying how long the silence has lasted."""
    detector = TurnDetector(WINDOW, VadParams(end_silence_ms=1500), checks_ms=(300, 200))
    events = detector.process(windows(0.96, 0.9) + windows(0.5, 0.0))
    checks = [round(e.silence_seconds, 3) for e in events if e.kind is Transition.CHECK]
    assert checks == [0.224, 0.32]  # 7 and 10 windows of 32 ms


def test_vad_check_not_between_pause_and_end_refused() -> None:
    for check_ms in (64, 400):
        with pytest.raises(ValueError, match="checks_ms"):
            TurnDetector(WINDOW, VadParams(), checks_ms=(200, check_ms))


def test_vad_pause_then_resume_keeps_one_turn() -> None:
    events = run(windows(0.5, 0.9) + windows(0.2, 0.0) + windows(0.5, 0.9) + windows(0.5, 0.0))
    assert [kind for kind, _ in events] == ["started", "paused", "resumed", "paused", "finished"]


def test_vad_hysteresis_keeps_turn_between_release_and_threshold() -> None:
    events = run(windows(0.3, 0.9) + windows(1.0, 0.4) + windows(0.5, 0.0))
    assert events[1][0] == "paused"
    assert events[1][1] == pytest.approx(1.28)


def test_vad_turn_longer_than_max_speech_cut() -> None:
    events = run(windows(3.2, 0.9), VadParams(max_speech_ms=2000))
    assert [kind for kind, _ in events] == ["started", "finished", "started"]  # speech goes on
    assert events[1][1] == pytest.approx(2.016)


@pytest.mark.parametrize(
    "values",
    [
        {"threshold": 0.3, "release_threshold": 0.5},
        {"onset_ms": 300, "min_speech_ms": 200},
        {"pause_ms": 500, "end_silence_ms": 400},
        {"pad_ms": -1},
    ],
)
def test_vad_params_inconsistent_refused(values: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"need|negative"):
        VadParams(**values)  # type: ignore[arg-type]


# --- Silero on real audio -----------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("fmt", list(AudioFormat), ids=lambda f: f.value)
async def test_vad_silero_finds_one_turn_in_spoken_sentence_every_format(
    fmt: AudioFormat,
) -> None:
    pool = SileroPool()
    rate = vad_rate(fmt.sample_rate)
    model = await pool.acquire(rate)
    stream = SileroStream(model, gate_dbfs=-55.0)
    to_vad = StreamResampler(fmt.sample_rate, rate)
    detector = TurnDetector(stream.window_seconds, VadParams())
    sentence = speech.spoken(speech.SENTENCES[2])
    events = []
    for chunk in speech.stream(fmt, 0.5, sentence, 1.0):
        events += detector.process(stream.process(to_vad.feed(decode(fmt, chunk))))
    kinds = [e.kind for e in events if e.kind in (Transition.STARTED, Transition.FINISHED)]
    assert kinds == [Transition.STARTED, Transition.FINISHED]
    voiced = np.flatnonzero(np.abs(sentence) > 0.01)
    start, end = 0.5 + voiced[0] / speech.RATE, 0.5 + voiced[-1] / speech.RATE
    assert abs(events[0].time - start) < 0.15
    assert abs(events[-1].time - end) < 0.2
    assert not events[-1].dropped


@pytest.mark.anyio
async def test_vad_silero_silence_and_noise_start_no_turn() -> None:
    pool = SileroPool()
    model = await pool.acquire(16_000)
    stream = SileroStream(model, gate_dbfs=-55.0)
    detector = TurnDetector(stream.window_seconds, VadParams())
    noise = np.random.default_rng(7).normal(0, 0.02, 16_000 * 20).astype(np.float32)
    assert detector.process(stream.process(np.zeros(16_000 * 5, dtype=np.float32))) == []
    assert detector.process(stream.process(noise)) == []


def test_vad_energy_gate_skips_quiet_windows_without_the_model() -> None:
    class Exploding:
        sample_rate = 16_000
        window_size_samples = 512

        def process(self, _data: object) -> float:
            raise AssertionError("the model ran on a quiet window")

    stream = SileroStream(Exploding(), gate_dbfs=-55.0)  # type: ignore[arg-type]
    quiet = np.full(512 * 10, 0.001, dtype=np.float32)  # -60 dBFS
    assert stream.process(quiet) == [0.0] * 10


@pytest.mark.anyio
async def test_vad_pool_reuses_released_model() -> None:
    pool = SileroPool()
    first = await pool.acquire(8_000)
    pool.release(first)
    assert await pool.acquire(8_000) is first


def test_turn_audio_long_pause_inside_the_turn_cut_to_keep_gap_both_ends_kept() -> None:
    """A 1 s pause inside a turn reaches the recognizer as 0.3 s (its two ends kept)."""
    audio = TurnAudio(100, keep_s=0.5, pad_s=0.0)  # 100 Hz: one sample per 10 ms
    samples = np.concatenate(
        [np.full(100, 1.0), np.zeros(100), np.full(50, 2.0), np.zeros(20), np.full(30, 3.0)]
    ).astype(np.float32)
    audio.start_turn(0.0)
    audio.append(samples)
    whole = audio.turn()
    assert np.array_equal(whole, samples)
    cut = audio.turn(gaps=[(1.0, 2.0), (2.5, 2.7)], keep_gap_s=0.3)
    expected = np.concatenate(
        [np.full(100, 1.0), np.zeros(30), np.full(50, 2.0), np.zeros(20), np.full(30, 3.0)]
    )
    assert np.array_equal(cut, expected)  # the 0.2 s pause is shorter than 0.3 s: kept whole


def test_turn_audio_placed_turn_maps_the_turns_audio_back_to_stream_time() -> None:
    """The turn's audio starts `pad` before its speech and its long pauses are cut: each
    part says where it came from, so a time in the audio is a time in the stream."""
    audio = TurnAudio(100, keep_s=0.5, pad_s=0.2)
    audio.append(np.zeros(400, dtype=np.float32))  # 4 s of stream; the turn starts at 1 s
    audio.start_turn(1.0)
    samples, places = audio.placed_turn(gaps=[(2.0, 3.0)], keep_gap_s=0.3)
    assert samples.size == 320 - 70  # from 0.8 s to 4 s, 0.7 s of the pause cut
    assert places == ((0.0, 0.8), (1.35, 2.85))  # the pause kept 0.15 s at each end
    assert stream_time(places, 0.0) == pytest.approx(0.8)
    assert stream_time(places, 1.2) == pytest.approx(2.0)  # before the cut
    assert stream_time(places, 1.5) == pytest.approx(3.0)  # after it
    assert stream_time((), 1.5) == 1.5
