"""A conversation's analysis and `ended_by` (API.md section 5), measured from engine events."""

from __future__ import annotations

import pytest

from parley import engine
from parley.services import endings
from parley.services.live.analysis import TurnAnalysis


class StepClock:
    def __init__(self) -> None:
        self.now = 100.0

    def time(self) -> float:
        return 1_700_000_000.0 + self.now

    def monotonic(self) -> float:
        return self.now


def test_analysis_latency_from_end_of_speech_to_first_audio_per_answered_turn() -> None:
    clock = StepClock()
    analysis = TurnAnalysis(clock)
    for event, at in [
        (engine.UserStartedSpeaking(), 100.0),
        (engine.UserFinishedSpeaking(), 101.0),
        (engine.InputText("hello", "en"), 101.2),
        (engine.AssistantStartedSpeaking(), 101.35),
        (engine.AudioChunk(b"\x00\x00", "Hi."), 101.35),
        (engine.AudioChunk(b"\x00\x00", ""), 101.45),  # later chunks count nothing
        (engine.AssistantFinishedSpeaking(), 103.0),
    ]:
        clock.now = at
        analysis.observe(event)

    assert analysis.latencies_ms == [350]
    assert analysis.interruptions_count == 0


def test_analysis_turn_without_words_or_typed_reply_starts_no_measurement() -> None:
    clock = StepClock()
    analysis = TurnAnalysis(clock)
    for event, at in [
        (engine.UserFinishedSpeaking(), 100.0),  # a cough: no InputText follows
        (engine.AudioChunk(b"\x00\x00", "A say."), 130.0),
        # generate_reply's typed text reaches the engine with no speech event at all
        (engine.AudioChunk(b"\x00\x00", "Reply."), 141.0),
    ]:
        clock.now = at
        analysis.observe(event)

    assert analysis.latencies_ms == []


def test_analysis_user_going_on_restarts_the_measurement() -> None:
    clock = StepClock()
    analysis = TurnAnalysis(clock)
    for event, at in [
        (engine.UserFinishedSpeaking(), 100.0),
        (engine.InputText("a table for", "en"), 100.2),
        (engine.UserStartedSpeaking(), 100.5),
        (engine.UserFinishedSpeaking(), 102.0),
        (engine.InputText("four people", "en"), 102.2),
        (engine.AudioChunk(b"\x00\x00", "Sure."), 102.4),
    ]:
        clock.now = at
        analysis.observe(event)

    assert analysis.latencies_ms == [400]


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
