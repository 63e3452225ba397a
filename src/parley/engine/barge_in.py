"""Speech over the agent, judged: an interruption that is meant, or not (API.md section 18).

At the onset of the user's speech while the agent speaks, the engine pauses the agent's
audio and opens a `BargeIn`; decodes of the user's speech so far (`Listener.probe`) then
decide, as each comes back (`BargeIn.judge`). While the user still speaks, a word counts
once two decodes in a row agree on it (a decode of a word half said is often another word:
"uh-hu…" came out as "It's all."), and the last decode is not a backchannel as a whole (the
"I" both decodes agree on is "I see" in the second); once the speech pauses, the last
decode counts whole.

- INTERRUPT once the words heard number at least `min_words_to_interrupt` and are not all
  backchannels (backchannels.py): the reply is interrupted as before, and the speech is a
  user turn;
- RESUME when the speech has stopped (`STOPPED_S` of silence) with fewer words, or only a
  backchannel, or after less speech than a turn needs (`VadParams.min_speech_ms`: a
  click); or when a decode of at least `NO_WORDS_S` of it found nothing at all (a cough, a
  door, background noise); or after `MAX_HOLD_S` undecided: the agent goes on where it
  paused, and the speech is no turn (no item, no reply);
- else WAIT: more speech is coming.

After a RESUME the engine keeps judging the same speech: should the words reach the
minimum after all, the reply is interrupted then. The turn's final words decide what is left
(`final_verdict`): a turn that began over the agent is a user turn only if it would
interrupt it.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

import anyio

from parley.clock import Clock
from parley.engine.backchannels import is_backchannel, words
from parley.engine.base import Transcript
from parley.engine.listening import Listener
from parley.engine.speaker import Response

logger = logging.getLogger(__name__)

MIN_WORDS_RANGE: Final = (1, 10)
"""`min_words_to_interrupt`'s bounds (API.md section 18)."""
NO_WORDS_S: Final = 0.6
"""Speech in which a decode finds no word by this long after its onset is not words."""
MAX_HOLD_S: Final = 3.0
"""The longest the agent stays paused for speech that neither interrupts nor stops."""
FIRST_PROBE_S: Final = 0.4
"""The first decode covers this much speech after the onset: a shorter one rarely holds a
whole word (Whisper wrote nothing, or a fragment, for 0.35 s of a word)."""
PROBE_STEP_S: Final = 0.2
"""Each later decode covers at least this much more speech."""
STOPPED_S: Final = 0.3
"""Silence after speech over the agent that counts as its end (a comma's pause is shorter:
"Hold on, I have a question" must not resume the agent after "Hold on")."""
POLL_S: Final = 0.02
"""How often the judge looks at the listener between decodes (one input frame)."""


class Verdict(enum.Enum):
    INTERRUPT = "interrupt"
    RESUME = "resume"
    WAIT = "wait"


def meant(text: str, min_words: int) -> bool:
    """Tell whether heard words interrupt: at least `min_words`, not all backchannels."""
    return len(words(text)) >= min_words and not is_backchannel(text)


@dataclass
class BargeIn:
    """One stretch of the user's speech that began while the agent spoke."""

    response: Response
    """The response paused for it."""
    min_words: int
    onset: float
    """Where the speech began, in the listener's stream time."""
    started_at: float
    """When the agent was paused (monotonic)."""
    interrupted: bool = False
    resumed: bool = False
    turn_over: bool = False
    """The turn ended: its final words decide (`final_verdict`)."""
    started_told: bool = False
    """UserStartedSpeaking was emitted for it (only once it interrupts)."""
    last_words: list[str] = field(default_factory=list)
    """The words of the last decode while the user spoke."""

    @property
    def pending(self) -> bool:
        """Still paused and undecided."""
        return not (self.interrupted or self.resumed)

    def judge(
        self, text: str, *, covered: float, stopped: bool, now: float, too_short: bool = False
    ) -> Verdict:
        """The verdict on a decode of the speech up to stream time `covered`; `stopped`:
        the speech had paused by then, `too_short` with too little speech for a turn;
        `now`: the monotonic time."""
        if stopped and too_short:
            return Verdict.RESUME if not self.resumed else Verdict.WAIT
        heard = words(text)
        agreed = heard if stopped else _common_prefix(self.last_words, heard)
        self.last_words = [] if stopped else heard
        if meant(" ".join(agreed), self.min_words) and not is_backchannel(text):
            return Verdict.INTERRUPT  # (the agreed "I" of a decode that now says "I see": no)
        if self.resumed:
            return Verdict.WAIT  # already going on: only enough words change it now
        if stopped or now - self.started_at >= MAX_HOLD_S:
            return Verdict.RESUME
        if not text.strip() and covered - self.onset >= NO_WORDS_S - 1e-9:
            return Verdict.RESUME
        return Verdict.WAIT

    def final_verdict(self, text: str, *, placeholder: bool) -> Verdict:
        """The turn's final words: INTERRUPT makes it a user turn, RESUME drops it. A
        recognizer without words (placeholder) cannot tell: its speech interrupts."""
        if placeholder or meant(text, self.min_words):
            return Verdict.INTERRUPT
        return Verdict.RESUME


async def judge_speech(
    barge: BargeIn,
    listener: Listener,
    clock: Clock,
    *,
    current: Callable[[], Response | None],
    interrupt: Callable[[BargeIn], Awaitable[None]],
    resume: Callable[[BargeIn], Awaitable[None]],
) -> None:
    """Decode the speech over the agent as it grows and act on each verdict, until it is
    decided, its turn ends, or the paused response is no longer `current()`."""
    next_at = barge.onset + FIRST_PROBE_S
    probed_stopped = False
    while not (barge.turn_over or barge.interrupted) and current() is barge.response:
        detector = listener.detector
        stopped = not detector.in_turn or (
            detector.paused and detector.silence_seconds >= STOPPED_S - 1e-9
        )
        too_short = detector.speech_seconds < detector.params.min_speech_ms / 1000
        probed_stopped = probed_stopped and stopped
        covered = listener.heard_until
        held_long = barge.pending and clock.monotonic() - barge.started_at >= MAX_HOLD_S
        if covered < next_at and not (stopped and not probed_stopped) and not held_long:
            await anyio.sleep(POLL_S)
            continue
        task = listener.probe()
        if task is None:
            return  # the turn ended: its final words decide
        probed_stopped = stopped
        next_at = covered + PROBE_STEP_S
        text = await _text_of(task, barge, clock, resume)
        if barge.turn_over or barge.interrupted:
            return
        verdict = barge.judge(
            text, covered=covered, stopped=stopped, now=clock.monotonic(), too_short=too_short
        )
        if verdict is Verdict.INTERRUPT:
            await interrupt(barge)
        elif verdict is Verdict.RESUME:
            await resume(barge)


async def _text_of(
    task: asyncio.Task[Transcript | None],
    barge: BargeIn,
    clock: Clock,
    resume: Callable[[BargeIn], Awaitable[None]],
) -> str:
    """A decode's words; none when it failed or was dropped (logged). A decode slower than
    the hold left (a busy recognizer) does not keep the agent paused: it resumes at
    MAX_HOLD_S, and the words, when they come, may still interrupt it."""
    if barge.pending:
        left = barge.started_at + MAX_HOLD_S - clock.monotonic()
        with anyio.move_on_after(max(left, 0.0)):
            await asyncio.wait({task})
        if not task.done():
            await resume(barge)
    try:
        result = await task
    except asyncio.CancelledError:
        if task.cancelled():
            return ""
        raise
    except Exception:
        logger.exception("a decode of speech over the agent failed")
        return ""
    return "" if result is None else result.text


def _common_prefix(first: list[str], second: list[str]) -> list[str]:
    """The words that start both lists."""
    agreed: list[str] = []
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        agreed.append(b)
    return agreed
