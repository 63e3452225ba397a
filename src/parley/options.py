"""From the operator's Settings to the engine's options (`parley serve`, the app).

The services' options are in parley/composition/options.py, where this function moves next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parley.config import Settings

if TYPE_CHECKING:
    from parley.engine import EngineOptions


def engine_options(settings: Settings) -> EngineOptions:
    """Choose the engine's plug-ins and tuning from the configuration."""
    # The engine (numpy, soxr, Silero) loads only for serving, not for operator commands.
    from parley.engine import (
        EngineOptions,
        EngineSettings,
        LlmOptions,
        VadParams,
        installed_turn_model,
    )

    llm = None
    if settings.llm_base_url is not None and settings.llm_model is not None:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else ""
        llm = LlmOptions(
            base_url=settings.llm_base_url,
            model=settings.llm_model,
            api_key=key,
            timeout_s=settings.llm_timeout_seconds,
        )
    vad = VadParams(
        end_silence_ms=settings.vad_end_silence_ms, min_speech_ms=settings.vad_min_speech_ms
    )
    turn_model = settings.turn_model or installed_turn_model()
    turn_detection = settings.turn_detection or ("semantic" if turn_model.is_file() else "vad")
    return EngineOptions(
        stt=settings.stt,
        stt_model=settings.stt_model,
        stt_threads=settings.stt_threads,
        llm=llm,
        turn_detection=turn_detection,
        turn_model=turn_model,
        tuning=EngineSettings(vad=vad),
    )
