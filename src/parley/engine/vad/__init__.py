"""Voice activity detection: Silero scores the windows, TurnDetector finds the turns."""

from parley.engine.vad.silero import RATES, SileroPool, SileroStream, shared_pool, vad_rate
from parley.engine.vad.turns import (
    Transition,
    TurnAudio,
    TurnDetector,
    VadEvent,
    VadParams,
    stream_time,
)

__all__ = [
    "RATES",
    "SileroPool",
    "SileroStream",
    "Transition",
    "TurnAudio",
    "TurnDetector",
    "VadEvent",
    "VadParams",
    "shared_pool",
    "stream_time",
    "vad_rate",
]
