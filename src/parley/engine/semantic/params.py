"""The timing of the semantic end of turn; docs/engine.md explains the defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SemanticParams:
    """When to ask the end-of-turn model, how to read its answer, and how long to wait.

    After `check_ms` of silence the model is asked whether the thought is finished: a
    probability above `threshold` ends the turn at once; otherwise the turn ends after
    `max_silence_ms` of silence, unless speech resumes first.
    """

    check_ms: int = 300
    """Longer than the gap after a complete clause inside a sentence (160-250 ms in the test
    voice: "My package arrived damaged | and I need a replacement"), which at 150 ms ended
    the turn at "damaged"; still short of silence alone (400 ms)."""
    max_silence_ms: int = 1_500
    threshold: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.check_ms < self.max_silence_ms:
            raise ValueError("need 0 < check_ms < max_silence_ms")
        if not 0.0 < self.threshold < 1.0:
            raise ValueError("need 0 < threshold < 1")
