"""The timing of the semantic end of turn; docs/engine.md explains the defaults."""

from __future__ import annotations

from dataclasses import dataclass

from parley.engine.semantic.words import holds_the_turn


@dataclass(frozen=True)
class SemanticParams:
    """When to ask the end-of-turn model, how to read its answer with the words so far, and
    how long to wait.

    The model is asked at each pause whether the thought is finished; the speculative
    decode's words are the second signal (`words.holds_the_turn`). Words that hold the turn
    ("a table for") wait `max_silence_ms`, whatever the model says. Otherwise a probability
    above `threshold` ends the turn once the silence has lasted `check_ms` (with `sure_ms`
    set: above `sure_threshold`, once it has lasted `sure_ms`); a lower one after
    `words_ms`, when words were heard, else after `max_silence_ms`; speech resuming first
    goes on with the turn.
    """

    check_ms: int = 300
    """Longer than the gap after a complete clause inside a sentence (160-250 ms in the test
    voice: "My package arrived damaged | and I need a replacement"), which at 150 ms ended
    the turn at "damaged"; still short of silence alone (400 ms)."""
    max_silence_ms: int = 1_500
    threshold: float = 0.5
    sure_ms: int | None = None
    """Off by default. When set, a thought the model is all but sure is finished (above
    `sure_threshold`) ends the turn after this shorter silence. Measured (docs/performance.md,
    session 18): 200 ms got one conversation's first audio 45 ms sooner on the test voice,
    but on the phone band (8 kHz) the model gives 0.96-0.98 after the complete clause in
    "My package arrived damaged | and I need a replacement", whose gap is 256 ms, so the
    turn ended there whenever its answer came before the speech resumed."""
    sure_threshold: float = 0.95
    words_ms: int | None = 900
    """The wait when the model judges the thought unfinished but the words do not hold it:
    the model misjudges complete sentences of voices other than the tests' (docs/decisions.md).
    Longer than a 500 ms hesitation; None, or not shorter than `max_silence_ms`: no such wait."""

    def __post_init__(self) -> None:
        if not 0 < self.check_ms < self.max_silence_ms:
            raise ValueError("need 0 < check_ms < max_silence_ms")
        if self.sure_ms is not None and not 0 < self.sure_ms <= self.check_ms:
            raise ValueError("need 0 < sure_ms <= check_ms")
        if not 0.0 < self.threshold <= self.sure_threshold < 1.0:
            raise ValueError("need 0 < threshold <= sure_threshold < 1")
        if self.words_ms is not None and not self.check_ms < self.words_ms:
            raise ValueError("need check_ms < words_ms")

    @property
    def checks_ms(self) -> tuple[int, ...]:
        """The silences at which the answer is heeded, shortest first."""
        waits = {self.check_ms, self.sure_ms, self._words_ms}
        return tuple(sorted(wait for wait in waits if wait is not None))

    @property
    def _words_ms(self) -> int | None:
        """`words_ms` when it is shorter than the longest wait (an agent may shorten that)."""
        words_ms = self.words_ms
        return words_ms if words_ms is not None and words_ms < self.max_silence_ms else None

    def wait_ms(self, probability: float, words: str | None = None) -> int | None:
        """The silence after which the model's `probability` and the `words` so far (None:
        not decoded) end the turn (None: only `max_silence_ms` does)."""
        if words is not None and holds_the_turn(words):
            return None
        if self.sure_ms is not None and probability > self.sure_threshold:
            return self.sure_ms
        if probability > self.threshold:
            return self.check_ms
        return self._words_ms if words and words.strip() else None
