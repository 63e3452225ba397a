"""A conversation's analysis and `ended_by` (API.md section 5), measured from engine events."""

from __future__ import annotations

from dataclasses import replace

import pytest

from parley import engine, metrics
from parley.engine.timing import TurnMarks
from parley.records import TurnTiming
from parley.services import endings
from parley.services.live.analysis import TurnAnalysis, stages, timings


class StepClock:
    def __init__(self) -> None:
        self.now = 100.0

    def time(self) -> float:
        return 1_700_000_000.0 + self.now

    def monotonic(self) -> float:
        return self.now


MARKS = TurnMarks(
    speech_ended=100.0,
    decided=100.3,
    transcribed=100.32,
    first_token=100.5,
    first_sentence=100.6,
    first_audio=100.7,
)


def test_stages_of_a_reply_from_end_of_speech_to_first_audio_sent() -> None:
    turn = stages(MARKS, sent_at=100.72)

    assert turn == TurnTiming(
        endpointing_ms=300,
        transcription_ms=20,
        model_first_token_ms=180,
        speech_first_audio_ms=120,
        total_ms=720,
    )


def test_stages_words_known_before_the_decision_count_zero_never_less() -> None:
    early = replace(MARKS, transcribed=100.1)  # the speculative decode was done already

    turn = stages(early, sent_at=100.7)

    # The model is asked once the turn is judged over: its stage counts from the decision.
    assert (turn.transcription_ms, turn.model_first_token_ms) == (0, 200)


def test_stages_rounded_once_never_add_up_past_the_total() -> None:
    """Each instant rounds once: stages rounded apart (0.6 ms each, up) made 414 of a 412."""
    marks = TurnMarks(
        speech_ended=100.0,
        decided=100.3006,
        transcribed=100.3012,
        first_token=100.3518,
        first_sentence=100.3518,
        first_audio=100.4,
    )

    turn = stages(marks, sent_at=100.4124)

    assert turn.total_ms == 412
    parts = (
        turn.endpointing_ms,
        turn.transcription_ms,
        turn.model_first_token_ms,
        turn.speech_first_audio_ms,
    )
    assert sum(parts) <= turn.total_ms, parts


def test_timings_on_the_first_audio_chunk_name_the_stages_without_item_or_played() -> None:
    assert timings(stages(MARKS, sent_at=100.72)) == {
        "endpointing_ms": 300,
        "transcription_ms": 20,
        "model_first_token_ms": 180,
        "speech_first_audio_ms": 120,
        "total_ms": 720,
    }


def test_analysis_latencies_are_each_replys_total_with_its_item_and_played() -> None:
    clock = StepClock()
    analysis = TurnAnalysis(clock)
    clock.now = 100.75
    analysis.replied(MARKS)
    clock.now = 101.0
    analysis.played()  # the carrier echoed the mark after the first audio
    analysis.played()  # a later echo is not that one
    analysis.stored("item_1")
    analysis.stored("item_2")  # a later assistant item is not that reply's

    assert analysis.latencies_ms == [750]
    assert analysis.turns == [TurnTiming(300, 20, 180, 150, 750, played_ms=1000, item_id="item_1")]


def test_analysis_reply_without_an_item_or_an_echo_keeps_them_null() -> None:
    clock = StepClock()
    analysis = TurnAnalysis(clock)
    clock.now = 100.75
    analysis.replied(MARKS)
    analysis.stored(None)  # cut before a word was heard: no item
    analysis.stored("item_later")

    assert (analysis.turns[0].item_id, analysis.turns[0].played_ms) == (None, None)


def test_analysis_resumed_keeps_the_earlier_figures_first() -> None:
    clock = StepClock()
    analysis = TurnAnalysis(clock)
    earlier = TurnTiming(1, 2, 3, 4, 410, item_id="item_0")
    analysis.resume((390, 410), (earlier,), 2)  # the first figure was stored without stages
    clock.now = 100.7  # the first audio goes out after the first sentence (100.6)
    analysis.replied(MARKS)

    outcome = analysis.outcome()
    assert outcome.latencies_ms == (390, 410, 700)
    assert [turn.total_ms for turn in outcome.turns] == [410, 700]
    assert outcome.interruptions_count == 2


def test_analysis_observes_each_stage_once_per_reply_in_metrics() -> None:
    with metrics.activate(metrics.Metrics()) as measured:
        clock = StepClock()
        analysis = TurnAnalysis(clock)
        clock.now = 100.75
        analysis.replied(MARKS)
        clock.now = 101.0
        analysis.played()
    for stage in metrics.TURN_STAGES:
        count = measured.registry.get_sample_value(
            "parley_turn_stage_seconds_count", {"stage": stage}
        )
        assert count == 1, stage
    total = measured.registry.get_sample_value("parley_turn_stage_seconds_sum", {"stage": "total"})
    assert total == pytest.approx(0.75)


def test_analysis_counts_each_interrupted_response() -> None:
    analysis = TurnAnalysis(StepClock())
    analysis.observe(engine.InterruptedResponse("Half a"))
    analysis.observe(engine.InterruptedResponse(""))

    assert analysis.interruptions_count == 2


@pytest.mark.parametrize(
    ("ending", "code", "reason", "ended_by"),
    [
        (endings.CLIENT_CLOSED, 1000, "", "user"),
        (endings.USER_HANGUP, 1000, "", "user"),
        (endings.ENDED_ELSEWHERE, 1000, "conversation ended", "api"),
        (endings.ASSISTANT, 1000, "conversation ended", "assistant"),
        (endings.TOKEN_EXPIRED, 1008, "token expired", "timeout"),
        (endings.TOKEN_REVOKED, 1008, "session token revoked", "api"),
        (endings.SHUTDOWN, 1001, "", "shutdown"),
        (endings.MESSAGE_TOO_BIG, 1009, "message too big", "error"),
        (endings.INTERNAL_ERROR, 1011, "internal error", "error"),
    ],
)
def test_each_socket_ending_names_its_close_code_reason_and_ended_by(
    ending: endings.Ending, code: int, reason: str, ended_by: str
) -> None:
    assert (ending.close_code, ending.reason, ending.ended_by) == (code, reason, ended_by)
