"""How a conversation went, measured from its engine's events (API.md sections 5 and 18).

- `turns`: per reply to a spoken user turn, its stages (`records.TurnTiming`). The engine
  puts the instants on the reply's first audio chunk (`AudioChunk.turn`: the end of speech
  is when the last voiced audio arrived, engine/timing.py); the stages are counted when
  that chunk is sent (`replied`), so `total_ms` ends at the first audio sent. A cough that
  yields no words, a typed `generate_reply` or a `say` is no spoken turn and has none;
  speech that starts again before the reply makes the reply answer the later turn.
- `latencies_ms`: each turn's `total_ms`, in order.
- `played_ms` (calls): set when the carrier echoes the mark after the reply's first audio
  (`played`); null if it never does (the audio was cleared first).
- `interruptions_count`: replies the user spoke over (`InterruptedResponse`).

Each stage is observed once per reply in `/metrics` (`parley_turn_stage_seconds`).
"""

from __future__ import annotations

from dataclasses import replace

from parley import engine, metrics
from parley.clock import Clock
from parley.engine.timing import TurnMarks
from parley.records import Outcome, TurnTiming

MAX_LATENCIES = 1000
"""A conversation keeps at most this many figures (the first ones)."""


def stages(marks: TurnMarks, sent_at: float) -> TurnTiming:
    """A reply's stages in milliseconds, its first audio sent at `sent_at` (monotonic).

    Each instant is rounded once, to whole milliseconds after the end of speech, and each
    stage starts where the one before it ended at the earliest: a stage that overlapped the
    one before (the words known before the turn was judged over: the speculative decode)
    counts 0, never less, and the stages never add up to more than `total_ms`.
    """

    def at(instant: float) -> int:
        return round((instant - marks.speech_ended) * 1000)

    decided = max(at(marks.decided), 0)
    transcribed = max(at(marks.transcribed), decided)
    first_token = max(at(marks.first_token), transcribed)
    first_sentence = max(at(marks.first_sentence), first_token)
    sent = max(at(sent_at), first_sentence)
    return TurnTiming(
        endpointing_ms=decided,
        transcription_ms=transcribed - decided,
        model_first_token_ms=first_token - transcribed,
        speech_first_audio_ms=sent - first_sentence,
        total_ms=sent,
    )


def timings(turn: TurnTiming) -> dict[str, float]:
    """What the first `audio_chunk` carries (the SDK's `Dict[str, float]`): the stages known
    when it is sent (`played_ms` comes later)."""
    return {
        name: value
        for name, value in turn.to_json().items()
        if name != "item_id" and value is not None
    }


class TurnAnalysis:
    """Watches one conversation's engine events and keeps its figures."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.turns: list[TurnTiming] = []
        self._earlier: list[int] = []  # latencies stored before this session
        self.interruptions_count = 0
        self._awaiting_item = False  # the last turn's reply has not ended yet
        self._echo_of: float | None = None  # its end of speech, until its first audio plays
        self._resumed: tuple[TurnTiming, ...] = ()

    @property
    def latencies_ms(self) -> list[int]:
        """Each reply's `total_ms`, in order (with those stored before this session)."""
        return self._earlier + [turn.total_ms for turn in self.turns[len(self._resumed) :]]

    def resume(
        self, latencies_ms: tuple[int, ...], turns: tuple[TurnTiming, ...], interruptions: int
    ) -> None:
        """Go on from what a conversation measured before (a caller back from a transfer)."""
        self._earlier, self._resumed = list(latencies_ms), turns
        self.turns = list(turns)
        self.interruptions_count = interruptions

    def outcome(self) -> Outcome:
        """What to store when the conversation (or this stream of it) ends."""
        return Outcome(
            latencies_ms=tuple(self.latencies_ms),
            interruptions_count=self.interruptions_count,
            turns=tuple(self.turns),
        )

    def observe(self, event: engine.EngineEvent) -> None:
        """Take one event, in the order the engine emitted it."""
        if isinstance(event, engine.InterruptedResponse):
            self.interruptions_count += 1

    def replied(self, marks: TurnMarks) -> TurnTiming:
        """The first audio of a reply to a spoken turn is being sent now: count its stages."""
        turn = stages(marks, self._clock.monotonic())
        if len(self.latencies_ms) < MAX_LATENCIES:
            self.turns.append(turn)
            self._awaiting_item, self._echo_of = True, marks.speech_ended
        for name, value in timings(turn).items():
            metrics.observe_turn_stage(name.removesuffix("_ms"), value / 1000)
        metrics.observe_turn_latency(turn.total_ms / 1000)
        return turn

    def stored(self, item_id: str | None) -> None:
        """The reply last timed has ended: its assistant item is `item_id` (None: none was
        stored, as for a reply cut before a word was heard, or zero data retention)."""
        if self._awaiting_item:
            self._awaiting_item = False
            self.turns[-1] = replace(self.turns[-1], item_id=item_id)

    def played(self) -> None:
        """The carrier echoed the mark after the last timed reply's first audio (calls)."""
        if self._echo_of is None:
            return
        played_ms = max(0, round((self._clock.monotonic() - self._echo_of) * 1000))
        self._echo_of = None
        self.turns[-1] = replace(self.turns[-1], played_ms=played_ms)
        metrics.observe_turn_stage("played", played_ms / 1000)
