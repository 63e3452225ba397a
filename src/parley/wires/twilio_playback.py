"""What a Twilio carrier has played of the audio sent to it, as its marks tell (API.md 13).

The carrier plays the `media` it gets in order, in real time, and echoes each `mark` once the
audio sent before it has played; on `clear` it drops what it has not played and echoes the
marks still waiting at once. So:

- a mark goes after every piece of audio (each engine chunk, 100 ms) and after each reply;
  its name carries nothing the carrier could forge: the position is kept here, by name;
- the position played is that of the last mark echoed, plus the time since its echo (the
  carrier goes on playing what it holds), never past the next mark still waiting: so it is
  known to the nearest 20 ms frame;
- marks echoed for cleared audio do not count: a `clear` freezes the position played, and
  the marks then in flight are forgotten;
- an interrupted reply was heard up to that position: the sentences played through, and of
  the sentence playing, the share of its words its played frames cover (cut at a word); for
  a sentence not yet sent in full (its length unknown), the engine's share of it, scaled by
  the time really played over the time the engine counted since it was sent.

Positions are in bytes of mu-law 8 kHz audio (one byte a sample, 160 a 20 ms frame).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parley.clock import Clock

BYTES_PER_SECOND = 8000
MAX_FORGOTTEN_MARKS = 1024
"""Cleared marks remembered (to ignore their echoes); the carrier echoes them at once."""


@dataclass
class _Reply:
    sentences: list[tuple[str, int]] = field(default_factory=list)
    """Each sentence and the position of its first byte."""
    last_sentence_at: float = 0.0
    """When the last sentence's first audio was sent (monotonic)."""
    end: int | None = None
    """The position after its last byte, once all of it was sent."""
    played_at_clear: int | None = None
    cleared_at: float | None = None


class Playback:
    """The carrier's playback of one stream (see the module doc)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._sent = 0
        self._in_flight: dict[str, int] = {}  # insertion order is the order sent
        self._forgotten: set[str] = set()
        self._anchor = (0, clock.monotonic())  # (a position known played, when)
        self._marks = 0
        self._reply = _Reply()

    @property
    def pending(self) -> bool:
        """True while audio sent is not yet acknowledged as played."""
        return bool(self._in_flight)

    @property
    def sent(self) -> int:
        return self._sent

    def audio_sent(self, size: int) -> None:
        """Record `size` bytes of audio sent."""
        if not self._in_flight:  # the carrier has played everything: playback starts now
            self._anchor = (self._sent, self._clock.monotonic())
        self._sent += size

    def new_mark(self, kind: str) -> str:
        """Return the name of a mark sent after the audio sent so far."""
        self._marks += 1
        name = f"{kind}-{self._marks}"
        self._in_flight[name] = self._sent
        return name

    def acknowledge(self, name: str) -> bool:
        """Take a mark the carrier echoed; False for one of cleared audio, or unknown."""
        if name in self._forgotten:
            self._forgotten.discard(name)
            return False
        position = self._in_flight.get(name)
        if position is None:
            return False
        for earlier in list(self._in_flight):  # echoes come in order: earlier ones played too
            del self._in_flight[earlier]
            if earlier == name:
                break
        self._anchor = (position, self._clock.monotonic())
        return True

    def played(self) -> int:
        """The position played by now (to the nearest 20 ms frame)."""
        known, since = self._anchor
        elapsed = int((self._clock.monotonic() - since) * BYTES_PER_SECOND)
        cap = next(iter(self._in_flight.values()), self._sent)
        return max(known, min(known + elapsed, cap))

    def clear(self) -> None:
        """The carrier was told to drop what it holds: freeze what the reply had played."""
        if self._reply.played_at_clear is None:
            self._reply.played_at_clear = self.played()
            self._reply.cleared_at = self._clock.monotonic()
        if len(self._forgotten) > MAX_FORGOTTEN_MARKS:
            self._forgotten.clear()
        self._forgotten.update(self._in_flight)
        self._in_flight.clear()

    # --- the reply being spoken ----------------------------------------------------------

    def start_reply(self) -> None:
        self._reply = _Reply()

    def sentence(self, text: str, at: int) -> None:
        """A sentence begins at position `at` of the stream."""
        self._reply.sentences.append((text, at))
        self._reply.last_sentence_at = self._clock.monotonic()

    def end_reply(self) -> None:
        self._reply.end = self._sent

    def heard(self, said: str) -> str:
        """What was played of the current reply, as a word prefix of `said` (the engine's
        view, never exceeded); see the module doc."""
        reply = self._reply
        played = reply.played_at_clear if reply.played_at_clear is not None else self.played()
        said_words = said.split()
        count = 0
        sentences = reply.sentences
        for index, (text, start) in enumerate(sentences):
            words = text.split()
            end = sentences[index + 1][1] if index + 1 < len(sentences) else reply.end
            if end is not None and end <= played:
                count += len(words)
                continue
            if played <= start:
                break
            if end is not None:
                count += len(words) * (played - start) // (end - start)
            else:  # still being sent: its length is unknown, so scale the engine's share of
                # it (by its clock, since the sentence was sent) to the time really played
                count += self._open_share(len(said_words) - count, played - start)
            break
        return " ".join(said_words[:count])

    def _open_share(self, engine_words: int, played: int) -> int:
        reply = self._reply
        now = reply.cleared_at if reply.cleared_at is not None else self._clock.monotonic()
        engine_seconds = now - reply.last_sentence_at
        if engine_words <= 0 or engine_seconds <= 0:
            return max(engine_words, 0)
        share = min(1.0, played / BYTES_PER_SECOND / engine_seconds)
        return int(engine_words * share + 1e-6)  # 0.2 / 0.2 s may come out as 0.999…
