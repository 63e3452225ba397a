"""Speech recognizers: faster-whisper (the default) and the placeholder (PARLEY_STT=none)."""

from parley.engine.recognizers.models import (
    DEFAULT_MODEL,
    MODEL_NAMES,
    WHISPER_LANGUAGES,
    default_model_dir,
    installed_model_dir,
    model_languages,
    resolve_model,
)
from parley.engine.recognizers.placeholder import PlaceholderRecognizer
from parley.engine.recognizers.queue import RecognitionQueue, Timed
from parley.engine.recognizers.whisper import (
    WhisperRecognizer,
    check_model_dir,
    load_whisper_model,
)

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_NAMES",
    "WHISPER_LANGUAGES",
    "PlaceholderRecognizer",
    "RecognitionQueue",
    "Timed",
    "WhisperRecognizer",
    "check_model_dir",
    "default_model_dir",
    "installed_model_dir",
    "load_whisper_model",
    "model_languages",
    "resolve_model",
]
