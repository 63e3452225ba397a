"""How a conversation went, measured from its engine's events (API.md section 5's `analysis`).

- `latencies_ms`: per assistant reply to a user turn, the time from the end of the user's
  speech (`UserFinishedSpeaking`, the moment the turn ended) to the reply's first audio. A
  turn counts once its words are known (`InputText`): a cough that yields no words, or a
  typed `generate_reply`, starts no measurement; speech that starts again before the reply
  (the user goes on) restarts it.
- `interruptions_count`: replies the user spoke over (`InterruptedResponse`).
"""

from __future__ import annotations

from parley import engine
from parley.clock import Clock

MAX_LATENCIES = 1000
"""A conversation keeps at most this many figures (the first ones)."""


class TurnAnalysis:
    """Watches one conversation's engine events and keeps its figures."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._turn_ended_at: float | None = None
        self._awaiting_reply = False
        self.latencies_ms: list[int] = []
        self.interruptions_count = 0

    def observe(self, event: engine.EngineEvent) -> None:
        """Take one event, in the order the engine emitted it."""
        match event:
            case engine.UserStartedSpeaking():
                self._turn_ended_at, self._awaiting_reply = None, False
            case engine.UserFinishedSpeaking():
                self._turn_ended_at, self._awaiting_reply = self._clock.monotonic(), False
            case engine.InputText() if self._turn_ended_at is not None:
                self._awaiting_reply = True
            case engine.AudioChunk() if self._awaiting_reply and self._turn_ended_at is not None:
                if len(self.latencies_ms) < MAX_LATENCIES:
                    elapsed = self._clock.monotonic() - self._turn_ended_at
                    self.latencies_ms.append(max(0, round(elapsed * 1000)))
                self._turn_ended_at, self._awaiting_reply = None, False
            case engine.InterruptedResponse():
                self.interruptions_count += 1
