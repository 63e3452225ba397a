"""Silence on phone calls (API.md section 15), end to end: the simulated carrier plays the
agent's audio in real time and echoes its marks, so the count starts when the caller has
heard the agent's last word. A poke once after `no_input_poke_sec`, then the call ends after
`no_input_end_conversation_sec` (`ended_by` `assistant_silence_limit_reached`); off by
default."""

from __future__ import annotations

import itertools
import time

import pytest

from tests.carrier import MediaStream
from tests.e2e.conftest import Customer, Server
from tests.e2e.test_phone_calls import WELCOME, Line, call, line, make_line

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

__all__ = ["call", "line"]  # the fixtures of a default call (test_phone_calls.py)

POKE = "Are you still there?"
SLACK = 0.15


def gaps(stream: MediaStream, longer_than: float) -> list[tuple[float, float]]:
    """(end of one answer's audio, start of the next) for each pause in playback."""
    played = [at for at, _ in stream.heard.played]
    return [(a + 0.02, b) for a, b in itertools.pairwise(played) if b - a > longer_than]


async def test_call_poke_after_welcome_heard_then_silence_limit_ends_call(
    customer: Customer, server: Server
) -> None:
    line = await make_line(customer, server, no_input_poke_sec=1, no_input_end_conversation_sec=2)
    twiml = await line.call()
    conversation_id = twiml.parameters["conversation_id"]
    stream = await line.stream(twiml)
    try:
        code, _ = await stream.wait_closed(within=40)
        closed_at = time.monotonic()
    finally:
        await stream.close()
    assert code == 1000
    (welcome_end, poke_start), *more = gaps(stream, 0.5)
    assert more == []  # one pause: the poke is spoken once
    welcome_heard = min(at for at, _ in stream.heard.marks_echoed if at >= welcome_end - 0.02)
    assert poke_start - welcome_heard >= 1.0 - SLACK  # counted from the played mark
    poke_heard = max(at for at, _ in stream.heard.marks_echoed)
    assert closed_at - poke_heard >= 2.0 - SLACK  # the end counted from the poke's end
    assert await line.items(conversation_id) == [("assistant", WELCOME), ("assistant", POKE)]
    found = await line.conversation(conversation_id)
    assert (found["status"], found["ended_by"]) == ("ended", "assistant_silence_limit_reached")


async def test_call_silence_off_by_default_nothing_happens(
    line: Line, call: tuple[MediaStream, str]
) -> None:
    stream, conversation_id = call
    played = len(stream.heard.played)
    with pytest.raises(TimeoutError):  # three seconds of silence: no end
        await stream.wait_closed(within=3.0)
    assert len(stream.heard.played) == played  # and no poke
    assert (await line.conversation(conversation_id))["status"] == "live"
