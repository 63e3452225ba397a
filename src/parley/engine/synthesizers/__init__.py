"""Speech synthesizers: hibari-tts (the product voice) and espeak-ng (the fallback)."""

from __future__ import annotations

import logging

from parley.engine.base import Synthesizer
from parley.engine.errors import SynthesizerUnavailable
from parley.engine.synthesizers.espeak import EspeakSynthesizer, parse_wav
from parley.engine.synthesizers.hibari import GENERIC_VOICES, HibariSynthesizer

__all__ = [
    "GENERIC_VOICES",
    "EspeakSynthesizer",
    "HibariSynthesizer",
    "load_synthesizer",
    "parse_wav",
]

logger = logging.getLogger(__name__)


def load_synthesizer() -> Synthesizer:
    """Return hibari-tts if it is installed, else espeak-ng; raise SynthesizerUnavailable."""
    try:
        return HibariSynthesizer()
    except SynthesizerUnavailable as hibari_missing:
        logger.warning("%s Falling back to espeak-ng.", hibari_missing.message)
    try:
        return EspeakSynthesizer()
    except SynthesizerUnavailable:
        raise SynthesizerUnavailable(
            "No speech synthesizer: install hibari-tts (or the espeak-ng program)."
        ) from None
