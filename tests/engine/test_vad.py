from __future__ import annotations

import numpy as np
import pytest

from parley.engine.vad import (
    EnergyVad,
    Transition,
    Utterance,
    UtteranceCapture,
    VadEvent,
    VadParams,
)

RATE = 16_000


def silence(ms: int) -> np.ndarray:
    return np.zeros(RATE * ms // 1000, dtype=np.float32)


def loud(ms: int, amplitude: float = 0.3) -> np.ndarray:
    t = np.arange(RATE * ms // 1000) / RATE
    return (amplitude * np.sin(2 * np.pi * 300.0 * t)).astype(np.float32)


def noise(ms: int, dbfs: float, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (10 ** (dbfs / 20) * rng.standard_normal(RATE * ms // 1000)).astype(np.float32)


def run(vad: EnergyVad, audio: np.ndarray, chunk_ms: int = 20) -> list[VadEvent]:
    step = RATE * chunk_ms // 1000
    events: list[VadEvent] = []
    for start in range(0, audio.size, step):
        events.extend(vad.process(audio[start : start + step]))
    return events


def kinds(events: list[VadEvent]) -> list[Transition]:
    return [event.kind for event in events]


def test_vad_silence_only_no_events() -> None:
    assert run(EnergyVad(RATE), silence(3000)) == []


def test_vad_tone_between_silences_starts_and_finishes_at_its_edges() -> None:
    vad = EnergyVad(RATE)
    events = run(vad, np.concatenate([silence(500), loud(600), silence(1000)]))
    assert events == [
        VadEvent(Transition.STARTED, RATE * 500 // 1000),
        VadEvent(Transition.FINISHED, RATE * 1100 // 1000),
    ]
    assert not vad.speaking


def test_vad_finished_waits_for_end_ms_of_silence() -> None:
    vad = EnergyVad(RATE)
    assert kinds(run(vad, np.concatenate([silence(500), loud(600), silence(590)]))) == [
        Transition.STARTED
    ]
    assert vad.speaking
    assert kinds(vad.process(silence(20))) == [Transition.FINISHED]


def test_vad_chunk_size_does_not_change_events() -> None:
    audio = np.concatenate([silence(330), loud(610), silence(170), loud(250), silence(900)])
    expected = run(EnergyVad(RATE), audio, chunk_ms=40)
    assert kinds(expected) == [Transition.STARTED, Transition.FINISHED]
    assert run(EnergyVad(RATE), audio, chunk_ms=7) == expected
    assert EnergyVad(RATE).process(audio) == expected


def test_vad_blip_shorter_than_start_ms_ignored() -> None:
    assert run(EnergyVad(RATE), np.concatenate([silence(500), loud(60), silence(1000)])) == []


def test_vad_pause_shorter_than_end_ms_one_utterance() -> None:
    audio = np.concatenate([silence(300), loud(400), silence(300), loud(400), silence(1000)])
    assert kinds(run(EnergyVad(RATE), audio)) == [Transition.STARTED, Transition.FINISHED]


def test_vad_quiet_tone_below_min_onset_ignored() -> None:
    audio = np.concatenate([silence(300), loud(600, amplitude=0.002), silence(1000)])
    assert run(EnergyVad(RATE), audio) == []


def test_vad_tone_over_steady_noise_detected() -> None:
    audio = noise(3000, dbfs=-35)
    audio[RATE : RATE + len(loud(600))] += loud(600)
    events = run(EnergyVad(RATE, VadParams(initial_floor_dbfs=None)), audio)
    assert kinds(events) == [Transition.STARTED, Transition.FINISHED]
    assert events[0].sample == pytest.approx(RATE, abs=RATE // 100)


def test_vad_speech_opening_stream_detected() -> None:
    events = run(EnergyVad(RATE), np.concatenate([loud(600), silence(1000)]))
    assert events == [
        VadEvent(Transition.STARTED, 0),
        VadEvent(Transition.FINISHED, RATE * 600 // 1000),
    ]


def test_vad_speech_opening_stream_no_initial_floor_missed() -> None:
    vad = EnergyVad(RATE, VadParams(initial_floor_dbfs=None))
    assert run(vad, np.concatenate([loud(600), silence(1000)])) == []


def test_vad_noise_opening_stream_absorbed_after_floor_window() -> None:
    vad = EnergyVad(RATE, VadParams(floor_window_ms=1000))
    audio = noise(3000, dbfs=-35)
    audio[2 * RATE : 2 * RATE + len(loud(600))] += loud(600)
    events = run(vad, np.concatenate([audio, silence(1000)]))
    assert kinds(events) == [Transition.STARTED, Transition.FINISHED] * 2
    assert events[1].sample < RATE * 2 == events[2].sample


def test_vad_noise_onset_absorbed_by_adaptive_floor() -> None:
    vad = EnergyVad(RATE, VadParams(floor_window_ms=1000))
    events = run(vad, np.concatenate([silence(500), noise(4000, dbfs=-30)]))
    assert kinds(events) == [Transition.STARTED, Transition.FINISHED]
    assert events[1].sample < RATE * 2  # within the floor window of the onset
    assert not vad.speaking


def test_vad_speech_longer_than_max_speech_ms_cut() -> None:
    vad = EnergyVad(RATE, VadParams(max_speech_ms=1000, floor_window_ms=5000))
    events = run(vad, np.concatenate([silence(200), loud(1500)]))
    assert kinds(events)[:2] == [Transition.STARTED, Transition.FINISHED]
    assert events[1].sample - events[0].sample == RATE


def test_vad_finish_while_speaking_returns_finished() -> None:
    vad = EnergyVad(RATE)
    run(vad, np.concatenate([silence(200), loud(300)]))
    event = vad.finish()
    assert event is not None
    assert event.kind is Transition.FINISHED
    assert vad.finish() is None


@pytest.mark.parametrize(
    "params",
    [
        {"start_ms": 5},
        {"end_ms": 0},
        {"hysteresis_db": 20.0},
        {"max_speech_ms": 50},
    ],
)
def test_vad_params_inconsistent_raise(params: dict[str, int | float]) -> None:
    with pytest.raises(ValueError, match=r"need|must"):
        VadParams(**params)  # type: ignore[arg-type]


def test_utterance_capture_cuts_speech_with_padding() -> None:
    capture = UtteranceCapture(RATE, pad_ms=150)
    audio = np.concatenate([silence(2000), loud(600), silence(1000)])
    items = [
        item
        for start in range(0, audio.size, 320)
        for item in capture.process(audio[start : start + 320])
    ]
    assert isinstance(items[0], VadEvent)
    utterance = items[1]
    assert isinstance(utterance, Utterance)
    assert utterance.speech_seconds == pytest.approx(0.6)
    assert utterance.samples.size == RATE * 900 // 1000  # 150 ms + 600 ms + 150 ms
    assert np.count_nonzero(utterance.samples) > RATE * 590 // 1000


def test_utterance_capture_finish_mid_speech_returns_utterance() -> None:
    capture = UtteranceCapture(RATE)
    capture.process(np.concatenate([silence(300), loud(400)]))
    utterance = capture.finish()
    assert utterance is not None
    assert utterance.speech_seconds == pytest.approx(0.4)
    assert capture.finish() is None
