"""Speech over the agent, judged: an interruption that is meant, or not (API.md section 18).

At the onset of the user's speech while the agent speaks, the engine pauses the agent's
audio and opens a `BargeIn`; decodes of the user's speech so far (`Listener.probe`, the
recognizer's probe rank: after every final, so a turn's own words never wait behind them)
then decide, as each comes back (`BargeIn.judge`). While the user still speaks, a word
counts once two decodes in a row agree on it (a decode of a word half said is often another
word: "uh-hu…" came out as "It's all."), and the last decode is not a backchannel as a whole
(the "I" both decodes agree on is "I see" in the second); once the speech pauses
(`STOPPED_S`), the last decode counts whole.

- INTERRUPT once the words heard number at least `min_words_to_interrupt` and are not all
  backchannels (backchannels.py): the reply is interrupted as before, and the speech is a
  user turn;
- RESUME when a decode of at least `NO_WORDS_S` of it found nothing at all (a cough, a
  door, background noise); when the speech has paused (`STOPPED_S`) on a backchannel (a
  clause of its own) or after less speech than a turn needs (`VadParams.min_speech_ms`: a
  click); or when `MAX_HOLD_S` of it is decoded and still undecided: the agent goes on
  where it paused, and the speech is no turn (no item, no reply);
- else WAIT: more speech is coming. A pause inside a clause is no end: fewer words than the
  minimum that are not a backchannel ("Hold on," of "Hold on, I have a question", which a
  decode of it at the pause writes "Hold on.") keep the agent paused until the turn ends,
  when the turn detector judges the clause over (the silence that ends a turn, or the
  end-of-turn model).

Every rule reads the speech's own time (the stream time a decode covers), never how long a
decode took: on a busy machine the agent stays paused longer, and what the user said, not
the machine's speed, decides. The turn's end bounds the pause (its final words decide).

After a RESUME the engine keeps judging the same speech: should the words reach the
minimum after all, the reply is interrupted then. The turn's final words decide what is left
(`final_verdict`): a turn that began over the agent is a user turn only if it would
interrupt it; else the agent goes on (fewer words: RESUME at the turn's end).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

import anyio

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
"""Speech over the agent this long (from its onset, as decoded) that has neither
interrupted nor stopped resumes it (a long mumble, words the recognizer keeps changing)."""
FIRST_PROBE_S: Final = 0.4
"""The first decode covers this much speech after the onset: a shorter one rarely holds a
whole word (Whisper wrote nothing, or a fragment, for 0.35 s of a word)."""
PROBE_STEP_S: Final = 0.2
"""Each later decode covers at least this much more speech."""
STOPPED_S: Final = 0.3
"""Silence after speech over the agent after which its last decode counts whole, and a
backchannel or a click has ended. Not the end of a clause: "Hold on," of "Hold on, I have
a question" pauses this long (the turn's end decides about fewer words)."""
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
        self, text: str, *, covered: float, stopped: bool, too_short: bool = False
    ) -> Verdict:
        """The verdict on a decode of the speech up to stream time `covered`; `stopped`:
        the speech had paused by then, `too_short` with too little speech for a turn."""
        if stopped and too_short:
            return Verdict.RESUME if not self.resumed else Verdict.WAIT
        heard = words(text)
        agreed = heard if stopped else _common_prefix(self.last_words, heard)
        self.last_words = [] if stopped else heard
        if meant(" ".join(agreed), self.min_words) and not is_backchannel(text):
            return Verdict.INTERRUPT  # (the agreed "I" of a decode that now says "I see": no)
        if self.resumed:
            return Verdict.WAIT  # already going on: only enough words change it now
        if stopped and is_backchannel(text):
            return Verdict.RESUME  # a backchannel is a clause of its own
        if not text.strip() and covered - self.onset >= NO_WORDS_S - 1e-9:
            return Verdict.RESUME  # no words: noise
        if covered - self.onset >= MAX_HOLD_S - 1e-9:
            return Verdict.RESUME  # undecided for too long a speech
        return Verdict.WAIT  # more words may come, even after a pause (a comma's)

    def final_verdict(self, text: str, *, placeholder: bool) -> Verdict:
        """The turn's final words: INTERRUPT makes it a user turn, RESUME drops it. A
        recognizer without words (placeholder) cannot tell: its speech interrupts."""
        if placeholder or meant(text, self.min_words):
            return Verdict.INTERRUPT
        return Verdict.RESUME


async def judge_speech(
    barge: BargeIn,
    listener: Listener,
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
        if covered < next_at and not (stopped and not probed_stopped):
            await anyio.sleep(POLL_S)
            continue
        task = listener.probe()
        if task is None:
            return  # the turn ended: its final words decide
        probed_stopped = stopped
        next_at = covered + PROBE_STEP_S
        text = await _text_of(task)
        if barge.turn_over or barge.interrupted:
            return
        if text is None:  # dropped (the speech went on, or the turn ended) or failed
            continue  # the next probe when more speech is in, or the pause's final
        verdict = barge.judge(text, covered=covered, stopped=stopped, too_short=too_short)
        logger.debug(  # not the words themselves: a log is no place for what the user said
            "speech over the agent, %.2f s of it%s: %d words, %s",
            covered - barge.onset,
            " (paused)" if stopped else "",
            len(words(text)),
            verdict.value,
        )
        if verdict is Verdict.INTERRUPT:
            await interrupt(barge)
        elif verdict is Verdict.RESUME:
            await resume(barge)


async def _text_of(task: asyncio.Task[Transcript | None]) -> str | None:
    """A decode's words; None when it failed (logged) or was dropped: no verdict then (it
    did not find that there are no words). However long it takes (a busy recognizer), the
    agent stays paused meanwhile: the verdict comes from the words. Waited for, never
    awaited: it may be the turn's own final decode, which the judge's end must not cancel."""
    await asyncio.wait({task})
    if task.cancelled():
        return None
    if (error := task.exception()) is not None:
        logger.error("a decode of speech over the agent failed", exc_info=error)
        return None
    result = task.result()
    return None if result is None else result.text


def _common_prefix(first: list[str], second: list[str]) -> list[str]:
    """The words that start both lists."""
    agreed: list[str] = []
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        agreed.append(b)
    return agreed
