"""When the user's audio arrived, and when each stage of a reply happened (API.md 18).

- `Arrivals` maps the listener's stream time to the monotonic instant that audio arrived,
  so the end of speech is the moment the last voiced audio came in, not the moment the turn
  was judged over. It also says how much silence the stream owes when the client stops
  sending in a turn (push-to-talk, discontinuous transmission): after speech, silence is
  time, whether or not frames keep coming. Once no audio has come for `IDLE_GRACE_S`, the
  whole wall time since the last audio is owed (so a turn whose wait is already over ends
  at once, at most the grace less that wait later than with frames), and from then on the
  time as it passes.
  A piece this process read late (its event loop stalled, and a burst of pieces was read
  at once) arrived when the client's pace says: the first piece after it read on time
  shows when it came (`READ_LATE_S`).
- `TurnClock` collects one reply's instants as the engine reaches them; `TurnMarks` is
  what the first audio chunk of the reply carries (engine.AudioChunk.turn).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

IDLE_GRACE_S = 0.5
"""No audio for this long in a turn: the client stopped sending, the silence is owed.
Far longer than a client's usual jitter (frames come every 20-40 ms): a network or a
loaded client that holds frames back for a few hundred ms mid-sentence must not have that
stall heard as a pause, and with 150 ms it was (a sentence split into two turns under a
loaded suite). The cost: a client that stops sending ends its turn up to 200 ms later than
the shortest end-of-turn wait (`SemanticParams.check_ms`, 300 ms) would with frames. The
recorder places a gap in the user's channel from the same half second on
(services/live/recorder.py: USER_GAP_SECONDS)."""
STALL_S = 0.1
"""A timer tick this much later than asked: this process did not run meanwhile (see
`Arrivals.excuse`). Ten times a healthy loop's lateness, a fraction of `IDLE_GRACE_S`."""
READ_LATE_S = 0.25
"""At most this much is taken off a piece's arrival when the pieces of the next `PACE_S`
show it was read late. Audio comes at the pace it is spoken, so a piece read on time
after a stall dates the ones before it; a client that sends faster than real time looks
the same, so the correction is capped (its turns' figures then read up to this much long)."""
PACE_S = 0.5
"""The stream time after a piece whose arrivals may date it."""
KEEP_S = 120.0
"""Stream time whose arrivals are kept: a turn's end of speech is never older."""


class Arrivals:
    """Stream time -> arrival instants for one listener (see the module doc)."""

    def __init__(self) -> None:
        self._ends: list[float] = []  # stream time at the end of each piece, increasing
        self._at: list[float] = []  # the monotonic instant the piece's end stands for
        self._invented: list[bool] = []  # silence fed for the time no audio came
        self._stream = 0.0
        self._last_audio: float | None = None  # when the client's audio last came
        self._covered: float | None = None  # the wall instant the stream reaches

    def heard(self, seconds: float, at: float) -> None:
        """The client's audio: `seconds` more of the stream arrived at `at`."""
        self._add(seconds, at, invented=False)
        self._last_audio = at

    def invented(self, seconds: float, until: float) -> None:
        """Silence owed (`owed`) was fed: the stream now reaches wall instant `until`."""
        self._add(seconds, until, invented=True)

    def excuse(self, seconds: float) -> None:
        """This process did not run for `seconds` (a stalled event loop, a starved process):
        the client's audio of that time may be waiting unread, so that time is no silence of
        the client's. The grace starts again, and the stall is never owed."""
        if self._last_audio is not None:
            self._last_audio += seconds
        if self._covered is not None:
            self._covered += seconds

    def owed(self, now: float) -> float:
        """Seconds of silence the stream owes at `now` (0 while the client sends)."""
        if self._last_audio is None or self._covered is None:
            return 0.0
        if now - self._last_audio < IDLE_GRACE_S:
            return 0.0
        return max(now - self._covered, 0.0)

    def arrival(self, stream_time: float) -> float | None:
        """When the audio at `stream_time` arrived: with the piece of the client's audio
        that holds it, or, within invented silence, the instant that place stands for
        (None: nothing heard yet)."""
        if not self._ends:
            return None
        index = bisect.bisect_left(self._ends, stream_time - 1e-9)
        if index >= len(self._ends):
            return self._at[-1]
        if self._invented[index]:
            return self._at[index] - (self._ends[index] - stream_time)
        return self._at[index] - self._read_late(index)

    def _read_late(self, index: int) -> float:
        """How late this process read the client's piece at `index` (see `READ_LATE_S`): a
        later piece read on time would have brought it at its own arrival less the stream
        time between their ends."""
        end, at = self._ends[index], self._at[index]
        late = 0.0
        for later in range(index + 1, len(self._ends)):
            ahead = self._ends[later] - end
            if ahead > PACE_S:
                break
            if not self._invented[later]:
                late = max(late, at - (self._at[later] - ahead))
        return min(late, READ_LATE_S)

    def _add(self, seconds: float, at: float, *, invented: bool) -> None:
        self._stream += seconds
        self._ends.append(self._stream)
        self._at.append(at)
        self._invented.append(invented)
        self._covered = at
        if self._ends[0] < self._stream - 2 * KEEP_S:
            cut = bisect.bisect_left(self._ends, self._stream - KEEP_S)
            del self._ends[:cut], self._at[:cut], self._invented[:cut]


@dataclass(frozen=True)
class TurnMarks:
    """Monotonic instants of one reply to a spoken user turn, up to its first audio."""

    speech_ended: float
    """The last voiced audio (as the VAD saw it) arrived."""
    decided: float
    """The turn was judged over."""
    transcribed: float
    """Its final words were known."""
    first_token: float
    """The reply generator gave its first piece."""
    first_sentence: float
    """The reply's first sentence was complete (sent to the synthesizer)."""
    first_audio: float
    """The engine emitted the reply's first audio."""


@dataclass
class TurnClock:
    """One reply's instants, noted as the engine reaches them (the first of each counts)."""

    speech_ended: float
    decided: float
    transcribed: float
    first_token: float | None = None
    first_sentence: float | None = None

    def token(self, at: float) -> None:
        if self.first_token is None:
            self.first_token = at

    def sentence(self, at: float) -> None:
        if self.first_sentence is None:
            self.first_sentence = at

    def marks(self, first_audio: float) -> TurnMarks:
        """The instants, the first audio emitted at `first_audio` (a stage not reached, as
        keys pressed with no words, counts as reached then)."""
        token = self.first_token if self.first_token is not None else first_audio
        sentence = self.first_sentence if self.first_sentence is not None else first_audio
        return TurnMarks(
            self.speech_ended, self.decided, self.transcribed, token, sentence, first_audio
        )
