"""Turn-taking from speech probabilities, and the audio of the turn in progress.

TurnDetector reads one probability per VAD window and reports, in stream time:

- STARTED when speech has lasted `onset_ms` (dated at its first window): the user speaks,
  and an assistant response in progress is interrupted;
- PAUSED after `pause_ms` without speech: the turn may be over, so the listener can start
  recognising what it has; RESUMED if speech comes back before the end;
- CHECK (only with `checks_ms`, the semantic end of turn) after each of `checks_ms` without
  speech: from then on the listener heeds the end-of-turn model's answers that need no
  longer a silence (asked at PAUSED), and ends the turn early (`finish()`) on one;
- FINISHED after `end_silence_ms` without speech, or when the turn reaches `max_speech_ms`.
  A turn with less than `min_speech_ms` of speech in all (a cough, a click, a door) is
  FINISHED with `dropped=True`: it gets no transcript and no reply.

Speech is a window scoring at least `threshold`, or, inside a turn, at least
`release_threshold` (hysteresis). Everything is counted in windows, never wall time, so the
same audio always gives the same turns.
"""

from __future__ import annotations

import bisect
import enum
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from parley.engine.audio import Samples


@dataclass(frozen=True)
class VadParams:
    """Turn-taking settings; docs/engine.md explains the defaults."""

    threshold: float = 0.5
    release_threshold: float = 0.35
    onset_ms: int = 96
    pause_ms: int = 96
    end_silence_ms: int = 400
    min_speech_ms: int = 250
    max_speech_ms: int = 30_000
    pad_ms: int = 200
    gate_dbfs: float = -55.0

    def __post_init__(self) -> None:
        if not 0.0 < self.release_threshold <= self.threshold < 1.0:
            raise ValueError("need 0 < release_threshold <= threshold < 1")
        if not 0 < self.onset_ms <= self.min_speech_ms < self.max_speech_ms:
            raise ValueError("need 0 < onset_ms <= min_speech_ms < max_speech_ms")
        if not 0 < self.pause_ms <= self.end_silence_ms:
            raise ValueError("need 0 < pause_ms <= end_silence_ms")
        if self.pad_ms < 0:
            raise ValueError("pad_ms must not be negative")


class Transition(enum.Enum):
    STARTED = "started"
    PAUSED = "paused"
    CHECK = "check"
    RESUMED = "resumed"
    FINISHED = "finished"


@dataclass(frozen=True)
class VadEvent:
    """A transition; `time` is where speech began (STARTED) or last was (the others);
    `silence_seconds`, for CHECK, how long the silence has lasted."""

    kind: Transition
    time: float
    speech_seconds: float = 0.0
    dropped: bool = False
    silence_seconds: float = 0.0


class TurnDetector:
    """Turns from per-window speech probabilities (see the module doc)."""

    def __init__(
        self, window_seconds: float, params: VadParams, *, checks_ms: Sequence[int] = ()
    ) -> None:
        self.params = params
        self._window = window_seconds

        def windows(ms: int) -> int:  # at least `ms`, in whole windows
            return max(1, math.ceil(ms / 1000 / window_seconds - 1e-9))

        self._onset = windows(params.onset_ms)
        self._pause = windows(params.pause_ms)
        self._end = windows(params.end_silence_ms)
        self._min_speech = windows(params.min_speech_ms)
        self._max = windows(params.max_speech_ms)
        self._checks = frozenset(windows(ms) for ms in checks_ms)
        if any(not self._pause < check < self._end for check in self._checks):
            raise ValueError("need pause_ms < checks_ms < end_silence_ms (in windows)")
        self._index = 0  # windows seen
        self._run = 0  # consecutive speech windows (idle) or silent windows (in a turn)
        self._in_turn = False
        self._paused = False
        self._start = 0  # first speech window of the turn
        self._last_speech = 0  # last speech window of the turn
        self._speech = 0  # speech windows in the turn

    @property
    def in_turn(self) -> bool:
        """True between STARTED and FINISHED."""
        return self._in_turn

    @property
    def paused(self) -> bool:
        """True in a turn after PAUSED and before RESUMED or FINISHED."""
        return self._paused

    def process(self, probabilities: list[float]) -> list[VadEvent]:
        """Take the next windows' probabilities; return the transitions they complete."""
        events: list[VadEvent] = []
        for probability in probabilities:
            event = self._step(probability)
            if event is not None:
                events.append(event)
        return events

    def finish(self) -> VadEvent | None:
        """End the turn now (mute, close); return its FINISHED, or None outside a turn."""
        if not self._in_turn:
            return None
        self._in_turn = self._paused = False
        self._run = 0
        speech = self._speech * self._window
        return VadEvent(
            Transition.FINISHED,
            (self._last_speech + 1) * self._window,
            speech,
            dropped=self._speech < self._min_speech,
        )

    def _step(self, probability: float) -> VadEvent | None:
        index = self._index
        self._index += 1
        p = self.params
        if not self._in_turn:
            self._run = self._run + 1 if probability >= p.threshold else 0
            if self._run < self._onset:
                return None
            self._in_turn, self._paused = True, False
            self._start = index - self._run + 1
            self._last_speech = index
            self._speech = self._run
            self._run = 0
            return VadEvent(Transition.STARTED, self._start * self._window)
        if probability >= p.release_threshold:
            self._last_speech = index
            self._speech += 1
            self._run = 0
            if self._paused:
                self._paused = False
                return VadEvent(Transition.RESUMED, index * self._window)
        else:
            self._run += 1
        if self._run >= self._end or index - self._start + 1 >= self._max:
            return self.finish()
        if self._run == self._pause and not self._paused:
            self._paused = True
            return VadEvent(Transition.PAUSED, (self._last_speech + 1) * self._window)
        if self._run in self._checks:
            return VadEvent(
                Transition.CHECK,
                (self._last_speech + 1) * self._window,
                self._speech * self._window,
                silence_seconds=self._run * self._window,
            )
        return None


class TurnAudio:
    """The recent audio of one stream at the recognizer's rate, cut into turns.

    Outside a turn it keeps `keep_s` seconds (the onset and the padding before speech); in a
    turn, everything from `pad` before its start, at most `max_speech_ms` plus padding.
    """

    def __init__(self, sample_rate: int, *, keep_s: float, pad_s: float) -> None:
        self.rate = sample_rate
        self._keep = round(keep_s * sample_rate)
        self._pad = round(pad_s * sample_rate)
        self._chunks: deque[tuple[int, Samples]] = deque()  # (first sample index, samples)
        self._received = 0
        self._start: int | None = None

    @property
    def seconds(self) -> float:
        """Stream time of the audio received so far."""
        return self._received / self.rate

    @property
    def turn_seconds(self) -> float:
        """Duration of the turn's audio so far (0 outside a turn)."""
        return 0.0 if self._start is None else (self._received - self._start) / self.rate

    def append(self, samples: Samples) -> None:
        """Add the next samples of the stream."""
        if samples.size:
            self._chunks.append((self._received, samples))
            self._received += samples.size
        if self._start is None:
            self._drop_before(self._received - self._keep)

    def start_turn(self, time: float) -> None:
        """Keep everything from `pad` before `time` until end_turn."""
        self._start = max(round(time * self.rate) - self._pad, 0)

    def end_turn(self) -> None:
        """Go back to keeping only the recent audio."""
        self._start = None
        self._drop_before(self._received - self._keep)

    def turn(
        self,
        until: float | None = None,
        *,
        padded: bool = True,
        gaps: Sequence[tuple[float, float]] = (),
        keep_gap_s: float = 0.3,
    ) -> Samples:
        """Return the turn's audio, up to `until` plus padding (None: all received so far).

        Each of `gaps` (silences inside the turn, (start, end) in stream time) longer than
        `keep_gap_s` is cut to that length, its two ends kept: Whisper tends to stop
        transcribing after a long pause inside its input.
        """
        return self.placed_turn(until, padded=padded, gaps=gaps, keep_gap_s=keep_gap_s)[0]

    def placed_turn(
        self,
        until: float | None = None,
        *,
        padded: bool = True,
        gaps: Sequence[tuple[float, float]] = (),
        keep_gap_s: float = 0.3,
    ) -> tuple[Samples, tuple[tuple[float, float], ...]]:
        """`turn`, and where its audio lies in the stream: for each part that follows
        another without a cut, (where it starts in the turn's audio, where in stream time),
        in seconds, in order (`stream_time` reads them)."""
        first = self._start if self._start is not None else 0
        pad = self._pad if padded else 0
        last = self._received if until is None else round(until * self.rate) + pad
        last = min(last, self._received)
        parts = [chunk for _, chunk in self._chunks]
        if not parts or last <= first:
            return np.zeros(0, dtype=np.float32), ()
        origin = self._chunks[0][0]
        audio = np.concatenate(parts)
        begin = max(first - origin, 0)
        audio = audio[begin : last - origin]
        places = [(0, origin + begin)]
        if gaps:
            audio, places = self._shortened(audio, origin + begin, gaps, keep_gap_s)
        return np.array(audio, dtype=np.float32), tuple(
            (at / self.rate, stream / self.rate) for at, stream in places
        )

    def _shortened(
        self, audio: Samples, first: int, gaps: Sequence[tuple[float, float]], keep_s: float
    ) -> tuple[Samples, list[tuple[int, int]]]:
        keep = round(keep_s * self.rate)
        kept: list[Samples] = []
        places = [(0, first)]  # (sample of the shortened audio, sample of the stream)
        length = 0
        at = 0
        for start, end in gaps:
            cut_from = round(start * self.rate) - first + keep // 2
            cut_to = min(round(end * self.rate) - first - (keep - keep // 2), audio.size)
            if cut_from < at or cut_to <= cut_from:
                continue  # shorter than keep_s, or overlapping the one before
            kept.append(audio[at:cut_from])
            length += cut_from - at
            places.append((length, first + cut_to))
            at = cut_to
        kept.append(audio[at:])
        return np.concatenate(kept), places

    def _drop_before(self, sample: int) -> None:
        while self._chunks and self._chunks[0][0] + self._chunks[0][1].size <= sample:
            self._chunks.popleft()


def stream_time(places: Sequence[tuple[float, float]], seconds: float) -> float:
    """Where `seconds` into a turn's audio lies in stream time, by `placed_turn`'s places
    (none: the same)."""
    index = bisect.bisect_right([at for at, _ in places], seconds) - 1
    if index < 0:
        return seconds if not places else places[0][1] + seconds - places[0][0]
    at, stream = places[index]
    return stream + seconds - at
