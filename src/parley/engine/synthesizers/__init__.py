"""Speech synthesizers: hibari-tts (the product voice), espeak-ng (the fallback, and the voices
of the languages other than English), and the two together (`WithLanguageVoices`)."""

from __future__ import annotations

import logging

from parley.engine.base import Synthesizer
from parley.engine.errors import SynthesizerUnavailable
from parley.engine.synthesizers.espeak import EspeakSynthesizer, parse_wav
from parley.engine.synthesizers.hibari import GENERIC_VOICES, HibariSynthesizer
from parley.engine.synthesizers.multilingual import WithLanguageVoices

__all__ = [
    "GENERIC_VOICES",
    "EspeakSynthesizer",
    "HibariSynthesizer",
    "WithLanguageVoices",
    "load_synthesizer",
    "parse_wav",
]

logger = logging.getLogger(__name__)


def load_synthesizer() -> Synthesizer:
    """Return hibari-tts if it is installed (with espeak-ng's voices of other languages when
    espeak-ng is installed too), else espeak-ng; raise SynthesizerUnavailable."""
    try:
        hibari = HibariSynthesizer()
    except SynthesizerUnavailable as hibari_missing:
        logger.warning("%s Falling back to espeak-ng.", hibari_missing.message)
    else:
        try:
            others = EspeakSynthesizer(sample_rate=hibari.sample_rate)
        except SynthesizerUnavailable:
            logger.info("espeak-ng is not installed: every voice speaks English.")
            return hibari
        return WithLanguageVoices(hibari, others)
    try:
        return EspeakSynthesizer()
    except SynthesizerUnavailable:
        raise SynthesizerUnavailable(
            "No speech synthesizer: install hibari-tts (or the espeak-ng program)."
        ) from None
