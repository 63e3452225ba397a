"""An agent's tuning of the engine (API.md section 17, its delivery members; docs/engine.md):
how the welcome is made and whether speech cuts it, the voice's pace, the words said
otherwise, the local time told to the model, and the silence and loudness of a turn.

Pure functions of the tuning; `DefaultEngine` and its `Speaker` apply them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

from parley.engine.base import AgentTuning
from parley.engine.semantic import SemanticParams
from parley.engine.vad import VadParams

WELCOME_INSTRUCTION = (
    "The conversation begins now. Greet the user and open the conversation in one or two "
    "short sentences, as your instructions describe."
)
"""The system message of a generated welcome: the model's first reply answers no user."""

RELEASE_SHARE = 0.7
"""A turn goes on above this share of the agent's `vad_threshold` (the default 0.35 / 0.5)."""
CHECK_MARGIN_MS = 64
"""An end-of-turn silence within this of the model's check (two VAD windows) leaves the
model unasked: the silence alone ends the turn first."""


def local_time(unix_time: float, zone: str) -> str:
    """The line that tells the model the local time, e.g. "The local time is Monday,
    7 December 2026, 11:20 (Europe/Berlin)."."""
    moment = datetime.fromtimestamp(unix_time, tz=ZoneInfo(zone))
    return f"The local time is {moment:%A}, {moment.day} {moment:%B %Y}, {moment:%H:%M} ({zone})."


def with_local_time(system_prompt: str, unix_time: float, zone: str | None) -> str:
    """`system_prompt`, then the local time in `zone` on a line of its own (None: as it is)."""
    if zone is None:
        return system_prompt
    told = local_time(unix_time, zone)
    return f"{system_prompt}\n\n{told}" if system_prompt else told


class Pronouncer:
    """Replaces each listed word, whole and in any case, by its pronunciation."""

    def __init__(self, entries: Sequence[tuple[str, str]]) -> None:
        self._said = {word.casefold(): said for word, said in entries if word.strip()}
        words = sorted(self._said, key=len, reverse=True)  # the longest first: "New York"
        alternatives = "|".join(re.escape(word) for word in words)
        self._pattern = (
            re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE) if words else None
        )

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda found: self._said[found.group(0).casefold()], text)


def listening(
    vad: VadParams, semantic: SemanticParams, tuning: AgentTuning
) -> tuple[VadParams, SemanticParams | None]:
    """The VAD settings of the conversation, and the end-of-turn model's (None: the silence
    alone ends a turn, the model is not asked).

    `vad_threshold` replaces the onset threshold (the turn goes on above RELEASE_SHARE of
    it); `end_silence_ms` is the silence that ends a turn, in either mode: the model's longest
    wait, or, when it is no longer than the model's check, the silence alone.
    """
    if tuning.vad_threshold is not None:
        threshold = tuning.vad_threshold
        release = round(threshold * RELEASE_SHARE, 3)
        vad = dataclasses.replace(vad, threshold=threshold, release_threshold=release)
    silence = tuning.end_silence_ms
    if silence is None:
        return vad, semantic
    vad = dataclasses.replace(vad, end_silence_ms=silence, pause_ms=min(vad.pause_ms, silence))
    if silence <= semantic.check_ms + CHECK_MARGIN_MS:
        return vad, None
    return vad, dataclasses.replace(semantic, max_silence_ms=silence)
