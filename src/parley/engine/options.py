"""EngineOptions: the one value, built by the composition root, that chooses the plug-ins."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from parley.engine.default import EngineSettings


@dataclass(frozen=True)
class LlmOptions:
    """An OpenAI-compatible chat-completions server (PARLEY_LLM_*)."""

    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    timeout_s: float = 10.0
    max_history: int = 40


@dataclass(frozen=True)
class EngineOptions:
    """Which recognizer, replier and synthesizer to run, and how to tune the engine.

    `stt` is "whisper" (faster-whisper; `stt_model` a model name, tiny.en, base or small, or
    a CTranslate2 Whisper directory; None: tiny.en; `stt_beam_size` the beams of a final
    decode, 1 greedy) or "none" (placeholder transcripts).
    `llm` None means the offline rule-based replier. `turn_detection` "semantic" asks the
    end-of-turn model (installed by scripts/install) whether a pause ends the user's thought;
    "vad" ends a turn on silence.
    """

    stt: Literal["whisper", "none"] = "whisper"
    stt_model: str | Path | None = None
    stt_threads: int = 2
    stt_beam_size: int = 1
    stt_max_pending: int = 32
    llm: LlmOptions | None = None
    turn_detection: Literal["vad", "semantic"] = "vad"
    turn_model: Path | None = None  # None: the model scripts/install installed
    tuning: EngineSettings = field(default_factory=EngineSettings)
