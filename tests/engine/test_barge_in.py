"""The verdicts on speech over the agent (engine/barge_in.py, API.md section 18)."""

from __future__ import annotations

import anyio
import pytest

from parley.engine.barge_in import MAX_HOLD_S, NO_WORDS_S, BargeIn, Verdict, meant
from parley.engine.speaker import Response

pytestmark = pytest.mark.anyio


def barge(min_words: int = 1) -> BargeIn:
    return BargeIn(Response(), min_words, onset=10.0)


async def test_min_words_to_interrupt_fewer_words_never_interrupt() -> None:
    assert meant("Wait, stop there.", 3)
    assert not meant("Wait, stop.", 3)
    assert meant("Wait.", 1)


async def test_backchannel_never_interrupts_whatever_the_minimum() -> None:
    assert not meant("Yeah, yeah, right.", 1)
    assert not meant("Uh-huh.", 1)


async def test_barge_in_words_count_once_two_decodes_agree() -> None:
    judged = barge()
    assert judged.judge("It's all", covered=10.4, stopped=False) is Verdict.WAIT
    assert judged.judge("Wait a", covered=10.6, stopped=False) is Verdict.WAIT
    assert judged.judge("Wait a moment", covered=10.8, stopped=False) is (Verdict.INTERRUPT)


async def test_barge_in_agreed_start_of_a_backchannel_does_not_interrupt() -> None:
    judged = barge()
    assert judged.judge("I", covered=10.4, stopped=False) is Verdict.WAIT
    assert judged.judge("I see.", covered=10.6, stopped=False) is Verdict.WAIT


async def test_barge_in_speech_stopped_last_decode_counts_whole() -> None:
    assert barge().judge("Wait.", covered=10.9, stopped=True) is Verdict.INTERRUPT
    assert barge().judge("Uh-huh.", covered=10.9, stopped=True) is Verdict.RESUME


async def test_barge_in_pause_inside_a_clause_does_not_resume() -> None:
    # "Hold on, I have a question": a decode at the comma's pause writes "Hold on." The
    # pause is no end of the clause: the turn's end decides about fewer words.
    judged = barge(3)
    assert judged.judge("Hold on.", covered=11.0, stopped=True) is Verdict.WAIT
    assert judged.judge("Hold on, I have", covered=11.6, stopped=False) is (Verdict.WAIT)
    assert judged.judge("Hold on, I have a", covered=11.8, stopped=False) is (Verdict.INTERRUPT)
    assert barge(3).judge("Wait.", covered=10.9, stopped=True) is Verdict.WAIT
    assert barge(3).final_verdict("Wait.", placeholder=False) is Verdict.RESUME


async def test_barge_in_no_words_within_600ms_resumes() -> None:
    early = barge().judge("", covered=10.0 + NO_WORDS_S - 0.1, stopped=False)
    late = barge().judge("", covered=10.0 + NO_WORDS_S, stopped=False)
    fragment = barge().judge("Hold-", covered=10.0 + NO_WORDS_S, stopped=False)
    assert (early, late, fragment) == (Verdict.WAIT, Verdict.RESUME, Verdict.WAIT)


async def test_barge_in_too_short_for_a_turn_resumes() -> None:
    verdict = barge().judge("The.", covered=10.3, stopped=True, too_short=True)
    assert verdict is Verdict.RESUME


async def test_barge_in_held_too_long_resumes() -> None:
    judged = barge(5)
    assert judged.judge("Well I", covered=10.0 + MAX_HOLD_S - 0.2, stopped=False) is (Verdict.WAIT)
    # the speech's own time, not how long its decodes took, makes the hold too long
    assert judged.judge("Well I", covered=10.0 + MAX_HOLD_S, stopped=False) is Verdict.RESUME


async def test_barge_in_after_resume_enough_words_still_interrupt() -> None:
    judged = barge(2)
    judged.resumed = True
    assert judged.judge("Uh-huh.", covered=10.9, stopped=True) is Verdict.WAIT
    assert judged.judge("Hang on", covered=11.5, stopped=True) is Verdict.INTERRUPT


async def test_barge_in_final_words_decide_the_turn() -> None:
    assert barge().final_verdict("Sure.", placeholder=False) is Verdict.RESUME
    assert barge().final_verdict("Please stop.", placeholder=False) is Verdict.INTERRUPT
    assert barge(3).final_verdict("[speech 0.4 s]", placeholder=True) is Verdict.INTERRUPT


async def test_response_paused_holds_until_resumed() -> None:
    response = Response()
    response.pause()
    assert response.paused
    with anyio.move_on_after(0.05) as waited:
        await response.unpaused.wait()
    assert waited.cancelled_caught
    response.resume()
    assert not response.paused
