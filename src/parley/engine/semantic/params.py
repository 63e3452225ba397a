"""The timing of the semantic end of turn; docs/engine.md explains the defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SemanticParams:
    """When to ask the end-of-turn model, how to read its answer, and how long to wait.

    The model is asked at each pause whether the thought is finished. A probability above
    `threshold` ends the turn once the silence has lasted `check_ms` (with `sure_ms` set:
    above `sure_threshold`, once it has lasted `sure_ms`); otherwise the turn ends after
    `max_silence_ms` of silence, unless speech resumes first.
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

    def __post_init__(self) -> None:
        if not 0 < self.check_ms < self.max_silence_ms:
            raise ValueError("need 0 < check_ms < max_silence_ms")
        if self.sure_ms is not None and not 0 < self.sure_ms <= self.check_ms:
            raise ValueError("need 0 < sure_ms <= check_ms")
        if not 0.0 < self.threshold <= self.sure_threshold < 1.0:
            raise ValueError("need 0 < threshold <= sure_threshold < 1")

    @property
    def checks_ms(self) -> tuple[int, ...]:
        """The silences at which the model's answer is heeded, shortest first."""
        return tuple(sorted({self.check_ms} | ({self.sure_ms} if self.sure_ms else set())))

    def wait_ms(self, probability: float) -> int | None:
        """The silence after which an answer of `probability` ends the turn (None: only
        `max_silence_ms` does)."""
        if self.sure_ms is not None and probability > self.sure_threshold:
            return self.sure_ms
        if probability > self.threshold:
            return self.check_ms
        return None
