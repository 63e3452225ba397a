"""A conversation's recording (API.md section 16): both directions on one timeline.

One stereo 16-bit WAV at the conversation's input rate: the user on the left channel, the
agent on the right. While the conversation runs, the recorder only keeps the wire's bytes
and where on the timeline they belong (a list append per frame: nothing is decoded, so
recording costs the turn nothing); `render` decodes, resamples and mixes them once, at the
end, in a worker thread.

The timeline is the session's clock. The user's frames follow one another (a client streams
in real time; a frame that arrives late is network jitter, not a pause); only a frame that
arrives more than `USER_GAP_SECONDS` after the stream's end so far starts after a gap (the
client stopped sending: muted, or a phone's stream paused), ending when it arrives. Where the
user's stream sits on the clock is the earliest any of its frames allows (each frame's arrival
less the stream's length up to it): a first frame held up on the way (a busy host, a burst
after the socket opened) would otherwise shift the whole user channel late. An agent chunk
starts when it is sent (the engine paces its audio at most `playback_lead_s` ahead of
playback) or right after the chunk before it, whichever is later, which is when the listener
hears it. A barge-in (`InterruptedResponse`) cuts what was sent but not yet played.

A test run's caller gets the agent's audio unpaced (engine `SessionConfig.paced`): a reply
arrives whole in a moment, and the caller's next frames come while it would still be
playing. Such a recording (`paced=False`) is laid out as a person would have had the call:
a user frame that would start before the end of the agent's audio placed so far starts at
that end instead, and the time skipped is added to the clock of everything after, so the
agent's reply is heard whole before the caller's next frames, and nothing overlaps.

With redaction (API.md section 16) the recording holds a 1 kHz tone where personal data was
said, and during the call that costs a list append too: the user's timed words (each
InputText's `words`, in input-stream time) are kept, and an agent piece keeps the sentence it
begins (`AudioChunk.text`). `render` redacts them (`parley.redaction`): on the user's
channel, the times of the words a tag replaced (`tone_spans`), widened by `TONE_MARGIN_S`
on each side (Whisper's word times are off by up to a few hundred ms) and brought onto the
timeline through the pieces placed (the input stream is the user's pieces end to end); on
the agent's channel, every piece of a sentence a tag replaced part of: synthesis gives no
word times, so the whole sentence is toned, more than needed but nothing less.
"""

from __future__ import annotations

import io
import math
import wave
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from parley import engine
from parley.engine import audio
from parley.redaction import join_words, redact, tone_out, tone_spans

CHANNELS = 2
USER_GAP_SECONDS = 0.5
"""A user frame arriving this much later than the stream so far ends a gap of silence."""
SAMPLE_WIDTH = 2
TONE_MARGIN_S = 0.25
"""How much before and after the times of redacted words the user's channel is toned too."""


@dataclass
class _Piece:
    """Wire bytes placed on the timeline at `start`, `length` samples long (both at the
    recording's rate); an agent piece that begins a sentence holds it (`text`)."""

    start: int
    data: bytes
    length: int
    text: str = ""


class Recorder:
    """Copies a conversation's audio, both ways, onto one timeline (see the module doc)."""

    def __init__(
        self,
        input_format: engine.AudioFormat,
        output_format: engine.AudioFormat,
        clock: Callable[[], float],
        *,
        redact: bool = False,
        paced: bool = True,
    ) -> None:
        """`redact`: tone out what redaction replaces; `paced` False: the agent's audio was
        sent unpaced (see the module doc)."""
        self._redact = redact
        self._paced = paced
        self._skipped = 0
        """Samples added to the clock: the agent's unpaced audio the caller waited out."""
        self._said: list[Sequence[engine.Word]] = []
        """The user's timed words, one utterance each (kept with `redact` only)."""
        self._sentence = ""
        """A sentence whose first chunk held no audio: its next piece begins it."""
        self._in = input_format
        self._out = output_format
        self._clock = clock
        self.sample_rate = input_format.sample_rate
        """The recording's rate: the conversation's input rate (8 kHz for calls)."""
        self._began: float | None = None
        self._user: list[_Piece] = []
        """Placed on the user's own stream: sample 0 is where it began, `_user_origin`."""
        self._user_origin = 0
        """Where the user's stream began on the timeline (the earliest its frames allow)."""
        self._agent: list[_Piece] = []
        self._user_end = 0
        self._agent_end = 0

    @property
    def empty(self) -> bool:
        """True when nothing was heard or said."""
        return not self._user and not self._agent

    def heard(self, data: bytes) -> None:
        """The user's frame (input format) arrived now."""
        length, data = _whole_samples(self._in, data)
        if length == 0:
            return
        first = not self._user
        now = self._now()
        if first:
            self._user_origin = now - length
        start = self._user_end
        if now - self._user_origin - length - start > USER_GAP_SECONDS * self.sample_rate:
            start = now - self._user_origin - length
        if not self._paced and (behind := self._agent_end - (start + self._user_origin)) > 0:
            start += behind  # after the agent's reply, as if it had been played
            self._skipped += behind
            now += behind
        self._user.append(_Piece(start, data, length))
        self._user_end = start + length
        self._user_origin = min(self._user_origin, now - self._user_end)

    def observe(self, event: engine.EngineEvent) -> None:
        """Place the agent's audio (`AudioChunk`) as it is sent; cut it at a barge-in; keep
        the user's timed words when redacting."""
        if isinstance(event, engine.AudioChunk):
            samples, data = _whole_samples(self._out, event.audio)
            text = event.text or self._sentence
            if samples == 0:
                self._sentence = text  # the sentence begins with the next audio
                return
            self._sentence = ""
            length = self._at_rate(samples)
            start = max(self._agent_end, self._now())
            self._agent.append(_Piece(start, data, length, text))
            self._agent_end = start + length
        elif isinstance(event, engine.InterruptedResponse):
            self._cut(self._now())
        elif isinstance(event, engine.InputText) and self._redact and event.words:
            self._said.append(event.words)

    def render(self) -> bytes:
        """The WAV file: decode, resample and mix (CPU work: call it in a worker thread)."""
        user = [
            _Piece(piece.start + self._user_origin, piece.data, piece.length)
            for piece in self._user
        ]
        starts = [pieces[0].start for pieces in (user, self._agent) if pieces]
        shift = -min(starts, default=0)  # the timeline starts with the first sound either way
        user = [_Piece(piece.start + shift, piece.data, piece.length) for piece in user]
        agent = [replace(piece, start=piece.start + shift) for piece in self._agent]
        total = max([piece.start + piece.length for piece in (user[-1:] + agent[-1:])], default=0)
        left = _channel(user, self._in, self.sample_rate, total)
        right = _channel(agent, self._out, self.sample_rate, total)
        if self._redact:
            rate = self.sample_rate
            left = _toned(left, rate, self._user_tones(user))
            right = _toned(right, rate, _agent_tones(agent, rate))
        frames = np.empty(total * CHANNELS, dtype="<i2")
        frames[0::2] = left
        frames[1::2] = right
        out = io.BytesIO()
        with wave.open(out, "wb") as file:
            file.setnchannels(CHANNELS)
            file.setsampwidth(SAMPLE_WIDTH)
            file.setframerate(self.sample_rate)
            file.writeframes(frames.tobytes())
        return out.getvalue()

    def _user_tones(self, user: list[_Piece]) -> list[tuple[float, float]]:
        """The times on the timeline (seconds) of what redaction replaced of the user's
        words: their input-stream times, widened, brought through the pieces placed."""
        rate = self.sample_rate
        intervals = []
        for words in self._said:
            spans = redact(join_words(words)).spans
            for start, end in tone_spans(words, spans):
                first = round(max(0.0, start - TONE_MARGIN_S) * rate)
                last = round((end + TONE_MARGIN_S) * rate)
                intervals.append((_placed(user, first) / rate, _placed(user, last) / rate))
        return intervals

    def _cut(self, at: int) -> None:
        """Drop the agent's audio after `at`: sent, never played."""
        while self._agent and self._agent[-1].start >= at:
            self._agent.pop()
        if self._agent and (last := self._agent[-1]).start + last.length > at:
            kept = round((at - last.start) * self._out.sample_rate / self.sample_rate)
            last.data = last.data[: kept * self._out.bytes_per_sample]
            last.length = at - last.start
        self._agent_end = min(self._agent_end, at)

    def _now(self) -> int:
        """Now in samples on the session's clock, counted from the recorder's first frame
        (`render` moves the start to the first sound)."""
        now = self._clock()
        if self._began is None:
            self._began = now
        return round((now - self._began) * self.sample_rate) + self._skipped

    def _at_rate(self, samples: int) -> int:
        return round(samples * self.sample_rate / self._out.sample_rate)


def _placed(pieces: list[_Piece], sample: int) -> int:
    """Where sample `sample` of the input stream (the pieces end to end) lies on the
    timeline; past the last piece, as far after its end."""
    passed = 0
    for piece in pieces:
        if sample < passed + piece.length:
            return piece.start + max(0, sample - passed)
        passed += piece.length
    last = pieces[-1] if pieces else _Piece(0, b"", 0)
    return last.start + last.length + sample - passed


def _agent_tones(pieces: list[_Piece], rate: int) -> list[tuple[float, float]]:
    """The times on the timeline (seconds) of the agent's sentences that redaction changes:
    a sentence's pieces run from the one that begins it to the next that begins one. The
    sentences are redacted as one text, as the items store them, so a number the sentence
    splitter cut in two is still found."""
    said = ""
    places: list[tuple[int, int]] = []  # each sentence's characters in `said`
    for piece in pieces:
        if piece.text:
            said += " " if said else ""
            places.append((len(said), len(said) + len(piece.text)))
            said += piece.text
    spans = redact(said).spans
    changed = iter([any(s < last and first < e for s, e, _ in spans) for first, last in places])
    intervals = []
    toning = False
    for piece in pieces:
        if piece.text:
            toning = next(changed)
        if toning:
            intervals.append((piece.start / rate, (piece.start + piece.length) / rate))
    return intervals


def _toned(
    channel: np.ndarray[tuple[int], np.dtype[np.int16]],
    rate: int,
    intervals: list[tuple[float, float]],
) -> np.ndarray[tuple[int], np.dtype[np.int16]]:
    """The channel with `intervals` (seconds) replaced by the tone (`tone_out`), each
    stretch decoded and toned alone: a long call's channel is not copied as floats."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    for start, end in merged:  # the samples `tone_out` covers: floor of start, ceil of end
        first = max(0, math.floor(start * rate))
        last = min(channel.size, math.ceil(end * rate))
        if last <= first:
            continue
        part = audio.pcm16_to_float(channel[first:last])
        toned = tone_out(part, rate, [(0.0, part.size / rate)])
        channel[first:last] = audio.float_to_pcm16(toned)
    return channel


def _whole_samples(fmt: engine.AudioFormat, data: bytes) -> tuple[int, bytes]:
    """The number of whole samples in `data`, and those bytes (a stray odd byte of 16-bit
    PCM is dropped: the recording must never fail the conversation)."""
    width = fmt.bytes_per_sample
    count = len(data) // width
    return count, data[: count * width]


def _channel(
    pieces: list[_Piece], fmt: engine.AudioFormat, rate: int, total: int
) -> np.ndarray[tuple[int], np.dtype[np.int16]]:
    """One channel: each piece decoded, brought to `rate` and placed at its start.
    Consecutive pieces are resampled together (no edge at each chunk)."""
    channel = np.zeros(total, dtype=np.int16)
    for start, samples in _runs(pieces, fmt):
        placed = audio.float_to_pcm16(audio.resample(samples, fmt.sample_rate, rate))
        end = min(total, start + placed.size)
        channel[start:end] = placed[: end - start]
    return channel


def _runs(
    pieces: list[_Piece], fmt: engine.AudioFormat
) -> list[tuple[int, np.ndarray[tuple[int], np.dtype[np.float32]]]]:
    """Pieces joined into runs that follow each other without a gap: (start, samples)."""
    runs: list[tuple[int, list[bytes]]] = []
    end = -1
    for piece in pieces:
        if piece.start != end or not runs:
            runs.append((piece.start, []))
        runs[-1][1].append(piece.data)
        end = piece.start + piece.length
    return [(start, audio.decode(fmt, b"".join(parts))) for start, parts in runs]
