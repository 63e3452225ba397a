"""Energy-based voice activity detection with hysteresis, and utterance capture.

The detector cuts the stream into 10 ms frames and measures each frame's RMS level in dBFS.
The noise floor is the quietest frame of the last `floor_window_ms` (minimum statistics), so it
follows the room up and down, during speech too; until the stream has filled one window, the
floor is at most `initial_floor_dbfs` (None: learn it from the first frames only, which makes
speech that opens the stream inaudible for one window). Speech starts once `start_ms` of consecutive
frames are `onset_margin_db` above the floor (and above `min_onset_dbfs`); it finishes after
`end_ms` of consecutive frames below the release level (`hysteresis_db` under the onset level),
or when it has lasted `max_speech_ms`. Everything is counted in samples, never in wall time,
so the same audio always gives the same transitions.

Limits: noise that starts abruptly (or opens the stream) counts as speech until it has filled
the floor window (3 s by default); a steady sound longer than that window is background.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass

import numpy as np

from parley.engine.audio import Samples

_SILENCE_DBFS = -100.0


@dataclass(frozen=True)
class VadParams:
    """Tuning of the detector; the defaults suit speech at normal levels from a headset or phone."""

    frame_ms: int = 10
    start_ms: int = 100
    end_ms: int = 600
    onset_margin_db: float = 12.0
    hysteresis_db: float = 6.0
    min_onset_dbfs: float = -50.0
    floor_window_ms: int = 3000
    max_speech_ms: int = 30_000
    initial_floor_dbfs: float | None = -60.0

    def __post_init__(self) -> None:
        if not 0 < self.frame_ms <= self.start_ms < self.max_speech_ms:
            raise ValueError("need 0 < frame_ms <= start_ms < max_speech_ms")
        if self.end_ms < self.frame_ms or self.floor_window_ms < self.frame_ms:
            raise ValueError("end_ms and floor_window_ms must be at least one frame")
        if not 0 <= self.hysteresis_db <= self.onset_margin_db:
            raise ValueError("need 0 <= hysteresis_db <= onset_margin_db")


class Transition(enum.Enum):
    STARTED = "started"
    FINISHED = "finished"


@dataclass(frozen=True)
class VadEvent:
    """A transition at a sample index of the stream: where speech began or where it last was."""

    kind: Transition
    sample: int


class EnergyVad:
    """Voice activity detector for one mono stream at a fixed sample rate (see module doc)."""

    def __init__(self, sample_rate: int, params: VadParams | None = None) -> None:
        self.params = params or VadParams()
        p = self.params
        self._frame = sample_rate * p.frame_ms // 1000
        if self._frame <= 0:
            raise ValueError("the frame holds no sample at this rate")
        self._start_frames = -(-p.start_ms // p.frame_ms)
        self._end_frames = -(-p.end_ms // p.frame_ms)
        self._max_frames = p.max_speech_ms // p.frame_ms
        self._window = p.floor_window_ms // p.frame_ms
        self._pending = np.zeros(0, dtype=np.float32)
        self._frames_seen = 0
        self._floor: deque[tuple[int, float]] = deque()  # (frame index, level), increasing levels
        if p.initial_floor_dbfs is not None:
            self._floor.append((-1, p.initial_floor_dbfs))
        self._speaking = False
        self._run = 0  # consecutive loud frames (silent) or quiet frames (speaking)
        self._speech_start = 0  # first frame of the current speech
        self._last_loud = 0  # last frame above the release level while speaking

    @property
    def speaking(self) -> bool:
        """True between a STARTED and its FINISHED."""
        return self._speaking

    @property
    def position(self) -> int:
        """Number of samples analysed so far (whole frames only)."""
        return self._frames_seen * self._frame

    def process(self, samples: Samples) -> list[VadEvent]:
        """Analyse the next samples of the stream and return the transitions they complete."""
        data = np.concatenate((self._pending, samples)) if self._pending.size else samples
        whole = data.size - data.size % self._frame
        self._pending = np.array(data[whole:], dtype=np.float32)
        if whole == 0:
            return []
        frames = np.asarray(data[:whole], dtype=np.float64).reshape(-1, self._frame)
        rms = np.sqrt(np.mean(frames * frames, axis=1))
        levels = 20.0 * np.log10(np.maximum(rms, 1e-5))
        events: list[VadEvent] = []
        for level in levels.tolist():
            event = self._step(max(level, _SILENCE_DBFS))
            if event is not None:
                events.append(event)
        return events

    def finish(self) -> VadEvent | None:
        """End the current speech now (mute, close); return its FINISHED, or None if silent."""
        if not self._speaking:
            return None
        self._speaking = False
        self._run = 0
        return VadEvent(Transition.FINISHED, (self._last_loud + 1) * self._frame)

    def _step(self, level: float) -> VadEvent | None:
        index = self._frames_seen
        self._frames_seen += 1
        floor = self._track_floor(index, level)
        onset = max(floor + self.params.onset_margin_db, self.params.min_onset_dbfs)
        if not self._speaking:
            self._run = self._run + 1 if level > onset else 0
            if self._run < self._start_frames:
                return None
            self._speaking = True
            self._speech_start = index - self._run + 1
            self._last_loud = index
            self._run = 0
            return VadEvent(Transition.STARTED, self._speech_start * self._frame)
        if level > onset - self.params.hysteresis_db:
            self._last_loud = index
            self._run = 0
        else:
            self._run += 1
        too_long = index - self._speech_start + 1 >= self._max_frames
        if self._run >= self._end_frames or too_long:
            return self.finish()
        return None

    def _track_floor(self, index: int, level: float) -> float:
        """Push a level into the sliding-window minimum and return the current floor."""
        while self._floor and self._floor[-1][1] >= level:
            self._floor.pop()
        self._floor.append((index, level))
        while self._floor[0][0] <= index - self._window:
            self._floor.popleft()
        return self._floor[0][1]


@dataclass(frozen=True)
class Utterance:
    """The audio of one user turn: samples (with a little padding) and the speech's duration."""

    samples: Samples
    sample_rate: int
    speech_seconds: float


class UtteranceCapture:
    """Keeps recent audio and cuts out each utterance the detector finds.

    Memory is bounded: while silent it keeps about `start_ms` + 2 x `pad_ms` of audio, while
    speaking at most `max_speech_ms` + `end_ms` + padding. Each utterance carries `pad_ms` of
    audio before and after the speech, as recognizers expect.
    """

    def __init__(self, sample_rate: int, params: VadParams | None = None, pad_ms: int = 150):
        self.vad = EnergyVad(sample_rate, params)
        self._rate = sample_rate
        self._pad = sample_rate * pad_ms // 1000
        self._keep = sample_rate * (self.vad.params.start_ms + 2 * pad_ms) // 1000
        self._chunks: deque[tuple[int, Samples]] = deque()  # (first sample index, samples)
        self._received = 0
        self._start = 0

    def process(self, samples: Samples) -> list[VadEvent | Utterance]:
        """Feed samples; return STARTED events and, for each finished speech, its Utterance."""
        self._chunks.append((self._received, samples))
        self._received += samples.size
        out: list[VadEvent | Utterance] = []
        for event in self.vad.process(samples):
            if event.kind is Transition.STARTED:
                self._start = event.sample
                out.append(event)
            else:
                out.append(self._cut(event.sample))
        if not self.vad.speaking:
            self._drop_before(self._received - self._keep)
        return out

    def finish(self) -> Utterance | None:
        """End the current speech now; return its Utterance, or None if silent."""
        event = self.vad.finish()
        return None if event is None else self._cut(event.sample)

    def _cut(self, end: int) -> Utterance:
        first = max(self._start - self._pad, 0)
        last = min(end + self._pad, self._received)
        parts = [chunk for _, chunk in self._chunks]
        origin = self._chunks[0][0] if self._chunks else 0
        audio = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
        clip = np.array(audio[max(first - origin, 0) : last - origin], dtype=np.float32)
        return Utterance(clip, self._rate, (end - self._start) / self._rate)

    def _drop_before(self, sample: int) -> None:
        while self._chunks and self._chunks[0][0] + self._chunks[0][1].size <= sample:
            self._chunks.popleft()
